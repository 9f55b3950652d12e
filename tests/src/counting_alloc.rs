//! A global allocator that counts allocations, for tests and benchmarks that measure them.
//!
//! A binary installs it with
//! `#[global_allocator] static ALLOCATOR: CountingAllocator = CountingAllocator;` and then
//! counts what a closure allocates on the current thread with [`count_allocations`], or by how
//! many bytes it grew the live heap with [`heap_growth`]. Counting is per thread and only
//! inside those calls, so the test harness and other threads are left out (and so is what
//! another thread allocates or frees on the closure's behalf: a closure that drives a
//! `current_thread` Tokio runtime keeps its tasks on its own thread).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// The system allocator, counting the allocations (reallocations included) made inside
/// [`count_allocations`] or [`heap_growth`] on the calling thread, and the bytes they take
/// and give back.
pub struct CountingAllocator;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Bytes allocated minus bytes freed on this thread while counting.
    static GROWN: Cell<i64> = const { Cell::new(0) };
}

/// Records an allocation (`allocation`: a new block, or a block resized) that took `taken`
/// bytes and gave back `freed`, when this thread counts.
fn record(allocation: bool, taken: usize, freed: usize) {
    // `try_with`: a thread being torn down has no locals left, and is not counted.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        if allocation {
            let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        }
        let delta =
            i64::try_from(taken).unwrap_or(i64::MAX) - i64::try_from(freed).unwrap_or(i64::MAX);
        let _ = GROWN.try_with(|grown| grown.set(grown.get().saturating_add(delta)));
    }
}

// SAFETY: every call is passed on to `System` unchanged; counting touches only `const`
// thread-locals without destructors, which never allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(true, layout.size(), 0);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(true, layout.size(), 0);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(true, new_size, layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        record(false, 0, layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Runs `f` and returns its result with the number of allocations it made on this thread
/// (0 unless the binary installed [`CountingAllocator`]). Dropping the result is not counted.
pub fn count_allocations<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let (result, allocations, _) = counted(f);
    (result, allocations)
}

/// Runs `f` and returns its result with the bytes by which it grew the live heap on this
/// thread: the bytes it allocated here and did not free, less those it freed here that were
/// allocated before (negative when it freed more than it kept). Requested sizes, not what the
/// system allocator rounds them up to; 0 unless the binary installed [`CountingAllocator`].
/// Dropping the result is not counted.
pub fn heap_growth<R>(f: impl FnOnce() -> R) -> (R, i64) {
    let (result, _, grown) = counted(f);
    (result, grown)
}

fn counted<R>(f: impl FnOnce() -> R) -> (R, u64, i64) {
    ALLOCATIONS.set(0);
    GROWN.set(0);
    COUNTING.set(true);
    let result = f();
    COUNTING.set(false);
    (result, ALLOCATIONS.get(), GROWN.get())
}

/// The output of `future`, which must be ready on its first poll (the in-process store's
/// checks are), polled with a no-op waker and no runtime.
///
/// # Panics
///
/// When the future is not ready on its first poll.
pub fn poll_ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("expected a future ready on its first poll"),
    }
}
