//! `squall validate`: every mistake in a topology is reported at once, each as
//! `<file>:<line>:<col>: error: …` with a "did you mean" where one is close,
//! and the exit code is 78 (EX_CONFIG).

use crate::util::{loc_of, release_dir, workspace_root, Output, SquallCommand, Workspace};

/// EX_CONFIG: the topology file is invalid.
const EXIT_CONFIG: i32 = 78;

/// The stderr lines that report an error at `<file>:<line>:<col>`.
fn diagnostics(out: &Output) -> Vec<&str> {
    out.stderr.lines().filter(|l| l.contains(": error: ")).collect()
}

/// The prefix of the diagnostic for the first occurrence of `needle` in `text`.
fn at(file: &std::path::Path, text: &str, needle: &str) -> String {
    let (line, col) = loc_of(text, needle);
    format!("{}:{line}:{col}: error: ", file.display())
}

#[test]
fn three_mistakes_are_all_reported_with_their_file_line_and_column() {
    let ws = Workspace::new("three_mistakes");
    let text = r#"
[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::ConstSpout"

[bolts.sink]
component = "testkit::NullBolt"
paralelism = 2
inputs = [{ from = "source" }]

[bolts.other]
component = "nosuch::NullBolt"
inputs = [{ from = "sourse" }]
"#;
    let topology = ws.write_topology("three.toml", text);
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    assert_eq!(lines.len(), 3, "all three mistakes at once\n{}", out.context());
    let expected = [
        (at(&topology, text, "paralelism"), "did you mean \"parallelism\""),
        (at(&topology, text, "\"nosuch::NullBolt\""), "nosuch"),
        (at(&topology, text, "\"sourse\""), "did you mean \"source\""),
    ];
    for (line, (position, mention)) in lines.iter().zip(&expected) {
        assert!(line.starts_with(position.as_str()), "expected {position}…\n{}", out.context());
        assert!(line.contains(mention), "expected {mention:?} in {line}\n{}", out.context());
    }
}

#[test]
fn bad_toml_syntax_is_reported_with_its_position() {
    let ws = Workspace::new("bad_syntax");
    let topology = ws.write("bad.toml", "[topology]\nname = \"unterminated\n");
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    assert_eq!(lines.len(), 1, "\n{}", out.context());
    let prefix = format!("{}:2:", topology.display());
    assert!(lines[0].starts_with(&prefix), "the error is on line 2\n{}", out.context());
    assert!(lines[0].contains("invalid TOML"), "\n{}", out.context());
}

#[test]
fn an_unknown_key_is_reported_with_a_did_you_mean() {
    let ws = Workspace::new("unknown_key");
    let text = r#"
[topology]
mesage_timeout_secs = 10

[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::ConstSpout"
"#;
    let topology = ws.write_topology("key.toml", text);
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    assert_eq!(lines.len(), 1, "\n{}", out.context());
    assert!(lines[0].starts_with(&at(&topology, text, "mesage_timeout_secs")), "{}", out.context());
    assert!(lines[0].contains("did you mean \"message_timeout_secs\""), "{}", out.context());
}

#[test]
fn a_fields_grouping_on_an_undeclared_field_is_reported_with_a_did_you_mean() {
    let ws = Workspace::new("undeclared_field");
    let text = r#"
[plugins]
examples = "{examples}"

[spouts.sentences]
component = "examples::RandomSentenceSpout"

[bolts.split]
component = "examples::SplitSentence"
inputs = [{ from = "sentences" }]

[bolts.count]
component = "examples::WordCount"
inputs = [{ from = "split", grouping = { fields = ["wrod"] } }]
"#;
    let topology = ws.write_topology("fields.toml", text);
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    assert_eq!(lines.len(), 1, "\n{}", out.context());
    assert!(lines[0].starts_with(&at(&topology, text, "\"wrod\"")), "{}", out.context());
    assert!(lines[0].contains("did you mean \"word\""), "{}", out.context());
}

#[test]
fn a_valid_topology_validates_with_exit_0() {
    let ws = Workspace::new("valid");
    let topology = ws.write_topology(
        "valid.toml",
        r#"
[plugins]
examples = "{examples}"

[spouts.sentences]
component = "examples::RandomSentenceSpout"

[bolts.split]
component = "examples::SplitSentence"
parallelism = 2
inputs = [{ from = "sentences" }]

[bolts.count]
component = "examples::WordCount"
parallelism = 2
inputs = [{ from = "split", grouping = { fields = ["word"] } }]
"#,
    );
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(0);
    assert!(out.stdout.contains("is valid (3 components, 5 tasks"), "\n{}", out.context());
    assert!(out.error_lines().is_empty(), "\n{}", out.context());
}

#[test]
fn every_shipped_topology_validates() {
    let ws = Workspace::new("shipped_topologies");
    let mut files = Vec::new();
    for dir in ["topologies", "topologies/perf", "topologies/nexmark"] {
        for entry in std::fs::read_dir(workspace_root().join(dir)).expect("topologies dir") {
            let path = entry.expect("dir entry").path();
            if path.extension().is_some_and(|e| e == "toml") {
                files.push(path);
            }
        }
    }
    assert!(files.len() >= 9, "the shipped topologies were found: {files:?}");
    for topology in files {
        let mut cmd = SquallCommand::validate(&ws, &topology);
        // From the repository root, as the README runs them: a topology may
        // name an input file relative to it (files-wordcount.toml reads README.md).
        cmd.env("SQUALL_PLUGIN_DIR", release_dir()).current_dir(workspace_root());
        cmd.output().assert_code(0);
    }
}

#[test]
fn plugin_paths_interpolate_environment_variables_with_defaults() {
    let ws = Workspace::new("interpolation");
    let topology = ws.write_topology(
        "env.toml",
        r#"
[plugins]
testkit = "${SQUALL_E2E_PLUGINS:-/nonexistent/squall-e2e}/libsquall_testkit.so"

[spouts.source]
component = "testkit::ConstSpout"

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{ from = "source" }]
"#,
    );
    let mut set = SquallCommand::validate(&ws, &topology);
    set.env("SQUALL_E2E_PLUGINS", release_dir());
    set.output().assert_code(0);

    // Unset, the default applies: the path it names does not exist.
    let mut unset = SquallCommand::validate(&ws, &topology);
    unset.env_remove("SQUALL_E2E_PLUGINS");
    let out = unset.output();
    out.assert_code(69);
    assert!(
        out.single_error_line().contains("/nonexistent/squall-e2e/libsquall_testkit.so"),
        "the default was used\n{}",
        out.context()
    );
}

#[test]
fn an_unknown_plugin_wait_strategy_is_reported_once() {
    let ws = Workspace::new("unknown_wait_strategy");
    let text = r#"
[plugins]
testkit = "{testkit}"
extra = "{wait_extra}"

[wait.spout]
strategy = "extra::ExponentialBackof"

[spouts.source]
component = "testkit::ConstSpout"

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{ from = "source" }]
"#;
    let topology = ws.write_topology("wait.toml", text);
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    // One mistake, one line: not one copy per component that inherits the default.
    assert_eq!(lines.len(), 1, "\n{}", out.context());
    assert!(
        lines[0].starts_with(&at(&topology, text, "\"extra::ExponentialBackof\"")),
        "{}",
        out.context()
    );
    assert!(lines[0].contains("did you mean \"extra::ExponentialBackoff\""), "{}", out.context());
}

#[test]
fn a_bad_component_config_is_reported_in_one_line_that_names_the_key() {
    let ws = Workspace::new("bad_component_config");
    let topology = ws.write_topology(
        "config.toml",
        r#"
[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::ConstSpout"
config = { per_call = -1 }

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{ from = "source" }]
"#,
    );
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(78);
    let line = out.single_error_line();
    assert!(
        line.contains("config.toml:5:"),
        "the error points at the component's table\n{}",
        out.context()
    );
    assert!(line.contains("\"source\""), "the component is named\n{}", out.context());
    assert!(line.contains("per_call"), "the error line names the bad key\n{}", out.context());
    let others: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !out.error_lines().contains(l))
        .collect();
    assert!(
        others.is_empty(),
        "the error takes one line, not {}\n{}",
        others.len() + 1,
        out.context()
    );
}

#[test]
fn a_config_key_typo_is_reported_with_a_did_you_mean_before_any_constructor_runs() {
    let ws = Workspace::new("config_key_typo");
    let log = ws.path("events.log");
    // LifecycleSpout's constructor appends "spout:? new" to its log.
    let text = r#"
[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::LifecycleSpout"
config = { log = "{dir}/events.log", limt = 3 }

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{ from = "source" }]
"#;
    let topology = ws.write_topology("typo.toml", text);
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    assert_eq!(lines.len(), 1, "\n{}", out.context());
    // `{dir}` on the same line moves the column: find it in the written text.
    assert!(lines[0].starts_with(&at(&topology, &ws.fill(text), "limt")), "{}", out.context());
    assert!(
        lines[0].contains("unknown config key \"limt\" for testkit::LifecycleSpout"),
        "{}",
        out.context()
    );
    assert!(lines[0].contains("did you mean \"limit\"?"), "{}", out.context());
    assert!(!log.exists(), "the constructor ran before the check\n{}", out.context());

    // The same topology without the typo: validate builds the spout, whose
    // constructor writes its log (so the check above can tell).
    let fixed = ws.write_topology("fixed.toml", &text.replace("limt", "limit"));
    SquallCommand::validate(&ws, &fixed).output().assert_code(0);
    assert_eq!(ws.read("events.log"), "spout:? new\n");
}

#[test]
fn a_wrong_typed_and_a_missing_required_config_key_are_reported() {
    let ws = Workspace::new("config_key_types");
    let text = r#"
[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::ConstSpout"
config = { per_call = "64" }

[bolts.sink]
component = "testkit::RecordBolt"
inputs = [{ from = "source" }]
"#;
    let topology = ws.write_topology("types.toml", text);
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    assert_eq!(lines.len(), 2, "\n{}", out.context());
    let wrong_type = lines.iter().find(|l| l.contains("per_call")).expect("per_call reported");
    assert!(wrong_type.starts_with(&at(&topology, text, "per_call")), "{}", out.context());
    assert!(
        wrong_type.contains(
            "config key \"per_call\" of testkit::ConstSpout must be an integer, not a string"
        ),
        "{}",
        out.context()
    );
    let missing = lines.iter().find(|l| l.contains("\"out\"")).expect("out reported");
    assert!(missing.starts_with(&at(&topology, text, "sink]")), "{}", out.context());
    assert!(
        missing.contains("testkit::RecordBolt needs config key \"out\" (string)"),
        "{}",
        out.context()
    );
    assert!(out.stderr.contains("path prefix of the per-task report"), "{}", out.context());
}

#[test]
fn a_bolt_whose_input_lacks_its_declared_fields_is_reported() {
    let ws = Workspace::new("input_fields");
    let text = r#"
[plugins]
testkit = "{testkit}"
examples = "{examples}"

[spouts.source]
component = "testkit::ConstSpout"

[bolts.count]
component = "examples::WordCount"
inputs = [{ from = "source", grouping = "global" }]
"#;
    let topology = ws.write_topology("fields.toml", text);
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    assert_eq!(lines.len(), 1, "\n{}", out.context());
    assert!(
        lines[0].starts_with(&at(&topology, text, "\"source\", grouping")),
        "{}",
        out.context()
    );
    assert!(
        lines[0].contains(
            "bolt \"count\" (examples::WordCount) needs field(s) word on its inputs, \
             but stream \"default\" of \"source\" has: value"
        ),
        "{}",
        out.context()
    );
}

#[test]
fn word_count_refuses_a_shuffled_input_when_it_has_several_tasks() {
    let ws = Workspace::new("check_inputs");
    let text = r#"
[plugins]
examples = "{examples}"

[spouts.sentences]
component = "examples::RandomSentenceSpout"

[bolts.split]
component = "examples::SplitSentence"
inputs = [{ from = "sentences" }]

[bolts.count]
component = "examples::WordCount"
parallelism = 2
inputs = [{ from = "split", grouping = "shuffle" }]
"#;
    let topology = ws.write_topology("shuffle.toml", text);
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    assert_eq!(lines.len(), 1, "\n{}", out.context());
    assert!(lines[0].starts_with(&at(&topology, text, "count]")), "{}", out.context());
    assert!(
        lines[0].contains(
            "bolt \"count\" (examples::WordCount) refuses its inputs: input from \"split\" \
             uses grouping \"shuffle\"; counting needs grouping = { fields = [\"word\"] }"
        ),
        "{}",
        out.context()
    );
}

#[test]
fn a_plugin_wait_strategy_table_is_checked_against_its_declared_keys() {
    let ws = Workspace::new("wait_keys");
    let text = r#"
[plugins]
testkit = "{testkit}"
extra = "{wait_extra}"

[wait.backpressure]
strategy = "extra::ExponentialBackoff"
max_sleep_micro = 500
spin_count = "ten"

[spouts.source]
component = "testkit::ConstSpout"

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{ from = "source" }]
"#;
    let topology = ws.write_topology("wait.toml", text);
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(EXIT_CONFIG);
    // Both components inherit the table: each mistake is still reported once.
    let lines = diagnostics(&out);
    assert_eq!(lines.len(), 2, "\n{}", out.context());
    assert!(lines[0].starts_with(&at(&topology, text, "max_sleep_micro ")), "{}", out.context());
    assert!(
        lines[0].contains("unknown config key \"max_sleep_micro\" for extra::ExponentialBackoff"),
        "{}",
        out.context()
    );
    assert!(lines[0].contains("did you mean \"max_sleep_micros\"?"), "{}", out.context());
    assert!(lines[1].starts_with(&at(&topology, text, "spin_count")), "{}", out.context());
    assert!(lines[1].contains("must be an integer, not a string"), "{}", out.context());
}

#[test]
fn a_custom_grouping_that_does_not_exist_or_gets_a_bad_config_key_is_reported_where_it_is_written()
{
    let ws = Workspace::new("custom_grouping");
    let text = r#"
[plugins]
examples = "{examples}"
testkit = "{testkit}"

[spouts.sentences]
component = "examples::RandomSentenceSpout"

[bolts.split]
component = "examples::SplitSentence"
inputs = [{ from = "sentences" }]

[bolts.a]
component = "testkit::NullBolt"
inputs = [{ from = "split", grouping = { custom = "examples::PartialKeyGroupin" } }]

[bolts.b]
component = "testkit::NullBolt"
inputs = [{ from = "split", grouping = { custom = "examples::PartialKeyGrouping", config = { field = ["word"] } } }]
"#;
    let topology = ws.write_topology("custom.toml", text);
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    assert_eq!(lines.len(), 3, "\n{}", out.context());
    assert!(
        lines[0].starts_with(&at(&topology, text, "\"examples::PartialKeyGroupin\"")),
        "{}",
        out.context()
    );
    assert!(lines[0].contains("exports no custom grouping"), "{}", out.context());
    // The config typo, with a did-you-mean, and the required key left out
    // (reported at the grouping's name).
    let typo = lines.iter().find(|l| l.contains("unknown config key \"field\"")).expect("the typo");
    assert!(typo.starts_with(&at(&topology, text, "field = [")), "{}", out.context());
    assert!(typo.contains("did you mean \"fields\""), "{}", out.context());
    let missing =
        lines.iter().find(|l| l.contains("needs config key \"fields\"")).expect("missing");
    assert!(
        missing.starts_with(&at(&topology, text, "\"examples::PartialKeyGrouping\"")),
        "{}",
        out.context()
    );
}

#[test]
fn a_grouping_whose_prepare_fails_is_reported_where_it_is_written() {
    let ws = Workspace::new("grouping_prepare");
    let text = r#"
[plugins]
examples = "{examples}"
testkit = "{testkit}"

[spouts.sentences]
component = "examples::RandomSentenceSpout"

[bolts.split]
component = "examples::SplitSentence"
inputs = [{ from = "sentences" }]

[bolts.a]
component = "testkit::NullBolt"
inputs = [{ from = "split", grouping = { custom = "examples::PartialKeyGrouping", config = { fields = ["nope"] } } }]
"#;
    let topology = ws.write_topology("prepare.toml", text);
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    assert_eq!(lines.len(), 1, "\n{}", out.context());
    assert!(
        lines[0].starts_with(&at(&topology, text, "\"examples::PartialKeyGrouping\"")),
        "{}",
        out.context()
    );
    assert!(lines[0].contains("has no field \"nope\""), "{}", out.context());
}

#[test]
fn the_summary_names_groupings_as_the_topology_file_writes_them() {
    let ws = Workspace::new("summary_groupings");
    let text = r#"
[plugins]
examples = "{examples}"
testkit = "{testkit}"

[spouts.sentences]
component = "examples::RandomSentenceSpout"

[bolts.split]
component = "examples::SplitSentence"
inputs = [{ from = "sentences" }]

[bolts.a]
component = "testkit::NullBolt"
inputs = [{ from = "split", grouping = { custom = "examples::PartialKeyGrouping", config = { fields = ["word"] } } }]

[bolts.b]
component = "testkit::NullBolt"
inputs = [{ from = "split", grouping = { fields = ["word"] } }]
"#;
    let topology = ws.write_topology("summary.toml", text);
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(0);
    assert!(!out.stdout.contains("CustomGrouping"), "Rust debug output\n{}", out.context());
    assert!(
        out.stdout.contains("split --default:custom(examples::PartialKeyGrouping)--> a"),
        "{}",
        out.context()
    );
    assert!(out.stdout.contains("split --default:fields(word)--> b"), "{}", out.context());
    assert!(out.stdout.contains("sentences --default:shuffle--> split"), "{}", out.context());
}

#[test]
fn a_field_mistake_is_reported_even_when_the_topology_has_a_structural_one() {
    let ws = Workspace::new("fields_and_structure");
    let text = r#"
[plugins]
examples = "{examples}"
testkit = "{testkit}"

[spouts.sentences]
component = "examples::RandomSentenceSpout"

[bolts.split]
component = "examples::SplitSentence"
inputs = [{ from = "sentences" }]

[bolts.count]
component = "testkit::NullBolt"
inputs = [{ from = "split", grouping = { fields = ["wrod"] } }]

[bolts.lost]
component = "testkit::NullBolt"
inputs = [{ from = "splitt" }]
"#;
    let topology = ws.write_topology("both.toml", text);
    let out = SquallCommand::validate(&ws, &topology).output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    assert_eq!(lines.len(), 2, "the unknown source and the field\n{}", out.context());
    assert!(
        lines[0].starts_with(&at(&topology, text, "[\"wrod\"]"))
            || lines[0].starts_with(&at(&topology, text, "\"wrod\"")),
        "{}",
        out.context()
    );
    assert!(lines[0].contains("fields grouping on \"wrod\""), "{}", out.context());
    assert!(lines[1].contains("unknown spout or bolt \"splitt\""), "{}", out.context());
}

/// A bolt that needs tick tuples (`TICKS`, contract 1.2) with none, or with
/// too few, would run doing nothing and exit 0: refused at its table.
#[test]
fn a_bolt_that_needs_ticks_is_refused_without_them_or_with_too_few() {
    let ws = Workspace::new("needs_ticks");
    let write = |name: &str, tick: &str| {
        let bolt = format!(
            "[bolts.counts]\ncomponent = \"testkit::TickCountBolt\"\n\
             inputs = [{{ from = \"source\" }}]\n{tick}\n"
        );
        behind_a_const_spout(&ws, name, &bolt)
    };
    for (name, tick, says) in [
        (
            "none.toml",
            "",
            "needs tick tuples at least every 2 s, but it has no tick_tuple_freq_secs",
        ),
        (
            "slow.toml",
            "tick_tuple_freq_secs = 5",
            "needs tick tuples at least every 2 s, but tick_tuple_freq_secs = 5",
        ),
    ] {
        let (path, text) = write(name, tick);
        let out = SquallCommand::validate(&ws, &path).output();
        out.assert_code(EXIT_CONFIG);
        let lines = diagnostics(&out);
        assert_eq!(lines.len(), 1, "{}", out.context());
        let prefix = at(&path, &text, "counts]");
        assert!(lines[0].starts_with(&prefix), "expected {prefix}...\n{}", out.context());
        assert!(lines[0].contains(says), "{}", out.context());
    }
    let (path, _) = write("ok.toml", "tick_tuple_freq_secs = 1");
    SquallCommand::validate(&ws, &path).output().assert_code(0);
}

/// A windowed bolt that declares the streams it emits on (`EMITS`, contract
/// 1.2) and whose config makes it declare other outputs: every emit would be
/// refused at run time, so validate refuses it at the bolt's table. Seen
/// failing before the check: validate accepted the renamed stream (exit 0).
#[test]
fn a_windowed_bolt_whose_config_drops_a_stream_it_emits_on_is_refused() {
    let ws = Workspace::new("emits");
    let write = |name: &str, config: &str| {
        let bolt = format!(
            "[bolts.sizes]\ncomponent = \"testkit::WindowSizeBolt\"\n\
             inputs = [{{ from = \"source\" }}]\nwindow = {{ length_count = 10 }}\n{config}\n"
        );
        behind_a_const_spout(&ws, name, &bolt)
    };
    let (path, text) = write("renamed.toml", "config = { stream = \"totals\" }");
    let out = SquallCommand::validate(&ws, &path).output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    assert_eq!(lines.len(), 1, "{}", out.context());
    let prefix = at(&path, &text, "sizes]");
    assert!(lines[0].starts_with(&prefix), "expected {prefix}...\n{}", out.context());
    assert!(
        lines[0].contains(
            "bolt \"sizes\" (testkit::WindowSizeBolt) emits on stream \"default\", but with \
             this config it declares only totals"
        ),
        "{}",
        out.context()
    );
    let (path, _) = write("default.toml", "config = { stream = \"default\" }");
    SquallCommand::validate(&ws, &path).output().assert_code(0);
    let (path, _) = write("unset.toml", "");
    SquallCommand::validate(&ws, &path).output().assert_code(0);
}

/// Writes topology `name`: testkit's `ConstSpout` as `source`, then `bolt`
/// (a bolt's table); returns its path and its text as written.
fn behind_a_const_spout(ws: &Workspace, name: &str, bolt: &str) -> (std::path::PathBuf, String) {
    let text = format!(
        "[plugins]\ntestkit = \"{{testkit}}\"\n\n[spouts.source]\n\
         component = \"testkit::ConstSpout\"\n\n{bolt}"
    );
    let path = ws.write_topology(name, &text);
    let text = std::fs::read_to_string(&path).expect("read back");
    (path, text)
}
