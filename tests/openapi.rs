//! The running server against its own OpenAPI document
//! (`GET /api/v1/openapi.json`) with schemathesis (PyPI; `.ci/run` installs
//! it): every operation conforms (status codes, content types, headers and
//! bodies as documented), no answer is a 5xx, and afterwards the topology
//! still runs and drains cleanly. `drain` is left out of the fuzzing (it
//! ends the run) and exercised last, by hand; so is `tap` (a stream that
//! lasts while the client reads), whose answers tests/tap.rs checks.

use std::process::Command;

use serde_json::{json, Value};

use crate::http::{exchange, request, start, TOPOLOGY};
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

/// Issue 42, item 8. The document of `GET /api/v1/tap` allowed
/// `outputs_of` and `inputs_of` together. Each query below is checked
/// against the tap's query schema as the server serves it (the exploded
/// form object, its `oneOf`), and sent to the server: what the schema
/// admits is a 200 stream, what it refuses is a 400 the document lists.
/// Seen failing on the previous build: "the tap's query is not one
/// exploded object" (two separate, independent parameters).
#[test]
fn the_tap_query_schema_says_what_the_server_accepts() {
    let ws = Workspace::new("http_openapi_tap");
    let (child, addr) = start(&ws, TOPOLOGY);
    let doc = request(addr, "GET", "/api/v1/openapi.json").json();
    let tap = &doc["paths"]["/api/v1/tap"]["get"];
    let params = tap["parameters"].as_array().expect("parameters");
    let query = params
        .iter()
        .find(|p| p["in"] == "query" && p["style"] == "form" && p["explode"] == true)
        .unwrap_or_else(|| panic!("the tap's query is not one exploded object: {params:#?}"));
    assert_eq!(params.len(), 1, "every query key is in the one object: {params:#?}");
    let schema = resolve(&doc, &query["schema"]);
    assert!(tap["responses"]["400"].is_object(), "400 is listed: {:#}", tap["responses"]);

    let cases = [
        (json!({"outputs_of": "source", "limit": 1}), true),
        (json!({"inputs_of": "chaos", "limit": 1}), true),
        (json!({"outputs_of": "source", "sample": 0.5, "limit": 1}), true),
        (json!({"outputs_of": "source", "inputs_of": "chaos", "limit": 1}), false),
        (json!({"limit": 1}), false),
        (json!({"outputs_of": "", "limit": 1}), false),
        (json!({"outputs_of": "source", "sample": 0, "limit": 1}), false),
        (json!({"outputs_of": "source", "limit": 0}), false),
    ];
    for (case, admitted) in cases {
        assert_eq!(admits(&doc, &schema, &case), admitted, "the schema on {case}: {schema:#}");
        let q: Vec<String> =
            case.as_object().unwrap().iter().map(|(k, v)| format!("{k}={}", plain(v))).collect();
        let raw = format!(
            "GET /api/v1/tap?{} HTTP/1.1\r\nHost: {addr}\r\nX-Requested-With: test\r\n\
             Connection: close\r\n\r\n",
            q.join("&")
        );
        let a = exchange(addr, &raw);
        let want = if admitted { 200 } else { 400 };
        assert_eq!(a.status, want, "the server on {case}: {}", a.body);
    }
    assert_eq!(request(addr, "POST", "/api/v1/drain").status, 202);
    child.wait().assert_code(0);
}

/// A JSON value as a query string value.
fn plain(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// `schema` with a `$ref` at its top followed.
fn resolve(doc: &Value, schema: &Value) -> Value {
    match schema["$ref"].as_str() {
        Some(r) => {
            let pointer = r.strip_prefix('#').expect("a local $ref");
            resolve(doc, doc.pointer(pointer).unwrap_or_else(|| panic!("no {r}")))
        }
        None => schema.clone(),
    }
}

/// The few JSON Schema keywords the tap's query uses: type, required,
/// properties, minLength, minimum, maximum, exclusiveMinimum, oneOf,
/// anyOf, allOf, not. Anything else in the schema fails the test (so this
/// stays honest when the document grows).
fn admits(doc: &Value, schema: &Value, v: &Value) -> bool {
    let schema = resolve(doc, schema);
    let Some(map) = schema.as_object() else { return true };
    map.iter().all(|(key, rule)| match key.as_str() {
        "description" | "default" | "title" | "additionalProperties" => true,
        "type" => match rule.as_str().expect("one type") {
            "object" => v.is_object(),
            "string" => v.is_string(),
            "number" => v.is_number(),
            "integer" => v.is_i64() || v.is_u64(),
            other => panic!("type {other}"),
        },
        "required" => rule.as_array().unwrap().iter().all(|k| v.get(k.as_str().unwrap()).is_some()),
        "properties" => rule
            .as_object()
            .unwrap()
            .iter()
            .all(|(k, s)| v.get(k).is_none_or(|x| admits(doc, s, x))),
        "minLength" => {
            v.as_str().is_none_or(|s| s.chars().count() as u64 >= rule.as_u64().unwrap())
        }
        "minimum" => v.as_f64().is_none_or(|x| x >= rule.as_f64().unwrap()),
        "maximum" => v.as_f64().is_none_or(|x| x <= rule.as_f64().unwrap()),
        "exclusiveMinimum" => v.as_f64().is_none_or(|x| x > rule.as_f64().unwrap()),
        "oneOf" => rule.as_array().unwrap().iter().filter(|s| admits(doc, s, v)).count() == 1,
        "anyOf" => rule.as_array().unwrap().iter().any(|s| admits(doc, s, v)),
        "allOf" => rule.as_array().unwrap().iter().all(|s| admits(doc, s, v)),
        "not" => !admits(doc, rule, v),
        other => panic!("the test does not know the keyword {other}"),
    })
}
