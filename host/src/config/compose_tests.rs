//! Tests of composition: `include`, `--set` and the printed topology, each
//! rule with files on disk.

use std::path::{Path, PathBuf};

use super::*;

/// A fresh folder under the system temp folder, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(test: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("squall-compose-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the test folder");
        Dir(dir)
    }

    /// Writes `text` to `rel` (creating folders) and returns its path.
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.0.join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create folders");
        std::fs::write(&path, text).expect("write a test file");
        path
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn no_env(_: &str) -> Option<String> {
    None
}

/// Reads `path` with `sets`, as `squall validate --set ...` would.
fn read(path: &Path, sets: &[&str]) -> Result<(TopologyConfig, Option<String>), Diagnostics> {
    let sets: Vec<Override> = sets.iter().map(|s| s.parse().expect("KEY=VALUE")).collect();
    let text = std::fs::read_to_string(path).expect("read the topology");
    read_composed(text, path, &sets, &no_env, true)
}

fn read_ok(path: &Path, sets: &[&str]) -> TopologyConfig {
    match read(path, sets) {
        Ok((config, _)) => config,
        Err(diags) => panic!("expected a valid topology, got:\n{diags}"),
    }
}

fn read_err(path: &Path, sets: &[&str]) -> Diagnostics {
    match read(path, sets) {
        Ok(_) => panic!("expected diagnostics"),
        Err(diags) => diags,
    }
}

/// The 1-based line and column of the first `needle` in `text`.
fn loc_of(text: &str, needle: &str) -> Loc {
    let offset = text.find(needle).expect("needle is in the text");
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    Loc::new(line as u32, col as u32)
}

const BASE: &str = r#"[topology]
max_spout_pending = 10
acker_executors = 2

[plugins]
ex = "libex.so"

[spouts.first]
component = "ex::Spout"
parallelism = 2
config = { seed = 1, words = 3 }

[bolts.sink]
component = "ex::Sink"
inputs = [{ from = "first" }]
"#;

const MAIN: &str = r#"include = ["conf/base.toml"]

[topology]
name = "composed"
max_spout_pending = 20

[spouts.first]
config = { seed = 7 }

[spouts.second]
component = "ex::Spout"

[bolts.sink]
inputs = [{ from = "second" }]
"#;

#[test]
fn included_files_come_first_and_the_including_file_overrides_key_by_key() {
    let dir = Dir::new("override");
    dir.write("conf/base.toml", BASE);
    let config = read_ok(&dir.write("main.toml", MAIN), &[]);
    assert_eq!(config.name, "composed");
    assert_eq!(config.settings.max_spout_pending, Some(20), "the scalar is replaced");
    assert_eq!(config.settings.acker_executors, 2, "a key only the base sets stays");
    let first = &config.spouts[0];
    assert_eq!(first.decl.parallelism, 2);
    // Tables merge recursively: `words` from the base, `seed` from main.
    let table: toml::Table = toml::from_str(&first.decl.config).expect("config is TOML");
    assert_eq!(table["seed"].as_integer(), Some(7));
    assert_eq!(table["words"].as_integer(), Some(3));
    // Arrays replace: the bolt's inputs are main's, not both.
    let froms: Vec<&str> = config.bolts[0].inputs.iter().map(|i| i.from.as_str()).collect();
    assert_eq!(froms, ["second"]);
}

#[test]
fn file_order_is_the_order_of_first_definition() {
    let dir = Dir::new("order");
    dir.write("conf/base.toml", BASE);
    let config = read_ok(&dir.write("main.toml", MAIN), &[]);
    let spouts: Vec<&str> = config.spouts.iter().map(|s| s.decl.name.as_str()).collect();
    assert_eq!(spouts, ["first", "second"]);
    // `first` is declared by the base; main only adds to it.
    assert_eq!(config.sources.name(config.spouts[0].decl.loc), dir.0.join("conf/base.toml"));
    assert_eq!(
        config.spouts[0].decl.loc,
        loc_of(BASE, "first").in_source(config.spouts[0].decl.loc.source)
    );
    assert_eq!(config.sources.name(config.spouts[1].decl.loc), dir.0.join("main.toml"));
}

#[test]
fn an_error_in_an_included_file_is_reported_in_that_file() {
    let dir = Dir::new("error_in_base");
    let base = BASE.replace("parallelism = 2", "paralelism = 2");
    let base_path = dir.write("conf/base.toml", &base);
    let main = MAIN.replace("max_spout_pending = 20", "max_spout_pending = -1");
    let main_path = dir.write("main.toml", &main);
    let diags = read_err(&main_path, &[]);
    let lines: Vec<String> = diags.items.iter().map(ToString::to_string).collect();
    let typo = format!(
        "{}:{}: error: unknown key \"paralelism\"",
        base_path.display(),
        loc_of(&base, "paralelism")
    );
    let range =
        format!("{}:{}: error: \"max_spout_pending\"", main_path.display(), loc_of(&main, "-1"));
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(lines.iter().any(|l| l.starts_with(&typo)), "{typo} in {lines:#?}");
    assert!(lines.iter().any(|l| l.starts_with(&range)), "{range} in {lines:#?}");
}

#[test]
fn a_syntax_error_in_an_included_file_is_reported_in_that_file() {
    let dir = Dir::new("syntax_in_base");
    let base_path = dir.write("conf/base.toml", "[topology\n");
    let diags = read_err(&dir.write("main.toml", MAIN), &[]);
    assert_eq!(diags.items.len(), 1, "{diags}");
    assert_eq!(diags.items[0].file, base_path);
    assert_eq!(diags.items[0].loc.line, 1);
    assert!(diags.items[0].message.starts_with("invalid TOML"), "{diags}");
}

#[test]
fn plugin_paths_are_relative_to_the_file_that_wrote_them() {
    let dir = Dir::new("plugin_paths");
    dir.write("conf/base.toml", BASE);
    let config = read_ok(&dir.write("main.toml", MAIN), &[]);
    assert_eq!(config.plugins[0].path, dir.0.join("conf").join("libex.so"));
    // Overridden in main, the path is relative to main's folder.
    let main = format!("{MAIN}\n[plugins]\nex = \"lib/libex2.so\"\n");
    let config = read_ok(&dir.write("main.toml", &main), &[]);
    assert_eq!(config.plugins[0].path, dir.0.join("lib/libex2.so"));
    // Given with --set, it is relative to the working directory.
    let config = read_ok(&dir.0.join("main.toml"), &["plugins.ex=cwd/libex3.so"]);
    assert_eq!(config.plugins[0].path, Path::new("cwd/libex3.so"));
}

#[test]
fn an_included_file_may_include_others_relative_to_itself() {
    let dir = Dir::new("nested");
    let base = format!("include = [\"more/settings.toml\"]\n{BASE}");
    dir.write("conf/base.toml", &base);
    dir.write("conf/more/settings.toml", "[topology]\nacker_executors = 5\ntimeout_buckets = 4\n");
    let config = read_ok(&dir.write("main.toml", MAIN), &[]);
    // The base overrides what it includes; what it does not set stays.
    assert_eq!(config.settings.acker_executors, 2);
    assert_eq!(config.settings.timeout_buckets, 4);
}

#[test]
fn include_cycles_are_errors_at_the_include_that_closes_them() {
    let dir = Dir::new("cycle");
    let a_text = "include = [\"b.toml\"]\n";
    let b_text = "[topology]\nname = \"b\"\ninclude = 3\n";
    let a = dir.write("a.toml", a_text);
    let b = dir.write("b.toml", "include = [\"a.toml\"]\n");
    let diags = read_err(&a, &[]);
    assert_eq!(diags.items.len(), 1, "{diags}");
    assert_eq!(diags.items[0].file, b);
    assert!(diags.items[0].message.starts_with("include cycle: "), "{diags}");
    assert!(diags.items[0].message.ends_with("a.toml"), "{diags}");
    // A file that includes itself.
    dir.write("self.toml", "include = [\"self.toml\"]\n");
    let diags = read_err(&dir.0.join("self.toml"), &[]);
    assert!(diags.items[0].message.starts_with("include cycle"), "{diags}");
    // Not at the top level, `include` is an ordinary (unknown) key.
    dir.write("b.toml", b_text);
    let diags = read_err(&a, &[]);
    assert!(diags.items.iter().any(|d| d.message.contains("unknown key \"include\"")), "{diags}");
}

#[test]
fn a_missing_or_malformed_include_is_an_error_at_its_entry() {
    let dir = Dir::new("missing");
    let text = "include = [\"conf/nope.toml\"]\n";
    let diags = read_err(&dir.write("main.toml", text), &[]);
    assert_eq!(diags.items.len(), 1, "{diags}");
    assert_eq!(diags.items[0].loc, loc_of(text, "\"conf/nope.toml\""));
    assert!(diags.items[0].message.contains("cannot read included file \"conf/nope.toml\""));
    let diags = read_err(&dir.write("main.toml", "include = \"base.toml\"\n"), &[]);
    assert!(diags.items[0].message.contains("must be an array"), "{diags}");
    let diags = read_err(&dir.write("main.toml", "include = [1, \"\"]\n"), &[]);
    assert_eq!(diags.items.len(), 2, "{diags}");
}

#[test]
fn set_values_are_toml_and_bare_words_are_strings() {
    let dir = Dir::new("set_values");
    dir.write("conf/base.toml", BASE);
    let main = dir.write("main.toml", MAIN);
    let config = read_ok(
        &main,
        &[
            "topology.max_spout_pending=1000",
            "topology.name=wc2",
            "topology.enable_message_timeouts=false",
            "bolts.sink.parallelism=4",
            "spouts.first.config={ seed = 9 }",
        ],
    );
    assert_eq!(config.settings.max_spout_pending, Some(1000));
    assert_eq!(config.name, "wc2");
    assert!(!config.settings.enable_message_timeouts);
    assert_eq!(config.bolts[0].decl.parallelism, 4);
    // A value replaces the key whole, even a table: `words` is gone.
    assert_eq!(config.spouts[0].decl.config, "seed = 9\n");
}

#[test]
fn set_can_add_a_known_key_but_not_a_component() {
    let dir = Dir::new("set_add");
    dir.write("conf/base.toml", BASE);
    let main = dir.write("main.toml", MAIN);
    let config =
        read_ok(&main, &["topology.receive_buffer_bytes=4096", "wait.spout.strategy=park"]);
    assert_eq!(config.settings.receive_buffer_bytes, 4096);
    assert!(matches!(config.wait.spout, WaitSpec::Park { .. }));
    let diags = read_err(&main, &["bolts.snk.parallelism=4"]);
    assert_eq!(
        diags.to_string(),
        "--set bolts.snk.parallelism=4: error: unknown bolt \"snk\" (help: did you mean \"sink\"?)"
    );
}

#[test]
fn an_unknown_key_set_is_reported_against_its_argument_with_a_did_you_mean() {
    let dir = Dir::new("set_unknown");
    dir.write("conf/base.toml", BASE);
    let main = dir.write("main.toml", MAIN);
    let diags = read_err(&main, &["topology.max_spout_pendin=5", "topolgy.name=x"]);
    let lines: Vec<String> = diags.items.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "--set topolgy.name=x: error: unknown key \"topolgy\" in the top-level table (help: did you mean \"topology\"?)",
            "--set topology.max_spout_pendin=5: error: unknown key \"max_spout_pendin\" in [topology] (help: did you mean \"max_spout_pending\"?)",
        ]
    );
}

#[test]
fn a_bad_overridden_value_names_the_set_argument() {
    let dir = Dir::new("set_bad_value");
    dir.write("conf/base.toml", BASE);
    let main = dir.write("main.toml", MAIN);
    let diags = read_err(&main, &["bolts.sink.parallelism=0", "topology.acker_executors=many"]);
    let lines: Vec<String> = diags.items.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "--set bolts.sink.parallelism=0: error: \"parallelism\" in bolt \"sink\" must be at least 1, found 0",
            "--set topology.acker_executors=many: error: \"acker_executors\" in [topology] must be an integer, found a string",
        ]
    );
}

#[test]
fn malformed_overrides_are_refused_with_a_reason() {
    let dir = Dir::new("set_malformed");
    dir.write("conf/base.toml", BASE);
    let main = dir.write("main.toml", MAIN);
    for (set, reason) in [
        ("topology.name.x=1", "\"topology.name\" is a string, not a table"),
        ("include=[\"x.toml\"]", "\"include\" cannot be set with --set"),
        ("a b=1", "invalid key \"a b\""),
        ("spouts.first.config={ seed = ", "invalid TOML value"),
        ("plugins.nope=lib.so", "unknown plugin alias \"nope\""),
    ] {
        let diags = read_err(&main, &[set]);
        let d = &diags.items[0];
        assert_eq!(d.file, Path::new(&format!("--set {set}")), "{diags}");
        assert!(d.message.starts_with(reason), "{set}: {diags}");
    }
}

#[test]
fn the_printed_topology_reads_back_to_the_same_topology() {
    let dir = Dir::new("print");
    dir.write("conf/base.toml", BASE);
    let main = dir.write("main.toml", MAIN);
    let (config, printed) = read(&main, &["bolts.sink.parallelism=3"]).expect("valid");
    let printed = printed.expect("printed");
    assert!(!printed.contains("include"), "{printed}");
    // Saved in another folder, it still names the same library.
    let copy = dir.write("elsewhere/printed.toml", &printed);
    let again = read_ok(&copy, &[]);
    assert_eq!(again.name, config.name);
    assert_eq!(again.settings, config.settings);
    assert_eq!(again.spouts.len(), 2);
    for (a, b) in again.spouts.iter().zip(&config.spouts) {
        assert_eq!(
            (&a.decl.name, a.decl.parallelism, &a.decl.config),
            (&b.decl.name, b.decl.parallelism, &b.decl.config)
        );
    }
    assert_eq!(again.bolts[0].decl.parallelism, 3);
    assert_eq!(again.bolts[0].inputs[0].from, "second");
    let path = |c: &TopologyConfig| std::path::absolute(&c.plugins[0].path).expect("absolute");
    assert_eq!(path(&again), path(&config));
}

#[test]
fn a_diamond_is_applied_twice_but_nesting_is_bounded() {
    let dir = Dir::new("limits");
    dir.write("conf/base.toml", BASE);
    dir.write("left.toml", "include = [\"conf/base.toml\"]\n");
    dir.write("right.toml", "include = [\"conf/base.toml\"]\n[topology]\nacker_executors = 3\n");
    let main = dir.write("main.toml", "include = [\"left.toml\", \"right.toml\"]\n");
    assert_eq!(read_ok(&main, &[]).settings.acker_executors, 3);
    // A chain of 18 files, each including the next.
    for i in 0..18 {
        dir.write(&format!("chain{i}.toml"), &format!("include = [\"chain{}.toml\"]\n", i + 1));
    }
    dir.write("chain18.toml", BASE);
    let diags = read_err(&dir.0.join("chain0.toml"), &[]);
    assert_eq!(diags.items.len(), 1, "{diags}");
    assert!(diags.items[0].message.contains("nested more than 16 deep"), "{diags}");
}

#[test]
fn printing_quotes_odd_keys_and_resolves_table_plugin_paths() {
    let dir = Dir::new("print_odd");
    let text = r#"[plugins]
ex = { path = "lib$$/libex.so", allow_writable = true }

[spouts."s.v2"]
component = "ex::Spout"
config = { "a key" = [1, 2.5, "x"], when = 1979-05-27T07:32:00Z, nested = { deep = {} } }
"#;
    let (config, printed) = read(&dir.write("main.toml", text), &[]).expect("valid");
    let printed = printed.expect("printed");
    assert!(printed.contains("[spouts.\"s.v2\"]\n"), "{printed}");
    assert!(printed.contains("[plugins.ex]\npath = \""), "{printed}");
    // `$$` read as `$`, then printed doubled again, absolute.
    let absolute = std::path::absolute(dir.0.join("lib$/libex.so")).expect("absolute");
    let expected = format!("path = \"{}\"", absolute.display().to_string().replace('$', "$$"));
    assert!(printed.contains(&expected), "{expected} in {printed}");
    let again = read_ok(&dir.write("elsewhere/again.toml", &printed), &[]);
    assert_eq!(again.spouts[0].decl.name, "s.v2");
    assert_eq!(again.spouts[0].decl.config, config.spouts[0].decl.config);
    assert_eq!(again.plugins[0].path, absolute);
    assert!(again.plugins[0].allow_writable);
}
