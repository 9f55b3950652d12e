//! Code generation for `#[rate_limit]`: a guard block prepended to the function's body.

use proc_macro2::{Delimiter, Group, Ident, Literal, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};

use crate::args::{self, Args};
use crate::item::{self, AsyncFn};

/// The attribute: the function with its guard, or, on any error, the function exactly as
/// written followed by the errors (so the rest of the crate, and the IDE, still see it).
pub(crate) fn rate_limit(args: TokenStream, item: TokenStream) -> TokenStream {
    let args = args::parse(args);
    let function = item::parse(item.clone());
    match (args, function) {
        (Ok(args), Ok(function)) => expand(&args, function),
        (args, function) => {
            let (function_error, mut output) = match function {
                Ok(_) => (None, item),
                Err(rejected) => (Some(rejected.error), rejected.item.unwrap_or(item)),
            };
            for err in [args.err(), function_error].into_iter().flatten() {
                output.extend(err.into_compile_error());
            }
            output
        }
    }
}

// Input:
//
//     #[rate_limit(period = 60, threshold = 5, key = user_id)]
//     pub async fn login(&self, user_id: u64) -> Result<Session, AppError> {
//         body
//     }
//
// Output (`__scope`, `__key`, `__rate` and `__err` are `Span::mixed_site()` locals, out of
// the user's reach; `#krate` is `::ratelimit_runtime` or the `crate = "..."` path):
//
//     pub async fn login(&self, user_id: u64) -> Result<Session, AppError> {
//         {
//             fn __ratelimit_scope() {} // without `name`: its type name gives the fn's path
//             let __rate: #krate::Rate = const {
//                 #krate::Rate::new_const(5, #krate::__private::Duration::from_micros(60000000))
//             };
//             let __scope: &'static str = #krate::__private::scope_from_item_path(
//                 #krate::__private::type_name_of(&__ratelimit_scope),
//             ); // or the `name` literal
//             let __key = ::core::option::Option::Some(
//                 #krate::__private::scoped_key(__scope, &(user_id)),
//             ); // or `None` without `key`
//             if let ::core::result::Result::Err(__err) =
//                 #krate::__private::check(#krate::__private::global(), __scope, __key, __rate)
//                     .await
//             {
//                 // Spanned at `Result<Session, AppError>`: rustc reports a return type that is
//                 // not a `Result`, or an error type without `From<RateLimitError>`, there.
//                 return #krate::__private::denied(__err); // Err(AppError::from(__err))
//             }
//         }
//         {
//             body
//         }
//     }
fn expand(args: &Args, function: AsyncFn) -> TokenStream {
    // Exhaustive: a field added to `AsyncFn` must be handled here, not silently dropped.
    let AsyncFn {
        attrs,
        vis,
        defaultness,
        sig,
        body,
        output_span,
    } = function;
    let krate = runtime_path(args);

    let site = Span::mixed_site();
    // Mixed-site locals cannot be named by, nor shadow, the user's code; the leading `__`
    // keeps them from resolving to a lowercase `const` of the user's, which a binding pattern
    // would otherwise match against.
    let scope = Ident::new("__scope", site);
    let key = Ident::new("__key", site);
    let rate = Ident::new("__rate", site);
    let err = Ident::new("__err", site);
    let scope_fn = Ident::new("__ratelimit_scope", site);

    // The body's braces, as written but in the macro's context: to rustc's `unused_braces`
    // lint, the block we nest the body in looks like the user's, and a one-expression body
    // (`{ Ok(()) }`) would be reported as unnecessary braces.
    let mut body_block = Group::new(Delimiter::Brace, body.stream());
    body_block.set_span(site.located_at(body.span()));
    let body = body_block;

    let threshold = Literal::u64_unsuffixed(args.threshold);
    let period_us = Literal::u64_unsuffixed(args.period_us);

    let (scope_item, scope_value) = match &args.name {
        Some(name) => (None, name.to_token_stream()),
        None => (
            Some(quote! { fn #scope_fn() {} }),
            quote! {
                #krate::__private::scope_from_item_path(#krate::__private::type_name_of(&#scope_fn))
            },
        ),
    };
    let key_value = match &args.key {
        Some(expr) => {
            // `&(expr)` spans the expression, where rustc reports a key without `Display`.
            let [first, last] = first_and_last_spans(expr.to_token_stream());
            let mut parenthesized = Group::new(Delimiter::Parenthesis, expr.to_token_stream());
            parenthesized.set_span(last);
            let borrow = quote_spanned! {first=> & #parenthesized };
            quote! {
                ::core::option::Option::Some(#krate::__private::scoped_key(#scope, #borrow))
            }
        }
        None => quote! { ::core::option::Option::None },
    };
    let limiter = match &args.limiter {
        Some(expr) => expr.to_token_stream(),
        None => quote! { #krate::__private::global() },
    };
    // At the return type: an `E` without `From<RateLimitError>`, or a return type that is not
    // a `Result`, is reported there.
    // Its first tokens at the type's first, `denied` at its last: rustc reports the path
    // from one to the other, the whole type.
    let [first, last] = output_span;
    let denied_path = respan(quote! { #krate::__private:: }, first);
    let denied_fn = Ident::new("denied", last);
    let denied = quote_spanned! {first=>
        return #denied_path #denied_fn(#err);
    };

    quote! {
        #(#attrs)*
        #vis #defaultness #sig {
            {
                #scope_item
                let #rate: #krate::Rate = const {
                    #krate::Rate::new_const(
                        #threshold,
                        #krate::__private::Duration::from_micros(#period_us),
                    )
                };
                let #scope: &'static str = #scope_value;
                let #key = #key_value;
                if let ::core::result::Result::Err(#err) =
                    #krate::__private::check(#limiter, #scope, #key, #rate).await
                {
                    #denied
                }
            }
            #body
        }
    }
}

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
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tree| {
            if let TokenTree::Group(group) = &tree {
                let mut respanned = Group::new(group.delimiter(), respan(group.stream(), span));
                respanned.set_span(span);
                tree = TokenTree::Group(respanned);
            } else {
                tree.set_span(span);
            }
            tree
        })
        .collect()
}

/// The runtime crate's path: `crate = "..."`, else its name in the caller's `Cargo.toml`
/// (a renamed dependency works), else `::ratelimit_runtime`.
fn runtime_path(args: &Args) -> TokenStream {
    if let Some(path) = &args.krate {
        return path.to_token_stream();
    }
    match proc_macro_crate::crate_name("ratelimit-runtime") {
        Ok(proc_macro_crate::FoundCrate::Name(name)) => {
            let name = Ident::new(&name, Span::call_site());
            quote! { ::#name }
        }
        // `Itself` is the runtime's own doctests and integration tests: external crates that
        // name it `ratelimit_runtime` (the runtime never applies the attribute to itself).
        Ok(proc_macro_crate::FoundCrate::Itself) | Err(_) => quote! { ::ratelimit_runtime },
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    fn expand_str(args: TokenStream, item: TokenStream) -> String {
        rate_limit(args, item).to_string()
    }

    #[test]
    fn keeps_the_signature_and_body_and_prepends_one_guard() {
        let item = quote! {
            #[inline]
            pub(crate) async fn get<'a, T: Clone>(&'a self, id: T) -> anyhow::Result<&'a T>
            where
                T: Send,
            {
                body(id)
            }
        };
        let output = expand_str(quote!(period = "1500ms", threshold = 10, key = id), item);
        let signature = "# [inline] pub (crate) async fn get < 'a , T : Clone > (& 'a self , id : T) \
                         -> anyhow :: Result < & 'a T > where T : Send ,";
        assert!(output.starts_with(signature), "{output}");
        assert!(output.ends_with("{ body (id) } }"), "{output}");
        assert!(output.contains(
            ":: ratelimit_runtime :: Rate :: new_const (10 , :: ratelimit_runtime :: __private :: \
             Duration :: from_micros (1500000) ,)"
        ));
        assert!(output.contains("scoped_key (__scope , & (id))"), "{output}");
        assert!(
            output.contains(":: ratelimit_runtime :: __private :: global ()"),
            "{output}"
        );
        assert!(output.contains("return :: ratelimit_runtime :: __private :: denied (__err)"));
        assert_eq!(
            output.matches(".await").count() + output.matches(". await").count(),
            1
        );
    }

    #[test]
    fn name_limiter_and_crate_replace_the_defaults() {
        let output = expand_str(
            quote!(
                period = 1,
                threshold = 1,
                name = "login",
                limiter = &L,
                crate = "my::rt"
            ),
            quote!(
                async fn f() -> Result<(), E> {}
            ),
        );
        assert!(
            output.contains("let __scope : & 'static str = \"login\""),
            "{output}"
        );
        assert!(!output.contains("__ratelimit_scope"), "{output}");
        assert!(
            output.contains("my :: rt :: __private :: check (& L ,"),
            "{output}"
        );
        assert!(!output.contains("ratelimit_runtime"), "{output}");
        assert!(
            output.contains("let __key = :: core :: option :: Option :: None"),
            "{output}"
        );
    }

    #[test]
    fn on_error_emits_the_item_as_written_then_the_errors() {
        let item = quote!(
            async fn f() -> Result<(), E> {
                body()
            }
        );
        let output = expand_str(quote!(period = 1, thresold = 1), item.clone());
        assert!(output.starts_with(&item.to_string()), "{output}");
        assert!(output.ends_with(
            ":: core :: compile_error ! { \"unknown argument `thresold`; did you mean `threshold`?\" }"
        ));
        assert_eq!(output.matches("compile_error").count(), 1, "{output}");
    }

    #[test]
    fn errors_in_arguments_and_item_are_both_reported() {
        let output = expand_str(
            quote!(period = 0, threshold = 1),
            quote!(
                fn f() {}
            ),
        );
        assert!(output.starts_with("fn f () { }"), "{output}");
        assert!(
            output.contains("`period` must be at least 1 ms"),
            "{output}"
        );
        assert!(
            output.contains("`#[rate_limit]` only applies to `async fn`"),
            "{output}"
        );
    }

    #[test]
    fn const_async_fn_is_emitted_without_const() {
        let output = expand_str(
            quote!(period = 1, threshold = 1),
            quote!(
                const async fn f() -> Result<(), E> {}
            ),
        );
        assert!(
            output.starts_with("async fn f () -> Result < () , E > { }"),
            "{output}"
        );
        assert!(output.contains("not to `const fn`"), "{output}");
    }
}
