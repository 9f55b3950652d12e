//! A Sentinel deployment's master, watched: which one the sentinels name now.
//!
//! A failover the sentinels make while the old master lives on (`SENTINEL FAILOVER`, a
//! network partition) promotes the replica, but the old master keeps accepting writes until
//! the sentinels demote it, which they do when they next look at it (up to 10 s): until then
//! a client that stays connected writes admissions the new master never sees, and which the
//! old one drops when it becomes a replica. redis-rs's Sentinel client names the master only
//! when it connects. So a store on a Sentinel deployment asks the sentinels which master they
//! name every [`INTERVAL`] (`SENTINEL GET-MASTER-ADDR-BY-NAME`, on a connection kept to the
//! first sentinel that answers), and drops each runtime's connection once two answers in a
//! row name another master than the one it was made to (which the store keeps with the
//! connection, in `per_runtime.rs`): the next check connects to the new master. (Two, so that
//! a sentinel that is ahead of the one the connection asked does not make the connections go
//! back and forth.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::ConnectionAddr;
use redis::aio::MultiplexedConnection;

use crate::runtime::timeout;

/// A master's host and port.
pub(crate) type Address = (String, u16);

/// The master at `address`, as the sentinels name it (`None` for an address they never name:
/// a Unix socket's).
pub(crate) fn address_of(address: &ConnectionAddr) -> Option<Address> {
    match address {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            Some((host.clone(), *port))
        }
        _ => None,
    }
}

/// How often the sentinels are asked which master they name.
pub(crate) const INTERVAL: Duration = Duration::from_millis(200);

/// What the store knows of a Sentinel deployment's master (see the module docs).
pub(crate) struct MasterWatch {
    inner: Arc<Watched>,
}

struct Watched {
    /// A client for each sentinel (its address, credentials and TLS).
    sentinels: Vec<redis::Client>,
    /// The name the sentinels know the master by.
    master: String,
    /// Set while a watch runs.
    watching: AtomicBool,
}

/// A claim to run the one watch of a store (see [`MasterWatch::claim`]), released when
/// dropped.
pub(crate) struct WatchClaim(Arc<Watched>);

impl Drop for WatchClaim {
    fn drop(&mut self) {
        self.0.watching.store(false, Ordering::Release);
    }
}

impl MasterWatch {
    /// A watch of the master the sentinels of `sentinels` know as `master`.
    pub(crate) fn new(sentinels: Vec<redis::Client>, master: &str) -> MasterWatch {
        MasterWatch {
            inner: Arc::new(Watched {
                sentinels,
                master: master.to_owned(),
                watching: AtomicBool::new(false),
            }),
        }
    }

    /// The one watch of this store, unless one runs (a load first: this is asked on every
    /// check, so that a watch whose runtime shut down is replaced).
    pub(crate) fn claim(&self) -> Option<WatchClaim> {
        let watching = &self.inner.watching;
        (!watching.load(Ordering::Acquire) && !watching.swap(true, Ordering::AcqRel))
            .then(|| WatchClaim(Arc::clone(&self.inner)))
    }
}

impl WatchClaim {
    /// Asks the sentinels (each within `limit`) which master they name; returns it when
    /// `previous` (the last ask's answer, which this one replaces) named the same. No sentinel
    /// answering says nothing.
    pub(crate) async fn confirmed<'a>(
        &self,
        connection: &mut Option<MultiplexedConnection>,
        previous: &'a mut Option<Address>,
        limit: Duration,
    ) -> Option<&'a Address> {
        let named = self.named(connection, limit).await;
        let confirmed = named.is_some() && named == *previous;
        *previous = named;
        previous.as_ref().filter(|_| confirmed)
    }

    /// The master the first sentinel that answers names, on `connection` (kept between
    /// asks; replaced when it fails).
    async fn named(
        &self,
        connection: &mut Option<MultiplexedConnection>,
        limit: Duration,
    ) -> Option<Address> {
        let mut command = redis::cmd("SENTINEL");
        command.arg("GET-MASTER-ADDR-BY-NAME").arg(&self.0.master);
        if let Some(open) = connection {
            if let Ok(Ok(Some(named))) = timeout(limit, command.query_async(open)).await {
                return Some(named);
            }
            *connection = None;
        }
        for sentinel in &self.0.sentinels {
            let Ok(Ok(mut open)) =
                timeout(limit, sentinel.get_multiplexed_async_connection()).await
            else {
                continue;
            };
            if let Ok(Ok(Some(named))) = timeout(limit, command.query_async(&mut open)).await {
                *connection = Some(open);
                return Some(named);
            }
        }
        None
    }
}
