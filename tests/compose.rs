//! Composed topologies through the real binary: `include`, `--set` and
//! `validate --print`, with errors at the file:line:col of an included file
//! (config checks and checks against the loaded plugins alike) and exit 78.

use crate::util::{loc_of, Output, SquallCommand, Workspace};

/// EX_CONFIG: the topology file is invalid.
const EXIT_CONFIG: i32 = 78;

/// Shared settings and the source, in a sub-folder; the plugin path is
/// absolute, so it does not depend on the folder.
const BASE: &str = r#"
[topology]
max_spout_pending = 100

[plugins]
examples = "{examples}"

[spouts.sentences]
component = "examples::RandomSentenceSpout"
config = { seed = 42 }
"#;

const MAIN: &str = r#"include = ["conf/base.toml"]

[topology]
name = "composed"

[bolts.split]
component = "examples::SplitSentence"
parallelism = 2
inputs = [{ from = "sentences" }]

[bolts.count]
component = "examples::WordCount"
inputs = [{ from = "split", grouping = { fields = ["word"] } }]
"#;

/// The diagnostics on stderr.
fn diagnostics(out: &Output) -> Vec<&str> {
    out.stderr.lines().filter(|l| l.contains(": error: ")).collect()
}

/// Writes conf/base.toml (`base`) and main.toml (`main`); returns main's path.
fn write(ws: &Workspace, base: &str, main: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(ws.path("conf")).expect("create conf/");
    ws.write_topology("conf/base.toml", base);
    ws.write_topology("main.toml", main)
}

#[test]
fn a_composed_topology_validates_and_overrides_apply() {
    let ws = Workspace::new("compose_valid");
    let main = write(&ws, BASE, MAIN);
    let out = SquallCommand::validate(&ws, &main).output();
    out.assert_code(0);
    assert!(
        out.stdout.contains("topology \"composed\" is valid (3 components, 4 tasks"),
        "\n{}",
        out.context()
    );
    let mut cmd = SquallCommand::validate(&ws, &main);
    cmd.args(["--set", "bolts.count.parallelism=4", "--set", "topology.name=wc2"]);
    let out = cmd.output();
    out.assert_code(0);
    assert!(
        out.stdout.contains("topology \"wc2\" is valid (3 components, 7 tasks"),
        "\n{}",
        out.context()
    );
}

#[test]
fn an_error_in_an_included_file_has_that_files_line_and_column() {
    let ws = Workspace::new("compose_error_in_base");
    let base = BASE.replace("config = {", "paralelism = 2\nconfig = {");
    let main = write(&ws, &base, MAIN);
    let out = SquallCommand::validate(&ws, &main).output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    assert_eq!(lines.len(), 1, "\n{}", out.context());
    let (line, col) = loc_of(&ws.read("conf/base.toml"), "paralelism");
    let prefix = format!("{}:{line}:{col}: error: ", ws.path("conf/base.toml").display());
    assert!(lines[0].starts_with(&prefix), "expected {prefix}\n{}", out.context());
    assert!(lines[0].contains("did you mean \"parallelism\""), "\n{}", out.context());
}

#[test]
fn a_plugin_check_on_an_included_value_points_into_the_included_file() {
    let ws = Workspace::new("compose_bind_error_in_base");
    // The bolt and its misspelt field live in the base; main only raises
    // the parallelism.
    let base = format!(
        "{BASE}\n[bolts.count]\ncomponent = \"examples::WordCount\"\n\
         inputs = [{{ from = \"sentences\", grouping = {{ fields = [\"wrod\"] }} }}]\n"
    );
    let main = "include = [\"conf/base.toml\"]\n\n[bolts.count]\nparallelism = 2\n";
    let main = write(&ws, &base, main);
    let out = SquallCommand::validate(&ws, &main).output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    assert_eq!(lines.len(), 1, "\n{}", out.context());
    let (line, col) = loc_of(&ws.read("conf/base.toml"), "\"wrod\"");
    let prefix = format!("{}:{line}:{col}: error: ", ws.path("conf/base.toml").display());
    assert!(lines[0].starts_with(&prefix), "expected {prefix}\n{}", out.context());
}

#[test]
fn a_constructor_rejecting_an_included_config_points_into_the_included_file() {
    let ws = Workspace::new("compose_constructor_in_base");
    let base = "[plugins]\ntestkit = \"{testkit}\"\n\n[spouts.source]\n\
                component = \"testkit::ConstSpout\"\nconfig = { per_call = 0 }\n";
    let main = "include = [\"conf/base.toml\"]\n\n[bolts.sink]\n\
                component = \"testkit::NullBolt\"\ninputs = [{ from = \"source\" }]\n";
    let main = write(&ws, base, main);
    let out = SquallCommand::validate(&ws, &main).output();
    out.assert_code(EXIT_CONFIG);
    let (line, col) = loc_of(&ws.read("conf/base.toml"), "source");
    let prefix = format!("{}:{line}:{col}: error: ", ws.path("conf/base.toml").display());
    let error = out.single_error_line();
    assert!(error.starts_with(&prefix), "expected {prefix}\n{}", out.context());
    assert!(error.contains("per_call must be at least 1"), "\n{}", out.context());
}

#[test]
fn a_missing_include_and_a_cycle_are_config_errors() {
    let ws = Workspace::new("compose_missing");
    let main = ws.write("main.toml", "include = [\"nope.toml\"]\n");
    let out = SquallCommand::validate(&ws, &main).output();
    out.assert_code(EXIT_CONFIG);
    let prefix = format!("{}:1:12: error: cannot read included file \"nope.toml\"", main.display());
    assert!(out.single_error_line().starts_with(&prefix), "\n{}", out.context());
    let a = ws.write("a.toml", "include = [\"b.toml\"]\n");
    ws.write("b.toml", "include = [\"a.toml\"]\n");
    let out = SquallCommand::validate(&ws, &a).output();
    out.assert_code(EXIT_CONFIG);
    assert!(out.single_error_line().contains("include cycle"), "\n{}", out.context());
}

#[test]
fn set_errors_name_the_argument_and_exit_78() {
    let ws = Workspace::new("compose_set_errors");
    let main = write(&ws, BASE, MAIN);
    let mut cmd = SquallCommand::validate(&ws, &main);
    cmd.args(["--set", "bolts.count.paralelism=4", "--set", "bolts.split.parallelism=0"]);
    let out = cmd.output();
    out.assert_code(EXIT_CONFIG);
    let lines = diagnostics(&out);
    assert_eq!(
        lines,
        [
            "--set bolts.count.paralelism=4: error: unknown key \"paralelism\" in bolt \"count\" (help: did you mean \"parallelism\"?)",
            "--set bolts.split.parallelism=0: error: \"parallelism\" in bolt \"split\" must be at least 1, found 0",
        ],
        "\n{}",
        out.context()
    );
    // Without "=", it is a usage error.
    let mut cmd = SquallCommand::validate(&ws, &main);
    cmd.args(["--set", "bolts.count.parallelism"]);
    cmd.output().assert_code(2);
}

#[test]
fn validate_print_writes_the_effective_topology_which_validates_again() {
    let ws = Workspace::new("compose_print");
    let main = write(&ws, BASE, MAIN);
    let mut cmd = SquallCommand::validate(&ws, &main);
    cmd.args(["--print", "--set", "topology.max_spout_pending=1000"]);
    let out = cmd.output();
    out.assert_code(0);
    assert!(
        out.stdout.starts_with("[topology]\n")
            && out.stdout.contains("\nmax_spout_pending = 1000\n"),
        "\n{}",
        out.context()
    );
    assert!(out.stdout.contains("[spouts.sentences]"), "\n{}", out.context());
    assert!(!out.stdout.contains("include"), "\n{}", out.context());
    assert!(out.stderr.contains("is valid"), "the summary goes to stderr\n{}", out.context());
    let printed = ws.write("printed.toml", &out.stdout);
    let again = SquallCommand::validate(&ws, &printed).output();
    again.assert_code(0);
    assert!(
        again.stdout.contains("topology \"composed\" is valid (3 components, 4 tasks"),
        "\n{}",
        again.context()
    );
}

#[test]
fn run_takes_set_too() {
    let ws = Workspace::new("compose_run_set");
    let main = write(&ws, BASE, MAIN);
    let mut cmd = SquallCommand::run(&ws, &main, "1s");
    cmd.args(["--set", "bolts.split.parallelism=3"]);
    let out = cmd.output();
    out.assert_code(0);
    assert_eq!(out.stat("split", "tasks"), 3, "\n{}", out.context());
}
