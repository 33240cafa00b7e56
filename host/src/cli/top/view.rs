//! The pure part of `squall top`: the JSON of `GET /api/v1/topology` turned
//! into the header line and the table's cells. No terminal here, so it is
//! unit-tested on a fixture.

use serde_json::Value as Json;

/// The table's column titles: the stats table's columns, as the live page
/// shows them.
pub const COLUMNS: [&str; 15] = [
    "component",
    "kind",
    "tasks",
    "emitted",
    "emit/s",
    "executed",
    "exec/s",
    "acked",
    "failed",
    "capacity",
    "queued",
    "backpressure s",
    "latency p50",
    "latency p99",
    "errors",
];

/// The window the rate columns cover (the REST API's windows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Window {
    /// The last 10 seconds.
    #[default]
    TenSeconds,
    /// The last minute.
    OneMinute,
    /// The last 10 minutes.
    TenMinutes,
    /// Since the start.
    All,
}

impl Window {
    /// The window's key in the JSON (`10s`, `1m`, `10m`, `all`).
    pub fn name(self) -> &'static str {
        match self {
            Window::TenSeconds => "10s",
            Window::OneMinute => "1m",
            Window::TenMinutes => "10m",
            Window::All => "all",
        }
    }

    /// The next window, cycling back to 10 s after all time.
    pub fn next(self) -> Window {
        match self {
            Window::TenSeconds => Window::OneMinute,
            Window::OneMinute => Window::TenMinutes,
            Window::TenMinutes => Window::All,
            Window::All => Window::TenSeconds,
        }
    }
}

/// One component's row: its cells in [`COLUMNS`] order.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The cells, as shown.
    pub cells: [String; 15],
    /// A spout that is deactivated (drawn dimmed).
    pub inactive: bool,
    /// The component's last plugin error, if any.
    pub last_error: Option<String>,
}

/// A count, or `-` when the field is missing.
fn count(v: &Json) -> String {
    v.as_u64().map_or_else(|| "-".to_owned(), |n| n.to_string())
}

/// A rate in tuples/s: one decimal below 10, none above.
fn rate(v: &Json) -> String {
    match v.as_f64() {
        Some(r) if r < 10.0 => format!("{r:.1}"),
        Some(r) => format!("{r:.0}"),
        None => "-".to_owned(),
    }
}

fn fixed2(v: &Json) -> String {
    v.as_f64().map_or_else(|| "-".to_owned(), |x| format!("{x:.2}"))
}

/// A latency given in µs: `310µs`, `4.20ms`, `1.50s`.
pub fn latency(us: &Json) -> String {
    let Some(us) = us.as_u64() else { return "-".to_owned() };
    match us {
        0..1_000 => format!("{us}µs"),
        1_000..1_000_000 => format!("{:.2}ms", us as f64 / 1e3),
        _ => format!("{:.2}s", us as f64 / 1e6),
    }
}

/// Seconds as `42s`, `3m 07s` or `2h 05m 09s`.
pub fn uptime(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m {s:02}s"),
        (h, m, s) => format!("{h}h {m:02}m {s:02}s"),
    }
}

/// The rows of `topology` (the answer of `GET /api/v1/topology`): totals
/// from each component's summary, rates from `window`.
pub fn rows(topology: &Json, window: Window) -> Vec<Row> {
    let Some(components) = topology["components"].as_array() else { return Vec::new() };
    components.iter().map(|c| row(c, window)).collect()
}

fn row(c: &Json, window: Window) -> Row {
    let s = &c["summary"];
    let w = &c["windows"][window.name()];
    let lat = &s["complete_latency_us"];
    let cells = [
        c["name"].as_str().unwrap_or("?").to_owned(),
        c["kind"].as_str().unwrap_or("?").to_owned(),
        count(&c["tasks"]),
        count(&s["emitted"]),
        rate(&w["emit_rate"]),
        count(&s["executed"]),
        rate(&w["execute_rate"]),
        count(&s["acked"]),
        count(&s["failed"]),
        fixed2(&s["capacity"]),
        count(&s["queue_depth_batches"]),
        fixed2(&s["backpressure_secs"]),
        latency(&lat["p50"]),
        latency(&lat["p99"]),
        count(&s["errors"]),
    ];
    Row {
        cells,
        inactive: c["kind"] == "spout" && c["active"] == false,
        last_error: c["last_error"]["message"].as_str().map(str::to_owned),
    }
}

/// Each column's width: its widest cell or its title.
pub fn widths(rows: &[Row]) -> [u16; 15] {
    let mut w = COLUMNS.map(|t| t.chars().count());
    for r in rows {
        for (w, cell) in w.iter_mut().zip(&r.cells) {
            *w = (*w).max(cell.chars().count());
        }
    }
    w.map(|n| u16::try_from(n).unwrap_or(u16::MAX))
}

/// Where the dashboard stands with the endpoint.
#[derive(Debug, Clone, Copy)]
pub struct Link<'a> {
    /// The address as given on the command line.
    pub addr: &'a str,
    /// The last topology answer, if one ever came.
    pub last: Option<&'a Json>,
    /// Why the last fetch failed, if it did.
    pub error: Option<&'a str>,
}

/// The header line: topology name, state and uptime, or that the endpoint
/// is not (or no longer) reachable.
pub fn header(link: Link<'_>) -> String {
    let addr = link.addr;
    let Some(t) = link.last else {
        return match link.error {
            None => format!("connecting to {addr} ..."),
            Some(e) => format!("connecting to {addr} ... ({e}; retrying)"),
        };
    };
    let name = t["name"].as_str().unwrap_or("?");
    let state = t["state"].as_str().unwrap_or("?");
    let up = uptime(t["uptime_secs"].as_f64().unwrap_or(0.0));
    let mut line = match link.error {
        None => format!("{name} · {state} · up {up} · {addr}"),
        Some(e) => {
            format!("{name} · unreachable: {e} (retrying; last seen {state}, up {up}) · {addr}")
        }
    };
    if let Some(fatal) = t["error"].as_str() {
        line.push_str(&format!(" · failed: {fatal}"));
    }
    line
}

/// The footer: the keys.
pub fn footer(window: Window) -> String {
    format!(
        "q/Esc quit · w rate window: {} (10s/1m/10m/all) · ↑/↓ select · refreshed every second",
        window.name()
    )
}

#[cfg(test)]
mod tests;
