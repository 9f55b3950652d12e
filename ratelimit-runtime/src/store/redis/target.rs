//! Where the sorted sets live: one Redis server, the master a Redis Sentinel deployment names,
//! or a Redis Cluster; its client built from settings checked by `config.rs`, with the TLS
//! settings and timeouts applied, and the connections made from it.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
#[cfg(feature = "cluster")]
use redis::cluster::{ClusterClient, ClusterClientBuilder};
#[cfg(feature = "cluster")]
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, RedisResult};

use super::config::{
    ConfigError, SentinelSettings, TlsSettings, check_tls, check_url, parse_sentinel, unusable,
};
#[cfg(feature = "sentinel")]
use super::sentinel::{Address, MasterWatch, WatchClaim, address_of};

/// A Sentinel deployment: the client that asks the sentinels for the master (it caches its
/// connections to them, hence the lock, held only while connecting, which the store does one
/// attempt at a time anyway), and the watch of which master they name.
#[cfg(feature = "sentinel")]
pub(crate) struct SentinelTarget {
    client: async_lock::Mutex<redis::sentinel::SentinelClient>,
    watch: MasterWatch,
}

/// A Redis deployment the store can connect to.
#[allow(clippy::large_enum_variant)] // one per limiter, behind its `Arc`
pub(crate) enum Target {
    Single(redis::Client),
    /// The master of a Sentinel deployment, asked of the sentinels at every connection (after
    /// a failover, the next connection finds the new master), and watched.
    #[cfg(feature = "sentinel")]
    Sentinel(Box<SentinelTarget>),
    /// A cluster: its client, and one that never resends a call (see
    /// [`Connection::query`]).
    #[cfg(feature = "cluster")]
    Cluster(Box<(ClusterClient, ClusterClient)>),
}

impl Target {
    /// One Redis server at `url`. No I/O happens here.
    ///
    /// # Errors
    ///
    /// The URL does not parse, names an unknown scheme, asks for TLS in a build without the
    /// `tls` feature, or TLS settings come with a URL that is not `rediss://`.
    pub(crate) fn single(url: &str, tls: &TlsSettings) -> Result<Target, ConfigError> {
        if let Some(settings) = parse_sentinel(url)? {
            return Target::sentinel(&settings, tls);
        }
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

    /// The master the sentinels of `settings` monitor, reached with TLS (`tls`) when the URL
    /// asked for it. No I/O happens here.
    ///
    /// # Errors
    ///
    /// TLS settings without `rediss+sentinel://`, or settings redis-rs refuses.
    #[cfg(feature = "sentinel")]
    fn sentinel(settings: &SentinelSettings, tls: &TlsSettings) -> Result<Target, ConfigError> {
        use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
        use redis::{ConnectionAddr, TlsMode};
        check_tls(settings.secure, tls)?;
        if settings.secure {
            ensure_crypto_provider();
        }
        let address = |host: &String, port: &u16| {
            if settings.secure {
                ConnectionAddr::TcpTls {
                    host: host.clone(),
                    port: *port,
                    insecure: false,
                    tls_params: None,
                }
            } else {
                ConnectionAddr::Tcp(host.clone(), *port)
            }
        };
        let sentinels = settings
            .sentinels
            .iter()
            .map(|(host, port)| address(host, port));
        let mut builder =
            SentinelClientBuilder::new(sentinels, &settings.master, SentinelServerType::Master)
                .map_err(|error| unusable(&error))?
                .set_client_to_redis_db(settings.db);
        if let Some(username) = &settings.username {
            builder = builder.set_client_to_redis_username(username);
        }
        if let Some(password) = &settings.password {
            builder = builder.set_client_to_redis_password(password);
        }
        if let Some(username) = &settings.sentinel_username {
            builder = builder.set_client_to_sentinel_username(username);
        }
        if let Some(password) = &settings.sentinel_password {
            builder = builder.set_client_to_sentinel_password(password);
        }
        if settings.secure {
            builder = with_sentinel_tls(
                builder
                    .set_client_to_redis_tls_mode(TlsMode::Secure)
                    .set_client_to_sentinel_tls_mode(TlsMode::Secure),
                tls,
            );
        }
        let client = builder.build().map_err(|error| unusable(&error))?;
        let mut watchers = Vec::new();
        for (host, port) in &settings.sentinels {
            let address = address(host, port);
            let mut auth = redis::RedisConnectionInfo::default();
            if let Some(username) = &settings.sentinel_username {
                auth = auth.set_username(username);
            }
            if let Some(password) = &settings.sentinel_password {
                auth = auth.set_password(password);
            }
            let info = redis::IntoConnectionInfo::into_connection_info(address)
                .map_err(|error| unusable(&error))?
                .set_redis_settings(auth);
            let watcher = if tls.is_set() {
                build_with_tls(info, tls)
            } else {
                redis::Client::open(info)
            };
            watchers.push(watcher.map_err(|error| unusable(&error))?);
        }
        Ok(Target::Sentinel(Box::new(SentinelTarget {
            client: async_lock::Mutex::new(client),
            watch: MasterWatch::new(watchers, &settings.master),
        })))
    }

    /// Without the `sentinel` feature, a `redis+sentinel://` URL is a configuration error.
    #[cfg(not(feature = "sentinel"))]
    fn sentinel(_: &SentinelSettings, _: &TlsSettings) -> Result<Target, ConfigError> {
        Err("a `redis+sentinel://` URL needs the `sentinel` feature of ratelimit-runtime".into())
    }

    /// The claim to run the watch of a Sentinel deployment's master, unless one runs (or the
    /// target is not a Sentinel deployment).
    #[cfg(feature = "sentinel")]
    pub(crate) fn watch_claim(&self) -> Option<WatchClaim> {
        match self {
            Target::Sentinel(sentinel) => sentinel.watch.claim(),
            _ => None,
        }
    }

    /// A Redis Cluster reached first through `nodes` (at least one; the rest of the cluster is
    /// discovered from them), with `timeout` as its connection and response timeouts.
    ///
    /// # Errors
    ///
    /// No node, or a node URL rejected as for [`Target::single`]; a `redis+unix://` node; nodes
    /// that disagree on TLS, credentials or database.
    #[cfg(feature = "cluster")]
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
        // A node that cannot be reached is given up after 3 attempts to reconnect (50, 100,
        // 200 ms apart): redis-rs then asks the cluster for its slot map again, which after a
        // failover names the replica that took the node's slots over. Without the bound it
        // would try the dead node's address for ever, and its slots would never come back.
        // A call that must not run twice (a counter's refund, which no member makes
        // idempotent) goes through a second client that never resends: with no retries, a
        // redirection or a dropped connection fails the call (the refund's cost then stays
        // counted: the safe side), and the slot map is still refreshed for the next one.
        let attempts = std::num::NonZeroUsize::new(3).unwrap_or(std::num::NonZeroUsize::MIN);
        let client = |retries: u32| {
            let builder = ClusterClientBuilder::new(nodes.iter().map(String::as_str))
                .connection_timeout(timeout)
                .response_timeout(timeout)
                .retries(retries)
                .min_retry_wait(5)
                .max_retry_wait(50)
                .max_connection_attempts(attempts);
            with_cluster_tls(builder, tls)
                .build()
                .map_err(|error| unusable(&error))
        };
        Ok(Target::Cluster(Box::new((client(3)?, client(0)?))))
    }

    /// Connects, within `timeout` for each step.
    pub(crate) async fn connect(&self, timeout: Duration) -> RedisResult<Connected> {
        // One attempt per check: retrying inside a check (with backoff) would spend the whole
        // timeout on a refused connection and report a timeout instead of the refusal. The
        // next check (or the manager, after a dropped connection) tries again.
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(0)
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        match self {
            Target::Single(client) => ConnectionManager::new_with_config(client.clone(), config)
                .await
                .map(|connection| Connected::to(Connection::Single(connection))),
            #[cfg(feature = "sentinel")]
            Target::Sentinel(sentinel) => {
                // The sentinels name the master (and redis-rs checks that it says it is one).
                // The manager reconnects to that address alone: once it stops being the
                // master, the store drops the connection (`READONLY`, a timeout, a closed
                // connection) and the next one asks the sentinels again.
                let master = sentinel.client.lock().await.async_get_client().await?;
                let address = master.get_connection_info().addr().clone();
                let connection = ConnectionManager::new_with_config(master, config).await?;
                Ok(Connected {
                    connection: Connection::Single(connection),
                    master: address_of(&address),
                })
            }
            #[cfg(feature = "cluster")]
            Target::Cluster(clients) => connect_cluster(clients.0.clone(), clients.1.clone())
                .await
                .map(Connected::to),
        }
    }

    /// For a cluster, a new connection to make apart from any check (its future owns what it
    /// needs); `None` for other targets.
    #[cfg(feature = "cluster")]
    pub(crate) fn cluster_reconnection(
        &self,
    ) -> Option<impl Future<Output = RedisResult<Connection>> + Send + 'static> {
        match self {
            Target::Cluster(clients) => Some(connect_cluster(clients.0.clone(), clients.1.clone())),
            _ => None,
        }
    }

    /// `redis`, `redis-sentinel` or `redis-cluster`, for `Debug`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Target::Single(_) => "redis",
            #[cfg(feature = "sentinel")]
            Target::Sentinel(_) => "redis-sentinel",
            #[cfg(feature = "cluster")]
            Target::Cluster(_) => "redis-cluster",
        }
    }

    /// `true` for a target whose connections reach one server (a single server, a Sentinel
    /// deployment's master), which the store drops when they may have gone stale.
    pub(crate) fn is_one_server(&self) -> bool {
        #[cfg(feature = "cluster")]
        if let Target::Cluster(_) = self {
            return false;
        }
        true
    }
}

/// A connection just made, and what the store keeps beside it.
pub(crate) struct Connected {
    pub(crate) connection: Connection,
    /// The master a Sentinel deployment's connection reaches (`None` for any other, and for
    /// one over a Unix socket), which the watch compares with the one the sentinels name.
    #[cfg(feature = "sentinel")]
    pub(crate) master: Option<Address>,
}

impl Connected {
    /// `connection`, to no master the sentinels name.
    fn to(connection: Connection) -> Connected {
        Connected {
            connection,
            #[cfg(feature = "sentinel")]
            master: None,
        }
    }
}

/// A cluster's two connections (see [`Target::cluster`]), made together.
#[cfg(feature = "cluster")]
async fn connect_cluster(routed: ClusterClient, once: ClusterClient) -> RedisResult<Connection> {
    let (routed, once) =
        futures_util::future::try_join(routed.get_async_connection(), once.get_async_connection())
            .await?;
    Ok(Connection::Cluster(Box::new(ClusterPair {
        routed,
        once,
        made: std::sync::Arc::new(std::time::Instant::now()),
    })))
}

/// A multiplexed connection, cheap to clone; both kinds reconnect by themselves.
#[derive(Clone)]
pub(crate) enum Connection {
    Single(ConnectionManager),
    #[cfg(feature = "cluster")]
    Cluster(Box<ClusterPair>),
}

/// A cluster's connections: the one that routes and resends, and the one of the client that
/// never resends; made together at `made` (shared by their clones: it names them).
#[cfg(feature = "cluster")]
#[derive(Clone)]
pub(crate) struct ClusterPair {
    routed: ClusterConnection,
    once: ClusterConnection,
    made: std::sync::Arc<std::time::Instant>,
}

#[cfg(feature = "cluster")]
impl ClusterPair {
    fn connection(&mut self, once: bool) -> &mut ClusterConnection {
        if once {
            &mut self.once
        } else {
            &mut self.routed
        }
    }
}

impl Connection {
    /// Sends `command`, routed (in a cluster) to its key's node; `once`: never twice (in a
    /// cluster, on the connection of the client without retries: redis-rs's cluster client
    /// resends a call whose connection dropped, which may have run; a single server's
    /// connection never resends by itself).
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))] // one server never resends
    pub(crate) async fn query<T: redis::FromRedisValue>(
        &mut self,
        command: &Cmd,
        once: bool,
    ) -> RedisResult<T> {
        match self {
            Connection::Single(connection) => command.query_async(connection).await,
            #[cfg(feature = "cluster")]
            Connection::Cluster(pair) => command.query_async(pair.connection(once)).await,
        }
    }

    /// Sends `pipeline` (routed, in a cluster, to its first key's node; `once`: as
    /// [`query`](Connection::query) sends) and returns its replies.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))] // one server never resends
    pub(crate) async fn query_pipeline<T: redis::FromRedisValue>(
        &mut self,
        pipeline: &redis::Pipeline,
        once: bool,
    ) -> RedisResult<T> {
        match self {
            Connection::Single(connection) => pipeline.query_async(connection).await,
            #[cfg(feature = "cluster")]
            Connection::Cluster(pair) => pipeline.query_async(pair.connection(once)).await,
        }
    }

    /// `true` when this is a cluster's connection made before `instant`.
    #[cfg(feature = "cluster")]
    pub(crate) fn cluster_made_before(&self, instant: std::time::Instant) -> bool {
        matches!(self, Connection::Cluster(pair) if *pair.made <= instant)
    }

    /// `true` when both are clones of the same cluster connection.
    #[cfg(feature = "cluster")]
    pub(crate) fn same_as(&self, other: &Connection) -> bool {
        match (self, other) {
            (Connection::Cluster(this), Connection::Cluster(other)) => {
                std::sync::Arc::ptr_eq(&this.made, &other.made)
            }
            _ => false,
        }
    }

    /// `true` for a cluster's connection.
    pub(crate) fn is_cluster(&self) -> bool {
        #[cfg(feature = "cluster")]
        if let Connection::Cluster(_) = self {
            return true;
        }
        false
    }

    /// Sends `command` to the server and returns its reply as it came (a cluster's
    /// connection routes by [`route_value`](Connection::route_value)).
    #[cfg(not(feature = "cluster"))]
    pub(crate) async fn query_value(&mut self, command: &Cmd) -> RedisResult<redis::Value> {
        match self {
            Connection::Single(connection) => command.query_async(connection).await,
        }
    }

    /// Sends `command` to the node `routing` names in a cluster, to the server otherwise.
    #[cfg(feature = "cluster")]
    pub(crate) async fn route_value(
        &mut self,
        command: Cmd,
        routing: redis::cluster_routing::RoutingInfo,
    ) -> RedisResult<redis::Value> {
        match self {
            Connection::Single(connection) => command.query_async(connection).await,
            Connection::Cluster(pair) => pair.routed.route_command(command, routing).await,
        }
    }

    /// In a cluster, the slot ranges of the master that owns `slot`, from `CLUSTER SLOTS`
    /// asked of any node; `None` for a single server or when no node tells.
    /// Each node asked gets `timeout` to answer.
    #[cfg(feature = "cluster")]
    pub(crate) async fn master_slots(
        &mut self,
        slot: u16,
        timeout: Duration,
    ) -> Option<Vec<(u16, u16)>> {
        use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
        let Connection::Cluster(pair) = self else {
            return None;
        };
        let connection = &mut pair.routed;
        // A random node may be the failed one: ask up to three.
        for _ in 0..3 {
            let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
            let mut command = redis::cmd("CLUSTER");
            command.arg("SLOTS");
            let asked = connection.route_command(command, routing);
            if let Ok(Ok(reply)) = crate::runtime::timeout(timeout, asked).await {
                return master_ranges(&reply, slot);
            }
        }
        None
    }

    /// Without the `cluster` feature, no connection is a cluster's.
    #[cfg(not(feature = "cluster"))]
    #[allow(clippy::unused_async)] // the cluster's version asks the cluster
    pub(crate) async fn master_slots(&mut self, _: u16, _: Duration) -> Option<Vec<(u16, u16)>> {
        None
    }
}

/// From a `CLUSTER SLOTS` reply (`[[first, last, [host, port, id], replicas…], …]`), the ranges
/// of the master whose range holds `slot`.
#[cfg(feature = "cluster")]
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
fn build_with_tls(
    url: impl redis::IntoConnectionInfo,
    tls: &TlsSettings,
) -> RedisResult<redis::Client> {
    redis::Client::build_with_tls(url, certificates(tls))
}

#[cfg(feature = "tls")]
fn ensure_crypto_provider() {
    crate::tls::ensure_crypto_provider();
}

#[cfg(not(feature = "tls"))]
fn ensure_crypto_provider() {}

#[cfg(not(feature = "tls"))]
fn build_with_tls(
    url: impl redis::IntoConnectionInfo,
    _tls: &TlsSettings,
) -> RedisResult<redis::Client> {
    // Unreachable: without the feature no TLS setting can be made, and `check_url` rejects
    // `rediss://`.
    redis::Client::open(url)
}

#[cfg(all(feature = "cluster", feature = "tls"))]
fn with_cluster_tls(builder: ClusterClientBuilder, tls: &TlsSettings) -> ClusterClientBuilder {
    crate::tls::ensure_crypto_provider();
    if tls.is_set() {
        builder.certs(certificates(tls))
    } else {
        builder
    }
}

#[cfg(all(feature = "cluster", not(feature = "tls")))]
fn with_cluster_tls(builder: ClusterClientBuilder, _tls: &TlsSettings) -> ClusterClientBuilder {
    builder
}

#[cfg(all(feature = "sentinel", feature = "tls"))]
fn with_sentinel_tls(
    builder: redis::sentinel::SentinelClientBuilder,
    tls: &TlsSettings,
) -> redis::sentinel::SentinelClientBuilder {
    if tls.is_set() {
        builder
            .set_client_to_redis_certificates(certificates(tls))
            .set_client_to_sentinel_certificates(certificates(tls))
    } else {
        builder
    }
}

#[cfg(all(feature = "sentinel", not(feature = "tls")))]
fn with_sentinel_tls(
    builder: redis::sentinel::SentinelClientBuilder,
    _tls: &TlsSettings,
) -> redis::sentinel::SentinelClientBuilder {
    // Unreachable: without the feature `parse_sentinel` rejects `rediss+sentinel://`.
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
            (
                "redis://user:s3cr3t@[bad",
                "does not parse: invalid IPv6 address",
            ),
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

    #[cfg(feature = "cluster")]
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

    #[cfg(feature = "cluster")]
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

    /// Without the `sentinel` feature a Sentinel URL is a configuration error that names it.
    #[cfg(not(feature = "sentinel"))]
    #[test]
    fn a_sentinel_url_needs_the_sentinel_feature() {
        let error = single("redis+sentinel://127.0.0.1:26379/mymaster")
            .err()
            .unwrap();
        assert!(error.contains("`sentinel` feature"), "{error}");
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
