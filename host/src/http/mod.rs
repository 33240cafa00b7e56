//! The HTTP endpoint of `squall run --http ADDR`: Prometheus metrics, a REST
//! API in the shape of Storm UI's, and a live web page.
//!
//! It is off by default. hyper serves it on one host thread with a
//! current-thread tokio runtime of its own ([`server`]), closed to other
//! sites and to anyone without a token when tokens are set ([`access`]),
//! over TLS when configured ([`tls`]); nothing runs on the executors' path. Every request reads the
//! counters the executors already publish (relaxed atomic loads), through
//! the [`TopologyHandle`]; steering requests go through the same handle as
//! signals do. A sampler thread ([`History`]) records the counters once a
//! second for the windowed stats and the page's sparklines.
//!
//! Routes (see `docs/http-api.md`): `GET /`, `GET /metrics`,
//! `GET /api/v1/topology`, `GET /api/v1/components/{name}`,
//! `POST /api/v1/activate`, `POST /api/v1/deactivate` (all spouts, or
//! `?component=NAME`), `POST /api/v1/drain`, `GET /api/v1/tap` (a stream of
//! sampled tuples, [`tap`]), `GET /healthz`, `GET /readyz`.

pub mod access;
mod api;
#[cfg(test)]
mod fuzz;
pub mod group;
mod history;
mod page;
pub mod prometheus;
mod server;
pub mod tap;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use access::Refusal;
pub use access::{Access, BadToken, Scope, Token, TokenError};
pub use api::{Answer, WINDOWS};
pub use history::{Counts, History, Series, WindowStats};

use crate::runtime::TopologyHandle;

pub use crate::config::parse_addr;

/// Why the endpoint cannot be set up as `[topology.http]` and
/// `--http-token-file` ask. Each renders as one line.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A token cannot be read.
    #[error("{0}")]
    Token(#[from] access::TokenError),
    /// The TLS files are unusable.
    #[error("{0}")]
    Tls(#[from] tls::TlsError),
    /// A non-loopback address with no control token.
    #[error(
        "--http {0} is reachable from other hosts and no control token is set \
         (give --http-token-file, or token_file/token_env in [topology.http]; or bind loopback)"
    )]
    Exposed(SocketAddr),
}

/// The access policy for an endpoint bound at `addr`, from
/// `[topology.http]` and `--http-token-file`: reads the token files and
/// variables.
///
/// # Errors
/// A token that cannot be read, or a non-loopback `addr` with no control
/// token (one line each).
pub fn access_from(
    options: &crate::config::HttpOptions,
    token_file: Option<&std::path::Path>,
    addr: SocketAddr,
) -> Result<Access, SetupError> {
    let token = |file: Option<&std::path::Path>, env: Option<&str>| match (file, env) {
        (Some(f), _) => Token::from_file(f).map(Some),
        (None, Some(v)) => Token::from_env(v).map(Some),
        (None, None) => Ok(None),
    };
    let control =
        token(token_file.or(options.token_file.as_deref()), options.token_env.as_deref())?;
    let read = token(options.read_token_file.as_deref(), options.read_token_env.as_deref())?;
    if control.is_none() && !addr.ip().is_loopback() {
        return Err(SetupError::Exposed(addr));
    }
    Ok(Access {
        control,
        read,
        metrics_public: options.metrics_public,
        allowed_hosts: options.allowed_hosts.clone(),
        cors_origins: options.cors_origins.clone(),
    })
}

/// Reads and checks every file `[topology.http]` names, as `squall run`
/// would: the token files (a regular file under the size cap, holding one
/// valid token) and the TLS certificate and key (regular files under the
/// cap, PEM, the key fitting the certificate). `squall validate` calls it
/// whether or not an address is set; variables are not looked at (they are
/// the running host's).
///
/// # Errors
/// The first file that is unusable, in one line.
pub fn check_files(options: &crate::config::HttpOptions) -> Result<(), SetupError> {
    for file in [&options.token_file, &options.read_token_file].into_iter().flatten() {
        Token::from_file(file)?;
    }
    if let (Some(cert), Some(key)) = (&options.tls_cert, &options.tls_key) {
        tls::TlsFiles { cert: cert.clone(), key: key.clone() }.config()?;
    }
    Ok(())
}

/// Everything [`HttpServer::serve`] needs from `[topology.http]` and
/// `--http-token-file`: the access policy, the limits, and the TLS files
/// (read and checked now, so that a bad file stops the run before it starts).
///
/// # Errors
/// As [`access_from`], and TLS files that are unusable.
pub fn serve_options(
    options: &crate::config::HttpOptions,
    token_file: Option<&std::path::Path>,
    addr: SocketAddr,
) -> Result<ServeOptions, SetupError> {
    let access = access_from(options, token_file, addr)?;
    let tls = match (&options.tls_cert, &options.tls_key) {
        (Some(cert), Some(key)) => {
            let files = tls::TlsFiles { cert: cert.clone(), key: key.clone() };
            files.config()?;
            Some(files)
        }
        _ => None,
    };
    Ok(ServeOptions { access, limits: limits_from(options), tls })
}

/// The [`Limits`] `[topology.http]` asks for (`max_connections`), the
/// defaults otherwise: a topology's endpoint and a group member's alike.
pub fn limits_from(options: &crate::config::HttpOptions) -> Limits {
    let mut limits = Limits::default();
    if let Some(n) = options.max_connections {
        limits.max_connections = n as usize;
    }
    limits
}

/// A bound HTTP endpoint, not yet serving.
pub struct HttpServer {
    listener: std::net::TcpListener,
    addr: SocketAddr,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer").field("addr", &self.addr).finish_non_exhaustive()
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
        let error = |e: std::io::Error| BindError { addr, message: e.to_string() };
        let listener = std::net::TcpListener::bind(addr).map_err(error)?;
        listener.set_nonblocking(true).map_err(error)?;
        let addr = listener.local_addr().unwrap_or(addr);
        Ok(Self { listener, addr })
    }

    /// The bound address (with the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves `handle` under `options` on a host thread until
    /// [`Serving::stop`].
    ///
    /// # Errors
    /// When the serving or sampling thread cannot be spawned.
    pub fn serve(self, handle: TopologyHandle, options: ServeOptions) -> std::io::Result<Serving> {
        let history = History::start(handle.clone())?;
        let scheme = if options.tls.is_some() { "https" } else { "http" };
        let ctx = Arc::new(Ctx { handle, history, access: options.access, bound: self.addr });
        let serving = server::spawn(
            self.listener,
            server::Service::Topology(ctx),
            options.limits,
            options.tls,
        )?;
        tracing::info!("HTTP on {scheme}://{}/ (metrics at /metrics, API at /api/v1/)", self.addr);
        Ok(serving)
    }
}

/// How the endpoint serves: who may use it, its limits, TLS.
#[derive(Debug, Default)]
pub struct ServeOptions {
    /// Tokens, hosts, origins.
    pub access: Access,
    /// Timeouts and limits.
    pub limits: Limits,
    /// The certificate and key files, for HTTPS.
    pub tls: Option<tls::TlsFiles>,
}

/// What one client may take: timeouts, sizes, connections.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// From the connection (or the end of the last answer) to a whole
    /// request head, and for a TLS handshake.
    pub header_timeout: std::time::Duration,
    /// For a request body, once its head is in.
    pub body_timeout: std::time::Duration,
    /// With nothing received on a connection waiting for a request.
    pub idle_timeout: std::time::Duration,
    /// For an answer to be taken by the client.
    pub write_timeout: std::time::Duration,
    /// The largest request body; larger is 413.
    pub max_body_bytes: usize,
    /// Connections served at once; more get 503.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        use std::time::Duration;
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(10),
            max_body_bytes: 64 * 1024,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// `max_connections` when `[topology.http]` does not set it.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// A serving HTTP endpoint; [`Serving::stop`] ends it.
pub struct Serving {
    stop: Arc<tokio::sync::Notify>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Serving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serving").finish_non_exhaustive()
    }
}

impl Serving {
    /// Stops serving and joins the thread.
    pub fn stop(mut self) {
        self.stop.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What every request is answered from.
pub(crate) struct Ctx {
    handle: TopologyHandle,
    history: Arc<History>,
    access: Access,
    bound: SocketAddr,
}

/// The parts of one request the endpoint reads, owned (a control request
/// is answered on a blocking thread).
#[derive(Debug, Default, Clone)]
pub(crate) struct Incoming {
    method: String,
    path: String,
    query: String,
    host: Option<String>,
    origin: Option<String>,
    authorization: Option<String>,
    content_type: Option<String>,
    requested_with: bool,
    peer: Option<SocketAddr>,
}

/// One answer, before the transport writes it.
#[derive(Debug)]
pub(crate) struct Reply {
    status: u16,
    content_type: &'static str,
    body: String,
    headers: Vec<(&'static str, String)>,
}

impl Reply {
    fn json(answer: &Answer, headers: Vec<(&'static str, String)>) -> Self {
        let body = if answer.body.is_null() {
            String::new()
        } else {
            serde_json::to_string_pretty(&answer.body).unwrap_or_else(|_| "{}".into())
        };
        Self { status: answer.status, content_type: "application/json", body, headers }
    }

    /// A JSON error answer.
    pub(crate) fn error(status: u16, message: &str) -> Self {
        Self::json(&Answer::error(status, message), Vec::new())
    }
}

/// Extra headers of an answer.
pub(crate) type Headers = Vec<(&'static str, String)>;

/// A request that passed routing, its method and access checks.
#[derive(Debug)]
pub(crate) struct Admitted {
    route: Route,
    scope: Scope,
    headers: Vec<(&'static str, String)>,
}

impl Admitted {
    /// A control action: it reads a body (activate, deactivate and drain
    /// then run on the control threads, a reload is waited for).
    pub(crate) fn is_control(&self) -> bool {
        self.scope == Scope::Control && !self.is_tap()
    }

    /// `POST /api/v1/reload`: waited for without a thread ([`Ctx::reload`]).
    pub(crate) fn is_reload(&self) -> bool {
        matches!(self.route, Route::Reload)
    }

    /// `GET /api/v1/tap`: answered by a stream ([`Ctx::tap`]).
    pub(crate) fn is_tap(&self) -> bool {
        matches!(self.route, Route::Tap)
    }
}

/// The answer to a CORS preflight (`OPTIONS` from an allowed origin):
/// the method the route takes and the headers a request may send.
fn preflight(allowed: &'static str, mut headers: Headers) -> Reply {
    headers.push(("Access-Control-Allow-Methods", allowed.into()));
    headers.push((
        "Access-Control-Allow-Headers",
        "Authorization, Content-Type, X-Requested-With".into(),
    ));
    headers.push(("Access-Control-Max-Age", "600".into()));
    Reply::json(&Answer { status: 204, body: serde_json::Value::Null }, headers)
}

impl Ctx {
    /// Routes `req` and checks its method and access; the refusal, or what
    /// to run.
    pub(crate) fn admit(&self, req: &Incoming) -> Result<Admitted, Reply> {
        let mut headers: Vec<(&'static str, String)> = Vec::new();
        let cors = req.origin.as_deref().filter(|o| self.access.cors_origin(o));
        if let Some(o) = cors {
            headers.push(("Access-Control-Allow-Origin", o.to_owned()));
            headers.push(("Vary", "Origin".into()));
        }
        let Some(route) = route(&req.path) else {
            let answer = Answer::error(404, format!("no route {}", req.path));
            return Err(Reply::json(&answer, headers));
        };
        let allowed = route.method();
        if req.method == "OPTIONS" && cors.is_some() {
            return Err(preflight(allowed, headers));
        }
        let head_ok = req.method == "HEAD" && allowed == "GET";
        if req.method != allowed && !head_ok {
            let answer = Answer::error(405, format!("{} takes {allowed} only", req.path));
            headers.push(("Allow", allowed.into()));
            return Err(Reply::json(&answer, headers));
        }
        let scope = route.scope(&self.access);
        if let Err(refusal) = self.check_access(req, &route, scope) {
            if refusal.challenge {
                headers.push(("WWW-Authenticate", "Bearer realm=\"squall\"".into()));
            }
            return Err(Reply::json(&refusal.answer, headers));
        }
        Ok(Admitted { route, scope, headers })
    }

    /// Checks that `req` may do what `route` does (`scope`); a refused
    /// control request is logged with its client.
    fn check_access(&self, req: &Incoming, route: &Route, scope: Scope) -> Result<(), Refusal> {
        let info = access::Request {
            host: req.host.as_deref(),
            origin: req.origin.as_deref(),
            authorization: req.authorization.as_deref(),
            content_type: req.content_type.as_deref(),
            requested_with: req.requested_with,
        };
        let Err(refusal) = self.access.check(self.bound, scope, &info) else { return Ok(()) };
        if scope == Scope::Control {
            tracing::warn!(
                client = %Client(req.peer),
                action = route.action(),
                status = refusal.answer.status,
                "refused control request: {}",
                refusal.answer.body["error"].as_str().unwrap_or("")
            );
        }
        Err(refusal)
    }

    /// Answers an admitted request (a reload blocks until it is over).
    pub(crate) fn run(&self, req: &Incoming, admitted: Admitted) -> Reply {
        let Admitted { route, scope, headers } = admitted;
        let (handle, history) = (&self.handle, &self.history);
        let action = route.action();
        let text = |content_type, body: String| Reply {
            status: 200,
            content_type,
            body,
            headers: headers.clone(),
        };
        let answer = match route {
            Route::Page => return text("text/html; charset=utf-8", page::INDEX.into()),
            Route::Asset(content_type, body) => return text(content_type, body.into()),
            Route::Metrics => {
                return text("text/plain; version=0.0.4; charset=utf-8", prometheus::render(handle))
            }
            Route::Topology => api::topology(handle, history),
            Route::Component(name) => api::component(handle, history, &percent_decode(&name)),
            Route::Steer { activate } => {
                api::steer(handle, activate, query_param(&req.query, "component").as_deref())
            }
            Route::Drain => api::drain(handle),
            // Answered by `Ctx::reload`, which waits without a thread.
            Route::Reload => Answer::error(500, "a reload is waited for elsewhere"),
            // Answered by `Ctx::tap`, before `run`.
            Route::Tap => Answer::error(500, "the tap is a stream"),
            Route::Healthz => api::healthz(handle),
            Route::Readyz => api::readyz(handle),
        };
        if scope == Scope::Control {
            log_control(req.peer, action, &req.query, &answer);
        }
        Reply::json(&answer, headers)
    }

    /// Answers an admitted `POST /api/v1/reload` whose body was checked:
    /// queues a reload with the reload thread and waits for its report
    /// (at most [`api::RELOAD_WAIT`]) without holding a thread, so that
    /// reloads waiting, however many and however long, keep no other
    /// request waiting (the control threads stay free for activate,
    /// deactivate and drain; reads never use them). Requests that arrive
    /// while a reload runs are served together by the next one.
    pub(crate) async fn reload(&self, req: &Incoming, admitted: Admitted) -> Reply {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let queued = self.handle.request_reload_then("HTTP", move |report| {
            let _ = tx.send(report);
        });
        let answer = if queued {
            match tokio::time::timeout(api::RELOAD_WAIT, rx).await {
                Ok(Ok(report)) => api::reload_answer(&self.handle, Some(report)),
                // The reload thread ended without an answer.
                Ok(Err(_)) => api::reload_unavailable(),
                Err(_) => api::reload_answer(&self.handle, None),
            }
        } else {
            api::reload_unavailable()
        };
        log_control(req.peer, admitted.route.action(), &req.query, &answer);
        Reply::json(&answer, admitted.headers)
    }

    /// Attaches the tap an admitted `GET /api/v1/tap` asks for: its
    /// streaming body, or the error answer (400 for a bad query, 404 for an
    /// unknown component or stream).
    pub(crate) fn tap(
        &self,
        req: &Incoming,
        admitted: &Admitted,
        busy: tap::Busy,
    ) -> Result<(tap::TapBody, Headers), Reply> {
        let headers = admitted.headers.clone();
        let (request, limit) = tap::request(&req.query)
            .map_err(|e| Reply::json(&Answer::error(400, e.to_string()), headers.clone()))?;
        // One thread serves every request, so nothing attaches in between.
        if self.handle.tap_totals().0 >= crate::tap::MAX_TAPS as u64 {
            let message = format!(
                "{} taps are attached, the most at once; try again when one ends",
                crate::tap::MAX_TAPS
            );
            let mut headers = headers.clone();
            headers.push(("Retry-After", "1".into()));
            return Err(Reply::json(&Answer::error(503, message), headers));
        }
        let (attached, streams) = self
            .handle
            .tap(&request)
            .map_err(|e| Reply::json(&Answer::error(404, e.to_string()), headers.clone()))?;
        tracing::info!(
            client = %Client(req.peer),
            action = "tap",
            component = request.component.as_str(),
            "tap attached over HTTP"
        );
        let body = tap::TapBody::new(
            attached,
            request.component,
            streams,
            limit,
            self.handle.clone(),
            busy,
        );
        Ok((body, headers))
    }

    /// Logs a control request that was refused after admission (a body
    /// too large or too slow).
    pub(crate) fn log_refused(&self, req: &Incoming, admitted: &Admitted, reply: &Reply) {
        tracing::warn!(
            client = %Client(req.peer),
            action = admitted.route.action(),
            status = reply.status,
            "refused control request: the body was too large or too slow"
        );
    }
}

/// A client address for the log (`-` when the transport has none).
struct Client(Option<SocketAddr>);

impl std::fmt::Display for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(a) => write!(f, "{a}"),
            None => f.write_str("-"),
        }
    }
}

/// Logs one control action: who, what, and how it ended.
fn log_control(peer: Option<SocketAddr>, action: &str, query: &str, answer: &Answer) {
    let component = query_param(query, "component");
    let outcome = if answer.status < 300 {
        "ok".to_owned()
    } else {
        answer.body["error"].as_str().unwrap_or("failed").to_owned()
    };
    tracing::info!(
        client = %Client(peer),
        action,
        component = component.as_deref().unwrap_or("*"),
        status = answer.status,
        "control over HTTP: {outcome}"
    );
}

/// The OpenAPI 3.1 document of every route (`GET /api/v1/openapi.json`),
/// written to match `docs/http-api.md`.
pub const OPENAPI: &str = include_str!("openapi.json");

/// What a path serves, for routing and 405s.
#[derive(Debug)]
enum Route {
    Page,
    Asset(&'static str, &'static str),
    Metrics,
    Topology,
    Component(String),
    Steer { activate: bool },
    Drain,
    Reload,
    Tap,
    Healthz,
    Readyz,
}

impl Route {
    fn method(&self) -> &'static str {
        match self {
            Route::Steer { .. } | Route::Drain | Route::Reload => "POST",
            _ => "GET",
        }
    }

    /// What the route needs (see [`access`]).
    fn scope(&self, access: &Access) -> Scope {
        match self {
            // Static text with no data: the page, its assets, the OpenAPI document.
            Route::Page | Route::Asset(..) => Scope::Public,
            Route::Metrics if access.metrics_public => Scope::Public,
            // The samples carry the tuples' payloads.
            Route::Steer { .. } | Route::Drain | Route::Reload | Route::Tap => Scope::Control,
            _ => Scope::Read,
        }
    }

    /// The control action's name, for the log.
    fn action(&self) -> &'static str {
        match self {
            Route::Steer { activate: true } => "activate",
            Route::Steer { activate: false } => "deactivate",
            Route::Drain => "drain",
            Route::Reload => "reload",
            Route::Tap => "tap",
            _ => "read",
        }
    }
}

fn route(path: &str) -> Option<Route> {
    Some(match path {
        "/" | "/index.html" => Route::Page,
        "/metrics" => Route::Metrics,
        "/api/v1/topology" => Route::Topology,
        "/api/v1/openapi.json" => Route::Asset("application/json", OPENAPI),
        "/api/v1/activate" => Route::Steer { activate: true },
        "/api/v1/deactivate" => Route::Steer { activate: false },
        "/api/v1/drain" => Route::Drain,
        "/api/v1/reload" => Route::Reload,
        "/api/v1/tap" => Route::Tap,
        "/healthz" => Route::Healthz,
        "/readyz" => Route::Readyz,
        p => {
            if let Some(name) = p.strip_prefix("/api/v1/components/") {
                if name.is_empty() || name.contains('/') {
                    return None;
                }
                Route::Component(name.to_owned())
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
    fn the_openapi_document_names_every_route_with_its_method() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI).expect("valid JSON");
        assert_eq!(doc["openapi"], "3.1.0");
        let paths = doc["paths"].as_object().expect("paths");
        for (path, ops) in paths {
            let r = route(&path.replace("{name}", "count")).unwrap_or_else(|| panic!("{path}"));
            let methods: Vec<String> =
                ops.as_object().unwrap().keys().map(|m| m.to_uppercase()).collect();
            assert_eq!(methods, [r.method()], "{path}");
        }
        for path in [
            "/",
            "/metrics",
            "/api/v1/topology",
            "/api/v1/components/{name}",
            "/api/v1/activate",
            "/api/v1/deactivate",
            "/api/v1/drain",
            "/api/v1/reload",
            "/api/v1/tap",
            "/healthz",
            "/readyz",
            "/api/v1/openapi.json",
        ] {
            assert!(paths.contains_key(path), "{path} is not in openapi.json");
        }
    }

    #[test]
    fn routes_take_one_method_each() {
        assert_eq!(route("/api/v1/drain").map(|r| r.method()), Some("POST"));
        assert_eq!(route("/metrics").map(|r| r.method()), Some("GET"));
        assert!(
            matches!(route("/api/v1/components/count"), Some(Route::Component(c)) if c == "count")
        );
        assert!(route("/api/v1/components/").is_none());
        assert!(route("/nope").is_none());
    }
}
