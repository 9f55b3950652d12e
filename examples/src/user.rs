//! The caller of the HTTP examples, whichever the framework: the `X-User-Id` header, else the
//! `user` query parameter. Each framework's extractor only gathers those two and asks
//! [`User::from_header_or_query`].

use std::fmt;

use serde::Deserialize;

/// The name of the header naming the caller.
pub const HEADER: &str = "x-user-id";

/// The `detail` of the `400 Bad Request` answered to a request that names no user.
pub const MISSING: &str = "name the user in the `X-User-Id` header or the `user` query parameter";

/// The caller of a request.
#[derive(Debug)]
pub struct User(String);

/// The query string's part the examples read: `?user=...`.
#[derive(Deserialize)]
pub struct UserQuery {
    /// The caller, when the query names one.
    pub user: Option<String>,
}

impl User {
    /// The caller named by `header` (its value, when present and text), else by the query's
    /// `user`; `None` when neither names one (blank names included).
    pub fn from_header_or_query(header: Option<&str>, query: Option<UserQuery>) -> Option<User> {
        let name = match header {
            Some(name) => Some(name.to_owned()),
            None => query.and_then(|query| query.user),
        };
        let name = name?.trim().to_owned();
        (!name.is_empty()).then_some(User(name))
    }
}

impl fmt::Display for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
