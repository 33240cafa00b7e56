//! What the NATS benches share: building the host and plugins, finding
//! them, unique names, medians.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The local NATS server the benches run against.
pub const URL: &str = "127.0.0.1:4222";

/// True when the local server accepts connections; otherwise the bench says
/// so (as `name`) and should do nothing.
pub fn server_up(name: &str) -> bool {
    let up = std::net::TcpStream::connect_timeout(
        &URL.parse().expect("a socket address"),
        std::time::Duration::from_secs(1),
    )
    .is_ok();
    if !up {
        eprintln!("{name} bench: no NATS server on {URL}; skipped");
    }
    up
}

/// The median (the upper one of an even count).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `target/release` of the workspace (or of `CARGO_TARGET_DIR`).
pub fn release_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("release")
}

/// Builds the host and the plugins the benches run, in release mode.
pub fn build(root: &Path) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    // Not the bench's own CARGO_PKG_*: ring's build script reruns on them.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("CARGO_PKG_")
            || key.starts_with("CARGO_MANIFEST_")
            || key == "CARGO_CRATE_NAME"
        {
            cmd.env_remove(key);
        }
    }
    let status = cmd
        .current_dir(root)
        .args([
            "build",
            "--release",
            "-p",
            "squall-host",
            "-p",
            "squall-testkit",
            "-p",
            "squall-nats",
        ])
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cargo build failed");
}

/// A name unique to this process and moment.
pub fn unique(prefix: &str) -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}_{}_{nanos}", std::process::id())
}

/// The 1-minute load average, for labelling figures.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}
