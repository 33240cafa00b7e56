//! Live reload: the topology file is read again, compared with the running
//! topology by component name, and the components that changed are swapped
//! inside their executors while tuples flow (see docs/operations.md,
//! "Reloading").
//!
//! A reload is one transaction with one outcome ([`ReloadOutcome`]).
//!
//! # Prepare (anything that fails here rolls everything back)
//! 1. Parse, validate and bind the new file completely, as `squall
//!    validate` does. A library whose SHA-256 differs from the running one
//!    is loaded from a fresh copy with a unique name (`dlopen` of a path it
//!    has seen returns the old code).
//! 2. Diff by component name ([`diff`]). A change that cannot be made live
//!    refuses the whole reload, with its reason.
//! 3. Construct every new instance, build the tasks of added and resized
//!    bolts, and start the added ones (they prepare; nothing routes to
//!    them yet).
//! 4. Every task of every changed component receives its swap
//!    ([`Swap`]): a spout's old instance is deactivated and drained first
//!    (unless its ids survive the swap); each task then hands its state to
//!    the new instance and prepares (opens) it, reports, and goes on with
//!    its old instance: a bolt keeps executing, so a drain always ends.
//!
//! On a failure every task is told to abort ([`Control::Verdict`]): the
//! prepared instances are cleaned up, the added tasks leave, and the
//! running topology is what it was ([`ReloadOutcome::RolledBack`]).
//!
//! # Commit (the point of no return)
//! Every task is told to commit, between two tuples; the added bolts are
//! wired in and the resized ones take their keys' state. What cannot be
//! carried out after this point (a stateful bolt whose fresh instance
//! fails at the commit, a new task that cannot take its state, a task that
//! does not confirm in time) is reported as [`ReloadOutcome::Partial`],
//! with exactly what was applied and what was not; the components left
//! behind are marked `outdated`, so the next reload rebuilds them.
//!
//! The handle holds the one current topology: the reloader reads it there
//! and installs the new one there.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};

use super::handle::DrainFlusher;
use super::reshape::Reshape;
use super::{Live, TopologyHandle};
use crate::config::Diagnostics;
use crate::control::{Control, NotLive, ReloadError, Shared, Swap, SwapDone, TaskName};
use crate::ids::TaskId;
use crate::plugin::{load_library_in, BoltObj, Instance, SpoutObj};
use crate::topology::{BindError, Component, Kind, Topology, WaitPlan};

/// How long a reload waits for every task to prepare its new instance
/// (beyond a spout's drain), and then for every task to confirm the verdict.
pub const SWAP_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a reload looks at a spout drain it waits on (see
/// [`DrainFlusher`]).
const DRAIN_POLL: Duration = Duration::from_millis(100);

/// Reload counts, shared by the handle.
#[derive(Debug, Default)]
pub struct ReloadCounts {
    /// Reloads applied in full (including those that changed nothing).
    pub reloads: AtomicU64,
    /// Reloads that failed or were refused and rolled back: the topology
    /// ran on unchanged.
    pub failed: AtomicU64,
    /// Reloads committed but only partly applied.
    pub partial: AtomicU64,
}

/// A request to reload, from SIGHUP, the HTTP API or the file watcher.
pub struct ReloadRequest {
    /// What asked for it, for the log.
    pub trigger: &'static str,
    /// Called with the report once the reload that serves this request is
    /// over (on the reload thread: it must not block).
    pub reply: Option<Box<dyn FnOnce(ReloadReport) + Send>>,
}

impl std::fmt::Debug for ReloadRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadRequest")
            .field("trigger", &self.trigger)
            .field("reply", &self.reply.is_some())
            .finish()
    }
}

/// How a reload ended: what the log, `POST /api/v1/reload` and the
/// metrics all say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// The file asks for nothing new: nothing was touched.
    NothingChanged,
    /// Something failed before the commit point: every task kept its old
    /// instance and the running topology is what it was.
    RolledBack(Vec<ReloadError>),
    /// Every change was made; one line per change.
    Applied(Vec<String>),
    /// The reload committed, but not every change took: `applied` and
    /// `not_applied` (one line per component or step), and why.
    Partial {
        /// The changes that run now.
        applied: Vec<String>,
        /// The changes that did not take (their components keep running
        /// the version before, or a step did not finish).
        not_applied: Vec<String>,
        /// Why.
        errors: Vec<ReloadError>,
    },
}

impl ReloadOutcome {
    /// `unchanged`, `rolled_back`, `applied` or `partial`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NothingChanged => "unchanged",
            Self::RolledBack(_) => "rolled_back",
            Self::Applied(_) => "applied",
            Self::Partial { .. } => "partial",
        }
    }

    /// The errors it carries.
    pub fn errors(&self) -> &[ReloadError] {
        match self {
            Self::RolledBack(errors) | Self::Partial { errors, .. } => errors,
            Self::NothingChanged | Self::Applied(_) => &[],
        }
    }
}

/// One reload's report: its number, its log line and its outcome.
#[derive(Debug, Clone)]
pub struct ReloadReport {
    /// The reload's number in this run (1, 2, ...).
    pub number: u64,
    /// The line that was logged.
    pub line: String,
    /// What happened.
    pub outcome: ReloadOutcome,
}

impl ReloadReport {
    /// The report as `POST /api/v1/reload` answers it.
    pub fn to_json(&self) -> serde_json::Value {
        let strings = |v: &[String]| v.to_vec();
        let errors: Vec<String> = self.outcome.errors().iter().map(ToString::to_string).collect();
        let (applied, not_applied) = match &self.outcome {
            ReloadOutcome::Applied(lines) => (strings(lines), Vec::new()),
            ReloadOutcome::Partial { applied, not_applied, .. } => {
                (strings(applied), strings(not_applied))
            }
            ReloadOutcome::NothingChanged | ReloadOutcome::RolledBack(_) => {
                (Vec::new(), Vec::new())
            }
        };
        serde_json::json!({
            "reload": self.number,
            "outcome": self.outcome.kind(),
            "summary": self.line,
            "applied": applied,
            "not_applied": not_applied,
            "errors": errors,
        })
    }
}

/// What changed in one component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The component's name.
    pub name: String,
    /// Why it is rebuilt: "library", "config", "unfinished" (an earlier
    /// reload left it partly applied), or several.
    pub why: Vec<&'static str>,
}

impl Change {
    /// "library changed", "config changed and library changed", ...
    fn reasons(&self) -> String {
        let words: Vec<&str> = self
            .why
            .iter()
            .map(|w| match *w {
                "library" => "library changed",
                "config" => "config changed",
                _ => "an earlier reload left it partly applied",
            })
            .collect();
        words.join(" and ")
    }
}

/// What a reload changes, by component name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    /// Components rebuilt in place (library or config changed).
    pub rebuilt: Vec<Change>,
    /// Bolts added.
    pub added: Vec<String>,
    /// Bolts whose parallelism changed (rebuilt with the new library and
    /// config, if those changed too).
    pub resized: Vec<String>,
}

impl Diff {
    /// True when nothing changes.
    pub fn is_empty(&self) -> bool {
        self.rebuilt.is_empty() && self.added.is_empty() && self.resized.is_empty()
    }
}
/// Compares the running topology with the new one (aligned by
/// [`reshape::align`](super::reshape::align)) by component name: the components
/// to rebuild, add and resize, or every reason the change cannot be made
/// live.
///
/// # Errors
/// One line per change that cannot be made live.
pub fn diff(old: &Topology, new: &Topology) -> Result<Diff, Vec<ReloadError>> {
    let mut refused = whole_changes(old, new);
    let mut changes = Diff::default();
    for n in &new.components {
        let Some(o) = old.components.iter().find(|o| o.name == n.name) else {
            if n.kind == Kind::Bolt {
                changes.added.push(n.name.clone());
            } else {
                refused.push(NotLive::SpoutAdded { at: at(new, n), name: n.name.clone() });
            }
            continue;
        };
        let changed = fixed_changes((old, o), (new, n));
        let why = rebuild_reasons((old, o), (new, n));
        if !changed.is_empty() {
            let (kind, name) = (kind(n.kind), n.name.clone());
            refused.push(NotLive::Changed { at: at(new, n), kind, name, changed });
        } else if o.parallelism() != n.parallelism() {
            changes.resized.push(n.name.clone());
        } else if !why.is_empty() {
            changes.rebuilt.push(Change { name: n.name.clone(), why });
        }
    }
    if refused.is_empty() {
        Ok(changes)
    } else {
        Err(refused.into_iter().map(ReloadError::NotLive).collect())
    }
}

/// What cannot change live about the topology as a whole: its name, its
/// settings, and its components removed.
fn whole_changes(old: &Topology, new: &Topology) -> Vec<NotLive> {
    let mut refused = Vec::new();
    if old.name != new.name {
        refused.push(NotLive::Name { old: old.name.clone(), new: new.name.clone() });
    }
    if old.settings != new.settings {
        let changed_fields = settings_diff(&old.settings, &new.settings);
        refused.push(NotLive::Settings { changed_fields });
    }
    for c in &old.components {
        if !new.components.iter().any(|n| n.name == c.name) {
            refused.push(NotLive::Removed { kind: kind(c.kind), name: c.name.clone() });
        }
    }
    refused
}

/// What changed from component `o` of `old` to `n` of `new` that a rebuild
/// in place cannot carry.
fn fixed_changes(
    (old, o): (&Topology, &Component),
    (new, n): (&Topology, &Component),
) -> Vec<&'static str> {
    let resized = o.parallelism() != n.parallelism();
    let checks = [
        (o.kind != n.kind, "its kind"),
        (resized && n.kind == Kind::Spout, "its parallelism (spouts are not rebalanced live)"),
        (
            resized && n.windowed,
            "its parallelism (a windowed bolt's windows are held by its tasks)",
        ),
        (inputs(old, o) != inputs(new, n), "its inputs or groupings"),
        (o.stream_decls() != n.stream_decls(), "its output streams"),
        (o.auto_ack != n.auto_ack, "its acking (basic bolt or not)"),
        (o.tick_tuple_freq_secs != n.tick_tuple_freq_secs, "tick_tuple_freq_secs"),
        (o.throttle != n.throttle, "its throttle"),
        (o.max_spout_pending != n.max_spout_pending, "max_spout_pending"),
        (o.wait.iter().map(wait_key).ne(n.wait.iter().map(wait_key)), "its wait strategies"),
    ];
    checks.into_iter().filter(|(changed, _)| *changed).map(|(_, what)| what).collect()
}

/// Why component `o` of `old` is rebuilt as `n` of `new`: "library",
/// "config", or "unfinished" when an earlier reload left it outdated.
fn rebuild_reasons(
    (old, o): (&Topology, &Component),
    (new, n): (&Topology, &Component),
) -> Vec<&'static str> {
    let mut why = Vec::new();
    if digest(old, o) != digest(new, n) {
        why.push("library");
    }
    if o.config != n.config {
        why.push("config");
    }
    if o.outdated && why.is_empty() {
        why.push("unfinished");
    }
    why
}

/// Where component `c` is declared in `t`'s file: `file:line:col`.
fn at(t: &Topology, c: &Component) -> String {
    format!("{}:{}:{}", t.file.display(), c.loc.line, c.loc.col)
}

fn kind(k: Kind) -> &'static str {
    match k {
        Kind::Spout => "spout",
        Kind::Bolt => "bolt",
    }
}

/// The names of the settings that differ (from their debug forms).
fn settings_diff(a: &crate::config::Settings, b: &crate::config::Settings) -> Vec<String> {
    let (a, b) = (format!("{a:#?}"), format!("{b:#?}"));
    a.lines()
        .zip(b.lines())
        .filter(|(x, y)| x != y)
        .filter_map(|(x, _)| x.trim().split(':').next())
        .map(str::to_owned)
        .collect()
}

/// A component's inputs by source name and stream name, so a reordered file
/// compares equal.
fn inputs(t: &Topology, c: &Component) -> Vec<String> {
    let mut out: Vec<String> = c
        .inputs
        .iter()
        .map(|i| {
            let source = &t.components[i.from];
            let stream = &source.outputs[i.stream as usize].decl.name;
            format!("{}/{stream}/{:?}/{:?}", source.name, i.grouping, i.throttle)
        })
        .collect();
    out.sort();
    out
}

fn wait_key(w: &WaitPlan) -> String {
    match w {
        WaitPlan::Builtin(spec) => format!("{spec:?}"),
        WaitPlan::Plugin { name, config, .. } => format!("{name} {config}"),
    }
}

fn digest<'t>(t: &'t Topology, c: &Component) -> Option<&'t str> {
    t.libraries.iter().find(|l| l.alias == c.alias()).map(|l| l.digest.as_str())
}
/// What a committed reload applied, from how each task's swap `ended`, the
/// lines and errors of the reshape (`reshaped`, `errors`: adding or
/// resizing bolts). Marks the components some of whose tasks kept the
/// version before as `outdated` in `new`, so the next reload rebuilds them.
fn outcome(
    new: &mut Topology,
    diff: &Diff,
    ended: Ended,
    reshaped: Vec<String>,
    errors: Vec<ReloadError>,
) -> ReloadOutcome {
    // What `errors` holds on entry: adding or resizing bolts failed.
    let reshape_failed = !errors.is_empty();
    let mut tally = Tally { errors, ..Tally::default() };
    for change in &diff.rebuilt {
        if !tally.rebuilt(change, &ended) {
            if let Some(c) = new.components.iter_mut().find(|c| c.name == change.name) {
                c.outdated = true;
            }
        }
    }
    tally.applied.extend(reshaped);
    if reshape_failed {
        for name in diff.added.iter().chain(&diff.resized) {
            if !tally.applied.iter().any(|l| l.contains(&format!("{name:?}"))) {
                tally.not_applied.push(format!("{name:?}: adding or resizing it did not finish"));
            }
        }
    }
    let unchanged =
        new.components.len() - diff.rebuilt.len() - diff.added.len() - diff.resized.len();
    tally.into_outcome(unchanged)
}

/// What a committed reload applied and did not, and why, as it is told.
#[derive(Default)]
struct Tally {
    applied: Vec<String>,
    not_applied: Vec<String>,
    errors: Vec<ReloadError>,
}

impl Tally {
    /// Tells how the tasks of rebuilt component `change` `ended`; false
    /// when some kept the version before.
    fn rebuilt(&mut self, change: &Change, ended: &Ended) -> bool {
        let mine = |t: &TaskName| t.component == change.name;
        let kept: Vec<&(TaskName, Option<ReloadError>)> =
            ended.kept.iter().filter(|(t, _)| mine(t)).collect();
        let silent: Vec<&TaskName> = ended.silent.iter().filter(|t| mine(t)).collect();
        let (tasks, pause) = ended
            .committed
            .iter()
            .filter(|(t, _)| mine(t))
            .fold((0, Duration::ZERO), |(k, m), (_, p)| (k + 1, m.max(*p)));
        if kept.is_empty() && silent.is_empty() {
            self.applied.push(format!(
                "rebuilt {:?} ({}, {tasks} task{}, pause {:.2} ms)",
                change.name,
                change.reasons(),
                if tasks == 1 { "" } else { "s" },
                pause.as_secs_f64() * 1e3
            ));
            return true;
        }
        let mut left = format!(
            "{:?}: {} task(s) kept the version before",
            change.name,
            kept.len() + silent.len()
        );
        if tasks > 0 {
            let _ = write!(left, " ({tasks} run the new one)");
        }
        self.not_applied.push(left);
        self.errors.extend(left_behind(&kept, &silent));
        false
    }

    /// `Applied` when everything was, `Partial` otherwise.
    fn into_outcome(mut self, unchanged: usize) -> ReloadOutcome {
        if self.errors.is_empty() && self.not_applied.is_empty() {
            self.applied.push(format!("{unchanged} component(s) unchanged kept running"));
            return ReloadOutcome::Applied(self.applied);
        }
        if self.not_applied.is_empty() {
            self.not_applied.push("a step after the commit did not finish".to_owned());
        }
        let Tally { applied, not_applied, errors } = self;
        ReloadOutcome::Partial { applied, not_applied, errors }
    }
}

/// Why each task that `kept` its old instance, or stayed `silent`, did not
/// swap: its own error when it gave one.
fn left_behind(
    kept: &[&(TaskName, Option<ReloadError>)],
    silent: &[&TaskName],
) -> Vec<ReloadError> {
    let kept = kept.iter().map(|(task, error)| {
        error.clone().unwrap_or_else(|| ReloadError::Refused {
            task: task.clone(),
            reason: "it kept its old instance at the commit".into(),
        })
    });
    let silent = silent.iter().map(|task| ReloadError::Refused {
        task: (*task).clone(),
        reason: format!(
            "it did not confirm the commit within {} s; it swaps when it next reads its control \
             queue",
            SWAP_TIMEOUT.as_secs()
        ),
    });
    kept.chain(silent).collect()
}

/// The one line a reload logs (and `POST /api/v1/reload` answers as its
/// `summary`): reload `number`, asked for by `trigger`, took `ms`. It says
/// "rolled back" only of a reload that was.
fn summary(number: u64, trigger: &str, ms: f64, outcome: &ReloadOutcome) -> String {
    let errors = |errors: &[ReloadError]| {
        format!(
            "{} error{}: {}",
            errors.len(),
            if errors.len() == 1 { "" } else { "s" },
            errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
        )
    };
    match outcome {
        ReloadOutcome::NothingChanged => {
            format!("reload #{number} ({trigger}) succeeded in {ms:.1} ms: nothing changed")
        }
        ReloadOutcome::Applied(lines) => {
            format!("reload #{number} ({trigger}) succeeded in {ms:.1} ms: {}", lines.join("; "))
        }
        ReloadOutcome::RolledBack(e) => format!(
            "reload #{number} ({trigger}) failed, rolled back: the running topology is \
             unchanged ({})",
            errors(e)
        ),
        ReloadOutcome::Partial { applied, not_applied, errors: e } => format!(
            "reload #{number} ({trigger}) partly applied in {ms:.1} ms: applied: {}; \
             not applied: {} ({})",
            if applied.is_empty() { "nothing".to_owned() } else { applied.join("; ") },
            not_applied.join("; "),
            errors(e)
        ),
    }
}

/// One error per diagnostic, as `squall validate` lists them.
fn config_errors(diagnostics: &Diagnostics) -> Vec<ReloadError> {
    diagnostics.listed().items.into_iter().map(ReloadError::Config).collect()
}

/// A new instance for one task: the task, its instance, the new component.
type Built<'t> = (TaskName, New, &'t Component);

/// A new instance, built but not prepared.
enum New {
    Spout(SpoutObj),
    Bolt(BoltObj),
}

/// Reloads the topology file of a running topology.
#[derive(Debug)]
pub struct Reloader {
    file: PathBuf,
    handle: TopologyHandle,
    /// Where fresh copies of changed libraries are made (created on first use).
    scratch: PathBuf,
    copies: u64,
}

/// The swaps of one reload that reached their tasks.
struct Sent {
    /// Every task told, by task id.
    tasks: Vec<TaskName>,
    ready: Receiver<(u32, Result<(), ReloadError>)>,
    done: Receiver<SwapDone>,
    /// The longest drain of a swapped spout.
    longest_drain: Duration,
}

/// How the swaps of one reload ended, from the tasks' own reports.
#[derive(Default)]
struct Ended {
    /// Tasks now running their new instance, with their pause.
    committed: Vec<(TaskName, Duration)>,
    /// Tasks that kept their old instance, and why (when they said).
    kept: Vec<(TaskName, Option<ReloadError>)>,
    /// Tasks that did not report within the limit.
    silent: Vec<TaskName>,
}

impl Reloader {
    /// A reloader for `handle`, whose topology was read from `file`.
    pub fn new(file: PathBuf, handle: TopologyHandle) -> Self {
        let scratch = std::env::temp_dir().join(format!("squall-reload-{}", std::process::id()));
        Self { file, handle, scratch, copies: 0 }
    }

    /// Starts the reload thread and registers it with the handle, so SIGHUP,
    /// `POST /api/v1/reload` and `--watch` reach it. Requests that arrive
    /// while a reload runs are served together by the next one.
    ///
    /// # Errors
    /// When the thread cannot be spawned.
    pub fn spawn(self) -> std::io::Result<()> {
        let (tx, rx) = crossbeam_channel::unbounded::<ReloadRequest>();
        let handle = self.handle.clone();
        std::thread::Builder::new().name("__reload".into()).spawn(move || self.serve(&rx))?;
        handle.set_reloader(tx);
        Ok(())
    }

    fn serve(mut self, requests: &Receiver<ReloadRequest>) {
        while let Ok(first) = requests.recv() {
            let mut batch = vec![first];
            batch.extend(requests.try_iter());
            let trigger = batch.iter().map(|r| r.trigger).collect::<Vec<_>>().join("+");
            let report = self.reload(&trigger);
            for r in batch {
                if let Some(reply) = r.reply {
                    reply(report.clone());
                }
            }
        }
    }

    /// One reload: logs its outcome in one line (and each error on its
    /// own), counts it, and returns its report.
    pub fn reload(&mut self, trigger: &str) -> ReloadReport {
        let started = Instant::now();
        let counts = self.handle.reload_counts();
        let number = counts.reloads.load(Ordering::Relaxed)
            + counts.failed.load(Ordering::Relaxed)
            + counts.partial.load(Ordering::Relaxed)
            + 1;
        // A checkpoint in progress finishes first; none starts meanwhile.
        let gate = self.handle.checkpoint_gate();
        let held = gate.lock().unwrap_or_else(|p| p.into_inner());
        let outcome = self.transaction(number);
        drop(held);
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let counts = self.handle.reload_counts();
        for e in outcome.errors() {
            tracing::error!("reload #{number}: {e}");
        }
        let count = match &outcome {
            ReloadOutcome::NothingChanged | ReloadOutcome::Applied(_) => &counts.reloads,
            ReloadOutcome::RolledBack(_) => &counts.failed,
            ReloadOutcome::Partial { .. } => &counts.partial,
        };
        count.fetch_add(1, Ordering::Relaxed);
        let line = summary(number, trigger, ms, &outcome);
        match outcome {
            ReloadOutcome::NothingChanged | ReloadOutcome::Applied(_) => tracing::info!("{line}"),
            _ => tracing::warn!("{line}"),
        }
        ReloadReport { number, line, outcome }
    }

    /// Prepare, then commit (see the module doc).
    fn transaction(&mut self, reload: u64) -> ReloadOutcome {
        if self.handle.state() != crate::control::RunState::Running {
            return ReloadOutcome::RolledBack(vec![ReloadError::Draining]);
        }
        let current = self.handle.topology();
        let (new, diff) = match self.read(&current) {
            Ok(read) => read,
            Err(errors) => return ReloadOutcome::RolledBack(errors),
        };
        if diff.is_empty() {
            self.install(new);
            return ReloadOutcome::NothingChanged;
        }
        let (sent, reshape) = match self.prepare(reload, &current, &new, &diff) {
            Ok(prepared) => prepared,
            Err(errors) => return ReloadOutcome::RolledBack(errors),
        };
        // Commit: from here on, nothing rolls back.
        self.verdict(reload, &sent, true);
        let ended = await_done(&sent, SWAP_TIMEOUT);
        let (reshaped, reshape_errors) = if reshape.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            reshape.commit(&self.handle, &current)
        };
        self.settle(new, &diff, ended, reshaped, reshape_errors)
    }

    /// Step 1 and 2: the file bound and aligned with `current`, and what
    /// changes.
    fn read(&mut self, current: &Topology) -> Result<(Topology, Diff), Vec<ReloadError>> {
        let new = super::reshape::align(current, self.bind()?);
        let diff = diff(current, &new)?;
        Ok((new, diff))
    }

    /// Steps 3 and 4: every new instance built and handed to its task, the
    /// added tasks started, and every task prepared. Nothing running
    /// changes until the verdict; on a failure every task is told to
    /// abort and the added tasks leave.
    fn prepare(
        &mut self,
        reload: u64,
        current: &Topology,
        new: &Topology,
        diff: &Diff,
    ) -> Result<(Sent, Reshape), Vec<ReloadError>> {
        let built = self.construct(current, new, &diff.rebuilt)?;
        let mut reshape =
            Reshape::build(&self.handle, new, diff.added.clone(), diff.resized.clone())?;
        let failed = reshape.start_added(&self.handle);
        if !failed.is_empty() {
            reshape.abandon();
            return Err(failed);
        }
        let (sent, mut errors) = self.send_swaps(reload, built);
        if errors.is_empty() {
            let spouts = sent.tasks.iter().filter(|t| t.kind == Kind::Spout);
            let spouts = spouts.map(|t| t.task.0).collect();
            let mut flusher = DrainFlusher::new(&self.handle, spouts);
            let tick = || {
                flusher.poll(&self.handle);
            };
            errors = await_ready(&sent, sent.longest_drain + SWAP_TIMEOUT, tick);
        }
        if !errors.is_empty() {
            self.verdict(reload, &sent, false);
            reshape.abandon();
            // Only a commit verdict makes a task swap, and none was sent:
            // whatever the tasks report (or not), the old instances run.
            let _ = await_done(&sent, SWAP_TIMEOUT);
            return Err(errors);
        }
        Ok((sent, reshape))
    }

    /// Installs what runs now and says what was applied.
    fn settle(
        &self,
        mut new: Topology,
        diff: &Diff,
        ended: Ended,
        reshaped: Vec<String>,
        errors: Vec<ReloadError>,
    ) -> ReloadOutcome {
        let outcome = outcome(&mut new, diff, ended, reshaped, errors);
        self.install(new);
        outcome
    }

    /// Installs `topology` in the handle as the one that runs, with the
    /// queues as they are now.
    fn install(&self, topology: Topology) {
        let wiring = self.handle.live().wiring.clone();
        self.handle.install(Live { topology: Arc::new(topology), wiring });
    }

    /// Parses, validates and binds the file again. The loader loads each
    /// library from a private copy with a name used once, in `scratch`: a
    /// changed library is new code, and one whose bytes did not change is
    /// the library already mapped.
    fn bind(&mut self) -> Result<Topology, Vec<ReloadError>> {
        let config = crate::config::load(&self.file).map_err(|d| config_errors(&d))?;
        let (scratch, loads) = (self.scratch.clone(), &mut self.copies);
        let result = crate::topology::bind_with(&config, &mut |decl, options| {
            let pinned = decl.sha256.as_deref();
            let lib = load_library_in(&scratch, &decl.alias, &decl.path, pinned, options)?;
            *loads += 1;
            tracing::debug!(alias = %decl.alias, digest = %lib.digest, loads = *loads, "reload: library loaded");
            let digest = lib.digest.clone();
            Ok((lib, digest))
        });
        result.map_err(|e| match e {
            BindError::Config(d) => config_errors(&d),
            BindError::Load(errors) => {
                errors.into_iter().map(|e| ReloadError::Load(Shared::new(e))).collect()
            }
        })
    }

    /// Builds a new instance for every task of every changed component.
    fn construct<'t>(
        &self,
        current: &Topology,
        new: &'t Topology,
        changes: &[Change],
    ) -> Result<Vec<Built<'t>>, Vec<ReloadError>> {
        let mut out = Vec::new();
        for change in changes {
            let n = new.components.iter().find(|c| c.name == change.name).expect("diffed");
            let o = current.components.iter().find(|c| c.name == change.name).expect("diffed");
            let refused = |cause: String| {
                vec![ReloadError::Construct {
                    at: at(new, n),
                    kind: kind(n.kind),
                    component: n.name.clone(),
                    reference: n.reference.clone(),
                    cause,
                }]
            };
            for task in o.tasks.clone() {
                let name = TaskName { kind: n.kind, component: n.name.clone(), task: TaskId(task) };
                match n.factory.build(&n.config) {
                    Ok(Instance::Bolt(b)) if n.kind == Kind::Bolt => {
                        out.push((name, New::Bolt(b), n));
                    }
                    Ok(Instance::Spout(s)) if n.kind == Kind::Spout => {
                        out.push((name, New::Spout(s), n));
                    }
                    Ok(_) => {
                        return Err(refused(
                            "the constructor returned a component of another kind".into(),
                        ))
                    }
                    Err(e) => {
                        let what = if e.is_panic() { "panicked" } else { "failed" };
                        return Err(refused(format!("constructor {what}: {}", e.message)));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Sends every built instance to its task; the tasks told, and why any
    /// could not be.
    fn send_swaps(&self, reload: u64, built: Vec<Built<'_>>) -> (Sent, Vec<ReloadError>) {
        let total = built.len().max(1);
        let (ready_tx, ready) = bounded(total);
        let (done_tx, done) = bounded(total);
        let mut sent = Sent { tasks: Vec::new(), ready, done, longest_drain: Duration::ZERO };
        let mut errors = Vec::new();
        let settings = self.handle.topology().settings.clone();
        for (task, instance, component) in built {
            let drain = drain_limit(&settings, component);
            sent.longest_drain = sent.longest_drain.max(drain.unwrap_or_default());
            let (factory, config) = (component.factory, component.config.clone());
            let (ready, done) = (ready_tx.clone(), done_tx.clone());
            let message = match instance {
                New::Bolt(instance) => Control::SwapBolt(Box::new(Swap {
                    instance,
                    factory,
                    config,
                    drain: None,
                    reload,
                    ready,
                    done,
                })),
                New::Spout(instance) => Control::SwapSpout(Box::new(Swap {
                    instance,
                    factory,
                    config,
                    drain,
                    reload,
                    ready,
                    done,
                })),
            };
            if self.handle.send_control(task.task.0, message) {
                sent.tasks.push(task);
            } else {
                errors.push(ReloadError::Refused { task, reason: "it has stopped".into() });
            }
        }
        (sent, errors)
    }

    /// Tells every task the verdict.
    fn verdict(&self, reload: u64, sent: &Sent, commit: bool) {
        for task in &sent.tasks {
            // A task that has ended meanwhile runs nothing any more.
            let _ = self.handle.send_control(task.task.0, Control::Verdict { reload, commit });
        }
    }
}

/// Phase 1: every task took over its state and prepared its new
/// instance (a spout after its old instance drained), within `limit`; what
/// failed. `tick` runs every [`DRAIN_POLL`] meanwhile (the drain's window
/// flusher).
fn await_ready(sent: &Sent, limit: Duration, mut tick: impl FnMut()) -> Vec<ReloadError> {
    let deadline = Instant::now() + limit;
    let mut errors = Vec::new();
    let mut answered = std::collections::HashSet::new();
    while answered.len() < sent.tasks.len() {
        let slice = (Instant::now() + DRAIN_POLL).min(deadline);
        let received = sent.ready.recv_deadline(slice);
        if matches!(received, Err(RecvTimeoutError::Timeout)) && Instant::now() < deadline {
            tick();
            continue;
        }
        match received {
            Ok((task, Ok(()))) => {
                answered.insert(task);
            }
            Ok((task, Err(e))) => {
                answered.insert(task);
                errors.push(e);
            }
            Err(_) => {
                // Named, so that the log says whose prepare (or drain) is slow.
                let late: Vec<String> = sent
                    .tasks
                    .iter()
                    .filter(|t| !answered.contains(&t.task.0))
                    .map(ToString::to_string)
                    .collect();
                let shown = late.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
                let more = late.len().saturating_sub(3);
                let more = if more > 0 { format!(" and {more} more") } else { String::new() };
                errors.push(ReloadError::Timeout {
                    what: format!(
                        "not every task prepared its new instance ({shown}{more} did not)"
                    ),
                    secs: limit.as_secs(),
                });
                break;
            }
        }
    }
    errors
}

/// Phase 2: how each task's swap ended, as it reported within `limit`.
fn await_done(sent: &Sent, limit: Duration) -> Ended {
    let deadline = Instant::now() + limit;
    let mut ended = Ended::default();
    let mut heard = std::collections::HashSet::new();
    while heard.len() < sent.tasks.len() {
        let Ok(done) = sent.done.recv_deadline(deadline) else { break };
        let Some(task) = sent.tasks.iter().find(|t| t.task.0 == done.task) else { continue };
        heard.insert(done.task);
        if done.committed {
            ended.committed.push((task.clone(), done.pause));
        } else {
            ended.kept.push((task.clone(), done.error));
        }
    }
    ended.silent = sent.tasks.iter().filter(|t| !heard.contains(&t.task.0)).cloned().collect();
    ended
}

/// How long a swapped spout's old instance may drain under `settings`: the
/// message timeout (or [`SWAP_TIMEOUT`] with timeouts off); `None` for bolts
/// and for spouts whose ids survive the swap.
fn drain_limit(settings: &crate::config::Settings, c: &Component) -> Option<Duration> {
    if c.kind != Kind::Spout || c.ids_survive_swap {
        return None;
    }
    Some(if settings.enable_message_timeouts {
        Duration::from_secs(settings.message_timeout_secs)
    } else {
        SWAP_TIMEOUT
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Loc, Settings, ThrottleMode, ThrottleRate, ThrottleSpec, WaitSpec};
    use crate::control::ReshapeError;
    use crate::topology::fixtures::{bolt, component, linked, topology};
    use crate::topology::{Grouping, Input};
    use crossbeam_channel::Sender;

    #[test]
    fn an_unchanged_topology_rebuilds_nothing() {
        assert_eq!(diff(&topology(), &topology()), Ok(Diff::default()));
    }

    #[test]
    fn a_changed_bolt_config_rebuilds_that_bolt() {
        let mut new = topology();
        new.components[1].config = "x = 1\n".into();
        let changes = diff(&topology(), &new).expect("live").rebuilt;
        assert_eq!(changes, [Change { name: "b".into(), why: vec!["config"] }]);
    }

    #[test]
    fn a_changed_library_rebuilds_every_component_it_holds_spouts_included() {
        let mut new = topology();
        new.libraries[0].digest = "d2".into();
        let changes = diff(&topology(), &new).expect("live").rebuilt;
        assert_eq!(
            changes,
            [
                Change { name: "s".into(), why: vec!["library"] },
                Change { name: "b".into(), why: vec!["library"] }
            ]
        );
        // With the spout from another library, only the bolt changes.
        let (mut old, mut new) = (topology(), new);
        for t in [&mut old, &mut new] {
            t.components[0].reference = "other::s".into();
        }
        let changes = diff(&old, &new).expect("live").rebuilt;
        assert_eq!(changes, [Change { name: "b".into(), why: vec!["library"] }]);
    }

    #[test]
    fn changes_that_cannot_be_made_live_are_refused_with_their_reasons() {
        let mut new = topology();
        new.name = "renamed".into();
        new.settings.acker_executors += 1;
        new.components[0].tasks = 0..2;
        new.components[1].inputs[0].grouping = Grouping::Global;
        new.components.push(component("c", Kind::Spout, 4..5));
        let refused = diff(&topology(), &new).expect_err("refused");
        let all = refused.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
        assert!(all.contains("topology name changed"), "{all}");
        assert!(all.contains("acker_executors"), "{all}");
        assert!(all.contains("spouts are not rebalanced live"), "{all}");
        assert!(all.contains("its inputs or groupings"), "{all}");
        assert!(all.contains("spout \"c\" is new"), "{all}");
    }

    #[test]
    fn a_new_bolt_is_added_and_a_bolt_with_another_parallelism_is_resized() {
        let mut new = topology();
        new.components[1].tasks = 1..4;
        new.components[1].config = "x = 1\n".into();
        new.components.push(component("c", Kind::Bolt, 4..5));
        let d = diff(&topology(), &new).expect("live");
        assert_eq!(
            d,
            Diff { rebuilt: vec![], added: vec!["c".into()], resized: vec!["b".into()] },
            "a resized bolt is rebuilt by the resize, with its new config"
        );
    }

    #[test]
    fn align_keeps_running_task_ids_and_numbers_new_tasks_past_the_last() {
        // Old: s (task 0) -> b (tasks 1, 2). New file order: c, b (3 tasks), s.
        let old = topology();
        let mut b = component("b", Kind::Bolt, 1..4);
        let mut c = component("c", Kind::Bolt, 4..5);
        let s = component("s", Kind::Spout, 0..1);
        for (to, from) in [(&mut b, 2usize), (&mut c, 2)] {
            to.inputs.push(Input {
                from,
                stream: 0,
                grouping: Grouping::Shuffle,
                loc: Loc::new(9, 1),
                throttle: None,
            });
        }
        let mut s = s;
        for sub in [0usize, 1] {
            let tasks = if sub == 0 { vec![4] } else { vec![1, 2, 3] };
            s.outputs[0].subscribers.push(crate::topology::Subscriber {
                component: sub,
                grouping: Grouping::Shuffle,
                tasks,
                pairwise: false,
            });
        }
        let mut new = old.clone();
        new.components = vec![c, b, s];
        new.task_count = 5;
        let aligned = super::super::reshape::align(&old, new);
        let names: Vec<&str> = aligned.components.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["s", "b", "c"], "running components keep their index");
        assert_eq!(aligned.components[0].tasks, 0..1, "the spout keeps its task");
        // Fresh ids in the new file's order: c first, then b.
        assert_eq!(aligned.components[1].tasks, 4..7, "resized: fresh ids");
        assert_eq!(aligned.components[1].retired, [1, 2], "its old ids still count");
        assert_eq!(aligned.components[2].tasks, 3..4, "added: fresh ids");
        assert_eq!(aligned.task_count, 7);
        let subs: Vec<(usize, Vec<u32>)> = aligned.components[0].outputs[0]
            .subscribers
            .iter()
            .map(|s| (s.component, s.tasks.clone()))
            .collect();
        assert_eq!(subs, [(2, vec![3]), (1, vec![4, 5, 6])]);
        assert_eq!(aligned.components[1].inputs[0].from, 0);
        assert_eq!(aligned.components[2].inputs[0].from, 0);
    }

    #[test]
    fn a_removed_component_is_refused() {
        let mut new = topology();
        new.components.pop();
        let refused = diff(&topology(), &new).expect_err("refused");
        assert!(refused[0].to_string().contains("bolt \"b\" was removed"), "{refused:?}");
    }

    #[test]
    fn a_component_left_outdated_by_a_partial_reload_is_rebuilt_by_the_next() {
        let mut old = topology();
        old.components[1].outdated = true;
        let changes = diff(&old, &topology()).expect("live").rebuilt;
        assert_eq!(changes, [Change { name: "b".into(), why: vec!["unfinished"] }]);
        assert_eq!(changes[0].reasons(), "an earlier reload left it partly applied");
        let both = Change { name: "b".into(), why: vec!["library", "config"] };
        assert_eq!(both.reasons(), "library changed and config changed");
    }

    #[test]
    fn the_report_says_the_outcome_with_what_was_and_was_not_applied() {
        let task = TaskName { kind: Kind::Bolt, component: "b".into(), task: TaskId(2) };
        let error = ReloadError::Task { task, call: "prepare", cause: "no".into() };
        let report = ReloadReport {
            number: 3,
            line: "reload #3 (HTTP) partly applied ...".into(),
            outcome: ReloadOutcome::Partial {
                applied: vec!["rebuilt \"a\"".into()],
                not_applied: vec!["\"b\": 1 task(s) kept the version before".into()],
                errors: vec![error],
            },
        };
        let json = report.to_json();
        assert_eq!(json["outcome"], "partial");
        assert_eq!(json["reload"], 3);
        assert_eq!(json["applied"][0], "rebuilt \"a\"");
        assert_eq!(json["not_applied"][0], "\"b\": 1 task(s) kept the version before");
        assert_eq!(json["errors"][0], "bolt \"b\" task 2: prepare: no");
        let rolled_back = ReloadOutcome::RolledBack(vec![ReloadError::Draining]);
        assert_eq!(rolled_back.kind(), "rolled_back");
        assert_eq!(rolled_back.errors().len(), 1);
        assert!(ReloadOutcome::Applied(vec![]).errors().is_empty());
        assert_eq!(ReloadOutcome::NothingChanged.kind(), "unchanged");
    }

    fn task(component: &str, task: u32) -> TaskName {
        TaskName { kind: Kind::Bolt, component: component.into(), task: TaskId(task) }
    }

    fn ms(ms: f64) -> Duration {
        Duration::from_secs_f64(ms / 1e3)
    }

    #[test]
    fn every_change_that_cannot_be_made_live_is_named_at_its_component() {
        type Edit = fn(&mut Topology);
        let cases: [(Edit, &str); 9] = [
            (|t| t.components[1].kind = Kind::Spout, "its kind"),
            (
                |t| t.components[1].outputs[0].decl.fields = vec!["other".into()].into(),
                "its output streams",
            ),
            (|t| t.components[1].auto_ack = false, "its acking (basic bolt or not)"),
            (|t| t.components[1].tick_tuple_freq_secs = Some(5), "tick_tuple_freq_secs"),
            (
                |t| {
                    t.components[0].throttle = Some(ThrottleSpec {
                        mode: ThrottleMode::Period,
                        rate: ThrottleRate::TuplesPerSec(10),
                        period_millis: 500,
                        loc: Loc::new(4, 1),
                    })
                },
                "its throttle",
            ),
            (|t| t.components[0].max_spout_pending = Some(5), "max_spout_pending"),
            (
                |t| t.components[1].wait[1] = WaitPlan::Builtin(WaitSpec::Park { park_micros: 5 }),
                "its wait strategies",
            ),
            (
                |t| {
                    t.components[1].windowed = true;
                    t.components[1].tasks = 1..4;
                },
                "a windowed bolt's windows are held by its tasks",
            ),
            (|t| t.components[1].inputs[0].grouping = Grouping::All, "its inputs or groupings"),
        ];
        for (edit, what) in cases {
            let mut new = topology();
            edit(&mut new);
            let refused = diff(&topology(), &new).expect_err(what);
            assert_eq!(refused.len(), 1, "{what}: {refused:?}");
            let line = refused[0].to_string();
            assert!(line.starts_with("t.toml:3:1: "), "{line}");
            assert!(line.contains(what), "{what}: {line}");
            assert!(line.ends_with("changed, which cannot change live"), "{line}");
        }
    }

    #[test]
    fn inputs_written_in_another_order_are_the_same_inputs() {
        let s = component("s", Kind::Spout, 0..1);
        let t = component("t", Kind::Spout, 1..2);
        let old = linked(vec![s.clone(), t.clone(), bolt("b", 2..3, &[0, 1])]);
        let new = linked(vec![s, t, bolt("b", 2..3, &[1, 0])]);
        assert_eq!(diff(&old, &new), Ok(Diff::default()));
    }

    #[test]
    fn a_settings_change_names_the_settings_that_changed() {
        let old = Settings::default();
        let mut new = old.clone();
        new.acker_executors = 4;
        new.message_timeout_secs = 5;
        assert_eq!(settings_diff(&old, &new), ["message_timeout_secs", "acker_executors"]);
        assert!(settings_diff(&old, &old).is_empty());
        let unnamed = NotLive::Settings { changed_fields: Vec::new() };
        assert!(unnamed.to_string().starts_with("[topology] settings changed (some setting)"));
        let mut changed = topology();
        changed.settings = new;
        let refused = diff(&topology(), &changed).expect_err("settings cannot change live");
        assert!(
            refused[0]
                .to_string()
                .starts_with("[topology] settings changed (message_timeout_secs, acker_executors)"),
            "{refused:?}"
        );
    }

    #[test]
    fn only_a_spout_whose_ids_do_not_survive_the_swap_drains_for_the_message_timeout() {
        let mut settings = Settings::default();
        let mut spout = component("s", Kind::Spout, 0..1);
        assert_eq!(drain_limit(&settings, &spout), Some(Duration::from_secs(30)));
        settings.enable_message_timeouts = false;
        assert_eq!(drain_limit(&settings, &spout), Some(SWAP_TIMEOUT));
        spout.ids_survive_swap = true;
        assert_eq!(drain_limit(&settings, &spout), None);
        let bolt = component("b", Kind::Bolt, 1..2);
        assert_eq!(drain_limit(&Settings::default(), &bolt), None);
    }

    fn rebuilt(name: &str) -> Diff {
        Diff { rebuilt: vec![Change { name: name.into(), why: vec!["config"] }], ..Diff::default() }
    }

    #[test]
    fn every_task_committed_is_applied_with_the_longest_pause() {
        let mut new = topology();
        let ended = Ended {
            committed: vec![(task("b", 1), ms(1.5)), (task("b", 2), ms(0.5))],
            ..Ended::default()
        };
        let out = outcome(&mut new, &rebuilt("b"), ended, Vec::new(), Vec::new());
        assert_eq!(
            out,
            ReloadOutcome::Applied(vec![
                "rebuilt \"b\" (config changed, 2 tasks, pause 1.50 ms)".into(),
                "1 component(s) unchanged kept running".into(),
            ])
        );
        assert!(new.components.iter().all(|c| !c.outdated));
    }

    #[test]
    fn a_task_that_kept_its_instance_makes_the_reload_partial_and_its_component_outdated() {
        let mut new = topology();
        let error = ReloadError::Task { task: task("b", 2), call: "prepare", cause: "no".into() };
        let ended = Ended {
            committed: vec![(task("b", 1), ms(1.0))],
            kept: vec![(task("b", 2), Some(error.clone()))],
            silent: Vec::new(),
        };
        let out = outcome(&mut new, &rebuilt("b"), ended, Vec::new(), Vec::new());
        assert_eq!(
            out,
            ReloadOutcome::Partial {
                applied: Vec::new(),
                not_applied: vec![
                    "\"b\": 1 task(s) kept the version before (1 run the new one)".into()
                ],
                errors: vec![error],
            }
        );
        assert!(new.components[1].outdated, "the next reload rebuilds it");
        assert!(!new.components[0].outdated);
    }

    #[test]
    fn tasks_that_kept_their_instance_silently_or_never_answered_are_named() {
        let mut new = topology();
        let ended = Ended {
            committed: Vec::new(),
            kept: vec![(task("b", 1), None)],
            silent: vec![task("b", 2)],
        };
        let ReloadOutcome::Partial { applied, not_applied, errors } =
            outcome(&mut new, &rebuilt("b"), ended, Vec::new(), Vec::new())
        else {
            panic!("partial");
        };
        assert!(applied.is_empty());
        assert_eq!(not_applied, ["\"b\": 2 task(s) kept the version before"]);
        let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                "bolt \"b\" task 1: it kept its old instance at the commit",
                "bolt \"b\" task 2: it did not confirm the commit within 10 s; it swaps when it \
                 next reads its control queue",
            ]
        );
    }

    #[test]
    fn a_reshape_that_failed_after_the_commit_says_which_bolts_did_not_finish() {
        let mut new = linked(vec![
            component("s", Kind::Spout, 0..1),
            bolt("b", 3..6, &[0]),
            bolt("c", 6..7, &[0]),
        ]);
        let diff = Diff { rebuilt: Vec::new(), added: vec!["c".into()], resized: vec!["b".into()] };
        let resized = "resized \"b\" from 2 to 3 tasks (4 state entries moved, pause 1.00 ms)";
        let failure = ReloadError::Reshape(ReshapeError::Spawn {
            task: TaskId(6),
            cause: Shared::new(std::io::Error::other("no")),
        });
        let out =
            outcome(&mut new, &diff, Ended::default(), vec![resized.into()], vec![failure.clone()]);
        assert_eq!(
            out,
            ReloadOutcome::Partial {
                applied: vec![resized.into()],
                not_applied: vec!["\"c\": adding or resizing it did not finish".into()],
                errors: vec![failure],
            }
        );
        // Everything applied, yet an error: a step after the commit.
        let timeout = ReloadError::Timeout {
            what: "not every upstream task took its new routes".into(),
            secs: 20,
        };
        let added = "added \"c\" (1 task, upstream rewired in 0.10 ms)";
        let diff = Diff { added: vec!["c".into()], ..Diff::default() };
        let out = outcome(&mut new, &diff, Ended::default(), vec![added.into()], vec![timeout]);
        let ReloadOutcome::Partial { applied, not_applied, .. } = out else { panic!("partial") };
        assert_eq!(applied, [added]);
        assert_eq!(not_applied, ["a step after the commit did not finish"]);
    }

    #[test]
    fn the_log_line_says_rolled_back_only_of_a_reload_that_was() {
        let error = ReloadError::Task { task: task("b", 2), call: "prepare", cause: "no".into() };
        assert_eq!(
            summary(1, "SIGHUP", 2.54, &ReloadOutcome::NothingChanged),
            "reload #1 (SIGHUP) succeeded in 2.5 ms: nothing changed"
        );
        let applied = ReloadOutcome::Applied(vec!["rebuilt \"b\"".into(), "1 kept".into()]);
        assert_eq!(
            summary(2, "--watch", 3.0, &applied),
            "reload #2 (--watch) succeeded in 3.0 ms: rebuilt \"b\"; 1 kept"
        );
        assert_eq!(
            summary(3, "HTTP", 1.0, &ReloadOutcome::RolledBack(vec![ReloadError::Draining])),
            "reload #3 (HTTP) failed, rolled back: the running topology is unchanged \
             (1 error: the topology is draining)"
        );
        let partial = ReloadOutcome::Partial {
            applied: Vec::new(),
            not_applied: vec!["\"b\": 1 task(s) kept the version before".into()],
            errors: vec![error, ReloadError::Draining],
        };
        let line = summary(4, "HTTP", 12.0, &partial);
        assert_eq!(
            line,
            "reload #4 (HTTP) partly applied in 12.0 ms: applied: nothing; not applied: \"b\": \
             1 task(s) kept the version before (2 errors: bolt \"b\" task 2: prepare: no; the \
             topology is draining)"
        );
        assert!(!line.contains("rolled back"));
    }

    /// Sent swaps to bolt "b"'s `tasks`, and the ends the tasks report on.
    #[allow(clippy::type_complexity)]
    fn sent(tasks: &[u32]) -> (Sent, Sender<(u32, Result<(), ReloadError>)>, Sender<SwapDone>) {
        let (ready_tx, ready) = bounded(8);
        let (done_tx, done) = bounded(8);
        let tasks = tasks.iter().map(|&t| task("b", t)).collect();
        (Sent { tasks, ready, done, longest_drain: Duration::ZERO }, ready_tx, done_tx)
    }

    #[test]
    fn the_prepare_phase_collects_every_failure_and_times_out_on_silence() {
        let (sent, ready, _done) = sent(&[1, 2]);
        let error = ReloadError::Task { task: task("b", 2), call: "open", cause: "no".into() };
        ready.send((1, Ok(()))).expect("send");
        ready.send((2, Err(error.clone()))).expect("send");
        assert_eq!(await_ready(&sent, SWAP_TIMEOUT, || {}), [error]);
        ready.send((1, Ok(()))).expect("send");
        let started = Instant::now();
        assert_eq!(
            await_ready(&sent, Duration::from_millis(50), || {}),
            [ReloadError::Timeout {
                what: "not every task prepared its new instance (bolt \"b\" task 2 did not)".into(),
                secs: 0
            }]
        );
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn the_commit_phase_sorts_tasks_into_committed_kept_and_silent() {
        let (sent, _ready, done) = sent(&[1, 2, 3]);
        let error = ReloadError::Refused { task: task("b", 2), reason: "no".into() };
        let report = |task, committed, error| SwapDone { task, committed, error, pause: ms(2.0) };
        done.send(report(9, true, None)).expect("a task of another reload is ignored");
        done.send(report(1, true, None)).expect("send");
        done.send(report(2, false, Some(error.clone()))).expect("send");
        let ended = await_done(&sent, Duration::from_millis(50));
        assert_eq!(ended.committed, [(task("b", 1), ms(2.0))]);
        assert_eq!(ended.kept, [(task("b", 2), Some(error))]);
        assert_eq!(ended.silent, [task("b", 3)]);
    }
}
