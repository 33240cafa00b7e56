//! The HTTP endpoint of `squall run --http ADDR`: Prometheus metrics, a REST
//! API in the shape of Storm UI's, and a live web page.
//!
//! It is off by default. `tiny_http` serves it on one host thread: no async
//! runtime, and nothing on the executors' path. Every request reads the
//! counters the executors already publish (relaxed atomic loads), through
//! the [`TopologyHandle`]; steering requests go through the same handle as
//! signals do. A sampler thread ([`History`]) records the counters once a
//! second for the windowed stats and the page's sparklines.
//!
//! Routes (see `docs/http-api.md`): `GET /`, `GET /metrics`,
//! `GET /api/v1/topology`, `GET /api/v1/components/{name}`,
//! `POST /api/v1/activate`, `POST /api/v1/deactivate` (all spouts, or
//! `?component=NAME`), `POST /api/v1/drain`, `GET /healthz`, `GET /readyz`.

mod api;
mod history;
mod page;
pub mod prometheus;

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use tiny_http::{Header, Method, Request, Response, Server};

pub use api::{Answer, WINDOWS};
pub use history::{Counts, History, Series, WindowStats};

use crate::runtime::TopologyHandle;

pub use crate::config::parse_addr;

/// A bound HTTP endpoint, not yet serving.
pub struct HttpServer {
    server: Arc<Server>,
    addr: SocketAddr,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer").field("addr", &self.addr).finish_non_exhaustive()
    }
}

/// A serving HTTP endpoint; [`Serving::stop`] ends it.
pub struct Serving {
    server: Arc<Server>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Serving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serving").finish_non_exhaustive()
    }
}

/// Why the endpoint could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} for --http: {message}")]
pub struct BindError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// Why (address in use, permission denied, ...).
    pub message: String,
}

impl HttpServer {
    /// Binds `addr` (before any topology thread starts, so a port in use is
    /// a clean error).
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub fn bind(addr: SocketAddr) -> Result<Self, BindError> {
        let server = Server::http(addr).map_err(|e| BindError { addr, message: e.to_string() })?;
        let addr = server.server_addr().to_ip().unwrap_or(addr);
        Ok(Self { server: Arc::new(server), addr })
    }

    /// The bound address (with the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves `handle` on a host thread until [`Serving::stop`].
    ///
    /// # Errors
    /// When the serving or sampling thread cannot be spawned.
    pub fn serve(self, handle: TopologyHandle) -> std::io::Result<Serving> {
        let history = History::start(handle.clone())?;
        let server = self.server.clone();
        let thread = std::thread::Builder::new().name("__http".into()).spawn(move || {
            for request in server.incoming_requests() {
                respond(request, &handle, &history);
            }
        })?;
        tracing::info!("HTTP on http://{}/ (metrics at /metrics, API at /api/v1/)", self.addr);
        Ok(Serving { server: self.server, thread: Some(thread) })
    }
}

impl Serving {
    /// Stops serving and joins the thread.
    pub fn stop(mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What a path serves, for routing and 405s.
enum Route<'a> {
    Page,
    Asset(&'static str, &'static str),
    Metrics,
    Topology,
    Component(&'a str),
    Steer { activate: bool },
    Drain,
    Reload,
    Healthz,
    Readyz,
}

impl Route<'_> {
    fn method(&self) -> Method {
        match self {
            Route::Steer { .. } | Route::Drain | Route::Reload => Method::Post,
            _ => Method::Get,
        }
    }
}

fn route(path: &str) -> Option<Route<'_>> {
    Some(match path {
        "/" | "/index.html" => Route::Page,
        "/metrics" => Route::Metrics,
        "/api/v1/topology" => Route::Topology,
        "/api/v1/activate" => Route::Steer { activate: true },
        "/api/v1/deactivate" => Route::Steer { activate: false },
        "/api/v1/drain" => Route::Drain,
        "/api/v1/reload" => Route::Reload,
        "/healthz" => Route::Healthz,
        "/readyz" => Route::Readyz,
        p => {
            if let Some(name) = p.strip_prefix("/api/v1/components/") {
                if name.is_empty() || name.contains('/') {
                    return None;
                }
                Route::Component(name)
            } else {
                let (content_type, body) = page::asset(p)?;
                Route::Asset(content_type, body)
            }
        }
    })
}

/// The value of `key` in a query string, percent-decoded.
fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then(|| percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes())
        .expect("static header names and values are valid")
}

fn respond(request: Request, handle: &TopologyHandle, history: &History) {
    let url = request.url().to_owned();
    let (path, query) = url.split_once('?').unwrap_or((url.as_str(), ""));
    let method = request.method().clone();
    let Some(route) = route(path) else {
        return send_json(request, &Answer::error(404, format!("no route {path}")), None);
    };
    let allowed = route.method();
    let head_ok = method == Method::Head && allowed == Method::Get;
    if method != allowed && !head_ok {
        let answer = Answer::error(405, format!("{path} takes {allowed} only"));
        return send_json(request, &answer, Some(header("Allow", allowed.as_str())));
    }
    let answer = match route {
        Route::Page => return send(request, 200, "text/html; charset=utf-8", page::INDEX.into()),
        Route::Asset(content_type, body) => return send(request, 200, content_type, body.into()),
        Route::Metrics => {
            let text = prometheus::render(handle);
            return send(request, 200, "text/plain; version=0.0.4; charset=utf-8", text);
        }
        Route::Topology => api::topology(handle, history),
        Route::Component(name) => api::component(handle, history, &percent_decode(name)),
        Route::Steer { activate } => {
            api::steer(handle, activate, query_param(query, "component").as_deref())
        }
        Route::Drain => api::drain(handle),
        Route::Reload => api::reload(handle),
        Route::Healthz => api::healthz(handle),
        Route::Readyz => api::readyz(handle),
    };
    send_json(request, &answer, None);
}

fn send(request: Request, status: u16, content_type: &str, body: String) {
    let response = Response::from_string(body)
        .with_status_code(status)
        .with_header(header("Content-Type", content_type))
        .with_header(header("Cache-Control", "no-store"));
    // A client that went away is no error of ours.
    let _ = request.respond(response);
}

fn send_json(request: Request, answer: &Answer, extra: Option<Header>) {
    let body = serde_json::to_string_pretty(&answer.body).unwrap_or_else(|_| "{}".into());
    let mut response = Response::from_string(body)
        .with_status_code(answer.status)
        .with_header(header("Content-Type", "application/json"))
        .with_header(header("Cache-Control", "no-store"));
    if let Some(h) = extra {
        response = response.with_header(h);
    }
    let _ = request.respond(response);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_binds_loopback_and_an_address_is_kept() {
        assert_eq!(parse_addr("7070").unwrap(), "127.0.0.1:7070".parse().unwrap());
        assert_eq!(parse_addr("0.0.0.0:80").unwrap(), "0.0.0.0:80".parse().unwrap());
        assert_eq!(parse_addr("[::1]:9").unwrap(), "[::1]:9".parse().unwrap());
        assert!(parse_addr("nonsense").is_err());
    }

    #[test]
    fn query_parameters_are_percent_decoded() {
        assert_eq!(
            query_param("a=1&component=word%2Dcount", "component").as_deref(),
            Some("word-count")
        );
        assert_eq!(query_param("component=x%zz", "component").as_deref(), Some("x%zz"));
        assert_eq!(query_param("a=1", "component"), None);
    }

    #[test]
    fn routes_take_one_method_each() {
        assert!(matches!(route("/api/v1/drain").map(|r| r.method()), Some(Method::Post)));
        assert!(matches!(route("/metrics").map(|r| r.method()), Some(Method::Get)));
        assert!(matches!(route("/api/v1/components/count"), Some(Route::Component("count"))));
        assert!(route("/api/v1/components/").is_none());
        assert!(route("/nope").is_none());
    }
}
