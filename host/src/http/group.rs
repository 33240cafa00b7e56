//! The HTTP endpoint of a group member (`squall run --http ADDR` of a
//! topology with `[group]`): read-only, for probes, scrapers and operators.
//!
//! | route | answer |
//! | --- | --- |
//! | `GET /` | the live page: this host's partitions with their lease epochs, phases and last checkpoints, the members and the counters, polled every second (no token: it holds no data; its script asks with the read token) |
//! | `GET /healthz` | 200 `{"status": "ok"}` while the member runs |
//! | `GET /readyz` | 200 while the member is in its group and not leaving, 503 otherwise |
//! | `GET /api/v1/group` | this host's view: group, host, live members, share, and each partition it holds with its lease epoch, phase and last committed checkpoint; the member's counters |
//! | `GET /metrics` | the member's counters and partitions, in Prometheus text |
//!
//! The same access policy as the topology's endpoint ([`Access`]): a
//! non-loopback address needs a control token, and a read token (or the
//! control one) is asked for when tokens are set (`/metrics` too, unless
//! `metrics_public`). One thread answers one request at a time, each
//! connection closed after its answer; a client gets 2 s to send its request.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use super::access::{Access, Request, Scope};
use super::api::Answer;
use crate::group::{Counters, Status};

/// What the endpoint reads.
#[derive(Debug, Clone)]
pub struct GroupView {
    /// The member's status.
    pub status: Arc<Mutex<Status>>,
    /// Its counters.
    pub counters: Arc<Counters>,
    /// True while the member is in its group and not leaving.
    pub ready: Arc<AtomicBool>,
}

/// A running group endpoint.
#[derive(Debug)]
pub struct GroupEndpoint {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A bound address, not served yet (bound before the member joins, so a
/// port in use is a clean error).
#[derive(Debug)]
pub struct BoundGroup {
    listener: TcpListener,
}

impl BoundGroup {
    /// Binds `addr`.
    ///
    /// # Errors
    /// The address cannot be bound.
    pub fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        Ok(Self { listener: TcpListener::bind(addr)? })
    }

    /// Serves `view` from a thread of its own.
    ///
    /// # Errors
    /// The thread cannot start.
    pub fn serve(self, access: Access, view: GroupView) -> std::io::Result<GroupEndpoint> {
        GroupEndpoint::serve(self.listener, access, view)
    }
}

impl GroupEndpoint {
    fn serve(listener: TcpListener, access: Access, view: GroupView) -> std::io::Result<Self> {
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new().name("__http-group".into()).spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => answer(stream, bound, &access, &view),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        })?;
        tracing::info!(
            "group endpoint: HTTP on http://{bound}/ (/healthz, /readyz, /api/v1/group, /metrics)"
        );
        Ok(Self { addr: bound, stop, thread: Some(thread) })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The head of a request: method, path and the headers the policy reads.
struct Head {
    method: String,
    path: String,
    host: Option<String>,
    authorization: Option<String>,
}

fn read_head(stream: &mut TcpStream) -> Option<Head> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 || buf.len() > 16 * 1024 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&buf);
    let mut lines = text.split("\r\n");
    let mut request = lines.next()?.split(' ');
    let (method, target) = (request.next()?.to_owned(), request.next()?);
    let path = target.split('?').next().unwrap_or(target).to_owned();
    let (mut host, mut authorization) = (None, None);
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("host") {
                host = Some(value.trim().to_owned());
            } else if name.eq_ignore_ascii_case("authorization") {
                authorization = Some(value.trim().to_owned());
            }
        }
    }
    Some(Head { method, path, host, authorization })
}

fn answer(mut stream: TcpStream, bound: SocketAddr, access: &Access, view: &GroupView) {
    let Some(head) = read_head(&mut stream) else { return };
    let (status, content_type, body, challenge) = respond(&head, bound, access, view);
    let reason = match status {
        200 => "OK",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n",
        body.len()
    );
    if challenge {
        out.push_str("WWW-Authenticate: Bearer\r\n");
    }
    out.push_str("\r\n");
    let _ = stream.write_all(out.as_bytes()).and_then(|()| stream.write_all(body.as_bytes()));
}

/// The member's live page: polls `/api/v1/group` every second.
const GROUP_PAGE: &str = include_str!("page/group.html");
/// Its script.
const GROUP_SCRIPT: &str = include_str!("page/group.js");
const HTML: &str = "text/html; charset=utf-8";
const SCRIPT: &str = "text/javascript; charset=utf-8";

fn respond(
    head: &Head,
    bound: SocketAddr,
    access: &Access,
    view: &GroupView,
) -> (u16, &'static str, String, bool) {
    const JSON: &str = "application/json";
    let json_answer = |a: Answer| (a.status, JSON, a.body.to_string(), false);
    if head.method != "GET" {
        return json_answer(Answer::error(405, "a group member's endpoint is read-only"));
    }
    let scope = match head.path.as_str() {
        // Static text with no data: the page and its assets.
        "/" | "/index.html" => return (200, HTML, GROUP_PAGE.to_owned(), false),
        "/group.js" => return (200, SCRIPT, GROUP_SCRIPT.to_owned(), false),
        "/style.css" => {
            let (kind, body) = super::page::asset("/style.css").unwrap_or(("text/css", ""));
            return (200, kind, body.to_owned(), false);
        }
        "/metrics" if access.metrics_public => Scope::Public,
        "/healthz" | "/readyz" | "/api/v1/group" | "/metrics" => Scope::Read,
        _ => return json_answer(Answer::error(404, format!("no route {}", head.path))),
    };
    let request = Request {
        host: head.host.as_deref(),
        authorization: head.authorization.as_deref(),
        ..Request::default()
    };
    if let Err(refusal) = access.check(bound, scope, &request) {
        let a = refusal.answer;
        return (a.status, JSON, a.body.to_string(), refusal.challenge);
    }
    let status = view.status.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let ready = view.ready.load(Ordering::SeqCst);
    match head.path.as_str() {
        "/healthz" => (200, JSON, json!({"status": "ok"}).to_string(), false),
        "/readyz" => {
            let body = json!({"ready": ready, "partitions": status.partitions.len()});
            (if ready { 200 } else { 503 }, JSON, body.to_string(), false)
        }
        "/api/v1/group" => {
            let c = counters_json(&view.counters);
            let body = json!({
                "group": status.group,
                "host": status.host,
                "members": status.members,
                "share": status.share,
                "partitions": status.partitions,
                "counters": c,
            });
            (200, JSON, body.to_string(), false)
        }
        _ => (200, "text/plain; version=0.0.4", metrics(&status, &view.counters), false),
    }
}

fn counters_json(c: &Counters) -> serde_json::Value {
    let r = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    json!({
        "taken": r(&c.taken),
        "takeovers": r(&c.takeovers),
        "released": r(&c.released),
        "lost": r(&c.lost),
        "start_failures": r(&c.start_failures),
        "renew_errors": r(&c.renew_errors),
        "broker_requests": c.broker_requests.load(Ordering::Relaxed),
    })
}

/// The member's figures in Prometheus text.
fn metrics(status: &Status, c: &Counters) -> String {
    let r = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let mut out = String::new();
    let counters = [
        ("squall_group_partitions_taken_total", "Partitions this host took.", r(&c.taken)),
        (
            "squall_group_takeovers_total",
            "Partitions taken from a host whose lease expired.",
            r(&c.takeovers),
        ),
        ("squall_group_partitions_released_total", "Partitions released.", r(&c.released)),
        ("squall_group_leases_lost_total", "Leases lost to another host.", r(&c.lost)),
        (
            "squall_group_start_failures_total",
            "Partitions that could not start.",
            r(&c.start_failures),
        ),
        ("squall_group_renew_errors_total", "Lease renewals that failed.", r(&c.renew_errors)),
        (
            "squall_group_broker_requests_total",
            "Requests sent to the lease broker.",
            c.broker_requests.load(Ordering::Relaxed),
        ),
    ];
    for (name, help, value) in counters {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n"));
    }
    out.push_str(
        "# HELP squall_group_members Live members of the group, as this host sees them.\n",
    );
    out.push_str(&format!(
        "# TYPE squall_group_members gauge\nsquall_group_members {}\n",
        status.members.len()
    ));
    out.push_str("# HELP squall_group_partition_epoch The lease epoch of each partition this host holds.\n# TYPE squall_group_partition_epoch gauge\n");
    for p in &status.partitions {
        out.push_str(&format!(
            "squall_group_partition_epoch{{partition=\"{}\"}} {}\n",
            p.partition, p.epoch
        ));
    }
    out.push_str("# HELP squall_group_partition_last_checkpoint The last checkpoint each partition committed on this host.\n# TYPE squall_group_partition_last_checkpoint gauge\n");
    for p in &status.partitions {
        out.push_str(&format!(
            "squall_group_partition_last_checkpoint{{partition=\"{}\"}} {}\n",
            p.partition, p.last_checkpoint
        ));
    }
    out
}
