//! `squall graph`: the shipped word count as DOT (rendered by Graphviz when
//! it is installed) and as JSON, without any plugin library being loaded.

use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::util::{require_tool, workspace_root, SquallCommand, Workspace};

#[test]
fn graph_prints_dot_that_graphviz_renders() {
    let ws = Workspace::new("graph_dot");
    let topology = workspace_root().join("topologies/wordcount.toml");
    let mut cmd = SquallCommand::new(&ws, ["graph"]);
    // A plugin folder that does not exist: graph must not need the libraries.
    cmd.arg(&topology).env("SQUALL_PLUGIN_DIR", ws.path("no-plugins-here"));
    let out = cmd.output();
    out.assert_code(0);
    let dot = &out.stdout;
    assert!(dot.starts_with("digraph \"wordcount\" {"), "\n{}", out.context());
    for needle in [
        "\"sentences\" -> \"split\" [label=\"shuffle\"];",
        "\"split\" -> \"count\" [label=\"fields(word)\"];",
        "count\\nbolt examples::WordCount\\nparallelism 2",
        "wait: spout progressive 0/0/1ms",
    ] {
        assert!(dot.contains(needle), "{needle:?} missing\n{}", out.context());
    }
    let Some(graphviz) = require_tool("dot") else { return };
    let mut child = Command::new(graphviz)
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start dot");
    child.stdin.take().expect("stdin").write_all(dot.as_bytes()).expect("write to dot");
    let rendered = child.wait_with_output().expect("dot ends");
    let svg = String::from_utf8_lossy(&rendered.stdout);
    assert!(rendered.status.success(), "dot failed: {}", String::from_utf8_lossy(&rendered.stderr));
    assert!(svg.contains("<svg") && svg.contains("sentences"), "{svg}");
}

#[test]
fn graph_json_has_components_edges_and_wait_strategies() {
    let ws = Workspace::new("graph_json");
    let topology = workspace_root().join("topologies/wordcount-backoff.toml");
    let mut cmd = SquallCommand::new(&ws, ["graph", "--format", "json"]);
    cmd.arg(&topology).args(["--set", "bolts.split.parallelism=3"]);
    let out = cmd.output();
    out.assert_code(0);
    let json: Value = serde_json::from_str(&out.stdout).expect("graph --format json is JSON");
    assert_eq!(json["name"], "wordcount-backoff");
    assert_eq!(json["wait"]["spout"]["strategy"], "extra::ExponentialBackoff");
    assert_eq!(json["wait"]["backpressure"]["strategy"], "progressive");
    let components = json["components"].as_array().expect("components");
    let summary: Vec<(&str, &str, u64)> = components
        .iter()
        .map(|c| {
            let kind = c["kind"].as_str().unwrap_or_default();
            (c["name"].as_str().unwrap_or_default(), kind, c["parallelism"].as_u64().unwrap_or(0))
        })
        .collect();
    assert_eq!(summary, [("sentences", "spout", 1), ("split", "bolt", 3), ("count", "bolt", 2)]);
    assert_eq!(components[2]["component"], "examples::WordCount");
    assert_eq!(components[2]["wait"]["bolt"]["strategy"], "park");
    assert_eq!(components[2]["wait"]["bolt"]["park_micros"], 100);
    let edges = json["edges"].as_array().expect("edges");
    assert_eq!(edges.len(), 2);
    assert_eq!(edges[1]["from"], "split");
    assert_eq!(edges[1]["to"], "count");
    assert_eq!(edges[1]["stream"], "default");
    assert_eq!(edges[1]["grouping"], "fields");
    assert_eq!(edges[1]["fields"], serde_json::json!(["word"]));
}

#[test]
fn graph_of_an_invalid_topology_exits_78() {
    let ws = Workspace::new("graph_invalid");
    let topology = ws.write("bad.toml", "[spouts.s]\ncomponent = \"x\"\n");
    let mut cmd = SquallCommand::new(&ws, ["graph"]);
    cmd.arg(&topology);
    let out = cmd.output();
    out.assert_code(78);
    assert!(out.stdout.is_empty(), "\n{}", out.context());
}
