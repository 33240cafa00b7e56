//! The plugin loader's error matrix (after abi_stable's `testing/1 - loading
//! errors`): every way a library can be unusable gets one `error:` line that
//! names the plugin alias and the path, exit code 69, no crash and no hang.
//! Then `squall inspect`, two copies of one library side by side, and swapping
//! a rebuilt library between two runs of the same host binary.
//!
//! Every case runs both `squall validate` and `squall run`: they share the
//! loader, and both must refuse the library before any of its code runs.

use std::path::Path;
use std::time::Duration;

use crate::util::{
    cargo_build_release, plugin_path, read_records, release_dir, squall_bin, swap_build_lock,
    Output, SquallCommand, Workspace, SWAP_FLAVOR_VAR, SWAP_PACKAGE,
};

/// EX_UNAVAILABLE: a plugin library could not be loaded or a component built.
const EXIT_UNAVAILABLE: i32 = 69;
/// EX_CONFIG: the topology file is invalid.
const EXIT_CONFIG: i32 = 78;

/// A minimal topology whose plugin `testkit` is the library at `library`.
fn topology_with_library(ws: &Workspace, library: &Path) -> std::path::PathBuf {
    ws.write_topology(
        "topology.toml",
        &format!(
            r#"
[plugins]
testkit = "{}"

[spouts.source]
component = "testkit::ConstSpout"

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{{ from = "source" }}]
"#,
            library.display()
        ),
    )
}

/// Both commands on `topology`, each with a short watchdog: a refusal is
/// immediate, so `run` gets a long `--duration` it must never reach.
fn validate_and_run(ws: &Workspace, topology: &Path) -> [Output; 2] {
    let mut validate = SquallCommand::validate(ws, topology);
    validate.limit(Duration::from_secs(30));
    let mut run = SquallCommand::run(ws, topology, "60s");
    run.limit(Duration::from_secs(30));
    [validate.output(), run.output()]
}

/// Checks a refused library: exit 69, and exactly one stderr line mentioning
/// `error:`, which starts with it and names the alias and the path. Returns
/// that line.
#[track_caller]
fn assert_refused<'a>(out: &'a Output, library: &Path) -> &'a str {
    out.assert_code(EXIT_UNAVAILABLE);
    let mentions: Vec<&str> = out.stderr.lines().filter(|l| l.contains("error:")).collect();
    assert_eq!(mentions.len(), 1, "expected one error line\n{}", out.context());
    let line = out.single_error_line();
    assert!(line.contains("plugin \"testkit\""), "the alias is named\n{}", out.context());
    assert!(
        line.contains(&library.display().to_string()),
        "the path {} is named\n{}",
        library.display(),
        out.context()
    );
    assert!(out.json.is_none(), "a refused topology never runs\n{}", out.context());
    line
}

#[test]
fn a_missing_library_is_refused_with_one_error_line() {
    let ws = Workspace::new("missing_library");
    let library = ws.path("libnowhere.so");
    let topology = topology_with_library(&ws, &library);
    for out in validate_and_run(&ws, &topology) {
        let line = assert_refused(&out, &library);
        assert!(line.contains("does not exist"), "{line}");
    }
}

/// A relative path written `./lib/…` prints as the plain path beside the
/// topology file, without `/./`.
#[test]
fn a_plugin_path_prints_without_dot_components() {
    let ws = Workspace::new("plain_plugin_path");
    let topology = topology_with_library(&ws, Path::new("./lib/./libnowhere.so"));
    for out in validate_and_run(&ws, &topology) {
        let line = assert_refused(&out, &ws.path("lib/libnowhere.so"));
        assert!(!line.contains("/./"), "{line}");
    }
}

/// Naming a crate's `.rlib` instead of its shared library says what to add.
#[test]
fn naming_an_rlib_says_to_add_crate_type_cdylib() {
    let ws = Workspace::new("rlib_named");
    let library = ws.write("libmine.rlib", "!<arch>\n".repeat(200));
    let topology = topology_with_library(&ws, &library);
    for out in validate_and_run(&ws, &topology) {
        let line = assert_refused(&out, &library);
        assert!(line.contains("add crate-type = [\"cdylib\"]"), "{line}");
    }
}

#[test]
fn a_file_that_is_not_a_shared_library_is_refused() {
    let ws = Workspace::new("not_a_library");
    let library = ws.write("libfake.so", "this is not an ELF file\n".repeat(200));
    let topology = topology_with_library(&ws, &library);
    for out in validate_and_run(&ws, &topology) {
        let line = assert_refused(&out, &library);
        assert!(line.contains("not a loadable shared library"), "{line}");
    }
}

#[test]
fn a_shared_library_that_is_not_a_squall_plugin_is_refused() {
    let ws = Workspace::new("not_a_plugin");
    let library = plugin_path("broken-not-a-plugin");
    let topology = topology_with_library(&ws, &library);
    for out in validate_and_run(&ws, &topology) {
        let line = assert_refused(&out, &library);
        assert!(line.contains("not a squall plugin"), "{line}");
    }
}

#[test]
fn a_plugin_built_against_another_contract_version_is_refused() {
    let ws = Workspace::new("version_mismatch");
    let library = plugin_path("broken-version-mismatch");
    let topology = topology_with_library(&ws, &library);
    for out in validate_and_run(&ws, &topology) {
        let line = assert_refused(&out, &library);
        assert!(line.contains("2.0.0"), "the plugin's version is named: {line}");
        assert!(line.contains("1.0.0"), "the host's version is named: {line}");
    }
}

#[test]
fn a_plugin_with_an_incompatible_layout_is_refused_with_a_short_message() {
    let ws = Workspace::new("abi_mismatch");
    let library = plugin_path("broken-abi-mismatch");
    let topology = topology_with_library(&ws, &library);
    for out in validate_and_run(&ws, &topology) {
        let line = assert_refused(&out, &library);
        assert!(line.contains("incompatible"), "{line}");
        // abi_stable's full layout report is tens of kilobytes; the host condenses it.
        assert!(line.len() < 300, "the message is {} chars long: {line}", line.len());
        assert!(out.stderr.len() < 1000, "stderr is {} bytes\n{}", out.stderr.len(), out.context());
    }
}

#[test]
fn an_unknown_component_is_a_config_error_with_a_did_you_mean() {
    let ws = Workspace::new("unknown_component");
    let text = r#"
[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::ConstSpuot"

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{ from = "source" }]
"#;
    let topology = ws.write_topology("topology.toml", text);
    let (line, col) = crate::util::loc_of(text, "\"testkit::ConstSpuot\"");
    let position = format!("{}:{line}:{col}: error:", topology.display());
    for out in validate_and_run(&ws, &topology) {
        out.assert_code(EXIT_CONFIG);
        let errors: Vec<&str> = out.stderr.lines().filter(|l| l.contains("error:")).collect();
        assert_eq!(errors.len(), 1, "one error\n{}", out.context());
        assert!(errors[0].starts_with(&position), "expected {position}\n{}", out.context());
        assert!(errors[0].contains("did you mean \"testkit::ConstSpout\""), "{}", out.context());
    }
}

/// A topology whose bolt is `testkit::<bolt>` (`<spout>` for the spout).
fn constructor_topology(ws: &Workspace, spout: &str, bolt: &str) -> std::path::PathBuf {
    ws.write_topology(
        "topology.toml",
        &format!(
            r#"
[plugins]
testkit = "{{testkit}}"

[spouts.source]
component = "testkit::{spout}"

[bolts.sink]
component = "testkit::{bolt}"
inputs = [{{ from = "source" }}]
"#
        ),
    )
}

#[test]
fn a_constructor_error_is_a_config_error_in_one_line_with_exit_78() {
    // A constructor builds the component from its `config` table, so its
    // error is a config error: reported at the component, exit 78.
    let ws = Workspace::new("constructor_error");
    let topology = constructor_topology(&ws, "FailOnNew", "NullBolt");
    for out in validate_and_run(&ws, &topology) {
        out.assert_code(78);
        let mentions: Vec<&str> = out.stderr.lines().filter(|l| l.contains("error:")).collect();
        assert_eq!(mentions.len(), 1, "one error line\n{}", out.context());
        let line = out.single_error_line();
        assert!(line.contains("\"source\""), "the component is named\n{}", out.context());
        assert!(line.contains("testkit::FailOnNew"), "the reference is named\n{}", out.context());
        assert!(line.contains("fail_on_new"), "the plugin's message is kept\n{}", out.context());
    }
}

#[test]
fn a_constructor_panic_is_reported_in_one_line_with_exit_69() {
    let ws = Workspace::new("constructor_panic");
    let topology = constructor_topology(&ws, "ConstSpout", "PanicOnNew");
    for out in validate_and_run(&ws, &topology) {
        out.assert_code(EXIT_UNAVAILABLE);
        // The plugin's own std prints its panic message through its own panic
        // hook ("thread '…' panicked at …"), which the host cannot silence; the
        // host's report is the one line that starts with "error:".
        let line = out.single_error_line();
        assert!(line.contains("\"sink\""), "the component is named\n{}", out.context());
        assert!(line.contains("testkit::PanicOnNew"), "the reference is named\n{}", out.context());
        assert!(line.contains("panicked"), "it says it panicked\n{}", out.context());
        assert!(line.contains("panic_on_new"), "the panic message is kept\n{}", out.context());
    }
}

#[test]
fn inspect_lists_components_with_kinds_streams_fields_and_the_contract_version() {
    let ws = Workspace::new("inspect");
    let out = SquallCommand::inspect(&ws, &plugin_path("testkit")).output();
    out.assert_code(0);
    let lines: Vec<&str> = out.stdout.lines().map(str::trim).collect();
    assert!(
        lines[0].starts_with("plugin squall-testkit ") && lines[0].contains("(contract 1.3.0)"),
        "header\n{}",
        out.context()
    );
    // Each component line is followed by its description and its streams.
    let streams_of = |kind: &str, name: &str| -> Vec<&str> {
        let at = lines
            .iter()
            .position(|l| {
                let mut words = l.split_whitespace();
                words.next() == Some(kind) && words.next() == Some(name)
            })
            .unwrap_or_else(|| panic!("no {kind} {name}\n{}", out.context()));
        lines[at + 1..]
            .iter()
            .skip(1) // the description
            .take_while(|l| l.starts_with("stream "))
            .copied()
            .collect()
    };
    assert_eq!(streams_of("spout", "ConstSpout"), ["stream default [value]"]);
    assert_eq!(streams_of("spout", "DirectSpout"), ["stream direct direct [value]"]);
    assert_eq!(
        streams_of("spout", "MultiStreamSpout"),
        ["stream even [value]", "stream odd [value]"]
    );
    assert_eq!(streams_of("bolt", "IdBolt"), ["stream default [value]"]);
    assert_eq!(streams_of("bolt", "PackBolt"), ["stream default [value]"]);
    assert_eq!(streams_of("bolt", "NullBolt"), Vec::<&str>::new());
    let components =
        lines.iter().filter(|l| l.starts_with("spout ") || l.starts_with("bolt ")).count();
    // 23 with a 1.0 descriptor (BlockOnPrepare the latest), and the
    // windowed WindowSizeBolt and WindowDigest (1.1 only).
    assert_eq!(components, 25, "every testkit component is listed\n{}", out.context());
}

/// Whether a spout keeps a checkpoint position decides whether durable
/// state is exact across a restart: `inspect` says it for every spout.
#[test]
fn inspect_says_whether_each_spout_keeps_a_checkpoint_position() {
    let ws = Workspace::new("inspect_positions");
    let line_after = |plugin: &str, name: &str| -> String {
        let out = SquallCommand::inspect(&ws, &plugin_path(plugin)).output();
        out.assert_code(0);
        let lines: Vec<&str> = out.stdout.lines().map(str::trim).collect();
        let at = lines
            .iter()
            .position(|l| l.split_whitespace().take(2).eq(["spout", name]))
            .unwrap_or_else(|| panic!("no spout {name}\n{}", out.context()));
        lines[at + 1..]
            .iter()
            .take_while(|l| !l.starts_with("spout ") && !l.starts_with("bolt "))
            .find(|l| l.starts_with("checkpoint position: "))
            .map_or_else(
                || panic!("no position line for {name}\n{}", out.context()),
                |l| l.to_string(),
            )
    };
    assert!(line_after("examples", "RandomSentenceSpout").contains(": kept"));
    assert!(line_after("testkit", "ConstSpout").contains(": none"));
}

#[test]
fn inspect_shows_declared_config_keys_and_expected_input_fields() {
    let ws = Workspace::new("inspect_keys");
    let out = SquallCommand::inspect(&ws, &plugin_path("testkit")).output();
    out.assert_code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    // The lines under a component, up to the next component.
    let section = |name: &str| -> Vec<&str> {
        let at = lines
            .iter()
            .position(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("no component {name}\n{}", out.context()));
        lines[at + 1..].iter().take_while(|l| l.starts_with("   ")).copied().collect()
    };
    let replay = section("ReplaySpout");
    let keys_at = replay.iter().position(|l| l.trim() == "config keys:").expect("a key table");
    let rows: Vec<Vec<&str>> =
        replay[keys_at + 1..].iter().map(|l| l.split_whitespace().take(3).collect()).collect();
    assert_eq!(
        rows,
        [
            vec!["messages", "integer", "100000"],
            vec!["log", "string", "required"],
            vec!["done_file", "string", "-"],
            vec!["label", "string", "-"]
        ],
        "\n{}",
        out.context()
    );
    // The columns line up: every row's type starts at the same column.
    let type_columns: Vec<usize> = replay[keys_at + 1..]
        .iter()
        .map(|l| l.find("integer").or(l.find("string")).unwrap())
        .collect();
    assert!(type_columns.windows(2).all(|w| w[0] == w[1]), "{type_columns:?}\n{}", out.context());
    let done_file = replay.iter().find(|l| l.trim_start().starts_with("done_file")).unwrap();
    assert!(done_file.ends_with("created once every message is acked"), "{done_file}");
    assert!(
        section("NullBolt").iter().any(|l| l.trim() == "config keys: none"),
        "{}",
        out.context()
    );
    assert!(
        section("NullBolt").iter().any(|l| l.trim() == "input fields: any"),
        "{}",
        out.context()
    );

    let out = SquallCommand::inspect(&ws, &plugin_path("examples")).output();
    out.assert_code(0);
    let lines: Vec<&str> = out.stdout.lines().map(str::trim).collect();
    let at = lines.iter().position(|l| l.starts_with("bolt") && l.contains(" WordCount")).unwrap();
    let word_count: Vec<&str> =
        lines[at + 1..].iter().take_while(|l| !l.starts_with("bolt ")).copied().collect();
    assert!(word_count.contains(&"input fields: word"), "{}", out.context());
    assert!(word_count.contains(&"config keys: none"), "{}", out.context());
    // Issue 41: a bolt's declared stores (contract 1.3's `STORES`); one
    // that declares none gets no line.
    assert!(!word_count.iter().any(|l| l.starts_with("stores")), "{}", out.context());
    let at = lines.iter().position(|l| l.starts_with("bolt") && l.contains(" DurableWordCount"));
    let durable: Vec<&str> = lines[at.expect("DurableWordCount") + 1..]
        .iter()
        .take_while(|l| !l.starts_with("bolt "))
        .copied()
        .collect();
    assert!(durable.contains(&"stores: counts (keyed)"), "{}", out.context());
    let seed = lines.iter().find(|l| l.starts_with("seed ")).expect("RandomSentenceSpout's seed");
    let seed: Vec<&str> = seed.split_whitespace().take(3).collect();
    assert_eq!(seed, ["seed", "integer", "42"], "{}", out.context());
}

#[test]
fn inspect_refuses_a_foreign_library_with_one_error_line() {
    let ws = Workspace::new("inspect_foreign");
    let library = plugin_path("broken-not-a-plugin");
    let out = SquallCommand::inspect(&ws, &library).output();
    out.assert_code(EXIT_UNAVAILABLE);
    let line = out.single_error_line();
    assert!(line.contains(&library.display().to_string()), "{}", out.context());
}

#[test]
fn two_copies_of_one_library_load_side_by_side() {
    let ws = Workspace::new("two_copies");
    let copy = ws.path("libtestkit_copy.so");
    std::fs::copy(plugin_path("testkit"), &copy).expect("copy the testkit library");
    let topology = ws.write_topology(
        "copies.toml",
        &format!(
            r#"
[plugins]
testkit = "{{testkit}}"
copy = "{}"

[spouts.source]
component = "copy::ConstSpout"
config = {{ value = "from-the-copy", limit = 20 }}

[bolts.sink]
component = "testkit::RecordBolt"
config = {{ out = "{{dir}}/sink" }}
inputs = [{{ from = "source" }}]
"#,
            copy.display()
        ),
    );
    let out = SquallCommand::run(&ws, &topology, "1s").output();
    out.assert_code(0);
    let records = read_records(&ws, "sink", 1, &out);
    let keys = &records.values().next().expect("one report").keys;
    assert_eq!(keys.get("from-the-copy"), Some(&20), "\n{}", out.context());
}

/// Runs the swap topology once and returns the flavour the spout printed.
fn run_swap(ws: &Workspace, topology: &Path) -> String {
    let out = SquallCommand::run(ws, topology, "1s").output();
    out.assert_code(0);
    let flavors: Vec<&str> =
        out.stdout.lines().filter_map(|l| l.strip_prefix("swap-demo flavor: ")).collect();
    assert_eq!(flavors.len(), 1, "one spout task prints its flavour once\n{}", out.context());
    let records = read_records(ws, "sink", 1, &out);
    let keys = &records.values().next().expect("one report").keys;
    let expected = [(flavors[0].to_owned(), 1)].into();
    assert_eq!(keys, &expected, "the spout emits its flavour once\n{}", out.context());
    let _ = std::fs::remove_file(ws.path(format!("sink.{}", records.keys().next().unwrap())));
    flavors[0].to_owned()
}

#[test]
fn a_rebuilt_plugin_swapped_in_between_runs_is_picked_up_without_rebuilding_the_host() {
    let ws = Workspace::new("hot_swap");
    // The live reload test builds other flavours into the same folder.
    let _build = swap_build_lock();
    let built = release_dir().join("libsquall_swap_demo.so");
    let installed = ws.path("libswap.so");
    let host = squall_bin();

    // v1, explicitly: the environment of the test must not leak a flavour in.
    cargo_build_release(&[SWAP_PACKAGE], |cmd| {
        cmd.env_remove(SWAP_FLAVOR_VAR);
    });
    std::fs::copy(&built, &installed).expect("install v1");
    let host_mtime = std::fs::metadata(&host).and_then(|m| m.modified()).expect("host mtime");
    let topology = ws.write_topology(
        "swap.toml",
        r#"
[plugins]
swap = "{dir}/libswap.so"
testkit = "{testkit}"

[spouts.flavor]
component = "swap::FlavorSpout"

[bolts.sink]
component = "testkit::RecordBolt"
config = { out = "{dir}/sink" }
inputs = [{ from = "flavor" }]
"#,
    );
    assert_eq!(run_swap(&ws, &topology), "v1");

    // v2, swapped in atomically, as an operator would.
    cargo_build_release(&[SWAP_PACKAGE], |cmd| {
        cmd.env(SWAP_FLAVOR_VAR, "v2");
    });
    let staged = ws.path("libswap.so.new");
    std::fs::copy(&built, &staged).expect("stage v2");
    std::fs::rename(&staged, &installed).expect("swap v2 in");
    assert_eq!(run_swap(&ws, &topology), "v2");

    let after = std::fs::metadata(&host).and_then(|m| m.modified()).expect("host mtime");
    assert_eq!(host_mtime, after, "the host binary was rebuilt; the swap must not need that");
}

#[test]
fn a_constructor_that_blocks_is_reported_by_name_after_the_startup_timeout() {
    let ws = Workspace::new("blocking_constructor");
    let topology = ws.write_topology(
        "topology.toml",
        r#"
[topology]
startup_timeout_secs = 1

[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::BlockOnNew"

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{ from = "source" }]
"#,
    );
    for out in validate_and_run(&ws, &topology) {
        out.assert_code(EXIT_UNAVAILABLE);
        let line = out.single_error_line();
        assert!(
            line.contains("spout \"source\" (testkit::BlockOnNew)"),
            "the component is named\n{}",
            out.context()
        );
        assert!(
            line.contains("did not return within 1 s"),
            "the limit is given\n{}",
            out.context()
        );
    }
}

/// The end of the last loadable segment (`PT_LOAD`) of an ELF64
/// little-endian file: what the dynamic loader maps. Read here by hand so
/// the test does not trust the host's parser.
fn loaded_end(bytes: &[u8]) -> u64 {
    let u16_at = |at: usize| u64::from(u16::from_le_bytes([bytes[at], bytes[at + 1]]));
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    assert_eq!(&bytes[..6], b"\x7fELF\x02\x01", "an ELF64 little-endian library");
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    (0..phnum)
        .map(|i| usize::try_from(phoff + i * phentsize).expect("small"))
        .filter(|&at| u32_at(at) == 1)
        .map(|at| u64_at(at + 8) + u64_at(at + 32))
        .max()
        .expect("a PT_LOAD segment")
}

#[test]
fn a_truncated_library_is_refused_in_one_line_never_with_a_signal() {
    use std::os::unix::process::ExitStatusExt;
    let ws = Workspace::new("truncated_library");
    let bytes = std::fs::read(plugin_path("testkit")).expect("read the testkit library");
    // Cut at 60% of what is mapped (the debug info after it is never mapped,
    // so 60% of the file could leave every segment whole).
    let cut = loaded_end(&bytes) * 6 / 10;
    let library = ws.write("libtruncated.so", &bytes[..usize::try_from(cut).expect("small")]);
    let topology = topology_with_library(&ws, &library);
    let [validate, run] = validate_and_run(&ws, &topology);
    let mut inspect = SquallCommand::inspect(&ws, &library);
    inspect.limit(Duration::from_secs(30));
    let inspect = inspect.output();
    for out in [&inspect, &validate, &run] {
        assert!(
            out.status.code().is_some(),
            "squall was killed by signal {:?} instead of refusing the library\n{}",
            out.status.signal(),
            out.context()
        );
        out.assert_code(EXIT_UNAVAILABLE);
        let line = out.single_error_line();
        assert!(line.contains(&library.display().to_string()), "the path is named\n{line}");
        assert!(line.contains("is truncated"), "{line}");
        assert!(line.contains("PT_LOAD") && line.contains("past the end of the file"), "{line}");
    }
    for out in [&validate, &run] {
        assert!(out.single_error_line().contains("plugin \"testkit\""), "{}", out.context());
    }
}

#[test]
fn a_library_overwritten_in_place_while_it_runs_does_not_stop_the_run() {
    let ws = Workspace::new("overwritten_library");
    let library = ws.path("libtestkit.so");
    std::fs::copy(plugin_path("testkit"), &library).expect("install the testkit library");
    let topology = ws.write_topology(
        "overwrite.toml",
        &format!(
            r#"
[plugins]
testkit = "{}"

[spouts.source]
component = "testkit::ConstSpout"
throttle = {{ tuples_per_sec = 2000 }}

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{{ from = "source" }}]
"#,
            library.display()
        ),
    );
    let mut cmd = SquallCommand::run_until_interrupted(&ws, &topology);
    cmd.limit(Duration::from_secs(60));
    let mut child = cmd.spawn();
    let step = Duration::from_secs(20);
    let before = child.wait_for_stat("sink", "executed", |n| n >= 200, step);
    // What `cp other.so libtestkit.so` does: truncate the file, then write
    // another library (smaller than testkit's) into the same inode.
    let other = plugin_path("broken-not-a-plugin");
    let replacement = std::fs::read(&other).expect("read the other library");
    assert!(
        replacement.len() < std::fs::metadata(&library).expect("stat").len() as usize,
        "the replacement is smaller, so the old pages are gone, not just changed"
    );
    std::fs::copy(&other, &library).expect("cp the other library over the loaded one");
    assert_eq!(std::fs::read(&library).expect("read back"), replacement, "overwritten in place");
    // Two seconds of running the plugin's code (a crash ends the child
    // meanwhile), then a graceful stop, which calls into it again.
    std::thread::sleep(Duration::from_secs(2));
    child.interrupt();
    let out = child.wait();
    out.assert_code(0);
    let executed = out.stat("sink", "executed");
    assert!(executed >= before + 1000, "the run went on after the overwrite\n{}", out.context());
}
