//! [`RateLimitError`] as a gRPC [`Status`]: its code, its message, its rich details
//! (`google.rpc.RetryInfo`, `google.rpc.QuotaFailure`) and its metadata
//! (`grpc-retry-pushback-ms` and the RateLimit fields); and what a gRPC call is.

use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use tonic::metadata::MetadataMap;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, QuotaViolation, StatusExt as _};

use crate::axum::response::set_error_fields;
use crate::error::{Denied, RateLimitError};
use crate::problem::ErrorResponse;

/// The metadata entry of gRPC's retry policy: how long a client should wait before its next
/// attempt, in milliseconds (gRFC A6).
const RETRY_PUSHBACK: HeaderName = HeaderName::from_static("grpc-retry-pushback-ms");

/// `ResourceExhausted` for a denial, `Unavailable` for a store that cannot answer under
/// [`FailurePolicy::Closed`](crate::FailurePolicy::Closed), `InvalidArgument` for a cost no
/// window can admit, `Internal` for invalid input or configuration (logged at error level,
/// since the message leaves it out). The messages are those of the HTTP answers' `detail`;
/// the table is in the [module docs](crate::tonic#statuses).
impl From<RateLimitError> for Status {
    fn from(error: RateLimitError) -> Status {
        let answer = ErrorResponse::of(&error);
        let code = match &error {
            RateLimitError::Denied(_) => Code::ResourceExhausted,
            RateLimitError::Unavailable(_) => Code::Unavailable,
            RateLimitError::CostTooHigh { .. } => Code::InvalidArgument,
            RateLimitError::InvalidInput(_) | RateLimitError::InvalidConfig(_) => Code::Internal,
        };
        let mut details = ErrorDetails::new();
        // A denial's exact wait; an unavailable store's, the whole seconds it is answered.
        let retry_after = match &error {
            RateLimitError::Denied(denied) => {
                details.set_quota_failure(violations(denied));
                denied.decision().retry_after
            }
            _ => answer.retry_after.map(Duration::from_secs),
        };
        let mut headers = HeaderMap::new();
        set_error_fields(&mut headers, answer.fields, answer.retry_after);
        if let Some(wait) = retry_after {
            details.set_retry_info(Some(wait));
            headers.insert(RETRY_PUSHBACK, HeaderValue::from(pushback_ms(wait)));
        }
        Status::with_error_details_and_metadata(
            code,
            answer.detail,
            details,
            MetadataMap::from_headers(headers),
        )
    }
}

/// `wait` in whole milliseconds, rounded up: a client that waits this long finds the limit
/// free.
fn pushback_ms(wait: Duration) -> u64 {
    let ms = wait.as_nanos().div_ceil(1_000_000);
    u64::try_from(ms).unwrap_or(u64::MAX)
}

/// A violation per limit that denied: its subject the scope (never the key), its id the
/// limit's name in `RateLimit-Policy`, its value the limit's threshold.
fn violations(denied: &Denied) -> Vec<QuotaViolation> {
    let one = |name: &str, rate: crate::rate::Rate| {
        let description = if rate.is_concurrency() {
            let max = rate.threshold();
            let calls = if max == 1 { "call" } else { "calls" };
            format!("at most {max} {calls} in flight")
        } else {
            format!(
                "at most {} per {}",
                rate.threshold(),
                crate::decisions::window(rate.period())
            )
        };
        let mut violation = QuotaViolation::new(denied.scope(), description);
        violation.quota_id = name.to_owned();
        violation.quota_value = i64::try_from(rate.threshold()).unwrap_or(i64::MAX);
        violation
    };
    match denied.decisions() {
        Some(decisions) => decisions
            .iter()
            .filter(|limit| !limit.decision().allowed)
            .map(|limit| one(limit.label(), limit.rate()))
            .collect(),
        None => vec![one(crate::headers::POLICY_NAME, denied.rate())],
    }
}

/// Whether `request` is a gRPC call: a `POST` whose content type is `application/grpc`,
/// alone or with a subtype (`application/grpc+proto`) or parameters, in any case (a media
/// type's name is case-insensitive).
pub(crate) fn is_grpc(request: &Parts) -> bool {
    const GRPC: &[u8] = b"application/grpc";
    request.method == http::Method::POST
        && request
            .headers
            .get(http::header::CONTENT_TYPE)
            .map(HeaderValue::as_bytes)
            .is_some_and(|value| {
                value.len() >= GRPC.len()
                    && value[..GRPC.len()].eq_ignore_ascii_case(GRPC)
                    && matches!(value.get(GRPC.len()), None | Some(b'+' | b';'))
            })
}

#[cfg(test)]
mod tests {
    use tonic_types::StatusExt as _;

    use super::*;
    use crate::concurrency::Concurrency;
    use crate::decision::Decision;
    use crate::decisions::Decisions;
    use crate::error::StoreError;
    use crate::headers::UNAVAILABLE_RETRY_AFTER;
    use crate::rate::Rate;

    fn denied(retry_after: Duration) -> RateLimitError {
        let rate = Rate::new(2, Duration::from_secs(30)).unwrap();
        let decision = Decision::denied(2, retry_after, Duration::from_secs(29));
        Denied::new("hello", Some("user-42".into()), rate, decision).into()
    }

    #[test]
    fn a_denial_is_resource_exhausted_with_its_details_and_metadata() {
        let status = Status::from(denied(Duration::from_micros(27_400_001)));
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(
            status.message(),
            "rate limit exceeded for `hello`: retry after 27.400s"
        );
        let metadata = status.metadata();
        assert_eq!(metadata.get("grpc-retry-pushback-ms").unwrap(), "27401");
        assert_eq!(metadata.get("retry-after").unwrap(), "28");
        assert_eq!(
            metadata.get("ratelimit-policy").unwrap(),
            r#""default";q=2;w=30"#
        );
        assert_eq!(metadata.get("ratelimit").unwrap(), r#""default";r=0;t=28"#);
        let retry = status.get_details_retry_info().unwrap();
        assert_eq!(retry.retry_delay, Some(Duration::from_micros(27_400_001)));
        let quota = status.get_details_quota_failure().unwrap();
        assert_eq!(quota.violations.len(), 1);
        let violation = &quota.violations[0];
        assert_eq!(violation.subject, "hello");
        assert_eq!(violation.description, "at most 2 per 30s");
        assert_eq!(
            (violation.quota_id.as_str(), violation.quota_value),
            ("default", 2)
        );
        // The key is nowhere in the status, its details or its metadata.
        let response = status.into_http::<String>();
        for (_, value) in response.headers() {
            assert!(!String::from_utf8_lossy(value.as_bytes()).contains("user-42"));
        }
        let details = &response.headers()["grpc-status-details-bin"];
        assert!(!details.as_bytes().windows(7).any(|w| w == b"user-42"));
        assert_eq!(response.headers()["grpc-status"], "8");
    }

    #[test]
    fn a_denial_of_several_limits_lists_those_that_denied() {
        let burst = Rate::new(2, Duration::from_secs(1)).unwrap();
        let daily = Rate::new(1_000, Duration::from_secs(86_400)).unwrap();
        let slots = Concurrency::new(4).unwrap().rate();
        let second = Duration::from_secs(1);
        let decisions = Decisions::new([
            (
                Some("1s".into()),
                burst,
                Decision::denied(2, second, second),
            ),
            (
                Some("1d".into()),
                daily,
                Decision::admitted(1_000, 999, second),
            ),
            (
                Some("concurrency".into()),
                slots,
                Decision::denied(4, Duration::from_millis(100), second),
            ),
        ]);
        let error = RateLimitError::from(Denied::of_several("api", Some("k".into()), decisions));
        let quota = Status::from(error).get_details_quota_failure().unwrap();
        let described: Vec<_> = quota
            .violations
            .iter()
            .map(|v| {
                (
                    v.subject.as_str(),
                    v.quota_id.as_str(),
                    v.description.as_str(),
                )
            })
            .collect();
        assert_eq!(
            described,
            [
                ("api", "1s", "at most 2 per 1s"),
                ("api", "concurrency", "at most 4 calls in flight"),
            ]
        );
    }

    #[test]
    fn other_errors_have_their_codes() {
        let unavailable = Status::from(RateLimitError::Unavailable(StoreError::Timeout(
            Duration::ZERO,
        )));
        assert_eq!(unavailable.code(), Code::Unavailable);
        assert_eq!(
            unavailable.message(),
            "the rate limit store is unavailable; try again later"
        );
        assert_eq!(
            unavailable
                .metadata()
                .get("grpc-retry-pushback-ms")
                .unwrap(),
            "5000"
        );
        assert_eq!(
            unavailable.get_details_retry_info().unwrap().retry_delay,
            Some(UNAVAILABLE_RETRY_AFTER)
        );
        let costly = Status::from(RateLimitError::CostTooHigh { cost: 11, max: 10 });
        assert_eq!(costly.code(), Code::InvalidArgument);
        assert!(costly.message().contains("cost 11"), "{}", costly.message());
        assert!(costly.get_details_retry_info().is_none());
        let invalid = Status::from(RateLimitError::InvalidConfig("redis://:secret@host".into()));
        assert_eq!(invalid.code(), Code::Internal);
        assert_eq!(invalid.message(), "the rate limit could not be checked");
    }

    #[test]
    fn grpc_calls_are_told_by_their_method_and_content_type() {
        let of = |method: http::Method, content_type: &str| {
            let request = http::Request::builder()
                .method(method)
                .header(http::header::CONTENT_TYPE, content_type)
                .body(())
                .unwrap();
            is_grpc(&request.into_parts().0)
        };
        let post = |content_type| of(http::Method::POST, content_type);
        assert!(post("application/grpc"));
        assert!(post("application/grpc+proto"));
        assert!(post("application/grpc;charset=utf-8"));
        assert!(post("Application/GRPC"));
        assert!(!post("application/grpc-web"));
        assert!(!post("application/grpcx"));
        assert!(!post("application/json"));
        assert!(!post("application/grp"));
        assert!(!of(http::Method::GET, "application/grpc"));
        let bare = http::Request::post("/").body(()).unwrap().into_parts().0;
        assert!(!is_grpc(&bare));
    }

    #[test]
    fn pushback_rounds_up_to_whole_milliseconds() {
        assert_eq!(pushback_ms(Duration::ZERO), 0);
        assert_eq!(pushback_ms(Duration::from_nanos(1)), 1);
        assert_eq!(pushback_ms(Duration::from_millis(100)), 100);
        assert_eq!(pushback_ms(Duration::MAX), u64::MAX);
    }
}
