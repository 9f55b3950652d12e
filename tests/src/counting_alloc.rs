//! A global allocator that counts allocations, for tests and benchmarks that measure them.
//!
//! A binary installs it with
//! `#[global_allocator] static ALLOCATOR: CountingAllocator = CountingAllocator;` and then
//! counts what a closure allocates on the current thread with [`count_allocations`]. Counting
//! is per thread and only inside that call, so the test harness and other threads are left out.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// The system allocator, counting the allocations (reallocations included) made inside
/// [`count_allocations`] on the calling thread.
pub struct CountingAllocator;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn record() {
    // `try_with`: a thread being torn down has no locals left, and is not counted.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
    }
}

// SAFETY: every call is passed on to `System` unchanged; counting touches only `const`
// thread-locals without destructors, which never allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Runs `f` and returns its result with the number of allocations it made on this thread
/// (0 unless the binary installed [`CountingAllocator`]). Dropping the result is not counted.
pub fn count_allocations<R>(f: impl FnOnce() -> R) -> (R, u64) {
    ALLOCATIONS.set(0);
    COUNTING.set(true);
    let result = f();
    COUNTING.set(false);
    (result, ALLOCATIONS.get())
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
