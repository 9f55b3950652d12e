//! Code generation for `#[rate_limit]`: a guard block prepended to the function's body, for
//! one limit in the plain form, or for a composite check (several stacked limits, or one with
//! `rate`, `cost`, `exempt`, `decision` or `label`).

use proc_macro2::{Delimiter, Group, Ident, Literal, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};

use crate::args::{self, Args, CostArg, Count, RateArg};
use crate::item::{self, AsyncFn, Flavor};
use crate::names;
use crate::spans::{first_and_last_spans, relocate, respan};
use crate::stack::{self, Limits};

/// The attribute: the function with its guard, or, on any error, the function exactly as
/// written followed by the errors (so the rest of the crate, and the IDE, still see it). On an
/// error in stacked attributes, the function is written without any of them.
pub(crate) fn rate_limit(args: TokenStream, item: TokenStream) -> TokenStream {
    // What the arguments name, kept used if the function is emitted as written (`names.rs`):
    // this attribute's, and those of the attributes stacked under it.
    let mut named = names::rate_limit_attributes(&item);
    named.push(args.clone());
    let as_written = |item: TokenStream| as_written(item, &named);
    let args = args::parse(args);
    let function = item::parse(item.clone());
    match (args, function) {
        (Ok(args), Ok(mut function)) => match stack::collect(args, &mut function.attrs) {
            Ok(limits) if limits.is_plain() => expand(&limits, function),
            Ok(limits) => expand_composite(&limits, function, as_written),
            Err(err) => {
                let mut output = as_written(function.into_token_stream());
                output.extend(err.into_compile_error());
                output
            }
        },
        (args, function) => {
            let (function_error, mut output) = match function {
                Ok(_) => (None, as_written(item)),
                Err(rejected) => (Some(rejected.error), rejected.item.map_or(item, as_written)),
            };
            for err in [args.err(), function_error].into_iter().flatten() {
                output.extend(err.into_compile_error());
            }
            output
        }
    }
}

/// The function as written, emitted beside an error. Its arguments may then be unused (the `key`
/// or `rate` that named them is gone with the attribute), and rustc's "unused variable:
/// prefix it with an underscore" would be wrong advice next to the error: it is allowed here,
/// on a crate that does not compile anyway. The names the attributes' arguments (`named`)
/// used are kept used, for the same reason (`names.rs`).
fn as_written(item: TokenStream, named: &[TokenStream]) -> TokenStream {
    let mut output = quote! { #[allow(unused_variables)] };
    output.extend(names::keep_used(item, named));
    output
}

// Input:
//
//     #[rate_limit(period = 60, threshold = 5, key = user_id)]
//     pub async fn login(&self, user_id: u64) -> Result<Session, AppError> {
//         body
//     }
//
// Output (`#krate` is `::ratelimit_runtime` or the `crate = "..."` path):
//
//     pub async fn login(&self, user_id: u64) -> Result<Session, AppError> {
//         {
//             fn __ratelimit() {}
//             let __ratelimit: &'static ::core::primitive::str = {
//                 static __RATELIMIT_SCOPE: #krate::__private::Scope = #krate::__private::Scope::new();
//                 __RATELIMIT_SCOPE.of(&__ratelimit) // the path of `__ratelimit`, once
//             }; // with `name`: #krate::__private::named_scope(&__ratelimit, "login")
//             let __ratelimit = (
//                 __ratelimit,
//                 ::core::option::Option::Some(
//                     #krate::__private::scoped_key(__ratelimit, &(user_id)),
//                 ), // or `None` without `key`
//             );
//             if let ::core::result::Result::Err(__ratelimit) = #krate::__private::check(
//                 #krate::__private::global(), // or the `limiter` expression
//                 __ratelimit, // moved whole: nothing of it is kept across the `.await`
//                 const { #krate::Rate::new_const(5, #krate::__private::Duration::from_micros(60000000)) },
//             )
//             .await
//             {
//                 // Spanned at `Result<Session, AppError>`: rustc reports a return type that is
//                 // not a `Result`, or an error type without `From<RateLimitError>`, there.
//                 return #krate::__private::denied(__ratelimit); // Err(AppError::from(err))
//             }
//         }
//         {
//             body
//         }
//     }
//
// Every generated name is `__ratelimit`, with `Span::mixed_site()`: the user's code cannot
// name it. A pattern, though, is resolved against the items in scope before it binds: a
// `const __ratelimit` (or a static, or a unit struct) of the user's module would make
// `let __ratelimit` a constant pattern. The block's own `fn __ratelimit` comes first, and a
// function never makes a pattern anything but a binding; each `let` then shadows the one before.
// The function is used (its type name gives the scope), so it is never dead code. The key is
// evaluated and formatted in its own `let`, so its temporaries (and borrows of the arguments)
// end before the `.await` and before the body.
fn expand(limits: &Limits, function: AsyncFn) -> TokenStream {
    let args = &limits.limits[0];
    // Exhaustive: a field added to `AsyncFn` must be handled here, not silently dropped.
    let AsyncFn {
        attrs,
        vis,
        defaultness,
        sig,
        body,
        output_span,
        flavor,
    } = function;
    let krate = runtime_path(limits);
    let local = Ident::new(args::RESERVED, Span::mixed_site());
    let (braces, body) = braces_and_body(&body);
    let rate = rate(&krate, &args.rate);
    let scope = scope(&krate, args.name.as_ref());
    let declared = declare(&krate, limits, sig.ident.span());
    let key = match &args.key {
        Some(expr) => {
            let borrow = borrow(expr);
            quote! {
                ::core::option::Option::Some(#krate::__private::scoped_key(#local, #borrow))
            }
        }
        None => quote! { ::core::option::Option::None },
    };
    let limiter = limiter(&krate, limits);
    // With `wait`, the check that waits for a slot while denied.
    let (check, wait_argument) = match limits.wait {
        None => (quote! { #krate::__private::check }, quote! {}),
        Some(wait) => {
            let wait = wait_duration(&krate, wait);
            (
                quote! { #krate::__private::check_waiting },
                quote! { , #wait },
            )
        }
    };
    let wait_option = wait_option(&krate, limits.wait);
    let denied = Denied::at(&krate, output_span);
    let denied_call = |argument: &Ident| denied.call(argument);
    let denied = &denied.path;

    match flavor {
        Flavor::Async => {
            let denied = denied_call(&local);
            let fn_body = braces(quote! {
                {
                    fn #local() {}
                    #declared
                    let #local: &'static ::core::primitive::str = #scope;
                    let #local = (#local, #key);
                    if let ::core::result::Result::Err(#local) =
                        #check(#limiter, #local, #rate #wait_argument).await
                    {
                        return #denied;
                    }
                }
                #body
            });
            quote! {
                #(#attrs)*
                #vis #defaultness #sig #fn_body
            }
        }
        // Input (`#[async_trait]`'s output):
        //
        //     fn get<'life0, 'async_trait>(&'life0 self, id: u64)
        //         -> Pin<Box<dyn Future<Output = Result<Item, AppError>> + Send + 'async_trait>>
        //     where 'life0: 'async_trait, Self: 'async_trait
        //     {
        //         Box::pin(async move { body })
        //     }
        //
        // Output: the key and limiter are evaluated when the method is called (the body's
        // future then owns the arguments), the check happens when that future is first polled:
        //
        //     fn get<'life0, 'async_trait>(&'life0 self, id: u64) -> Pin<Box<..>> where .. {
        //         ::std::boxed::Box::pin(#krate::__private::guarded(
        //             {
        //                 fn __ratelimit() {}
        //                 let __ratelimit: &'static ::core::primitive::str = /* the scope, as above */;
        //                 let __ratelimit = (
        //                     __ratelimit,
        //                     ::core::option::Option::Some(#krate::__private::scoped_key(__ratelimit, &(id))),
        //                     #krate::__private::owned_limiter(&self.limiter), // or global()
        //                 );
        //                 __ratelimit
        //             },
        //             const { #krate::Rate::new_const(..) },
        //             #krate::__private::denied, // spanned at `Result<Item, AppError>`
        //             { Box::pin(async move { body }) }, // out of reach of `fn __ratelimit`
        //         ))
        //     }
        Flavor::AsyncTrait => {
            let fn_body = braces(quote! {
                ::std::boxed::Box::pin(#krate::__private::guarded(
                    {
                        fn #local() {}
                        #declared
                        let #local: &'static ::core::primitive::str = #scope;
                        let #local = (
                            #local,
                            #key,
                            #krate::__private::owned_limiter(#limiter),
                        );
                        #local
                    },
                    #rate,
                    #wait_option,
                    #denied,
                    #body,
                ))
            });
            quote! {
                #(#attrs)*
                #vis #defaultness #sig #fn_body
            }
        }
    }
}

// Input (stacked attributes, or one with `rate`, `cost`, `exempt`, `decision` or `label`):
//
//     #[rate_limit(period = 1, threshold = 5, key = user)]
//     #[rate_limit(rate = plan.daily(), key = user, cost = items.len(), exempt = vip, decision = d)]
//     async fn search(user: &str, plan: &Plan, items: &[Item], vip: bool) -> Result<Hits, E> {
//         body
//     }
//
// Output:
//
//     async fn search(user: &str, plan: &Plan, items: &[Item], vip: bool) -> Result<Hits, E> {
//         let d = {
//             fn __ratelimit() {}
//             let __ratelimit: &'static ::core::primitive::str = /* the scope, as above */;
//             let mut __ratelimit = #krate::__private::Stack::new(
//                 __ratelimit,
//                 #krate::__private::Layout::Stacked, // `One` for one attribute
//                 2,
//             );
//             __ratelimit.keyed(
//                 #krate::__private::LimitSpec {
//                     name: ::core::option::Option::None, // or `Some("name")`
//                     // Stacked and unnamed: the scope `<function>#1`, made once.
//                     position: ::core::option::Option::Some({
//                         static __RATELIMIT_POSITION: #krate::__private::Position =
//                             #krate::__private::Position::new(1);
//                         &__RATELIMIT_POSITION
//                     }),
//                     rate: const { #krate::Rate::new_const(5, ..) },
//                     rate_chosen_per_call: false,
//                     cost: 1,
//                     label: ::core::option::Option::None,
//                 },
//                 &(user), // spanned at the key; `.limit(spec)` without a key
//             );
//             if !{ let __ratelimit: bool = vip; __ratelimit } { // `bool` spanned at `vip`
//                 __ratelimit.keyed(
//                     #krate::__private::LimitSpec {
//                         rate: plan.daily(), // where rustc reports a type other than `Rate`
//                         rate_chosen_per_call: true,
//                         cost: #krate::__private::cost(items.len()), // `u8`..`u64`, `usize`
//                         ..
//                     },
//                     &(user),
//                 );
//             }
//             match #krate::__private::check_stack(#limiter, __ratelimit).await {
//                 ::core::result::Result::Ok(__ratelimit) => __ratelimit,
//                 ::core::result::Result::Err(__ratelimit) => {
//                     return #krate::__private::denied(__ratelimit); // at the return type
//                 }
//             }
//         };
//         let d: &#krate::Decisions = &d;
//         {
//             body
//         }
//     }
//
// Without `decision`, the block is the plain form's: `if let Err(..) = check_stack(..).await`.
// Under `#[async_trait]` (where `decision` is refused), the block makes
// `(__ratelimit, owned_limiter(#limiter))` for `guarded_stack`, as the plain form does for
// `guarded`.
//
// With `count` or `count_if` on any limit, the check keeps what a refund needs, and the body
// runs in an `async` block of its own, so that its `return`s and `?`s end the block, and the
// limits under which the call does not count are refunded after it:
//
//         let __ratelimit = {
//             /* the stack, as above */
//             match #krate::__private::admit_stack(#limiter, __ratelimit).await {
//                 Ok(__ratelimit) => __ratelimit,
//                 Err(__ratelimit) => return #krate::__private::denied(__ratelimit),
//             }
//         };
//         let d: &#krate::Decisions = __ratelimit.decisions(); // with `decision = d`
//         let __ratelimit_outcome = async {
//             // The block's type, the function's return type (unless an `impl Trait`).
//             if let Some(__ratelimit_return) = None::<ReturnType> { return __ratelimit_return; }
//             { body }
//         }
//         .await;
//         __ratelimit
//             .settle(|__ratelimit_index| match __ratelimit_index {
//                 // count = "errors" (any type answers, so that `denied` alone reports one
//                 // that is not a `Result`)
//                 0 => !(&#krate::__private::Outcome(&__ratelimit_outcome)).is_ok(),
//                 1 => #krate::__private::counts_if(&__ratelimit_outcome, closure), // count_if
//                 _ => true,
//             })
//             .await;
//         __ratelimit_outcome
//
// Under `#[async_trait]`, `guarded_counted` does the same around the body's future.
//
// With `concurrency` on any limit (and no `count`), the call's slots are held while the body
// runs: `admit_stack` (`admit_stack_waiting` with `wait`) answers the check, kept in
// `__ratelimit` until the function returns (or unwinds, or its future is dropped), which
// releases them:
//
//         let __ratelimit = {
//             /* the stack, as above */
//             match #krate::__private::admit_stack(#limiter, __ratelimit).await {
//                 Ok(__ratelimit) => __ratelimit,
//                 Err(__ratelimit) => return #krate::__private::denied(__ratelimit),
//             }
//         };
//         let d: &#krate::Decisions = __ratelimit.decisions(); // with `decision = d`
//         { body }
//
// With `count` too, the counting form above holds them the same way. Under `#[async_trait]`,
// `guarded_stack` holds them around the body's future.
fn expand_composite(
    limits: &Limits,
    function: AsyncFn,
    as_written: impl FnOnce(TokenStream) -> TokenStream,
) -> TokenStream {
    if let Some(error) = decision_error(limits, &function) {
        let mut output = as_written(function.into_token_stream());
        output.extend(error.into_compile_error());
        return output;
    }
    let AsyncFn {
        attrs,
        vis,
        defaultness,
        sig,
        body,
        output_span,
        flavor,
    } = function;
    let krate = runtime_path(limits);
    let local = Ident::new(args::RESERVED, Span::mixed_site());
    let (braces, body) = braces_and_body(&body);
    let layout = if limits.limits.len() == 1 {
        quote! { #krate::__private::Layout::One }
    } else {
        quote! { #krate::__private::Layout::Stacked }
    };
    // The function's scope, the default of every limit without a `name`; when all have one,
    // the first's, for the metrics and the span.
    let unnamed = limits.limits.iter().any(|args| args.name.is_none());
    let scope = scope(
        &krate,
        if unnamed {
            None
        } else {
            limits.limits[0].name.as_ref()
        },
    );
    let capacity = Literal::usize_unsuffixed(limits.limits.len());
    let stacked = limits.limits.len() > 1;
    let pushes = limits
        .limits
        .iter()
        .enumerate()
        .map(|(i, args)| push(&krate, &local, args, i, stacked.then_some(i + 1)));
    let declared = declare(&krate, limits, sig.ident.span());
    let stack = quote! {
        fn #local() {}
        #declared
        let #local: &'static ::core::primitive::str = #scope;
        let mut #local = #krate::__private::Stack::new(#local, #layout, #capacity);
        #(#pushes)*
    };
    let limiter = limiter(&krate, limits);
    let wait_option = wait_option(&krate, limits.wait);
    let denied = Denied::at(&krate, output_span);
    let counting = limits.limits.iter().any(Args::counts_by_outcome);
    // A concurrency limit's slot is held while the body runs: the check's answer lives
    // until the function returns.
    let holding = limits
        .limits
        .iter()
        .any(|args| matches!(args.rate, RateArg::Concurrency { .. }));
    let outcome = Ident::new("__ratelimit_outcome", Span::mixed_site());
    let fn_body = match (flavor, counting) {
        (Flavor::Async, true) => {
            let deny = denied.call(&local);
            let counts = counts(&krate, limits, &quote! { &#outcome });
            // The block's type, from its first `return` (as `#[async_trait]` does), so that
            // the body's values coerce to the return type as they did in the function
            // (`Ok(&self.name)` for a `Result<&str, E>`); not for an `impl Trait`, which
            // cannot be named there (its body's values need no coercion).
            let typed = match &sig.output {
                syn::ReturnType::Type(_, ty) if !mentions_impl(ty.to_token_stream()) => {
                    let ret = Ident::new("__ratelimit_return", Span::mixed_site());
                    quote! {
                        if let ::core::option::Option::Some(#ret) =
                            ::core::option::Option::None::<#ty>
                        {
                            #[allow(unreachable_code)]
                            return #ret;
                        }
                    }
                }
                _ => TokenStream::new(),
            };
            let decision = limits.decision.as_ref().map(|decision| {
                quote! { let #decision: &#krate::Decisions = #local.decisions(); }
            });
            braces(quote! {
                let #local = {
                    #stack
                    match #krate::__private::admit_stack(#limiter, #local).await {
                        ::core::result::Result::Ok(#local) => #local,
                        ::core::result::Result::Err(#local) => return #deny,
                    }
                };
                #decision
                // The body in braces of its own within the block: its inner attributes
                // (`#![allow(..)]`) stay where rustc takes them.
                let #outcome = async { #typed #body }.await;
                #local.settle(#counts).await;
                #outcome
            })
        }
        (Flavor::AsyncTrait, true) => {
            let deny = &denied.path;
            let index = Ident::new("__ratelimit_index", Span::mixed_site());
            let counts = counts(&krate, limits, &outcome.to_token_stream());
            let counts = quote! { |#outcome, #index| (#counts)(#index) };
            braces(quote! {
                ::std::boxed::Box::pin(#krate::__private::guarded_counted(
                    {
                        #stack
                        (#local, #krate::__private::owned_limiter(#limiter))
                    },
                    #deny,
                    #body,
                    #counts,
                ))
            })
        }
        (Flavor::Async, false) if holding => {
            let deny = denied.call(&local);
            let admit = match limits.wait {
                None => quote! { #krate::__private::admit_stack(#limiter, #local).await },
                Some(wait) => {
                    let wait = wait_duration(&krate, wait);
                    quote! { #krate::__private::admit_stack_waiting(#limiter, #local, #wait).await }
                }
            };
            let decision = limits.decision.as_ref().map(|decision| {
                quote! { let #decision: &#krate::Decisions = #local.decisions(); }
            });
            braces(quote! {
                let #local = {
                    #stack
                    match #admit {
                        ::core::result::Result::Ok(#local) => #local,
                        ::core::result::Result::Err(#local) => return #deny,
                    }
                };
                #decision
                #body
            })
        }
        (Flavor::Async, false) => {
            let deny = denied.call(&local);
            let check = match limits.wait {
                None => quote! { #krate::__private::check_stack(#limiter, #local).await },
                Some(wait) => {
                    let wait = wait_duration(&krate, wait);
                    quote! { #krate::__private::check_stack_waiting(#limiter, #local, #wait).await }
                }
            };
            match &limits.decision {
                Some(decision) => braces(quote! {
                    let #decision = {
                        #stack
                        match #check {
                            ::core::result::Result::Ok(#local) => #local,
                            ::core::result::Result::Err(#local) => return #deny,
                        }
                    };
                    let #decision: &#krate::Decisions = &#decision;
                    #body
                }),
                None => braces(quote! {
                    {
                        #stack
                        if let ::core::result::Result::Err(#local) = #check {
                            return #deny;
                        }
                    }
                    #body
                }),
            }
        }
        (Flavor::AsyncTrait, false) => {
            let deny = &denied.path;
            braces(quote! {
                ::std::boxed::Box::pin(#krate::__private::guarded_stack(
                    {
                        #stack
                        (#local, #krate::__private::owned_limiter(#limiter))
                    },
                    #wait_option,
                    #deny,
                    #body,
                ))
            })
        }
    };
    quote! {
        #(#attrs)*
        #vis #defaultness #sig #fn_body
    }
}

/// Why `decision` cannot bind its name here: under `#[async_trait]` (the body's future is made
/// before the check), or where the name is an argument's (the body would lose the argument).
fn decision_error(limits: &Limits, function: &AsyncFn) -> Option<syn::Error> {
    let decision = limits.decision.as_ref()?;
    if function.flavor == Flavor::AsyncTrait {
        return Some(syn::Error::new_spanned(
            decision,
            "`decision` is not available under `#[async_trait]`, which makes the body's future \
             before the check runs; use a native `async fn` in the trait (Rust 1.75 and \
             later), or read the limits by hand with `Limiter::check_all`",
        ));
    }
    /// Whether `pat` binds `name`, at any depth.
    fn binds(pat: &syn::Pat, name: &Ident) -> bool {
        match pat {
            syn::Pat::Ident(pat) => {
                pat.ident == *name || pat.subpat.as_ref().is_some_and(|(_, p)| binds(p, name))
            }
            syn::Pat::Tuple(tuple) => tuple.elems.iter().any(|p| binds(p, name)),
            syn::Pat::TupleStruct(tuple) => tuple.elems.iter().any(|p| binds(p, name)),
            syn::Pat::Struct(fields) => fields.fields.iter().any(|f| binds(&f.pat, name)),
            syn::Pat::Slice(slice) => slice.elems.iter().any(|p| binds(p, name)),
            syn::Pat::Reference(reference) => binds(&reference.pat, name),
            syn::Pat::Paren(paren) => binds(&paren.pat, name),
            syn::Pat::Type(typed) => binds(&typed.pat, name),
            _ => false,
        }
    }
    let shadows = function.sig.inputs.iter().any(|input| match input {
        syn::FnArg::Typed(typed) => binds(&typed.pat, decision),
        syn::FnArg::Receiver(_) => false,
    });
    shadows.then(|| {
        syn::Error::new_spanned(
            decision,
            format!(
                "`decision = {decision}` would hide the argument `{decision}` from the body; \
                 choose another name, e.g. `decision = d`"
            ),
        )
    })
}

/// The closure that tells, by a limit's index, whether the call counts under it, given the
/// body's result, borrowed by the expression `outcome`. A type that is not a `Result` is
/// reported by `denied` alone (see `__private::Outcome`); `counts_if` is spanned at the
/// closure, where a parameter of another type is reported.
fn counts(krate: &TokenStream, limits: &Limits, outcome: &TokenStream) -> TokenStream {
    let index = Ident::new("__ratelimit_index", Span::mixed_site());
    let is_ok = || {
        quote! {
            {
                use #krate::__private::{OtherOutcome as _, ResultOutcome as _};
                (&#krate::__private::Outcome(#outcome)).is_ok()
            }
        }
    };
    let arms = limits.limits.iter().enumerate().filter_map(|(i, args)| {
        let i = Literal::usize_unsuffixed(i);
        let counted = match &args.count.as_ref()?.0 {
            Count::All => return None,
            Count::Errors => {
                let is_ok = is_ok();
                quote! { !#is_ok }
            }
            Count::Ok => is_ok(),
            Count::If(closure) => {
                // Reported from the closure's first token to its last, where a parameter of
                // another type is wrong: the path there, the argument and parentheses at the
                // last.
                let [first, last] = first_and_last_spans(closure.to_token_stream());
                let path = respan(quote! { #krate::__private::counts_if }, first);
                let argument = relocate(outcome.clone(), last);
                let mut arguments =
                    Group::new(Delimiter::Parenthesis, quote! { #argument, #closure });
                arguments.set_span(last);
                quote! { #path #arguments }
            }
        };
        Some(quote! { #i => #counted, })
    });
    quote! {
        |#index: ::core::primitive::usize| match #index {
            #(#arms)*
            _ => true,
        }
    }
}

/// Whether `tokens` (a return type) hold `impl`, at any depth.
fn mentions_impl(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|tree| match tree {
        proc_macro2::TokenTree::Ident(ident) => ident == "impl",
        proc_macro2::TokenTree::Group(group) => mentions_impl(group.stream()),
        _ => false,
    })
}

/// One limit's statement in a composite check: its `LimitSpec` pushed on the runtime's
/// `Stack`, unless its `exempt` expression is true.
///
/// `position` is the limit's among stacked attributes (from 1), `None` for one attribute.
fn push(
    krate: &TokenStream,
    local: &Ident,
    args: &Args,
    index: usize,
    position: Option<usize>,
) -> TokenStream {
    let shadow = args.shadow;
    let index = Literal::usize_unsuffixed(index);
    let option = |value: Option<TokenStream>| match value {
        Some(value) => quote! { ::core::option::Option::Some(#value) },
        None => quote! { ::core::option::Option::None },
    };
    let name = option(args.name.as_ref().map(ToTokens::to_token_stream));
    // A stacked limit without `name`: its scope is the function's path and its position,
    // made once (a static of the block).
    let position = option(position.filter(|_| args.name.is_none()).map(|position| {
        let position = Literal::usize_unsuffixed(position);
        let cache = Ident::new("__RATELIMIT_POSITION", Span::mixed_site());
        quote! {
            {
                static #cache: #krate::__private::Position =
                    #krate::__private::Position::new(#position);
                &#cache
            }
        }
    }));
    let label = option(args.label.as_ref().map(ToTokens::to_token_stream));
    let rate = rate(krate, &args.rate);
    let chosen = matches!(args.rate, RateArg::Expr(_));
    let cost = match &args.cost {
        None => quote! { 1 },
        Some(CostArg::Literal(cost)) => Literal::u64_unsuffixed(*cost).to_token_stream(),
        Some(CostArg::Expr(expr)) => {
            // The call spanned at the expression: rustc reports a type without `Cost` there.
            let [first, last] = first_and_last_spans(expr.to_token_stream());
            let path = respan(quote! { #krate::__private::cost }, first);
            let mut argument = Group::new(Delimiter::Parenthesis, expr.to_token_stream());
            argument.set_span(last);
            quote! { #path #argument }
        }
    };
    let spec = quote! {
        #krate::__private::LimitSpec {
            name: #name,
            position: #position,
            rate: #rate,
            rate_chosen_per_call: #chosen,
            cost: #cost,
            label: #label,
            shadow: #shadow,
            index: #index,
        }
    };
    let push = match &args.key {
        Some(key) => {
            let borrow = borrow(key);
            quote! { #local.keyed(#spec, #borrow); }
        }
        None => quote! { #local.limit(#spec); },
    };
    match &args.exempt {
        Some(exempt) => {
            // `bool` spanned at the expression: rustc reports another type there, as its own
            // "expected `bool`" (a `!` of an integer would compile).
            let [first, _] = first_and_last_spans(exempt.to_token_stream());
            let boolean = quote_spanned! {first=> ::core::primitive::bool };
            quote! {
                if !{
                    let #local: #boolean = #exempt;
                    #local
                } {
                    #push
                }
            }
        }
        None => push,
    }
}

/// The braces of the function's own block (a function of what goes in them), and its body in
/// the braces the expansion nests it in.
fn braces_and_body(body: &Group) -> (impl Fn(TokenStream) -> Group, Group) {
    // The body's braces, as written but in the macro's context: to rustc's `unused_braces`
    // lint, the block we nest the body in looks like the user's, and a one-expression body
    // (`{ Ok(()) }`) would be reported as unnecessary braces.
    let mut nested = Group::new(Delimiter::Brace, body.stream());
    nested.set_span(Span::mixed_site().located_at(body.span()));
    // The function's own braces keep the span of the body's: rustc takes the item's span from
    // its first and last tokens, and an item whose span comes from a macro gets no `dead_code`
    // warning, which an unused function under `#[rate_limit]` must still get.
    let span = body.span();
    let braces = move |stream: TokenStream| {
        let mut group = Group::new(Delimiter::Brace, stream);
        group.set_span(span);
        group
    };
    (braces, nested)
}

/// A fixed rate as a constant, or the `rate` expression as written (where rustc reports a type
/// other than `Rate`).
fn rate(krate: &TokenStream, rate: &RateArg) -> TokenStream {
    match rate {
        RateArg::Fixed {
            period_us,
            threshold,
            counter,
            leased,
        } => {
            let threshold = Literal::u64_unsuffixed(*threshold);
            let period_us = Literal::u64_unsuffixed(*period_us);
            let algorithm =
                counter.then(|| quote!(.with_algorithm(#krate::Algorithm::SlidingWindowCounter)));
            let lease = leased.then(|| quote!(.leased()));
            quote! {
                const {
                    #krate::Rate::new_const(
                        #threshold,
                        #krate::__private::Duration::from_micros(#period_us),
                    )
                    #algorithm
                    #lease
                }
            }
        }
        RateArg::Expr(expr) => expr.to_token_stream(),
        RateArg::Concurrency { max, slot_time_us } => {
            let max = Literal::u64_unsuffixed(*max);
            let slot_time_us = Literal::u64_unsuffixed(*slot_time_us);
            quote! {
                const {
                    #krate::Concurrency::new_const(
                        #max,
                        #krate::__private::Duration::from_micros(#slot_time_us),
                    )
                    .rate()
                }
            }
        }
    }
}

/// The declarations of a function's limits in the catalog of the code's limits
/// (`declared_limits`), gathered before `main` runs: one `inventory::submit!` per limit, after
/// the guard block's `fn __ratelimit() {}`, whose path a function of its own works out as the
/// checks do. Nothing of it runs on a call.
///
/// ```text
/// ::ratelimit_runtime::__private::inventory::submit! {
///     ::ratelimit_runtime::__private::Declaration {
///         name: ::core::option::Option::None, // or `Some("login")`
///         function: {
///             fn __ratelimit_scope() -> &'static ::core::primitive::str {
///                 ::ratelimit_runtime::__private::scope_from_item_path(
///                     ::ratelimit_runtime::__private::type_name_of(&__ratelimit),
///                 )
///             }
///             __ratelimit_scope
///         },
///         position: ::core::option::Option::None, // `Some(2)`: stacked, unnamed
///         rate: ::core::option::Option::Some(const { .. }), // `None`: `rate = expr`
///         cost: ::core::option::Option::Some(1), // `None`: `cost = expr`
///         file: ::core::file!(), // spanned at the function's name
///         line: ::core::line!(),
///     }
/// }
/// ```
fn declare(krate: &TokenStream, limits: &Limits, at: Span) -> TokenStream {
    let site = Span::mixed_site();
    let local = Ident::new(args::RESERVED, site);
    let function = Ident::new("__ratelimit_scope", site);
    let stacked = limits.limits.len() > 1;
    let option = |value: Option<TokenStream>| match value {
        Some(value) => quote! { ::core::option::Option::Some(#value) },
        None => quote! { ::core::option::Option::None },
    };
    let file = quote_spanned! {at=> ::core::file!() };
    let line = quote_spanned! {at=> ::core::line!() };
    limits
        .limits
        .iter()
        .enumerate()
        .map(|(i, args)| {
            let name = option(args.name.as_ref().map(ToTokens::to_token_stream));
            let position = option(
                stacked
                    .then_some(i + 1)
                    .filter(|_| args.name.is_none())
                    .map(|position| Literal::usize_unsuffixed(position).to_token_stream()),
            );
            let rate =
                option((!matches!(args.rate, RateArg::Expr(_))).then(|| rate(krate, &args.rate)));
            let cost = option(match &args.cost {
                None => Some(quote! { 1 }),
                Some(CostArg::Literal(cost)) => {
                    Some(Literal::u64_unsuffixed(*cost).to_token_stream())
                }
                Some(CostArg::Expr(_)) => None,
            });
            quote! {
                #krate::__private::inventory::submit! {
                    #krate::__private::Declaration {
                        name: #name,
                        function: {
                            fn #function() -> &'static ::core::primitive::str {
                                #krate::__private::scope_from_item_path(
                                    #krate::__private::type_name_of(&#local),
                                )
                            }
                            #function
                        },
                        position: #position,
                        rate: #rate,
                        cost: #cost,
                        file: #file,
                        line: #line,
                    }
                }
            }
        })
        .collect()
}

/// The scope: the `name`, or the function's path, worked out once per function, on its first
/// call (a static of the block).
fn scope(krate: &TokenStream, name: Option<&syn::LitStr>) -> TokenStream {
    let site = Span::mixed_site();
    let local = Ident::new(args::RESERVED, site);
    match name {
        Some(name) => quote! { #krate::__private::named_scope(&#local, #name) },
        None => {
            let cache = Ident::new("__RATELIMIT_SCOPE", site);
            quote! {
                {
                    static #cache: #krate::__private::Scope = #krate::__private::Scope::new();
                    #cache.of(&#local)
                }
            }
        }
    }
}

/// `&(expr)`, spanned at the expression, where rustc reports a key without `Display`.
fn borrow(expr: &syn::Expr) -> TokenStream {
    let [first, last] = first_and_last_spans(expr.to_token_stream());
    let mut parenthesized = Group::new(Delimiter::Parenthesis, expr.to_token_stream());
    parenthesized.set_span(last);
    quote_spanned! {first=> & #parenthesized }
}

/// `wait` (µs) as a `Duration` expression.
fn wait_duration(krate: &TokenStream, wait: u64) -> TokenStream {
    let wait = Literal::u64_unsuffixed(wait);
    quote! { #krate::__private::Duration::from_micros(#wait) }
}

/// `wait` as an `Option<Duration>` expression, for the `#[async_trait]` guards.
fn wait_option(krate: &TokenStream, wait: Option<u64>) -> TokenStream {
    match wait {
        Some(wait) => {
            let wait = wait_duration(krate, wait);
            quote! { ::core::option::Option::Some(#wait) }
        }
        None => quote! { ::core::option::Option::None },
    }
}

/// The `limiter` expression, or the process-wide default.
fn limiter(krate: &TokenStream, limits: &Limits) -> TokenStream {
    match &limits.limiter {
        Some(expr) => expr.to_token_stream(),
        None => quote! { #krate::__private::global() },
    }
}

/// `#krate::__private::denied`, spanned at the return type: an `E` without
/// `From<RateLimitError>`, or a return type that is not a `Result`, is reported there.
struct Denied {
    path: TokenStream,
    last: Span,
}

impl Denied {
    fn at(krate: &TokenStream, [first, last]: [Span; 2]) -> Denied {
        // The path's first tokens at the type's first, its last at the type's last: rustc
        // reports the path from one to the other, the whole type.
        let path = respan(quote! { #krate::__private:: }, first);
        let name = Ident::new("denied", last);
        Denied {
            path: quote! { #path #name },
            last,
        }
    }

    /// `denied(argument)`, its parentheses at the type's last token too: rustc reports a call
    /// from its path to its closing parenthesis.
    fn call(&self, argument: &Ident) -> TokenStream {
        let mut arguments = Group::new(Delimiter::Parenthesis, argument.to_token_stream());
        arguments.set_span(self.last);
        let path = &self.path;
        quote! { #path #arguments }
    }
}

/// The runtime crate's path: `crate = "..."`, else its name in the caller's `Cargo.toml`
/// (a renamed dependency works), else `::ratelimit_runtime`.
fn runtime_path(limits: &Limits) -> TokenStream {
    if let Some(path) = &limits.krate {
        return path.to_token_stream();
    }
    match proc_macro_crate::crate_name("ratelimit-runtime") {
        Ok(proc_macro_crate::FoundCrate::Name(name)) => {
            // A dependency may be renamed to a keyword (`async = { package = ... }`).
            let name = syn::parse_str::<Ident>(&name)
                .unwrap_or_else(|_| Ident::new_raw(&name, Span::call_site()));
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
        assert!(
            output.contains("scoped_key (__ratelimit , & (id))"),
            "{output}"
        );
        assert!(
            output.contains(":: ratelimit_runtime :: __private :: global ()"),
            "{output}"
        );
        assert!(
            output.contains("return :: ratelimit_runtime :: __private :: denied (__ratelimit)")
        );
        // One name for every generated local, first declared as a function so that no user
        // item of that name can turn a `let` into a constant pattern; the limit declared in
        // the catalog between the two.
        assert!(
            output.contains(
                "{ { fn __ratelimit () { } :: ratelimit_runtime :: __private :: inventory :: submit ! \
                 { :: ratelimit_runtime :: __private :: Declaration {"
            ),
            "{output}"
        );
        assert!(
            output.contains(
                "line : :: core :: line ! () , } } let __ratelimit : & 'static :: core :: primitive :: str ="
            ),
            "{output}"
        );
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
            output.contains(
                "let __ratelimit : & 'static :: core :: primitive :: str = my :: rt :: __private :: named_scope \
                 (& __ratelimit , \"login\")"
            ),
            "{output}"
        );
        // The function's path only in the catalog's declaration (which names the `name`).
        assert_eq!(output.matches("type_name_of").count(), 1, "{output}");
        assert!(
            output.contains("Declaration { name : :: core :: option :: Option :: Some (\"login\")"),
            "{output}"
        );
        assert!(
            output.contains("my :: rt :: __private :: check (& L ,"),
            "{output}"
        );
        assert!(!output.contains("ratelimit_runtime"), "{output}");
        assert!(
            output
                .contains("let __ratelimit = (__ratelimit , :: core :: option :: Option :: None)"),
            "{output}"
        );
    }

    #[test]
    fn async_trait_methods_get_their_future_wrapped() {
        let item = quote! {
            fn get<'life0, 'async_trait>(&'life0 self, id: u64)
                -> ::core::pin::Pin<Box<dyn ::core::future::Future<Output = Result<u64, E>>
                    + ::core::marker::Send + 'async_trait>>
            where 'life0: 'async_trait, Self: 'async_trait
            {
                Box::pin(async move { body(id) })
            }
        };
        let output = expand_str(quote!(period = 1, threshold = 1, key = id), item);
        assert!(
            output.contains(
                "Self : 'async_trait { :: std :: boxed :: Box :: pin \
                 (:: ratelimit_runtime :: __private :: guarded ({ fn __ratelimit () { }"
            ),
            "{output}"
        );
        assert!(
            output.contains(
                ":: ratelimit_runtime :: __private :: owned_limiter \
                 (:: ratelimit_runtime :: __private :: global ()) ,) ; __ratelimit } ,"
            ),
            "{output}"
        );
        assert!(
            output.ends_with("{ Box :: pin (async move { body (id) }) } ,)) }"),
            "{output}"
        );
        assert!(!output.contains("compile_error"), "{output}");
    }

    #[test]
    fn a_plain_fn_returning_a_boxed_future_is_not_taken_for_async_trait() {
        let output = expand_str(
            quote!(period = 1, threshold = 1),
            quote! {
                fn get<'a>(&'a self) -> Pin<Box<dyn Future<Output = Result<u64, E>> + 'a>> {
                    Box::pin(async move { Ok(1) })
                }
            },
        );
        assert!(
            output.contains("`#[rate_limit]` only applies to `async fn`"),
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
        let as_written = format!("# [allow (unused_variables)] {item}");
        assert!(output.starts_with(&as_written), "{output}");
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
            output
                .starts_with("# [allow (unused_variables)] async fn f () -> Result < () , E > { }"),
            "{output}"
        );
        assert!(output.contains("not to `const fn`"), "{output}");
    }
}
