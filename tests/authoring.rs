//! Plugin authoring, contract 1.1.
//!
//! Outputs declared from config: `examples::Project` emits the fields its
//! config lists. `squall validate` checks what subscribes to it against
//! those fields, and what it subscribes to against its list; `squall
//! inspect` says its streams come from its config; `squall run` emits the
//! projection.
//!
//! Declared config keys: every library shipped with squall declares the
//! keys of every component (the connectors' own tests check theirs).

use crate::util::{loc_of, plugin_path, read_records, SquallCommand, Workspace};

/// EX_CONFIG: the topology file is invalid.
const EXIT_CONFIG: i32 = 78;

/// The prefix of the diagnostic for the first occurrence of `needle` in `text`.
fn at(file: &std::path::Path, text: &str, needle: &str) -> String {
    let (line, col) = loc_of(text, needle);
    format!("{}:{line}:{col}: error: ", file.display())
}

/// Word count, then `Project` with `fields`, then a NullBolt grouped by
/// `grouping`.
fn topology(fields: &str, grouping: &str) -> String {
    format!(
        r#"
[plugins]
examples = "{{examples}}"
testkit = "{{testkit}}"

[spouts.sentences]
component = "examples::RandomSentenceSpout"

[bolts.split]
component = "examples::SplitSentence"
inputs = [{{ from = "sentences" }}]

[bolts.counter]
component = "examples::WordCount"
inputs = [{{ from = "split", grouping = {{ fields = ["word"] }} }}]

[bolts.project]
component = "examples::Project"
config = {{ fields = {fields} }}
inputs = [{{ from = "counter" }}]

[bolts.sink]
component = "testkit::NullBolt"
parallelism = 2
inputs = [{{ from = "project", grouping = {{ fields = {grouping} }} }}]
"#
    )
}

#[test]
fn a_fields_grouping_on_a_projected_field_validates() {
    let ws = Workspace::new("project_valid");
    let text = topology(r#"["count", "word"]"#, r#"["word"]"#);
    let path = ws.write_topology("project.toml", &text);
    let out = SquallCommand::validate(&ws, &path).output();
    out.assert_code(0);
    assert!(out.stdout.contains("is valid (5 components, 6 tasks"), "\n{}", out.context());
    // The grouping's field is the second of the projection's stream.
    assert!(out.stdout.contains("project --default:fields(word)--> sink"), "\n{}", out.context());
}

#[test]
fn a_fields_grouping_on_a_dropped_field_is_refused_where_it_is_written() {
    let ws = Workspace::new("project_dropped");
    let text = topology(r#"["word"]"#, r#"["count"]"#);
    let path = ws.write_topology("project.toml", &text);
    let out = SquallCommand::validate(&ws, &path).output();
    out.assert_code(EXIT_CONFIG);
    let lines = out.error_lines();
    assert_eq!(lines.len(), 1, "\n{}", out.context());
    assert!(lines[0].starts_with(&at(&path, &text, "\"count\"")), "{}", out.context());
    assert!(
        lines[0].contains(
            "fields grouping on \"count\", but stream \"default\" of \"project\" has fields [word]"
        ),
        "{}",
        out.context()
    );
}

#[test]
fn a_listed_field_the_input_does_not_have_is_refused_at_the_bolt() {
    let ws = Workspace::new("project_missing");
    let text = topology(r#"["word", "rank"]"#, r#"["word"]"#);
    let path = ws.write_topology("project.toml", &text);
    let out = SquallCommand::validate(&ws, &path).output();
    out.assert_code(EXIT_CONFIG);
    let lines = out.error_lines();
    assert_eq!(lines.len(), 1, "\n{}", out.context());
    assert!(lines[0].starts_with(&at(&path, &text, "project]")), "{}", out.context());
    assert!(
        lines[0].contains(
            "bolt \"project\" (examples::Project) refuses its inputs: input from \"counter\" \
             (stream \"default\") has no field \"rank\"; it has: word, count"
        ),
        "{}",
        out.context()
    );
}

#[test]
fn a_bad_field_list_is_reported_once_at_the_component() {
    let ws = Workspace::new("project_bad_list");
    for (fields, message, needle) in [
        (
            "[]",
            "examples::Project refused its config while declaring its outputs: fields is empty; \
             list the input fields to keep",
            "\"examples::Project\"",
        ),
        (
            r#"["word", "word"]"#,
            "examples::Project refused its config while declaring its outputs: fields lists \
             \"word\" twice",
            "\"examples::Project\"",
        ),
        // A string, not a list: the declared key's type, before the plugin
        // sees the config.
        (
            r#""word""#,
            "config key \"fields\" of examples::Project must be an array, not a string",
            r#"fields = "word""#,
        ),
    ] {
        let text = topology(fields, r#"["word"]"#);
        let path = ws.write_topology("project.toml", &text);
        let out = SquallCommand::validate(&ws, &path).output();
        out.assert_code(EXIT_CONFIG);
        let lines = out.error_lines();
        assert_eq!(lines.len(), 1, "{fields}\n{}", out.context());
        assert!(lines[0].starts_with(&at(&path, &text, needle)), "{fields}\n{}", out.context());
        assert!(lines[0].contains(message), "{fields}\n{}", out.context());
    }
}

#[test]
fn inspect_says_the_projections_streams_come_from_its_config() {
    let ws = Workspace::new("project_inspect");
    let out = SquallCommand::inspect(&ws, &plugin_path("examples")).output();
    out.assert_code(0);
    let lines: Vec<&str> = out.stdout.lines().map(str::trim).collect();
    let at = lines.iter().position(|l| l.starts_with("bolt") && l.contains(" Project")).unwrap();
    let project: Vec<&str> =
        lines[at + 1..].iter().take_while(|l| !l.starts_with("bolt ")).copied().collect();
    assert!(
        project
            .contains(&"streams: declared from its config (without one: missing field `fields`)"),
        "{}",
        out.context()
    );
    let key = project.iter().find(|l| l.starts_with("fields ")).expect("its key");
    assert_eq!(key.split_whitespace().take(3).collect::<Vec<_>>(), ["fields", "array", "required"]);
}

#[test]
fn run_emits_the_listed_fields_in_the_listed_order() {
    let ws = Workspace::new("project_run");
    let text = r#"
[plugins]
examples = "{examples}"
testkit = "{testkit}"

[spouts.sentences]
component = "examples::RandomSentenceSpout"
config = { order = "cycle", sentences = ["b a b"], limit = 1 }

[bolts.split]
component = "examples::SplitSentence"
inputs = [{ from = "sentences" }]

[bolts.counter]
component = "examples::WordCount"
inputs = [{ from = "split", grouping = { fields = ["word"] } }]

[bolts.project]
component = "examples::Project"
config = { fields = ["count", "word"] }
inputs = [{ from = "counter" }]

[bolts.sink]
component = "testkit::RecordBolt"
config = { out = "{dir}/sink" }
inputs = [{ from = "project" }]
"#;
    let path = ws.write_topology("project.toml", text);
    let out = SquallCommand::run(&ws, &path, "2s").output();
    out.assert_code(0);
    let records = read_records(&ws, "sink", 1, &out);
    let report = records.values().next().expect("one report");
    // RecordBolt keys tuples by their first value: the running counts.
    assert_eq!(report.keys.get("1"), Some(&2), "\n{}", out.context());
    assert_eq!(report.keys.get("2"), Some(&1), "\n{}", out.context());
}

#[test]
fn every_shipped_component_declares_its_config_keys() {
    let ws = Workspace::new("declared_keys");
    for library in ["examples", "testkit", "files", "wait-extra", "kafka"] {
        let out = SquallCommand::inspect(&ws, &plugin_path(library)).output();
        out.assert_code(0);
        let components =
            out.stdout.lines().filter(|l| l.starts_with("  ") && !l.starts_with("   ")).count();
        let declared = out
            .stdout
            .lines()
            .map(str::trim)
            .filter(|l| *l == "config keys:" || *l == "config keys: none")
            .count();
        assert!(components > 0, "{library}: no components listed\n{}", out.context());
        assert_eq!(declared, components, "{library}: every component declares\n{}", out.context());
        assert!(!out.stdout.contains("not declared"), "{library}\n{}", out.context());
    }
}

#[test]
fn inspect_lists_the_late_stream_the_host_adds_to_a_windowed_bolt() {
    let ws = Workspace::new("inspect_late");
    let out = SquallCommand::inspect(&ws, &plugin_path("testkit")).output();
    out.assert_code(0);
    let lines: Vec<&str> = out.stdout.lines().map(str::trim).collect();
    let at = lines.iter().position(|l| l.contains("WindowSizeBolt")).expect("the windowed bolt");
    let rest: Vec<&str> = lines[at + 1..]
        .iter()
        .take_while(|l| !l.starts_with("bolt ") && !l.starts_with("spout "))
        .copied()
        .collect();
    assert!(
        rest.iter().any(|l| l.starts_with("stream late ")),
        "no late stream: {rest:?}\n{}",
        out.context()
    );
}
