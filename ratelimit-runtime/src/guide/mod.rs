//! The guide: `#[rate_limit]` and the [`Limiter`](crate::Limiter) in use, one page per
//! subject. The reference of each item stays on the item (the attribute's arguments on
//! [`rate_limit`](crate::rate_limit)); these pages show how the pieces fit, with examples that
//! `cargo test --doc` compiles and runs.
//!
//! New here? Start with the [`tutorial`]: five steps from a limited function to production,
//! each a complete program.
//!
//! | page | what it covers |
//! | --- | --- |
//! | [`tutorial`] | from nothing to production: a limited function, a denial, Redis across processes, an axum service, what to watch |
//! | [`attribute`] | the attribute in use: the function, where its limiter lives, scopes and keys, runtimes |
//! | [`algorithms`] | the sliding window log and the sliding window counter: their state, their bounds, which to choose |
//! | [`several_limits`] | stacked limits, costs, rates per caller, exemptions, tiers; the same by hand |
//! | [`outcomes`] | counting calls by their outcome, refunds, waiting for a slot, shadow mode |
//! | [`keys`] | the key layout in Redis and in process, cluster slots, what a change of code moves, unblocking a caller |
//! | [`redis`] | the Redis store: a Redis limiter in a `static`, what it stores, Cluster, Sentinel, replication, TLS and ACL users |
//! | [`concurrency`] | concurrency limits: at most N calls of a key in flight across processes, slots and their renewals, what failures do |
//! | [`leases`] | quota leases: a hot key over Redis at in-process speed, exact; what they trade |
//! | [`operating`] | limits changed while the process runs: scope entries, key overrides (a rate, a block, an exemption), the kill switch |
//! | [`production`] | failure policies, circuit breakers, timeouts and resends, the deny cache, memory, logs and metrics, what each failure costs |
//! | [`testing`] | tests of rate-limited code on a manual clock; replaying explicit times |
//! | [`http`] | axum and actix-web: the fields on every response, an error type of your own, a whole router, the examples to run |
//! | [`grpc`] | tonic: limits on a service's methods or on its server, the statuses a client reads, streams, HTTP and gRPC on one port |
//! | [`recipes`] | complete examples: a login limited on its failures, a client of a partner's API and its test, quotas by plan |

// Doc-only modules: each page is a Markdown file beside this one, so that its examples are
// doctests.

pub mod tutorial {
    #![doc = include_str!("tutorial.md")]
}

pub mod attribute {
    #![doc = include_str!("attribute.md")]
}

pub mod algorithms {
    #![doc = include_str!("algorithms.md")]
}

pub mod several_limits {
    #![doc = include_str!("several_limits.md")]
}

pub mod outcomes {
    #![doc = include_str!("outcomes.md")]
}

pub mod keys {
    #![doc = include_str!("keys.md")]
}

pub mod redis {
    #![doc = include_str!("redis.md")]
}

pub mod concurrency {
    #![doc = include_str!("concurrency.md")]
}

pub mod leases {
    #![doc = include_str!("leases.md")]
}

pub mod operating {
    #![doc = include_str!("operating.md")]
}

pub mod production {
    #![doc = include_str!("production.md")]
}

pub mod testing {
    #![doc = include_str!("testing.md")]
}

// Built whatever the features: its examples run where `axum` is on (they compile to nothing
// elsewhere), and its links into the framework modules lead, where those are not built, to the
// crate's feature flags.
pub mod http {
    #![doc = include_str!("http.md")]
    #![cfg_attr(feature = "axum", doc = include_str!("http_axum_links.md"))]
    #![cfg_attr(
        not(feature = "axum"),
        doc = "\n[axum]: crate#feature-flags\n[RateLimitLayer]: crate#feature-flags\n\
               [PeerIp]: crate#feature-flags\n[HeaderKey]: crate#feature-flags\n\
               [on_missing_key]: crate#feature-flags\n[setup_error]: crate#feature-flags\n\
               [scope]: crate#feature-flags\n[and_rate]: crate#feature-flags\n\
               [axum::problem]: crate#feature-flags\n"
    )]
    #![cfg_attr(feature = "actix-web", doc = include_str!("http_actix_links.md"))]
    #![cfg_attr(
        not(feature = "actix-web"),
        doc = "\n[actix_web]: crate#feature-flags\n[actix_web::problem]: crate#feature-flags\n"
    )]
}

// Built whatever the features, as `http`: its examples run where `tonic` is on.
pub mod grpc {
    #![doc = include_str!("grpc.md")]
    // The page ends with a paragraph, which a link definition must not follow directly.
    #![cfg_attr(feature = "tonic", doc = concat!("\n\n", include_str!("grpc_links.md")))]
    #![cfg_attr(
        not(feature = "tonic"),
        doc = "\n\n[tonic]: crate#feature-flags\n[RateLimitLayer]: crate#feature-flags\n\
               [PeerIp]: crate#feature-flags\n[MetadataKey]: crate#feature-flags\n\
               [concurrency]: crate#feature-flags\n"
    )]
}

pub mod recipes {
    #![doc = include_str!("recipes.md")]
}
