//! A process `fork()`ed while its limiter holds a lease: the child holds a copy of the
//! parent's lease table, and must neither spend nor give back the parent's reserve (the parent
//! does both). One test in its own binary: it forks, which a binary running other tests on
//! other threads should not.

use std::time::{Duration, Instant};

use ratelimit_runtime::{FailurePolicy, Limiter, Rate};
use tests::{TestRedis, unique_prefix};

/// Checks `rate` for `time` on `runtime`; how many were admitted.
fn check_for(
    runtime: &tokio::runtime::Runtime,
    limiter: &Limiter,
    rate: Rate,
    time: Duration,
) -> u64 {
    runtime.block_on(async {
        let start = Instant::now();
        let mut admitted = 0;
        while start.elapsed() < time {
            if limiter
                .check("hot", rate)
                .await
                .is_ok_and(|decision| decision.allowed)
            {
                admitted += 1;
            }
        }
        admitted
    })
}

#[test]
fn a_forked_child_never_spends_its_parents_reserve() {
    let redis = TestRedis::start_private();
    let limiter = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(unique_prefix("fork"))
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_secs(2))
        .build()
        .expect("a limiter");
    // 320 per 30 s: leases of up to 20 admissions, each lasting a second.
    let rate = Rate::new(320, Duration::from_secs(30)).unwrap().leased();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Leases of 1, 2, 4, 8, 16, then 20, of which 14 are spent: 6 held at the fork.
    let before: u64 = runtime.block_on(async {
        let mut admitted = 0;
        for _ in 0..45 {
            admitted += u64::from(limiter.check("hot", rate).await.unwrap().allowed);
        }
        admitted
    });
    let mut pipe = [0; 2];
    // SAFETY: `pipe` is given a buffer of two descriptors.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0, "a pipe");
    // SAFETY: the child only makes a runtime of its own, checks, writes to the pipe and leaves
    // with `_exit`, without running any of the parent's destructors.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let admitted = check_for(&runtime, &limiter, rate, Duration::from_secs(3));
        let bytes = admitted.to_le_bytes();
        // SAFETY: eight bytes from a live buffer to the pipe, then the child's end.
        unsafe {
            libc::write(pipe[1], bytes.as_ptr().cast(), bytes.len());
            libc::_exit(0);
        }
    }
    let after = check_for(&runtime, &limiter, rate, Duration::from_secs(3));
    // The child's three seconds, and a generous deadline for a busy machine.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut status = 0;
    // SAFETY: waits on our own child, without blocking.
    while unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) } == 0 {
        if Instant::now() > deadline {
            // SAFETY: our own child.
            unsafe { libc::kill(child, libc::SIGKILL) };
            panic!("the forked child did not finish within two minutes");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut bytes = [0_u8; 8];
    // SAFETY: eight bytes into a live buffer, written by the child before it exited.
    let read = unsafe { libc::read(pipe[0], bytes.as_mut_ptr().cast(), bytes.len()) };
    assert_eq!(read, 8, "the child's count");
    let in_child = u64::from_le_bytes(bytes);
    let total = before + after + in_child;
    assert!(
        total <= 320,
        "{total} admitted in one 30 s window against a threshold of 320 \
         ({before} before the fork, then {after} in the parent and {in_child} in the child)"
    );
}
