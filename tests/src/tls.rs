//! Private Redis servers that need credentials: over TLS ([`TlsRedis`], certificates made with
//! rcgen per server, optionally requiring client certificates) and behind ACL users and
//! `requirepass` ([`AclRedis`]).
//!
//! Each server runs `redis-server` (from `PATH`, or the path in `REDIS_SERVER`) on a free
//! loopback port, keeps its files (certificates, log) in a fresh temporary directory, persists
//! nothing, and is killed (and its directory removed) on drop. These servers are always
//! private: `RATELIMIT_TEST_REDIS_URL` does not apply to them.

use std::fs;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use redis::{ClientTlsConfig, TlsCertificates};

use crate::free_port;

/// How long a server may take to accept (TLS) connections after it was spawned.
const START_DEADLINE: Duration = crate::SERVER_START_DEADLINE;

/// Whether a [`TlsRedis`] asks for client certificates (`--tls-auth-clients`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// `optional`: a client may present a certificate (checked against the CA) or none.
    Optional,
    /// `yes`: a client without a certificate signed by the CA is refused.
    Required,
}

/// A private `redis-server` that speaks only TLS (`--port 0 --tls-port <port>`), with a server
/// certificate for `127.0.0.1` and `localhost` signed by a CA made for it, and a client
/// certificate signed by the same CA (for mutual TLS).
pub struct TlsRedis {
    url: String,
    port: u16,
    // Declared before `_dir`: the process is killed before its directory is removed.
    process: Process,
    _dir: TempDir,
    certificates: Certificates,
    client_auth: ClientAuth,
}

impl TlsRedis {
    /// A TLS server on which client certificates are optional (`--tls-auth-clients optional`).
    ///
    /// # Panics
    ///
    /// With a clear message when no `redis-server` can be found, when it was built without
    /// TLS, when rustls cannot make a client configuration (no process-wide `CryptoProvider`),
    /// or when the server does not start.
    #[must_use]
    pub fn start() -> TlsRedis {
        TlsRedis::start_with(ClientAuth::Optional)
    }

    /// A TLS server that refuses clients without a certificate signed by its CA
    /// (`--tls-auth-clients yes`).
    ///
    /// # Panics
    ///
    /// As [`TlsRedis::start`].
    #[must_use]
    pub fn start_requiring_client_certificates() -> TlsRedis {
        TlsRedis::start_with(ClientAuth::Required)
    }

    /// A TLS server with the given client authentication.
    ///
    /// # Panics
    ///
    /// As [`TlsRedis::start`].
    #[must_use]
    pub fn start_with(client_auth: ClientAuth) -> TlsRedis {
        let certificates = Certificates::generate();
        let mut last_error = String::new();
        for _ in 0..5 {
            match TlsRedis::start_on(free_port(), client_auth, certificates.clone()) {
                Ok(redis) => return redis,
                Err(error) => last_error = error,
            }
        }
        panic!("could not start a private TLS redis-server: {last_error}")
    }

    fn start_on(
        port: u16,
        client_auth: ClientAuth,
        certificates: Certificates,
    ) -> Result<TlsRedis, String> {
        let dir = TempDir::new("tls");
        let cert_file = dir.write("server.crt", certificates.server_cert_pem.as_bytes());
        let key_file = dir.write("server.key", certificates.server_key_pem.as_bytes());
        let ca_file = dir.write("ca.crt", certificates.ca_pem.as_bytes());
        let auth = match client_auth {
            ClientAuth::Optional => "optional",
            ClientAuth::Required => "yes",
        };
        let args: Vec<String> = [
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--tls-cert-file",
            &path_arg(&cert_file),
            "--tls-key-file",
            &path_arg(&key_file),
            "--tls-ca-cert-file",
            &path_arg(&ca_file),
            "--tls-auth-clients",
            auth,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &path_arg(dir.path()),
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        let mut process = Process(Some(spawn_server(&args, &dir)));
        let url = format!("rediss://127.0.0.1:{port}/");
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + START_DEADLINE;
        let mut last_error = String::from("no TLS connection attempted yet");
        loop {
            if let Some(status) = process.exit_status() {
                return Err(exited(&dir, port, status, true));
            }
            // Cheap first: is anything listening? Then a real TLS handshake and PING.
            if TcpStream::connect_timeout(&address, Duration::from_millis(100)).is_ok() {
                match tls_ping(&url, &certificates) {
                    Ok(()) => {
                        return Ok(TlsRedis {
                            url,
                            port,
                            process,
                            _dir: dir,
                            certificates,
                            client_auth,
                        });
                    }
                    Err(error) => last_error = error,
                }
            }
            if Instant::now() > deadline {
                process.stop();
                return Err(format!(
                    "TLS redis-server on port {port} did not answer a TLS PING within {:?} \
                     (last error: {last_error}); its log:\n{}",
                    START_DEADLINE,
                    dir.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server's URL, `rediss://127.0.0.1:<port>/`.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's TLS port.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the server requires client certificates.
    #[must_use]
    pub fn client_auth(&self) -> ClientAuth {
        self.client_auth
    }

    /// The PEM certificate of the CA that signed the server's (and the client's) certificate.
    #[must_use]
    pub fn ca_pem(&self) -> &[u8] {
        self.certificates.ca_pem.as_bytes()
    }

    /// The PEM certificate of another CA, which signed neither certificate: a client trusting
    /// only it must refuse the server.
    #[must_use]
    pub fn unrelated_ca_pem(&self) -> &[u8] {
        self.certificates.unrelated_ca_pem.as_bytes()
    }

    /// A PEM client certificate signed by the CA (for mutual TLS).
    #[must_use]
    pub fn client_cert_pem(&self) -> &[u8] {
        self.certificates.client_cert_pem.as_bytes()
    }

    /// The PEM (PKCS#8) private key of [`client_cert_pem`](TlsRedis::client_cert_pem).
    #[must_use]
    pub fn client_key_pem(&self) -> &[u8] {
        self.certificates.client_key_pem.as_bytes()
    }

    /// A redis-rs client trusting only the CA and presenting the client certificate.
    ///
    /// # Panics
    ///
    /// When redis-rs rejects the certificates (it should not).
    #[must_use]
    pub fn client(&self) -> redis::Client {
        redis::Client::build_with_tls(self.url.as_str(), self.certificates.redis_tls())
            .expect("a TLS client for the test Redis")
    }

    /// A connection (over TLS, with the client certificate) for inspecting what the limiter
    /// wrote.
    ///
    /// # Panics
    ///
    /// When the server cannot be reached.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        self.client()
            .get_multiplexed_async_connection_with_config(&crate::inspection_config())
            .await
            .expect("connect to the test Redis over TLS")
    }

    /// Stops the server now (its directory stays until the `TlsRedis` drops).
    pub fn stop(&mut self) {
        self.process.stop();
    }
}

/// A private plain `redis-server` with `requirepass` (the `default` user's password) and one
/// more ACL user, `limiter`, allowed every command on keys `ratelimit:*` only.
pub struct AclRedis {
    port: u16,
    user_password: String,
    default_password: String,
    // Declared before `_dir`: the process is killed before its directory is removed.
    process: Process,
    _dir: TempDir,
}

impl AclRedis {
    /// The ACL user's name.
    pub const USER: &'static str = "limiter";
    /// The key pattern the ACL user may touch (`~ratelimit:*`): its limiters' key prefixes
    /// must start with this.
    pub const KEY_PATTERN_PREFIX: &'static str = "ratelimit:";

    /// An ACL server on a free port, with passwords unique to this server (so that a test can
    /// search logs and messages for them).
    ///
    /// # Panics
    ///
    /// With a clear message when no `redis-server` can be found or it does not start.
    #[must_use]
    pub fn start() -> AclRedis {
        let mut last_error = String::new();
        for _ in 0..5 {
            match AclRedis::start_on(free_port()) {
                Ok(redis) => return redis,
                Err(error) => last_error = error,
            }
        }
        panic!("could not start a private ACL redis-server: {last_error}")
    }

    fn start_on(port: u16) -> Result<AclRedis, String> {
        let dir = TempDir::new("acl");
        let user_password = unique_secret("userpw");
        let default_password = unique_secret("defaultpw");
        let args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--requirepass",
            &default_password,
            "--user",
            AclRedis::USER,
            "on",
            &format!(">{user_password}"),
            &format!("~{}*", AclRedis::KEY_PATTERN_PREFIX),
            // The least the limiter needs, as the guide says (`guide::redis`, "TLS and ACL
            // users"): the script and its commands.
            "+@scripting",
            "+@sortedset",
            "+pexpire",
            "+pttl",
            "+time",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &path_arg(dir.path()),
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        let mut process = Process(Some(spawn_server(&args, &dir)));
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if let Some(status) = process.exit_status() {
                return Err(exited(&dir, port, status, false));
            }
            if authenticated_ping(address, &user_password, &default_password) {
                return Ok(AclRedis {
                    port,
                    user_password,
                    default_password,
                    process,
                    _dir: dir,
                });
            }
            if Instant::now() > deadline {
                process.stop();
                return Err(format!(
                    "ACL redis-server on port {port} did not answer within {START_DEADLINE:?}; \
                     its log:\n{}",
                    dir.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The server's port.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The ACL user's password.
    #[must_use]
    pub fn user_password(&self) -> &str {
        &self.user_password
    }

    /// The `default` user's password (`requirepass`).
    #[must_use]
    pub fn default_password(&self) -> &str {
        &self.default_password
    }

    /// `redis://limiter:<password>@127.0.0.1:<port>/`.
    #[must_use]
    pub fn user_url(&self) -> String {
        self.url_with(Some(AclRedis::USER), &self.user_password)
    }

    /// `redis://:<requirepass>@127.0.0.1:<port>/`.
    #[must_use]
    pub fn default_url(&self) -> String {
        self.url_with(None, &self.default_password)
    }

    /// `redis://[user]:<password>@127.0.0.1:<port>/` (the password is put in as given: use
    /// URL-safe text).
    #[must_use]
    pub fn url_with(&self, user: Option<&str>, password: &str) -> String {
        format!(
            "redis://{}:{password}@127.0.0.1:{}/",
            user.unwrap_or(""),
            self.port
        )
    }

    /// A connection as the `default` user (every key) for inspecting what the limiter wrote.
    ///
    /// # Panics
    ///
    /// When the server cannot be reached.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.default_url())
            .expect("valid test URL")
            .get_multiplexed_async_connection_with_config(&crate::inspection_config())
            .await
            .expect("connect to the test Redis with requirepass")
    }

    /// Stops the server now.
    pub fn stop(&mut self) {
        self.process.stop();
    }
}

/// The PEM texts of one server's certificates and keys.
#[derive(Clone)]
struct Certificates {
    ca_pem: String,
    unrelated_ca_pem: String,
    server_cert_pem: String,
    server_key_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
}

impl Certificates {
    /// A CA; a server certificate for `127.0.0.1` and `localhost` and a client certificate,
    /// both signed by it; and an unrelated CA.
    fn generate() -> Certificates {
        fn generated<T>(what: &str, result: Result<T, rcgen::Error>) -> T {
            result.unwrap_or_else(|error| panic!("rcgen could not make the {what}: {error}"))
        }
        let ca = generated("CA", self_signed_ca("ratelimit tests CA"));
        let unrelated = generated(
            "unrelated CA",
            self_signed_ca("ratelimit tests unrelated CA"),
        );

        let server_key = generated("server key", KeyPair::generate());
        let mut server = generated(
            "server certificate parameters",
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]),
        );
        server
            .distinguished_name
            .push(DnType::CommonName, "ratelimit tests server");
        server.use_authority_key_identifier_extension = true;
        server.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_cert = generated("server certificate", server.signed_by(&server_key, &ca));

        let client_key = generated("client key", KeyPair::generate());
        let mut client = generated(
            "client certificate parameters",
            CertificateParams::new(Vec::<String>::new()),
        );
        client
            .distinguished_name
            .push(DnType::CommonName, "ratelimit tests client");
        client.use_authority_key_identifier_extension = true;
        client.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_cert = generated("client certificate", client.signed_by(&client_key, &ca));

        Certificates {
            ca_pem: ca.pem(),
            unrelated_ca_pem: unrelated.pem(),
            server_cert_pem: server_cert.pem(),
            server_key_pem: server_key.serialize_pem(),
            client_cert_pem: client_cert.pem(),
            client_key_pem: client_key.serialize_pem(),
        }
    }

    /// For redis-rs: trust only the CA, present the client certificate.
    fn redis_tls(&self) -> TlsCertificates {
        TlsCertificates {
            client_tls: Some(ClientTlsConfig {
                client_cert: self.client_cert_pem.clone().into_bytes(),
                client_key: self.client_key_pem.clone().into_bytes(),
            }),
            root_cert: Some(self.ca_pem.clone().into_bytes()),
        }
    }
}

/// A self-signed CA certificate named `name`.
fn self_signed_ca(name: &str) -> Result<CertifiedIssuer<'static, KeyPair>, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, KeyPair::generate()?)
}

/// One TLS handshake and `PING` with redis-rs (trusting the CA, presenting the client
/// certificate), on a thread of its own with its own runtime, so that this works whether or not
/// the caller is inside a Tokio runtime.
///
/// # Panics
///
/// When rustls panics because it has no `CryptoProvider` (or for any other panic in the
/// client): a clear message instead of a confusing test failure.
fn tls_ping(url: &str, certificates: &Certificates) -> Result<(), String> {
    let url = url.to_owned();
    let tls = certificates.redis_tls();
    let attempt = std::thread::spawn(move || -> Result<(), String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| format!("could not build a Tokio runtime: {error}"))?;
        runtime.block_on(async move {
            let client = redis::Client::build_with_tls(url.as_str(), tls)
                .map_err(|error| format!("redis-rs refused the TLS settings: {error}"))?;
            let ping = async {
                let mut connection = client.get_multiplexed_async_connection().await?;
                redis::cmd("PING")
                    .query_async::<String>(&mut connection)
                    .await
            };
            match tokio::time::timeout(Duration::from_secs(2), ping).await {
                Ok(Ok(reply)) if reply == "PONG" => Ok(()),
                Ok(Ok(reply)) => Err(format!("PING answered {reply:?}")),
                Ok(Err(error)) => Err(format!("TLS PING failed: {error}")),
                Err(_) => Err("TLS PING did not answer within 2 s".to_owned()),
            }
        })
    });
    match attempt.join() {
        Ok(result) => result,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(a non-text panic)");
            if message.contains("CryptoProvider") {
                panic!(
                    "rustls has no process-level CryptoProvider, so no TLS client (redis-rs's \
                     included) can be configured: neither of rustls's `ring` / `aws-lc-rs` \
                     features is enabled by exactly one crate, and nothing called \
                     `CryptoProvider::install_default`. redis-rs's `tokio-rustls-comp` feature \
                     enables no provider; the library's `tls` feature must choose one. rustls \
                     said: {message}"
                )
            }
            panic!("the TLS PING of the test Redis panicked: {message}")
        }
    }
}

/// `true` when the ACL server at `address` accepts both passwords and answers `PING`.
fn authenticated_ping(address: SocketAddr, user_password: &str, default_password: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_millis(100)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let request = format!(
        "AUTH {} {user_password}\r\nAUTH {default_password}\r\nPING\r\n",
        AclRedis::USER
    );
    let expected = b"+OK\r\n+OK\r\n+PONG\r\n";
    let mut reply = [0; 17];
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == expected
}

/// Spawns `redis-server` with `args`, its output going to the log file in `dir`.
///
/// # Panics
///
/// When the binary cannot be found or run.
fn spawn_server(args: &[String], dir: &TempDir) -> Child {
    let binary = crate::redis_server_binary();
    let log = fs::File::create(dir.log_path()).expect("create the redis-server log file");
    let log_too = log.try_clone().expect("clone the log file handle");
    crate::spawn_or_explain(
        Command::new(&binary)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_too),
        &binary,
        "the TLS and ACL tests need a redis-server binary (built with TLS). Install it \
         (Debian/Ubuntu: `apt-get install -y redis-server`) or set REDIS_SERVER to its path",
    )
}

/// The error for a server that exited while starting; a panic when the reason is that it was
/// built without TLS (retrying on another port would not help).
fn exited(dir: &TempDir, port: u16, status: std::process::ExitStatus, tls: bool) -> String {
    let log = dir.log();
    if tls && log.contains("Bad directive") && log.to_ascii_lowercase().contains("tls") {
        panic!(
            "redis-server does not know the TLS options: it was built without TLS support \
             (BUILD_TLS=yes). Install one built with TLS (Debian/Ubuntu: `apt-get install -y \
             redis-server`, 6.0 or newer) or set REDIS_SERVER to its path. Its output:\n{log}"
        );
    }
    format!("redis-server on port {port} exited with {status}; its output:\n{log}")
}

fn path_arg(path: &Path) -> String {
    path.to_str()
        .expect("the temporary directory's path is UTF-8")
        .to_owned()
}

/// Text unique to this process and call, for passwords that a test searches logs for.
fn unique_secret(kind: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    format!(
        "{kind}{}x{}x{nanos:08x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A `redis-server` process, killed (and reaped) when dropped, panics included.
struct Process(Option<Child>);

impl Process {
    /// The exit status, once the process has exited.
    fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.0
            .as_mut()
            .and_then(|child| child.try_wait().ok().flatten())
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A fresh directory under the system's temporary directory, removed (with its contents) on
/// drop.
struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new(kind: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        for _ in 0..100 {
            let nanos = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos();
            let path = std::env::temp_dir().join(format!(
                "ratelimit-tests-{kind}-{}-{}-{nanos}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            match fs::create_dir(&path) {
                Ok(()) => return TempDir { path },
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(error) => panic!(
                    "could not create a temporary directory {}: {error}",
                    path.display()
                ),
            }
        }
        panic!("could not create a fresh temporary directory")
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn write(&self, name: &str, contents: &[u8]) -> PathBuf {
        let path = self.path.join(name);
        fs::write(&path, contents)
            .unwrap_or_else(|error| panic!("could not write {}: {error}", path.display()));
        path
    }

    fn log_path(&self) -> PathBuf {
        self.path.join("redis-server.log")
    }

    fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}
