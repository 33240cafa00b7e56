//! The running server against its own OpenAPI document
//! (`GET /api/v1/openapi.json`) with schemathesis (PyPI; `.ci/run` installs
//! it): every operation conforms (status codes, content types, headers and
//! bodies as documented), no answer is a 5xx, and afterwards the topology
//! still runs and drains cleanly. `drain` is left out of the fuzzing (it
//! ends the run) and exercised last, by hand; so is `tap` (a stream that
//! lasts while the client reads), whose answers tests/tap.rs checks.

use std::process::Command;

use crate::http::{request, start, TOPOLOGY};
use crate::util::{require_tool, Workspace};

#[test]
fn the_server_conforms_to_its_openapi_document() {
    let Some(st) = require_tool("schemathesis") else { return };
    let ws = Workspace::new("http_openapi");
    let (child, addr) = start(&ws, TOPOLOGY);
    let doc = request(addr, "GET", "/api/v1/openapi.json");
    assert_eq!(doc.status, 200);
    assert_eq!(doc.json()["openapi"], "3.1.0");

    let out = Command::new(st)
        .current_dir(ws.dir())
        .args(["run", &format!("http://{addr}/api/v1/openapi.json")])
        .args(["--checks", "all", "--exclude-path", "/api/v1/drain"])
        // The tap is a stream that lasts as long as the client reads it;
        // tests/tap.rs checks its answers against this document instead.
        .args(["--exclude-path", "/api/v1/tap"])
        // Every check but the two about authorization: they need tokens of
        // two users, and without tokens reads on loopback are open by design.
        .args(["--exclude-checks", "ignored_auth,object_level_authorization"])
        .args(["--max-examples", "25", "--workers", "1", "--no-color"])
        .output()
        .expect("run schemathesis");
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "schemathesis failed:\n{text}");

    // Nothing it sent made the topology misbehave.
    let t = request(addr, "GET", "/api/v1/topology").json();
    assert_eq!(t["state"], "running", "{t:#}");
    assert!(t["error"].is_null(), "{t:#}");
    assert_eq!(request(addr, "GET", "/readyz").status, 200);
    let drain = crate::http::request(addr, "POST", "/api/v1/drain");
    assert_eq!(drain.status, 202, "{}", drain.body);
    let out = child.wait();
    out.assert_code(0);
}
