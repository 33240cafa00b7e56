//! The control surface of `squall run --http` (issue 23): cross-site and
//! DNS-rebinding requests are refused, tokens guard reads and control by
//! scope, a non-loopback bind without a control token is refused before
//! anything runs, and every control action is logged with its client.
//!
//! Every attack is sent as the exact request that worked before: the raw
//! bytes curl sends.

use std::net::SocketAddr;
use std::time::Duration;

use crate::http::{component, exchange, poll, request, start, Answer, TOPOLOGY};
use crate::util::{SquallCommand, Workspace};

const WITHIN: Duration = Duration::from_secs(30);

/// What `curl -X POST -H 'Origin: ...' -H 'Content-Type: ...' ADDR/PATH` sends.
fn curl_post(addr: SocketAddr, path: &str, extra: &[(&str, &str)]) -> Answer {
    curl(addr, "POST", path, &addr.to_string(), extra)
}

fn curl(addr: SocketAddr, method: &str, path: &str, host: &str, extra: &[(&str, &str)]) -> Answer {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n"
    );
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("Connection: close\r\n\r\n");
    exchange(addr, &req)
}

fn spout_active(addr: SocketAddr, auth: &[(&str, &str)]) -> bool {
    let t = curl(addr, "GET", "/api/v1/topology", &addr.to_string(), auth);
    assert_eq!(t.status, 200, "{}", t.body);
    component(&t.json(), "source")["active"] == true
}

fn cors_headers(a: &Answer) -> Vec<&(String, String)> {
    a.headers.iter().filter(|(k, _)| k.starts_with("access-control-")).collect()
}

#[test]
fn cross_site_and_rebinding_requests_are_refused_and_the_spouts_stay_active() {
    let ws = Workspace::new("http_cross_site");
    let (child, addr) = start(&ws, TOPOLOGY);
    poll(addr, "/api/v1/topology", WITHIN, |t| component(t, "source")["active"] == true);

    // The request, and the same for drain and reload: 403.
    let evil = [("Origin", "http://evil.example"), ("Content-Type", "text/plain")];
    for path in ["/api/v1/deactivate", "/api/v1/drain", "/api/v1/reload"] {
        let a = curl_post(addr, path, &evil);
        assert_eq!(a.status, 403, "{path}: {}", a.body);
        assert!(cors_headers(&a).is_empty(), "no CORS headers: {:?}", a.headers);
    }
    // A foreign origin is refused even with a JSON body (it would need a
    // preflight, which is never granted: no CORS headers on OPTIONS).
    let json_evil = [("Origin", "http://evil.example"), ("Content-Type", "application/json")];
    assert_eq!(curl_post(addr, "/api/v1/deactivate", &json_evil).status, 403);
    let preflight = curl(
        addr,
        "OPTIONS",
        "/api/v1/deactivate",
        &addr.to_string(),
        &[("Origin", "http://evil.example"), ("Access-Control-Request-Method", "POST")],
    );
    assert!(cors_headers(&preflight).is_empty(), "{:?}", preflight.headers);
    assert_ne!(preflight.status / 100, 2, "{}", preflight.body);
    // A simple POST without a JSON body or a custom header (what a
    // cross-site form can send, Origin or not): 403.
    assert_eq!(curl_post(addr, "/api/v1/deactivate", &[]).status, 403);
    assert_eq!(
        curl_post(addr, "/api/v1/deactivate", &[("Content-Type", "text/plain")]).status,
        403
    );

    // DNS rebinding: the page's own origin, but a Host that is not ours.
    let rebound = format!("evil.example:{}", addr.port());
    let origin = format!("http://{rebound}");
    let a = curl(
        addr,
        "POST",
        "/api/v1/deactivate",
        &rebound,
        &[("Origin", &origin), ("Content-Type", "application/json")],
    );
    assert_eq!(a.status, 403, "{}", a.body);
    let read = curl(addr, "GET", "/api/v1/topology", &rebound, &[]);
    assert_eq!(read.status, 403, "a rebound page cannot read either: {}", read.body);
    assert_eq!(curl(addr, "GET", "/metrics", &rebound, &[]).status, 403);

    // None of that touched the topology.
    std::thread::sleep(Duration::from_millis(300));
    assert!(spout_active(addr, &[]), "the spouts stay active");
    let t = request(addr, "GET", "/api/v1/topology").json();
    assert_eq!(t["state"], "running");
    assert_eq!(t["reloads"].as_u64().unwrap() + t["failed_reloads"].as_u64().unwrap(), 0);

    // A GET from another site gets no CORS headers (the browser hides it).
    let cross_read = curl(addr, "GET", "/api/v1/topology", &addr.to_string(), &evil[..1]);
    assert_eq!(cross_read.status, 200);
    assert!(cors_headers(&cross_read).is_empty(), "{:?}", cross_read.headers);

    // The page's own request: same origin, JSON, works; so does curl with a
    // custom header and no Origin.
    let own = format!("http://{addr}");
    let ok = curl_post(
        addr,
        "/api/v1/deactivate",
        &[("Origin", &own), ("Content-Type", "application/json")],
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    poll(addr, "/api/v1/topology", WITHIN, |t| component(t, "source")["active"] == false);
    let ok = curl_post(addr, "/api/v1/activate", &[("X-Requested-With", "curl")]);
    assert_eq!(ok.status, 200, "{}", ok.body);
    poll(addr, "/api/v1/topology", WITHIN, |t| component(t, "source")["active"] == true);

    // Each control action is logged with its client and outcome.
    let log = child.stderr_snapshot();
    assert!(
        log.lines().any(|l| l.contains("refused control request")
            && l.contains("client=127.0.0.1:")
            && l.contains("action=\"deactivate\"")
            && l.contains("status=403")),
        "{log}"
    );
    assert!(
        log.lines().any(|l| l.contains("control over HTTP")
            && l.contains("client=127.0.0.1:")
            && l.contains("action=\"activate\"")
            && l.contains("status=200")),
        "{log}"
    );
    child.interrupt();
    child.wait().assert_code(0);
}

/// TOPOLOGY with a `[topology.http]` table appended.
fn with_http(table: &str) -> String {
    format!("{TOPOLOGY}\n[topology.http]\n{table}\n")
}

#[test]
fn tokens_guard_reads_and_control_by_scope() {
    let ws = Workspace::new("http_tokens");
    ws.write("control.token", "c0ntrol-secret\n");
    let toml = with_http(
        "token_file = \"control.token\"\nread_token_env = \"WEB_READ_TOKEN\"\nmetrics_public = true\n\
         cors_origins = [\"https://dash.example\"]",
    );
    let path = ws.write_topology("web.toml", &toml);
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &path);
    cmd.args(["--http", "0"]).env("WEB_READ_TOKEN", "r3ad-secret").limit(Duration::from_secs(90));
    let mut child = cmd.spawn();
    let addr = crate::http::bound_addr(&mut child);
    let read = [("Authorization", "Bearer r3ad-secret")];
    let control = [("Authorization", "Bearer c0ntrol-secret")];
    let host = addr.to_string();

    // Reads need a token; /metrics is public; the static page is public.
    let none = curl(addr, "GET", "/api/v1/topology", &host, &[]);
    assert_eq!(none.status, 401, "{}", none.body);
    assert_eq!(none.header("www-authenticate").map(|h| h.starts_with("Bearer")), Some(true));
    assert_eq!(curl(addr, "GET", "/healthz", &host, &[]).status, 401);
    let wrong = curl(addr, "GET", "/api/v1/topology", &host, &[("Authorization", "Bearer nope")]);
    assert_eq!(wrong.status, 401);
    assert_eq!(curl(addr, "GET", "/api/v1/topology", &host, &read).status, 200);
    assert_eq!(curl(addr, "GET", "/api/v1/topology", &host, &control).status, 200);
    let metrics = curl(addr, "GET", "/metrics", &host, &[]);
    assert_eq!(metrics.status, 200);
    assert!(metrics.body.contains("squall_emitted_total"));
    assert_eq!(curl(addr, "GET", "/", &host, &[]).status, 200);
    assert_eq!(curl(addr, "GET", "/app.js", &host, &[]).status, 200);

    // Control needs the control token: none is 401, read is 403, and a
    // same-origin request without the token is not enough any more.
    let evil = [("Origin", "http://evil.example"), ("Content-Type", "text/plain")];
    assert_eq!(curl_post(addr, "/api/v1/deactivate", &evil).status, 401);
    let own = format!("http://{addr}");
    let same = [("Origin", own.as_str()), ("Content-Type", "application/json")];
    assert_eq!(curl_post(addr, "/api/v1/deactivate", &same).status, 401);
    assert_eq!(curl_post(addr, "/api/v1/drain", &read).status, 403);
    poll_with(addr, &read, |t| component(t, "source")["active"] == true);
    assert!(spout_active(addr, &read), "refused requests changed nothing");
    let off = curl_post(addr, "/api/v1/deactivate?component=source", &control);
    assert_eq!(off.status, 200, "{}", off.body);
    poll_with(addr, &read, |t| component(t, "source")["active"] == false);

    // A configured CORS origin gets CORS headers and its preflight; the
    // control token still decides.
    let dash = [
        ("Origin", "https://dash.example"),
        ("Access-Control-Request-Method", "POST"),
        ("Access-Control-Request-Headers", "authorization"),
    ];
    let pre = curl(addr, "OPTIONS", "/api/v1/activate", &host, &dash);
    assert_eq!(pre.status, 204, "{}", pre.body);
    assert_eq!(pre.header("access-control-allow-origin"), Some("https://dash.example"));
    assert!(pre.header("access-control-allow-headers").unwrap_or("").contains("Authorization"));
    let on = curl_post(addr, "/api/v1/activate", &[("Origin", "https://dash.example"), control[0]]);
    assert_eq!(on.status, 200, "{}", on.body);
    assert_eq!(on.header("access-control-allow-origin"), Some("https://dash.example"));
    poll_with(addr, &read, |t| component(t, "source")["active"] == true);

    let log = child.stderr_snapshot();
    assert!(
        log.lines().any(|l| l.contains("refused control request")
            && l.contains("client=127.0.0.1:")
            && l.contains("status=401")),
        "{log}"
    );
    assert!(
        log.lines().any(|l| l.contains("control over HTTP")
            && l.contains("action=\"deactivate\"")
            && l.contains("component=\"source\"")
            && l.contains("status=200")),
        "{log}"
    );
    assert!(!log.contains("c0ntrol-secret") && !log.contains("r3ad-secret"), "no token in the log");
    child.interrupt();
    child.wait().assert_code(0);
}

fn poll_with(addr: SocketAddr, auth: &[(&str, &str)], ready: impl Fn(&serde_json::Value) -> bool) {
    let deadline = std::time::Instant::now() + WITHIN;
    loop {
        let a = curl(addr, "GET", "/api/v1/topology", &addr.to_string(), auth);
        if a.status == 200 && ready(&a.json()) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "never ready: {}", a.body);
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_public_address_without_a_control_token_is_refused_before_anything_runs() {
    let ws = Workspace::new("http_public_no_token");
    // In the file: a config error at the address, exit 78, one line.
    let toml = with_http("addr = \"0.0.0.0:7070\"\nread_token_file = \"read.token\"");
    let path = ws.write_topology("open.toml", &toml);
    let out = SquallCommand::validate(&ws, &path).output();
    out.assert_code(78);
    let text = ws.read("open.toml");
    let (line, col) = crate::util::loc_of(&text, "\"0.0.0.0:7070\"");
    let at = format!("{}:{line}:{col}: error: ", path.display());
    assert!(out.stderr.contains(&at), "expected {at:?}\n{}", out.context());
    assert!(out.stderr.contains("no control token"), "{}", out.context());
    assert_eq!(out.stderr.trim().lines().count(), 1, "one line: {}", out.context());
    // With a token file, the same file validates (nothing is bound).
    ws.write("control.token", "t0ken");
    let toml = with_http("addr = \"0.0.0.0:7070\"\ntoken_file = \"control.token\"");
    let path = ws.write_topology("closed.toml", &toml);
    SquallCommand::validate(&ws, &path).output().assert_code(0);

    // On the command line: one line, exit 78, and no topology started.
    let plain = ws.write_topology("web.toml", TOPOLOGY);
    let mut cmd = SquallCommand::run(&ws, &plain, "30s");
    cmd.args(["--http", "0.0.0.0:0"]);
    let out = cmd.output();
    out.assert_code(78);
    assert!(
        out.stderr.contains("error: --http 0.0.0.0:0 is reachable from other hosts"),
        "{}",
        out.context()
    );
    assert_eq!(out.stderr.trim().lines().count(), 1, "one line: {}", out.context());
    // A token file that is not there: exit 78 too.
    let mut cmd = SquallCommand::run(&ws, &plain, "30s");
    cmd.args(["--http", "0", "--http-token-file", "missing.token"]);
    let out = cmd.output();
    out.assert_code(78);
    let line = out.single_error_line();
    assert!(line.contains("the token file missing.token does not exist"), "{}", out.context());

    // --http-token-file closes a loopback endpoint too.
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &plain);
    cmd.args(["--http", "0", "--http-token-file", "control.token"]).limit(Duration::from_secs(60));
    let mut child = cmd.spawn();
    let addr = crate::http::bound_addr(&mut child);
    assert_eq!(curl_post(addr, "/api/v1/drain", &[("X-Requested-With", "x")]).status, 401);
    assert_eq!(curl(addr, "GET", "/metrics", &addr.to_string(), &[]).status, 401);
    let drain = curl_post(addr, "/api/v1/drain", &[("Authorization", "Bearer t0ken")]);
    assert_eq!(drain.status, 202, "{}", drain.body);
    child.wait().assert_code(0);
}

/// Issue 42, item 7. The `Host` check read only the first `Host` header and
/// served absolute-form targets: `curl --request-target
/// http://evil.example:P/api/v1/topology http://127.0.0.1:P/` got 200, and
/// so did a second `Host: evil.example` after a valid one. Both are 400
/// now; the same request in origin form with one valid `Host` is still 200.
#[test]
fn an_absolute_target_or_a_second_host_header_is_refused() {
    let ws = Workspace::new("http_host_forms");
    let (child, addr) = start(&ws, TOPOLOGY);
    let host = addr.to_string();
    let rebound = format!("evil.example:{}", addr.port());

    // What curl --request-target sends: the target names another host.
    for target in
        [format!("http://{rebound}/api/v1/topology"), format!("http://{host}/api/v1/topology")]
    {
        let a = curl(addr, "GET", &target, &host, &[]);
        assert_eq!(a.status, 400, "{target}: {}", a.body);
        assert!(a.json()["error"].as_str().unwrap_or("").contains("absolute"), "{}", a.body);
    }
    let a = curl(
        addr,
        "POST",
        &format!("http://{rebound}/api/v1/deactivate"),
        &host,
        &[("X-Requested-With", "curl")],
    );
    assert_eq!(a.status, 400, "{}", a.body);

    // A second Host header, after a valid one or before it.
    for (first, second) in [(host.as_str(), rebound.as_str()), (rebound.as_str(), host.as_str())] {
        let a = curl(addr, "GET", "/api/v1/topology", first, &[("Host", second)]);
        assert_eq!(a.status, 400, "Host: {first} then {second}: {}", a.body);
        assert!(a.json()["error"].as_str().unwrap_or("").contains("Host"), "{}", a.body);
    }
    let a = curl(
        addr,
        "POST",
        "/api/v1/deactivate",
        &host,
        &[("Host", &rebound), ("X-Requested-With", "curl")],
    );
    assert_eq!(a.status, 400, "{}", a.body);

    // The ordinary request still works, and nothing above steered the spout.
    let ok = curl(addr, "GET", "/api/v1/topology", &host, &[]);
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert!(spout_active(addr, &[]), "the refused deactivate changed nothing");
    child.interrupt();
    child.wait().assert_code(0);
}
