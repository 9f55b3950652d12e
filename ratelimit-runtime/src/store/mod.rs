//! The stores a [`Limiter`](crate::Limiter) keeps its sliding window logs in.

pub(crate) mod memory;
pub(crate) mod redis;
