//! [`SharedLimits`]: the writes of the limits shared through Redis, through the limiter
//! (`registry/redis.rs` gives the entries their form; the registry follows them).

use crate::error::RateLimitError;
use crate::registry::catalog;
use crate::registry::redis::{self, Follower};
use crate::registry::{Limits, Mode, Override, Registry, ScopeLimits, Source};
use crate::store::redis::RedisStore;
use crate::store::redis::registry::Write;

/// The limits shared by every instance through Redis, changed at run time (see
/// [`Limiter::shared_limits`](crate::Limiter::shared_limits) and
/// [`guide::operating`](crate::guide::operating#the-limits-shared-through-redis)): each change
/// is one atomic write to the limiter's Redis, read back by this instance before it returns
/// (so in force here then, unless Redis could not be read that instant) and by every other
/// instance that follows them within about a quarter of a second. Between
/// sources, the shared limits win over a limits file's entries and yield to
/// [`Limiter::set_limits`](crate::Limiter::set_limits)', at equal specificity.
///
/// Every method fails with [`RateLimitError::InvalidConfig`], nothing written, when the
/// limiter does not follow the shared limits
/// ([`LimiterBuilder::shared_limits`](crate::LimiterBuilder::shared_limits)), and with
/// [`RateLimitError::Unavailable`] when Redis did not take the change in time (it may have,
/// and may still, when only the reply was lost or the write is held on its way: read
/// [`entries`](SharedLimits::entries) before writing again). A write sent again after a
/// dropped connection runs once: each carries an id of its own.
pub struct SharedLimits<'a> {
    pub(crate) registry: &'a Registry,
    pub(crate) shared: Option<(&'a Follower, &'a RedisStore)>,
}

impl std::fmt::Debug for SharedLimits<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedLimits")
            .field("followed", &self.shared.is_some())
            .finish_non_exhaustive()
    }
}

impl SharedLimits<'_> {
    /// Sets `scope`'s rate and mode to `entry`'s (one it leaves unset is removed), and each
    /// override `entry` holds (replacing that key's); the scope's other overrides stay.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::InvalidConfig`], nothing written, when an entry contradicts the
    /// code's limits, as for [`Limiter::set_limits`](crate::Limiter::set_limits); see
    /// [`SharedLimits`] for the rest.
    pub async fn set_scope(&self, scope: &str, entry: ScopeLimits) -> Result<(), RateLimitError> {
        let writes = redis::scope_writes(scope, &entry);
        judged(&Limits::new().scope(scope, entry))?;
        self.write(None, writes).await
    }

    /// Removes `scope`'s whole entry: its rate, its mode and every override of its keys.
    ///
    /// # Errors
    ///
    /// See [`SharedLimits`].
    pub async fn remove_scope(&self, scope: &str) -> Result<(), RateLimitError> {
        let (clear, writes) = redis::scope_removal(scope);
        self.write(Some(&clear), writes.into()).await
    }

    /// Sets the override of the caller's `key` in `scope` (the key as the caller gives it,
    /// before any escaping).
    ///
    /// # Errors
    ///
    /// As [`set_scope`](SharedLimits::set_scope).
    pub async fn set_override(
        &self,
        scope: &str,
        key: &str,
        over: Override,
    ) -> Result<(), RateLimitError> {
        judged(&Limits::new().scope(scope, ScopeLimits::new().key(key, over)))?;
        self.write(None, vec![redis::override_write(scope, key, &over)])
            .await
    }

    /// Removes the override of `key` in `scope`, if any.
    ///
    /// # Errors
    ///
    /// See [`SharedLimits`].
    pub async fn remove_override(&self, scope: &str, key: &str) -> Result<(), RateLimitError> {
        self.write(None, vec![Write::Remove(redis::key_field(scope, key))])
            .await
    }

    /// Sets the whole limiter's mode on every instance (`None`: none, a limits file's or the
    /// one each limiter was built with in force), as
    /// [`Limiter::set_mode`](crate::Limiter::set_mode) sets it on one.
    ///
    /// # Errors
    ///
    /// See [`SharedLimits`].
    pub async fn set_mode(&self, mode: Option<Mode>) -> Result<(), RateLimitError> {
        self.write(None, vec![redis::mode_write(mode)]).await
    }

    /// Every entry Redis holds now, read in one round trip (an entry that does not parse, or
    /// that the code's limits reject, is left out and logged).
    ///
    /// # Errors
    ///
    /// See [`SharedLimits`].
    pub async fn entries(&self) -> Result<Limits, RateLimitError> {
        let (_, store) = self.followed()?;
        let read = store.read_shared(None).await?;
        let mut limits = Limits::new();
        redis::apply_reads(&mut limits, std::slice::from_ref(&read));
        Ok(limits)
    }

    /// The shared limits this instance has in force now, as it last read them (no round
    /// trip; entries it skipped left out): what [`entries`](SharedLimits::entries) answered
    /// when every instance is up to date.
    #[must_use]
    pub fn in_force(&self) -> Limits {
        self.registry.get(Source::Redis)
    }

    /// Reads the changes made since this instance last read them, and puts them in force now
    /// (its thread does so every quarter of a second): for a service that wants the shared
    /// limits in force before it takes traffic.
    ///
    /// # Errors
    ///
    /// See [`SharedLimits`].
    pub async fn refresh(&self) -> Result<(), RateLimitError> {
        let (follower, store) = self.followed()?;
        self.registry.catch_up(follower, store).await?;
        Ok(())
    }

    fn followed(&self) -> Result<(&Follower, &RedisStore), RateLimitError> {
        self.shared.ok_or_else(|| {
            RateLimitError::InvalidConfig(
                "this limiter does not follow the shared limits: build it on Redis with \
                 `LimiterBuilder::shared_limits()` (the default limiter: set \
                 `RATELIMIT_SHARED_LIMITS=true`)"
                    .into(),
            )
        })
    }

    /// Writes `writes` after removing the fields `clear` matches (and the overrides this
    /// instance saw expired, if Redis's clock agrees), then puts the change in force on this
    /// instance.
    async fn write(
        &self,
        clear: Option<&str>,
        mut writes: Vec<Write>,
    ) -> Result<(), RateLimitError> {
        let (follower, store) = self.followed()?;
        let expired = redis::expired(&self.registry.get(Source::Redis), crate::clock::now_us());
        // What this write sets wins over a removal of what expired.
        let expired: Vec<Write> = expired
            .into_iter()
            .filter(|gone| {
                let Write::RemoveExpired(field) = gone else {
                    return false;
                };
                !writes
                    .iter()
                    .any(|write| matches!(write, Write::Set(set, _) if set == field))
            })
            .collect();
        writes.extend(expired);
        store.write_shared(clear, &writes).await?;
        // Written: in force here now, unless Redis cannot be read this instant (the thread
        // reads it again within a quarter of a second).
        if let Err(error) = self.registry.catch_up(follower, store).await {
            tracing::debug!(%error, "a change of the shared limits is written, and read back later");
        }
        Ok(())
    }
}

/// `limits` as the code's limits judge them.
fn judged(limits: &Limits) -> Result<(), RateLimitError> {
    catalog::judge(limits).map_err(|reason| RateLimitError::InvalidConfig(reason.into()))
}
