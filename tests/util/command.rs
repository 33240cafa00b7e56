//! Running `squall`: a fresh [`Workspace`] per test, [`SquallCommand`] under a
//! watchdog, a background [`Running`] child, and the [`Output`] it left.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::build::*;
use super::logs::tail;

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
    /// `{examples}`, `{wait_extra}`, `{files}`, `{nats}`, `{redis}`, `{rabbitmq}`, `{kafka}` and `{state_embedded}` become the
    /// absolute paths of the built plugins, `{dir}` this workspace's directory.
    pub fn fill(&self, toml: &str) -> String {
        let mut text = toml.replace("{dir}", &self.dir.display().to_string());
        for (placeholder, plugin) in [
            ("{testkit}", "testkit"),
            ("{examples}", "examples"),
            ("{wait_extra}", "wait-extra"),
            ("{files}", "files"),
            ("{nats}", "nats"),
            ("{redis}", "redis"),
            ("{rabbitmq}", "rabbitmq"),
            ("{kafka}", "kafka"),
            ("{state_embedded}", "state-embedded"),
        ] {
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
    wrapper: Vec<OsString>,
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
            wrapper: Vec::new(),
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

    /// `squall run TOPOLOGY --stats-interval 100ms --json <ws>/summary.json`
    /// with no `--duration`: it runs until interrupted (see
    /// [`SquallCommand::spawn`]); its stats tables let a test wait for
    /// progress ([`Running::wait_for_stat`]).
    pub fn run_until_interrupted(ws: &Workspace, topology: &Path) -> Self {
        let json = ws.path("summary.json");
        let mut cmd = Self::new(ws, ["run"]);
        cmd.arg(topology).args(["--stats-interval", "100ms", "--json"]).arg(&json);
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

    /// Runs the child in `dir` instead of the workspace's directory.
    pub fn current_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.cwd = dir.into();
        self
    }

    /// Sets the watchdog: the child is killed, and the test fails, past `limit`.
    pub fn limit(&mut self, limit: Duration) -> &mut Self {
        self.limit = limit;
        self
    }

    /// Runs squall through `wrapper` (a program that execs its arguments,
    /// such as `prlimit --nofile=256 --`), so that the child's pid is
    /// squall's.
    pub fn wrapped<I, S>(&mut self, wrapper: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.wrapper = wrapper.into_iter().map(Into::into).collect();
        self
    }

    /// Starts the child with piped output, in the background.
    pub fn spawn(&self) -> Running {
        let bin = squall_bin();
        let mut cmd = match self.wrapper.split_first() {
            Some((program, rest)) => {
                let mut cmd = Command::new(program);
                cmd.args(rest).arg(&bin);
                cmd
            }
            None => Command::new(&bin),
        };
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

    /// The CPU time the child has used so far (user + system, from
    /// `/proc/PID/stat`, in clock ticks of 10 ms), if it still runs.
    pub fn cpu_seconds(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).ok()?;
        // The fields after the command name, which is in parentheses.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the line: 11 and 12 here.
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(ticks as f64 / 100.0)
    }

    /// What the child has written to stderr so far.
    pub fn stderr_snapshot(&self) -> String {
        self.stderr.snapshot()
    }

    /// What the child has written to stdout so far.
    pub fn stdout_snapshot(&self) -> String {
        self.stdout.snapshot()
    }

    /// Sends SIGINT (what Ctrl-C sends) to the child.
    pub fn interrupt(&self) {
        self.signal(libc::SIGINT);
    }

    /// Sends SIGTERM (what `docker stop` and `kubectl delete pod` send).
    pub fn terminate(&self) {
        self.signal(libc::SIGTERM);
    }

    /// Sends `signal` to the child.
    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid fits in pid_t");
        // SAFETY: kill(2) has no memory-safety preconditions; `pid` is our own
        // child, which has not been waited for, so the id cannot have been reused.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "kill({signal}) failed: {}", std::io::Error::last_os_error());
    }

    /// Waits until the latest stats table row of `component` has a `column`
    /// (`emitted`, `executed`, `acked`, `failed`, ...) for which `ready`
    /// holds; panics (killing the child) if it ends first or `within` passes.
    /// Needs a run with a stats interval ([`SquallCommand::run_until_interrupted`]).
    pub fn wait_for_stat(
        &mut self,
        component: &str,
        column: &str,
        ready: impl Fn(u64) -> bool,
        within: Duration,
    ) -> u64 {
        self.wait_for_stats(component, &[column], |row| ready(row[0]), within)[0]
    }

    /// Like [`Self::wait_for_stat`], over several `columns` of one row:
    /// `ready` gets their values in the order asked.
    pub fn wait_for_stats(
        &mut self,
        component: &str,
        columns: &[&str],
        ready: impl Fn(&[u64]) -> bool,
        within: Duration,
    ) -> Vec<u64> {
        let what = format!("the awaited {component}.{} in the stats", columns.join(", "));
        self.wait_for(&what, within, |stderr| {
            latest_row(stderr, component, columns).filter(|row| ready(row))
        })
    }

    /// Polls the child's stderr until `probe` finds something in it; panics
    /// (killing the child, showing its output) if it ends first or `within`
    /// passes.
    fn wait_for<T>(
        &mut self,
        what: &str,
        within: Duration,
        probe: impl Fn(&str) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + within;
        loop {
            if let Some(found) = probe(&self.stderr.snapshot()) {
                return found;
            }
            let exited = self.child.try_wait().expect("try_wait").is_some();
            if exited || Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{}: stderr never showed {what} ({})\n--- stdout\n{}\n--- stderr\n{}",
                    self.command,
                    if exited { "the child exited" } else { "timed out" },
                    tail(&self.stdout.snapshot(), 40),
                    tail(&self.stderr.snapshot(), 60)
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until the child's stderr contains `needle`; panics (killing the
    /// child) if it ends first or `within` passes.
    pub fn wait_for_stderr(&mut self, needle: &str, within: Duration) {
        self.wait_for(&format!("{needle:?}"), within, |stderr| {
            stderr.contains(needle).then_some(())
        });
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

/// The value of `column` in the last stats table row of `component` in
/// `stderr`, if a table with that column and row was printed.
pub fn latest_stat(stderr: &str, component: &str, column: &str) -> Option<u64> {
    latest_row(stderr, component, &[column]).map(|row| row[0])
}

/// The `columns` of the latest stats table row of `component` in `stderr`
/// that has all of them, read from one row; a line still being written (no
/// newline yet) is not read, so no figure is cut short.
pub fn latest_row(stderr: &str, component: &str, columns: &[&str]) -> Option<Vec<u64>> {
    let mut at: Option<Vec<usize>> = None;
    let mut latest = None;
    for line in stderr.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"component") {
            at = columns.iter().map(|c| words.iter().position(|w| w == c)).collect();
        } else if let (Some(at), Some(&name)) = (&at, words.first()) {
            if name == component {
                let row: Option<Vec<u64>> =
                    at.iter().map(|&i| words.get(i).and_then(|v| v.parse().ok())).collect();
                latest = row.or(latest);
            }
        }
    }
    latest
}
