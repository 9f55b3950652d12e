//! What the HTTP end-to-end modules (`http_axum`, `http_actix`, `router_layer`) share.

pub mod hello;
pub mod http;
