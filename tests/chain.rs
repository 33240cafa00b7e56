//! Operator chains (issue 44): a bolt whose only input is a
//! `local_or_shuffle` edge from a component of the same parallelism runs
//! task by task on its upstream's thread; `chain = false` keeps it on
//! threads of its own. Seen from outside: the process's thread names, the
//! summary's `chained_to`, the HTTP API's edges and `squall graph`.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::http::{poll, start};
use crate::util::{workspace_root, SquallCommand, Workspace};

/// s (2 tasks) → i → n, each edge `local_or_shuffle`, 2 tasks each: two
/// chains, s-0+i-2+n-4 and s-1+i-3+n-5. Short names: Linux keeps 15
/// bytes of a thread's name.
const LINE: &str = r#"
[topology]
max_spout_pending = 500

[plugins]
testkit = "{testkit}"

[spouts.s]
component = "testkit::ConstSpout"
parallelism = 2
config = { reliable = true, limit = 20000 }

[bolts.i]
component = "testkit::IdBolt"
parallelism = 2
inputs = [{ from = "s", grouping = "local_or_shuffle" }]

[bolts.n]
component = "testkit::NullBolt"
parallelism = 2
inputs = [{ from = "i", grouping = "local_or_shuffle" }]
"#;

/// The names of the threads of process `pid` (as Linux keeps them).
fn thread_names(pid: u32) -> BTreeSet<String> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc/PID/task");
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|name| name.trim_end().to_owned())
        .collect()
}

/// Runs [`LINE`] with `sets` until every tuple is acked; returns the
/// executor threads seen while it ran, and the summary's figures.
fn run_line(test: &str, sets: &[&str]) -> (BTreeSet<String>, crate::util::Output) {
    let ws = Workspace::new(test);
    let topology = ws.write_topology("line.toml", LINE);
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &topology);
    for set in sets {
        cmd.args(["--set", set]);
    }
    cmd.limit(Duration::from_secs(60));
    let mut child = cmd.spawn();
    child.wait_for_stat("s", "acked", |n| n >= 40_000, Duration::from_secs(40));
    let names = thread_names(child.pid());
    child.interrupt();
    let out = child.wait();
    out.assert_code(0);
    let executors: BTreeSet<String> =
        names.into_iter().filter(|n| ["s-", "i-", "n-"].iter().any(|p| n.starts_with(p))).collect();
    (executors, out)
}

#[test]
fn a_local_or_shuffle_line_runs_each_task_index_on_one_thread_and_counts_per_component() {
    let (threads, out) = run_line("chain_line", &[]);
    let expected: BTreeSet<String> = ["s-0+i-2+n-4", "s-1+i-3+n-5"].map(String::from).into();
    assert_eq!(threads, expected, "\n{}", out.context());
    assert_eq!(out.component("i")["chained_to"], "s", "\n{}", out.context());
    assert_eq!(out.component("n")["chained_to"], "i", "\n{}", out.context());
    assert!(out.component("s")["chained_to"].is_null(), "\n{}", out.context());
    // Each component keeps its own exact figures inside the chain.
    assert_eq!(out.stat("s", "acked"), 40_000, "\n{}", out.context());
    assert_eq!(out.stat("s", "failed"), 0, "\n{}", out.context());
    assert_eq!(out.stat("i", "executed"), 40_000, "\n{}", out.context());
    assert_eq!(out.stat("i", "emitted"), 40_000, "\n{}", out.context());
    assert_eq!(out.stat("n", "executed"), 40_000, "\n{}", out.context());
    assert_eq!(out.stat("n", "acked"), 40_000, "\n{}", out.context());
}

#[test]
fn chain_false_keeps_a_component_and_what_hangs_below_it_on_threads_of_their_own() {
    let (threads, out) = run_line("chain_false", &["bolts.i.chain=false"]);
    let expected: BTreeSet<String> =
        ["s-0", "s-1", "i-2", "i-3", "n-4", "n-5"].map(String::from).into();
    assert_eq!(threads, expected, "\n{}", out.context());
    assert!(out.component("i")["chained_to"].is_null(), "\n{}", out.context());
    assert_eq!(out.stat("n", "executed"), 40_000, "\n{}", out.context());
}

#[test]
fn the_http_api_and_graph_show_which_edges_are_chained() {
    let ws = Workspace::new("chain_http");
    let (child, addr) = start(&ws, LINE);
    let t = poll(addr, "/api/v1/topology", Duration::from_secs(20), |t| t["edges"].is_array());
    let edges: Vec<(String, String, bool)> = t["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let name = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            (name("from"), name("to"), e["chained"].as_bool().expect("chained is a boolean"))
        })
        .collect();
    let expected = vec![("s".into(), "i".into(), true), ("i".into(), "n".into(), true)];
    assert_eq!(edges, expected);
    child.interrupt();
    child.wait().assert_code(0);

    let topology = ws.write_topology("line.toml", LINE);
    let out = SquallCommand::new(&ws, ["graph"]).arg(&topology).output();
    out.assert_code(0);
    let chained = "\"s\" -> \"i\" [label=\"local_or_shuffle\\nchained\", style=bold";
    assert!(out.stdout.contains(chained), "{chained:?} missing\n{}", out.context());
    // The shipped word count: split's shuffle over 2 tasks is not chained.
    let wordcount = workspace_root().join("topologies/wordcount.toml");
    let out = SquallCommand::new(&ws, ["graph", "--format", "json"]).arg(&wordcount).output();
    out.assert_code(0);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    let chained: Vec<bool> =
        json["edges"].as_array().unwrap().iter().map(|e| e["chained"] == true).collect();
    assert_eq!(chained, vec![false, false], "\n{}", out.context());
}
