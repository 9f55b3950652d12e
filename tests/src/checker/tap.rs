//! The tap on a Redis node: a `MONITOR` connection opened before traffic starts, read on a
//! thread of its own (so a busy runtime never makes it fall behind), and the parsing of its
//! lines.
//!
//! A `MONITOR` line is `<seconds>.<micros> [<db> <source>] "arg" "arg" ...`, each argument
//! escaped as Redis's `sdscatrepr` writes it (`\"`, `\\`, `\n`, `\r`, `\t`, `\a`, `\b`,
//! `\xHH`). `<source>` is `lua` for a command a script ran, the client's address otherwise (on
//! a replica, the master's address for what it replicates). On Redis 7 a script's own
//! `EVALSHA`/`EVAL` line comes just before the lines of the commands it ran.

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One line of a node's `MONITOR` stream.
#[derive(Clone, Debug)]
pub(crate) struct Line {
    /// The server's time when it ran the command, µs since the Unix epoch.
    pub(crate) micros: u64,
    /// `true` when a script ran it (`[<db> lua]`).
    pub(crate) lua: bool,
    /// The port of the client that sent it (`None` for a script's command): on a replica, its
    /// master's port for what it replicates.
    pub(crate) port: Option<u16>,
    /// The command and its arguments, unescaped.
    pub(crate) args: Vec<String>,
}

/// A `MONITOR` connection to one node, read until the node goes away or [`Tap::close`].
pub(crate) struct Tap {
    /// Which node (of its topology) it taps.
    pub(crate) node: usize,
    address: SocketAddr,
    stream: TcpStream,
    lines: Arc<Mutex<Vec<Line>>>,
    reader: Option<JoinHandle<()>>,
}

impl Tap {
    /// Opens a tap on the node at `address`; it records from when this returns.
    ///
    /// # Panics
    ///
    /// When the node does not accept `MONITOR` within 10 s.
    pub(crate) fn open(node: usize, address: SocketAddr) -> Tap {
        let stream = TcpStream::connect_timeout(&address, Duration::from_secs(10))
            .unwrap_or_else(|error| panic!("tap: connect to node {node}: {error}"));
        let mut writer = stream.try_clone().expect("clone the tap's stream");
        writer.write_all(b"MONITOR\r\n").expect("send MONITOR");
        let mut reader = BufReader::new(stream.try_clone().expect("clone the tap's stream"));
        let mut first = String::new();
        reader.read_line(&mut first).expect("read MONITOR's answer");
        assert!(first.starts_with("+OK"), "MONITOR answered {first:?}");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let reader = std::thread::Builder::new()
            .name(format!("checker-tap-{}", address.port()))
            .spawn({
                let lines = Arc::clone(&lines);
                move || read(reader, &lines)
            })
            .expect("start the tap's thread");
        Tap {
            node,
            address,
            stream,
            lines,
            reader: Some(reader),
        }
    }

    /// Waits (up to `within`) until the tap has seen every command the node ran before this
    /// call: it sends the node an `ECHO` of a marker, and waits for the marker's line. `false`
    /// when the node does not answer (frozen, killed).
    pub(crate) fn sync(&self, within: Duration) -> bool {
        let marker = format!("checker-sync-{}", super::next_marker());
        let Ok(mut stream) = TcpStream::connect_timeout(&self.address, Duration::from_secs(5))
        else {
            return false;
        };
        let command = format!("*2\r\n$4\r\nECHO\r\n${}\r\n{marker}\r\n", marker.len());
        if stream.write_all(command.as_bytes()).is_err() {
            return false;
        }
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            let seen = self
                .lines
                .lock()
                .expect("the tap's lines")
                .iter()
                .rev()
                .take(10_000)
                .any(|line| line.args.get(1) == Some(&marker));
            if seen {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// Stops reading, and returns what was read.
    pub(crate) fn close(mut self) -> Vec<Line> {
        let _ = self.stream.shutdown(Shutdown::Both);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        std::mem::take(&mut *self.lines.lock().expect("the tap's lines"))
    }
}

/// The tap's thread: reads lines until the connection ends.
fn read(mut reader: BufReader<TcpStream>, lines: &Mutex<Vec<Line>>) {
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        match reader.read_until(b'\n', &mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&buffer);
                let text = text.trim_end_matches(['\r', '\n']);
                if let Some(line) = text.strip_prefix('+').and_then(parse) {
                    lines.lock().expect("the tap's lines").push(line);
                }
            }
        }
    }
}

/// Parses one `MONITOR` line (without its leading `+`).
pub(crate) fn parse(text: &str) -> Option<Line> {
    let (stamp, rest) = text.split_once(' ')?;
    let (seconds, micros) = stamp.split_once('.')?;
    let micros = seconds.parse::<u64>().ok()? * 1_000_000 + micros.parse::<u64>().ok()?;
    let rest = rest.strip_prefix('[')?;
    let (source, rest) = rest.split_once(']')?;
    let client = source.split_whitespace().nth(1);
    let lua = client == Some("lua");
    let port = client
        .and_then(|client| client.rsplit_once(':'))
        .and_then(|(_, port)| port.parse().ok());
    Some(Line {
        micros,
        lua,
        port,
        args: unquote_all(rest.trim_start())?,
    })
}

/// Splits `"a" "b\"c"` into its unescaped arguments.
fn unquote_all(text: &str) -> Option<Vec<String>> {
    let mut args = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b' ' {
            i += 1;
            continue;
        }
        if bytes[i] != b'"' {
            return None;
        }
        i += 1;
        let mut arg = Vec::new();
        loop {
            let byte = *bytes.get(i)?;
            i += 1;
            match byte {
                b'"' => break,
                b'\\' => {
                    let escaped = *bytes.get(i)?;
                    i += 1;
                    match escaped {
                        b'n' => arg.push(b'\n'),
                        b'r' => arg.push(b'\r'),
                        b't' => arg.push(b'\t'),
                        b'a' => arg.push(7),
                        b'b' => arg.push(8),
                        b'x' => {
                            let hex = text.get(i..i + 2)?;
                            arg.push(u8::from_str_radix(hex, 16).ok()?);
                            i += 2;
                        }
                        other => arg.push(other),
                    }
                }
                other => arg.push(other),
            }
        }
        args.push(String::from_utf8_lossy(&arg).into_owned());
    }
    Some(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_client_and_script_lines() {
        let line = parse(
            r#"1796220702.807365 [0 127.0.0.1:52292] "EVALSHA" "ab" "1" "k:{a}" "m\"x y\n.1""#,
        )
        .expect("a line");
        assert_eq!(line.micros, 1_796_220_702_807_365);
        assert!(!line.lua);
        assert_eq!(line.port, Some(52_292));
        assert_eq!(line.args, ["EVALSHA", "ab", "1", "k:{a}", "m\"x y\n.1"]);
        let line =
            parse(r#"1796220702.807472 [0 lua] "ZADD" "k" "NX" "17" "\x41""#).expect("a line");
        assert!(line.lua);
        assert_eq!(line.port, None);
        assert_eq!(line.args, ["ZADD", "k", "NX", "17", "A"]);
    }
}
