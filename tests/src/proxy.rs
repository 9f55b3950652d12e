//! [`FaultProxy`]: a TCP proxy in front of a real Redis that injects network faults on command.
//!
//! The proxy listens on `127.0.0.1` and forwards every connection it accepts to the upstream
//! server, chunk by chunk, in both directions. [`FaultProxy::set`] switches it between the
//! [`Fault`] modes (passing traffic, stalling, delaying, refusing connections, cutting a
//! connection between a request and its reply); [`FaultProxy::cut`] closes every open
//! connection at once.
//!
//! It runs on its own thread with its own single-threaded Tokio runtime, so it serves any number
//! of test runtimes one after the other (a `#[tokio::test]` builds and drops one per test), never
//! runs on the test's runtime and cannot be starved by it. The control methods are synchronous:
//! they hand the order to the proxy's thread and return once it is in effect (a few
//! milliseconds; they never need the caller's runtime).
//!
//! Its port lies below the OS's ephemeral port range, so neither [`crate::free_port`] nor an
//! outgoing connection can take it while [`Fault::Refuse`] has it unbound.
//!
//! ```no_run
//! # async fn demo() {
//! use tests::proxy::{Fault, FaultProxy};
//! let redis = tests::TestRedis::start_private();
//! let proxy = FaultProxy::start(redis.address());
//! let client = redis::Client::open(proxy.url()).unwrap();
//! let mut connection = client.get_multiplexed_async_connection().await.unwrap();
//! proxy.set(Fault::Stall); // from now on Redis "never answers" on this connection
//! # }
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc as std_mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How long the proxy tries to connect to the upstream for each accepted connection; when it
/// fails the client's connection is closed. Long, so that a loaded machine never turns a
/// healthy upstream into a fault nobody asked for.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long leaving [`Fault::Refuse`] keeps trying to listen on the proxy's port again.
const REBIND_DEADLINE: Duration = Duration::from_secs(10);

/// How long a control method waits for the proxy's thread to carry out an order.
const ORDER_DEADLINE: Duration = Duration::from_secs(30);

/// The largest chunk read from one side in one go.
const CHUNK: usize = 16 * 1024;

/// What the proxy does to traffic, set with [`FaultProxy::set`]. A change applies at once to
/// new connections and to the ones already open; every byte the proxy has read is subject to
/// the mode current when it is due to be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Forward everything both ways, as soon as it arrives (the initial mode).
    Pass,
    /// A Redis that never answers: connections are accepted (and connected upstream) and kept
    /// open, the proxy keeps reading from both sides, but forwards nothing in either
    /// direction. What it reads is **held**, in order, not dropped: switching back to
    /// [`Fault::Pass`] (or [`Fault::Delay`]) delivers it, so a stalled connection resumes
    /// intact (a command sent during the stall reaches Redis then, and its reply the client).
    /// A client that gives up and closes its side during the stall gets its connection closed
    /// (the held bytes of that connection are dropped).
    Stall,
    /// Forward each chunk once this much time has passed since the proxy read it, in both
    /// directions: a request/reply round trip takes at least twice the delay. Chunks keep
    /// their order and are not serialised behind each other's delays (it adds latency, it does
    /// not cap throughput).
    Delay(Duration),
    /// Nobody listens: the proxy closes its listening socket, so a connect gets
    /// `ECONNREFUSED` at once, and it closes every open connection (both sides). Switching to
    /// any other mode listens again on the same port (same [`FaultProxy::url`]).
    Refuse,
    /// Cut between a request and its reply: client-to-server bytes are forwarded, but as soon
    /// as the server answers, the connection is closed (both sides) instead of forwarding the
    /// reply. The command reached Redis and ran; the client never hears back. A client that
    /// connects in this mode never completes a handshake that waits for a reply (e.g. `HELLO`
    /// or `CLIENT SETINFO`), so connect first, then switch.
    CutMidCall,
}

/// A TCP proxy on `127.0.0.1` in front of a Redis server, injecting [`Fault`]s on command.
///
/// Dropping it stops it: it stops listening and closes every connection (both sides) before
/// `drop` returns.
pub struct FaultProxy {
    address: SocketAddr,
    upstream: SocketAddr,
    orders: Option<mpsc::UnboundedSender<Order>>,
    counters: Arc<Counters>,
    fault: watch::Receiver<Fault>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Counters {
    open: AtomicUsize,
    accepted: AtomicUsize,
}

/// An order to the proxy's thread, with where to report that it is done.
enum Order {
    Set(Fault, std_mpsc::Sender<Result<(), String>>),
    Cut(std_mpsc::Sender<Result<(), String>>),
}

impl FaultProxy {
    /// Starts a proxy to `upstream` on a free loopback port, in [`Fault::Pass`] mode. It is
    /// listening when this returns.
    ///
    /// # Panics
    ///
    /// When no port can be bound or the proxy's thread cannot be started.
    #[must_use]
    pub fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = bind_proxy_port();
        let address = listener.local_addr().expect("the proxy's local address");
        listener
            .set_nonblocking(true)
            .expect("make the proxy's listener non-blocking");
        let (orders, receiver) = mpsc::unbounded_channel();
        let counters = Arc::new(Counters::default());
        let (fault_sender, fault) = watch::channel(Fault::Pass);
        let thread = std::thread::Builder::new()
            .name(format!("fault-proxy-{}", address.port()))
            .spawn({
                let counters = Arc::clone(&counters);
                move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("build the proxy's runtime");
                    runtime.block_on(run(listener, upstream, receiver, counters, fault_sender));
                }
            })
            .expect("start the proxy's thread");
        FaultProxy {
            address,
            upstream,
            orders: Some(orders),
            counters,
            fault,
            thread: Some(thread),
        }
    }

    /// Where clients connect: `redis://127.0.0.1:<port>/`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("redis://{}/", self.address)
    }

    /// Where clients connect (the same port across [`Fault::Refuse`]).
    #[must_use]
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The server behind the proxy.
    #[must_use]
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// The current mode.
    #[must_use]
    pub fn fault(&self) -> Fault {
        *self.fault.borrow()
    }

    /// Switches to `fault`; it is in effect when this returns (for [`Fault::Refuse`]: the port
    /// is closed and so is every connection; leaving it: the port listens again).
    ///
    /// # Panics
    ///
    /// When the proxy cannot listen on its port again within 10 s after [`Fault::Refuse`]
    /// (another process took it), or its thread is gone.
    pub fn set(&self, fault: Fault) {
        self.order(|done| Order::Set(fault, done));
    }

    /// Closes every open connection now (both sides), and keeps listening in the current mode.
    /// All are closed when this returns.
    ///
    /// # Panics
    ///
    /// When the proxy's thread is gone.
    pub fn cut(&self) {
        self.order(Order::Cut);
    }

    /// How many client connections are open now. A connection counts from when the proxy
    /// accepts it (shortly after the client's connect returns) until the proxy closes it.
    #[must_use]
    pub fn connections(&self) -> usize {
        self.counters.open.load(Ordering::SeqCst)
    }

    /// How many client connections the proxy has accepted since it started.
    #[must_use]
    pub fn accepted(&self) -> usize {
        self.counters.accepted.load(Ordering::SeqCst)
    }

    /// Waits (polling, without blocking the caller's runtime) until [`FaultProxy::connections`]
    /// is `open`; `false` if it still is not after `within`.
    pub async fn wait_for_connections(&self, open: usize, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        loop {
            if self.connections() == open {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    fn order(&self, order: impl FnOnce(std_mpsc::Sender<Result<(), String>>) -> Order) {
        let (done, report) = std_mpsc::channel();
        let sent = self
            .orders
            .as_ref()
            .is_some_and(|orders| orders.send(order(done)).is_ok());
        assert!(sent, "the fault proxy on {} has stopped", self.address);
        match report.recv_timeout(ORDER_DEADLINE) {
            Ok(Ok(())) => {}
            Ok(Err(error)) => panic!("fault proxy on {}: {error}", self.address),
            Err(_) => panic!(
                "the fault proxy on {} did not carry out an order within {ORDER_DEADLINE:?}",
                self.address
            ),
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // Closing the order channel ends the proxy's main task; its runtime then drops every
        // connection task (closing their sockets) before the thread ends.
        self.orders = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("address", &self.address)
            .field("upstream", &self.upstream)
            .field("fault", &self.fault())
            .field("connections", &self.connections())
            .finish_non_exhaustive()
    }
}

/// Binds a listener on a port below the ephemeral range (so that it can be released and bound
/// again without an outgoing connection or a `free_port` taking it meanwhile), or on any free
/// port when that range is unusually low.
fn bind_proxy_port() -> std::net::TcpListener {
    crate::bind_below_ephemeral()
}

/// Which way a chunk goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    ToServer,
    ToClient,
}

/// The proxy's main task: accepts connections and carries out orders until the proxy is
/// dropped.
async fn run(
    listener: std::net::TcpListener,
    upstream: SocketAddr,
    mut orders: mpsc::UnboundedReceiver<Order>,
    counters: Arc<Counters>,
    fault: watch::Sender<Fault>,
) {
    let address = listener.local_addr().expect("the proxy's local address");
    let mut listener =
        Some(TcpListener::from_std(listener).expect("register the proxy's listener"));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            order = orders.recv() => match order {
                None => break,
                Some(Order::Cut(done)) => {
                    close_all(&mut connections).await;
                    let _ = done.send(Ok(()));
                }
                Some(Order::Set(Fault::Refuse, done)) => {
                    fault.send_replace(Fault::Refuse);
                    listener = None;
                    close_all(&mut connections).await;
                    let _ = done.send(Ok(()));
                }
                Some(Order::Set(new, done)) => {
                    let result = if listener.is_none() {
                        rebind(address).await.map(|bound| listener = Some(bound))
                    } else {
                        Ok(())
                    };
                    if result.is_ok() {
                        fault.send_replace(new);
                    }
                    let _ = done.send(result);
                }
            },
            accepted = accept(listener.as_ref()) => match accepted {
                Ok((client, _)) => {
                    counters.accepted.fetch_add(1, Ordering::SeqCst);
                    let open = OpenConnection::new(Arc::clone(&counters));
                    connections.spawn(serve(client, upstream, fault.subscribe(), open));
                }
                // E.g. out of file descriptors: do not spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    close_all(&mut connections).await;
}

async fn accept(listener: Option<&TcpListener>) -> std::io::Result<(TcpStream, SocketAddr)> {
    match listener {
        Some(listener) => listener.accept().await,
        None => std::future::pending().await,
    }
}

/// Listens on `address` again, retrying while the port is still busy (up to 10 s).
async fn rebind(address: SocketAddr) -> Result<TcpListener, String> {
    let deadline = Instant::now() + REBIND_DEADLINE;
    loop {
        match TcpListener::bind(address).await {
            Ok(listener) => return Ok(listener),
            Err(error) if Instant::now() >= deadline => {
                return Err(format!(
                    "could not listen on {address} again within {REBIND_DEADLINE:?}: {error}"
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Closes every connection: their tasks are dropped, and with them both sockets of each.
async fn close_all(connections: &mut JoinSet<()>) {
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

/// Counts a connection as open for as long as its task lives (also when it is aborted).
struct OpenConnection(Arc<Counters>);

impl OpenConnection {
    fn new(counters: Arc<Counters>) -> OpenConnection {
        counters.open.fetch_add(1, Ordering::SeqCst);
        OpenConnection(counters)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One client connection: connects upstream, then forwards both ways until either side closes
/// or errs, or the fault says to cut; then both sockets are closed.
async fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    fault: watch::Receiver<Fault>,
    _open: OpenConnection,
) {
    let Ok(Ok(server)) =
        tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(upstream)).await
    else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::select! {
        () = forward(client_read, server_write, fault.clone(), Direction::ToServer) => {}
        () = forward(server_read, client_write, fault, Direction::ToClient) => {}
    }
}

/// Forwards one direction: reads chunks as they come (whatever the fault), and writes each
/// when the fault lets it through. Returns when reading ends (EOF or error), writing fails, or
/// the fault cuts the connection.
async fn forward(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut fault: watch::Receiver<Fault>,
    direction: Direction,
) {
    let (chunks, mut queue) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let read = async move {
        let mut buffer = vec![0; CHUNK];
        loop {
            match from.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if chunks.send((Instant::now(), buffer[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    };
    let write = async move {
        while let Some((read_at, chunk)) = queue.recv().await {
            if !release(&mut fault, read_at, direction).await {
                return;
            }
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = read => {}
        () = write => {}
    }
}

/// Waits until a chunk read at `read_at` may be written: `true` to write it, `false` to close
/// the connection.
async fn release(
    fault: &mut watch::Receiver<Fault>,
    read_at: Instant,
    direction: Direction,
) -> bool {
    loop {
        let current = *fault.borrow_and_update();
        match current {
            Fault::Pass => return true,
            Fault::CutMidCall => return direction == Direction::ToServer,
            Fault::Delay(delay) => {
                let due = read_at + delay;
                if Instant::now() >= due {
                    return true;
                }
                tokio::select! {
                    () = tokio::time::sleep_until(due) => {}
                    changed = fault.changed() => if changed.is_err() {
                        return false;
                    },
                }
            }
            // Refuse closes every connection; a chunk racing with it just waits.
            Fault::Stall | Fault::Refuse => {
                if fault.changed().await.is_err() {
                    return false;
                }
            }
        }
    }
}
