//! `squall run --http` against clients that stall, hoard connections or
//! send too much (issue 23): 500 slow or idle clients and a stalled body
//! while `/healthz` keeps answering within 100 ms, a connection limit (503),
//! a body limit (413), a bounded thread count, and running out of file
//! descriptors under `prlimit --nofile=256` without losing the endpoint.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::http::{component, exchange, poll, read_answer, request, start, TOPOLOGY};
use crate::util::{require_tool, SquallCommand, Workspace};

/// A connection that sent `sent` and then nothing more.
fn hold(addr: SocketAddr, sent: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    if !sent.is_empty() {
        s.write_all(sent).expect("write");
    }
    s
}

/// `GET /healthz` on a new connection: its status and how long it took
/// (connect to the last byte), or why it failed within `limit`.
fn healthz(addr: SocketAddr, limit: Duration) -> Result<(u16, Duration), String> {
    let started = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, limit).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(limit)).map_err(|e| e.to_string())?;
    s.write_all(
        format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .map_err(|e| format!("write: {e}"))?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("read after {:?}: {e}", started.elapsed())),
        }
        let text = String::from_utf8_lossy(&raw);
        if text.contains("\r\n\r\n") && text.trim_end().ends_with('}') {
            break;
        }
    }
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no answer: {text:?}"))?;
    Ok((status, started.elapsed()))
}

fn threads(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("Threads: line")
}

#[test]
fn five_hundred_slow_or_idle_clients_and_a_stalled_body_do_not_delay_healthz() {
    let ws = Workspace::new("http_hostile_clients");
    let (child, addr) = start(&ws, TOPOLOGY);
    assert_eq!(request(addr, "GET", "/healthz").status, 200);
    let threads_before = threads(child.pid());

    // The staller: a Content-Length, then a body that never comes.
    // Over 1 KiB (tiny_http read smaller bodies on the connection's own
    // thread) and under the 64 KiB limit (so that it is waited for).
    let stalled = format!(
        "POST /api/v1/reload HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: 50000\r\n\r\n{{\"a\":"
    );
    let mut staller = hold(addr, stalled.as_bytes());
    // 250 idle connections and 250 that stop halfway through their head.
    let mut held = Vec::new();
    for i in 0..500 {
        held.push(if i % 2 == 0 {
            hold(addr, b"")
        } else {
            hold(addr, format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ").as_bytes())
        });
    }
    std::thread::sleep(Duration::from_millis(300));
    let threads_during = threads(child.pid());

    // A normal client: every /healthz within 100 ms.
    let mut took = Vec::new();
    for _ in 0..30 {
        match healthz(addr, Duration::from_secs(2)) {
            Ok((status, d)) => {
                assert_eq!(status, 200);
                took.push(d);
            }
            Err(e) => panic!(
                "/healthz failed with 501 clients holding on: {e} (answered {} before)",
                took.len()
            ),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    took.sort();
    let (median, max) = (took[took.len() / 2], took[took.len() - 1]);
    eprintln!("healthz with 500 slow/idle clients and a stalled body: median {median:?}, max {max:?}; threads {threads_before} -> {threads_during}");
    assert!(max < Duration::from_millis(100), "slowest /healthz took {max:?}: {took:?}");
    // The thread count does not follow the client count.
    assert!(
        threads_during <= threads_before + 3,
        "threads went from {threads_before} to {threads_during} with 501 connections"
    );

    // The stalled body is answered 408 once the body timeout (10 s) passes.
    staller.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let answer = read_answer(&mut staller);
    assert_eq!(answer.status, 408, "{}", answer.body);
    // The slow heads were closed by the header timeout (10 s) meanwhile.
    let slow = &mut held[1];
    slow.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut buf = [0u8; 256];
    match slow.read(&mut buf) {
        Ok(_) => {}
        Err(e) => panic!("a slow head is still open past the header timeout: {e}"),
    }
    // Nothing was reloaded by the half-sent request.
    let t = request(addr, "GET", "/api/v1/topology").json();
    assert_eq!(t["reloads"].as_u64().unwrap() + t["failed_reloads"].as_u64().unwrap(), 0);
    drop(held);
    child.interrupt();
    child.wait().assert_code(0);
}

#[test]
fn a_body_past_the_limit_gets_413_and_changes_nothing() {
    let ws = Workspace::new("http_body_limit");
    let (child, addr) = start(&ws, TOPOLOGY);
    assert_eq!(request(addr, "GET", "/healthz").status, 200);
    // The endpoint answers before the spouts are activated: wait for them,
    // so that "still active" below says the refused deactivate did nothing
    // (seen failing on CI without the wait: the spout not yet activated).
    let within = Duration::from_secs(30);
    poll(addr, "/api/v1/topology", within, |t| component(t, "source")["active"] == true);

    // A body past 64 KiB: 413 from its Content-Length alone, nothing read.
    let big = format!(
        "POST /api/v1/reload HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: 10000000\r\nConnection: close\r\n\r\n"
    );
    let a = exchange(addr, &big);
    assert_eq!(a.status, 413, "{}", a.body);
    // Chunked, so the size shows only as it arrives: 413 too.
    let mut s = hold(
        addr,
        format!(
            "POST /api/v1/deactivate HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    );
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let chunk = vec![b' '; 16 * 1024];
    for _ in 0..8 {
        let _ = s.write_all(format!("{:x}\r\n", chunk.len()).as_bytes());
        let _ = s.write_all(&chunk);
        let _ = s.write_all(b"\r\n");
    }
    let a = read_answer(&mut s);
    assert_eq!(a.status, 413, "{}", a.body);
    let t = request(addr, "GET", "/api/v1/topology").json();
    assert_eq!(t["reloads"].as_u64().unwrap() + t["failed_reloads"].as_u64().unwrap(), 0);
    assert_eq!(component(&t, "source")["active"], true);
    child.interrupt();
    child.wait().assert_code(0);
}

#[test]
fn past_the_connection_limit_clients_get_503_until_others_leave() {
    let ws = Workspace::new("http_connection_limit");
    let toml = format!("{TOPOLOGY}\n[topology.http]\nmax_connections = 20\n");
    let (child, addr) = start(&ws, &toml);
    assert_eq!(request(addr, "GET", "/healthz").status, 200);

    // 20 idle connections fill the endpoint; the next one gets 503 at once.
    let held: Vec<TcpStream> = (0..20).map(|_| hold(addr, b"")).collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut s = hold(addr, format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes());
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let a = read_answer(&mut s);
    assert_eq!(a.status, 503, "{}", a.body);
    assert!(a.json()["error"].as_str().unwrap().contains("too many connections"));
    // Once they leave, it answers again.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    while request(addr, "GET", "/healthz").status != 200 {
        assert!(Instant::now() < deadline, "never answered 200 again");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.interrupt();
    child.wait().assert_code(0);
}

#[test]
fn running_out_of_file_descriptors_is_survived() {
    let Some(prlimit) = require_tool("prlimit") else { return };
    let ws = Workspace::new("http_emfile");
    let path = ws.write_topology("web.toml", TOPOLOGY);
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &path);
    cmd.wrapped([prlimit.as_os_str(), "--nofile=256:256".as_ref(), "--".as_ref()])
        .args(["--http", "0"])
        .limit(Duration::from_secs(120));
    let mut child = cmd.spawn();
    let addr = crate::http::bound_addr(&mut child);
    assert_eq!(request(addr, "GET", "/healthz").status, 200);

    // More clients than the process has descriptors: some are accepted,
    // the rest wait in the kernel's backlog (or are not let in at all).
    let mut held = Vec::new();
    for _ in 0..400 {
        if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
            let _ = s.set_nonblocking(true);
            held.push(s);
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    let opened = held.len();
    drop(held);

    // Once they leave the endpoint answers again, and the process lives.
    let deadline = Instant::now() + Duration::from_secs(20);
    let answered = loop {
        match healthz(addr, Duration::from_secs(1)) {
            Ok((200, d)) => break d,
            other => {
                assert!(
                    Instant::now() < deadline,
                    "the endpoint never answered again after {opened} connections: {other:?}\n{}",
                    child.stderr_snapshot()
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    let log = child.stderr_snapshot();
    eprintln!("emfile: {opened} connections opened; /healthz answered again in {answered:?}");
    assert!(!log.contains("panicked"), "{log}");
    assert!(log.contains("out of file descriptors"), "the shedding is logged:\n{log}");
    // A few more rounds: still serving.
    for _ in 0..5 {
        assert_eq!(request(addr, "GET", "/healthz").status, 200);
    }
    child.interrupt();
    child.wait().assert_code(0);
}
