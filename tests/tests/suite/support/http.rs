//! What the HTTP end-to-end tests share: a server on 127.0.0.1, a client, and a parser for the
//! Structured Field Lists (RFC 9651) of draft-ietf-httpapi-ratelimit-headers-11.

#![allow(dead_code)] // each test file uses its own part

use std::net::SocketAddr;

use axum::Router;

/// Serves `app` on 127.0.0.1 on a free port (with `ConnectInfo<SocketAddr>`), in the test's
/// runtime; returns its base URL. The server stops with the runtime, at the end of the test.
pub async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    format!("http://{addr}")
}

/// Serves the actix-web app that `configure` sets up on 127.0.0.1 on a free port, on a thread
/// of its own (an actix system, one worker); returns its base URL and the server's handle.
pub fn serve_actix<F>(configure: F) -> (String, actix_web::dev::ServerHandle)
where
    F: Fn(&mut actix_web::web::ServiceConfig) + Clone + Send + 'static,
{
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (handle_tx, handle_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            let server = actix_web::HttpServer::new(move || {
                actix_web::App::new().configure(configure.clone())
            })
            .workers(1)
            .disable_signals()
            .listen(listener)
            .unwrap()
            .run();
            handle_tx.send(server.handle()).unwrap();
            server.await
        })
    });
    (format!("http://{addr}"), handle_rx.recv().unwrap())
}

/// A wait as the draft's fields and `Retry-After` give it: whole seconds, rounded up.
pub fn seconds_up(wait: std::time::Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

/// What a denial's `Retry-After` (and its `t`) can be when the oldest admission in its window
/// was at most `age` old: the period minus that age, rounded up, to the period. The age is
/// measured (from before the first admitted request to after the denial), not guessed: on an
/// idle machine it is milliseconds, and the range is the period alone.
pub fn retry_after_range(
    period: std::time::Duration,
    age: std::time::Duration,
) -> std::ops::RangeInclusive<u64> {
    seconds_up(period.saturating_sub(age))..=period.as_secs()
}

/// A real HTTP client, without proxies (only 127.0.0.1 is called).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .unwrap()
}

/// One member of a Structured Field List whose items are Strings with Integer parameters,
/// the shape of `RateLimit-Policy` and `RateLimit`.
#[derive(Debug, PartialEq, Eq)]
pub struct Item {
    pub name: String,
    pub params: Vec<(String, i64)>,
}

impl Item {
    pub fn param(&self, key: &str) -> Option<i64> {
        self.params
            .iter()
            .find(|(name, _)| name == key)
            .map(|&(_, value)| value)
    }
}

/// Parses `value` as an sf-list of sf-string items with sf-integer parameters (RFC 9651,
/// sections 3.1, 3.1.2, 3.3.1 and 3.3.3), panicking on anything else.
pub fn parse_list(value: &str) -> Vec<Item> {
    let mut input = value.trim_start_matches(' ').as_bytes();
    let mut items = Vec::new();
    loop {
        items.push(parse_item(&mut input, value));
        skip(&mut input, b" \t");
        match input.split_first() {
            None => return items,
            Some((b',', rest)) => {
                input = rest;
                skip(&mut input, b" \t");
                assert!(!input.is_empty(), "trailing comma in {value:?}");
            }
            Some(_) => panic!("expected `,` or the end in {value:?}"),
        }
    }
}

fn skip(input: &mut &[u8], chars: &[u8]) {
    while let Some((c, rest)) = input.split_first() {
        if !chars.contains(c) {
            break;
        }
        *input = rest;
    }
}

fn parse_item(input: &mut &[u8], value: &str) -> Item {
    let Some((b'"', rest)) = input.split_first() else {
        panic!("an item is not an sf-string in {value:?}");
    };
    *input = rest;
    let mut name = String::new();
    loop {
        let Some((&c, rest)) = input.split_first() else {
            panic!("unterminated sf-string in {value:?}");
        };
        *input = rest;
        match c {
            b'"' => break,
            b'\\' => {
                let Some((&escaped @ (b'"' | b'\\'), rest)) = input.split_first() else {
                    panic!("bad escape in {value:?}");
                };
                *input = rest;
                name.push(char::from(escaped));
            }
            0x20..=0x7e => name.push(char::from(c)),
            _ => panic!("a character outside an sf-string in {value:?}"),
        }
    }
    let mut params = Vec::new();
    while let Some((b';', rest)) = input.split_first() {
        *input = rest;
        skip(input, b" ");
        let key_len = input
            .iter()
            .position(|c| !matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' | b'*'))
            .unwrap_or(input.len());
        let key = std::str::from_utf8(&input[..key_len]).unwrap().to_owned();
        assert!(
            matches!(key.as_bytes().first(), Some(b'a'..=b'z' | b'*')),
            "bad parameter key in {value:?}"
        );
        *input = &input[key_len..];
        let Some((b'=', rest)) = input.split_first() else {
            panic!("parameter `{key}` has no Integer value in {value:?}");
        };
        *input = rest;
        let negative = input.first() == Some(&b'-');
        if negative {
            *input = &input[1..];
        }
        let digits = input.iter().take_while(|c| c.is_ascii_digit()).count();
        assert!(
            (1..=15).contains(&digits),
            "parameter `{key}` is not an sf-integer in {value:?}"
        );
        let number: i64 = std::str::from_utf8(&input[..digits])
            .unwrap()
            .parse()
            .unwrap();
        *input = &input[digits..];
        assert!(
            params.iter().all(|(seen, _)| *seen != key),
            "duplicate parameter `{key}` in {value:?}"
        );
        params.push((key, if negative { -number } else { number }));
    }
    Item { name, params }
}

/// The one policy of a `RateLimit-Policy` value, checked against the draft: a String with
/// `q` (required, positive) and optionally `w` (positive); returns `(name, q, w)`.
pub fn policy(value: &str) -> (String, i64, Option<i64>) {
    let [item] = <[Item; 1]>::try_from(parse_list(value)).expect("one policy");
    let q = item.param("q").expect("`q` is required");
    assert!(q > 0, "{value}");
    let w = item.param("w");
    assert!(w.is_none_or(|w| w > 0), "{value}");
    for (key, _) in &item.params {
        assert!(["q", "w", "qu", "pk"].contains(&key.as_str()), "{value}");
    }
    (item.name, q, w)
}

/// The one item of a `RateLimit` value, checked against the draft: a String with `r`
/// (required, not negative) and `t` (not negative); returns `(name, r, t)`.
pub fn rate_limit(value: &str) -> (String, i64, i64) {
    let [item] = <[Item; 1]>::try_from(parse_list(value)).expect("one item");
    let r = item.param("r").expect("`r` is required");
    let t = item.param("t").expect("we always send `t`");
    assert!(r >= 0 && t >= 0, "{value}");
    for (key, _) in &item.params {
        assert!(["r", "t", "pk"].contains(&key.as_str()), "{value}");
    }
    (item.name, r, t)
}

/// A response's field as text, panicking when it is missing or repeated.
pub fn field<'a>(response: &'a reqwest::Response, name: &str) -> &'a str {
    let mut values = response.headers().get_all(name).iter();
    let value = values.next().unwrap_or_else(|| panic!("no `{name}` field"));
    assert!(values.next().is_none(), "`{name}` sent twice");
    value.to_str().unwrap()
}

#[test]
fn parses_the_drafts_examples_and_refuses_other_shapes() {
    assert_eq!(
        parse_list(r#""burst";q=100;w=60,"daily";q=1000;w=86400"#),
        [
            Item {
                name: "burst".into(),
                params: vec![("q".into(), 100), ("w".into(), 60)],
            },
            Item {
                name: "daily".into(),
                params: vec![("q".into(), 1000), ("w".into(), 86400)],
            },
        ]
    );
    assert_eq!(
        rate_limit(r#""default";r=50;t=30"#),
        ("default".into(), 50, 30)
    );
    for bad in [
        "default;r=1;t=1",
        r#""default";r=1,"#,
        r#""default";r="1""#,
        r#""default";R=1"#,
        r#""default";r=1;r=2"#,
        r#""default";r=1234567890123456"#,
        r#""default" ;r=1"#,
    ] {
        assert!(
            std::panic::catch_unwind(|| parse_list(bad)).is_err(),
            "{bad}"
        );
    }
}
