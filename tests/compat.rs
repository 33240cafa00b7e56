//! The plugin contract's compatibility promise: plugins built against
//! plugin-api 1.0.0, 1.1.0 and 1.2.0 (taken from git history) load and run
//! unchanged in this host (contract 1.3), the 1.1 additions (host logging,
//! user metrics) work for a plugin built against 1.1, and the 1.2 ones
//! (declared keys, durable stores) for a plugin built against 1.2.
//!
//! The 1.0.0 plugin is `plugins/examples` at [`CONTRACT_1_0`], built from a
//! `git archive` of that commit in its own target directory, once per test
//! process. Without git history (a source tarball, a shallow clone) the
//! test is skipped, or fails under `SQUALL_REQUIRE_TOOLS=1` (CI). The same
//! is done for [`PRE_RELEASE_1_1`], a library whose 1.1 part no longer
//! matches: it loads through its 1.0 descriptors, with a warning that says
//! so; and for [`PRE_RELEASE_1_3`], which loads through its 1.2 ones. The
//! other way round, a library of this contract refuses a host of an older
//! one in one line: [`older_host`] loads it as their loaders did.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::http::{poll, request, start};
use crate::run::{expected_word_counts, printed_word_counts, word_count_topology, SENTENCE_LIMIT};
use crate::util::{
    cargo, require_tool, target_root, workspace_root, SquallCommand, Workspace, REQUIRE_VAR,
};

/// The last commit of contract 1.0.0 (plugin-api 1.0.0, before 1.1 began).
const CONTRACT_1_0: &str = "a479b9376badbc4d888361e35e5891163de086a2";

/// The last commit of contract 1.1.0 (plugin-api 1.1.0, before 1.2 began).
const CONTRACT_1_1: &str = "3209e9ae5795c7db18dff206428c2e626d9b05c0";

/// The last commit of contract 1.2.0 (plugin-api 1.2.0, before 1.3 began).
const CONTRACT_1_2: &str = "6bb1b2dd213212624ca0a7a22b40f4cecbdd7a07";

/// Contract 1.1.0 as an earlier stop shipped it, before a spout's
/// `next_tuple` took a `SpoutOutput`: its 1.1 part no longer matches this
/// host's (plugin-api 1.1 was never published, so its types still moved).
const PRE_RELEASE_1_1: &str = "0b892d984d482500a827f224deceebbca859c26c";

/// Contract 1.3.0 as an earlier stop shipped it, before `DynHost13` said
/// the host's contract: its 1.3 part no longer matches this host's.
const PRE_RELEASE_1_3: &str = "ec189b9f6a966eb2d0849809439b099d41e351fd";

type Built = OnceLock<Result<Option<PathBuf>, String>>;

/// Builds `plugins/examples` as of [`CONTRACT_1_0`]; returns its library, or
/// `None` (skipped) when the commit is not in this checkout's history.
fn examples_1_0() -> Option<PathBuf> {
    static BUILT: Built = OnceLock::new();
    examples_at(CONTRACT_1_0, "compat-1.0.0", 13, &BUILT)
}

/// Builds `plugins/examples` as of [`CONTRACT_1_1`], as [`examples_1_0`].
fn examples_1_1() -> Option<PathBuf> {
    static BUILT: Built = OnceLock::new();
    examples_at(CONTRACT_1_1, "compat-1.1.0", 14, &BUILT)
}

/// Builds `plugins/examples` as of [`CONTRACT_1_2`], as [`examples_1_0`].
fn examples_1_2() -> Option<PathBuf> {
    static BUILT: Built = OnceLock::new();
    examples_at(CONTRACT_1_2, "compat-1.2.0", 16, &BUILT)
}

/// Builds `plugins/examples` as of [`PRE_RELEASE_1_1`], as [`examples_1_0`].
fn examples_pre_1_1() -> Option<PathBuf> {
    static BUILT: Built = OnceLock::new();
    examples_at(PRE_RELEASE_1_1, "compat-pre-1.1", 15, &BUILT)
}

/// Builds `plugins/examples` as of [`PRE_RELEASE_1_3`], as [`examples_1_0`].
fn examples_pre_1_3() -> Option<PathBuf> {
    static BUILT: Built = OnceLock::new();
    examples_at(PRE_RELEASE_1_3, "compat-pre-1.3", 17, &BUILT)
}

/// Builds `plugins/examples` as of `commit` in `target/<dir>`, once per
/// test process. `units` is the commit's own `codegen-units` for its two
/// crates (see the shared target directory below).
fn examples_at(
    commit: &'static str,
    dir: &str,
    units: u32,
    built: &'static Built,
) -> Option<PathBuf> {
    let built = built.get_or_init(|| {
        let root = workspace_root();
        let git = |args: &[&str]| {
            Command::new("git").current_dir(&root).args(args).status().is_ok_and(|s| s.success())
        };
        let object = format!("{commit}^{{commit}}");
        let has_git = require_tool("git").is_some();
        // A shallow clone lacks the commit: deepen it from its origin if
        // that is reachable (best effort), then look again.
        let has_commit = has_git
            && (git(&["cat-file", "-e", &object])
                || (git(&["fetch", "--quiet", "--unshallow"])
                    && git(&["cat-file", "-e", &object])));
        if !has_commit {
            let required = std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1");
            if required {
                return Err(format!("commit {commit} is not in this checkout"));
            }
            eprintln!("SKIPPED: commit {commit} is not in this checkout's history");
            return Ok(None);
        }
        let dir = target_root().join(dir);
        let src = dir.join("src");
        let _ = std::fs::remove_dir_all(&src);
        std::fs::create_dir_all(&src).map_err(|e| e.to_string())?;
        let archive = Command::new("git")
            .current_dir(&root)
            .args([
                "archive",
                "--format=tar",
                commit,
                "Cargo.toml",
                "Cargo.lock",
                "plugin-api",
                "plugins/examples",
            ])
            .output()
            .map_err(|e| e.to_string())?;
        if !archive.status.success() {
            return Err(String::from_utf8_lossy(&archive.stderr).into_owned());
        }
        let mut tar = Command::new("tar")
            .current_dir(&src)
            .args(["-x", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        std::io::Write::write_all(tar.stdin.as_mut().expect("stdin"), &archive.stdout)
            .map_err(|e| e.to_string())?;
        drop(tar.stdin.take());
        if !tar.wait().map_err(|e| e.to_string())?.success() {
            return Err("tar failed".into());
        }
        // The old workspace lists members this archive leaves out.
        let manifest = src.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).map_err(|e| e.to_string())?;
        let start = text.find("members = [").ok_or("no members list")?;
        let end = start + text[start..].find(']').ok_or("unclosed members list")?;
        let text = format!(
            "{}members = [\"plugin-api\", \"plugins/examples\"]{}",
            &text[..start],
            &text[end + 1..]
        );
        std::fs::write(&manifest, text).map_err(|e| e.to_string())?;
        // Later examples test themselves through squall-harness, which this
        // archive leaves out too; building the library does not need it.
        let manifest = src.join("plugins/examples/Cargo.toml");
        let text = std::fs::read_to_string(&manifest).map_err(|e| e.to_string())?;
        let text: Vec<&str> = text.lines().filter(|l| !l.starts_with("squall-harness")).collect();
        std::fs::write(&manifest, text.join("\n")).map_err(|e| e.to_string())?;
        // One target directory for every old commit: their dependencies
        // (abi_stable above all) are built once, not once per commit. The
        // builds take turns, and each copies its library out before the
        // next one writes the same path. Cargo hashes a workspace member by
        // its path relative to the workspace, so two commits' plugin-api
        // 1.1.0 would share one fingerprint and the second build would be
        // taken as fresh: a codegen-units of each commit's own for its two
        // crates gives them hashes of their own, and leaves the
        // dependencies' alone.
        static SHARED: Mutex<()> = Mutex::new(());
        let _turn = SHARED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let target = target_root().join("compat-target");
        let mut build = cargo();
        build.current_dir(&src).args(["build", "--release", "-p", "squall-examples"]);
        for package in ["squall-plugin-api", "squall-examples"] {
            let key = format!("profile.release.package.{package}.codegen-units={units}");
            build.arg("--config").arg(key);
        }
        let out = build.arg("--target-dir").arg(&target).output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let library = dir.join("libsquall_examples.so");
        std::fs::copy(target.join("release/libsquall_examples.so"), &library)
            .map_err(|e| format!("copying the built library: {e}"))?;
        Ok(Some(library))
    });
    match built {
        Ok(path) => path.clone(),
        Err(e) => panic!("building the examples of {commit} failed:\n{e}"),
    }
}

#[test]
fn a_library_whose_1_1_part_does_not_match_loads_through_1_0_and_says_why() {
    let Some(old) = examples_pre_1_1() else { return };
    // The warning names the contract it was built against and the first
    // mismatch, instead of calling it a 1.0 library.
    loads_with_a_warning_and_counts_words(
        &old,
        "compat_pre_1_1",
        "1.1.0",
        [
            "was built against contract 1.1.0, but its contract 1.1 part does not match this host's (",
            "it loads through its 1.0 descriptors, without its 1.1 features",
        ],
    );
}

#[test]
fn a_library_whose_1_3_part_does_not_match_loads_through_1_2_and_says_why() {
    let Some(old) = examples_pre_1_3() else { return };
    loads_with_a_warning_and_counts_words(
        &old,
        "compat_pre_1_3",
        "1.3.0",
        [
            "was built against contract 1.3.0, but its contract 1.3.0 part does not match this host's (",
            "it loads through its 1.2 descriptors, without what later contracts added",
        ],
    );
}

/// `inspect` lists the pre-release library `old` as of contract `built`
/// and warns with both parts of `warning`; through its older descriptors
/// it still runs word count exactly.
fn loads_with_a_warning_and_counts_words(
    old: &std::path::Path,
    name: &str,
    built: &str,
    warning: [&str; 2],
) {
    let ws = Workspace::new(name);
    let inspect = SquallCommand::inspect(&ws, old).output();
    inspect.assert_code(0);
    let contract = format!("(contract {built})");
    assert!(inspect.stdout.contains(&contract), "\n{}", inspect.context());
    for part in warning {
        assert!(inspect.stderr.contains(part), "{part:?}\n{}", inspect.context());
    }
    let toml = word_count_topology(1).replace("{examples}", &old.display().to_string());
    let topology = ws.write_topology("wc.toml", &toml);
    let out = SquallCommand::run(&ws, &topology, "3s").output();
    out.assert_code(0);
    assert_eq!(printed_word_counts(&out), expected_word_counts(), "\n{}", out.context());
    assert_eq!(out.stat("sentences", "acked"), SENTENCE_LIMIT, "\n{}", out.context());
}

#[test]
fn a_plugin_built_against_contract_1_0_loads_and_runs_in_this_host() {
    let Some(old) = examples_1_0() else { return };
    let ws = Workspace::new("compat_1_0");

    // `inspect` reads its catalogue: contract 1.0.0.
    let inspect = SquallCommand::inspect(&ws, &old).output();
    inspect.assert_code(0);
    assert!(inspect.stdout.contains("(contract 1.0.0)"), "\n{}", inspect.context());
    // It predates declared config keys: every component says so.
    let notes: Vec<&str> = inspect.stdout.lines().filter(|l| l.contains("config keys")).collect();
    assert_eq!(notes.len(), 3, "one per component\n{}", inspect.context());
    assert!(
        notes.iter().all(|l| l.trim() == "config keys: not declared (contract 1.0)"),
        "\n{}",
        inspect.context()
    );

    // Word count on the 1.0.0 library: exact counts, every sentence acked.
    let toml = word_count_topology(1).replace("{examples}", &old.display().to_string());
    let topology = ws.write_topology("wc.toml", &toml);
    let out = SquallCommand::run(&ws, &topology, "3s").output();
    out.assert_code(0);
    assert_eq!(printed_word_counts(&out), expected_word_counts(), "\n{}", out.context());
    assert_eq!(out.stat("sentences", "acked"), SENTENCE_LIMIT, "\n{}", out.context());
    assert!(!out.stderr.contains("counting words"), "a 1.0 plugin does not log through the host");
    assert!(
        out.stderr.contains("does not record its panic strategy"),
        "a 1.0 plugin loads with a warning about its panic strategy\n{}",
        out.context()
    );
    assert!(
        !out.stderr.contains("does not match this host's"),
        "a 1.0 library is expected to load through its 1.0 descriptors\n{}",
        out.context()
    );

    // The same library under --http: it has no user metrics, and nothing breaks.
    let (child, addr) = start(&ws, &toml);
    let c = poll(addr, "/api/v1/components/count", Duration::from_secs(30), |c| {
        c["tasks"][0]["executed"].as_u64().unwrap_or(0) > 0
    });
    assert_eq!(c["user_metrics"], serde_json::json!([]), "{c:#}");
    assert!(!request(addr, "GET", "/metrics").body.contains("squall_user_"));
    drop(child);
}

/// `squall inspect` reads the examples library `old` as built against
/// `contract`, and word count runs on it with exact counts, every sentence
/// acked, loaded through its own root module (no fallback warning).
/// Returns the word-count topology.
fn counts_words_through_its_own_root(
    ws: &Workspace,
    old: &std::path::Path,
    contract: &str,
) -> String {
    let inspect = SquallCommand::inspect(ws, old).output();
    inspect.assert_code(0);
    let header = format!("(contract {contract})");
    assert!(inspect.stdout.contains(&header), "\n{}", inspect.context());
    let toml = word_count_topology(1).replace("{examples}", &old.display().to_string());
    let topology = ws.write_topology("wc.toml", &toml);
    let out = SquallCommand::run(ws, &topology, "3s").output();
    out.assert_code(0);
    assert_eq!(printed_word_counts(&out), expected_word_counts(), "\n{}", out.context());
    assert_eq!(out.stat("sentences", "acked"), SENTENCE_LIMIT, "\n{}", out.context());
    assert!(
        !out.stderr.contains("does not match this host's")
            && !out.stderr.contains("does not record its panic strategy"),
        "a {contract} library loads through its own root module\n{}",
        out.context()
    );
    toml
}

#[test]
fn a_plugin_built_against_contract_1_1_loads_runs_logs_and_exports_its_metrics() {
    let Some(old) = examples_1_1() else { return };
    let ws = Workspace::new("contract_1_1");
    let toml = counts_words_through_its_own_root(&ws, &old, "1.1.0");

    let (child, addr) = start(&ws, &toml);
    // Both tasks have registered (each in its own `prepare`) and counted.
    let c = poll(addr, "/api/v1/components/count", Duration::from_secs(30), |c| {
        c["user_metrics"].as_array().is_some_and(|m| {
            let distinct: Vec<i64> = m
                .iter()
                .filter(|m| m["name"] == "distinct_words")
                .map(|m| m["value"].as_i64().unwrap_or(0))
                .collect();
            distinct.len() == 2 && distinct.iter().all(|&v| v > 0)
        })
    });
    let metrics = c["user_metrics"].as_array().unwrap();
    let words: u64 =
        metrics.iter().filter(|m| m["name"] == "words").map(|m| m["value"].as_u64().unwrap()).sum();
    assert!(words > 0, "{c:#}");
    assert_eq!(metrics.iter().filter(|m| m["name"] == "distinct_words").count(), 2, "one per task");
    let text = request(addr, "GET", "/metrics").body;
    assert!(text.contains("# TYPE squall_user_distinct_words gauge"), "{text}");
    assert!(text.contains("# TYPE squall_user_words_total counter"), "{text}");
    assert!(text.contains(
        "squall_user_words_total{topology=\"wordcount-e2e\",component=\"count\",task=\""
    ));
    crate::http::promtool_check(&ws, &text);
    let stderr = child.stderr_snapshot();
    let line = stderr
        .lines()
        .find(|l| l.contains("counting words as task"))
        .unwrap_or_else(|| panic!("the plugin's log line is missing:\n{stderr}"));
    assert!(line.contains("component=count") && line.contains("task="), "{line}");
    assert!(line.contains("INFO") && line.contains("plugin"), "{line}");
    drop(child);

    // RUST_LOG filters plugin events like the host's own.
    let topology = ws.write_topology("quiet.toml", &toml);
    let mut cmd = SquallCommand::run(&ws, &topology, "1s");
    cmd.env("RUST_LOG", "info,plugin=warn");
    let out = cmd.output();
    out.assert_code(0);
    assert!(!out.stderr.contains("counting words"), "filtered out\n{}", out.context());
}

#[test]
fn a_plugin_built_against_contract_1_2_loads_and_runs_with_durable_state() {
    let Some(old) = examples_1_2() else { return };
    let ws = Workspace::new("contract_1_2");
    // Called once per tuple: it has no batch entry points.
    let toml = counts_words_through_its_own_root(&ws, &old, "1.2.0");

    // Its durable word count keeps its stores through checkpoints (contract
    // 1.2): the counts printed at the stop are exact.
    let durable = toml.replace("examples::WordCount", "examples::DurableWordCount").replace(
        "[spouts.sentences]",
        "[state]\nbackend = \"memory\"\ninterval_ms = 100\n\n[spouts.sentences]",
    );
    let topology = ws.write_topology("durable.toml", &durable);
    let out = SquallCommand::run(&ws, &topology, "3s").output();
    out.assert_code(0);
    assert_eq!(printed_word_counts(&out), expected_word_counts(), "\n{}", out.context());
    assert_eq!(out.stat("sentences", "acked"), SENTENCE_LIMIT, "\n{}", out.context());

    // It does not declare its stores (1.3's `STORES`): inspect lists none,
    // validate cannot check a keyed store's grouping, and the first
    // checkpoint in which two tasks write one key refuses the run instead.
    let inspect = SquallCommand::inspect(&ws, &old).output();
    assert!(!inspect.stdout.contains("stores:"), "\n{}", inspect.context());
    let fields = r#"grouping = { fields = ["word"] }"#;
    assert!(durable.contains(fields), "{durable}");
    let all = ws.write_topology("all.toml", &durable.replace(fields, r#"grouping = "all""#));
    SquallCommand::validate(&ws, &all).output().assert_code(0);
    let out = SquallCommand::run(&ws, &all, "5s").limit(Duration::from_secs(60)).output();
    assert_ne!(out.status.code(), Some(0), "\n{}", out.context());
    let line = out.single_error_line();
    for part in [
        "checkpoint failed: store \"counts\": task index",
        "Its input is \"split\" by all",
        "group every input by the fields the key is made of",
    ] {
        assert!(line.contains(part), "{part:?} not in {line}\n{}", out.context());
    }
}

#[test]
fn a_plugin_built_with_panic_abort_is_refused_at_load() {
    // testkit built with panic = "abort" (a profile override), in a target
    // directory of its own.
    let dir = target_root().join("panic-abort");
    let out = cargo()
        .env("CARGO_PROFILE_RELEASE_PANIC", "abort")
        .args(["build", "--release", "-p", "squall-testkit", "--target-dir"])
        .arg(&dir)
        .output()
        .expect("run cargo");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let library = dir.join("release/libsquall_testkit.so");
    let ws = Workspace::new("panic_abort");
    let toml = format!(
        "[plugins]\nt = \"{}\"\n\n[spouts.s]\ncomponent = \"t::ConstSpout\"\n\n\
         [bolts.b]\ncomponent = \"t::NullBolt\"\ninputs = [{{ from = \"s\" }}]\n",
        library.display()
    );
    let topology = ws.write_topology("abort.toml", &toml);
    for out in [
        SquallCommand::validate(&ws, &topology).output(),
        SquallCommand::run(&ws, &topology, "5s").output(),
        SquallCommand::inspect(&ws, &library).output(),
    ] {
        out.assert_code(69);
        let line = out.single_error_line();
        assert!(
            line.contains("panic = \"abort\"") && line.contains("panic = \"unwind\""),
            "{line}"
        );
    }
    // The same library built normally loads.
    let normal = SquallCommand::inspect(&ws, &crate::util::plugin_path("testkit")).output();
    normal.assert_code(0);
}

/// A host of an older contract, as far as loading goes: each 1.x host
/// checks a library against its own root module shape, hands over its 1.1
/// services (1.1 and 1.2; a 1.0 host has none), then asks for the catalogue
/// and prints a failure as `plugin "<alias>": <path> failed to list its
/// components: <error>` (`host/src/plugin/loader.rs` and `error.rs` at
/// [`CONTRACT_1_0`], [`CONTRACT_1_1`] and [`CONTRACT_1_2`]).
mod older_host {
    use std::path::Path;

    use abi_stable::library::LibHeader;
    use abi_stable::sabi_trait::TD_Opaque;
    use abi_stable::std_types::{RResult, RStr};
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    use squall_plugin_api::abi::{
        v1_0, v1_2_root, DynHost, DynHost_TO, LogLevel, MetricCells, MetricKind, ROOT_SYMBOL,
    };
    use squall_plugin_api::{ErrorKind, PluginError};

    /// The 1.1 services, as bare as they can be.
    struct Services;

    impl DynHost for Services {
        fn log_enabled(&self, _: LogLevel) -> bool {
            false
        }

        fn log(&self, _: LogLevel, _: RStr<'_>) {}

        fn register_metric(
            &self,
            _: MetricKind,
            _: RStr<'_>,
            _: RStr<'_>,
        ) -> RResult<MetricCells, PluginError> {
            RResult::RErr(PluginError::new(ErrorKind::RUNTIME, "no metrics in this host"))
        }
    }

    /// Loads `library` (from a private copy, so that its statics start
    /// empty) as a host of contract 1.2 does, or 1.0 with `contract_1_0`;
    /// the catalogue's plugin name, or the line the host prints.
    pub fn load(library: &Path, copy: &Path, contract_1_0: bool) -> Result<String, String> {
        std::fs::copy(library, copy).expect("copy the library");
        // SAFETY: our own testkit library; loading it runs no code but its
        // initialisers, as in the host.
        let lib = unsafe { Library::open(Some(copy), RTLD_NOW | RTLD_LOCAL) }.expect("dlopen");
        // SAFETY: `export_plugin!`'s static under this name is a `LibHeader`,
        // whose first field is the `AbiHeader` abi_stable reads.
        let header: &'static LibHeader = unsafe {
            let symbol = lib
                .get::<&'static LibHeader>(format!("{ROOT_SYMBOL}\0").as_bytes())
                .expect("the root symbol");
            *symbol
        };
        std::mem::forget(lib);
        let catalogue = if contract_1_0 {
            let root = header.init_root_module::<v1_0::PluginRoot_Ref>().expect("1.0 shape");
            (root.catalogue())()
        } else {
            let root = header.init_root_module::<v1_2_root::PluginRoot_Ref>().expect("1.2 shape");
            if let Some(attach) = root.attach_host() {
                attach(DynHost_TO::from_value(Services, TD_Opaque));
            }
            (root.catalogue())()
        };
        catalogue.into_result().map(|c| c.plugin.to_string()).map_err(|e| {
            format!("plugin \"t\": {} failed to list its components: {e}", library.display())
        })
    }
}

#[test]
fn a_plugin_built_against_contract_1_3_is_refused_by_an_older_host_in_one_line() {
    let library = crate::util::plugin_path("testkit");
    let ws = Workspace::new("older_host");
    for (contract_1_0, speaks) in [(false, "1.2"), (true, "1.0")] {
        let copy = ws.path(format!("libolder_{speaks}.so"));
        let line = older_host::load(&library, &copy, contract_1_0)
            .expect_err("a host older than the library's contract lists its components");
        assert!(!line.contains('\n'), "one line: {line}");
        for part in [
            "failed to list its components: built against plugin contract 1.3.0",
            "this host (contract 1.2 or older) does not speak",
            "run it on a squall host of contract 1.3 or later",
        ] {
            assert!(line.contains(part), "host {speaks}: {part:?} not in {line}");
        }
    }
    // This host, which speaks 1.3, loads the same library.
    let out = SquallCommand::inspect(&ws, &library).output();
    out.assert_code(0);
}
