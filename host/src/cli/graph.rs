//! `squall graph TOPOLOGY`: the topology as a Graphviz DOT graph, or the same
//! information as JSON (`--format json`).
//!
//! Everything comes from the checked TOML ([`TopologyConfig`]): no plugin
//! library is loaded, so it works before the plugins are built and never
//! runs plugin code. The flip side: whether each component, stream and
//! field exists in its plugin is not checked (`squall validate` does that).
//!
//! A node is a spout or bolt with its `alias::Component` and parallelism,
//! and its own wait strategies when it overrides the topology's; an edge is
//! an input, labelled with its grouping and, when it is not `default`, its
//! stream; an edge the host runs chained (both ends on one thread, see
//! `config::chain`) is drawn bold and says so. The graph's label gives the
//! topology's wait strategies.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use serde_json::{json, Value as Json};

use super::args::GraphFormat;
use super::Failure;
use crate::config::defaults::DEFAULT_STREAM;
use crate::config::{
    ComponentDecl, ComponentRef, GroupingSpec, InputDecl, Override, TopologyConfig, WaitOverrides,
    WaitSpec,
};

/// Prints the graph of the topology at `path` (with `sets` applied).
pub fn graph(path: &Path, sets: &[Override], format: GraphFormat) -> Result<(), Failure> {
    let config = crate::config::load_with(path, sets).map_err(Failure::Config)?;
    let text = match format {
        GraphFormat::Dot => dot(&config),
        GraphFormat::Json => {
            let mut text = serde_json::to_string_pretty(&to_json(&config))
                .map_err(|e| Failure::Other(e.into()))?;
            text.push('\n');
            text
        }
    };
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// The topology as a DOT digraph.
pub(crate) fn dot(config: &TopologyConfig) -> String {
    let mut out = format!("digraph {} {{\n", quote(&config.name));
    let wait = &config.wait;
    let label = format!(
        "{}\nwait: spout {}, bolt {}, backpressure {}",
        config.name,
        wait_label(&wait.spout),
        wait_label(&wait.bolt),
        wait_label(&wait.backpressure)
    );
    let _ = writeln!(
        out,
        "  graph [rankdir=LR, labelloc=t, fontname=Helvetica, label={}];",
        quote(&label)
    );
    out.push_str("  node [shape=box, fontname=Helvetica];\n");
    out.push_str("  edge [fontname=Helvetica, fontsize=10];\n");
    for spout in &config.spouts {
        let label = node_label(&spout.decl, "spout");
        let style = "style=\"rounded,filled\", fillcolor=\"#dbeafe\"";
        let _ = writeln!(out, "  {} [{style}, label={}];", quote(&spout.decl.name), quote(&label));
    }
    for bolt in &config.bolts {
        let label = node_label(&bolt.decl, "bolt");
        let _ = writeln!(out, "  {} [label={}];", quote(&bolt.decl.name), quote(&label));
    }
    let chained = chained_bolts(config);
    for (i, bolt) in config.bolts.iter().enumerate() {
        for input in &bolt.inputs {
            let (label, style) = if chained[i] {
                (format!("{}\nchained", edge_label(input)), ", style=bold, color=\"#2563eb\"")
            } else {
                (edge_label(input), "")
            };
            let _ = writeln!(
                out,
                "  {} -> {} [label={}{style}];",
                quote(&input.from),
                quote(&bolt.decl.name),
                quote(&label)
            );
        }
    }
    out.push_str("}\n");
    out
}

/// For each bolt, in file order: whether it runs chained to its upstream
/// (`config::chain`), as the host will run it.
fn chained_bolts(config: &TopologyConfig) -> Vec<bool> {
    let mut chained = vec![false; config.bolts.len()];
    for link in crate::config::chain::links(config) {
        chained[link.bolt] = true;
    }
    chained
}

/// A node's lines: name, kind and component, parallelism, wait overrides.
fn node_label(decl: &ComponentDecl, kind: &str) -> String {
    let ComponentDecl { name, component, parallelism, wait, .. } = decl;
    let mut label = format!("{name}\n{kind} {}\nparallelism {parallelism}", reference(component));
    for (situation, spec) in wait_overrides(wait) {
        let _ = write!(label, "\nwait.{situation}: {}", wait_label(spec));
    }
    label
}

/// The grouping, after the stream when it is not the default one.
fn edge_label(input: &InputDecl) -> String {
    let grouping = match &input.grouping {
        GroupingSpec::Fields(fields) => {
            let names: Vec<&str> = fields.iter().map(|(f, _)| f.as_str()).collect();
            format!("fields({})", names.join(", "))
        }
        GroupingSpec::Custom { component, .. } => format!("custom({})", reference(component)),
        other => other.name().to_string(),
    };
    if input.stream == DEFAULT_STREAM {
        grouping
    } else {
        format!("{}: {grouping}", input.stream)
    }
}

/// A wait strategy in a few words: `progressive 0/0/1ms`, `park 100us`, or
/// the plugin strategy's `alias::Component`.
fn wait_label(spec: &WaitSpec) -> String {
    match spec {
        WaitSpec::Progressive {
            level1_count,
            level2_count,
            level3_sleep_millis,
            level3_max_sleep_millis,
            spin_micros,
        } => {
            let mut label =
                format!("progressive {level1_count}/{level2_count}/{level3_sleep_millis}ms");
            if level3_max_sleep_millis > level3_sleep_millis {
                label.push_str(&format!(" up to {level3_max_sleep_millis}ms"));
            }
            if *spin_micros > 0 {
                label.push_str(&format!(" after a {spin_micros}us spin"));
            }
            label
        }
        WaitSpec::Park { park_micros } => format!("park {park_micros}us"),
        WaitSpec::Plugin { component, .. } => reference(component),
    }
}

/// The situations a component overrides, with their strategies.
fn wait_overrides(wait: &WaitOverrides) -> Vec<(&'static str, &WaitSpec)> {
    [("spout", &wait.spout), ("bolt", &wait.bolt), ("backpressure", &wait.backpressure)]
        .into_iter()
        .filter_map(|(situation, spec)| spec.as_ref().map(|s| (situation, s)))
        .collect()
}

fn reference(component: &ComponentRef) -> String {
    format!("{}::{}", component.alias, component.component)
}

/// A DOT quoted string. Backslashes are doubled (so `\l`, `\N` and the like
/// mean nothing), a newline becomes a `\n` line break, and other control
/// characters are written as `\u{..}` text.
fn quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {
                let _ = write!(out, "\\\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The same information as [`dot`], as JSON.
pub(crate) fn to_json(config: &TopologyConfig) -> Json {
    let spouts = config.spouts.iter().map(|s| component_json(&s.decl, "spout"));
    let bolts = config.bolts.iter().map(|b| component_json(&b.decl, "bolt"));
    let chained = chained_bolts(config);
    let edges: Vec<Json> = config
        .bolts
        .iter()
        .zip(chained)
        .flat_map(|(b, chained)| b.inputs.iter().map(move |i| edge_json(&b.decl.name, i, chained)))
        .collect();
    json!({
        "name": config.name,
        "file": config.file.display().to_string(),
        "wait": {
            "spout": wait_json(&config.wait.spout),
            "bolt": wait_json(&config.wait.bolt),
            "backpressure": wait_json(&config.wait.backpressure),
        },
        "components": spouts.chain(bolts).collect::<Vec<_>>(),
        "edges": edges,
    })
}

fn component_json(decl: &ComponentDecl, kind: &str) -> Json {
    let ComponentDecl { name, component, parallelism, wait, .. } = decl;
    let wait: serde_json::Map<String, Json> = wait_overrides(wait)
        .into_iter()
        .map(|(s, spec)| (s.to_string(), wait_json(spec)))
        .collect();
    json!({
        "name": name,
        "kind": kind,
        "component": reference(component),
        "parallelism": parallelism,
        "wait": wait,
    })
}

fn edge_json(to: &str, input: &InputDecl, chained: bool) -> Json {
    let mut edge = json!({
        "from": input.from,
        "to": to,
        "stream": input.stream,
        "grouping": input.grouping.name(),
        "chained": chained,
    });
    if let GroupingSpec::Fields(fields) = &input.grouping {
        edge["fields"] = fields.iter().map(|(f, _)| f.as_str()).collect();
    }
    edge
}

fn wait_json(spec: &WaitSpec) -> Json {
    match spec {
        WaitSpec::Progressive {
            level1_count,
            level2_count,
            level3_sleep_millis,
            level3_max_sleep_millis,
            spin_micros,
        } => json!({
            "strategy": "progressive",
            "level1_count": level1_count,
            "level2_count": level2_count,
            "level3_sleep_millis": level3_sleep_millis,
            "level3_max_sleep_millis": level3_max_sleep_millis,
            "spin_micros": spin_micros,
        }),
        WaitSpec::Park { park_micros } => json!({ "strategy": "park", "park_micros": park_micros }),
        WaitSpec::Plugin { component, config, .. } => json!({
            "strategy": reference(component),
            "config": config,
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const TOPOLOGY: &str = r#"
[plugins]
ex = "libex.so"
extra = "libextra.so"

[wait.spout]
strategy = "park"
park_micros = 50

[spouts.src]
component = "ex::Spout"
parallelism = 2

[bolts.split]
component = "ex::Split"
parallelism = 3
inputs = [{ from = "src" }]
wait.bolt = { strategy = "extra::Backoff", max = 5 }

[bolts.count]
component = "ex::Count"
inputs = [{ from = "split", stream = "words", grouping = { fields = ["word", "n"] } }]
"#;

    fn config() -> TopologyConfig {
        crate::config::parse_str_with_env(TOPOLOGY, Path::new("g.toml"), &|_| None)
            .expect("valid topology")
    }

    #[test]
    fn dot_has_every_node_edge_and_wait_strategy() {
        let dot = dot(&config());
        assert!(dot.starts_with("digraph \"g\" {\n"), "{dot}");
        assert!(dot.contains("wait: spout park 50us, bolt progressive 1/1000/1ms"), "{dot}");
        assert!(dot.contains("\"src\" [style"), "{dot}");
        assert!(dot.contains("src\\nspout ex::Spout\\nparallelism 2"), "{dot}");
        assert!(dot.contains("parallelism 3\\nwait.bolt: extra::Backoff\""), "{dot}");
        assert!(dot.contains("\"src\" -> \"split\" [label=\"shuffle\"];"), "{dot}");
        assert!(
            dot.contains("\"split\" -> \"count\" [label=\"words: fields(word, n)\"];"),
            "{dot}"
        );
        assert!(dot.ends_with("}\n"));
    }

    #[test]
    fn json_carries_the_same_information() {
        let json = to_json(&config());
        assert_eq!(json["name"], "g");
        assert_eq!(json["wait"]["spout"], json!({ "strategy": "park", "park_micros": 50 }));
        let components = json["components"].as_array().expect("components");
        let names: Vec<&str> = components.iter().filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(names, ["src", "split", "count"]);
        assert_eq!(components[0]["kind"], "spout");
        assert_eq!(components[1]["parallelism"], 3);
        assert_eq!(components[1]["wait"]["bolt"]["strategy"], "extra::Backoff");
        assert_eq!(components[1]["wait"]["bolt"]["config"], "max = 5\n");
        assert_eq!(json["edges"][1]["stream"], "words");
        assert_eq!(json["edges"][1]["grouping"], "fields");
        assert_eq!(json["edges"][1]["fields"], json!(["word", "n"]));
    }

    #[test]
    fn quoting_keeps_dot_strings_closed() {
        assert_eq!(quote("a\"b\\c\nd"), "\"a\\\"b\\\\c\\nd\"");
        assert_eq!(quote("x\u{1b}"), "\"x\\\\u{1b}\"");
    }
}
