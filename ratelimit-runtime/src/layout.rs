//! The attribute's key layout, read backwards: which stored keys are the logs of one scope and
//! key ([`ScopeKeys`]), so that [`Limiter::reset_scope`](crate::Limiter::reset_scope) forgets
//! every limit of a function or a `name` for one caller; and the one rule of the layout both
//! directions share ([`push_untagged`]). The keys themselves are built by
//! `__private::Stack::push` (README "Several limits, costs, tiers" lays them out).

/// What a sliding window counter's key has after the key its limit names, in Redis: the
/// counter is a hash, the log a sorted set, and one key cannot hold both (`WRONGTYPE`). The
/// in-process store keeps the two apart without it.
pub(crate) const COUNTER_SUFFIX: &str = ":swc";

/// Appends `text` to `out` with its braces written as parentheses: before a key's hash tag, a
/// `{` (a closure's `{{closure}}` in a function's path) would make Redis Cluster take another
/// tag.
pub(crate) fn push_untagged(out: &mut String, text: &str) {
    for c in text.chars() {
        out.push(match c {
            '{' => '(',
            '}' => ')',
            c => c,
        });
    }
}

/// The logs the attribute keeps for `scope` (a `name`, or a function's path) and `key` (the
/// `key` argument's value; `None`: limits without a key), before the Redis key prefix:
///
/// - one attribute: `<scope>` or `<scope>:<key>`, with `:<window>` after it for `rate = expr`;
/// - stacked: `#<scope>:{<key>}:<window>` (named) or `#<scope>#<position>:{<key>}:<window>`
///   (a function's path), and without a key `#{<scope>}:<window>` or
///   `#{<scope>}#<position>:<window>`, a `{` or `}` of the scope written `(` or `)`.
///
/// A `<window>` is a period as the layout writes it: digits and one of `us`, `ms`, `s`, `m`,
/// `h`, `d`.
pub(crate) struct ScopeKeys<'a> {
    scope: &'a str,
    key: Option<&'a str>,
    untagged: String,
    plain: String,
}

impl<'a> ScopeKeys<'a> {
    /// The logs of `scope` and `key`.
    pub(crate) fn new(scope: &'a str, key: Option<&'a str>) -> ScopeKeys<'a> {
        let mut untagged = String::with_capacity(scope.len());
        push_untagged(&mut untagged, scope);
        let plain = match key {
            Some(key) => format!("{scope}:{key}"),
            None => scope.to_owned(),
        };
        ScopeKeys {
            scope,
            key,
            untagged,
            plain,
        }
    }

    /// The one key without a window: `<scope>` or `<scope>:<key>` (the plain form's).
    pub(crate) fn plain(&self) -> &str {
        &self.plain
    }

    /// Glob patterns (for Redis `SCAN ... MATCH`, after the escaped key prefix) that every
    /// windowed log of the scope and key matches, each with a key of the same hash tag as
    /// every key it finds, when they share one (the stacked forms, whose tag is the key or the
    /// scope; not when that tag would be empty); [`matches`](ScopeKeys::matches) tells which of
    /// the keys they find are.
    pub(crate) fn patterns(&self) -> Vec<(String, Option<String>)> {
        let scope = escape(self.scope);
        let untagged = escape(&self.untagged);
        match self.key {
            Some(key) => {
                // An empty tag (`{}`) makes Redis hash the whole key.
                let tagged = !key.is_empty() && !key.starts_with('}');
                let exemplar = tagged.then(|| format!("#{}:{{{key}}}:", self.untagged));
                let key = escape(key);
                vec![
                    (format!("{scope}:{key}:*"), None),
                    (format!("#{untagged}*:{{{key}}}:*"), exemplar),
                ]
            }
            None => {
                let exemplar =
                    (!self.untagged.is_empty()).then(|| format!("#{{{}}}", self.untagged));
                vec![
                    (format!("{scope}:*"), None),
                    (format!("#{{{untagged}}}*"), exemplar),
                ]
            }
        }
    }

    /// Whether `stored` (a key before the Redis prefix) is one of the scope and key's logs,
    /// or the counter of one (the same key with [`COUNTER_SUFFIX`] after it; a key is not
    /// told apart from a log whose key ends so, as a caller's key `alice:swc`).
    pub(crate) fn matches(&self, stored: &str) -> bool {
        self.matches_log(stored)
            || stored
                .strip_suffix(COUNTER_SUFFIX)
                .is_some_and(|log| self.matches_log(log))
    }

    /// Whether `stored` is one of the scope and key's logs.
    fn matches_log(&self, stored: &str) -> bool {
        if stored == self.plain {
            return true;
        }
        let windowed = |rest: Option<&str>| rest.is_some_and(is_window);
        match self.key {
            Some(key) => {
                let one = stored
                    .strip_prefix(self.scope)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .and_then(|rest| rest.strip_prefix(key))
                    .and_then(|rest| rest.strip_prefix(':'));
                if windowed(one) {
                    return true;
                }
                let Some(rest) = stored
                    .strip_prefix('#')
                    .and_then(|rest| rest.strip_prefix(self.untagged.as_str()))
                else {
                    return false;
                };
                let rest = skip_position(rest);
                windowed(
                    rest.strip_prefix(":{")
                        .and_then(|rest| rest.strip_prefix(key))
                        .and_then(|rest| rest.strip_prefix("}:")),
                )
            }
            None => {
                let one = stored
                    .strip_prefix(self.scope)
                    .and_then(|rest| rest.strip_prefix(':'));
                if windowed(one) {
                    return true;
                }
                let Some(rest) = stored
                    .strip_prefix("#{")
                    .and_then(|rest| rest.strip_prefix(self.untagged.as_str()))
                    .and_then(|rest| rest.strip_prefix('}'))
                else {
                    return false;
                };
                windowed(skip_position(rest).strip_prefix(':'))
            }
        }
    }
}

/// `rest` after a stacked limit's `#<position>`, if it starts with one.
fn skip_position(rest: &str) -> &str {
    match rest.strip_prefix('#') {
        Some(position) => {
            let digits = position.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 {
                &position[digits..]
            } else {
                rest
            }
        }
        None => rest,
    }
}

/// Whether `text` is a window as the layout writes one (`90s`, `1500ms`, `1d`).
fn is_window(text: &str) -> bool {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && matches!(&text[digits..], "us" | "ms" | "s" | "m" | "h" | "d")
}

/// `text` with Redis glob's special characters escaped, so that it matches only itself.
pub(crate) fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_and_key_match_every_form_of_their_logs_and_no_other() {
        let keyed = ScopeKeys::new("app::{{closure}}::search", Some("alice"));
        for stored in [
            "app::{{closure}}::search:alice",
            "app::{{closure}}::search:alice:1h",
            "#app::((closure))::search#1:{alice}:1s",
            "#app::((closure))::search#12:{alice}:1500ms",
        ] {
            assert!(keyed.matches(stored), "{stored}");
        }
        for stored in [
            "app::{{closure}}::search:alicia",
            "app::{{closure}}::search:alice:x",
            "app::{{closure}}::search:alice:1h:2",
            "#app::((closure))::search#1:{alice2}:1s",
            "#app::((closure))::searches:{alice}:1s",
            "#app::((closure))::search#:{alice}:1s",
            "#{app::((closure))::search}#1:1s",
        ] {
            assert!(!keyed.matches(stored), "{stored}");
        }
        let named = ScopeKeys::new("login", None);
        for stored in ["login", "login:15m", "#{login}:1d", "#{login}#2:1d"] {
            assert!(named.matches(stored), "{stored}");
        }
        for stored in ["login:alice", "login2", "#login:{x}:1d", "#{login}x:1d"] {
            assert!(!named.matches(stored), "{stored}");
        }
        let globs = |keys: &ScopeKeys<'_>| -> Vec<String> {
            keys.patterns().into_iter().map(|(glob, _)| glob).collect()
        };
        assert_eq!(
            globs(&ScopeKeys::new("a*b", Some("[k]"))),
            [r"a\*b:\[k\]:*", r"#a\*b*:{\[k\]}:*"]
        );
        assert_eq!(globs(&named), ["login:*", "#{login}*"]);
        // The stacked patterns' keys share the tag of their exemplar, unless it is empty.
        let tags = |keys: &ScopeKeys<'_>| -> Vec<Option<String>> {
            keys.patterns().into_iter().map(|(_, tag)| tag).collect()
        };
        assert_eq!(tags(&named), [None, Some("#{login}".to_owned())]);
        assert_eq!(
            tags(&ScopeKeys::new("s", Some("u"))),
            [None, Some("#s:{u}:".to_owned())]
        );
        assert_eq!(tags(&ScopeKeys::new("s", Some(""))), [None, None]);
        assert_eq!(tags(&ScopeKeys::new("s", Some("}x"))), [None, None]);
    }
}
