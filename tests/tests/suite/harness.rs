//! The test infrastructure itself: the fault proxy ([`tests::proxy`]) and the Redis Cluster
//! ([`tests::cluster`]) do what they promise.
//!
//! Timing: the tests wait for states (polling, within [`STATE_DEADLINE`]), assert the lower
//! bounds a fault guarantees (a delayed round trip takes at least twice the delay; a stalled
//! one times out), and bound the rest by ten times what it should take, as a guard against
//! hanging rather than a speed measurement.

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use tests::cluster::TestCluster;
use tests::proxy::{Fault, FaultProxy};
use tests::{STATE_DEADLINE, TestRedis};

/// The reply timeout of the connections whose commands are all meant to be answered.
const PATIENT: Duration = Duration::from_secs(10);

/// A connection through `url` whose commands time out after `timeout`.
async fn connect(
    url: &str,
    timeout: Duration,
) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(10)))
        .set_response_timeout(Some(timeout));
    redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

async fn ping(connection: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<String> {
    redis::cmd("PING").query_async(connection).await
}

/// PINGs a connection with a short reply timeout until it answers: a PING that a loaded
/// machine made time out is sent again (its late reply is matched to it and dropped), any
/// other error or answer is returned.
async fn ping_answered(connection: &mut redis::aio::MultiplexedConnection) -> String {
    let deadline = Instant::now() + STATE_DEADLINE;
    loop {
        match ping(connection).await {
            Err(error) if error.is_timeout() && Instant::now() < deadline => {}
            answer => return answer.unwrap(),
        }
    }
}

/// Polls `condition` every few milliseconds until it holds; `false` if it still does not after
/// `within`.
async fn eventually(within: Duration, mut condition: impl AsyncFnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if condition().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// FaultProxy

#[tokio::test]
async fn proxy_passes_commands_both_ways() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    assert_eq!(proxy.url(), format!("redis://{}/", proxy.address()));
    assert_eq!(proxy.fault(), Fault::Pass);

    let mut connection = connect(&proxy.url(), PATIENT).await.unwrap();
    assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
    let _: () = connection
        .set("harness:proxy:pass", "through")
        .await
        .unwrap();
    let mut direct = redis.connection().await;
    let stored: String = direct.get("harness:proxy:pass").await.unwrap();
    assert_eq!(stored, "through", "the SET reached the upstream");

    assert!(proxy.wait_for_connections(1, STATE_DEADLINE).await);
    assert_eq!(proxy.accepted(), 1);
}

#[tokio::test]
async fn proxy_stall_holds_traffic_until_pass() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let mut connection = connect(&proxy.url(), Duration::from_millis(200))
        .await
        .unwrap();
    assert_eq!(ping_answered(&mut connection).await, "PONG");

    proxy.set(Fault::Stall);
    let started = Instant::now();
    let error = ping(&mut connection).await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(error.is_timeout(), "a stalled PING times out: {error:?}");
    assert!(
        elapsed >= Duration::from_millis(200) && elapsed < Duration::from_secs(2),
        "{elapsed:?}"
    );

    // The stall holds bytes rather than dropping them: a command sent now does not reach
    // Redis, and does once the proxy passes again.
    let key = "harness:proxy:stall";
    let sent: redis::RedisResult<i64> = connection.incr(key, 1).await;
    assert!(sent.unwrap_err().is_timeout());
    let mut direct = redis.connection().await;
    let held: Option<i64> = direct.get(key).await.unwrap();
    assert_eq!(held, None, "a stalled INCR does not reach Redis");
    assert_eq!(proxy.connections(), 1, "the stalled connection stays open");

    proxy.set(Fault::Pass);
    assert!(
        eventually(STATE_DEADLINE, async || {
            direct.get::<_, Option<i64>>(key).await.unwrap() == Some(1)
        })
        .await,
        "the held INCR reaches Redis after Pass"
    );
    // The late replies are matched to their timed-out requests and dropped: the connection
    // works again (its answer is a PONG, not a late reply to the INCR).
    assert_eq!(ping_answered(&mut connection).await, "PONG");
}

#[tokio::test]
async fn proxy_delay_slows_each_direction() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let mut connection = connect(&proxy.url(), PATIENT).await.unwrap();
    assert_eq!(ping(&mut connection).await.unwrap(), "PONG");

    proxy.set(Fault::Delay(Duration::from_millis(100)));
    let started = Instant::now();
    assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
    let delayed = started.elapsed();
    // 100 ms on the way there, 100 ms on the way back.
    assert!(
        delayed >= Duration::from_millis(200) && delayed < Duration::from_secs(2),
        "{delayed:?}"
    );

    // Back to Pass: faster than the delayed round trip could ever be (one such round trip
    // proves it; a loaded machine may make some slower).
    proxy.set(Fault::Pass);
    let (passed, within) = tests::wait_for(
        "a round trip faster than the delay allows",
        STATE_DEADLINE,
        async || {
            let started = Instant::now();
            assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
            let passed = started.elapsed();
            (passed < Duration::from_millis(200)).then_some(passed)
        },
    )
    .await;
    eprintln!("delayed round trip {delayed:?}; after Pass {passed:?} (found in {within:?})");
}

#[tokio::test]
async fn proxy_refuse_closes_and_pass_listens_again_on_the_same_port() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let url = proxy.url();
    let mut connection = connect(&url, PATIENT).await.unwrap();
    assert_eq!(ping(&mut connection).await.unwrap(), "PONG");

    proxy.set(Fault::Refuse);
    assert_eq!(proxy.connections(), 0, "Refuse closes the open connections");
    let error = ping(&mut connection).await.unwrap_err();
    assert!(
        error.is_connection_dropped() || error.is_io_error(),
        "{error:?}"
    );

    let started = Instant::now();
    let refused = tokio::net::TcpStream::connect(proxy.address())
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    let error = connect(&url, PATIENT).await.unwrap_err();
    // Refused, not timed out (a connection timeout is 10 s): the guard is only against hanging.
    assert!(error.is_connection_refusal(), "{error:?}");
    let refused_in = started.elapsed();
    assert!(refused_in < Duration::from_secs(10), "{refused_in:?}");
    eprintln!("two connections refused in {refused_in:?}");

    proxy.set(Fault::Pass);
    assert_eq!(proxy.url(), url);
    let mut again = connect(&url, PATIENT).await.unwrap();
    assert_eq!(ping(&mut again).await.unwrap(), "PONG");
}

#[tokio::test]
async fn proxy_cut_mid_call_runs_the_command_but_loses_the_reply() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let mut connection = connect(&proxy.url(), PATIENT).await.unwrap();
    assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
    assert!(proxy.wait_for_connections(1, STATE_DEADLINE).await);

    proxy.set(Fault::CutMidCall);
    let key = "harness:proxy:cut-mid-call";
    let error = connection.incr::<_, _, i64>(key, 1).await.unwrap_err();
    assert!(
        error.is_connection_dropped() || error.is_unrecoverable_error(),
        "the client sees the connection drop, not a timeout: {error:?}"
    );
    let mut direct = redis.connection().await;
    let counted: i64 = direct.get(key).await.unwrap();
    assert_eq!(counted, 1, "the INCR ran on Redis");
    assert!(proxy.wait_for_connections(0, STATE_DEADLINE).await);
}

#[tokio::test]
async fn proxy_cut_closes_every_connection_and_keeps_listening() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let mut first = connect(&proxy.url(), PATIENT).await.unwrap();
    let mut second = connect(&proxy.url(), PATIENT).await.unwrap();
    assert!(proxy.wait_for_connections(2, STATE_DEADLINE).await);

    proxy.cut();
    assert_eq!(proxy.connections(), 0);
    assert!(ping(&mut first).await.is_err());
    assert!(ping(&mut second).await.is_err());

    let mut third = connect(&proxy.url(), PATIENT).await.unwrap();
    assert_eq!(ping(&mut third).await.unwrap(), "PONG");
    assert_eq!(proxy.accepted(), 3);
}

/// The proxy lives on its own thread: it serves one runtime after another, and dropping it
/// closes everything.
#[test]
fn proxy_outlives_runtimes_and_stops_on_drop() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let url = proxy.url();
    for _ in 0..2 {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut connection = connect(&url, PATIENT).await.unwrap();
            assert_eq!(ping(&mut connection).await.unwrap(), "PONG");
        });
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut connection = connect(&url, PATIENT).await.unwrap();
        let address = proxy.address();
        drop(proxy);
        assert!(
            ping(&mut connection).await.is_err(),
            "dropping closes the connections"
        );
        let refused = tokio::net::TcpStream::connect(address).await.unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    });
}

// ---------------------------------------------------------------------------------------------
// TestCluster

#[tokio::test]
async fn cluster_forms_and_serves_keys_in_many_slots() {
    let cluster = TestCluster::start(3);
    assert_eq!(cluster.len(), 3);
    assert_eq!(cluster.urls().len(), 3);

    // Every master owns slots, split in node order.
    assert_eq!(cluster.node_for_slot(0), 0);
    assert_eq!(cluster.node_for_slot(8_000), 1);
    assert_eq!(cluster.node_for_slot(16_383), 2);

    // key_slot agrees with the server, hash tags included.
    let mut node0 = cluster.connection(0).await;
    for key in [
        "a",
        "user:1000",
        "{user:1000}:followers",
        "x{}y",
        "{}{z}",
        "foo{bar}{zap}",
    ] {
        let server: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query_async(&mut node0)
            .await
            .unwrap();
        assert_eq!(TestCluster::key_slot(key), server, "slot of {key:?}");
    }

    let mut client = cluster.cluster_connection().await;
    let mut slots = std::collections::BTreeSet::new();
    for n in 0..300 {
        let key = format!("harness:cluster:{n}");
        slots.insert(TestCluster::key_slot(&key));
        let _: () = client.set(&key, n).await.unwrap();
    }
    assert!(slots.len() > 250, "{} slots", slots.len());
    for n in 0..300 {
        let key = format!("harness:cluster:{n}");
        let value: i64 = client.get(&key).await.unwrap();
        assert_eq!(value, n);
    }

    // Each key is where the slot map says.
    for node in 0..3 {
        let key = cluster.key_for_node(node, "harness:cluster:");
        let mut direct = cluster.connection(node).await;
        assert!(
            direct.exists::<_, bool>(&key).await.unwrap(),
            "{key} on node {node}"
        );
    }
}

#[tokio::test]
async fn cluster_kill_fails_one_node_in_bounded_time_and_spares_the_others() {
    let mut cluster = TestCluster::start(3);
    let keys: Vec<String> = (0..3)
        .map(|node| cluster.key_for_node(node, "harness:kill:"))
        .collect();
    let mut client = cluster.cluster_connection().await;
    for key in &keys {
        let _: () = client.set(key, "before").await.unwrap();
    }

    cluster.kill(1);
    assert!(!cluster.is_alive(1));
    let started = Instant::now();
    let error = client.get::<_, String>(&keys[1]).await.unwrap_err();
    let elapsed = started.elapsed();
    // A dead node is refused at once; the client's own timeouts bound the rest. A guard
    // against hanging, not a speed measurement.
    assert!(
        elapsed < STATE_DEADLINE,
        "failed after {elapsed:?}: {error:?}"
    );
    eprintln!("a killed node's key failed in {elapsed:?}: {error}");

    for node in [0, 2] {
        let value: String = client.get(&keys[node]).await.unwrap();
        assert_eq!(value, "before");
        let _: () = client.set(&keys[node], "after").await.unwrap();
    }
    // A new client, started from the live nodes only, agrees.
    let mut fresh = cluster.cluster_connection().await;
    let value: String = fresh.get(&keys[2]).await.unwrap();
    assert_eq!(value, "after");
    assert!(fresh.get::<_, String>(&keys[1]).await.is_err());
}

#[tokio::test]
async fn cluster_migrates_a_slot_with_traffic_in_between() {
    let cluster = TestCluster::start(3);
    let old = "harness:{migrate}:old";
    let new = "harness:{migrate}:new";
    let slot = TestCluster::key_slot(old);
    assert_eq!(TestCluster::key_slot(new), slot);
    let from = cluster.node_for_slot(slot);
    let to = (from + 1) % 3;

    let mut client = cluster.cluster_connection().await;
    let _: () = client.set(old, "moved").await.unwrap();

    cluster.begin_migration(slot, from, to).await;
    // The source still serves the keys it has, and sends new ones to the target (ASK).
    let value: String = client.get(old).await.unwrap();
    assert_eq!(value, "moved");
    let _: () = client
        .set(new, "created during the migration")
        .await
        .unwrap();
    let mut target = cluster.connection(to).await;
    let in_target: i64 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query_async(&mut target)
        .await
        .unwrap();
    assert_eq!(in_target, 1, "the new key went to the importing node");

    assert_eq!(cluster.migrate_keys(slot, from, to, 10).await, 1);
    let value: String = client.get(old).await.unwrap();
    assert_eq!(value, "moved", "read from the target after ASK");

    cluster.finish_migration(slot, from, to).await;
    assert_eq!(cluster.node_for_slot(slot), to);
    let value: String = client.get(old).await.unwrap();
    assert_eq!(value, "moved", "the old client follows MOVED");
    let mut fresh = cluster.cluster_connection().await;
    let value: String = fresh.get(new).await.unwrap();
    assert_eq!(value, "created during the migration");
    let in_target: i64 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query_async(&mut target)
        .await
        .unwrap();
    assert_eq!(in_target, 2);

    // And back in one call.
    assert_eq!(cluster.migrate_slot(slot, to, from).await, 2);
    assert_eq!(cluster.node_for_slot(slot), from);
    let value: String = client.get(old).await.unwrap();
    assert_eq!(value, "moved");
    let value: String = fresh.get(new).await.unwrap();
    assert_eq!(value, "created during the migration");
}
