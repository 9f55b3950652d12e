//! The item under `#[rate_limit]`: an `async fn` (free, or a method), its signature parsed and
//! its body kept as raw tokens (it is re-emitted as written, never re-parsed or reprinted).

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::parse::{ParseStream, Parser};
use syn::{
    Attribute, GenericArgument, PathArguments, ReturnType, Signature, Token, Type, TypeParamBound,
    Visibility,
};

/// An `async fn` that `#[rate_limit]` can wrap.
pub(crate) struct AsyncFn {
    pub(crate) attrs: Vec<Attribute>,
    pub(crate) vis: Visibility,
    /// `default` of a specializing impl (unstable, but kept as written).
    pub(crate) defaultness: Option<Token![default]>,
    pub(crate) sig: Signature,
    /// The body, `{ ... }`, as written.
    pub(crate) body: Group,
    /// The first and last tokens of the return type, where errors about it are reported (the
    /// function's name when it has none). Under `#[async_trait]`, of the future's `Output`.
    pub(crate) output_span: [Span; 2],
    /// How the function makes its future.
    pub(crate) flavor: Flavor,
}

/// How the function under `#[rate_limit]` makes its future.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Flavor {
    /// An `async fn`: the guard goes first in its body.
    Async,
    /// A method of an `#[async_trait]` impl or trait. `#[async_trait]`, on the block, expands
    /// before the attributes of its methods, so `#[rate_limit]` receives the method rewritten
    /// into a plain `fn` with a `'async_trait` lifetime, returning
    /// `Pin<Box<dyn Future<Output = R> + Send + 'async_trait>>`, whose body is one
    /// `Box::pin(async move { .. })` expression: the guard wraps the future that body makes.
    AsyncTrait,
}

/// An item `#[rate_limit]` does not apply to.
pub(crate) struct Rejected {
    /// Why, at the offending token.
    pub(crate) error: syn::Error,
    /// What to emit instead of the item as written, when that would add an error of rustc's
    /// for the same mistake.
    pub(crate) item: Option<TokenStream>,
}

/// Parses and checks the item.
///
/// # Errors
///
/// One error per mistake: not a function (at the item), not `async` (at `fn`), `const` (at
/// `const`), no body, no return type.
pub(crate) fn parse(item: TokenStream) -> Result<AsyncFn, Rejected> {
    Parser::parse2(parse_item, item)
        .map_err(|error| Rejected { error, item: None })?
        .map_err(|(error, function)| Rejected {
            error,
            item: Some(function.into_token_stream()),
        })
}

/// The function, or the error with the function to emit in its place.
type Checked = Result<AsyncFn, (syn::Error, AsyncFn)>;

fn parse_item(input: ParseStream) -> syn::Result<Checked> {
    let attrs = input.call(Attribute::parse_outer)?;
    let vis: Visibility = input.parse()?;
    let defaultness: Option<Token![default]> = input.parse()?;
    if !is_signature_ahead(input) {
        return Err(not_a_function(input));
    }
    let mut sig: Signature = input.parse()?;
    let constness = sig.constness.take();
    let async_trait_output = async_trait_output(&sig).cloned();
    let flavor = if async_trait_output.is_some() {
        Flavor::AsyncTrait
    } else {
        Flavor::Async
    };
    if sig.asyncness.is_none() && async_trait_output.is_none() {
        return Err(match constness {
            Some(constness) => syn::Error::new(
                constness.span,
                "`#[rate_limit]` only applies to `async fn`, not to `const fn`",
            ),
            None => syn::Error::new(
                sig.fn_token.span,
                "`#[rate_limit]` only applies to `async fn`",
            ),
        });
    }
    let body = match input.parse::<TokenTree>()? {
        TokenTree::Group(group) if group.delimiter() == Delimiter::Brace => group,
        other => {
            return Err(syn::Error::new_spanned(
                other,
                "`#[rate_limit]` needs a function body",
            ));
        }
    };
    if !input.is_empty() {
        return Err(input.error("unexpected tokens after the function body"));
    }
    // `#[async_trait]` writes `Output = ()` for a method without a return type.
    let output = match (&async_trait_output, &sig.output) {
        (Some(Type::Tuple(unit)), _) if unit.elems.is_empty() => None,
        (Some(output), _) => Some(output),
        (None, ReturnType::Type(_, ty)) => Some(&**ty),
        (None, ReturnType::Default) => None,
    };
    let output_span = output.map_or([sig.ident.span(); 2], |ty| {
        crate::spans::first_and_last_spans(ty.to_token_stream())
    });
    let no_output = output.is_none();
    let function = AsyncFn {
        attrs,
        vis,
        defaultness,
        sig,
        body,
        output_span,
        flavor,
    };
    if let Some(constness) = constness {
        // Emitted without `const`, so that rustc does not add "functions cannot be both
        // `const` and `async`" for the same mistake.
        let error = syn::Error::new(
            constness.span,
            "`#[rate_limit]` only applies to `async fn`, not to `const fn`",
        );
        return Ok(Err((error, function)));
    }
    if no_output {
        let error = syn::Error::new(
            function.sig.ident.span(),
            "`#[rate_limit]` needs the function to return `Result<T, E>` with \
             `E: From<RateLimitError>`",
        );
        return Ok(Err((error, function)));
    }
    Ok(Ok(function))
}

impl ToTokens for AsyncFn {
    /// The function as written (without `const` if that was taken off).
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let AsyncFn {
            attrs,
            vis,
            defaultness,
            sig,
            body,
            output_span: _,
            flavor: _,
        } = self;
        tokens.extend(quote::quote! { #(#attrs)* #vis #defaultness #sig #body });
    }
}

/// The `R` of a method that `#[async_trait]` rewrote: a `fn` with a `'async_trait` lifetime
/// returning `Pin<Box<dyn Future<Output = R> + ..>>` (whatever the paths' prefixes).
fn async_trait_output(sig: &Signature) -> Option<&Type> {
    if sig.asyncness.is_some()
        || !sig
            .generics
            .lifetimes()
            .any(|param| param.lifetime.ident == "async_trait")
    {
        return None;
    }
    let ReturnType::Type(_, pin) = &sig.output else {
        return None;
    };
    let Type::TraitObject(object) = only_type_argument(only_type_argument(pin, "Pin")?, "Box")?
    else {
        return None;
    };
    object.bounds.iter().find_map(|bound| {
        let TypeParamBound::Trait(bound) = bound else {
            return None;
        };
        let future = bound.path.segments.last()?;
        let PathArguments::AngleBracketed(args) = &future.arguments else {
            return None;
        };
        if future.ident != "Future" {
            return None;
        }
        args.args.iter().find_map(|arg| match arg {
            GenericArgument::AssocType(assoc) if assoc.ident == "Output" => Some(&assoc.ty),
            _ => None,
        })
    })
}

/// `T` of `..::name<T>`.
fn only_type_argument<'a>(ty: &'a Type, name: &str) -> Option<&'a Type> {
    let Type::Path(path) = ty else {
        return None;
    };
    let last = path.path.segments.last()?;
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match (last.ident == name, args.args.first(), args.args.len()) {
        (true, Some(GenericArgument::Type(inner)), 1) => Some(inner),
        _ => None,
    }
}

/// `const`? `async`? `unsafe`? `extern "abi"`? `fn`.
fn is_signature_ahead(input: ParseStream) -> bool {
    let fork = input.fork();
    fork.parse::<Option<Token![const]>>().is_ok()
        && fork.parse::<Option<Token![async]>>().is_ok()
        && fork.parse::<Option<Token![unsafe]>>().is_ok()
        && fork.parse::<Option<syn::Abi>>().is_ok()
        && fork.peek(Token![fn])
}

/// The error for an item that is not a function, spanned at its keyword and name (such as
/// `struct Point`), or at whatever comes first.
fn not_a_function(input: ParseStream) -> syn::Error {
    let head: TokenStream = input
        .step(|cursor| {
            let mut rest = *cursor;
            let mut head = TokenStream::new();
            while let Some((tree, next)) = rest.token_tree() {
                let is_name = matches!(&tree, TokenTree::Ident(_)) && !head.is_empty();
                let is_body = matches!(&tree, TokenTree::Group(_) | TokenTree::Punct(_));
                if is_body && !head.is_empty() {
                    break;
                }
                tree.to_tokens(&mut head);
                rest = next;
                if is_name && !is_keyword(&head) {
                    break;
                }
            }
            Ok((head, rest))
        })
        .unwrap_or_default();
    let message = "`#[rate_limit]` only applies to `async fn`";
    if head.is_empty() {
        syn::Error::new(Span::call_site(), message)
    } else {
        syn::Error::new_spanned(head, message)
    }
}

/// Whether the last token of `head` is a keyword (so the item's name is still to come, as in
/// `unsafe impl`, `pub(crate) struct`).
fn is_keyword(head: &TokenStream) -> bool {
    let Some(TokenTree::Ident(last)) = head.clone().into_iter().last() else {
        return false;
    };
    matches!(
        last.to_string().as_str(),
        "struct"
            | "enum"
            | "union"
            | "trait"
            | "impl"
            | "mod"
            | "type"
            | "static"
            | "const"
            | "unsafe"
            | "extern"
            | "use"
            | "auto"
            | "mut"
            | "crate"
            | "macro_rules"
    )
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    fn rejection(item: TokenStream) -> String {
        match parse(item) {
            Ok(_) => panic!("accepted"),
            Err(rejected) => rejected.error.to_string(),
        }
    }

    #[test]
    fn accepts_async_fns_and_methods() {
        for item in [
            quote!(
                async fn f() -> Result<(), E> {}
            ),
            quote!(
                pub(crate) async unsafe fn f(x: u8) -> R {}
            ),
            quote!(#[doc = "x"] default async fn f(&mut self) -> R where Self: Sized {}),
        ] {
            assert!(parse(item.clone()).is_ok(), "{item}");
        }
    }

    #[test]
    fn rejects_everything_else_with_one_error() {
        let not_async = "`#[rate_limit]` only applies to `async fn`";
        assert_eq!(
            rejection(quote!(
                fn f() -> R {}
            )),
            not_async
        );
        assert_eq!(
            rejection(quote!(
                pub struct S {
                    x: u8,
                }
            )),
            not_async
        );
        assert_eq!(rejection(quote!(impl S {})), not_async);
        assert_eq!(
            rejection(quote!(
                mod m {}
            )),
            not_async
        );
        let not_const = "`#[rate_limit]` only applies to `async fn`, not to `const fn`";
        assert_eq!(
            rejection(quote!(
                const fn f() -> R {}
            )),
            not_const
        );
        assert_eq!(
            rejection(quote!(
                const async fn f() -> R {}
            )),
            not_const
        );
        assert_eq!(
            rejection(quote!(
                async fn f() -> R;
            )),
            "`#[rate_limit]` needs a function body"
        );
        assert_eq!(
            rejection(quote!(
                async fn f() {}
            )),
            "`#[rate_limit]` needs the function to return `Result<T, E>` with \
             `E: From<RateLimitError>`"
        );
    }
}
