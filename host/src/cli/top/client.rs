//! A tiny blocking HTTP/1.1 client for `squall top`: one `GET` per
//! connection (`Connection: close`) over `std::net`, and a thread that asks
//! for the topology once a period. No async runtime, no dependency.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

/// How long connecting, sending or reading may take before the fetch fails.
const TIMEOUT: Duration = Duration::from_secs(2);

/// What one fetch gives: the JSON, or why there is none, in a few words.
pub type Fetched = Result<Json, String>;

/// Starts a thread that fetches `GET path` from `addr` every `period` and
/// sends each outcome; it ends when the receiver is dropped.
///
/// # Errors
/// The thread could not be spawned.
pub fn poll(
    addr: SocketAddr,
    path: &'static str,
    period: Duration,
) -> std::io::Result<Receiver<Fetched>> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new().name("top-poll".into()).spawn(move || loop {
        let started = Instant::now();
        if tx.send(get(addr, path)).is_err() {
            return;
        }
        std::thread::sleep(period.saturating_sub(started.elapsed()));
    })?;
    Ok(rx)
}

/// `GET path` from `addr`, its body parsed as JSON.
///
/// # Errors
/// The endpoint is unreachable, answers something other than 200, or not JSON.
pub fn get(addr: SocketAddr, path: &str) -> Fetched {
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| brief(&e))?;
    stream.set_read_timeout(Some(TIMEOUT)).map_err(|e| brief(&e))?;
    stream.set_write_timeout(Some(TIMEOUT)).map_err(|e| brief(&e))?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).map_err(|e| brief(&e))?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(|e| brief(&e))?;
    parse(&raw)
}

/// An I/O error without its `(os error N)` tail: `Connection refused`.
fn brief(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// Parses a whole HTTP/1.1 answer: the status must be 200 and the body
/// (plain or chunked) JSON. A non-200 answer's `{"error": ...}` is kept.
///
/// # Errors
/// A malformed answer, a status other than 200, or a body that is not JSON.
pub fn parse(raw: &[u8]) -> Fetched {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or("truncated HTTP answer")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or("not an HTTP answer")?;
    let chunked = lines.filter_map(|l| l.split_once(':')).any(|(k, v)| {
        k.trim().eq_ignore_ascii_case("transfer-encoding")
            && v.to_ascii_lowercase().contains("chunked")
    });
    if chunked {
        body = dechunk(&body).ok_or("bad chunked body")?;
    }
    let json: Option<Json> = serde_json::from_slice(&body).ok();
    match (status, json) {
        (200, Some(json)) => Ok(json),
        (200, None) => Err("the answer is not JSON".to_owned()),
        (status, json) => Err(match json.as_ref().and_then(|j| j["error"].as_str()) {
            Some(e) => format!("HTTP {status}: {e}"),
            None => format!("HTTP {status}"),
        }),
    }
}

/// Joins a chunked body's chunks; `None` if it is cut short or malformed.
fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&rest[..eol]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_200_answer_gives_its_json_plain_or_chunked() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"a\": true}";
        assert_eq!(parse(plain), Ok(serde_json::json!({ "a": true })));
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n7\r\n: true}\r\n0\r\n\r\n";
        assert_eq!(parse(chunked), Ok(serde_json::json!({ "a": true })));
    }

    #[test]
    fn other_answers_say_what_went_wrong() {
        let missing = b"HTTP/1.1 404 Not Found\r\n\r\n{\"error\": \"no route GET /x\"}";
        assert_eq!(parse(missing), Err("HTTP 404: no route GET /x".to_owned()));
        assert_eq!(parse(b"HTTP/1.1 502 Bad Gateway\r\n\r\n<html>"), Err("HTTP 502".to_owned()));
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\n\r\n<html>"),
            Err("the answer is not JSON".to_owned())
        );
        assert_eq!(parse(b"SSH-2.0-OpenSSH"), Err("truncated HTTP answer".to_owned()));
        let cut = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nff\r\n{}";
        assert_eq!(parse(cut), Err("bad chunked body".to_owned()));
    }

    #[test]
    fn an_endpoint_that_is_not_there_is_an_error_not_a_panic() {
        // Bind then drop a listener: its port is very likely closed now.
        let addr = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr());
        let err = get(addr.expect("a free port"), "/api/v1/topology").expect_err("nothing listens");
        assert!(!err.contains("os error"), "{err}");
    }
}
