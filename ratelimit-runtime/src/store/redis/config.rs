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
    // Parse now, so that a malformed URL fails the build, not every check.
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
