//! Live reload: the topology file is read again, compared with the running
//! topology by component name, and the bolts that changed are swapped inside
//! their executors while tuples flow (see docs/operations.md, "Reloading").
//!
//! # Order
//! 1. Parse, validate and bind the new file completely, as `squall
//!    validate` does. A library whose SHA-256 differs from the running one
//!    is loaded from a fresh copy with a unique name (`dlopen` of a path it
//!    has seen returns the old code), hashed again while loading (a library
//!    still being written fails the check and is not loaded).
//! 2. Diff by component name ([`diff`]). A change that cannot be made live
//!    refuses the whole reload, with its reason.
//! 3. Construct every new instance. Nothing running has been touched yet.
//! 4. Swap in two phases ([`Swap`]): every task of every changed component
//!    hands its state to its new instance and prepares (opens) it; only when
//!    all of them succeeded are they told to commit, otherwise every task
//!    keeps its old instance. A spout's old instance is deactivated and
//!    drained first (its pending trees complete or fail back to it, bounded
//!    by the message timeout), unless its message ids survive the swap.
//!
//! On any error the running topology is left as it was.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};

use super::grow::Growth;
use super::TopologyHandle;
use crate::control::{Control, Swap, SwapDone};
use crate::plugin::{load_library_in, BoltObj, Instance, SpoutObj};
use crate::topology::{BindError, Component, Kind, Topology, WaitPlan};

/// How long a reload waits for every task to prepare its new instance (and
/// each task for the verdict), and then for every task to report back.
pub const SWAP_TIMEOUT: Duration = Duration::from_secs(10);

/// Reload counts, shared by the handle.
#[derive(Debug, Default)]
pub struct ReloadCounts {
    /// Reloads that succeeded (including those that changed nothing).
    pub reloads: AtomicU64,
    /// Reloads that failed or were refused; the topology kept running unchanged.
    pub failed: AtomicU64,
}

/// A request to reload, from SIGHUP, the HTTP API or the file watcher.
#[derive(Debug)]
pub struct ReloadRequest {
    /// What asked for it, for the log.
    pub trigger: &'static str,
    /// Where to send the outcome (the summary line, or why it failed).
    pub reply: Option<Sender<Result<String, String>>>,
}

/// What changed in one bolt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The component's name.
    pub name: String,
    /// Why it is rebuilt: "library", "config" or both.
    pub why: Vec<&'static str>,
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
/// [`grow::align`](super::grow::align)) by component name: the components
/// to rebuild, add and resize, or every reason the change cannot be made
/// live.
///
/// # Errors
/// One line per change that cannot be made live.
pub fn diff(old: &Topology, new: &Topology) -> Result<Diff, Vec<String>> {
    let mut refused = Vec::new();
    if old.name != new.name {
        refused.push(format!(
            "the topology name changed ({:?} -> {:?}); it cannot change live",
            old.name, new.name
        ));
    }
    if old.settings != new.settings {
        refused.push(format!(
            "[topology] settings changed ({}); settings (acker_executors, timeouts, buffers...) \
             cannot change live",
            settings_diff(&old.settings, &new.settings)
        ));
    }
    for c in &old.components {
        if !new.components.iter().any(|n| n.name == c.name) {
            refused.push(format!(
                "{} {:?} was removed; removing components live is not supported",
                kind(c.kind),
                c.name
            ));
        }
    }
    let mut changes = Diff::default();
    for n in &new.components {
        let Some(o) = old.components.iter().find(|o| o.name == n.name) else {
            if n.kind == Kind::Bolt {
                changes.added.push(n.name.clone());
            } else {
                refused.push(format!(
                    "{}:{}:{}: spout {:?} is new; adding spouts live is not supported",
                    new.file.display(),
                    n.loc.line,
                    n.loc.col,
                    n.name
                ));
            }
            continue;
        };
        let at = format!("{}:{}:{}", new.file.display(), n.loc.line, n.loc.col);
        let mut not_live = Vec::new();
        if o.kind != n.kind {
            not_live.push("its kind");
        }
        let resized = o.parallelism() != n.parallelism();
        if resized && n.kind == Kind::Spout {
            not_live.push("its parallelism (spouts are not rebalanced live)");
        }
        if resized && n.windowed {
            not_live.push("its parallelism (a windowed bolt's windows are held by its tasks)");
        }
        if inputs(old, o) != inputs(new, n) {
            not_live.push("its inputs or groupings");
        }
        if o.stream_decls() != n.stream_decls() {
            not_live.push("its output streams");
        }
        if o.auto_ack != n.auto_ack {
            not_live.push("its acking (basic bolt or not)");
        }
        if o.tick_tuple_freq_secs != n.tick_tuple_freq_secs {
            not_live.push("tick_tuple_freq_secs");
        }
        if o.throttle != n.throttle {
            not_live.push("its throttle");
        }
        if o.max_spout_pending != n.max_spout_pending {
            not_live.push("max_spout_pending");
        }
        if o.wait.iter().map(wait_key).ne(n.wait.iter().map(wait_key)) {
            not_live.push("its wait strategies");
        }
        let mut why = Vec::new();
        if digest(old, o) != digest(new, n) {
            why.push("library");
        }
        if o.config != n.config {
            why.push("config");
        }
        if !not_live.is_empty() {
            refused.push(format!(
                "{at}: {} {:?}: {} changed, which cannot change live",
                kind(n.kind),
                n.name,
                not_live.join(", ")
            ));
        } else if resized {
            changes.resized.push(n.name.clone());
        } else if !why.is_empty() {
            changes.rebuilt.push(Change { name: n.name.clone(), why });
        }
    }
    if refused.is_empty() {
        Ok(changes)
    } else {
        Err(refused)
    }
}

fn kind(k: Kind) -> &'static str {
    match k {
        Kind::Spout => "spout",
        Kind::Bolt => "bolt",
    }
}

/// The names of the settings that differ (from their debug forms).
fn settings_diff(a: &crate::config::Settings, b: &crate::config::Settings) -> String {
    let (a, b) = (format!("{a:#?}"), format!("{b:#?}"));
    let changed: Vec<&str> = a
        .lines()
        .zip(b.lines())
        .filter(|(x, y)| x != y)
        .filter_map(|(x, _)| x.trim().split(':').next())
        .collect();
    if changed.is_empty() {
        "some setting".to_owned()
    } else {
        changed.join(", ")
    }
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

/// A new instance for one task: component name, task, instance, new component.
type Built<'t> = (String, u32, New, &'t Component);

/// A new instance, built but not prepared.
enum New {
    Spout(SpoutObj),
    Bolt(BoltObj),
}

/// Reloads the topology file of a running topology.
#[derive(Debug)]
pub struct Reloader {
    file: PathBuf,
    current: Topology,
    handle: TopologyHandle,
    /// Where fresh copies of changed libraries are made (created on first use).
    scratch: PathBuf,
    copies: u64,
}

impl Reloader {
    /// A reloader for `handle`, whose topology was read from `file`.
    pub fn new(file: PathBuf, handle: TopologyHandle) -> Self {
        let current = Topology::clone(&handle.topology());
        let scratch = std::env::temp_dir().join(format!("squall-reload-{}", std::process::id()));
        Self { file, current, handle, scratch, copies: 0 }
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
            let outcome = self.reload(&trigger);
            for r in batch {
                if let Some(reply) = r.reply {
                    let _ = reply.send(outcome.clone());
                }
            }
        }
    }

    /// One reload: logs its summary line and counts it. The summary, or the
    /// reasons it failed (the running topology is then unchanged).
    ///
    /// # Errors
    /// Every reason the reload failed, one per line.
    pub fn reload(&mut self, trigger: &str) -> Result<String, String> {
        let started = Instant::now();
        let handle = self.handle.clone();
        let counts = handle.reload_counts();
        let n = counts.reloads.load(Ordering::Relaxed) + counts.failed.load(Ordering::Relaxed) + 1;
        match self.try_reload() {
            Ok(summary) => {
                counts.reloads.fetch_add(1, Ordering::Relaxed);
                let line = format!(
                    "reload #{n} ({trigger}) succeeded in {:.1} ms: {summary}",
                    started.elapsed().as_secs_f64() * 1e3
                );
                tracing::info!("{line}");
                Ok(line)
            }
            Err(errors) => {
                counts.failed.fetch_add(1, Ordering::Relaxed);
                for e in &errors {
                    tracing::error!("reload #{n}: {e}");
                }
                let line = format!(
                    "reload #{n} ({trigger}) failed, rolled back: the running topology is unchanged ({} error{}: {})",
                    errors.len(),
                    if errors.len() == 1 { "" } else { "s" },
                    errors.join("; ")
                );
                tracing::warn!("{line}");
                Err(line)
            }
        }
    }

    fn try_reload(&mut self) -> Result<String, Vec<String>> {
        if self.handle.state() != crate::control::RunState::Running {
            return Err(vec!["the topology is draining".to_owned()]);
        }
        let bound = self.bind()?;
        let new = super::grow::align(&self.current, bound);
        let diff = diff(&self.current, &new)?;
        if diff.is_empty() {
            self.current = new;
            return Ok("nothing changed".to_owned());
        }
        let changes = &diff.rebuilt;
        let built = self.construct(&new, changes)?;
        let mut growth =
            Growth::build(&self.handle, &new, diff.added.clone(), diff.resized.clone())?;
        // Added bolts prepare before anything running is touched.
        let failed = growth.start_added(&self.handle);
        if !failed.is_empty() {
            growth.abandon();
            return Err(failed);
        }
        let pauses = match self.swap(built) {
            Ok(pauses) => pauses,
            Err(errors) => {
                growth.abandon();
                return Err(errors);
            }
        };
        let grown = if growth.is_empty() {
            Vec::new()
        } else {
            let grown = growth.commit(&self.handle, &self.current);
            // Committed: the new topology runs now, whatever the outcome.
            self.current = new.clone();
            grown?
        };
        let mut summary = String::new();
        if !changes.is_empty() {
            summary.push_str("rebuilt ");
        }
        for (i, change) in changes.iter().enumerate() {
            let (tasks, pause) = pauses
                .iter()
                .filter(|(name, _)| *name == change.name)
                .fold((0, Duration::ZERO), |(k, m), (_, p)| (k + 1, m.max(*p)));
            let _ = write!(
                summary,
                "{}{:?} ({} changed, {tasks} task{}, pause {:.2} ms)",
                if i > 0 { ", " } else { "" },
                change.name,
                change.why.join(" and "),
                if tasks == 1 { "" } else { "s" },
                pause.as_secs_f64() * 1e3
            );
        }
        for line in &grown {
            if !summary.is_empty() {
                summary.push_str("; ");
            }
            summary.push_str(line);
        }
        let unchanged =
            new.components.len() - changes.len() - diff.added.len() - diff.resized.len();
        let _ = write!(summary, "; {unchanged} component(s) unchanged kept running");
        self.current = new;
        Ok(summary)
    }

    /// Parses, validates and binds the file again. The loader loads each
    /// library from a private copy with a name used once, in `scratch`: a
    /// changed library is new code, and one whose bytes did not change is
    /// the library already mapped.
    fn bind(&mut self) -> Result<Topology, Vec<String>> {
        let config = crate::config::load(&self.file)
            .map_err(|d| d.items.iter().map(ToString::to_string).collect::<Vec<_>>())?;
        let (scratch, loads) = (self.scratch.clone(), &mut self.copies);
        let result = crate::topology::bind_with(&config, &mut |decl, options| {
            let pinned = decl.sha256.as_deref();
            let lib = load_library_in(&scratch, &decl.alias, &decl.path, pinned, options)?;
            *loads += 1;
            tracing::debug!(alias = %decl.alias, digest = %lib.digest, loads = *loads, "reload: library loaded");
            let digest = lib.digest.clone();
            Ok((lib, digest))
        });
        result.map_err(|e| -> Vec<String> {
            match e {
                BindError::Config(d) => d.items.iter().map(ToString::to_string).collect(),
                BindError::Load(errors) => errors.iter().map(ToString::to_string).collect(),
            }
        })
    }

    /// Builds a new instance for every task of every changed component.
    fn construct<'t>(
        &self,
        new: &'t Topology,
        changes: &[Change],
    ) -> Result<Vec<Built<'t>>, Vec<String>> {
        let mut out = Vec::new();
        let mut errors = Vec::new();
        for change in changes {
            let n = new.components.iter().find(|c| c.name == change.name).expect("diffed");
            let o = self.current.components.iter().find(|c| c.name == change.name).expect("diffed");
            for task in o.tasks.clone() {
                let at = format!("{}:{}:{}", new.file.display(), n.loc.line, n.loc.col);
                let kind = kind(n.kind);
                match n.factory.build(&n.config) {
                    Ok(Instance::Bolt(b)) if n.kind == Kind::Bolt => {
                        out.push((n.name.clone(), task, New::Bolt(b), n));
                    }
                    Ok(Instance::Spout(s)) if n.kind == Kind::Spout => {
                        out.push((n.name.clone(), task, New::Spout(s), n));
                    }
                    Ok(_) => errors.push(format!(
                        "{at}: {kind} {:?} ({}): the constructor returned a component of another kind",
                        n.name, n.reference
                    )),
                    Err(e) => {
                        let what = if e.is_panic() { "panicked" } else { "failed" };
                        errors.push(format!(
                            "{at}: {kind} {:?} ({}): constructor {what}: {}",
                            n.name, n.reference, e.message
                        ));
                    }
                }
                if !errors.is_empty() {
                    return Err(errors);
                }
            }
        }
        Ok(out)
    }

    /// Swaps every built instance in, or none; the pause of each task.
    fn swap(&self, built: Vec<Built<'_>>) -> Result<Vec<(String, Duration)>, Vec<String>> {
        let total = built.len();
        let (ready_tx, ready_rx) = bounded::<(u32, Result<(), String>)>(total);
        let (done_tx, done_rx) = bounded::<SwapDone>(total);
        let mut verdicts: Vec<Sender<bool>> = Vec::new();
        let mut names = std::collections::HashMap::new();
        let mut longest_drain = Duration::ZERO;
        for (name, task, instance, component) in built {
            let (decision_tx, decision_rx) = bounded(1);
            let drain = self.drain_limit(component);
            longest_drain = longest_drain.max(drain.unwrap_or_default());
            let factory = component.factory;
            let config = component.config.clone();
            let (ready, done) = (ready_tx.clone(), done_tx.clone());
            let decision_timeout = SWAP_TIMEOUT;
            let message = match instance {
                New::Bolt(instance) => Control::SwapBolt(Box::new(Swap {
                    instance,
                    factory,
                    config,
                    drain: None,
                    ready,
                    decision: decision_rx,
                    decision_timeout,
                    done,
                })),
                New::Spout(instance) => Control::SwapSpout(Box::new(Swap {
                    instance,
                    factory,
                    config,
                    drain,
                    ready,
                    decision: decision_rx,
                    decision_timeout,
                    done,
                })),
            };
            if !self.handle.send_control(task, message) {
                return Err(vec![format!(
                    "{} {name:?} task {task} has stopped",
                    kind(component.kind)
                )]);
            }
            verdicts.push(decision_tx);
            names.insert(task, name);
        }
        drop((ready_tx, done_tx));
        // Phase 1: every task took over its state and prepared its new
        // instance (a spout after its old instance drained).
        let deadline = Instant::now() + longest_drain + SWAP_TIMEOUT;
        let mut errors = Vec::new();
        for _ in 0..total {
            match ready_rx.recv_deadline(deadline) {
                Ok((_, Ok(()))) => {}
                Ok((task, Err(e))) => {
                    errors.push(format!("{:?} task {task}: {e}", names[&task]));
                }
                Err(_) => {
                    errors.push(format!(
                        "not every task prepared its new instance within {:.0} s (a task busy in \
                         plugin code or under backpressure)",
                        (longest_drain + SWAP_TIMEOUT).as_secs_f64()
                    ));
                    break;
                }
            }
        }
        let commit = errors.is_empty();
        // Phase 2: the verdict; a dropped sender also means "keep the old".
        for v in &verdicts {
            let _ = v.send(commit);
        }
        drop(verdicts);
        let mut pauses = Vec::new();
        let deadline = Instant::now() + SWAP_TIMEOUT;
        while let Ok(done) = done_rx.recv_deadline(deadline) {
            if commit && !done.committed {
                errors.push(format!(
                    "{:?} task {}: the verdict arrived too late; it kept its old instance",
                    names[&done.task], done.task
                ));
            }
            pauses.push((names[&done.task].clone(), done.pause));
            if pauses.len() == total {
                break;
            }
        }
        if errors.is_empty() {
            Ok(pauses)
        } else {
            Err(errors)
        }
    }
}

impl Reloader {
    /// How long a swapped spout's old instance may drain: the message
    /// timeout (or [`SWAP_TIMEOUT`] with timeouts off); `None` for bolts and
    /// for spouts whose ids survive the swap.
    fn drain_limit(&self, c: &Component) -> Option<Duration> {
        if c.kind != Kind::Spout || c.ids_survive_swap {
            return None;
        }
        let settings = &self.current.settings;
        Some(if settings.enable_message_timeouts {
            Duration::from_secs(settings.message_timeout_secs)
        } else {
            SWAP_TIMEOUT
        })
    }
}

#[cfg(test)]
mod tests {
    use abi_stable::std_types::RStr;
    use squall_plugin_api::abi::{ComponentBox, PResult};
    use squall_plugin_api::{ErrorKind, PluginError, StreamDecl};

    use super::*;
    use crate::config::{Loc, Settings, WaitSpec};
    use crate::plugin::Factory;
    use crate::topology::{Grouping, Input, LibraryInfo, OutputStream};

    extern "C" fn never(_config: RStr<'_>) -> PResult<ComponentBox> {
        abi_stable::std_types::RResult::RErr(PluginError::new(ErrorKind::RUNTIME, "not built"))
    }

    fn component(name: &str, kind: Kind, tasks: std::ops::Range<u32>) -> Component {
        let park = WaitPlan::Builtin(WaitSpec::Park { park_micros: 0 });
        Component {
            name: name.to_owned(),
            kind,
            reference: format!("lib::{name}"),
            loc: Loc::new(3, 1),
            factory: Factory::V1(never),
            input_fields: Vec::new(),
            config: String::new(),
            tasks,
            retired: Vec::new(),
            outputs: vec![OutputStream {
                decl: StreamDecl {
                    name: "default".into(),
                    fields: vec!["value".into()].into(),
                    direct: false,
                },
                subscribers: Vec::new(),
            }],
            default_stream: Some(0),
            auto_ack: true,
            windowed: false,
            ids_survive_swap: false,
            window: None,
            inputs: Vec::new(),
            tick_tuple_freq_secs: None,
            throttle: None,
            max_spout_pending: None,
            wait: [park.clone(), park.clone(), park],
        }
    }

    /// spout "s" (1 task) -> bolt "b" (2 tasks, shuffle), library digest "d1".
    fn topology() -> Topology {
        let mut bolt = component("b", Kind::Bolt, 1..3);
        bolt.inputs.push(Input {
            from: 0,
            stream: 0,
            grouping: Grouping::Shuffle,
            loc: Loc::new(9, 1),
            throttle: None,
        });
        Topology {
            name: "t".into(),
            settings: Settings::default(),
            components: vec![component("s", Kind::Spout, 0..1), bolt],
            task_count: 3,
            file: "t.toml".into(),
            sources: Default::default(),
            libraries: vec![LibraryInfo {
                alias: "lib".into(),
                path: "lib.so".into(),
                digest: "d1".into(),
            }],
        }
    }

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
        let all = refused.join("\n");
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
            });
        }
        let mut new = old.clone();
        new.components = vec![c, b, s];
        new.task_count = 5;
        let aligned = super::super::grow::align(&old, new);
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
        assert!(refused[0].contains("bolt \"b\" was removed"), "{refused:?}");
    }
}
