//! Examples of `ratelimit-runtime`: see `examples/`.
