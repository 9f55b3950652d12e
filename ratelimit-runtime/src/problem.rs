//! What an HTTP response to a [`RateLimitError`] holds, framework-free: its status, its
//! RFC 9457 problem details body and its fields. The `axum` and `actix-web` features turn it
//! into their own response types, so both answer alike.

use std::fmt::Write as _;

use crate::error::RateLimitError;
use crate::headers::UNAVAILABLE_RETRY_AFTER;

/// The response to one error: a status, the fields to set, and a `detail` for the body.
pub(crate) struct ErrorResponse {
    /// 429, 503 or 500.
    pub(crate) status: u16,
    /// A denial's `RateLimit-Policy`, `RateLimit` and `Retry-After` (every limit's, for a
    /// check of several), as `(name, value)`; empty for other errors.
    pub(crate) fields: Vec<(&'static str, String)>,
    /// `Retry-After` in seconds, for an answer that is not a denial (503).
    pub(crate) retry_after: Option<u64>,
    /// The problem's `detail`: never the key, the store's error or the configuration.
    pub(crate) detail: String,
}

impl ErrorResponse {
    /// 429 for a denial, 503 for an unavailable store, 400 for a cost no window can admit
    /// (its `detail` says the cost and the most a call may cost), and 500 for invalid input or
    /// configuration (logged here at error level, since the body leaves it out).
    pub(crate) fn of(error: &RateLimitError) -> ErrorResponse {
        let status = ErrorResponse::status_of(error);
        match error {
            RateLimitError::Denied(denied) => ErrorResponse {
                status,
                fields: denied.fields(),
                retry_after: None,
                detail: error.to_string(),
            },
            RateLimitError::Unavailable(_) => ErrorResponse {
                status,
                fields: Vec::new(),
                retry_after: Some(UNAVAILABLE_RETRY_AFTER.as_secs()),
                detail: "the rate limit store is unavailable; try again later".to_owned(),
            },
            RateLimitError::CostTooHigh { .. } => ErrorResponse {
                status,
                fields: Vec::new(),
                retry_after: None,
                detail: error.to_string(),
            },
            RateLimitError::InvalidInput(_) | RateLimitError::InvalidConfig(_) => {
                tracing::error!(%error, "rate limit check failed; answering 500");
                ErrorResponse {
                    status,
                    fields: Vec::new(),
                    retry_after: None,
                    detail: "the rate limit could not be checked".to_owned(),
                }
            }
        }
    }

    /// The status code: 429, 503, 400 or 500 (without the log of [`of`](ErrorResponse::of)).
    pub(crate) fn status_of(error: &RateLimitError) -> u16 {
        match error {
            RateLimitError::Denied(_) => 429,
            // The request asks for more than the limit can ever admit: the client's to fix.
            RateLimitError::CostTooHigh { .. } => 400,
            RateLimitError::Unavailable(_) => 503,
            RateLimitError::InvalidInput(_) | RateLimitError::InvalidConfig(_) => 500,
        }
    }
}

/// A problem details document (RFC 9457): `type` `about:blank`, `title` (the status's reason
/// phrase), `status` and `detail`.
pub(crate) fn problem_body(status: u16, title: &str, detail: &str) -> String {
    let mut body = String::with_capacity(96 + detail.len());
    body.push_str(r#"{"type":"about:blank","title":"#);
    push_json_string(&mut body, title);
    let _ = write!(body, r#","status":{status},"detail":"#);
    push_json_string(&mut body, detail);
    body.push('}');
    body
}

/// `text` as a JSON string, quotes included (RFC 8259: `"`, `\` and control characters
/// escaped).
fn push_json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::decision::Decision;
    use crate::error::{Denied, StoreError};
    use crate::rate::Rate;

    #[test]
    fn each_error_has_its_status_fields_and_detail() {
        let rate = Rate::new(2, Duration::from_secs(30)).unwrap();
        let decision = Decision::denied(2, Duration::from_millis(27_400), Duration::from_secs(29));
        let denied = RateLimitError::Denied(Box::new(Denied::new(
            "hello",
            Some("user-42".into()),
            rate,
            decision,
        )));
        let response = ErrorResponse::of(&denied);
        assert_eq!(response.status, 429);
        assert_eq!(response.fields[2], ("Retry-After", "28".to_owned()));
        assert!(!response.detail.contains("user-42"));
        let unavailable = RateLimitError::Unavailable(StoreError::Timeout(Duration::ZERO));
        let response = ErrorResponse::of(&unavailable);
        assert_eq!((response.status, response.retry_after), (503, Some(5)));
        let too_costly = RateLimitError::CostTooHigh { cost: 11, max: 10 };
        let response = ErrorResponse::of(&too_costly);
        assert_eq!((response.status, response.retry_after), (400, None));
        assert!(response.fields.is_empty());
        assert!(response.detail.contains("cost 11"), "{}", response.detail);
        let invalid = RateLimitError::InvalidConfig("redis://:secret@host".into());
        let response = ErrorResponse::of(&invalid);
        assert_eq!(response.status, 500);
        assert!(!response.detail.contains("secret"));
    }

    #[test]
    fn bodies_are_escaped_json() {
        assert_eq!(
            problem_body(429, "Too Many Requests", "a \"b\\\" \u{1}\n"),
            r#"{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"a \"b\\\" \u0001\n"}"#
        );
    }
}
