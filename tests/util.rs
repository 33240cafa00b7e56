//! The harness: build the real host and plugins once, give each test its own
//! directory, run the `squall` binary under a watchdog and read what it left.
//!
//! - [`squall_bin`] and [`plugin_path`] build (once per test process) and find
//!   the artifacts, in whatever target directory this test binary lives in.
//! - [`Workspace`] is a fresh temporary directory per test; topologies written
//!   into it get the plugin paths filled in.
//! - [`SquallCommand`] runs `squall` with a hard time limit and returns an
//!   [`Output`] (exit status, stdout, stderr, the `--json` summary); or starts
//!   it in the background as a [`Running`] child that can be interrupted.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The packages every test needs, built together once per test process.
/// (`squall-swap-demo` is built by the hot-swap test itself, twice.)
pub const PACKAGES: &[&str] = &[
    "squall-host",
    "squall-examples",
    "squall-testkit",
    "squall-wait-extra",
    "squall-broken-not-a-plugin",
    "squall-broken-abi-mismatch",
    "squall-broken-version-mismatch",
];

/// The package the hot-swap test rebuilds with another flavour.
pub const SWAP_PACKAGE: &str = "squall-swap-demo";

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
    let mut cmd = Command::new(program);
    cmd.current_dir(workspace_root());
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

/// The built `squall` binary.
pub fn squall_bin() -> PathBuf {
    build_once();
    release_dir().join("squall")
}

/// The built plugin library of package `squall-<name>`: `plugin_path("testkit")`
/// is `<root>/release/libsquall_testkit.so`; dashes become underscores.
pub fn plugin_path(name: &str) -> PathBuf {
    build_once();
    release_dir().join(format!("libsquall_{}.so", name.replace('-', "_")))
}

/// A fresh directory for one test, under the system temp directory and named
/// after the test. It is removed when the test passes and kept (for a look)
/// when it fails.
#[derive(Debug)]
pub struct Workspace {
    dir: PathBuf,
}

impl Workspace {
    /// An empty directory `<tmp>/squall-e2e-<test>-<pid>`.
    pub fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("squall-e2e-{test}-{}", std::process::id()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .unwrap_or_else(|e| panic!("cannot clear {}: {e}", dir.display()));
        }
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        Self { dir }
    }

    /// The directory itself.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `rel` inside the directory.
    pub fn path(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.dir.join(rel)
    }

    /// Writes `contents` to `rel` and returns its path.
    pub fn write(&self, rel: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(rel);
        std::fs::write(&path, contents)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        path
    }

    /// Reads `rel` as text.
    pub fn read(&self, rel: impl AsRef<Path>) -> String {
        let path = self.path(rel);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
    }

    /// The text of a topology with its placeholders filled in: `{testkit}`,
    /// `{examples}` and `{wait_extra}` become the absolute paths of the built
    /// plugins, `{dir}` this workspace's directory.
    pub fn fill(&self, toml: &str) -> String {
        let mut text = toml.replace("{dir}", &self.dir.display().to_string());
        for (placeholder, plugin) in
            [("{testkit}", "testkit"), ("{examples}", "examples"), ("{wait_extra}", "wait-extra")]
        {
            if text.contains(placeholder) {
                text = text.replace(placeholder, &plugin_path(plugin).display().to_string());
            }
        }
        text
    }

    /// Writes a topology file `name` (placeholders filled in, see
    /// [`Workspace::fill`]) and returns its path.
    pub fn write_topology(&self, name: &str, toml: &str) -> PathBuf {
        self.write(name, self.fill(toml))
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// One run of the `squall` binary: its arguments, environment and time limit.
#[derive(Debug)]
pub struct SquallCommand {
    args: Vec<OsString>,
    env: BTreeMap<OsString, Option<OsString>>,
    cwd: PathBuf,
    limit: Duration,
    json: Option<PathBuf>,
}

impl SquallCommand {
    /// `squall <args>` from `ws`'s directory, with a time limit of [`GRACE`].
    ///
    /// The child's environment is the test's, with `NO_COLOR=1` and `RUST_LOG`
    /// removed (so stderr is plain text at the default level) and
    /// `RUST_BACKTRACE=0` (so a plugin panic prints its message, not a trace).
    pub fn new<I, S>(ws: &Workspace, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut cmd = Self {
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: ws.dir().to_path_buf(),
            limit: GRACE,
            json: None,
        };
        cmd.env("NO_COLOR", "1").env("RUST_BACKTRACE", "0").env_remove("RUST_LOG");
        cmd
    }

    /// `squall run TOPOLOGY --duration D --stats-interval 0s --json <ws>/summary.json`,
    /// with a time limit of `D` + [`GRACE`]. `duration` is humantime, e.g. `"3s"`.
    pub fn run(ws: &Workspace, topology: &Path, duration: &str) -> Self {
        let d = parse_duration(duration);
        let json = ws.path("summary.json");
        let mut cmd = Self::new(ws, ["run"]);
        cmd.arg(topology)
            .args(["--duration", duration, "--stats-interval", "0s", "--json"])
            .arg(&json)
            .limit(d + GRACE);
        cmd.json = Some(json);
        cmd
    }

    /// `squall run TOPOLOGY --stats-interval 0s --json <ws>/summary.json` with no
    /// `--duration`: it runs until interrupted (see [`SquallCommand::spawn`]).
    pub fn run_until_interrupted(ws: &Workspace, topology: &Path) -> Self {
        let json = ws.path("summary.json");
        let mut cmd = Self::new(ws, ["run"]);
        cmd.arg(topology).args(["--stats-interval", "0s", "--json"]).arg(&json);
        cmd.json = Some(json);
        cmd
    }

    /// `squall validate TOPOLOGY`.
    pub fn validate(ws: &Workspace, topology: &Path) -> Self {
        let mut cmd = Self::new(ws, ["validate"]);
        cmd.arg(topology);
        cmd
    }

    /// `squall inspect PLUGIN`.
    pub fn inspect(ws: &Workspace, plugin: &Path) -> Self {
        let mut cmd = Self::new(ws, ["inspect"]);
        cmd.arg(plugin);
        cmd
    }

    /// Appends one argument.
    pub fn arg(&mut self, arg: impl Into<OsString>) -> &mut Self {
        self.args.push(arg.into());
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable of the child.
    pub fn env(&mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> &mut Self {
        self.env.insert(key.into(), Some(value.into()));
        self
    }

    /// Removes an environment variable from the child's environment.
    pub fn env_remove(&mut self, key: impl Into<OsString>) -> &mut Self {
        self.env.insert(key.into(), None);
        self
    }

    /// Sets the watchdog: the child is killed, and the test fails, past `limit`.
    pub fn limit(&mut self, limit: Duration) -> &mut Self {
        self.limit = limit;
        self
    }

    /// Starts the child with piped output, in the background.
    pub fn spawn(&self) -> Running {
        let bin = squall_bin();
        let mut cmd = Command::new(&bin);
        cmd.args(&self.args)
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in &self.env {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
        if let Some(json) = &self.json {
            let _ = std::fs::remove_file(json);
        }
        let mut child =
            cmd.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let stdout = Capture::start(child.stdout.take().expect("stdout is piped"));
        let stderr = Capture::start(child.stderr.take().expect("stderr is piped"));
        Running {
            child,
            started: Instant::now(),
            limit: self.limit,
            stdout,
            stderr,
            json: self.json.clone(),
            command: format!("squall {}", shell_words(&self.args)),
        }
    }

    /// Runs the child to its end (or the watchdog's) and returns what it did.
    pub fn output(&self) -> Output {
        self.spawn().wait()
    }
}

/// A child's output stream, read on its own thread into a shared buffer.
#[derive(Debug)]
struct Capture {
    text: Arc<Mutex<Vec<u8>>>,
    reader: Option<JoinHandle<()>>,
}

impl Capture {
    fn start(mut pipe: impl Read + Send + 'static) -> Self {
        let text = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&text);
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().expect("capture lock").extend_from_slice(&buf[..n]),
                }
            }
        });
        Self { text, reader: Some(reader) }
    }

    /// What was read so far.
    fn snapshot(&self) -> String {
        String::from_utf8_lossy(&self.text.lock().expect("capture lock")).into_owned()
    }

    /// Waits for end of file, then returns everything.
    fn finish(&mut self) -> String {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        self.snapshot()
    }
}

/// A `squall` child running in the background, under its watchdog.
#[derive(Debug)]
pub struct Running {
    child: Child,
    started: Instant,
    limit: Duration,
    stdout: Capture,
    stderr: Capture,
    json: Option<PathBuf>,
    command: String,
}

impl Running {
    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The child's resident set size in KiB (from /proc), if it still runs.
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// Sends SIGINT (what Ctrl-C sends) to the child.
    pub fn interrupt(&self) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid fits in pid_t");
        // SAFETY: kill(2) has no memory-safety preconditions; `pid` is our own
        // child, which has not been waited for, so the id cannot have been reused.
        let rc = unsafe { libc::kill(pid, libc::SIGINT) };
        assert_eq!(rc, 0, "kill(SIGINT) failed: {}", std::io::Error::last_os_error());
    }

    /// Waits until the child's stderr contains `needle`; panics (killing the
    /// child) if it ends first or `within` passes.
    pub fn wait_for_stderr(&mut self, needle: &str, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            if self.stderr.snapshot().contains(needle) {
                return;
            }
            let exited = self.child.try_wait().expect("try_wait").is_some();
            if exited || Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{}: stderr never showed {needle:?} ({})\n--- stdout\n{}\n--- stderr\n{}",
                    self.command,
                    if exited { "the child exited" } else { "timed out" },
                    self.stdout.snapshot(),
                    self.stderr.snapshot()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until `path` exists; panics (killing the child) if the child
    /// ends first or `within` passes, showing the tail of its stderr.
    pub fn wait_for_file(&mut self, path: &Path, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            if path.exists() {
                return;
            }
            let exited = self.child.try_wait().expect("try_wait").is_some();
            if exited || Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{}: {} never appeared ({} after {:.2?})\n--- stdout\n{}\n\
                     --- stderr (tail)\n{}",
                    self.command,
                    path.display(),
                    if exited { "the child exited" } else { "timed out" },
                    self.started.elapsed(),
                    self.stdout.snapshot(),
                    tail(&self.stderr.snapshot(), 60)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Time since the child started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Waits for the child to exit. Past the time limit it is killed and the
    /// test fails, showing what the child had written.
    pub fn wait(mut self) -> Output {
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            if self.started.elapsed() >= self.limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{}: still running after {:?}; killed by the watchdog\n--- stdout\n{}\n--- stderr\n{}",
                    self.command,
                    self.limit,
                    self.stdout.finish(),
                    self.stderr.finish()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let elapsed = self.started.elapsed();
        let json = self.json.as_ref().and_then(|p| std::fs::read_to_string(p).ok());
        let output = Output {
            command: self.command.clone(),
            status,
            elapsed,
            stdout: self.stdout.finish(),
            stderr: self.stderr.finish(),
            json: None,
        };
        let json = json.map(|text| {
            serde_json::from_str(&text).unwrap_or_else(|e| {
                panic!("the --json summary is not JSON ({e}):\n{text}\n{}", output.context())
            })
        });
        Output { json, ..output }
    }
}

impl Drop for Running {
    /// A test that fails while its child runs must not leave the child behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a finished `squall` child did.
#[derive(Debug)]
pub struct Output {
    /// The command line, for messages.
    pub command: String,
    /// How it ended.
    pub status: ExitStatus,
    /// Wall time from start to exit.
    pub elapsed: Duration,
    /// Everything written to stdout.
    pub stdout: String,
    /// Everything written to stderr.
    pub stderr: String,
    /// The `--json` summary, when one was asked for and written.
    pub json: Option<Value>,
}

impl Output {
    /// The command, its status and both streams, for assertion messages.
    pub fn context(&self) -> String {
        format!(
            "command: {}\nstatus: {} after {:.2?}\n--- stdout\n{}\n--- stderr\n{}",
            self.command, self.status, self.elapsed, self.stdout, self.stderr
        )
    }

    /// Asserts that the child exited (not killed by a signal) with `code`.
    #[track_caller]
    pub fn assert_code(&self, code: i32) -> &Self {
        use std::os::unix::process::ExitStatusExt;
        assert!(
            self.status.signal().is_none(),
            "squall crashed (killed by signal {:?}) instead of exiting with {code}\n{}",
            self.status.signal(),
            self.context()
        );
        assert_eq!(self.status.code(), Some(code), "unexpected exit code\n{}", self.context());
        self
    }

    /// Lines of stderr that start with `error:` (the host's one-line errors).
    pub fn error_lines(&self) -> Vec<&str> {
        // Runtime and loader errors start with `error:`; config errors are
        // diagnostics: `<file>:<line>:<col>: error: ...`.
        self.stderr.lines().filter(|l| l.starts_with("error:") || l.contains(": error: ")).collect()
    }

    /// The only stderr line starting with `error:`; fails if there are none or several.
    #[track_caller]
    pub fn single_error_line(&self) -> &str {
        let lines = self.error_lines();
        assert_eq!(lines.len(), 1, "expected exactly one `error:` line\n{}", self.context());
        lines[0]
    }

    /// The `--json` summary; fails if the child wrote none.
    #[track_caller]
    pub fn summary(&self) -> &Value {
        self.json.as_ref().unwrap_or_else(|| panic!("no --json summary\n{}", self.context()))
    }

    /// The summary's entry for component `name`.
    #[track_caller]
    pub fn component(&self, name: &str) -> &Value {
        self.summary()["components"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == name))
            .unwrap_or_else(|| panic!("no component {name:?} in the summary\n{}", self.context()))
    }

    /// The integer `field` of component `name` in the summary.
    #[track_caller]
    pub fn stat(&self, name: &str, field: &str) -> u64 {
        self.component(name)[field].as_u64().unwrap_or_else(|| {
            panic!("{name}.{field} is not an integer in the summary\n{}", self.context())
        })
    }
}

/// The 1-based `(line, column)` where `needle` first occurs in `text` (columns
/// count characters); panics if it does not occur.
pub fn loc_of(text: &str, needle: &str) -> (usize, usize) {
    let at = text.find(needle).unwrap_or_else(|| panic!("{needle:?} is not in the text"));
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// A humantime-like duration: `"1500ms"` or `"3s"`.
fn parse_duration(s: &str) -> Duration {
    if let Some(ms) = s.strip_suffix("ms") {
        Duration::from_millis(ms.parse().unwrap_or_else(|_| panic!("bad duration {s:?}")))
    } else if let Some(secs) = s.strip_suffix('s') {
        Duration::from_secs_f64(secs.parse().unwrap_or_else(|_| panic!("bad duration {s:?}")))
    } else {
        panic!("bad duration {s:?}: use ms or s")
    }
}

/// Arguments joined for display.
fn shell_words(args: &[OsString]) -> String {
    args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
}

/// The last `n` lines of `text`, for assertion messages about long outputs.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let skipped = lines.len().saturating_sub(n);
    let mut out = String::new();
    if skipped > 0 {
        out.push_str(&format!("[... {skipped} earlier lines ...]\n"));
    }
    for line in &lines[skipped..] {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// One event of a `testkit::ReplaySpout` log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayEvent {
    /// `emit <id>`: emitted (first time or replay).
    Emit(u64),
    /// `ack <id>`: the spout's `ack` ran.
    Ack(u64),
    /// `fail <id>`: the spout's `fail` ran.
    Fail(u64),
    /// `close`: the spout's `close` ran.
    Close,
}

/// What a `testkit::ReplaySpout` log says about one message id.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IdTally {
    /// `emit` lines.
    pub emits: u64,
    /// `ack` lines.
    pub acks: u64,
    /// `fail` lines.
    pub fails: u64,
    /// The id's last line.
    pub last: Option<ReplayEvent>,
}

/// A `testkit::ReplaySpout` log, parsed: its events in order.
#[derive(Debug)]
pub struct ReplayLog {
    /// Every line, in order.
    pub events: Vec<ReplayEvent>,
}

impl ReplayLog {
    /// Reads and parses the log at `rel` in `ws`; panics naming the line on
    /// anything but `emit <id>`, `ack <id>`, `fail <id>` and `close`.
    pub fn read(ws: &Workspace, rel: &str) -> Self {
        Self::parse(rel, &ws.read(rel))
    }

    /// Parses the text of a log; `name` is for messages.
    pub fn parse(name: &str, text: &str) -> Self {
        let events = text
            .lines()
            .enumerate()
            .map(|(i, line)| {
                let bad =
                    || -> ! { panic!("{name}:{}: malformed replay log line {line:?}", i + 1) };
                if line == "close" {
                    return ReplayEvent::Close;
                }
                let (word, id) = line.split_once(' ').unwrap_or_else(|| bad());
                let id: u64 = id.parse().unwrap_or_else(|_| bad());
                match word {
                    "emit" => ReplayEvent::Emit(id),
                    "ack" => ReplayEvent::Ack(id),
                    "fail" => ReplayEvent::Fail(id),
                    _ => bad(),
                }
            })
            .collect();
        Self { events }
    }

    /// How many events satisfy `pred`.
    pub fn count(&self, pred: impl Fn(&ReplayEvent) -> bool) -> u64 {
        self.events.iter().filter(|e| pred(e)).count() as u64
    }

    /// `emit` lines.
    pub fn emits(&self) -> u64 {
        self.count(|e| matches!(e, ReplayEvent::Emit(_)))
    }

    /// `ack` lines.
    pub fn acks(&self) -> u64 {
        self.count(|e| matches!(e, ReplayEvent::Ack(_)))
    }

    /// `fail` lines.
    pub fn fails(&self) -> u64 {
        self.count(|e| matches!(e, ReplayEvent::Fail(_)))
    }

    /// The 0-based positions of the `close` lines.
    pub fn closes(&self) -> Vec<usize> {
        (0..self.events.len()).filter(|&i| self.events[i] == ReplayEvent::Close).collect()
    }

    /// Per message id: how many `emit`, `ack` and `fail` lines it has, and
    /// its last event.
    pub fn tally(&self) -> BTreeMap<u64, IdTally> {
        let mut tally: BTreeMap<u64, IdTally> = BTreeMap::new();
        for &event in &self.events {
            let (id, field) = match event {
                ReplayEvent::Emit(id) => (id, 0),
                ReplayEvent::Ack(id) => (id, 1),
                ReplayEvent::Fail(id) => (id, 2),
                ReplayEvent::Close => continue,
            };
            let t = tally.entry(id).or_default();
            match field {
                0 => t.emits += 1,
                1 => t.acks += 1,
                _ => t.fails += 1,
            }
            t.last = Some(event);
        }
        tally
    }

    /// The first `emit` that is a replay not preceded by a `fail` of its own:
    /// the k-th emit of an id (k ≥ 2) needs k - 1 earlier fails of that id.
    /// Returns the id and the 1-based line.
    pub fn replay_without_fail(&self) -> Option<(u64, usize)> {
        let mut seen: std::collections::HashMap<u64, (u64, u64)> = Default::default();
        for (i, &event) in self.events.iter().enumerate() {
            match event {
                ReplayEvent::Emit(id) => {
                    let (emits, fails) = seen.entry(id).or_default();
                    if *emits > *fails {
                        return Some((id, i + 1));
                    }
                    *emits += 1;
                }
                ReplayEvent::Fail(id) => seen.entry(id).or_default().1 += 1,
                ReplayEvent::Ack(_) | ReplayEvent::Close => {}
            }
        }
        None
    }

    /// Every event of message `id`, with its 1-based line number, for
    /// assertion messages.
    pub fn history(&self, id: u64) -> String {
        let lines: Vec<String> = self
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| match e {
                ReplayEvent::Emit(x) | ReplayEvent::Ack(x) | ReplayEvent::Fail(x) => *x == id,
                ReplayEvent::Close => false,
            })
            .map(|(i, e)| format!("  line {}: {e:?}", i + 1))
            .collect();
        if lines.is_empty() {
            format!("  (no line mentions id {id})")
        } else {
            lines.join("\n")
        }
    }
}

/// One `testkit::RecordBolt` report (`<out>.<task_id>`, written at cleanup).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `task <id>`.
    pub task: u32,
    /// `index <i>`: the task's index among its component's tasks.
    pub index: u32,
    /// `tuples <n>`: inputs other than ticks.
    pub tuples: u64,
    /// `ticks <n>`.
    pub ticks: u64,
    /// `key <key> <count>` lines.
    pub keys: BTreeMap<String, u64>,
}

impl Record {
    /// Parses a report; panics naming `path` on a malformed line.
    fn parse(path: &Path, text: &str) -> Self {
        let bad = |line: &str| -> ! { panic!("{}: malformed line {line:?}", path.display()) };
        let mut record = Record { task: 0, index: 0, tuples: 0, ticks: 0, keys: BTreeMap::new() };
        for line in text.lines() {
            let (word, rest) = line.split_once(' ').unwrap_or_else(|| bad(line));
            match word {
                "task" => record.task = rest.parse().unwrap_or_else(|_| bad(line)),
                "index" => record.index = rest.parse().unwrap_or_else(|_| bad(line)),
                "tuples" => record.tuples = rest.parse().unwrap_or_else(|_| bad(line)),
                "ticks" => record.ticks = rest.parse().unwrap_or_else(|_| bad(line)),
                "key" => {
                    let (key, count) = rest.rsplit_once(' ').unwrap_or_else(|| bad(line));
                    record.keys.insert(key.to_owned(), count.parse().unwrap_or_else(|_| bad(line)));
                }
                _ => bad(line),
            }
        }
        record
    }
}

/// Every `RecordBolt` report written under the prefix `<ws>/<prefix>` (the
/// bolt's `out`), keyed by task id. Fails if there are not exactly `tasks`.
#[track_caller]
pub fn read_records(
    ws: &Workspace,
    prefix: &str,
    tasks: usize,
    out: &Output,
) -> BTreeMap<u32, Record> {
    let mut records = BTreeMap::new();
    let entries = std::fs::read_dir(ws.dir()).expect("the workspace is readable");
    for entry in entries {
        let name = entry.expect("a directory entry").file_name().to_string_lossy().into_owned();
        let Some(task) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('.')) else {
            continue;
        };
        let Ok(task) = task.parse::<u32>() else { continue };
        let path = ws.path(&name);
        let record = Record::parse(&path, &ws.read(&name));
        assert_eq!(record.task, task, "{} names another task", path.display());
        records.insert(task, record);
    }
    assert_eq!(
        records.len(),
        tasks,
        "expected {tasks} RecordBolt reports {prefix}.<task>, found {:?}\n{}",
        records.keys().collect::<Vec<_>>(),
        out.context()
    );
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_kills_a_run_that_outlives_its_limit() {
        let ws = Workspace::new("watchdog");
        let topology = ws.write_topology(
            "idle.toml",
            r#"
[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::EmptySpout"

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{ from = "source" }]
"#,
        );
        // No --duration: it would run forever.
        let mut cmd = SquallCommand::run_until_interrupted(&ws, &topology);
        cmd.limit(Duration::from_secs(2));
        let started = Instant::now();
        let panic = std::panic::catch_unwind(|| cmd.output()).expect_err("the watchdog fires");
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(message.contains("killed by the watchdog"), "{message}");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    }

    #[test]
    fn replay_log_tallies_ids_and_spots_replays_without_a_fail() {
        let log = ReplayLog::parse("ok", "emit 0\nemit 1\nfail 1\nack 0\nemit 1\nack 1\nclose\n");
        assert_eq!((log.emits(), log.acks(), log.fails()), (3, 2, 1));
        assert_eq!(log.closes(), [6]);
        let tally = log.tally();
        assert_eq!(
            tally[&1],
            IdTally { emits: 2, acks: 1, fails: 1, last: Some(ReplayEvent::Ack(1)) }
        );
        assert_eq!(log.replay_without_fail(), None);
        // The second emit of 1 comes after a fail of 0, not of 1.
        let bad = ReplayLog::parse("bad", "emit 0\nemit 1\nfail 0\nemit 1\n");
        assert_eq!(bad.replay_without_fail(), Some((1, 4)));
        assert!(bad.history(1).contains("line 4: Emit(1)"), "{}", bad.history(1));
        let malformed = std::panic::catch_unwind(|| ReplayLog::parse("m", "emit x\n"));
        assert!(malformed.is_err());
    }

    #[test]
    fn tail_keeps_the_last_lines_and_says_how_many_it_skipped() {
        assert_eq!(tail("a\nb\nc\n", 2), "[... 1 earlier lines ...]\nb\nc\n");
        assert_eq!(tail("a\n", 5), "a\n");
    }

    #[test]
    fn loc_of_counts_lines_and_characters_from_one() {
        assert_eq!(loc_of("a\nbé \"x\"", "\"x\""), (2, 4));
        assert_eq!(loc_of("key", "key"), (1, 1));
    }
}
