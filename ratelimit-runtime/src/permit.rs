//! [`Permit`]: an admission that can be refunded once the call's outcome is known.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use crate::check::{Records, Shared};
use crate::decision::Decision;
use crate::error::RateLimitError;
use crate::limit::LimitRef;
use crate::rate::Rate;

/// The answer to [`Limiter::check_permit`](crate::Limiter::check_permit): the check's
/// [`Decision`] (it derefs to it), and, when the call was admitted, the way to take the
/// admission back with [`refund`](Permit::refund) when the call turns out not to count (a
/// login that succeeded, when only failures count; a call that failed on our side).
///
/// Dropping a permit keeps the admission: a body that panicked, or a future dropped before
/// the call finished, may have acted, and is counted. A denied permit records nothing, and
/// its refund does nothing.
///
/// A permit owns its key (one copy) and a handle on the limiter; it is `Send`, so the refund
/// may come from another task.
pub struct Permit {
    decision: Decision,
    refund: Option<Refund>,
}

/// What a refund needs: the limiter's state, the limit checked, and where the call was
/// recorded.
struct Refund {
    shared: Arc<Shared>,
    key: String,
    rate: Rate,
    cost: u32,
    records: Records,
}

impl Permit {
    /// The permit of a check of `key` against `rate` for `cost`, answered `decision`, the call
    /// recorded as `records` (empty for a denial, a cost of 0, or a policy's answer that
    /// recorded nothing).
    pub(crate) fn new(
        shared: &Arc<Shared>,
        limit: LimitRef<'_>,
        decision: Decision,
        records: Records,
    ) -> Permit {
        let refund = (!records.is_empty()).then(|| Refund {
            shared: Arc::clone(shared),
            key: limit.key.to_owned(),
            rate: limit.rate,
            cost: limit.cost,
            records,
        });
        Permit { decision, refund }
    }

    /// The check's decision.
    #[must_use]
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// Takes the admission back: removes exactly this call's entries (its cost) from the log
    /// that recorded them, so that the window holds what it would without the call. On Redis
    /// that is one script on the server (or cluster slot) that admitted the call, through its
    /// circuit breaker and within the limiter's timeout; when the caller stops waiting, the
    /// refund is handed to the runtime and still made. A check the
    /// [`FailurePolicy::Local`](crate::FailurePolicy::Local) fallback answered is refunded
    /// there; one [`Open`](crate::FailurePolicy::Open) admitted recorded nothing. Entries that
    /// left the window already, or a key [`reset`](crate::Limiter::reset) since, leave nothing
    /// to remove (in process, a call's entries are its cost's entries at its time: after a
    /// reset, a refund may remove a later call's entry of the very same microsecond, which
    /// only a [`ManualClock`](crate::testing::ManualClock) standing still makes). A permit
    /// that recorded nothing (a denial, a cost of 0, a would-be denial, an `Open` admission)
    /// refunds nothing: `Ok(())`.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::Unavailable`] when the store could not be reached (down, slow, its
    /// breaker open, or no Tokio runtime): the entries then stay until they leave the window,
    /// as a call that counted would.
    pub async fn refund(self) -> Result<(), RateLimitError> {
        let Some(refund) = self.refund else {
            return Ok(());
        };
        let limit = LimitRef {
            key: &refund.key,
            rate: refund.rate,
            cost: refund.cost,
        };
        refund
            .shared
            .refund_records(&[limit], refund.records, |_| true)
            .await
            .map_err(RateLimitError::from)
    }
}

impl Deref for Permit {
    type Target = Decision;

    fn deref(&self) -> &Decision {
        &self.decision
    }
}

/// Leaves the key out: it may hold a user identifier.
impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("decision", &self.decision)
            .field("refundable", &self.refund.is_some())
            .finish()
    }
}
