//! Hardening (issue 14): the bad inputs that used to break squall.
//!
//! - a `sha256` pin holds while another thread renames libraries over the path;
//! - a FIFO, a device or a symbolic link loop as a plugin path is refused at
//!   once, with a message that says what it is;
//! - `squall inspect NAME.so` loads `./NAME.so`, never a copy found through
//!   `LD_LIBRARY_PATH`;
//! - a library, or a folder on its path, that group or others can write is
//!   refused unless the topology allows it;
//! - huge numbers and hostile names are config errors with file:line:col
//!   (exit 78), and `--duration` past its bound is a usage error (exit 2).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::util::{loc_of, plugin_path, Output, SquallCommand, Workspace};

/// EX_UNAVAILABLE: a plugin library could not be loaded.
const EXIT_UNAVAILABLE: i32 = 69;
/// EX_CONFIG: the topology file is invalid.
const EXIT_CONFIG: i32 = 78;
/// clap's usage error.
const EXIT_USAGE: i32 = 2;
/// Every refusal here is immediate; a hang is a failure, found quickly.
const QUICK: Duration = Duration::from_secs(20);

/// A minimal topology on the testkit component names, with the plugin entry
/// `testkit = <plugin>` written as given (a quoted path or an inline table).
fn topology(ws: &Workspace, plugin: &str, extra: &str) -> PathBuf {
    ws.write_topology(
        "topology.toml",
        &format!(
            r#"{extra}
[plugins]
testkit = {plugin}

[spouts.source]
component = "testkit::ConstSpout"

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{{ from = "source" }}]
"#
        ),
    )
}

/// `path` as a TOML string.
fn quoted(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

/// `squall validate` with a short watchdog.
fn validate(ws: &Workspace, topology: &Path) -> Output {
    let mut cmd = SquallCommand::validate(ws, topology);
    cmd.limit(QUICK);
    cmd.output()
}

fn sha256_hex(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Defect 1. A thread renames the testkit library and the examples library
/// over the pinned path, back and forth, while `validate` runs again and
/// again. The pin names testkit: every run either loads testkit (valid) or
/// refuses the digest. Loading examples after the digest check passed shows
/// as "unknown component" (exit 78): the bytes hashed were not the bytes loaded.
#[test]
fn a_sha256_pin_holds_while_the_library_is_renamed_over() {
    let ws = Workspace::new("pin_flip");
    let pinned = ws.path("libsquall_flip.so");
    let good = ws.path("good.so");
    let other = ws.path("other.so");
    std::fs::copy(plugin_path("testkit"), &good).expect("copy testkit");
    std::fs::copy(plugin_path("examples"), &other).expect("copy examples");
    std::fs::copy(&good, &pinned).expect("install testkit");
    let digest = sha256_hex(&good);
    let plugin = format!("{{ path = {}, sha256 = \"{digest}\" }}", quoted(&pinned));
    let topology = topology(&ws, &plugin, "");

    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, pinned, tmp) = (Arc::clone(&stop), pinned.clone(), ws.path("next.so"));
        let (good, other) = (good.clone(), other.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                for source in [&other, &good] {
                    let _ = std::fs::remove_file(&tmp);
                    std::fs::hard_link(source, &tmp).expect("link");
                    std::fs::rename(&tmp, &pinned).expect("rename over the pinned path");
                    flips += 1;
                }
            }
            flips
        })
    };

    let (mut valid, mut refused, mut runs) = (0, 0, 0);
    let started = Instant::now();
    let mut failure = None;
    while runs < 60 && started.elapsed() < Duration::from_secs(40) {
        runs += 1;
        let out = validate(&ws, &topology);
        match out.status.code() {
            Some(0) if out.stdout.contains("is valid") => valid += 1,
            Some(EXIT_UNAVAILABLE)
                if out.single_error_line().contains("but the topology expects") =>
            {
                refused += 1;
            }
            _ => {
                failure = Some(out.context());
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().expect("the flipper thread");
    if let Some(context) = failure {
        panic!("run {runs} loaded an unpinned library ({valid} valid, {refused} refused before it):\n{context}");
    }
    assert!(flips > 0, "the library was never renamed over");
    assert!(valid + refused == runs && runs >= 10, "{runs} runs: {valid} valid, {refused} refused");
}

/// Defect 2. A FIFO as a plugin path: `validate`, `run` and `inspect` each
/// refuse it at once instead of waiting for a writer forever.
#[test]
fn a_fifo_as_plugin_path_is_refused_at_once() {
    let ws = Workspace::new("fifo_plugin");
    let fifo = ws.path("libfifo.so");
    let c_path = std::ffi::CString::new(fifo.display().to_string()).expect("no NUL");
    // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0, "mkfifo");
    let topology = topology(&ws, &quoted(&fifo), "");
    let mut run = SquallCommand::run(&ws, &topology, "60s");
    run.limit(QUICK);
    let mut inspect = SquallCommand::inspect(&ws, &fifo);
    inspect.limit(QUICK);
    for out in [validate(&ws, &topology), run.output(), inspect.output()] {
        out.assert_code(EXIT_UNAVAILABLE);
        let line = out.single_error_line();
        assert!(line.contains("is a FIFO (named pipe), not a regular file"), "{line}");
        assert!(line.contains(&fifo.display().to_string()), "{line}");
    }
}

/// Defect 2. A pinned character device is refused before a byte is read
/// (it used to be read whole: 3.7 GB after one second of `/dev/zero`).
#[test]
fn a_pinned_device_is_refused_before_it_is_read() {
    let ws = Workspace::new("pinned_device");
    let plugin = format!("{{ path = \"/dev/zero\", sha256 = \"{}\" }}", "0".repeat(64));
    let topology = topology(&ws, &plugin, "");
    let out = validate(&ws, &topology);
    out.assert_code(EXIT_UNAVAILABLE);
    let line = out.single_error_line();
    assert!(line.contains("/dev/zero is a character device, not a regular file"), "{line}");
}

/// Defect 2. A symbolic link loop says so, not "does not exist".
#[test]
fn a_symlink_loop_is_reported_as_one() {
    let ws = Workspace::new("symlink_loop");
    let (a, b) = (ws.path("liba.so"), ws.path("libb.so"));
    std::os::unix::fs::symlink(&b, &a).expect("symlink");
    std::os::unix::fs::symlink(&a, &b).expect("symlink");
    let out = validate(&ws, &topology(&ws, &quoted(&a), ""));
    out.assert_code(EXIT_UNAVAILABLE);
    let line = out.single_error_line();
    assert!(line.contains("is a symbolic link loop"), "{line}");
    assert!(!line.contains("does not exist"), "{line}");
}

/// Defect 3. `squall inspect NAME.so` with a bare name inspects `./NAME.so`,
/// even when `LD_LIBRARY_PATH` holds another library of that name.
#[test]
fn inspect_with_a_bare_name_loads_the_file_in_the_current_folder() {
    let ws = Workspace::new("inspect_bare_name");
    let name = "libsquall_bare.so";
    std::fs::copy(plugin_path("testkit"), ws.path(name)).expect("copy testkit");
    let decoy = ws.path("decoy");
    std::fs::create_dir(&decoy).expect("mkdir");
    std::fs::copy(plugin_path("examples"), decoy.join(name)).expect("copy examples");
    let mut cmd = SquallCommand::new(&ws, ["inspect", name]);
    cmd.env("LD_LIBRARY_PATH", &decoy).limit(QUICK);
    let out = cmd.output();
    out.assert_code(0);
    assert!(out.stdout.contains("ConstSpout"), "the file in . was inspected\n{}", out.context());
    assert!(
        !out.stdout.contains("RandomSentenceSpout"),
        "the decoy on LD_LIBRARY_PATH was loaded\n{}",
        out.context()
    );
}

/// Defect 11. A library in a folder anyone can write, or a library anyone
/// can write, is refused with the path at fault and the fix; the topology
/// (for all plugins, or for one) or the environment can allow it.
#[test]
fn writable_plugin_libraries_are_refused_unless_allowed() {
    use std::os::unix::fs::PermissionsExt;
    let ws = Workspace::new("writable_plugin");
    let open = ws.path("open");
    std::fs::create_dir(&open).expect("mkdir");
    let library = open.join("libsquall_tk.so");
    std::fs::copy(plugin_path("testkit"), &library).expect("copy testkit");
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };

    mode(&open, 0o777);
    let out = validate(&ws, &topology(&ws, &quoted(&library), ""));
    out.assert_code(EXIT_UNAVAILABLE);
    let line = out.single_error_line();
    let folder = open.display().to_string();
    assert!(line.contains(&format!("{folder} is writable by group and others")), "{line}");
    assert!(line.contains(&format!("chmod go-w {folder}, ")), "{line}");

    let allow_all = "[topology]\nallow_writable_plugins = true\n";
    validate(&ws, &topology(&ws, &quoted(&library), allow_all)).assert_code(0);
    let one = format!("{{ path = {}, allow_writable = true }}", quoted(&library));
    validate(&ws, &topology(&ws, &one, "")).assert_code(0);

    mode(&open, 0o755);
    mode(&library, 0o646);
    let topology = topology(&ws, &quoted(&library), "");
    let out = validate(&ws, &topology);
    out.assert_code(EXIT_UNAVAILABLE);
    let line = out.single_error_line();
    assert!(line.contains(&format!("{} is writable by others", library.display())), "{line}");
    let mut inspect = SquallCommand::inspect(&ws, &library);
    inspect.limit(QUICK);
    inspect.output().assert_code(EXIT_UNAVAILABLE);
    inspect.env("SQUALL_ALLOW_WRITABLE_PLUGINS", "1");
    inspect.output().assert_code(0);

    mode(&library, 0o644);
    validate(&ws, &topology).assert_code(0);
}

/// Asserts a config error (exit 78) whose single line starts at the place
/// `needle` is written in `text`.
#[track_caller]
fn assert_config_error_at(out: &Output, topology: &Path, text: &str, needle: &str) -> String {
    out.assert_code(EXIT_CONFIG);
    let line = out.single_error_line();
    let (l, c) = loc_of(text, needle);
    let prefix = format!("{}:{l}:{c}: error: ", topology.display());
    assert!(line.starts_with(&prefix), "expected {prefix}...\n{}", out.context());
    line.to_string()
}

/// Defects 4 and 5. Each hostile number from the issue is refused by
/// `validate` (and `run`) with its location, before anything is built.
#[test]
fn huge_settings_are_config_errors_with_their_location() {
    let ws = Workspace::new("huge_settings");
    let huge = "9223372036854775807";
    let cases: [(&str, &str, &str); 6] = [
        ("[topology]\nmessage_timeout_secs = {v}\n", huge, "at most 86400"),
        ("[topology]\ntimeout_buckets = {v}\n", "100000000", "at most 1024"),
        ("[topology]\nacker_executors = {v}\n", "100000", "at most 64"),
        ("[topology]\nreceive_buffer_size = {v}\n", "2000000000", "at most 1048576"),
        ("[bolts.b]\ncomponent = \"testkit::NullBolt\"\nparallelism = {v}\ninputs = [{{ from = \"source\" }}]\n", "4294967295", "at most 1024"),
        ("[bolts.b]\ncomponent = \"testkit::NullBolt\"\ntick_tuple_freq_secs = {v}\ninputs = [{{ from = \"source\" }}]\n", huge, "at most 86400"),
    ];
    for (template, value, want) in cases {
        let extra = template.replace("{v}", value).replace("{{", "{").replace("}}", "}");
        let path = topology(&ws, &quoted(&plugin_path("testkit")), &extra);
        let text = std::fs::read_to_string(&path).expect("read back");
        let out = validate(&ws, &path);
        let line = assert_config_error_at(&out, &path, &text, &format!("{value}\n"));
        assert!(line.contains(want), "{line}");
        let mut run = SquallCommand::run(&ws, &path, "60s");
        run.limit(QUICK);
        run.output().assert_code(EXIT_CONFIG);
    }
}

/// Defect 5. A topology whose queues would not fit its memory budget is
/// refused at the budget setting.
#[test]
fn a_topology_over_its_memory_budget_is_refused() {
    let ws = Workspace::new("memory_budget");
    let extra = "[topology]\nreceive_buffer_size = 1048576\nmemory_budget_mib = 64\n";
    let path = topology(&ws, &quoted(&plugin_path("testkit")), extra);
    let text = std::fs::read_to_string(&path).expect("read back");
    let line = assert_config_error_at(&validate(&ws, &path), &path, &text, "64\n");
    assert!(line.contains("more than memory_budget_mib = 64"), "{line}");
}

/// Defect 5. `--duration` past its bound is a usage error, not a panic.
#[test]
fn a_huge_duration_is_a_usage_error() {
    let ws = Workspace::new("huge_duration");
    let path = topology(&ws, &quoted(&plugin_path("testkit")), "");
    let mut cmd = SquallCommand::new(&ws, ["run"]);
    cmd.arg(&path).args(["--duration", "9223372036854775807s"]).limit(QUICK);
    let out = cmd.output();
    out.assert_code(EXIT_USAGE);
    assert!(out.stderr.contains("at most 366 days"), "{}", out.context());
    assert!(!out.stderr.contains("panicked"), "{}", out.context());
}

/// Defect 6. A NUL, ESC or newline in a component name is a config error at
/// the name (it used to pass validate, then panic in `run`), and the raw
/// control character never reaches the terminal.
#[test]
fn names_with_control_characters_are_refused_and_escaped() {
    let ws = Workspace::new("hostile_names");
    for (escaped, shown) in [
        ("a\\u0000b", "a\\0b"),
        ("x\\u001b[2Jy", "x\\u{1b}[2Jy"),
        ("l\\nerror: forged", "l\\nerror: forged"),
    ] {
        let text = ws.fill(&format!(
            r#"[plugins]
testkit = "{{testkit}}"

[spouts."{escaped}"]
component = "testkit::ConstSpout"
"#
        ));
        let path = ws.write("topology.toml", &text);
        let out = validate(&ws, &path);
        let line = assert_config_error_at(&out, &path, &text, &format!("\"{escaped}\"]"));
        assert!(line.contains(&format!("spout name \"{shown}\"")), "{line}");
        for output in [&out.stdout, &out.stderr] {
            assert!(!output.contains(['\0', '\u{1b}']), "{}", out.context());
        }
        assert_eq!(out.stderr.lines().count(), 1, "one line, no forged one\n{}", out.context());
        let mut run = SquallCommand::run(&ws, &path, "60s");
        run.limit(QUICK);
        run.output().assert_code(EXIT_CONFIG);
    }
}
