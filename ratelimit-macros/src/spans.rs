//! Spans for rustc's messages: where a generated token is reported, so that an error about
//! the user's code points at the user's tokens.

use proc_macro2::{Group, Span, TokenStream, TokenTree};

/// The spans of the first and last tokens of `tokens` (call site when empty).
pub(crate) fn first_and_last_spans(tokens: TokenStream) -> [Span; 2] {
    let mut trees = tokens.into_iter();
    let first = trees
        .next()
        .map_or_else(Span::call_site, |tree| tree.span());
    let last = trees.last().map_or(first, |tree| tree.span());
    [first, last]
}

/// `tokens` with every span set to `span`, so that rustc reports an error about them there.
pub(crate) fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    map_spans(tokens, &|_| span)
}

/// `tokens` located at `span`, each keeping its own hygiene (what its names resolve to: a
/// local of the expansion stays the expansion's), so that rustc reports them there.
pub(crate) fn relocate(tokens: TokenStream, span: Span) -> TokenStream {
    map_spans(tokens, &|own: Span| own.located_at(span))
}

/// `tokens` with each span replaced by `new` of it, at any depth.
fn map_spans(tokens: TokenStream, new: &dyn Fn(Span) -> Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tree| {
            let span = new(tree.span());
            if let TokenTree::Group(group) = &tree {
                let mut mapped = Group::new(group.delimiter(), map_spans(group.stream(), new));
                mapped.set_span(span);
                tree = TokenTree::Group(mapped);
            } else {
                tree.set_span(span);
            }
            tree
        })
        .collect()
}
