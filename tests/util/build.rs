//! Building the host and the plugins once per test process, and finding the
//! artifacts in whatever target directory this test binary lives in.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// The packages every test needs, built together once per test process.
/// (`squall-swap-demo` is built by the hot-swap test itself, twice.)
pub const PACKAGES: &[&str] = &[
    "squall-host",
    "squall-examples",
    "squall-nexmark",
    "squall-testkit",
    "squall-files",
    "squall-nats",
    "squall-wait-extra",
    "squall-redis",
    "squall-rabbitmq",
    "squall-kafka",
    "squall-state-redis",
    "squall-state-postgres",
    "squall-state-embedded",
    "squall-postgres",
    "squall-broken-not-a-plugin",
    "squall-broken-abi-mismatch",
    "squall-broken-version-mismatch",
];

/// The package the hot-swap test rebuilds with another flavour.
pub const SWAP_PACKAGE: &str = "squall-swap-demo";

/// Held while a test rebuilds `squall-swap-demo` and copies the result: the
/// tests that swap it build different flavours into the same target folder.
pub fn swap_build_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The environment variable that picks the flavour baked into `squall-swap-demo`.
pub const SWAP_FLAVOR_VAR: &str = "SQUALL_SWAP_FLAVOR";

/// How long a child may outlive its `--duration` before the watchdog kills it.
pub const GRACE: Duration = Duration::from_secs(30);

/// The workspace root (where the top-level `Cargo.toml` is).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives one level below the workspace root")
        .to_path_buf()
}

/// The cargo target directory this test binary was built into.
///
/// The binary is `<root>/<profile>/deps/e2e-<hash>`, so the root is three
/// levels up; this follows `--target-dir` and `CARGO_TARGET_DIR` without
/// reading either.
pub fn target_root() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary knows its own path");
    exe.parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("{} is not under <target>/<profile>/deps", exe.display()))
        .to_path_buf()
}

/// The directory release artifacts land in.
pub fn release_dir() -> PathBuf {
    target_root().join("release")
}

/// A `cargo` command: the cargo running this test when known, from the
/// workspace root.
pub fn cargo() -> Command {
    let program = std::env::var_os("CARGO")
        .or_else(|| option_env!("CARGO").map(OsString::from))
        .unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = Command::new(&program);
    cmd.current_dir(workspace_root());
    // The rustc beside that cargo, named outright: a rustup proxy found on
    // PATH would pick its toolchain from the directory it runs in, and some
    // crates on crates.io ship a rust-toolchain.toml of their own.
    let rustc = std::path::Path::new(&program).with_file_name("rustc");
    if std::env::var_os("RUSTC").is_none() && rustc.is_file() {
        cmd.env("RUSTC", rustc);
    }
    // The package variables cargo set for this test must not reach the
    // nested build: ring's build script reruns when CARGO_PKG_* change, so
    // inheriting them rebuilt the TLS stack (and squall-nats) on every
    // switch between a plain `cargo build` and a test run.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO_PKG_")
            || key.starts_with("CARGO_MANIFEST_")
            || matches!(&*key, "CARGO_CRATE_NAME" | "CARGO_PRIMARY_PACKAGE" | "CARGO_BIN_NAME")
        {
            cmd.env_remove(&*key);
        }
    }
    cmd
}

/// `cargo build --release --target-dir <root> -p <package>...`, with
/// `configure` applied (its environment); panics with cargo's stderr on failure.
pub fn cargo_build_release(packages: &[&str], configure: impl FnOnce(&mut Command)) {
    let mut cmd = cargo();
    cmd.args(["build", "--release", "--target-dir"]).arg(target_root());
    for p in packages {
        cmd.args(["-p", p]);
    }
    configure(&mut cmd);
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run cargo: {e}"));
    assert!(
        out.status.success(),
        "cargo build {packages:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds the host and the plugins once per test process. A failed build is
/// remembered, so every test reports it instead of rebuilding.
fn build_once() {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let result = BUILT.get_or_init(|| {
        std::panic::catch_unwind(|| cargo_build_release(PACKAGES, |_| {})).map_err(|e| {
            e.downcast_ref::<String>().cloned().unwrap_or_else(|| "cargo build panicked".into())
        })
    });
    if let Err(e) = result {
        panic!("building the host and plugins failed:\n{e}");
    }
}

/// `SQUALL_TEST_BIN=PATH` runs the tests against another `squall` binary
/// (the plugins are still this tree's): how an attack test is shown to
/// fail on a previous commit's build.
pub const TEST_BIN_VAR: &str = "SQUALL_TEST_BIN";

/// The built `squall` binary (or [`TEST_BIN_VAR`]'s).
pub fn squall_bin() -> PathBuf {
    build_once();
    match std::env::var_os(TEST_BIN_VAR) {
        Some(path) => PathBuf::from(path),
        None => release_dir().join("squall"),
    }
}

/// The built plugin library of package `squall-<name>`: `plugin_path("testkit")`
/// is `<root>/release/libsquall_testkit.so`; dashes become underscores.
/// `SQUALL_TEST_PLUGIN_<NAME>=PATH` (`SQUALL_TEST_PLUGIN_NATS`) takes that
/// library instead: with [`TEST_BIN_VAR`], how a connector's fault test is
/// shown to fail on a previous commit's build.
pub fn plugin_path(name: &str) -> PathBuf {
    build_once();
    let var = format!("SQUALL_TEST_PLUGIN_{}", name.replace('-', "_").to_uppercase());
    if let Some(path) = std::env::var_os(var) {
        return PathBuf::from(path);
    }
    release_dir().join(format!("libsquall_{}.so", name.replace('-', "_")))
}

/// Set by `.ci/run`: a test whose external tool or server is missing fails
/// instead of skipping.
pub const REQUIRE_VAR: &str = "SQUALL_REQUIRE_TOOLS";

/// The path of the external program `name` (found on `PATH`), or `None`
/// after printing that the test part needing it is skipped. Under
/// `SQUALL_REQUIRE_TOOLS=1` (CI) a missing program fails the test instead.
pub fn require_tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths).map(|dir| dir.join(name)).find(|p| p.is_file())
    });
    if found.is_none() {
        let required = std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1");
        assert!(!required, "{name} is not installed, and {REQUIRE_VAR}=1 requires it");
        eprintln!("SKIPPED (part of this test): {name} is not installed; set {REQUIRE_VAR}=1 to make this a failure");
    }
    found
}
