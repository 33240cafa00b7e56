//! Bounded fuzzing of what the endpoint reads from outside (issue 42): the
//! HTTP request as hyper parses it and the endpoint answers it, the query
//! strings and paths it decodes, and the token and certificate files it
//! loads. Each property runs `SQUALL_FUZZ_CASES` cases (a few hundred by
//! default, well under a second each; `.ci/run` runs a longer, still
//! bounded, session): nothing panics, every answer is a well-formed HTTP
//! response (or the connection is closed), and what is accepted is what
//! the rules say.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::group::{GroupService, GroupView};
use super::server::Service;
use super::{access, Limits, Token};

/// Cases per property: 256 by default, or `SQUALL_FUZZ_CASES`.
fn fuzz_cases() -> u32 {
    std::env::var("SQUALL_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256)
}

const BOUND: &str = "127.0.0.1:7070";

/// A group member's service (the read-only endpoint: no topology needed)
/// behind the same server code as every endpoint.
fn service() -> Service {
    let view = GroupView {
        status: Arc::new(Mutex::new(crate::group::Status::default())),
        counters: Arc::new(crate::group::Counters::default()),
        ready: Arc::new(AtomicBool::new(true)),
    };
    let bound: SocketAddr = BOUND.parse().expect("an address");
    Service::Group(Arc::new(GroupService::new(access::Access::default(), view, bound)))
}

/// Serves `request` (then the end of input) on an in-memory connection;
/// what came back.
fn exchange(runtime: &tokio::runtime::Runtime, service: &Service, request: &[u8]) -> Vec<u8> {
    let limits = Limits {
        header_timeout: Duration::from_secs(2),
        body_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(2),
        write_timeout: Duration::from_secs(2),
        ..Limits::default()
    };
    runtime.block_on(async {
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let peer: SocketAddr = "127.0.0.1:40000".parse().expect("an address");
        let served = tokio::spawn(super::server::serve_io(server, peer, service.clone(), limits));
        // The server may stop reading (431, 400) before all of it is written.
        let _ = client.write_all(request).await;
        let _ = client.shutdown().await;
        let mut out = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), client.read_to_end(&mut out));
        assert!(
            read.await.is_ok(),
            "no end within 10 s for {:?}",
            String::from_utf8_lossy(request)
        );
        let _ = served.await;
        out
    })
}

/// Request heads built from the pieces that matter (methods, targets in
/// each form, repeated and odd headers, bare LF, bodies) and raw bytes.
fn request() -> impl Strategy<Value = Vec<u8>> {
    let method = prop_oneof![
        Just("GET".to_owned()),
        Just("POST".to_owned()),
        Just("HEAD".to_owned()),
        Just("OPTIONS".to_owned()),
        Just("CONNECT".to_owned()),
        Just("get".to_owned()),
        "[A-Z]{1,8}",
    ];
    let target = prop_oneof![
        Just("/healthz".to_owned()),
        Just("/readyz".to_owned()),
        Just("/api/v1/group".to_owned()),
        Just("/metrics".to_owned()),
        Just("*".to_owned()),
        Just(format!("http://{BOUND}/healthz")),
        Just("http://evil.example/healthz".to_owned()),
        Just(BOUND.to_owned()),
        "/[a-z0-9%?&=./_-]{0,40}",
        "[ -~]{0,60}",
    ];
    let header = prop_oneof![
        Just(format!("Host: {BOUND}")),
        Just("Host: evil.example".to_owned()),
        Just("Host:".to_owned()),
        Just("Content-Length: 5".to_owned()),
        Just("Content-Length: 99999999999999999999".to_owned()),
        Just("Transfer-Encoding: chunked".to_owned()),
        Just("Authorization: Bearer x".to_owned()),
        Just(" folded".to_owned()),
        "[A-Za-z-]{1,12}: [ -~]{0,40}",
    ];
    let version = prop_oneof![Just("HTTP/1.1"), Just("HTTP/1.0"), Just("HTTP/2.0"), Just("")];
    let eol = prop_oneof![Just("\r\n"), Just("\n")];
    let structured = (
        method,
        target,
        version,
        prop::collection::vec(header, 0..6),
        eol,
        prop::collection::vec(any::<u8>(), 0..16),
    )
        .prop_map(|(method, target, version, headers, eol, body)| {
            let mut text = format!("{method} {target} {version}{eol}");
            for h in headers {
                text.push_str(&h);
                text.push_str(eol);
            }
            text.push_str(eol);
            let mut bytes = text.into_bytes();
            bytes.extend(body);
            bytes
        });
    prop_oneof![
        4 => structured,
        1 => prop::collection::vec(any::<u8>(), 0..256),
        // Past the largest head hyper buffers (16 KiB): 431 or closed.
        1 => (1usize..3).prop_map(|n| {
            let mut b = format!("GET /healthz HTTP/1.1\r\nHost: {BOUND}\r\nX: ").into_bytes();
            b.resize(b.len() + n * 12 * 1024, b'a');
            b.extend_from_slice(b"\r\n\r\n");
            b
        }),
    ]
}

/// The status code of an answer's status line, if it is one.
fn status_of(answer: &[u8]) -> Option<u16> {
    let line = answer.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    // hyper answers an HTTP/1.0 request in HTTP/1.0.
    let rest = line.strip_prefix("HTTP/1.1 ").or_else(|| line.strip_prefix("HTTP/1.0 "))?;
    let code = rest.get(..3)?;
    code.parse().ok()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz_cases(), failure_persistence: None, ..ProptestConfig::default() })]

    /// Whatever arrives, the answer is a well-formed HTTP/1.x response or
    /// nothing (a closed connection), within a bound; and a request with
    /// an absolute-form target, or more than one `Host`, is never served.
    #[test]
    fn any_request_gets_a_well_formed_answer_or_none(request in request()) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let service = service();
        let answer = exchange(&runtime, &service, &request);
        if answer.is_empty() {
            return Ok(());
        }
        let status = status_of(&answer);
        prop_assert!(
            status.is_some_and(|s| (100..600).contains(&s)),
            "not an HTTP answer: {:?}",
            String::from_utf8_lossy(&answer[..answer.len().min(200)])
        );
        let text = String::from_utf8_lossy(&request);
        let head = text.split("\r\n\r\n").next().unwrap_or("");
        let hosts = head.lines().filter(|l| l.to_ascii_lowercase().starts_with("host:")).count();
        let absolute = head.lines().next().is_some_and(|l| l.contains(" http://"));
        if hosts > 1 || absolute {
            prop_assert!(status != Some(200), "served: {:?}", text);
        }
    }

    /// Query strings and paths: decoding never panics, and a tap query that
    /// is accepted names one component, a rate in (0, 1] and a limit of at
    /// least 1.
    #[test]
    fn queries_and_paths_decode_without_panicking(query in "[a-z_=&%0-9.+-]{0,60}|[ -~]{0,80}") {
        let _ = super::query_param(&query, "component");
        let _ = super::percent_decode(&query);
        let _ = super::route(&query);
        if let Ok((request, limit)) = super::tap::request(&query) {
            prop_assert!(!request.component.is_empty());
            prop_assert!(request.rate > 0.0 && request.rate <= 1.0, "{}", request.rate);
            prop_assert!(limit.is_none_or(|n| n >= 1));
        }
    }

    /// A token from any text, or from a file of any bytes: accepted only
    /// when it is non-empty printable ASCII once trimmed, and then it is
    /// exactly that; never a panic.
    #[test]
    fn tokens_from_any_text_or_file_are_checked(bytes in prop::collection::vec(any::<u8>(), 0..96)) {
        let dir = std::env::temp_dir().join(format!("squall-fuzz-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a folder");
        let path = dir.join("token");
        std::fs::write(&path, &bytes).expect("write");
        let from_file = Token::from_file(&path);
        let text = String::from_utf8(bytes.clone());
        let valid = text.as_ref().ok().map(|t| t.trim()).filter(|t| {
            !t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic())
        });
        match (&from_file, valid) {
            (Ok(token), Some(t)) => prop_assert_eq!(token.secret(), t),
            (Err(e), None) => prop_assert!(!e.to_string().contains('\n'), "one line: {}", e),
            (got, want) => prop_assert!(false, "{:?} for {:?} (valid: {:?})", got, bytes, want),
        }
        if let Ok(t) = &text {
            prop_assert_eq!(Token::new(t).is_ok(), valid.is_some());
        }
    }

    /// Certificate and key files of any bytes, or PEM blocks of any
    /// content: refused in one line, never a panic.
    #[test]
    fn certificates_and_keys_of_any_bytes_are_refused_in_one_line(
        cert in prop::collection::vec(any::<u8>(), 0..256),
        key in prop::collection::vec(any::<u8>(), 0..256),
        wrap in any::<bool>(),
    ) {
        let pem = |label: &str, body: &[u8]| {
            let mut text = format!("-----BEGIN {label}-----\n").into_bytes();
            text.extend(body.iter().map(|b| b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="[usize::from(*b) % 65]));
            text.extend_from_slice(format!("\n-----END {label}-----\n").as_bytes());
            text
        };
        let (cert, key) = if wrap {
            (pem("CERTIFICATE", &cert), pem("PRIVATE KEY", &key))
        } else {
            (cert, key)
        };
        let dir = std::env::temp_dir().join(format!("squall-fuzz-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a folder");
        let files = super::tls::TlsFiles { cert: dir.join("cert.pem"), key: dir.join("key.pem") };
        std::fs::write(&files.cert, &cert).expect("write");
        std::fs::write(&files.key, &key).expect("write");
        match files.config() {
            Ok(_) => prop_assert!(false, "random bytes made a certificate and its key"),
            Err(e) => prop_assert!(!e.to_string().contains('\n'), "one line: {}", e),
        }
    }
}

#[test]
fn a_token_file_past_its_cap_is_refused_and_one_at_it_is_read() {
    let dir = std::env::temp_dir().join(format!("squall-fuzz-cap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a folder");
    let path = dir.join("big.token");
    let cap = crate::files::TOKEN_FILE_CAP as usize;
    std::fs::write(&path, "a".repeat(cap)).expect("write");
    assert_eq!(Token::from_file(&path).ok().map(|t| t.secret().len()), Some(cap));
    std::fs::write(&path, "a".repeat(cap + 1)).expect("write");
    let e = Token::from_file(&path).expect_err("past the cap").to_string();
    assert!(!e.contains('\n'), "{e}");
}
