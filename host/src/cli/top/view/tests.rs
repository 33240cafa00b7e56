use serde_json::{json, Value as Json};

use super::*;

/// An answer of `GET /api/v1/topology` in the documented shape: a
/// deactivated spout with latencies, a bolt with a last error.
fn fixture() -> Json {
    serde_json::from_str(include_str!("topology.json")).expect("the fixture is JSON")
}

fn cells(row: &Row) -> Vec<&str> {
    row.cells.iter().map(String::as_str).collect()
}

#[test]
fn rows_show_totals_from_the_summary_and_rates_from_the_10s_window() {
    let rows = rows(&fixture(), Window::TenSeconds);
    assert_eq!(rows.len(), 2);
    assert_eq!(
        cells(&rows[0]),
        [
            "sentences",
            "spout",
            "1",
            "1812",
            "43",
            "0",
            "0.0",
            "1800",
            "3",
            "0.02",
            "0",
            "1.26",
            "310µs",
            "4.20ms",
            "0"
        ]
    );
    assert_eq!(
        cells(&rows[1]),
        [
            "count", "bolt", "2", "15422", "301", "15430", "301", "15430", "0", "0.50", "12",
            "0.00", "-", "-", "7"
        ]
    );
}

#[test]
fn the_window_picks_the_rate_columns_only() {
    let all = rows(&fixture(), Window::All);
    assert_eq!(all[0].cells[3], "1812", "totals stay all-time");
    assert_eq!(all[0].cells[4], "0.5", "a slow rate keeps one decimal");
    assert_eq!(all[1].cells[6], "4.1");
    assert_eq!(rows(&fixture(), Window::OneMinute)[0].cells[4], "40");
}

#[test]
fn a_deactivated_spout_and_a_last_error_are_flagged() {
    let rows = rows(&fixture(), Window::TenSeconds);
    assert!(rows[0].inactive);
    assert!(!rows[1].inactive, "only spouts are ever inactive");
    assert_eq!(rows[0].last_error, None);
    assert_eq!(rows[1].last_error.as_deref(), Some("execute: bad word (error #7)"));
}

#[test]
fn missing_fields_show_a_dash_instead_of_failing() {
    let rows = rows(&json!({ "components": [{ "name": "x" }] }), Window::TenSeconds);
    assert_eq!(rows[0].cells[0], "x");
    assert!(rows[0].cells[1..].iter().all(|c| c == "?" || c == "-"), "{:?}", rows[0].cells);
    assert!(super::rows(&json!({ "error": "nope" }), Window::All).is_empty());
}

#[test]
fn widths_fit_the_widest_cell_or_the_title() {
    let rows = rows(&fixture(), Window::TenSeconds);
    let w = widths(&rows);
    assert_eq!(w[1], 5, "\"spout\" is wider than the title \"kind\"");
    assert_eq!(w[2], 5, "the title \"tasks\" is wider than the cells");
    assert_eq!(w[12], 11, "\"latency p50\"; µs counts as one column");
}

#[test]
fn the_window_key_cycles_through_the_api_windows() {
    let mut w = Window::default();
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(w.name());
        w = w.next();
    }
    assert_eq!(seen, ["10s", "1m", "10m", "all", "10s"]);
    assert_eq!(fixture()["windows"], json!(["10s", "1m", "10m", "all"]));
}

#[test]
fn the_header_names_the_topology_or_the_trouble() {
    let t = fixture();
    let up = Link { addr: "127.0.0.1:7070", last: Some(&t), error: None };
    assert_eq!(header(up), "wordcount · running · up 1h 02m 05s · 127.0.0.1:7070");
    let start = Link { addr: "127.0.0.1:7070", last: None, error: None };
    assert_eq!(header(start), "connecting to 127.0.0.1:7070 ...");
    let refused = Link { error: Some("connection refused"), ..start };
    assert_eq!(header(refused), "connecting to 127.0.0.1:7070 ... (connection refused; retrying)");
    let lost = Link { error: Some("connection refused"), ..up };
    assert!(header(lost).starts_with(
        "wordcount · unreachable: connection refused (retrying; last seen running, up 1h 02m 05s)"
    ));
    let mut failed = t.clone();
    failed["error"] = json!("task count#2 died");
    let line = header(Link { last: Some(&failed), ..up });
    assert!(line.ends_with(" · failed: task count#2 died"), "{line}");
}

#[test]
fn durations_read_as_a_person_would_write_them() {
    assert_eq!(uptime(0.4), "0s");
    assert_eq!(uptime(187.9), "3m 07s");
    assert_eq!(uptime(7509.0), "2h 05m 09s");
    assert_eq!(latency(&json!(999)), "999µs");
    assert_eq!(latency(&json!(1500000)), "1.50s");
    assert_eq!(latency(&Json::Null), "-");
}
