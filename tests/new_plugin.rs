//! `squall new plugin`: the generated crate builds, passes its own tests
//! (unit tests and the in-process harness test) and runs under the host;
//! an existing folder and bad names are refused.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::util::{self, SquallCommand, Workspace};

/// `cargo ARGS --release --offline` in the generated crate, with a target
/// directory kept under this test binary's target root (so later runs reuse
/// the build). Panics with cargo's output when it fails.
fn cargo_in(dir: &Path, args: &[&str]) -> String {
    let mut cmd = util::cargo();
    cmd.current_dir(dir)
        .args(args)
        .args(["--release", "--offline"])
        .env("CARGO_TARGET_DIR", util::target_root().join("new-plugin"))
        .env_remove("RUSTFLAGS");
    let out = run(&mut cmd);
    assert!(
        out.status.success(),
        "cargo {args:?} in {} failed ({}):\n{}\n{}",
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn run(cmd: &mut Command) -> std::process::Output {
    cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

#[test]
fn a_new_plugin_builds_passes_its_tests_and_runs() {
    let ws = Workspace::new("new-plugin");
    let api = util::workspace_root().join("plugin-api");
    let mut new = SquallCommand::new(&ws, ["new", "plugin", "my-plugin", "--api-path"]);
    new.arg(&api);
    let out = new.output();
    out.assert_code(0);
    let dir = ws.path("my-plugin");
    for file in [
        "Cargo.toml",
        "src/lib.rs",
        "src/spout.rs",
        "src/bolt.rs",
        "tests/harness.rs",
        "topology.toml",
        "README.md",
    ] {
        assert!(dir.join(file).is_file(), "{file} was not written\n{}", out.context());
    }
    let manifest = ws.read("my-plugin/Cargo.toml");
    assert!(manifest.contains("crate-type = [\"cdylib\", \"rlib\"]"), "{manifest}");
    assert!(manifest.contains("panic = \"unwind\""), "{manifest}");
    assert!(manifest.contains("version = \"1.3\", path = "), "{manifest}");

    let tests = cargo_in(&dir, &["test"]);
    for test in [
        "an_unknown_config_key_is_refused",
        "emits_numbers_with_themselves_as_ids_up_to_the_limit",
        "a_failed_number_is_emitted_again",
        "a_new_instance_goes_on_from_the_saved_state",
        "emits_the_number_and_its_square",
        "every_fed_number_is_squared_and_acked",
        "a_tuple_the_bolt_rejects_is_failed",
    ] {
        assert!(tests.contains(&format!("{test} ... ok")), "{test} did not pass:\n{tests}");
    }
    cargo_in(&dir, &["build"]);

    let release = util::target_root().join("new-plugin").join("release");
    let mut run = SquallCommand::run(&ws, &dir.join("topology.toml"), "2s");
    // Its own variable: SQUALL_PLUGIN_DIR names squall's libraries.
    run.env("MY_PLUGIN_DIR", &release).env("SQUALL_PLUGIN_DIR", crate::util::release_dir());
    let out = run.output();
    out.assert_code(0);
    let acked = out.stat("numbers", "acked");
    assert!(acked > 0, "no number was acked\n{}", out.context());
    assert!(out.stat("square", "executed") >= acked, "\n{}", out.context());
    assert_eq!(out.stat("numbers", "failed"), 0, "\n{}", out.context());
}

#[test]
fn the_example_test_of_a_new_plugin_passes_and_catches_a_bolt_that_drops_a_field() {
    let ws = Workspace::new("new-plugin-test");
    let api = util::workspace_root().join("plugin-api");
    let mut new = SquallCommand::new(&ws, ["new", "plugin", "tested", "--api-path"]);
    new.arg(&api);
    new.output().assert_code(0);
    let dir = ws.path("tested");
    assert!(ws.read("tested/topology.toml").contains("[[tests]]"));
    let release = util::target_root().join("new-plugin").join("release");
    let squall_test = || {
        cargo_in(&dir, &["build"]);
        let mut cmd = SquallCommand::new(&ws, ["test", "topology.toml"]);
        cmd.current_dir(&dir)
            .env("TESTED_DIR", &release)
            .env("SQUALL_PLUGIN_DIR", crate::util::release_dir());
        cmd.output()
    };
    let out = squall_test();
    out.assert_code(0);
    assert!(out.stdout.contains("test \"every number is squared\" ... ok"), "{}", out.context());

    // The bug: the bolt stops emitting the square (declared and emitted).
    edit(
        &dir,
        "src/bolt.rs",
        "outputs.declare(&[\"n\", \"square\"]);",
        "outputs.declare(&[\"n\"]);",
    );
    edit(
        &dir,
        "src/bolt.rs",
        "collector.emit(&[Value::U64(n), Value::U64(square)]);",
        "let _ = square;\n        collector.emit(&[Value::U64(n)]);",
    );
    let out = squall_test();
    out.assert_code(1);
    assert!(
        out.stdout.contains("test \"every number is squared\" ... FAILED"),
        "{}",
        out.context()
    );
    assert!(out.stdout.contains("  - { n = 3, square = 9 }\n"), "{}", out.context());
    assert!(out.stdout.contains("  + { n = 3 }\n"), "{}", out.context());
}

#[test]
fn new_plugin_refuses_a_non_empty_folder_and_bad_names() {
    let ws = Workspace::new("new-plugin-refusals");
    ws.write("taken.txt", "");
    let mut cmd = SquallCommand::new(&ws, ["new", "plugin", "ok-name", "--path"]);
    cmd.arg(ws.dir());
    let out = cmd.output();
    out.assert_code(1);
    assert!(out.stderr.contains("exists and is not empty"), "{}", out.context());

    for (name, why) in [
        ("9lives", "must start with an ASCII letter"),
        ("a.b", "'.' is not allowed"),
        ("fn", "reserved"),
    ] {
        let out = SquallCommand::new(&ws, ["new", "plugin", name]).output();
        out.assert_code(1);
        assert!(out.stderr.contains(why), "{name}: {}", out.context());
        assert!(!ws.path(name).exists(), "{name}: nothing may be written");
    }
}

/// Builds the generated crate at `dir` and copies its library `lib` to `to`.
fn build_to(dir: &Path, lib: &str, to: &Path) {
    cargo_in(dir, &["build"]);
    let built = util::target_root().join("new-plugin").join("release").join(lib);
    std::fs::copy(&built, to).expect("copy the library");
}

/// Replaces `from` with `to` in the generated crate's file `file`.
fn edit(dir: &Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).expect("read the source");
    assert!(text.contains(from), "{file} has no {from:?}");
    std::fs::write(&path, text.replace(from, to)).expect("write the source");
}

#[test]
fn a_new_plugin_rebuilt_while_running_swaps_with_its_spout_unchanged_then_changed() {
    const LIMIT: u64 = 20_000;
    let ws = Workspace::new("new-plugin-reload");
    let api = util::workspace_root().join("plugin-api");
    let mut new = SquallCommand::new(&ws, ["new", "plugin", "swap-me", "--api-path"]);
    new.arg(&api);
    new.output().assert_code(0);
    let dir = ws.path("swap-me");
    // Three builds, made before the run: as generated; the bolt's code
    // changed (the spout's not); the spout's code changed too.
    build_to(&dir, "libswap_me.so", &ws.path("v1.so"));
    edit(&dir, "src/bolt.rs", "emits (n, n * n) for every n", "squares every n (v2)");
    build_to(&dir, "libswap_me.so", &ws.path("v2.so"));
    edit(&dir, "src/spout.rs", "emits 0, 1, 2, ... reliably", "counts up (v3)");
    build_to(&dir, "libswap_me.so", &ws.path("v3.so"));
    let lib = ws.path("libswap.so");
    std::fs::copy(ws.path("v1.so"), &lib).expect("install v1");
    let toml = format!(
        r#"
[topology]
name = "swap-me"
max_spout_pending = 1000
acker_executors = 1

[plugins]
mine = "{{dir}}/libswap.so"

[spouts.numbers]
component = "mine::Numbers"
config = {{ limit = {LIMIT} }}
throttle = {{ tuples_per_sec = 1000, mode = "smooth" }}

[bolts.square]
component = "mine::Square"
parallelism = 2
inputs = [{{ from = "numbers", grouping = "shuffle" }}]
"#
    );
    let file = ws.write_topology("topology.toml", &toml);
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &file);
    cmd.limit(Duration::from_secs(120));
    let mut child = cmd.spawn();
    let step = Duration::from_secs(30);
    child.wait_for_stat("numbers", "acked", |n| n >= 300, step);

    // The bolt's code changed, the spout's did not: both are in the library,
    // so both are rebuilt.
    std::fs::rename(ws.path("v2.so"), &lib).expect("install v2");
    child.signal(libc::SIGHUP);
    child.wait_for_stderr("reload #1 (SIGHUP) succeeded", Duration::from_secs(20));
    let log = child.stderr_snapshot();
    assert!(log.contains(r#"rebuilt "numbers" (library changed, 1 task"#), "{log}");
    assert!(log.contains(r#""square" (library changed, 2 tasks"#), "{log}");
    let acked = child.wait_for_stat("numbers", "acked", |_| true, step);
    child.wait_for_stat("numbers", "acked", |n| n >= acked + 300, step);

    // Now the spout's code changed too.
    std::fs::rename(ws.path("v3.so"), &lib).expect("install v3");
    child.signal(libc::SIGHUP);
    child.wait_for_stderr("reload #2 (SIGHUP) succeeded", Duration::from_secs(20));
    let acked = child.wait_for_stat("numbers", "acked", |_| true, step);
    assert!(acked < LIMIT, "the spout finished before its second swap; nothing was tested");
    child.wait_for_stat("numbers", "acked", |n| n >= LIMIT, Duration::from_secs(60));
    child.interrupt();
    let out = child.wait();
    let ctx = out.context();
    out.assert_code(0);
    assert!(!out.stderr.contains("rolled back"), "\n{ctx}");
    // Each new spout went on from its predecessor's state: every number
    // emitted once and acked once, none failed.
    let numbers = out.component("numbers");
    assert_eq!(numbers["emitted"], LIMIT, "\n{ctx}");
    assert_eq!(numbers["acked"], LIMIT, "\n{ctx}");
    assert_eq!(numbers["failed"], 0, "\n{ctx}");
    assert_eq!(out.component("square")["executed"], LIMIT, "\n{ctx}");
    assert_eq!(out.summary()["reloads"]["succeeded"], 2, "\n{ctx}");
}
