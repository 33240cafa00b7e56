//! The live page in a real browser: headless Chromium, driven through
//! chromedriver's WebDriver protocol, loads the page of a running topology,
//! finds the component names, sees a counter grow between two reads, taps a
//! bolt and sees its tuples in the tap panel, clicks a spout's deactivate
//! button and sees the spout stop emitting.
//!
//! Needs `chromium` and `chromedriver` (Debian's `chromium` and
//! `chromium-driver`); skipped without them unless `SQUALL_REQUIRE_TOOLS=1`.
//! `SQUALL_SCREENSHOT=PATH` also saves a screenshot of the page there (how
//! docs/web-page.png is made).

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

use crate::http::{request, request_with, start, TOPOLOGY};
use crate::util::{require_tool, Workspace};

/// The W3C WebDriver element key.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A chromedriver child and one browser session; both end on drop.
pub(crate) struct Browser {
    driver: Child,
    addr: SocketAddr,
    session: String,
    /// The browser's own profile folder: it names our Chromium processes.
    profile: String,
}

impl Browser {
    pub(crate) fn start(chromedriver: &Path, chromium: &Path, profile: &Path) -> Browser {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen on {addr}");
            std::thread::sleep(Duration::from_millis(50));
        }
        // The flags the machine's notes give for a closed network, as root.
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1400,1000",
        ];
        let mut args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": chromium, "args": args }
        }}});
        let profile_arg = format!("--user-data-dir={}", profile.display());
        let mut browser = Browser { driver, addr, session: String::new(), profile: profile_arg };
        let answer = browser.call("POST", "/session", &caps);
        browser.session = answer["sessionId"].as_str().expect("a session id").to_owned();
        browser
    }

    /// One WebDriver command; returns its `value`.
    fn call(&self, method: &str, path: &str, body: &Value) -> Value {
        let body = if method == "GET" { String::new() } else { body.to_string() };
        let answer = request_with(self.addr, method, path, &body);
        let json = answer.json();
        assert_eq!(answer.status, 200, "WebDriver {method} {path}: {json:#}");
        json["value"].clone()
    }

    pub(crate) fn session(&self, method: &str, rest: &str, body: &Value) -> Value {
        self.call(method, &format!("/session/{}{rest}", self.session), body)
    }

    pub(crate) fn find(&self, css: &str) -> Option<String> {
        let body = json!({ "using": "css selector", "value": css });
        let found = self.session("POST", "/elements", &body);
        found.as_array()?.first()?.get(ELEMENT)?.as_str().map(str::to_owned)
    }

    pub(crate) fn attribute(&self, css: &str, name: &str) -> Option<String> {
        let e = self.find(css)?;
        self.session("GET", &format!("/element/{e}/attribute/{name}"), &Value::Null)
            .as_str()
            .map(str::to_owned)
    }

    /// How many elements `css` matches.
    pub(crate) fn count(&self, css: &str) -> usize {
        let body = json!({ "using": "css selector", "value": css });
        self.session("POST", "/elements", &body).as_array().map_or(0, Vec::len)
    }

    /// Opens `url` in the session.
    pub(crate) fn open(&self, url: &str) {
        self.session("POST", "/url", &json!({ "url": url }));
    }

    pub(crate) fn text(&self, css: &str) -> Option<String> {
        let e = self.find(css)?;
        self.session("GET", &format!("/element/{e}/text"), &Value::Null).as_str().map(str::to_owned)
    }

    pub(crate) fn click(&self, css: &str) {
        let e = self.find(css).unwrap_or_else(|| panic!("no element {css}"));
        self.session("POST", &format!("/element/{e}/click"), &json!({}));
    }

    /// Polls until `ready` returns a value, or panics after `within`.
    pub(crate) fn wait<T>(
        &self,
        what: &str,
        within: Duration,
        ready: impl Fn(&Browser) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + within;
        loop {
            if let Some(v) = ready(self) {
                return v;
            }
            assert!(Instant::now() < deadline, "the page never showed {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = request(self.addr, "DELETE", &format!("/session/{}", self.session));
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        // A session that never completed leaves Chromium behind: end the
        // processes of our own profile folder (a unique temporary path).
        let _ = Command::new("pkill").args(["-f", "--"]).arg(&self.profile).status();
    }
}

/// The source's `emitted` as the page's table shows it (its exact value).
fn emitted(b: &Browser) -> Option<u64> {
    b.attribute("#components tr[data-component=\"source\"] .emitted", "data-value")?.parse().ok()
}

#[test]
fn the_live_page_shows_the_topology_counts_up_and_deactivates_a_spout() {
    let (Some(chromium), Some(chromedriver)) =
        (require_tool("chromium"), require_tool("chromedriver"))
    else {
        return;
    };
    let ws = Workspace::new("browser");
    let (child, addr) = start(&ws, TOPOLOGY);
    let profile = ws.path("chromium-profile");
    let browser = Browser::start(&chromedriver, &chromium, &profile);
    browser.session("POST", "/url", &json!({ "url": format!("http://{addr}/") }));
    let within = Duration::from_secs(30);

    // The component names appear in the table and in the graph.
    for name in ["source", "chaos", "sink"] {
        let css = format!("#components tr[data-component=\"{name}\"] .name");
        let shown = browser.wait(name, within, |b| b.text(&css).filter(|t| t == name));
        assert_eq!(shown, name);
        assert!(browser.find(&format!("#node-{name}")).is_some(), "{name} is in the graph");
    }
    assert_eq!(browser.text("#state").as_deref(), Some("running"));

    // A counter grows between two reads.
    let first = browser.wait("an emitted count", within, emitted);
    browser.wait("the count growing", within, |b| emitted(b).filter(|&n| n > first));

    // The row's tap button streams what the bolt emits into the tap panel.
    browser.click("#components tr[data-component=\"chaos\"] button.tap");
    let tapped = browser.wait("tapped tuples", within, |b| {
        b.text("#tap-out").filter(|t| t.contains("value=\"hello\""))
    });
    assert!(tapped.starts_with("task "), "{tapped}");
    browser.click("#tap-stop");
    let ended = browser.wait("the tap ended", within, |_| {
        let taps = request(addr, "GET", "/api/v1/topology").json()["taps"].clone();
        (taps["attached"] == 0).then_some(taps)
    });
    assert!(ended["sampled"].as_u64() > Some(0), "{ended}");

    // The row's deactivate button stops the spout.
    browser.click("#components tr[data-component=\"source\"] button.deactivate");
    browser.wait("the spout inactive", within, |b| {
        b.find("#components tr.inactive[data-component=\"source\"]")
    });
    let stopped = emitted(&browser).expect("a count");
    // Two more refreshes of the page (its uptime changes each second).
    for _ in 0..2 {
        let uptime = browser.text("#uptime");
        browser.wait("a refresh", within, |b| {
            b.text("#uptime").filter(|u| Some(u) != uptime.as_ref())
        });
    }
    assert_eq!(emitted(&browser), Some(stopped), "a deactivated spout emits nothing");
    let api = request(addr, "GET", "/api/v1/components/source").json();
    assert_eq!(api["tasks"][0]["active"], false);

    if let Some(path) = std::env::var_os("SQUALL_SCREENSHOT") {
        browser.click("#activate-all");
        browser.wait("the spout active again", within, |b| {
            b.find("#components tr[data-component=\"source\"]:not(.inactive)")
        });
        std::thread::sleep(Duration::from_secs(5)); // a few sparkline points for the picture
        let png = browser.session("GET", "/screenshot", &Value::Null);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().expect("base64"))
            .expect("a PNG");
        std::fs::write(&path, bytes).expect("write the screenshot");
    }
    drop(browser);
    drop(child);
}

#[test]
fn the_live_page_stays_usable_with_50_components() {
    let (Some(chromium), Some(chromedriver)) =
        (require_tool("chromium"), require_tool("chromedriver"))
    else {
        return;
    };
    // One spout and 49 bolts: a chain of 7 and 42 leaves on it, at a low rate.
    let mut toml = String::from(
        "[topology]\nname = \"wide\"\n\n[plugins]\ntestkit = \"{testkit}\"\n\n[spouts.source]\n\
         component = \"testkit::ConstSpout\"\nthrottle = { tuples_per_sec = 200 }\n",
    );
    let mut previous = "source".to_owned();
    for i in 0..7 {
        let name = format!("chain{i}");
        toml.push_str(&format!(
            "\n[bolts.{name}]\ncomponent = \"testkit::IdBolt\"\ninputs = [{{ from = \"{previous}\" }}]\n"
        ));
        previous = name;
    }
    for i in 0..42 {
        let from = format!("chain{}", i % 7);
        toml.push_str(&format!(
            "\n[bolts.leaf{i}]\ncomponent = \"testkit::NullBolt\"\ninputs = [{{ from = \"{from}\" }}]\n"
        ));
    }
    let ws = Workspace::new("browser_wide");
    let (child, addr) = start(&ws, &toml);
    let profile = ws.path("chromium-profile");
    let browser = Browser::start(&chromedriver, &chromium, &profile);
    browser.session("POST", "/url", &json!({ "url": format!("http://{addr}/") }));
    let within = Duration::from_secs(30);
    // Every component has its row and its node, and the last leaf counts up.
    let rows = browser.wait("50 rows", within, |b| {
        let found = b.session(
            "POST",
            "/elements",
            &json!({ "using": "css selector", "value": "#components tbody tr" }),
        );
        found.as_array().map(Vec::len).filter(|&n| n == 50)
    });
    assert_eq!(rows, 50);
    assert!(browser.find("#node-leaf41").is_some() && browser.find("#node-chain6").is_some());
    let executed = |b: &Browser| -> Option<u64> {
        b.attribute("#components tr[data-component=\"leaf41\"] .executed", "data-value")?
            .parse()
            .ok()
    };
    browser.wait("leaf41 executing", within, |b| executed(b).filter(|&n| n > 0));
    drop(browser);
    drop(child);
}

#[test]
fn the_live_page_takes_a_token_from_its_fragment_and_steers_with_it() {
    let (Some(chromium), Some(chromedriver)) =
        (require_tool("chromium"), require_tool("chromedriver"))
    else {
        return;
    };
    let ws = Workspace::new("browser_token");
    ws.write("control.token", "page-c0ntrol\n");
    let toml = format!("{TOPOLOGY}\n[topology.http]\ntoken_file = \"control.token\"\n");
    let (child, addr) = start(&ws, &toml);
    let profile = ws.path("chromium-profile");
    let browser = Browser::start(&chromedriver, &chromium, &profile);
    let within = Duration::from_secs(30);

    // Without the token the page asks for one.
    browser.session("POST", "/url", &json!({ "url": format!("http://{addr}/") }));
    browser.wait("the token form", within, |b| b.find("#login:not([hidden])"));
    assert_eq!(browser.text("#state").as_deref(), Some("token needed"));

    // With `#token=...` it shows the topology and drops the fragment.
    browser.session(
        "POST",
        "/url",
        &json!({ "url": format!("http://{addr}/#token=page-c0ntrol") }),
    );
    browser.wait("an emitted count", within, emitted);
    let url = browser.session("GET", "/url", &Value::Null);
    assert!(!url.as_str().unwrap_or("").contains("token"), "the token left the address bar: {url}");
    // Its buttons send the control token.
    browser.click("#components tr[data-component=\"source\"] button.deactivate");
    browser.wait("the spout inactive", within, |b| {
        b.find("#components tr.inactive[data-component=\"source\"]")
    });
    let api = crate::http::exchange(
        addr,
        &format!(
            "GET /api/v1/components/source HTTP/1.1\r\nHost: {addr}\r\n\
             Authorization: Bearer page-c0ntrol\r\nConnection: close\r\n\r\n"
        ),
    );
    assert_eq!(api.json()["tasks"][0]["active"], false);
    drop(browser);
    drop(child);
}
