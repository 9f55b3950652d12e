//! The names a rejected attribute's arguments use, kept used. The function is emitted as
//! written beside the error, without the guard the arguments went into, so an import that only
//! they used (`use std::time::Duration;` for `rate = Rate::new(5, Duration::from_secs(1))?`,
//! `use crate::limits::LOGIN;` for `limiter = &LOGIN`) would draw rustc's "unused import"
//! beside the error, and its advice to remove the import would be wrong. Each such name gets
//! an underscore import at the start of the function's body, which uses the outer import and
//! binds nothing.
//!
//! Only names that cannot be a local variable or a generic parameter are taken (an underscore
//! import of one would be an error of its own): the first segment of a path (`Duration` in
//! `Duration::from_secs`), but not `self`, `Self`, `super`, `crate` or a one-letter name
//! (`T::default()`, most likely a generic parameter), and a name in upper case (`LOGIN`: a
//! `static` or a `const`). A function imported and called by its name alone stays unused.

use proc_macro2::{Delimiter, Group, Ident, TokenStream, TokenTree};
use quote::quote_spanned;

/// `item`, a function as written, with an underscore import of each name the attributes
/// `args` (tokens of one attribute's arguments, or of whole `#[...]` attributes) use at the
/// start of its body (its last `{ ... }`); `item` unchanged when they use none, or it has no
/// body.
pub(crate) fn keep_used(item: TokenStream, args: &[TokenStream]) -> TokenStream {
    let mut names: Vec<Ident> = Vec::new();
    for stream in args {
        collect(stream.clone(), &mut names);
    }
    if names.is_empty() {
        return item;
    }
    let mut tokens: Vec<TokenTree> = item.into_iter().collect();
    let Some(body) = tokens.iter_mut().rev().find_map(|token| match token {
        TokenTree::Group(group) if group.delimiter() == Delimiter::Brace => Some(group),
        _ => None,
    }) else {
        return tokens.into_iter().collect();
    };
    let mut inner = TokenStream::new();
    for name in &names {
        inner.extend(quote_spanned! {name.span()=>
            #[allow(unused_imports)]
            use #name as _;
        });
    }
    inner.extend(body.stream());
    let mut kept = Group::new(Delimiter::Brace, inner);
    kept.set_span(body.span());
    *body = kept;
    tokens.into_iter().collect()
}

/// The `#[...]` attributes of `item` (a function as written) that name `rate_limit`: their
/// tokens, for [`keep_used`].
pub(crate) fn rate_limit_attributes(item: &TokenStream) -> Vec<TokenStream> {
    let tokens: Vec<TokenTree> = item.clone().into_iter().collect();
    tokens
        .windows(2)
        .filter_map(|pair| match pair {
            [TokenTree::Punct(hash), TokenTree::Group(group)]
                if hash.as_char() == '#'
                    && group.delimiter() == Delimiter::Bracket
                    && names_rate_limit(&group.stream()) =>
            {
                Some(group.stream())
            }
            _ => None,
        })
        .collect()
}

fn names_rate_limit(attribute: &TokenStream) -> bool {
    attribute
        .clone()
        .into_iter()
        .take_while(|token| !matches!(token, TokenTree::Group(_)))
        .any(|token| matches!(token, TokenTree::Ident(ident) if ident == "rate_limit"))
}

/// Adds to `names` (once each) the names of `stream` to keep used, looking into its groups.
fn collect(stream: TokenStream, names: &mut Vec<Ident>) {
    let tokens: Vec<TokenTree> = stream.into_iter().collect();
    for (i, token) in tokens.iter().enumerate() {
        match token {
            // A macro's arguments are its own (`format!("{X}")`): not looked into.
            TokenTree::Group(_)
                if i.checked_sub(1)
                    .is_some_and(|before| is_bang(&tokens[before])) => {}
            TokenTree::Group(group) => collect(group.stream(), names),
            TokenTree::Ident(ident) => {
                let after_path_or_field = i
                    .checked_sub(1)
                    .is_some_and(|before| is_separator(&tokens, before) || is_dot(&tokens[before]));
                if after_path_or_field || is_macro(&tokens, i) {
                    continue;
                }
                let name = ident.to_string();
                // `$crate`, from a `macro_rules!` that wrote the attribute: no name to keep.
                if name.starts_with('$') {
                    continue;
                }
                let keep = if is_separator(&tokens, i + 1) {
                    !matches!(name.as_str(), "self" | "Self" | "super" | "crate")
                        && !is_one_letter(&name)
                } else {
                    is_upper_case(&name)
                };
                if keep && !names.iter().any(|kept| *kept == name) {
                    // Cloned, not made anew: a raw identifier (`r#type`) stays one.
                    names.push(ident.clone());
                }
            }
            TokenTree::Punct(_) | TokenTree::Literal(_) => {}
        }
    }
}

/// Whether `tokens[i]` begins a `::`, or ends one.
fn is_separator(tokens: &[TokenTree], i: usize) -> bool {
    let colon = |j: usize| matches!(tokens.get(j), Some(TokenTree::Punct(p)) if p.as_char() == ':');
    colon(i) && (colon(i + 1) || i.checked_sub(1).is_some_and(colon))
}

fn is_dot(token: &TokenTree) -> bool {
    matches!(token, TokenTree::Punct(p) if p.as_char() == '.')
}

fn is_macro(tokens: &[TokenTree], i: usize) -> bool {
    tokens.get(i + 1).is_some_and(is_bang)
}

fn is_bang(token: &TokenTree) -> bool {
    matches!(token, TokenTree::Punct(p) if p.as_char() == '!')
}

/// `T`, `U2`: most likely a generic parameter.
fn is_one_letter(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase()) && chars.all(|c| c.is_ascii_digit())
}

/// `LOGIN`, `API_V2`: a `static` or a `const` by Rust's naming conventions (at least two
/// characters, so that a generic parameter is not taken for one).
fn is_upper_case(name: &str) -> bool {
    name.len() >= 2
        && name.chars().any(|c| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && !is_one_letter(name)
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    fn kept(args: TokenStream) -> String {
        let item = keep_used(
            quote!(
                async fn f() -> R {
                    body()
                }
            ),
            &[args],
        );
        item.to_string()
    }

    #[test]
    fn keeps_the_first_segments_of_paths_and_upper_case_names() {
        let output = kept(quote!(
            rate = Rate::new(5, Duration::from_secs(1)).unwrap(),
            limiter = &LOGIN,
            key = user.id
        ));
        // In the order of the arguments (a string: rustfmt would sort the imports of a
        // `quote!`).
        let expected = "async fn f () -> R { \
            # [allow (unused_imports)] use Rate as _ ; \
            # [allow (unused_imports)] use Duration as _ ; \
            # [allow (unused_imports)] use LOGIN as _ ; \
            body () }";
        assert_eq!(output, expected);
    }

    #[test]
    fn keeps_raw_identifiers_raw() {
        assert_eq!(
            kept(quote!(rate = r#type::rate())),
            "async fn f () -> R { # [allow (unused_imports)] use r#type as _ ; body () }"
        );
    }

    #[test]
    fn leaves_locals_generics_keywords_fields_and_macros() {
        let args = quote!(
            key = format!("{}", user.ID, X::Y),
            label = $crate::LABEL,
            rate = T::rate(),
            cost = Self::COST + self::X::y() + crate::z() + ::std::u32::MAX,
            count_if = |r| r.is_ok(),
            decision = d
        );
        let output = kept(args);
        assert_eq!(
            output,
            quote!(
                async fn f() -> R {
                    body()
                }
            )
            .to_string()
        );
    }
}
