//! [`Slot`]: a call's place under a concurrency limit, held until it is dropped; and
//! [`Limiter::acquire`], which takes one.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::check::Held;
use crate::concurrency::Concurrency;
use crate::decision::Decision;
use crate::error::{Denied, RateLimitError};
use crate::limit::{Limit, LimitRef};
use crate::limiter::Limiter;

/// The scope a denial of [`Limiter::acquire`] names (a key given by hand has none).
const SCOPE: &str = "concurrency";

/// A slot of a [`Concurrency`] limit, held by one call: the answer of
/// [`Limiter::acquire`]. The call holds it until the `Slot` is dropped: at the end of its
/// scope, when the call returns, fails or panics, or when the future holding it is dropped.
/// Dropping it releases the slot without waiting (in Redis, a script put on the runtime's
/// connection before the drop returns, whose answer the runtime awaits), so that another
/// call may take it. A process about to exit (a job, a command-line tool) releases it with
/// [`release`](Slot::release), which waits for the store's answer: a runtime shut down with
/// a release on its way drops it, and the slot then counts until its slot time ends.
///
/// While it is held, the limiter renews it in a remote store every third of the slot time.
/// When renewals cannot reach the store for a slot time, or find the slot gone (a reset, a
/// failover without `wait_for_replicas`), the store no longer counts the call: its claim is
/// over. [`is_held`](Slot::is_held) then says `false`, and [`lost`](Slot::lost) completes;
/// the call is not interrupted. A call that must not run beyond its claim races its work
/// against `lost()`:
///
/// ```
/// use ratelimit_runtime::{Concurrency, Limiter};
///
/// # async fn export(user: &str) -> Result<u64, ratelimit_runtime::RateLimitError> { Ok(1) }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), ratelimit_runtime::RateLimitError> {
/// let limiter = Limiter::memory();
/// let exports = Concurrency::new(2)?;
/// let slot = limiter.acquire("user:42:export", exports).await?;
/// let rows = tokio::select! {
///     rows = export("42") => rows?,
///     () = slot.lost() => return Ok(()), // the store no longer counts this call
/// };
/// drop(slot); // released here (or at the end of the scope)
/// # assert_eq!(rows, 1);
/// # Ok(())
/// # }
/// ```
///
/// A slot the failure policy answered for holds nothing in the store: under
/// [`Open`](crate::FailurePolicy::Open) none at all; under
/// [`Local`](crate::FailurePolicy::Local) one in the process's fallback, released there.
pub struct Slot {
    decision: Decision,
    held: Held,
}

impl Slot {
    /// The check's decision: admitted, with the slots left (`remaining`) once this one is
    /// taken.
    #[must_use]
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// `false` once the call's claim is over: the store no longer counts it (see the type's
    /// docs). Always `true` in process, where a slot lasts until it is dropped.
    #[must_use]
    pub fn is_held(&self) -> bool {
        !self.held.claim().is_lost()
    }

    /// Completes when the call's claim is over (see the type's docs); never, while renewals
    /// reach the store and find the slot.
    pub async fn lost(&self) {
        self.held.claim().lost().await;
    }

    /// Releases the slot and waits for the store's answer (within the limiter's timeout),
    /// where dropping it does not wait: before a process exits, so that the next process
    /// finds the slot free.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::Unavailable`] when the store could not be reached (down, slow, its
    /// breaker open): the slot then counts until its slot time ends after its last renewal.
    pub async fn release(self) -> Result<(), RateLimitError> {
        self.held.release().await.map_err(RateLimitError::from)
    }
}

/// Leaves the key out: it may hold a user identifier.
impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slot")
            .field("decision", &self.decision)
            .field("held", &self.is_held())
            .finish()
    }
}

impl Limiter {
    /// Takes a slot of `key` under `concurrency` for the call at hand: admitted iff fewer than
    /// [`max`](Concurrency::max) calls of the key hold one, across every process sharing the
    /// store, and then held until the returned [`Slot`] is dropped. Denied at once when
    /// every slot is held (see [`acquire_waiting`](Limiter::acquire_waiting) to wait).
    ///
    /// The key names a set of slots of its own (in Redis, `<prefix><key>`): give a
    /// concurrency limit a key no rate limit checks (`user:42:exports`, beside a rate's
    /// `user:42`). The [concurrency guide](crate::guide::concurrency) tells the bound, the
    /// renewals and what failures do.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::Denied`] when every slot is held (its scope `concurrency`, its key
    /// `key`, its retry-after an estimate: see the guide); otherwise as
    /// [`check`](Limiter::check).
    pub async fn acquire(
        &self,
        key: &str,
        concurrency: Concurrency,
    ) -> Result<Slot, RateLimitError> {
        let shared = Arc::clone(self.shared());
        let rate = concurrency.rate();
        let key = key.to_owned();
        // To its end even if the caller stops waiting: a slot taken then is released at once.
        crate::runtime::to_the_end(async move {
            let sent = Held::sent(&shared);
            let limits = vec![Limit::new(key.as_str(), rate)];
            let (decisions, records) = shared.check_holding(None, limits, false).await?;
            let decision = *decisions.deciding().decision();
            if !decision.allowed {
                let denied = Denied::new(SCOPE, Some(key), rate, decision);
                return Err(RateLimitError::Denied(Box::new(denied)));
            }
            let limit = LimitRef {
                key: &key,
                rate,
                cost: 1,
            };
            let held = Held::new(&shared, None, &[limit], records, sent);
            Ok(Slot { decision, held })
        })
        .await
    }

    /// [`acquire`](Limiter::acquire), waiting for a slot while every one is held: it asks
    /// again after each denial's retry-after (an estimate: 100 ms at most), plus a jitter,
    /// until a slot is taken or until `max_wait` would be spent, then answers the last
    /// denial. Nothing is held while it waits, and it never blocks the store's connection: a
    /// wait is a series of checks, as [`until_ready`](Limiter::until_ready)'s is.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Limiter::acquire).
    pub async fn acquire_waiting(
        &self,
        key: &str,
        concurrency: Concurrency,
        max_wait: Duration,
    ) -> Result<Slot, RateLimitError> {
        crate::wait::waiting(self, max_wait, || self.acquire(key, concurrency)).await
    }
}
