//! Where the sorted sets live: one Redis server or a Redis Cluster, with the URL checks, TLS
//! settings and timeouts applied when the limiter is built, and the connections made from them.

use std::borrow::Cow;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, IntoConnectionInfo as _, RedisResult};

/// TLS settings beyond a `rediss://` URL: a private CA, a client identity (mutual TLS).
#[derive(Clone, Default)]
pub(crate) struct TlsSettings {
    /// PEM certificates trusted instead of the platform's roots.
    pub(crate) ca_certificate: Option<Vec<u8>>,
    /// PEM certificate chain and private key presented to the server.
    pub(crate) client_identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl TlsSettings {
    fn is_set(&self) -> bool {
        self.ca_certificate.is_some() || self.client_identity.is_some()
    }
}

/// A Redis deployment the store can connect to.
#[allow(clippy::large_enum_variant)] // one per limiter, behind its `Arc`
pub(crate) enum Target {
    Single(redis::Client),
    Cluster(ClusterClient),
}

/// A configuration error, worded for the person who wrote the configuration.
pub(crate) type ConfigError = Cow<'static, str>;

impl Target {
    /// One Redis server at `url`. No I/O happens here.
    ///
    /// # Errors
    ///
    /// The URL does not parse, names an unknown scheme, asks for TLS in a build without the
    /// `tls` feature, or TLS settings come with a URL that is not `rediss://`.
    pub(crate) fn single(url: &str, tls: &TlsSettings) -> Result<Target, ConfigError> {
        let secure = check_url(url, false)?;
        check_tls(secure, tls)?;
        if secure {
            ensure_crypto_provider();
        }
        let client = if tls.is_set() {
            build_with_tls(url, tls)
        } else {
            redis::Client::open(url)
        };
        client.map(Target::Single).map_err(|error| unusable(&error))
    }

    /// A Redis Cluster reached first through `nodes` (at least one; the rest of the cluster is
    /// discovered from them), with `timeout` as its connection and response timeouts.
    ///
    /// # Errors
    ///
    /// No node, or a node URL rejected as for [`Target::single`]; a `redis+unix://` node; nodes
    /// that disagree on TLS, credentials or database.
    pub(crate) fn cluster(
        nodes: &[String],
        tls: &TlsSettings,
        timeout: Duration,
    ) -> Result<Target, ConfigError> {
        if nodes.is_empty() {
            return Err(
                "a Redis Cluster needs at least one node URL, e.g. redis_cluster([\"redis://10.0.0.1:6379\"])"
                    .into(),
            );
        }
        let mut secure = false;
        for node in nodes {
            secure |= check_url(node, true)?;
        }
        check_tls(secure, tls)?;
        // Every check is one script call on one key's node. A call is resent only by the
        // cluster's own redirections and reconnections (MOVED, ASK, a dropped connection); the
        // script counts a resent call once, and the limiter's timeout bounds them all.
        let builder = ClusterClientBuilder::new(nodes.iter().map(String::as_str))
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .retries(3)
            .min_retry_wait(5)
            .max_retry_wait(50);
        let builder = with_cluster_tls(builder, tls);
        builder
            .build()
            .map(Target::Cluster)
            .map_err(|error| unusable(&error))
    }

    /// Connects, within `timeout` for each step.
    pub(crate) async fn connect(&self, timeout: Duration) -> RedisResult<Connection> {
        match self {
            Target::Single(client) => {
                // One attempt per check: retrying inside a check (with backoff) would spend the
                // whole timeout on a refused connection and report a timeout instead of the
                // refusal. The next check (or the manager, after a dropped connection) tries
                // again.
                let config = ConnectionManagerConfig::new()
                    .set_number_of_retries(0)
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout));
                ConnectionManager::new_with_config(client.clone(), config)
                    .await
                    .map(Connection::Single)
            }
            Target::Cluster(client) => client
                .get_async_connection()
                .await
                .map(|connection| Connection::Cluster(Box::new(connection))),
        }
    }

    /// `redis` or `redis-cluster`, for `Debug`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Target::Single(_) => "redis",
            Target::Cluster(_) => "redis-cluster",
        }
    }
}

/// A multiplexed connection, cheap to clone; both kinds reconnect by themselves.
#[derive(Clone)]
pub(crate) enum Connection {
    Single(ConnectionManager),
    Cluster(Box<ClusterConnection>),
}

impl Connection {
    /// Sends `command`, routed (in a cluster) to its key's node.
    pub(crate) async fn query(&mut self, command: &Cmd) -> RedisResult<Vec<i64>> {
        match self {
            Connection::Single(connection) => command.query_async(connection).await,
            Connection::Cluster(connection) => command.query_async(&mut **connection).await,
        }
    }

    /// In a cluster, the slot ranges of the master that owns `slot`, from `CLUSTER SLOTS`
    /// asked of any node; `None` for a single server or when no node tells.
    /// Each node asked gets `timeout` to answer.
    pub(crate) async fn master_slots(
        &mut self,
        slot: u16,
        timeout: Duration,
    ) -> Option<Vec<(u16, u16)>> {
        use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
        let Connection::Cluster(connection) = self else {
            return None;
        };
        // A random node may be the failed one: ask up to three.
        for _ in 0..3 {
            let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
            let mut command = redis::cmd("CLUSTER");
            command.arg("SLOTS");
            let asked = connection.route_command(command, routing);
            if let Ok(Ok(reply)) = tokio::time::timeout(timeout, asked).await {
                return master_ranges(&reply, slot);
            }
        }
        None
    }
}

/// From a `CLUSTER SLOTS` reply (`[[first, last, [host, port, id], replicas…], …]`), the ranges
/// of the master whose range holds `slot`.
fn master_ranges(reply: &redis::Value, slot: u16) -> Option<Vec<(u16, u16)>> {
    use redis::Value;
    let Value::Array(ranges) = reply else {
        return None;
    };
    let parsed: Vec<(u16, u16, &Value)> = ranges
        .iter()
        .filter_map(|range| {
            let Value::Array(fields) = range else {
                return None;
            };
            let bound = |value: &Value| match value {
                Value::Int(number) => u16::try_from(*number).ok(),
                _ => None,
            };
            Some((
                bound(fields.first()?)?,
                bound(fields.get(1)?)?,
                fields.get(2)?,
            ))
        })
        .collect();
    let (_, _, master) = parsed
        .iter()
        .find(|(first, last, _)| (*first..=*last).contains(&slot))?;
    Some(
        parsed
            .iter()
            .filter(|(_, _, node)| node == master)
            .map(|&(first, last, _)| (first, last))
            .collect(),
    )
}

/// Checks a URL's scheme and syntax; `true` for TLS (`rediss://`).
fn check_url(url: &str, cluster: bool) -> Result<bool, ConfigError> {
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

fn check_tls(secure: bool, tls: &TlsSettings) -> Result<(), ConfigError> {
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
fn unusable(error: &redis::RedisError) -> ConfigError {
    format!("unusable Redis URL or TLS setting ({error})").into()
}

#[cfg(feature = "tls")]
fn certificates(tls: &TlsSettings) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: tls
            .client_identity
            .clone()
            .map(|(client_cert, client_key)| redis::ClientTlsConfig {
                client_cert,
                client_key,
            }),
        root_cert: tls.ca_certificate.clone(),
    }
}

#[cfg(feature = "tls")]
fn build_with_tls(url: &str, tls: &TlsSettings) -> RedisResult<redis::Client> {
    redis::Client::build_with_tls(url, certificates(tls))
}

#[cfg(feature = "tls")]
fn ensure_crypto_provider() {
    crate::tls::ensure_crypto_provider();
}

#[cfg(not(feature = "tls"))]
fn ensure_crypto_provider() {}

#[cfg(not(feature = "tls"))]
fn build_with_tls(url: &str, _tls: &TlsSettings) -> RedisResult<redis::Client> {
    // Unreachable: without the feature no TLS setting can be made, and `check_url` rejects
    // `rediss://`.
    redis::Client::open(url)
}

#[cfg(feature = "tls")]
fn with_cluster_tls(builder: ClusterClientBuilder, tls: &TlsSettings) -> ClusterClientBuilder {
    crate::tls::ensure_crypto_provider();
    if tls.is_set() {
        builder.certs(certificates(tls))
    } else {
        builder
    }
}

#[cfg(not(feature = "tls"))]
fn with_cluster_tls(builder: ClusterClientBuilder, _tls: &TlsSettings) -> ClusterClientBuilder {
    builder
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(url: &str) -> Result<Target, ConfigError> {
        Target::single(url, &TlsSettings::default())
    }

    #[test]
    fn rejects_bad_urls_with_a_reason_and_without_the_url() {
        for (url, reason) in [
            ("localhost:6379", "needs a scheme"),
            ("http://h:1/", "unknown Redis URL scheme `http://`"),
            ("redis://user:s3cr3t@[bad", "unusable Redis URL"),
        ] {
            let Err(error) = single(url) else {
                panic!("{url} was accepted");
            };
            assert!(error.contains(reason), "{url}: {error}");
            assert!(!error.contains("s3cr3t"), "{error}");
        }
        #[cfg(not(feature = "tls"))]
        assert!(
            single("rediss://h:1/")
                .err()
                .unwrap()
                .contains("`tls` feature")
        );
        assert!(single("redis://127.0.0.1:1/").is_ok());
        assert!(single("redis+unix:///tmp/redis.sock").is_ok());
    }

    #[test]
    fn clusters_need_nodes_over_tcp() {
        let timeout = Duration::from_millis(250);
        let tls = TlsSettings::default();
        let none: [String; 0] = [];
        assert!(
            Target::cluster(&none, &tls, timeout)
                .err()
                .unwrap()
                .contains("at least one node")
        );
        let unix = ["redis+unix:///tmp/r.sock".to_owned()];
        assert!(
            Target::cluster(&unix, &tls, timeout)
                .err()
                .unwrap()
                .contains("over TCP")
        );
        let db = ["redis://127.0.0.1:7000/3".to_owned()];
        let error = Target::cluster(&db, &tls, timeout).err().unwrap();
        assert!(error.contains("database 0"), "{error}");
        let nodes = [
            "redis://127.0.0.1:7000".to_owned(),
            "redis://127.0.0.1:7001".to_owned(),
        ];
        assert_eq!(
            Target::cluster(&nodes, &tls, timeout).unwrap().kind(),
            "redis-cluster"
        );
    }

    #[test]
    fn finds_every_range_of_a_slots_master() {
        use redis::Value;
        let node = |port: i64| {
            Value::Array(vec![
                Value::BulkString(b"127.0.0.1".to_vec()),
                Value::Int(port),
                Value::BulkString(format!("id{port}").into_bytes()),
            ])
        };
        let range = |first: i64, last: i64, port: i64| {
            Value::Array(vec![Value::Int(first), Value::Int(last), node(port)])
        };
        let reply = Value::Array(vec![
            range(0, 5460, 7000),
            range(5461, 10922, 7001),
            range(10923, 16000, 7002),
            range(16001, 16383, 7000),
        ]);
        assert_eq!(
            master_ranges(&reply, 100),
            Some(vec![(0, 5460), (16001, 16383)])
        );
        assert_eq!(master_ranges(&reply, 6000), Some(vec![(5461, 10922)]));
        assert_eq!(master_ranges(&Value::Nil, 1), None);
    }

    #[test]
    fn tls_settings_need_a_tls_url() {
        let tls = TlsSettings {
            ca_certificate: Some(b"-----BEGIN CERTIFICATE-----".to_vec()),
            client_identity: None,
        };
        let error = Target::single("redis://127.0.0.1:1/", &tls).err().unwrap();
        assert!(error.contains("use rediss://"), "{error}");
    }
}
