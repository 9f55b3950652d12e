//! The table of the slots a limiter's calls hold in a remote store under concurrency limits
//! ([`Concurrency`](crate::Concurrency)), and the one thread per limiter that renews them and
//! sends their releases; each call's [`Claim`]. What a slot is, and what renewals and
//! releases promise: `slots.rs`, beside this file, which fills the table.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use event_listener::Event;
use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;

use crate::limit::LimitRef;
use crate::rate::Rate;
use crate::store::Admission;
use crate::testing::ManualClock;

/// The longest the renewing thread sleeps, so that it sees its limiter dropped.
const IDLE: Duration = Duration::from_secs(1);

/// A limiter's slots held in a remote store, renewed by its thread (see the module docs).
pub(crate) struct Slots {
    inner: Arc<Inner>,
}

/// What the limiter and its renewing thread share.
struct Inner {
    table: Mutex<Table>,
    /// Woken when a release is queued.
    wake: Condvar,
    /// Told when a release ended.
    released: Event,
}

#[derive(Default)]
struct Table {
    held: HashMap<u64, Entry>,
    releases: Vec<Release>,
    /// The releases queued or on their way, by the keys they release: a slot released in
    /// this process is free for its next acquire of the key ([`Slots::settled`]).
    pending: HashMap<String, usize>,
    next_id: u64,
    /// Whether the renewing thread was started.
    started: bool,
}

/// One slot held in a remote store.
struct Entry {
    key: String,
    rate: Rate,
    admission: Admission,
    /// When it is renewed next.
    due: Instant,
    claim: Arc<Claim>,
}

/// The release of a call's slots in a remote store, queued for the thread: the refund of its
/// slot limits, which keeps the limiter's state alive until it is sent.
pub(crate) type Release = BoxFuture<'static, ()>;

/// A slot due for renewal: its id, key, rate and admission.
pub(crate) type Due = (u64, String, Rate, Admission);

/// The renewal of slots due: whether each is still held (`None`: its renewal failed). Made
/// by `slots.rs` over the limiter's store, and run on the thread's runtime.
pub(crate) type Renew = Box<dyn Fn(Vec<Due>) -> BoxFuture<'static, Vec<Option<bool>>> + Send>;

/// Whether a call's claim on its slots still holds (see the module docs): until a renewal
/// finds a slot gone, or until the time until which the store surely counts every slot of the
/// call passes, on the claim's clock (the limiter's manual clock, whose time the store's
/// scores then take; else a monotonic clock). Once over, it stays over.
pub(crate) struct Claim {
    lost: AtomicBool,
    ended: Event,
    /// Until when the store surely counts every slot of the call, in µs on the claim's clock
    /// (`u64::MAX`: no slot that expires).
    until: AtomicU64,
    /// Each slot's deadline, by its id in the table.
    deadlines: Mutex<Vec<(u64, u64)>>,
    clock: Option<ManualClock>,
}

/// The instant the monotonic claims' clock counts from.
fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// The time now on the clock of the claims of a limiter on `clock` (its manual clock, if
/// any), in µs.
pub(crate) fn claim_now(clock: Option<&ManualClock>) -> u64 {
    match clock {
        Some(clock) => clock.now_us(),
        None => u64::try_from(base().elapsed().as_micros()).unwrap_or(u64::MAX),
    }
}

/// How often a wait for a claim's end on a manual clock looks at the clock.
const MANUAL_LOOK: Duration = Duration::from_millis(10);

impl Claim {
    /// A claim on `clock` (the limiter's manual clock, if any).
    pub(crate) fn new(clock: Option<ManualClock>) -> Claim {
        Claim {
            lost: AtomicBool::new(false),
            ended: Event::new(),
            until: AtomicU64::new(u64::MAX),
            deadlines: Mutex::new(Vec::new()),
            clock,
        }
    }

    /// The time now on the claim's clock, in µs.
    pub(crate) fn now(&self) -> u64 {
        claim_now(self.clock.as_ref())
    }

    /// Notes that one of the call's slots surely counts until `until` (µs on the claim's
    /// clock; the earliest of its slots' deadlines is the claim's). A claim that ended stays
    /// ended.
    fn counts_until(&self, id: u64, until: u64) {
        let mut deadlines = self
            .deadlines
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match deadlines.iter_mut().find(|(slot, _)| *slot == id) {
            Some((_, deadline)) => *deadline = until,
            None => deadlines.push((id, until)),
        }
        let earliest = deadlines.iter().map(|&(_, deadline)| deadline).min();
        if !self.is_lost() {
            self.until
                .store(earliest.unwrap_or(u64::MAX), Ordering::Release);
        }
    }

    /// Ends the claim, waking whoever waits for it to end.
    pub(crate) fn lose(&self) {
        if !self.lost.swap(true, Ordering::AcqRel) {
            self.ended.notify(usize::MAX);
        }
    }

    /// Whether the claim ended: a renewal found a slot gone, or the time until which the
    /// store surely counts every slot passed (read here, not when the thread notices; and
    /// for good).
    pub(crate) fn is_lost(&self) -> bool {
        if self.lost.load(Ordering::Acquire) {
            return true;
        }
        let until = self.until.load(Ordering::Acquire);
        if until != u64::MAX && self.now() >= until {
            self.lose();
            return true;
        }
        false
    }

    /// Completes when the claim ends (never, for one that lasts until its call does): told by
    /// the renewing thread, or seen when its time passes.
    pub(crate) async fn lost(&self) {
        loop {
            if self.is_lost() {
                return;
            }
            let listener = self.ended.listen();
            if self.is_lost() {
                return;
            }
            let until = self.until.load(Ordering::Acquire);
            if until == u64::MAX || crate::runtime::Runtime::current().is_none() {
                listener.await;
                continue;
            }
            let look = match self.clock {
                Some(_) => MANUAL_LOOK,
                None => Duration::from_micros(until.saturating_sub(self.now())),
            };
            futures_util::future::select(listener, std::pin::pin!(crate::runtime::sleep(look)))
                .await;
        }
    }
}

impl Slots {
    pub(crate) fn new() -> Slots {
        Slots {
            inner: Arc::new(Inner {
                table: Mutex::new(Table::default()),
                wake: Condvar::new(),
                released: Event::new(),
            }),
        }
    }

    /// Adds the slot `limit` holds as `admission`, whose check was sent at `sent` (and at
    /// `claim_sent` on the claim's clock), to the
    /// renewed ones, starting the thread with the first (renewing by what `renew` makes);
    /// returns its id.
    pub(crate) fn hold(
        &self,
        limit: LimitRef<'_>,
        admission: Admission,
        (sent, claim_sent): (Instant, u64),
        claim: &Arc<Claim>,
        renew: impl FnOnce() -> Renew,
    ) -> u64 {
        let mut table = self.inner.lock();
        let id = table.next_id;
        table.next_id += 1;
        claim.counts_until(id, claim_sent.saturating_add(limit.rate.period_us()));
        table.held.insert(
            id,
            Entry {
                key: limit.key.to_owned(),
                rate: limit.rate,
                admission,
                due: sent + interval(limit.rate),
                claim: Arc::clone(claim),
            },
        );
        if !table.started {
            table.started = true;
            if let Err(error) = start(Arc::downgrade(&self.inner), renew()) {
                tracing::error!(
                    %error,
                    "the thread that renews concurrency limits' slots could not start: slots \
                     held in the store end a slot time after their check"
                );
            }
        }
        id
    }

    /// Stops renewing the slots `ids`.
    pub(crate) fn forget(&self, ids: &[u64]) {
        let mut table = self.inner.lock();
        for id in ids {
            table.held.remove(id);
        }
    }

    /// Queues `release` of the slots of `keys` for the thread, and wakes it.
    pub(crate) fn release(&self, keys: Vec<String>, release: Release) {
        let mut table = self.inner.lock();
        for key in &keys {
            *table.pending.entry(key.clone()).or_default() += 1;
        }
        let inner = Arc::clone(&self.inner);
        let release = async move {
            release.await;
            let mut table = inner.lock();
            for key in &keys {
                if let Some(count) = table.pending.get_mut(key) {
                    *count -= 1;
                    if *count == 0 {
                        table.pending.remove(key);
                    }
                }
            }
            drop(table);
            inner.released.notify(usize::MAX);
        };
        table.releases.push(release.boxed());
        drop(table);
        self.inner.wake.notify_one();
    }

    /// Waits until no release of `keys` this process made is queued or on its way (at most
    /// `within`: a release stuck on a store that does not answer holds no acquire longer),
    /// so that a slot released here is free for the next acquire made here.
    pub(crate) async fn settled(&self, keys: &[&str], within: Duration) {
        let started = Instant::now();
        let pending = |table: &Table| keys.iter().any(|key| table.pending.contains_key(*key));
        if keys.is_empty() || !pending(&self.inner.lock()) {
            return;
        }
        loop {
            let listener = self.inner.released.listen();
            let left = within.saturating_sub(started.elapsed());
            if !pending(&self.inner.lock())
                || left.is_zero()
                || crate::runtime::Runtime::current().is_none()
            {
                return;
            }
            let _ = crate::runtime::timeout(left, listener).await;
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How often a slot of `rate` is renewed: every third of its slot time.
fn interval(rate: Rate) -> Duration {
    rate.period() / 3
}

/// Starts the renewing thread of `inner` (held weakly: the thread ends within [`IDLE`] of the
/// limiter's drop, once no release is queued, since a release holds the limiter's state),
/// renewing by `renew`.
fn start(inner: Weak<Inner>, renew: Renew) -> std::io::Result<()> {
    // The runtime made in the thread: one dropped here, in a caller's async context, panics.
    std::thread::Builder::new()
        .name("ratelimit-slots".into())
        .spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => renew_on(&inner, &renew, &runtime),
                Err(error) => tracing::error!(
                    %error,
                    "the runtime of the thread that renews concurrency limits' slots could \
                     not start: slots held in the store end a slot time after their check"
                ),
            }
        })?;
    Ok(())
}

/// The renewing thread's loop: wait for slots due or releases queued, send them all at once,
/// note the answers; until the limiter is dropped.
fn renew_on(inner: &Weak<Inner>, renew: &Renew, runtime: &tokio::runtime::Runtime) {
    loop {
        let Some(owner) = inner.upgrade() else {
            return;
        };
        let (due, claimed, releases) = {
            let mut table = owner.lock();
            loop {
                let now = Instant::now();
                end_lapsed(&mut table);
                let due: Vec<Due> = table
                    .held
                    .iter()
                    // Those due within a quarter of their interval too, renewed early: so
                    // that slots taken one after another are renewed together from then on.
                    .filter(|(_, entry)| entry.due <= now + interval(entry.rate) / 4)
                    .map(|(&id, entry)| (id, entry.key.clone(), entry.rate, entry.admission))
                    .collect();
                if !due.is_empty() || !table.releases.is_empty() {
                    // Each renewal's sending on its claim's clock: the store scores it later.
                    let claimed: Vec<u64> = due
                        .iter()
                        .map(|(id, ..)| table.held.get(id).map_or(0, |entry| entry.claim.now()))
                        .collect();
                    break (due, claimed, std::mem::take(&mut table.releases));
                }
                if Arc::strong_count(&owner) == 1 {
                    // The limiter is gone, and nothing is queued (a release keeps it alive).
                    return;
                }
                let next = table.held.values().map(|entry| entry.due).min();
                let sleep = next.map_or(IDLE, |next| next.saturating_duration_since(now).min(IDLE));
                table = owner
                    .wake
                    .wait_timeout(table, sleep)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        };
        let sent = Instant::now();
        let (held, ()) = runtime.block_on(futures_util::future::join(
            renew(due.clone()),
            futures_util::future::join_all(releases).map(drop),
        ));
        let mut table = owner.lock();
        for (((id, _, rate, _), held), claimed) in due.iter().zip(held).zip(claimed) {
            // Released meanwhile: nothing to note.
            let Some(entry) = table.held.get_mut(id) else {
                continue;
            };
            match held {
                Some(true) => {
                    let until = claimed.saturating_add(rate.period_us());
                    entry.claim.counts_until(*id, until);
                    entry.due = sent + interval(*rate);
                }
                Some(false) => {
                    tracing::warn!(
                        "a concurrency limit's slot is gone from the store while its call runs \
                         (reset, lost in a failover, or not renewed for its slot time): the \
                         call's claim is over"
                    );
                    entry.claim.lose();
                    table.held.remove(id);
                }
                None => entry.due = Instant::now() + interval(*rate) / 3,
            }
        }
    }
}

/// Stops renewing the slots whose claims are over: their renewals have not reached the store
/// for a slot time (the claim tells, on its own clock, and wakes whoever waits for it).
fn end_lapsed(table: &mut Table) {
    table.held.retain(|_, entry| {
        if !entry.claim.is_lost() {
            return true;
        }
        tracing::warn!(
            "a concurrency limit's slot was not renewed for its slot time (the store could not \
             be reached): the call's claim is over"
        );
        entry.claim.lose();
        false
    });
}
