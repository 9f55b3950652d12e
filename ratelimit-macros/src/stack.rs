//! Stacked `#[rate_limit]` attributes: the outermost one, expanding first, takes the others
//! off the function and checks them together with its own, as one check of several limits.
//! What the stacked attributes must agree on is checked here: one limiter, one runtime path,
//! at most one `decision`, no limit, `name` or `label` given twice.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{Attribute, Expr, Ident, Meta, Path};

use crate::args::{self, Args, RateArg};

/// The limits of one function, outermost first, with what they share.
pub(crate) struct Limits {
    /// Each attribute's arguments, in source order (the outermost first). Not empty.
    pub(crate) limits: Vec<Args>,
    /// The one limiter, given on any of them.
    pub(crate) limiter: Option<Expr>,
    /// The runtime's path, given on any of them.
    pub(crate) krate: Option<Path>,
    /// The binding of the decisions, given on at most one of them.
    pub(crate) decision: Option<Ident>,
    /// How long a denied call waits for a slot (µs), given on any of them, the same on each.
    pub(crate) wait: Option<u64>,
}

impl Limits {
    /// Whether the function has one limit in the plain form (see [`Args::is_plain`]).
    pub(crate) fn is_plain(&self) -> bool {
        self.limits.len() == 1 && self.limits[0].is_plain()
    }
}

/// Whether `attr` is `#[rate_limit(..)]`, by any path (`#[ratelimit_runtime::rate_limit]`).
pub(crate) fn is_rate_limit(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|segment| segment.ident == "rate_limit")
}

/// The function's limits: `first`, the arguments of the attribute being expanded, and those of
/// the `#[rate_limit]`s among `attrs`, which are removed from it (the expansion checks them).
///
/// # Errors
///
/// Every mistake in the other attributes' arguments, and every disagreement between the
/// attributes, one error each, at the offending token.
pub(crate) fn collect(first: Args, attrs: &mut Vec<Attribute>) -> syn::Result<Limits> {
    let mut errors: Vec<syn::Error> = Vec::new();
    // Each limit with the tokens an error about it as a whole points at (`None`: the
    // attribute being expanded, which is already reported as a whole by its own spans).
    let mut limits: Vec<(Args, Option<TokenStream>)> = vec![(first, None)];
    let mut kept = Vec::with_capacity(attrs.len());
    for attr in attrs.drain(..) {
        if !is_rate_limit(&attr) {
            kept.push(attr);
            continue;
        }
        let parsed = match &attr.meta {
            Meta::List(list) => args::parse(list.tokens.clone()),
            Meta::Path(_) | Meta::NameValue(_) => Err(syn::Error::new_spanned(
                &attr,
                "`#[rate_limit]` needs arguments, e.g. `#[rate_limit(period = 60, threshold = 10)]`",
            )),
        };
        match parsed {
            Ok(args) => limits.push((args, Some(attr.to_token_stream()))),
            Err(err) => errors.push(err),
        }
    }
    *attrs = kept;

    let limiter = agree(
        &limits,
        |args| args.limiter.as_ref(),
        "limiter",
        &mut errors,
    );
    let krate = agree(&limits, |args| args.krate.as_ref(), "crate", &mut errors);
    let mut wait: Option<u64> = None;
    for (args, _) in &limits {
        match (wait, &args.wait) {
            (Some(first), Some((again, tokens))) if first != *again => {
                errors.push(syn::Error::new_spanned(
                    tokens,
                    "stacked `#[rate_limit]`s are one check, which waits once: this `wait` \
                     differs from the one on another `#[rate_limit]` of this function; give \
                     `wait` once, on any of them",
                ));
            }
            (None, Some((first, _))) => wait = Some(*first),
            _ => {}
        }
    }
    if wait.is_some() {
        for (args, _) in &limits {
            if let Some((_, tokens)) = args.count.as_ref().filter(|_| args.counts_by_outcome()) {
                errors.push(syn::Error::new_spanned(
                    tokens,
                    "`wait` cannot be combined with counting by outcome yet: while calls are \
                     in flight their reservations fill the window, and a waiter would sleep \
                     for the window's oldest one to leave (up to a whole period) although \
                     refunds may free the slots in milliseconds; remove `wait`, or count every \
                     call",
                ));
            }
        }
    }
    // Only shadow limits: nothing is enforced, so nothing waits and no decision is made.
    if limits.iter().all(|(args, _)| args.shadow) {
        for (args, _) in &limits {
            if let Some((_, tokens)) = &args.wait {
                errors.push(syn::Error::new_spanned(
                    tokens,
                    "`wait` has nothing to wait for: a shadow limit never denies, and every \
                     limit of this function is one; remove `wait`",
                ));
            }
            if let Some(decision) = &args.decision {
                errors.push(syn::Error::new_spanned(
                    decision,
                    "`decision` would always be empty: shadow limits stay out of the \
                     decisions, and every limit of this function is one; remove `decision`",
                ));
            }
        }
    }
    let mut decision: Option<Ident> = None;
    for (args, _) in &limits {
        match (&decision, &args.decision) {
            (Some(_), Some(again)) => errors.push(syn::Error::new_spanned(
                again,
                "`decision` is already given on another `#[rate_limit]` of this function: \
                 one binding holds every limit's decision; remove this one",
            )),
            (None, Some(first)) => decision = Some(first.clone()),
            _ => {}
        }
    }
    for (j, (later, whole)) in limits.iter().enumerate().skip(1) {
        let earlier = &limits[..j];
        let repeated = earlier.iter().any(|(args, _)| same_limit(args, later));
        if let Some(whole) = whole
            && repeated
        {
            errors.push(syn::Error::new_spanned(
                whole,
                "this limit repeats another `#[rate_limit]` of this function (the same key, \
                 rate and name): every call would be counted twice in one log; remove one",
            ));
        } else if let Some(name) = &later.name
            && earlier.iter().any(|(args, _)| {
                args.name
                    .as_ref()
                    .is_some_and(|n| n.value() == name.value())
            })
        {
            errors.push(syn::Error::new_spanned(
                name,
                "another `#[rate_limit]` of this function has this `name`: two stacked \
                 limits of one name share a log wherever their keys and periods meet; give \
                 each its own `name`, or none (a stacked limit's default scope is the \
                 function's path and its position)",
            ));
        }
        if let Some(label) = &later.label
            && earlier.iter().any(|(args, _)| {
                args.label
                    .as_ref()
                    .is_some_and(|l| l.value() == label.value())
            })
        {
            errors.push(syn::Error::new_spanned(
                label,
                "another `#[rate_limit]` of this function has this `label`: each limit's \
                 policy needs a name of its own in the `RateLimit` fields",
            ));
        }
    }
    let mut all: Option<syn::Error> = None;
    for err in errors {
        match &mut all {
            Some(all) => all.combine(err),
            None => all = Some(err),
        }
    }
    if let Some(all) = all {
        return Err(all);
    }
    Ok(Limits {
        limits: limits.into_iter().map(|(args, _)| args).collect(),
        limiter,
        krate,
        decision,
        wait,
    })
}

/// The value of an argument that stacked attributes share (`limiter`, `crate`): given on any
/// of them, and identical where given on several; an error at each one that differs.
fn agree<T: ToTokens + Clone>(
    limits: &[(Args, Option<TokenStream>)],
    get: impl Fn(&Args) -> Option<&T>,
    argument: &str,
    errors: &mut Vec<syn::Error>,
) -> Option<T> {
    let mut found: Option<&T> = None;
    for (args, _) in limits {
        let Some(value) = get(args) else { continue };
        match found {
            None => found = Some(value),
            Some(first) if tokens(first) == tokens(value) => {}
            Some(_) => errors.push(syn::Error::new_spanned(
                value,
                format!(
                    "stacked `#[rate_limit]`s check one call against one limiter (all or \
                     nothing across two stores would be a distributed transaction), but this \
                     `{argument}` differs from the one on another `#[rate_limit]` of this \
                     function; give `{argument}` once, on any of them"
                ),
            )),
        }
    }
    found.cloned()
}

/// Whether two attributes describe the same limit: the same key, rate and name.
fn same_limit(a: &Args, b: &Args) -> bool {
    let rates = match (&a.rate, &b.rate) {
        (RateArg::Fixed { .. }, RateArg::Fixed { .. }) => {
            fixed(&a.rate) == fixed(&b.rate) && fixed(&a.rate).is_some()
        }
        (RateArg::Expr(x), RateArg::Expr(y)) => tokens(x) == tokens(y),
        (
            RateArg::Concurrency { max, slot_time_us },
            RateArg::Concurrency {
                max: other,
                slot_time_us: other_time,
            },
        ) => (max, slot_time_us) == (other, other_time),
        _ => false,
    };
    rates
        && a.key.as_ref().map(tokens) == b.key.as_ref().map(tokens)
        && a.name.as_ref().map(syn::LitStr::value) == b.name.as_ref().map(syn::LitStr::value)
}

fn fixed(rate: &RateArg) -> Option<(u64, u64, bool)> {
    match rate {
        RateArg::Fixed {
            period_us,
            threshold,
            counter,
            ..
        } => Some((*period_us, *threshold, *counter)),
        RateArg::Expr(_) | RateArg::Concurrency { .. } => None,
    }
}

/// `value`'s tokens as text, for comparing two expressions as written.
fn tokens(value: &impl ToTokens) -> String {
    value.to_token_stream().to_string()
}

#[cfg(test)]
mod tests {
    use quote::quote;
    use syn::parse::Parser;

    use super::*;

    fn attrs(tokens: TokenStream) -> Vec<Attribute> {
        Attribute::parse_outer.parse2(tokens).unwrap()
    }

    fn collected(first: TokenStream, rest: TokenStream) -> syn::Result<(Limits, Vec<Attribute>)> {
        let first = args::parse(first)?;
        let mut rest = attrs(rest);
        let limits = collect(first, &mut rest)?;
        Ok((limits, rest))
    }

    fn errors_of(first: TokenStream, rest: TokenStream) -> Vec<String> {
        match collected(first, rest) {
            Ok(_) => Vec::new(),
            Err(err) => err.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn takes_the_other_attributes_off_and_keeps_the_rest() {
        let (limits, rest) = collected(
            quote!(period = 1, threshold = 5, key = user),
            quote! {
                #[doc = "x"]
                #[rate_limit(period = "1d", threshold = 1000, key = user, limiter = &L)]
                #[inline]
                #[ratelimit_runtime::rate_limit(rate = plan.rate(), decision = d)]
            },
        )
        .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(limits.limits.len(), 3);
        assert_eq!(tokens(&limits.limiter), "& L");
        assert_eq!(limits.decision.map(|d| d.to_string()).as_deref(), Some("d"));
        assert!(!limits.limits.is_empty());
        let kept: Vec<String> = rest.iter().map(tokens).collect();
        assert_eq!(kept, ["# [doc = \"x\"]", "# [inline]"]);
    }

    #[test]
    fn one_limit_in_the_plain_form() {
        let (limits, _) = collected(quote!(period = 1, threshold = 5), quote!()).unwrap();
        assert!(limits.is_plain());
        let (limits, _) = collected(
            quote!(period = 1, threshold = 5),
            quote!(#[rate_limit(period = 2, threshold = 5)]),
        )
        .unwrap();
        assert!(!limits.is_plain());
    }

    #[test]
    fn stacked_attributes_must_agree() {
        assert_eq!(
            errors_of(
                quote!(period = 1, threshold = 5, limiter = &A),
                quote!(#[rate_limit(period = 2, threshold = 5, limiter = &B)]),
            ),
            [
                "stacked `#[rate_limit]`s check one call against one limiter (all or nothing \
              across two stores would be a distributed transaction), but this `limiter` \
              differs from the one on another `#[rate_limit]` of this function; give \
              `limiter` once, on any of them"
            ]
        );
        assert!(
            errors_of(
                quote!(period = 1, threshold = 5, limiter = &A),
                quote!(#[rate_limit(period = 2, threshold = 5, limiter = &A)]),
            )
            .is_empty()
        );
        assert_eq!(
            errors_of(
                quote!(period = 1, threshold = 5, decision = d),
                quote!(#[rate_limit(period = 2, threshold = 5, decision = e)]),
            )
            .len(),
            1
        );
        assert_eq!(
            errors_of(
                quote!(period = 1, threshold = 5, key = u),
                quote!(#[rate_limit(period = 1, threshold = 5, key = u)]),
            ),
            [
                "this limit repeats another `#[rate_limit]` of this function (the same key, rate \
              and name): every call would be counted twice in one log; remove one"
            ]
        );
        // Another key, threshold or name is another limit.
        for other in [
            quote!(#[rate_limit(period = 1, threshold = 5, key = v)]),
            quote!(#[rate_limit(period = 1, threshold = 6, key = u)]),
            quote!(#[rate_limit(period = 1, threshold = 5, key = u, name = "n")]),
        ] {
            assert!(
                errors_of(quote!(period = 1, threshold = 5, key = u), other.clone()).is_empty(),
                "{other}"
            );
        }
        assert_eq!(
            errors_of(
                quote!(period = 1, threshold = 5, name = "api"),
                quote!(#[rate_limit(period = 2, threshold = 5, name = "api")]),
            )
            .len(),
            1
        );
        assert_eq!(
            errors_of(
                quote!(period = 1, threshold = 5, name = "api"),
                quote!(#[rate_limit(period = 1, threshold = 5, name = "api")]),
            ),
            [
                "this limit repeats another `#[rate_limit]` of this function (the same key, rate \
              and name): every call would be counted twice in one log; remove one"
            ]
        );
        assert_eq!(
            errors_of(
                quote!(period = 1, threshold = 5, label = "a"),
                quote!(#[rate_limit(period = 2, threshold = 5, label = "a")]),
            )
            .len(),
            1
        );
        // `#`, `{` and `}` (a stacked key's position and hash tag) are refused by `name`
        // itself, stacked or not.
        let errors = errors_of(
            quote!(period = 1, threshold = 5, name = "a#1"),
            quote!(#[rate_limit(period = 2, threshold = 5, name = "b")]),
        );
        assert!(
            errors.len() == 1 && errors[0].starts_with("`name` must not contain `#`"),
            "{errors:?}"
        );
        assert_eq!(
            errors_of(quote!(period = 1, threshold = 5), quote!(#[rate_limit])),
            ["`#[rate_limit]` needs arguments, e.g. `#[rate_limit(period = 60, threshold = 10)]`"]
        );
        assert_eq!(
            errors_of(
                quote!(period = 1, threshold = 5),
                quote!(#[rate_limit(period = 1, thresold = 5)]),
            ),
            ["unknown argument `thresold`; did you mean `threshold`?"]
        );
    }
}
