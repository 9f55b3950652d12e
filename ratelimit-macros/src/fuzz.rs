//! Property tests: whatever tokens `#[rate_limit]` is given, as arguments or as the item, it
//! returns (never panics), and it answers every mistake with a `compile_error!` while still
//! emitting the function as written.
//!
//! The inputs are valid attributes and items, mutated token by token (dropped, duplicated,
//! swapped with a neighbour, replaced, inserted, wrapped in or unwrapped from a group), and
//! random token trees: identifiers (keywords and argument names included), literals of every
//! kind (huge, negative, fractional, suffixed, strings with any character), punctuation,
//! lifetimes and nested groups.
//!
//! Bounded and deterministic: `CASES` cases per property from a fixed seed, no file written
//! on failure (proptest prints the shrunk input). For a longer or different run:
//! `RATELIMIT_FUZZ_CASES=100000 RATELIMIT_FUZZ_SEED=7 cargo test -p ratelimit-macros fuzz`.

use std::panic::{AssertUnwindSafe, catch_unwind};

use proc_macro2::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, RngSeed, TestCaseError};
use quote::ToTokens;

use crate::{args, expand, item};

/// Cases per property when `RATELIMIT_FUZZ_CASES` is not set.
const CASES: u32 = 2_000;

/// A number from the environment variable `name`, when set.
fn from_env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok()?.parse().ok()
}

fn config() -> Config {
    Config {
        cases: from_env("RATELIMIT_FUZZ_CASES").unwrap_or(CASES),
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(from_env("RATELIMIT_FUZZ_SEED").unwrap_or(0x5EED)),
        failure_persistence: None,
        max_shrink_iters: 4_096,
        ..Config::default()
    }
}

/// Valid attribute arguments, the starting points of the mutations.
const VALID_ARGS: &[&str] = &[
    r#"period = "1500ms", threshold = 10, key = user.id, name = "x", limiter = &L, crate = "a::b""#,
    "period = 30, threshold = 2",
    "period = 60, threshold = 5, key = user_id,",
    r#"period = "2m", threshold = 4294967295, key = (a, b).0, limiter = get(&self.limiters[0])"#,
    r#"period = 1, threshold = 1, key = format!("{}:{}", a, b), name = "login""#,
    r#"threshold = 3, period = "1h", key = { let x = 1; x }, limiter = LIMITER.get().unwrap()"#,
    r#"period = 0x10, threshold = 1u32, key = |x| x, crate = "::ratelimit_runtime""#,
    r#"period = 3155760000, threshold = 7, key = self.tenant.as_str(), limiter = &*self.limiter"#,
];

/// Valid `async fn`s of various shapes, and items that are not, to mutate.
const ITEMS: &[&str] = &[
    "async fn f() -> Result<(), E> { Ok(()) }",
    "pub(crate) async fn get<'a, T: Clone + 'a>(&'a self, id: T) -> anyhow::Result<&'a T> \
     where T: Send, { body(id).await }",
    "#[inline] #[doc = \"x\"] pub async fn m(self: Arc<Self>, (a, b): (u8, u8), Data(x): Data<T>) \
     -> Result<impl Trait, E> { let _ = (a, b, x); todo() }",
    "async unsafe extern \"C\" fn g(mut x: impl Display, _: &mut [u8]) -> R { x }",
    "#[must_use] async fn p(self: Pin<&mut Self>) -> io::Result<u8> { 1 }",
    "const async fn h() -> R {}",
    "fn not_async() -> R {}",
    "default async fn d(&mut self) -> R where Self: Sized {}",
    "async fn no_output() {}",
    "struct S { x: u8 }",
    "impl S { async fn f(&self) -> R {} }",
];

/// A token tree to build, kept as data so that proptest can print and shrink it.
#[derive(Clone, Debug)]
enum Tok {
    Leaf(TokenTree),
    /// `'name`: two tokens.
    Lifetime(String),
    Group(Delimiter, Vec<Tok>),
}

/// A change to a token sequence, at a node chosen among all of them (nested ones included).
#[derive(Clone, Debug)]
enum Mutation {
    Drop(Index),
    Duplicate(Index),
    SwapWithNext(Index),
    Replace(Index, Tok),
    Insert(Index, Tok),
    Wrap(Index, Delimiter),
    Unwrap(Index),
}

fn stream(toks: &[Tok]) -> TokenStream {
    let mut out = TokenStream::new();
    for tok in toks {
        match tok {
            Tok::Leaf(tree) => out.extend([tree.clone()]),
            Tok::Lifetime(name) => out.extend([
                TokenTree::Punct(Punct::new('\'', Spacing::Joint)),
                TokenTree::Ident(Ident::new(name, Span::call_site())),
            ]),
            Tok::Group(delimiter, inner) => {
                out.extend([TokenTree::Group(Group::new(*delimiter, stream(inner)))]);
            }
        }
    }
    out
}

fn toks(stream: TokenStream) -> Vec<Tok> {
    stream
        .into_iter()
        .map(|tree| match tree {
            TokenTree::Group(group) => Tok::Group(group.delimiter(), toks(group.stream())),
            leaf => Tok::Leaf(leaf),
        })
        .collect()
}

fn parse(text: &str) -> TokenStream {
    text.parse()
        .unwrap_or_else(|err| panic!("fixture {text:?} does not lex: {err}"))
}

/// The path of every node: indices from the top-level sequence down through groups.
fn paths(toks: &[Tok]) -> Vec<Vec<usize>> {
    fn walk(toks: &[Tok], prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        for (i, tok) in toks.iter().enumerate() {
            prefix.push(i);
            out.push(prefix.clone());
            if let Tok::Group(_, inner) = tok {
                walk(inner, prefix, out);
            }
            prefix.pop();
        }
    }
    let mut out = Vec::new();
    walk(toks, &mut Vec::new(), &mut out);
    out
}

/// The sequence holding the node at `path`, and the node's index in it.
fn siblings<'a>(toks: &'a mut Vec<Tok>, path: &[usize]) -> (&'a mut Vec<Tok>, usize) {
    let (&last, parents) = path.split_last().expect("a path is never empty");
    let mut sequence = toks;
    for &i in parents {
        sequence = match &mut sequence[i] {
            Tok::Group(_, inner) => inner,
            _ => unreachable!("paths only descend into groups"),
        };
    }
    (sequence, last)
}

fn mutate(toks: &mut Vec<Tok>, mutation: &Mutation) {
    let all = paths(toks);
    let index = match mutation {
        Mutation::Drop(i)
        | Mutation::Duplicate(i)
        | Mutation::SwapWithNext(i)
        | Mutation::Replace(i, _)
        | Mutation::Insert(i, _)
        | Mutation::Wrap(i, _)
        | Mutation::Unwrap(i) => i,
    };
    let Some(path) = (!all.is_empty()).then(|| &all[index.index(all.len())]) else {
        if let Mutation::Insert(_, tok) | Mutation::Replace(_, tok) = mutation {
            toks.push(tok.clone());
        }
        return;
    };
    let (sequence, i) = siblings(toks, path);
    match mutation {
        Mutation::Drop(_) => {
            sequence.remove(i);
        }
        Mutation::Duplicate(_) => sequence.insert(i, sequence[i].clone()),
        Mutation::SwapWithNext(_) => {
            if i + 1 < sequence.len() {
                sequence.swap(i, i + 1);
            }
        }
        Mutation::Replace(_, tok) => sequence[i] = tok.clone(),
        Mutation::Insert(_, tok) => sequence.insert(i, tok.clone()),
        Mutation::Wrap(_, delimiter) => {
            let inner = sequence.remove(i);
            sequence.insert(i, Tok::Group(*delimiter, vec![inner]));
        }
        Mutation::Unwrap(_) => {
            if let Tok::Group(_, inner) = sequence.remove(i) {
                for (offset, tok) in inner.into_iter().enumerate() {
                    sequence.insert(i + offset, tok);
                }
            }
        }
    }
}

/// Words the grammar gives meaning to, and keywords.
const WORDS: &[&str] = &[
    "period",
    "threshold",
    "key",
    "limiter",
    "name",
    "crate",
    "thresold",
    "limit",
    "self",
    "Self",
    "super",
    "fn",
    "async",
    "await",
    "const",
    "unsafe",
    "extern",
    "pub",
    "default",
    "struct",
    "impl",
    "where",
    "mut",
    "ref",
    "move",
    "dyn",
    "return",
    "let",
    "if",
    "match",
    "Result",
    "Ok",
    "Err",
    "_",
    "ünï",
    "r#type",
];

/// Duration units, integer and float suffixes, and nonsense, after a literal's digits.
const SUFFIXES: &[&str] = &[
    "", "", "", "u8", "u32", "u64", "u128", "i32", "usize", "ms", "s", "m", "h", "days", "f32",
    "f64", "e5", "e-3", ".5", ".0e10",
];

const ODD_STRINGS: &[&str] = &[
    "",
    "1500ms",
    "0s",
    "0ms",
    "abc",
    "10 parsecs",
    "1.5h",
    "-1s",
    "99999999999999999999999999999999999999999h",
    "876601h",
    " 10s",
    "10S",
    "::a::b",
    "a::",
    "::",
    "a b",
    "r#type",
    "self",
    "crate::x",
    "<T as U>::x",
    "🦀",
    "\0",
    "\"",
    "\\",
    "\u{202e}",
];

fn ident_text() -> impl Strategy<Value = String> {
    prop_oneof![
        select(WORDS).prop_map(str::to_owned),
        "[a-z][a-z0-9_]{0,8}",
        "_[A-Za-z0-9_]{1,6}",
    ]
}

fn ident(text: &str) -> TokenTree {
    let span = Span::call_site();
    TokenTree::Ident(match text.strip_prefix("r#") {
        Some(raw) => Ident::new_raw(raw, span),
        None => Ident::new(text, span),
    })
}

fn literal() -> impl Strategy<Value = Literal> {
    prop_oneof![
        any::<u64>().prop_map(Literal::u64_unsuffixed),
        any::<i64>().prop_map(Literal::i64_unsuffixed),
        (0_u32..3).prop_map(Literal::u32_unsuffixed),
        ("[0-9]{1,60}", select(SUFFIXES)).prop_map(|(digits, suffix)| {
            format!("{digits}{suffix}")
                .parse()
                .unwrap_or_else(|_| Literal::u64_unsuffixed(0))
        }),
        any::<f64>().prop_map(|x| Literal::f64_unsuffixed(if x.is_finite() { x } else { 0.5 })),
        any::<String>().prop_map(|text| Literal::string(&text)),
        select(ODD_STRINGS).prop_map(Literal::string),
        any::<char>().prop_map(Literal::character),
        any::<Vec<u8>>().prop_map(|bytes| Literal::byte_string(&bytes)),
    ]
}

fn punct() -> impl Strategy<Value = TokenTree> {
    (select(&b"+-*/%^!&|=<>@.,;:#$?~'"[..]), any::<bool>()).prop_map(|(ch, joint)| {
        let spacing = if joint {
            Spacing::Joint
        } else {
            Spacing::Alone
        };
        TokenTree::Punct(Punct::new(char::from(ch), spacing))
    })
}

fn delimiter() -> impl Strategy<Value = Delimiter> {
    select(
        &[
            Delimiter::Parenthesis,
            Delimiter::Brace,
            Delimiter::Bracket,
            Delimiter::None,
        ][..],
    )
}

fn tok() -> impl Strategy<Value = Tok> {
    let leaf = prop_oneof![
        3 => ident_text().prop_map(|text| Tok::Leaf(ident(&text))),
        3 => literal().prop_map(|lit| Tok::Leaf(TokenTree::Literal(lit))),
        3 => punct().prop_map(Tok::Leaf),
        1 => "[a-z]{1,4}".prop_map(Tok::Lifetime),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        (delimiter(), prop::collection::vec(inner, 0..6))
            .prop_map(|(delimiter, toks)| Tok::Group(delimiter, toks))
    })
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<Index>().prop_map(Mutation::Drop),
        any::<Index>().prop_map(Mutation::Duplicate),
        any::<Index>().prop_map(Mutation::SwapWithNext),
        (any::<Index>(), tok()).prop_map(|(i, tok)| Mutation::Replace(i, tok)),
        (any::<Index>(), tok()).prop_map(|(i, tok)| Mutation::Insert(i, tok)),
        (any::<Index>(), delimiter()).prop_map(|(i, d)| Mutation::Wrap(i, d)),
        any::<Index>().prop_map(Mutation::Unwrap),
    ]
}

/// Tokens to test: a fixture mutated `mutations` times, or random token trees.
#[derive(Clone, Debug)]
enum Input {
    Mutated(&'static str, Vec<Mutation>),
    Random(Vec<Tok>),
}

impl Input {
    fn tokens(&self) -> TokenStream {
        match self {
            Input::Mutated(fixture, mutations) => {
                let mut tokens = toks(parse(fixture));
                for mutation in mutations {
                    mutate(&mut tokens, mutation);
                }
                stream(&tokens)
            }
            Input::Random(tokens) => stream(tokens),
        }
    }
}

fn input(fixtures: &'static [&'static str], max_mutations: usize) -> impl Strategy<Value = Input> {
    prop_oneof![
        4 => (select(fixtures), prop::collection::vec(mutation(), 0..=max_mutations))
            .prop_map(|(fixture, mutations)| Input::Mutated(fixture, mutations)),
        1 => prop::collection::vec(tok(), 0..12).prop_map(Input::Random),
    ]
}

/// How many `compile_error!` invocations `tokens` holds at its top level.
fn compile_errors(tokens: &TokenStream) -> usize {
    tokens
        .clone()
        .into_iter()
        .filter(|tree| matches!(tree, TokenTree::Ident(ident) if ident == "compile_error"))
        .count()
}

/// The property, for one pair of inputs.
fn expands_without_panicking(args: &TokenStream, item: &TokenStream) -> Result<(), TestCaseError> {
    holds_for(expand::rate_limit, args, item)
}

/// The property for `expander` (the macro, or a broken stand-in that shows it can fail).
fn holds_for(
    expander: impl Fn(TokenStream, TokenStream) -> TokenStream,
    args: &TokenStream,
    item: &TokenStream,
) -> Result<(), TestCaseError> {
    let context = || format!("\n  args: {args}\n  item: {item}");
    let output = catch_unwind(AssertUnwindSafe(|| expander(args.clone(), item.clone()))).map_err(
        |panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            TestCaseError::fail(format!("the macro panicked: {message}{}", context()))
        },
    )?;
    let valid = args::parse(args.clone()).is_ok() && item::parse(item.clone()).is_ok();
    let errors = compile_errors(&output);
    let text = output.to_string();
    if valid {
        prop_assert_eq!(errors, 0, "valid input, yet errors: {}{}", text, context());
        // The body is kept as tokens, not parsed: only a function that parses makes an
        // expansion that must.
        if let Ok(original) = syn::parse2::<syn::ItemFn>(item.clone()) {
            let expanded = syn::parse2::<syn::ItemFn>(output.clone()).map_err(|err| {
                TestCaseError::fail(format!(
                    "the expansion is not a function ({err}): {text}{}",
                    context()
                ))
            })?;
            prop_assert_eq!(
                expanded.sig.to_token_stream().to_string(),
                original.sig.to_token_stream().to_string(),
                "the signature changed{}",
                context()
            );
        }
    } else {
        prop_assert!(
            errors >= 1,
            "invalid input, yet no error: {}{}",
            text,
            context()
        );
        // A function is still emitted as written (without a `const` the error is about),
        // its arguments allowed to be unused and the names they used kept used (see
        // `expand::as_written`).
        if let Ok(mut original) = syn::parse2::<syn::ItemFn>(item.clone()) {
            original.sig.constness = None;
            let text = without_kept_names(&text);
            let text = text
                .strip_prefix("# [allow (unused_variables)] ")
                .unwrap_or(&text);
            prop_assert!(
                text.starts_with(&item.to_string())
                    || text.starts_with(&original.to_token_stream().to_string()),
                "the function is not emitted as written: {}{}",
                text,
                context()
            );
        }
    }
    Ok(())
}

/// `text` without the underscore imports that keep the names of a rejected attribute's
/// arguments used (`names.rs`).
fn without_kept_names(text: &str) -> String {
    const KEPT: &str = "# [allow (unused_imports)] use ";
    let mut text = text.to_owned();
    while let Some(start) = text.find(KEPT) {
        let Some(end) = text[start..].find(" as _ ; ") else {
            break;
        };
        text.replace_range(start..start + end + " as _ ; ".len(), "");
    }
    text
}

proptest! {
    #![proptest_config(config())]

    /// Mutated and random attribute arguments, on valid functions.
    #[test]
    fn any_arguments(args in input(VALID_ARGS, 6), item in select(&ITEMS[..5])) {
        expands_without_panicking(&args.tokens(), &parse(item))?;
    }

    /// Mutated and random items, under mostly valid arguments.
    #[test]
    fn any_item(args in input(VALID_ARGS, 1), item in input(ITEMS, 6)) {
        expands_without_panicking(&args.tokens(), &item.tokens())?;
    }
}

/// The inputs above do reach both sides of the property: most mutations are caught as errors,
/// and some leave valid input that expands to a function.
#[test]
fn mutations_reach_valid_and_invalid_input() {
    let mut runner = proptest::test_runner::TestRunner::new(config());
    let strategy = input(VALID_ARGS, 2);
    let (mut valid, mut invalid) = (0, 0);
    for _ in 0..500 {
        let args = strategy
            .new_tree(&mut runner)
            .map(|tree| tree.current().tokens())
            .unwrap_or_default();
        match args::parse(args) {
            Ok(_) => valid += 1,
            Err(_) => invalid += 1,
        }
    }
    assert!(
        valid >= 25 && invalid >= 25,
        "valid {valid}, invalid {invalid}"
    );
}

/// The property fails, naming the input, for an expander that panics, that lets a mistake
/// through, or that drops the function.
#[test]
fn the_property_catches_panics_and_silent_or_lost_output() {
    let item = parse(ITEMS[0]);
    let bad_args = parse("period = 0, threshold = 1");
    let failure = |result: Result<(), TestCaseError>| match result {
        Err(TestCaseError::Fail(reason)) => reason.message().to_owned(),
        other => panic!("expected a failure, got {other:?}"),
    };
    let panicked = failure(holds_for(|_, _| panic!("boom"), &bad_args, &item));
    assert!(
        panicked.starts_with("the macro panicked: boom"),
        "{panicked}"
    );
    assert!(panicked.contains("period = 0"), "{panicked}");
    let silent = failure(holds_for(|_, item| item, &bad_args, &item));
    assert!(
        silent.starts_with("invalid input, yet no error"),
        "{silent}"
    );
    let lost = failure(holds_for(
        |_, _| quote::quote!(::core::compile_error! { "x" }),
        &bad_args,
        &item,
    ));
    assert!(
        lost.starts_with("the function is not emitted as written"),
        "{lost}"
    );
    assert!(holds_for(expand::rate_limit, &bad_args, &item).is_ok());
}
