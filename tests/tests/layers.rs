//! The crates' layering, against CONTRIBUTING.md's "Architecture": every file of
//! `ratelimit-runtime/src` and `ratelimit-macros/src` is listed there, and names (by any `crate::`, `super::` or
//! `self::` path outside comments, literals and test modules) only files listed above it,
//! through their module paths: `crate::Limiter` (a root re-export) would hide which file a
//! file depends on. A `mod.rs` comes after its children, which it names by bare paths. Not
//! seen: methods called across files (an `impl` written in another file, as `Rate::new` in
//! `error.rs`), which the lists order by hand.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A crate's files: their path under `src/` (with `/`), and their text.
type Files = BTreeMap<String, String>;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is in the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, by its path relative to `dir`.
fn read_files(dir: &Path) -> Files {
    fn walk(root: &Path, dir: &Path, files: &mut Files) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(root, &path, files);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let relative = path.strip_prefix(root).expect("under the root");
                let name = relative.to_string_lossy().replace('\\', "/");
                let text = std::fs::read_to_string(&path).expect("a readable source file");
                files.insert(name, text);
            }
        }
    }
    let mut files = Files::new();
    walk(dir, dir, &mut files);
    files
}

/// The files CONTRIBUTING.md lists under the heading "### `<src>`", in order.
fn listed(contributing: &str, src: &str) -> Vec<String> {
    let heading = format!("### `{src}`");
    let (_, section) = contributing
        .split_once(&heading)
        .unwrap_or_else(|| panic!("CONTRIBUTING.md has no section {heading}"));
    let section = section.split("\n#").next().unwrap_or(section);
    section
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("- `")?;
            let (file, _) = rest.split_once('`')?;
            Some(file.to_owned())
        })
        .collect()
}

/// The module path of each file: `store/redis/mod.rs` is `store::redis`, `lib.rs` the root;
/// a `#[path = "file.rs"] mod name;` names its file's module.
fn modules(files: &Files) -> BTreeMap<String, Vec<String>> {
    let mut modules: BTreeMap<String, Vec<String>> = files
        .keys()
        .map(|file| {
            let mut path: Vec<String> = file
                .trim_end_matches(".rs")
                .split('/')
                .map(str::to_owned)
                .collect();
            if matches!(path.last().map(String::as_str), Some("mod" | "lib")) {
                path.pop();
            }
            (file.clone(), path)
        })
        .collect();
    for (file, text) in files {
        let dir = file.rsplit_once('/').map_or("", |(dir, _)| dir);
        let mut lines = text.lines().map(str::trim);
        while let Some(line) = lines.next() {
            let Some(target) = line
                .strip_prefix("#[path = \"")
                .and_then(|rest| rest.strip_suffix("\"]"))
            else {
                continue;
            };
            let declaration = lines.find(|line| !line.starts_with("#["));
            let name = declaration
                .and_then(|line| line.trim_start_matches("pub ").strip_prefix("mod "))
                .map(|name| name.trim_end_matches(';'));
            if let Some(name) = name {
                let target = if dir.is_empty() {
                    target.to_owned()
                } else {
                    format!("{dir}/{target}")
                };
                let mut module = modules[file].clone();
                module.push(name.to_owned());
                modules.insert(target, module);
            }
        }
    }
    modules
}

/// `text` as code only: comments (doc comments included), string and character literals
/// blanked out (newlines kept), and `#[cfg(test)] mod <name> { .. }` blocks removed.
fn code(text: &str) -> String {
    let code = blank_comments_and_literals(text);
    without_test_modules(&code)
}

/// `text` with its comments and the insides of its string and character literals replaced by
/// spaces, so that a `//` or a `crate::` inside a string is not taken for code.
fn blank_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && matches!(next, Some('"' | '#'))
            && (i == 0 || !is_ident_char(chars[i - 1]) || chars[i - 1] == 'b')
        {
            // A raw string: r"..", r#".."#, ...
            let hashes = chars[i + 1..].iter().take_while(|&&c| c == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let closing: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            out.push('r');
            i += 1;
            for _ in 0..=hashes {
                out.push(' ');
                i += 1;
            }
            while i < chars.len() && !chars[i..].starts_with(&closing) {
                out.push(blank(chars[i]));
                i += 1;
            }
            for _ in 0..closing.len().min(chars.len() - i) {
                out.push(' ');
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            let end = if next == Some('\\') {
                // Past the escaped character, which may itself be a quote ('\'').
                chars
                    .get(i + 3..)
                    .and_then(|rest| rest.iter().position(|&c| c == '\''))
                    .map(|at| i + 3 + at)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    for _ in i..=end {
                        out.push(' ');
                    }
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `code` (already blanked by [`blank_comments_and_literals`]) without its
/// `#[cfg(test)] mod <name> { .. }` blocks: tests may import anything.
fn without_test_modules(code: &str) -> String {
    let mut out = code.to_owned();
    while let Some(at) = out.find("#[cfg(test)]") {
        let rest = &out[at + "#[cfg(test)]".len()..];
        let trimmed = rest.trim_start();
        let Some(after_mod) = trimmed.strip_prefix("mod ") else {
            // `#[cfg(test)]` on something else (a declaration `mod fuzz;`, an item): keep it,
            // but look past it.
            out.replace_range(at..at + "#[cfg(test)]".len(), &" ".repeat(12));
            continue;
        };
        let name_end = after_mod
            .find(|c: char| !is_ident_char(c))
            .unwrap_or(after_mod.len());
        let after_name = after_mod[name_end..].trim_start();
        if !after_name.starts_with('{') {
            out.replace_range(at..at + "#[cfg(test)]".len(), &" ".repeat(12));
            continue;
        }
        let open = out.len() - after_name.len();
        let mut depth = 0;
        let mut close = out.len();
        for (offset, c) in out[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + offset + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.replace_range(at..close, "");
    }
    out
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The leading module segments (lowercase identifiers) of `path`, and whether it goes on with a
/// name that is not a module (a type or function at that level: `Limiter`, `rate_limit` aside).
fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(str::trim)
        .take_while(|segment| {
            !segment.is_empty()
                && segment.chars().all(is_ident_char)
                && segment.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        })
        .map(str::to_owned)
        .collect()
}

/// The paths `text` names after `anchor` (`crate::`, `super::` or `self::`): each a list of
/// segments; a `{a, b::c}` group gives each of its items.
fn paths_after(text: &str, anchor: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find(anchor) {
        let at = from + found;
        from = at + anchor.len();
        let before = text[..at].chars().next_back();
        let after = &text[from..];
        if before.is_some_and(|c| is_ident_char(c) || c == '$' || c == ':') {
            continue;
        }
        if let Some(group) = after.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            let mut item_depth = 0;
            let mut start = 0;
            for (i, c) in group[..end].char_indices() {
                match c {
                    '{' => item_depth += 1,
                    '}' => item_depth -= 1,
                    ',' if item_depth == 0 => {
                        paths.push(group[start..i].trim().to_owned());
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            paths.push(group[start..end].trim().to_owned());
        } else {
            let end = after
                .find(|c: char| !(is_ident_char(c) || c == ':'))
                .unwrap_or(after.len());
            paths.push(after[..end].to_owned());
        }
    }
    paths.retain(|path| !path.is_empty());
    paths
}

/// What is wrong with `files` against the order `listed`: files not listed (or listed but
/// missing), imports of files not listed above the importer, and imports through the crate
/// root's re-exports.
fn violations(files: &Files, listed: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    for file in files.keys() {
        let times = listed.iter().filter(|listed| *listed == file).count();
        if times != 1 {
            problems.push(format!(
                "{file} is listed {times} times in CONTRIBUTING.md's Architecture"
            ));
        }
    }
    for file in listed {
        if !files.contains_key(file) {
            problems.push(format!(
                "{file} is listed in CONTRIBUTING.md but does not exist"
            ));
        }
    }
    // A `mod.rs` names its children by bare paths (`script::run`): it comes after them all.
    for (rank, file) in listed.iter().enumerate() {
        let dir = match file.strip_suffix("mod.rs") {
            Some(dir) => dir,
            None if file == "lib.rs" => "",
            None => continue,
        };
        for (child_rank, child) in listed.iter().enumerate() {
            if child != file && child.starts_with(dir) && child_rank > rank {
                problems.push(format!("{file} is listed above its child {child}"));
            }
        }
    }
    let modules = modules(files);
    let file_of = |module: &[String]| {
        (0..=module.len()).rev().find_map(|len| {
            modules
                .iter()
                .find(|(_, path)| path.as_slice() == &module[..len])
                .map(|(file, _)| file.clone())
        })
    };
    for (rank, file) in listed.iter().enumerate() {
        let (Some(text), Some(module)) = (files.get(file), modules.get(file)) else {
            continue;
        };
        // `super::` is the parent module, `self::` the file's own (for a `mod.rs`, its
        // directory's).
        let parent = module[..module.len().saturating_sub(1)].to_vec();
        let own = module.clone();
        let code = code(text);
        let mut targets = Vec::new();
        for (anchor, base) in [
            ("crate::", Vec::new()),
            ("super::", parent),
            ("self::", own),
        ] {
            for path in paths_after(&code, anchor) {
                let mut base = base.clone();
                let mut rest = path.as_str();
                while let Some(further) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = further;
                }
                let names = segments(rest);
                if anchor == "crate::" && names.is_empty() {
                    problems.push(format!(
                        "{file} imports `crate::{path}` through the crate root: name its module"
                    ));
                    continue;
                }
                let mut full = base;
                full.extend(names);
                targets.push((format!("{anchor}{path}"), full));
            }
        }
        for (written, target) in targets {
            let Some(target_file) = file_of(&target) else {
                continue;
            };
            if &target_file == file {
                continue;
            }
            let target_rank = listed.iter().position(|listed| *listed == target_file);
            if target_rank.is_none_or(|target_rank| target_rank > rank) {
                problems.push(format!(
                    "{file} imports {target_file} (`{written}`), which is not listed above it"
                ));
            }
        }
    }
    problems
}

fn check_crate(src: &str) {
    let contributing =
        std::fs::read_to_string(workspace().join("CONTRIBUTING.md")).expect("CONTRIBUTING.md");
    let files = read_files(&workspace().join(src));
    let listed = listed(&contributing, src);
    let problems = violations(&files, &listed);
    assert!(
        problems.is_empty(),
        "{src} against CONTRIBUTING.md's Architecture:\n{}",
        problems.join("\n")
    );
    eprintln!(
        "{src}: {} files in layers, none importing upwards",
        files.len()
    );
}

#[test]
fn the_runtimes_files_import_only_the_layers_below_them() {
    check_crate("ratelimit-runtime/src");
}

#[test]
fn the_macros_files_import_only_the_layers_below_them() {
    check_crate("ratelimit-macros/src");
}

/// The check itself finds what it must: an upward import, a root re-export, a file left out,
/// a `mod.rs` above its children, an import after a test module or a `//` in a string; and
/// it reads groups, `super::`, `self::` and `#[path]` modules, and skips comments, strings
/// and test modules.
#[test]
fn the_check_finds_upward_imports_cycles_and_root_imports() {
    let files: Files = [
        (
            "lib.rs",
            "#[path = \"private.rs\"]\npub mod __private;\nmod a;\nmod b;\nmod c;",
        ),
        ("a.rs", "use crate::{b::B, c};\n// use crate::d;\n"),
        (
            "b.rs",
            "use crate::a::A;\n#[cfg(test)]\nmod tests {\n    use crate::c::C;\n}\n\
             const URL: &str = \"redis://\"; use crate::c::d::D;\n\
             const S: &str = r#\"crate::c \"quoted\"\"#; const Q: char = '\\'';",
        ),
        ("c/mod.rs", "mod d;\nuse self::d::D;\nuse crate::Limiter;"),
        (
            "c/d.rs",
            "use super::super::a::A;\nuse crate::__private::x; /* crate::b */",
        ),
        ("private.rs", ""),
    ]
    .into_iter()
    .map(|(file, text)| (file.to_owned(), text.to_owned()))
    .collect();
    let order = ["private.rs", "c/mod.rs", "a.rs", "b.rs", "c/d.rs"].map(str::to_owned);
    let problems = violations(&files, &order);
    let expected = [
        "lib.rs is listed 0 times in CONTRIBUTING.md's Architecture",
        "c/mod.rs is listed above its child c/d.rs",
        "c/mod.rs imports `crate::Limiter` through the crate root: name its module",
        "c/mod.rs imports c/d.rs (`self::d::D`), which is not listed above it",
        "a.rs imports b.rs (`crate::b::B`), which is not listed above it",
        "b.rs imports c/d.rs (`crate::c::d::D`), which is not listed above it",
    ];
    assert_eq!(problems, expected, "{problems:#?}");
}
