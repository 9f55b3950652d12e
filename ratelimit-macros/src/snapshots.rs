//! Expansion snapshots: each fixture `tests/expand/<case>.rs` (Rust source holding one function
//! under `#[rate_limit(...)]`, free or in an `impl` block) is expanded by [`expand::rate_limit`],
//! pretty-printed with `prettyplease`, and compared with the committed
//! `tests/expand/<case>.expanded.rs`. A change in the generated code fails with a line diff.
//!
//! After an intended change, rewrite the expected files and review their diff:
//!
//! ```text
//! RATELIMIT_BLESS=1 cargo test -p ratelimit-macros snapshots
//! ```
//!
//! A new fixture needs no registration: every `tests/expand/*.rs` that is not an
//! `.expanded.rs` is a case, and blessing writes its expected file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use proc_macro2::TokenStream;
use syn::parse::{ParseStream, Parser};
use syn::{ImplItem, Item, Meta};

use crate::expand;

/// Set (to anything but `0`) to rewrite the expected files instead of comparing with them.
const BLESS: &str = "RATELIMIT_BLESS";

const HEADER: &str = "// The expansion of the fixture beside this file, pretty-printed; \
                      regenerate with\n// `RATELIMIT_BLESS=1 cargo test -p ratelimit-macros \
                      snapshots` and review the diff.\n\n";

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/expand")
}

/// The fixtures, sorted by name.
fn cases() -> Vec<PathBuf> {
    let dir = fixtures_dir();
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", dir.display()));
    let mut cases: Vec<PathBuf> = entries
        .map(|entry| entry.expect("a readable directory entry").path())
        .filter(|path| {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.ends_with(".rs") && !name.ends_with(".expanded.rs")
        })
        .collect();
    cases.sort();
    cases
}

/// The `#[rate_limit(...)]` attribute taken off `attrs`: its arguments, if it was there.
fn take_rate_limit(attrs: &mut Vec<syn::Attribute>) -> Option<TokenStream> {
    let position = attrs
        .iter()
        .position(|attr| attr.path().is_ident("rate_limit"))?;
    Some(match attrs.remove(position).meta {
        Meta::List(list) => list.tokens,
        Meta::Path(_) => TokenStream::new(),
        Meta::NameValue(value) => panic!(
            "`#[rate_limit = ...]` is not a fixture shape: {}",
            quote::ToTokens::to_token_stream(&value)
        ),
    })
}

fn parse_all<T: syn::parse::Parse>(tokens: TokenStream) -> syn::Result<Vec<T>> {
    (|input: ParseStream| {
        let mut all = Vec::new();
        while !input.is_empty() {
            all.push(input.parse()?);
        }
        Ok(all)
    })
    .parse2(tokens)
}

/// Expands the one function under `#[rate_limit]` in `items` in place; `false` if none is.
fn expand_in(items: &mut Vec<Item>) -> bool {
    for index in 0..items.len() {
        match &mut items[index] {
            Item::Fn(function) => {
                let Some(args) = take_rate_limit(&mut function.attrs) else {
                    continue;
                };
                let output = expand::rate_limit(args, quote::quote!(#function));
                let expanded = parse_all::<Item>(output.clone()).unwrap_or_else(|err| {
                    panic!("the expansion is not a list of items ({err}):\n{output}")
                });
                items.splice(index..=index, expanded);
                return true;
            }
            Item::Impl(block) => {
                for member in 0..block.items.len() {
                    let ImplItem::Fn(method) = &mut block.items[member] else {
                        continue;
                    };
                    let Some(args) = take_rate_limit(&mut method.attrs) else {
                        continue;
                    };
                    let output = expand::rate_limit(args, quote::quote!(#method));
                    let expanded = parse_all::<ImplItem>(output.clone()).unwrap_or_else(|err| {
                        panic!("the expansion is not a list of impl items ({err}):\n{output}")
                    });
                    block.items.splice(member..=member, expanded);
                    return true;
                }
            }
            Item::Mod(module) => {
                if let Some((_, inner)) = &mut module.content
                    && expand_in(inner)
                {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// The expected file's text for the fixture at `path`.
fn expanded(path: &Path) -> String {
    let source = std::fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    let mut file = syn::parse_file(&source)
        .unwrap_or_else(|err| panic!("{} does not parse: {err}", path.display()));
    assert!(
        expand_in(&mut file.items),
        "{} has no function under `#[rate_limit]`",
        path.display()
    );
    format!("{HEADER}{}", prettyplease::unparse(&file))
}

/// `expected` and `actual` line by line, unchanged lines shown only near a change: `-` lines
/// are expected but missing, `+` lines are new.
fn diff(expected: &str, actual: &str) -> String {
    let old: Vec<&str> = expected.lines().collect();
    let new: Vec<&str> = actual.lines().collect();
    // Longest common subsequence, from the ends.
    let mut lcs = vec![vec![0_usize; new.len() + 1]; old.len() + 1];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            lcs[i][j] = if old[i] == new[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut lines: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        if i < old.len() && j < new.len() && old[i] == new[j] {
            lines.push((' ', old[i]));
            i += 1;
            j += 1;
        } else if i < old.len() && (j == new.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            lines.push(('-', old[i]));
            i += 1;
        } else {
            lines.push(('+', new[j]));
            j += 1;
        }
    }
    const CONTEXT: usize = 3;
    let near_change = |at: usize| {
        let from = at.saturating_sub(CONTEXT);
        let to = (at + CONTEXT + 1).min(lines.len());
        lines[from..to].iter().any(|(mark, _)| *mark != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (at, (mark, line)) in lines.iter().enumerate() {
        if near_change(at) {
            let _ = writeln!(out, "{mark} {line}");
            skipped = false;
        } else if !skipped {
            out.push_str("  ...\n");
            skipped = true;
        }
    }
    out
}

#[test]
fn expansions_match_their_snapshots() {
    let bless = std::env::var(BLESS).is_ok_and(|value| value != "0");
    let cases = cases();
    assert!(
        !cases.is_empty(),
        "no fixture in {}",
        fixtures_dir().display()
    );
    let mut failures = Vec::new();
    for case in cases {
        let actual = expanded(&case);
        let expected_path = case.with_extension("expanded.rs");
        let name = case.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        if bless {
            std::fs::write(&expected_path, &actual)
                .unwrap_or_else(|err| panic!("cannot write {}: {err}", expected_path.display()));
            continue;
        }
        match std::fs::read_to_string(&expected_path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!(
                "{name}: the expansion changed (- expected, + actual):\n{}",
                diff(&expected, &actual)
            )),
            Err(err) => failures.push(format!(
                "{name}: no snapshot at {} ({err}); its expansion is:\n{actual}",
                expected_path.display()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{}\nIf the change is intended, run `{BLESS}=1 cargo test -p ratelimit-macros \
         snapshots` and review the rewritten files.",
        failures.join("\n")
    );
}

#[test]
fn the_diff_shows_changed_lines_with_their_context() {
    let expected = "a\nb\nc\nd\ne\nf\ng\nh\ni\n";
    let actual = "a\nb\nc\nd\ne\nF\ng\nh\ni\nj\n";
    assert_eq!(
        diff(expected, actual),
        "  ...\n  c\n  d\n  e\n- f\n+ F\n  g\n  h\n  i\n+ j\n"
    );
    assert_eq!(diff("same\n", "same\n"), "  ...\n");
}
