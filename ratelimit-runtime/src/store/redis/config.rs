//! The Redis settings a limiter is built with, checked when it is built: URLs (scheme,
//! syntax, what a cluster accepts), TLS settings and their PEM text, so that a mistake fails
//! `build()` with a message for the person who wrote the configuration, not every check.

use std::borrow::Cow;

use redis::IntoConnectionInfo as _;

/// TLS settings beyond a `rediss://` URL: a private CA, a client identity (mutual TLS).
#[derive(Clone, Default)]
pub(crate) struct TlsSettings {
    /// PEM certificates trusted instead of the platform's roots.
    pub(crate) ca_certificate: Option<Vec<u8>>,
    /// PEM certificate chain and private key presented to the server.
    pub(crate) client_identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl TlsSettings {
    pub(super) fn is_set(&self) -> bool {
        self.ca_certificate.is_some() || self.client_identity.is_some()
    }
}
/// A configuration error, worded for the person who wrote the configuration.
pub(crate) type ConfigError = Cow<'static, str>;
/// Checks a URL's scheme and syntax; `true` for TLS (`rediss://`).
pub(super) fn check_url(url: &str, cluster: bool) -> Result<bool, ConfigError> {
    const EXPECTED: &str = "expected redis://[[user]:password@]host[:port][/db], \
                            rediss://… (TLS) or redis+unix:///path";
    let Some((scheme, _)) = url.split_once("://") else {
        return Err(format!("a Redis URL needs a scheme ({EXPECTED})").into());
    };
    reject_fragment(url)?;
    let secure = match scheme {
        "redis" => false,
        "rediss" => true,
        "redis+unix" | "unix" if cluster => {
            return Err(
                "Redis Cluster nodes are reached over TCP: use redis:// or rediss:// \
                 URLs, not redis+unix://"
                    .into(),
            );
        }
        "redis+unix" | "unix" => false,
        // The scheme is short and holds no credential: it can be echoed.
        other
            if other.len() <= 16
                && other
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) =>
        {
            return Err(format!("unknown Redis URL scheme `{other}://` ({EXPECTED})").into());
        }
        _ => return Err(format!("unknown Redis URL scheme ({EXPECTED})").into()),
    };
    if secure && !cfg!(feature = "tls") {
        return Err(
            "rediss:// (Redis over TLS) needs the `tls` feature of ratelimit-runtime: \
             add features = [\"tls\"] to its entry in Cargo.toml"
                .into(),
        );
    }
    // Parse now, so that a malformed URL fails the build, not every check; say why it does
    // not parse (redis-rs says only that it does not), never quoting it.
    if let Err(error) = url::Url::parse(url) {
        let hint = match error {
            url::ParseError::InvalidPort => " (a port is a number from 1 to 65535)",
            _ => "",
        };
        return Err(format!("a Redis URL that does not parse: {error}{hint}").into());
    }
    let info = url
        .into_connection_info()
        .map_err(|error| unusable(&error))?;
    if cluster && info.redis_settings().db() != 0 {
        return Err(
            "Redis Cluster has only database 0: remove the /<db> from the node URLs".into(),
        );
    }
    Ok(secure)
}

/// Turns away a URL with a `#fragment`: redis-rs reads `#insecure` as "skip the server's
/// certificate checks" (where a crate of the build enables its insecure TLS feature; else
/// every connection fails), which a limiter never does silently.
fn reject_fragment(url: &str) -> Result<(), ConfigError> {
    if url.contains('#') {
        return Err(
            "a Redis URL takes no #fragment: #insecure (no certificate checks) is not \
                    supported, trust a private CA with tls_ca_certificate instead; a # in a \
                    password is written %23"
                .into(),
        );
    }
    Ok(())
}

pub(super) fn check_tls(secure: bool, tls: &TlsSettings) -> Result<(), ConfigError> {
    if tls.is_set() && !secure {
        return Err(
            "TLS certificates were given for a Redis URL without TLS: use rediss://".into(),
        );
    }
    check_pems(tls)
}

/// Parses the TLS settings' PEM text now, so that a bad certificate or key fails the build
/// rather than every check. The errors never quote the PEM text (a key is a secret).
#[cfg(feature = "tls")]
fn check_pems(tls: &TlsSettings) -> Result<(), ConfigError> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
        match CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>() {
            Ok(certificates) if !certificates.is_empty() => Ok(certificates),
            _ => {
                Err(format!("{what} holds no PEM certificate (-----BEGIN CERTIFICATE-----)").into())
            }
        }
    }
    if let Some(ca) = &tls.ca_certificate {
        certificates(ca, "tls_ca_certificate")?;
    }
    if let Some((chain, key)) = &tls.client_identity {
        let chain = certificates(chain, "tls_client_identity's certificate")?;
        // Decoded, then loaded as the TLS handshake would (which checks its DER).
        let provider = rustls::crypto::ring::default_provider();
        let key = PrivateKeyDer::from_pem_slice(key).ok().filter(|key| {
            provider
                .key_provider
                .load_private_key(key.clone_key())
                .is_ok()
        });
        let Some(key) = key else {
            return Err("tls_client_identity's key is not a PEM private key \
                        (-----BEGIN PRIVATE KEY-----, RSA or EC)"
                .into());
        };
        // As the handshake will: the key is the certificate's.
        let usable = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(provider))
            .with_safe_default_protocol_versions()
            .is_ok_and(|builder| {
                builder
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_client_auth_cert(chain, key)
                    .is_ok()
            });
        if !usable {
            return Err(
                "tls_client_identity's certificate and key do not make a usable identity \
                        (a certificate that does not parse, or a key that is not its own)"
                    .into(),
            );
        }
    }
    Ok(())
}

#[cfg(not(feature = "tls"))]
#[allow(clippy::unnecessary_wraps)]
fn check_pems(_tls: &TlsSettings) -> Result<(), ConfigError> {
    Ok(())
}

/// redis-rs's error for a URL never echoes the URL (nor its password).
pub(super) fn unusable(error: &redis::RedisError) -> ConfigError {
    format!("unusable Redis URL or TLS setting ({error})").into()
}

/// A Redis Sentinel deployment, from a `redis+sentinel://` URL: the sentinels to ask, the
/// master's name, and how to reach the master (its credentials and database) and the
/// sentinels (theirs).
#[derive(Clone)]
#[cfg_attr(not(feature = "sentinel"), allow(dead_code))] // parsed, then refused
pub(crate) struct SentinelSettings {
    /// TLS to the sentinels and the master (`rediss+sentinel://`).
    pub(crate) secure: bool,
    /// The sentinels' hosts and ports.
    pub(crate) sentinels: Vec<(String, u16)>,
    /// The name the sentinels monitor the master under.
    pub(crate) master: String,
    /// The master's database.
    pub(crate) db: i64,
    /// The master's (and its replicas') ACL user and password: the URL's.
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    /// The sentinels' own user and password (`?sentinel_username=…&sentinel_password=…`).
    pub(crate) sentinel_username: Option<String>,
    pub(crate) sentinel_password: Option<String>,
}

/// The port a sentinel listens on when a URL gives none.
const SENTINEL_PORT: u16 = 26_379;

/// The form of a Sentinel URL, for error messages.
const SENTINEL_FORM: &str = "redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/\
                             <master name>[/<db>][?sentinel_username=…&sentinel_password=…] \
                             (rediss+sentinel:// for TLS; the port defaults to 26379)";

/// The Sentinel deployment `url` names, or `None` when it is not a `redis+sentinel://` (or
/// `rediss+sentinel://`) URL. The URL's user and password are the master's; the sentinels'
/// come in the query, since sentinels often have none (or other ones). Percent-encoded text
/// is decoded in every part. No error quotes the URL (it may hold a password).
///
/// # Errors
///
/// A Sentinel URL without a host or a master name, with a bad port, database or query
/// parameter, or `rediss+sentinel://` without the `tls` feature.
pub(super) fn parse_sentinel(url: &str) -> Result<Option<SentinelSettings>, ConfigError> {
    let (secure, rest) = match url.split_once("://") {
        Some(("redis+sentinel", rest)) => (false, rest),
        Some(("rediss+sentinel", rest)) => (true, rest),
        _ => return Ok(None),
    };
    reject_fragment(url)?;
    if secure && !cfg!(feature = "tls") {
        return Err(
            "rediss+sentinel:// (Redis Sentinel over TLS) needs the `tls` feature of \
             ratelimit-runtime: add features = [\"tls\"] to its entry in Cargo.toml"
                .into(),
        );
    }
    let bad = |what: &str| -> ConfigError { format!("{what} ({SENTINEL_FORM})").into() };
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (Some(userinfo), hosts),
        None => (None, authority),
    };
    let (username, password) = match userinfo {
        None => (None, None),
        Some(userinfo) => {
            let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
            (non_empty(decode(user)?), non_empty(decode(password)?))
        }
    };
    let mut sentinels = Vec::new();
    for host in hosts.split(',') {
        // `name`, `name:port`, `[v6]` or `[v6]:port`.
        let (name, port) = match host.strip_prefix('[') {
            Some(bracketed) => {
                let (name, rest) = bracketed
                    .split_once(']')
                    .ok_or_else(|| bad("an IPv6 address opened with [ is closed with ]"))?;
                let port = match rest {
                    "" => None,
                    rest => Some(rest.strip_prefix(':').ok_or_else(|| {
                        bad("after an IPv6 address in brackets comes :port, or nothing")
                    })?),
                };
                (name, port)
            }
            None => match host.split_once(':') {
                Some((_, rest)) if rest.contains(':') => {
                    return Err(bad("an IPv6 address goes in brackets: [::1]:26379"));
                }
                Some((name, port)) => (name, Some(port)),
                None => (host, None),
            },
        };
        let port = match port {
            None => SENTINEL_PORT,
            Some(port) => port
                .parse::<u16>()
                .ok()
                .filter(|&port| port != 0)
                .filter(|_| port.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| bad("a sentinel's port must be a number from 1 to 65535"))?,
        };
        if name.is_empty() {
            return Err(bad(
                "a Sentinel URL needs at least one host, and no empty one",
            ));
        }
        sentinels.push((decode(name)?, port));
    }
    let mut segments = path.split('/');
    let master = decode(segments.next().unwrap_or(""))?;
    if master.is_empty() {
        return Err(bad(
            "a Sentinel URL names the master after the hosts: /mymaster",
        ));
    }
    let db = match segments.next() {
        None | Some("") => 0,
        Some(db) => db
            .parse::<i64>()
            .ok()
            .filter(|_| db.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| bad("the database after the master's name must be a number"))?,
    };
    if segments.next().is_some() {
        return Err(bad("a Sentinel URL's path is /<master name>[/<db>]"));
    }
    let (mut sentinel_username, mut sentinel_password) = (None, None);
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = non_empty(decode(value)?);
        match name {
            "sentinel_username" => sentinel_username = value,
            "sentinel_password" => sentinel_password = value,
            _ => {
                return Err(bad(
                    "a Sentinel URL takes only sentinel_username and sentinel_password as \
                     query parameters",
                ));
            }
        }
    }
    Ok(Some(SentinelSettings {
        secure,
        sentinels,
        master,
        db,
        username,
        password,
        sentinel_username,
        sentinel_password,
    }))
}

/// `text` with its percent-encoded bytes decoded.
fn decode(text: &str) -> Result<String, ConfigError> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .map(std::borrow::Cow::into_owned)
        .map_err(|_| {
            format!("a Sentinel URL holds percent-encoded text that is not UTF-8 ({SENTINEL_FORM})")
                .into()
        })
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_that_weakens_tls_is_a_build_error() {
        for url in [
            "rediss://127.0.0.1:6379/#insecure",
            "rediss://127.0.0.1:6379#insecure",
            "redis://127.0.0.1:6379/#insecure",
            "rediss+sentinel://127.0.0.1/mymaster#insecure",
        ] {
            let error = match parse_sentinel(url) {
                Err(error) => error,
                Ok(Some(_)) => panic!("{url} passed"),
                Ok(None) => check_url(url, false).expect_err(url),
            };
            assert!(error.contains("#insecure"), "{url}: {error}");
            assert!(check_url(url, true).is_err(), "{url} in a cluster");
        }
    }

    /// A URL that does not parse says why (its port out of range, its host missing), and
    /// never quotes the URL, which may hold a password.
    #[test]
    fn a_url_that_does_not_parse_says_why_without_quoting_it() {
        for (url, why) in [
            (
                "redis://:hunter2@127.0.0.1:99999/",
                "invalid port number (a port is a number from 1 to 65535)",
            ),
            ("redis://:hunter2@:6379/", "empty host"),
            ("redis://:hunter2@[::1:6379/", "invalid IPv6 address"),
        ] {
            let error = check_url(url, false).expect_err(url);
            assert_eq!(
                error.to_string(),
                format!("a Redis URL that does not parse: {why}"),
                "{url}"
            );
        }
    }

    #[test]
    fn parses_sentinel_urls() {
        assert!(parse_sentinel("redis://127.0.0.1:6379/").unwrap().is_none());
        let settings = parse_sentinel(
            "redis+sentinel://app:p%40ss@10.0.0.1:26380,10.0.0.2,[::1]:5000/my%20master/3?sentinel_password=s3",
        )
        .unwrap()
        .unwrap();
        assert!(!settings.secure);
        assert_eq!(
            settings.sentinels,
            [
                ("10.0.0.1".to_owned(), 26_380),
                ("10.0.0.2".to_owned(), 26_379),
                ("::1".to_owned(), 5_000)
            ]
        );
        assert_eq!(settings.master, "my master");
        assert_eq!(settings.db, 3);
        assert_eq!(settings.username.as_deref(), Some("app"));
        assert_eq!(settings.password.as_deref(), Some("p@ss"));
        assert_eq!(settings.sentinel_username, None);
        assert_eq!(settings.sentinel_password.as_deref(), Some("s3"));
        let bare = parse_sentinel("redis+sentinel://h/m").unwrap().unwrap();
        assert_eq!((bare.db, bare.username, bare.password), (0, None, None));
        let password_only = parse_sentinel("redis+sentinel://:pw@h/m").unwrap().unwrap();
        assert_eq!(password_only.username, None);
        assert_eq!(password_only.password.as_deref(), Some("pw"));
    }

    #[test]
    fn rejects_bad_sentinel_urls_without_quoting_them() {
        for (url, reason) in [
            ("redis+sentinel://s3cr3t@/m", "at least one host"),
            ("redis+sentinel://u:s3cr3t@h1,,h2/m", "at least one host"),
            ("redis+sentinel://u:s3cr3t@h:0/m", "port"),
            ("redis+sentinel://u:s3cr3t@h:99999/m", "port"),
            ("redis+sentinel://u:s3cr3t@h", "names the master"),
            ("redis+sentinel://u:s3cr3t@h/m/x", "must be a number"),
            ("redis+sentinel://u:s3cr3t@h/m/1/2", "path is"),
            (
                "redis+sentinel://u:s3cr3t@h/m?password=x",
                "query parameters",
            ),
            ("redis+sentinel://u:%ff@h/m", "not UTF-8"),
            ("redis+sentinel://u:s3cr3t@::1/m", "in brackets"),
            ("redis+sentinel://u:s3cr3t@[::1/m", "closed with ]"),
            ("redis+sentinel://u:s3cr3t@[::1]x/m", "comes :port"),
            ("redis+sentinel://u:s3cr3t@h:+5/m", "port"),
            ("redis+sentinel://u:s3cr3t@h/m/+3", "must be a number"),
        ] {
            let Err(error) = parse_sentinel(url) else {
                panic!("{url} was accepted");
            };
            assert!(error.contains(reason), "{url}: {error}");
            assert!(!error.contains("s3cr3t"), "{error}");
        }
        #[cfg(not(feature = "tls"))]
        assert!(
            parse_sentinel("rediss+sentinel://h/m")
                .err()
                .unwrap()
                .contains("`tls` feature")
        );
    }
}
