//! Live reload (issue 11): components swapped while a reliable spout emits
//! at a steady rate with acking on. A rebuilt library (with visibly new
//! behaviour), a changed config, a bolt added, the spout itself swapped
//! (drained first), the word counter resized from 2 to 3 tasks (its keyed
//! state re-partitioned), and a new version whose `prepare` fails (rolled
//! back). Every message id is acked exactly once, and the counts kept in
//! the swapped bolts' state are exact across the swaps.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::http::{bound_addr, request};
use crate::util::{
    cargo_build_release, plugin_path, release_dir, swap_build_lock, ReplayLog, SquallCommand,
    Workspace, SWAP_FLAVOR_VAR, SWAP_PACKAGE,
};

/// Messages the spout emits, at [`RATE`] per second.
const MESSAGES: u64 = 12000;
const RATE: u64 = 1000;
/// Distinct words (`FlavorBolt`'s `modulo`).
const WORDS: u64 = 10;

/// Builds `squall-swap-demo` with `flavor` (none: the default, v1) and
/// installs it at `to` atomically (copy beside it, then rename over).
pub(crate) fn build_swap_demo(flavor: Option<&str>, to: &Path) {
    let _build = swap_build_lock();
    cargo_build_release(&[SWAP_PACKAGE], |cmd| {
        match flavor {
            Some(f) => cmd.env(SWAP_FLAVOR_VAR, f),
            None => cmd.env_remove(SWAP_FLAVOR_VAR),
        };
    });
    let staged = to.with_extension("staged");
    std::fs::copy(release_dir().join("libsquall_swap_demo.so"), &staged).expect("stage");
    std::fs::rename(&staged, to).expect("install");
}

/// The topology, with the `tag` bolt's config and any extra text.
fn topology(tag_config: &str, extra: &str) -> String {
    topology_with(tag_config, "one", 2, extra)
}

/// The topology, with the spout's label and the counter's parallelism too.
fn topology_with(tag_config: &str, spout_label: &str, counters: u32, extra: &str) -> String {
    format!(
        r#"
[topology]
name = "reload"

[plugins]
testkit = "{{testkit}}"
swap = "{{dir}}/libswap.so"
examples = "{{dir}}/libexamples.so"

[spouts.ids]
component = "testkit::ReplaySpout"
config = {{ messages = {MESSAGES}, log = "{{dir}}/replay.log", done_file = "{{dir}}/done", label = "{spout_label}" }}
throttle = {{ tuples_per_sec = {RATE} }}

[bolts.tag]
component = "swap::FlavorBolt"
config = {{ modulo = {WORDS}, {tag_config} }}
inputs = [{{ from = "ids" }}]

[bolts.count]
component = "examples::WordCount"
parallelism = {counters}
inputs = [{{ from = "tag", grouping = {{ fields = ["word"] }} }}]
{extra}"#
    )
}

/// The last `wordcount: <word> <n>` line of each word: instances swapped out
/// print their counts at their `cleanup` too, the final ones print last.
pub(crate) fn final_counts(stdout: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in stdout.lines() {
        if let Some((word, n)) = line.strip_prefix("wordcount: ").and_then(|l| l.split_once(' ')) {
            counts.insert(word.to_owned(), n.parse().expect("a count"));
        }
    }
    counts
}

#[test]
fn bolts_swap_live_with_their_state_and_no_tuple_lost_and_a_failed_prepare_rolls_back() {
    let ws = Workspace::new("reload");
    let swap = ws.path("libswap.so");
    let examples = ws.path("libexamples.so");
    // v2 first, kept aside; then v1 installed.
    build_swap_demo(Some("v2"), &ws.path("libswap-v2.so"));
    build_swap_demo(None, &swap);
    std::fs::copy(plugin_path("examples"), &examples).expect("install examples");

    let file = ws.write_topology("reload.toml", &topology(r#"label = "one""#, ""));
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &file);
    cmd.args(["--http", "0"]).limit(Duration::from_secs(120));
    let mut child = cmd.spawn();
    let addr = bound_addr(&mut child);
    let step = Duration::from_secs(30);
    let mut executed = child.wait_for_stat("tag", "executed", |n| n >= 300, step);

    // (a) rebuilt libraries: FlavorBolt v2, and WordCount's library with a
    // new digest (the same code with bytes appended, as a rebuild that
    // changed nothing visible would be).
    std::fs::rename(ws.path("libswap-v2.so"), &swap).expect("install v2");
    let mut bytes = std::fs::read(&examples).expect("read examples");
    bytes.extend_from_slice(b"rebuilt");
    let staged = ws.path("libexamples.staged");
    std::fs::write(&staged, &bytes).expect("write examples");
    std::fs::rename(&staged, &examples).expect("install examples");
    child.signal(libc::SIGHUP);
    child.wait_for_stderr("reload #1 (SIGHUP) succeeded", step);
    let log = child.stderr_snapshot();
    assert!(log.contains(r#"rebuilt "tag" (library changed, 1 task"#), "{log}");
    assert!(log.contains(r#""count" (library changed, 2 tasks"#), "{log}");
    executed = child.wait_for_stat("tag", "executed", |n| n >= executed + 300, step);

    // (b) a changed config, over HTTP.
    ws.write_topology("reload.toml", &topology(r#"label = "two""#, ""));
    let answer = request(addr, "POST", "/api/v1/reload");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let summary = answer.json()["summary"].as_str().expect("a summary").to_owned();
    assert!(summary.contains(r#"rebuilt "tag" (config changed, 1 task"#), "{summary}");
    assert!(summary.contains("2 component(s) unchanged"), "{summary}");
    executed = child.wait_for_stat("tag", "executed", |n| n >= executed + 300, step);

    // (c) a new bolt: added live, subscribed to `tag`; it executes tuples.
    let added =
        "\n[bolts.extra]\ncomponent = \"testkit::NullBolt\"\ninputs = [{ from = \"tag\" }]\n";
    ws.write_topology("reload.toml", &topology(r#"label = "two""#, added));
    let answer = request(addr, "POST", "/api/v1/reload");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let summary = answer.json()["summary"].as_str().expect("a summary").to_owned();
    assert!(summary.contains(r#"added "extra" (1 task, upstream rewired"#), "{summary}");
    child.wait_for_stat("extra", "executed", |n| n >= 300, step);
    executed = child.wait_for_stat("tag", "executed", |n| n >= executed + 300, step);

    // (d) the spout swapped: its old instance drains, the new one takes over
    // its progress (a ReplaySpout's ids mean something only to the instance
    // that emitted them, so without the drain their acks would be strays).
    ws.write_topology("reload.toml", &topology_with(r#"label = "two""#, "two", 2, added));
    child.signal(libc::SIGHUP);
    child.wait_for_stderr("reload #4 (SIGHUP) succeeded", step);
    let log = child.stderr_snapshot();
    assert!(log.contains(r#"rebuilt "ids" (config changed, 1 task"#), "{log}");
    executed = child.wait_for_stat("tag", "executed", |n| n >= executed + 300, step);

    // (e) the counter resized from 2 to 3 tasks: its counts follow their words.
    ws.write_topology("reload.toml", &topology_with(r#"label = "two""#, "two", 3, added));
    let answer = request(addr, "POST", "/api/v1/reload");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let summary = answer.json()["summary"].as_str().expect("a summary").to_owned();
    assert!(summary.contains(r#"resized "count" from 2 to 3 tasks"#), "{summary}");
    executed = child.wait_for_stat("tag", "executed", |n| n >= executed + 300, step);

    // (f) a new version whose prepare fails: rolled back, the old instance runs on.
    let failing = r#"label = "three", fail_prepare = true"#;
    ws.write_topology("reload.toml", &topology_with(failing, "two", 3, added));
    child.signal(libc::SIGHUP);
    child.wait_for_stderr("reload #6 (SIGHUP) failed, rolled back", step);
    let log = child.stderr_snapshot();
    assert!(log.contains("prepare on the new instance: prepare fails on purpose"), "{log}");
    child.wait_for_stat("tag", "executed", |n| n >= executed + 300, step);

    child.wait_for_file(&ws.path("done"), Duration::from_secs(60));
    child.interrupt();
    let out = child.wait();
    let ctx = out.context();
    out.assert_code(0);

    // The spout swap showed: the new instance opened with the old one's progress.
    let opened: Vec<&str> =
        out.stdout.lines().filter(|l| l.starts_with("replay spout opened: ")).collect();
    assert_eq!(opened.len(), 2, "{opened:?}\n{ctx}");
    assert!(opened[0].starts_with("replay spout opened: label one, next id 0,"), "{opened:?}");
    assert!(opened[1].starts_with("replay spout opened: label two, next id "), "{opened:?}");
    assert!(!opened[1].contains("next id 0,"), "the new instance took over: {opened:?}");

    // Every message id acked exactly once, none failed, no stray ack.
    let replay = ReplayLog::read(&ws, "replay.log");
    assert_eq!(replay.strays(), 0, "acks reached an instance that did not emit them\n{ctx}");
    let tally = replay.tally();
    assert_eq!(tally.len() as u64, MESSAGES, "every id was emitted\n{ctx}");
    for (id, t) in &tally {
        assert_eq!(
            (t.emits, t.acks, t.fails),
            (1, 1, 0),
            "id {id}: {}\n{ctx}",
            replay.history(*id)
        );
    }

    // WordCount's counts are exact across its swap (state handed over).
    let expected: BTreeMap<String, u64> =
        (0..WORDS).map(|k| (format!("w{k}"), MESSAGES / WORDS)).collect();
    assert_eq!(final_counts(&out.stdout), expected, "\n{ctx}");

    // Each swap's new behaviour showed, and FlavorBolt's count went through
    // both swaps: the last instance saw every message.
    let lines: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("swap-demo bolt")).collect();
    let mut prepared: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("swap-demo bolt prepared: "))
        .map(|l| l.split(" seen ").next().unwrap_or(l))
        .collect();
    // A stateful bolt that executed tuples while its new instance waited
    // for the verdict hands its state as it is at the commit to a fresh
    // instance of the same version, which prepares again
    // (docs/operations.md, "Reloading"): the same line twice in a row.
    prepared.dedup();
    assert_eq!(
        prepared,
        ["flavor v1 label one", "flavor v2 label one", "flavor v2 label two"],
        "\n{ctx}"
    );
    let last = lines.last().expect("a line");
    assert_eq!(
        *last,
        format!("swap-demo bolt cleanup: flavor v2 label two seen {MESSAGES}"),
        "\n{ctx}"
    );
    assert_eq!(out.summary()["reloads"]["succeeded"], 5, "\n{ctx}");
    assert_eq!(out.summary()["reloads"]["failed"], 1, "\n{ctx}");
}

#[test]
fn watch_coalesces_a_burst_of_writes_into_one_reload() {
    let ws = Workspace::new("reload_watch");
    let toml = |micros: u64| {
        format!(
            r#"
[plugins]
testkit = "{{testkit}}"

[spouts.source]
component = "testkit::ConstSpout"
throttle = {{ tuples_per_sec = 500 }}

[bolts.work]
component = "testkit::SleepBolt"
config = {{ micros = {micros} }}
inputs = [{{ from = "source" }}]
"#
        )
    };
    let file = ws.write_topology("watch.toml", &toml(0));
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &file);
    cmd.arg("--watch").limit(Duration::from_secs(60));
    let mut child = cmd.spawn();
    child.wait_for_stat("work", "executed", |n| n >= 50, Duration::from_secs(30));
    // A burst: three writes 50 ms apart, as an editor's save may do.
    for micros in [1, 2, 3] {
        ws.write_topology("watch.toml", &toml(micros));
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_for_stderr("reload #1 (--watch) succeeded", Duration::from_secs(10));
    let log = child.stderr_snapshot();
    assert!(log.contains(r#"rebuilt "work" (config changed, 1 task"#), "{log}");
    // Nothing changed since: no second reload.
    std::thread::sleep(Duration::from_millis(1500));
    let log = child.stderr_snapshot();
    assert!(!log.contains("reload #2"), "one reload for the burst\n{log}");
    child.interrupt();
    let out = child.wait();
    out.assert_code(0);
    assert_eq!(out.summary()["reloads"]["succeeded"], 1, "\n{}", out.context());
}

/// What `dir` holds, by name.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_private_folders_of_a_run_with_a_reload_are_gone_when_it_ends() {
    let ws = Workspace::new("reload_private_folders");
    // The run's own temporary folder, to see everything it leaves there.
    let tmp = ws.path("tmp");
    std::fs::create_dir(&tmp).expect("create the temporary folder");
    let sink = ws.path("libsink.so");
    std::fs::copy(plugin_path("testkit"), &sink).expect("install the sink's library");
    let file = ws.write_topology(
        "private.toml",
        r#"
[plugins]
testkit = "{testkit}"
sink = "{dir}/libsink.so"

[spouts.source]
component = "testkit::ConstSpout"
throttle = { tuples_per_sec = 2000 }

[bolts.sink]
component = "sink::NullBolt"
inputs = [{ from = "source" }]
"#,
    );
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &file);
    cmd.env("TMPDIR", &tmp).limit(Duration::from_secs(60));
    let mut child = cmd.spawn();
    let pid = child.pid();
    let step = Duration::from_secs(20);
    let executed = child.wait_for_stat("sink", "executed", |n| n >= 200, step);
    // A new digest for the sink's library: the reload loads it from a copy.
    let mut bytes = std::fs::read(&sink).expect("read the library");
    bytes.extend_from_slice(b"rebuilt");
    let staged = ws.write("libsink.staged", &bytes);
    std::fs::rename(&staged, &sink).expect("install the rebuilt library");
    child.signal(libc::SIGHUP);
    child.wait_for_stderr("reload #1 (SIGHUP) succeeded", step);
    let reload_dir = tmp.join(format!("squall-reload-{pid}"));
    assert!(reload_dir.is_dir(), "the reload copied into {}", reload_dir.display());
    child.wait_for_stat("sink", "executed", |n| n >= executed + 200, step);
    child.interrupt();
    let out = child.wait();
    out.assert_code(0);
    assert!(out.stderr.contains(r#"rebuilt "sink" (library changed"#), "{}", out.context());
    assert_eq!(entries(&tmp), Vec::<String>::new(), "left in TMPDIR\n{}", out.context());

    // `validate` and `inspect` load from private copies too, and leave nothing.
    let mut validate = SquallCommand::validate(&ws, &file);
    validate.env("TMPDIR", &tmp);
    validate.output().assert_code(0);
    assert_eq!(entries(&tmp), Vec::<String>::new(), "left by validate");
    let mut inspect = SquallCommand::inspect(&ws, &sink);
    inspect.env("TMPDIR", &tmp);
    inspect.output().assert_code(0);
    assert_eq!(entries(&tmp), Vec::<String>::new(), "left by inspect");
}
