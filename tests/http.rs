//! `squall run --http`: every route of docs/http-api.md against a running
//! topology, its error answers (404, 405, 400), steering a spout, draining
//! over HTTP, a port in use (exit 69), and `/metrics` checked by promtool.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{require_tool, tail, Running, SquallCommand, Workspace};

/// A throttled reliable spout into a ChaosBolt that returns an error every
/// 50th input, into a sink: steady, with errors to show.
pub const TOPOLOGY: &str = r#"
[topology]
name = "web"
max_spout_pending = 200

[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::ConstSpout"
config = { reliable = true }
throttle = { tuples_per_sec = 2000 }

[bolts.chaos]
component = "testkit::ChaosBolt"
parallelism = 2
config = { error_every = 50 }
inputs = [{ from = "source" }]

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{ from = "chaos", grouping = { fields = ["value"] } }]
"#;

/// An HTTP answer: status, headers (lower-case names) and body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request with `Connection: close`, read to the end.
pub fn request(addr: SocketAddr, method: &str, path: &str) -> Answer {
    request_with(addr, method, path, "")
}

/// One HTTP/1.1 request with a JSON `body`, read to the end.
pub fn request_with(addr: SocketAddr, method: &str, path: &str, body: &str) -> Answer {
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    exchange(addr, &req)
}

/// Sends `raw` (a whole request, exactly as written) and reads the answer.
pub fn exchange(addr: SocketAddr, raw: &str) -> Answer {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    stream.write_all(raw.as_bytes()).expect("write request");
    read_answer(&mut stream)
}

/// Reads one answer from `stream`: the head, then Content-Length bytes (or
/// to the end).
pub fn read_answer(stream: &mut impl Read) -> Answer {
    // Read the head, then exactly Content-Length bytes of body: a server may
    // keep the connection open despite `Connection: close` (chromedriver does).
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = stream.read(&mut buf).expect("read answer");
        assert!(n > 0, "the connection closed before the head ended");
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let mut lines = head.lines();
    let status =
        lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[head_end + 4..].to_vec();
    let length =
        headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.parse().ok());
    match length {
        Some(length) => {
            while body.len() < length {
                let n = stream.read(&mut buf).expect("read body");
                assert!(n > 0, "the connection closed before the body ended");
                body.extend_from_slice(&buf[..n]);
            }
        }
        None => {
            stream.read_to_end(&mut body).expect("read body");
        }
    }
    Answer {
        status: status.unwrap_or_else(|| panic!("no status line: {head}")),
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// Starts `toml` with `--http 0` and returns the child and the bound address
/// (read from the log line that announces it).
pub fn start(ws: &Workspace, toml: &str) -> (Running, SocketAddr) {
    let path = ws.write_topology("web.toml", toml);
    let mut cmd = SquallCommand::run_until_interrupted(ws, &path);
    cmd.args(["--http", "0"]).limit(Duration::from_secs(90));
    let mut child = cmd.spawn();
    let addr = bound_addr(&mut child);
    (child, addr)
}

/// Waits for the log line that announces the HTTP endpoint and returns the
/// address it names.
pub fn bound_addr(child: &mut Running) -> SocketAddr {
    child.wait_for_stderr("HTTP on http", Duration::from_secs(30));
    child
        .stderr_snapshot()
        .lines()
        .find_map(|l| {
            l.split("HTTP on http").nth(1)?.split("://").nth(1)?.split('/').next()?.parse().ok()
        })
        .expect("the log names the bound address")
}

/// Runs `promtool check metrics` on `text` (skipped without promtool, a
/// failure under `SQUALL_REQUIRE_TOOLS=1`).
pub fn promtool_check(ws: &Workspace, text: &str) {
    let Some(promtool) = require_tool("promtool") else { return };
    let file = ws.write("metrics.txt", text);
    let check = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&file).expect("open"))
        .output()
        .expect("run promtool");
    assert!(
        check.status.success(),
        "promtool check metrics failed:\n{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

/// Polls `path` until `ready` holds for its JSON, or panics after `within`.
pub fn poll(
    addr: SocketAddr,
    path: &str,
    within: Duration,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let answer = request(addr, "GET", path);
        if answer.status == 200 {
            let json = answer.json();
            if ready(&json) {
                return json;
            }
            if Instant::now() >= deadline {
                panic!("{path} never got ready; last answer:\n{json:#}");
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn component<'a>(topology: &'a Value, name: &str) -> &'a Value {
    topology["components"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no component {name} in {topology:#}"))
}

#[test]
fn every_route_answers_and_steers_the_running_topology() {
    let ws = Workspace::new("http_routes");
    let (child, addr) = start(&ws, TOPOLOGY);
    let within = Duration::from_secs(30);

    // The topology: components, edges with groupings, windows.
    let t = poll(addr, "/api/v1/topology", within, |t| {
        component(t, "sink")["summary"]["executed"].as_u64().unwrap_or(0) > 100
    });
    assert_eq!(t["name"], "web");
    assert_eq!(t["state"], "running");
    assert_eq!(t["windows"], serde_json::json!(["10s", "1m", "10m", "all"]));
    let edges: Vec<(String, String, String)> = t["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["from"].as_str().unwrap().into(),
                e["to"].as_str().unwrap().into(),
                e["grouping"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(edges.contains(&("source".into(), "chaos".into(), "shuffle".into())), "{edges:?}");
    assert!(edges.contains(&("chaos".into(), "sink".into(), "fields(value)".into())), "{edges:?}");
    assert!(component(&t, "source")["windows"]["10s"]["emit_rate"].as_f64().unwrap() > 0.0);

    // A component: per-task stats, streams, and the last errors with text and time.
    let c = poll(addr, "/api/v1/components/chaos", within, |c| {
        c["last_errors"].as_array().is_some_and(|e| !e.is_empty())
    });
    assert_eq!(c["tasks"].as_array().unwrap().len(), 2);
    assert_eq!(c["inputs"][0]["from"], "source");
    assert_eq!(c["outputs"][0]["to"], serde_json::json!(["sink"]));
    let error = &c["last_errors"][0];
    assert!(error["message"].as_str().unwrap().contains("chaos: error on purpose"), "{error}");
    assert!(error["time"].as_u64().unwrap() > 1_700_000_000, "a Unix time: {error}");

    // Error answers.
    let unknown = request(addr, "GET", "/api/v1/components/nosuch");
    assert_eq!(unknown.status, 404);
    assert!(unknown.json()["error"].as_str().unwrap().contains("nosuch"));
    let wrong = request(addr, "GET", "/api/v1/drain");
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.header("allow"), Some("POST"));
    assert!(wrong.json()["error"].is_string());
    assert_eq!(request(addr, "POST", "/api/v1/topology").status, 405);
    assert_eq!(request(addr, "GET", "/nope").status, 404);
    assert_eq!(request(addr, "POST", "/api/v1/deactivate?component=sink").status, 400);
    assert_eq!(request(addr, "POST", "/api/v1/deactivate?component=nosuch").status, 404);

    // Health.
    assert_eq!(request(addr, "GET", "/healthz").status, 200);
    assert_eq!(request(addr, "GET", "/readyz").status, 200);

    // The page and its assets are served from the binary.
    let page = request(addr, "GET", "/");
    assert_eq!(page.status, 200);
    assert!(page.header("content-type").unwrap().starts_with("text/html"));
    assert!(page.body.contains("/app.js"));
    assert_eq!(request(addr, "GET", "/app.js").status, 200);
    assert_eq!(request(addr, "GET", "/style.css").status, 200);

    // Deactivate the spout: it stops emitting; activate: it emits again.
    let off = request(addr, "POST", "/api/v1/deactivate?component=source");
    assert_eq!(off.status, 200, "{}", off.body);
    assert_eq!(off.json()["tasks"], 1);
    let stopped =
        poll(addr, "/api/v1/components/source", within, |c| c["tasks"][0]["active"] == false);
    let emitted = stopped["tasks"][0]["emitted"].as_u64().unwrap();
    // Long enough for a 2000/s spout to emit hundreds if it were still active.
    std::thread::sleep(Duration::from_millis(500));
    let later = request(addr, "GET", "/api/v1/components/source").json();
    assert_eq!(
        later["tasks"][0]["emitted"].as_u64().unwrap(),
        emitted,
        "a deactivated spout emits nothing"
    );
    assert_eq!(request(addr, "POST", "/api/v1/activate").status, 200);
    poll(addr, "/api/v1/components/source", within, |c| {
        c["tasks"][0]["emitted"].as_u64().unwrap_or(0) > emitted
    });

    // Drain over HTTP: readyz turns 503 and the process ends cleanly.
    let drain = request(addr, "POST", "/api/v1/drain");
    assert_eq!(drain.status, 202, "{}", drain.body);
    let out = child.wait();
    out.assert_code(0);
    assert_eq!(out.summary()["outcome"], "completed", "{}", tail(&out.stderr, 30));
    assert!(out.stderr.contains("drain requested over HTTP"));
}

#[test]
fn a_port_in_use_is_a_one_line_error_with_exit_69_before_anything_runs() {
    let ws = Workspace::new("http_port_in_use");
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let port = taken.local_addr().unwrap().port();
    let path = ws.write_topology("web.toml", TOPOLOGY);
    let mut cmd = SquallCommand::run(&ws, &path, "30s");
    cmd.args(["--http", &port.to_string()]);
    let out = cmd.output();
    out.assert_code(69);
    let line = out.single_error_line();
    assert!(line.contains("cannot listen on 127.0.0.1:") && line.contains("--http"), "{line}");
    assert!(!out.stderr.contains("running"), "nothing started\n{}", out.context());
}

#[test]
fn metrics_are_valid_prometheus_text_with_every_family() {
    let ws = Workspace::new("http_metrics");
    let (child, addr) = start(&ws, TOPOLOGY);
    poll(addr, "/api/v1/topology", Duration::from_secs(30), |t| {
        component(t, "source")["summary"]["acked"].as_u64().unwrap_or(0) > 100
            && component(t, "chaos")["summary"]["errors"].as_u64().unwrap_or(0) > 0
    });
    // Complete latency is merged into the shared histogram once a second.
    let deadline = Instant::now() + Duration::from_secs(30);
    let metrics = loop {
        let metrics = request(addr, "GET", "/metrics");
        let merged = metrics.body.lines().any(|l| {
            l.starts_with("squall_complete_latency_seconds_count{")
                && l.rsplit(' ').next().is_some_and(|n| n != "0")
        });
        if merged || Instant::now() >= deadline {
            break metrics;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(metrics.status, 200);
    assert!(metrics.header("content-type").unwrap().starts_with("text/plain; version=0.0.4"));
    let text = metrics.body;
    for family in [
        "squall_emitted_total",
        "squall_transferred_total",
        "squall_executed_total",
        "squall_acked_total",
        "squall_failed_total",
        "squall_restarts_total",
        "squall_errors_total",
        "squall_ticks_total",
        "squall_capacity",
        "squall_queue_depth_batches",
        "squall_pending_trees",
        "squall_complete_latency_seconds",
        "squall_execute_latency_seconds",
        "squall_backpressure_seconds_total",
        "squall_max_pending_seconds_total",
        "squall_throttle_seconds_total",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
    ] {
        assert!(text.contains(&format!("# TYPE {family} ")), "no {family} in\n{text}");
    }
    assert!(
        text.contains("squall_emitted_total{topology=\"web\",component=\"source\",task=\"0\"}"),
        "{text}"
    );
    assert!(text.contains("reason=\"explicit\""), "{text}");
    let count = text
        .lines()
        .find(|l| l.starts_with("squall_complete_latency_seconds_count{"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .expect("a complete latency count");
    assert!(count > 0, "acked trees are in the latency histogram");
    drop(child);
    promtool_check(&ws, &text);
}

#[test]
fn the_topology_file_can_turn_http_on_and_a_bad_address_is_a_config_error() {
    let ws = Workspace::new("http_in_toml");
    // A bad address: exit 78 at the value.
    let bad = TOPOLOGY.replace("name = \"web\"", "name = \"web\"\nhttp = \"no such host\"");
    let path = ws.write_topology("bad.toml", &bad);
    let out = SquallCommand::validate(&ws, &path).output();
    out.assert_code(78);
    let text = ws.read("bad.toml");
    let (line, col) = crate::util::loc_of(&text, "\"no such host\"");
    let at = format!("{}:{line}:{col}: error: ", path.display());
    assert!(out.stderr.contains(&at), "expected {at:?}\n{}", out.context());

    // `http = "0"` in the file serves on a free loopback port.
    let good = TOPOLOGY.replace("name = \"web\"", "name = \"web\"\nhttp = \"0\"");
    let path = ws.write_topology("good.toml", &good);
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &path);
    cmd.limit(Duration::from_secs(60));
    let mut child = cmd.spawn();
    let addr = bound_addr(&mut child);
    assert!(addr.ip().is_loopback(), "a bare port binds loopback: {addr}");
    assert_eq!(request(addr, "GET", "/healthz").status, 200);
    child.interrupt();
    child.wait().assert_code(0);
}
