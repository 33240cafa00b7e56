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
//! `metrics_public`). The same server too ([`super::server`]), with the
//! same [`Limits`]: a connection is a task of the `__http-group` thread,
//! so a client that sends slowly or not at all holds only its own; a
//! request head must arrive whole within `header_timeout`, an idle
//! connection is closed after `idle_timeout`, and past `max_connections`
//! a connection gets 503.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::access::{Access, Request, Scope};
use super::api::Answer;
use super::{Incoming, Limits, Reply, Serving};
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
    serving: Serving,
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
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Self { listener })
    }

    /// Serves `view` under `access` and `limits` from a thread of its own.
    ///
    /// # Errors
    /// The thread cannot start.
    pub fn serve(
        self,
        access: Access,
        limits: Limits,
        view: GroupView,
    ) -> std::io::Result<GroupEndpoint> {
        let bound = self.listener.local_addr()?;
        let service = Arc::new(GroupService::new(access, view, bound));
        let serving = super::server::spawn(
            self.listener,
            super::server::Service::Group(service),
            limits,
            None,
        )?;
        tracing::info!(
            "group endpoint: HTTP on http://{bound}/ (/healthz, /readyz, /api/v1/group, /metrics)"
        );
        Ok(GroupEndpoint { addr: bound, serving })
    }
}

impl GroupEndpoint {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving.
    pub fn stop(self) {
        self.serving.stop();
    }
}

/// What every request to a group member's endpoint is answered from.
pub(crate) struct GroupService {
    access: Access,
    view: GroupView,
    bound: SocketAddr,
}

impl GroupService {
    /// The service of `view` under `access`, bound at `bound`.
    pub(crate) fn new(access: Access, view: GroupView, bound: SocketAddr) -> Self {
        Self { access, view, bound }
    }

    /// The answer to `req`.
    pub(crate) fn answer(&self, req: &Incoming) -> Reply {
        let (status, content_type, body, challenge) =
            respond(req, self.bound, &self.access, &self.view);
        let mut headers = Vec::new();
        if challenge {
            headers.push(("WWW-Authenticate", "Bearer".to_owned()));
        }
        Reply { status, content_type, body, headers }
    }
}

/// The member's live page: polls `/api/v1/group` every second.
const GROUP_PAGE: &str = include_str!("page/group.html");
/// Its script.
const GROUP_SCRIPT: &str = include_str!("page/group.js");
const HTML: &str = "text/html; charset=utf-8";
const SCRIPT: &str = "text/javascript; charset=utf-8";

/// An answer of the member's endpoint: its status, content type, body, and
/// whether it challenges for a bearer token.
type Response = (u16, &'static str, String, bool);

const JSON: &str = "application/json";

/// A JSON answer, without a challenge.
fn json_answer(a: Answer) -> Response {
    (a.status, JSON, a.body.to_string(), false)
}

/// The answer to `head`: a static page or asset, or, once access allows
/// it, the member's status, health or metrics.
fn respond(head: &Incoming, bound: SocketAddr, access: &Access, view: &GroupView) -> Response {
    if head.method != "GET" {
        return json_answer(Answer::error(405, "a group member's endpoint is read-only"));
    }
    let scope = match route(head, access) {
        Ok(scope) => scope,
        Err(answer) => return answer,
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
    read(head, view)
}

/// The scope a path needs; the answer itself for the page, its assets (static
/// text with no data) and an unknown path.
fn route(head: &Incoming, access: &Access) -> Result<Scope, Response> {
    match head.path.as_str() {
        "/" | "/index.html" => Err((200, HTML, GROUP_PAGE.to_owned(), false)),
        "/group.js" => Err((200, SCRIPT, GROUP_SCRIPT.to_owned(), false)),
        "/style.css" => {
            let (kind, body) = super::page::asset("/style.css").unwrap_or(("text/css", ""));
            Err((200, kind, body.to_owned(), false))
        }
        "/metrics" if access.metrics_public => Ok(Scope::Public),
        "/healthz" | "/readyz" | "/api/v1/group" | "/metrics" => Ok(Scope::Read),
        _ => Err(json_answer(Answer::error(404, format!("no route {}", head.path)))),
    }
}

/// The answer to an admitted read: health, readiness, the member's status
/// or its metrics.
fn read(head: &Incoming, view: &GroupView) -> Response {
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

/// The lease epoch and last checkpoint of each partition held, as gauges.
fn partition_gauges(out: &mut String, status: &Status) {
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
    partition_gauges(&mut out, status);
    out
}
