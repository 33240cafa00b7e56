//! Runs a topology in process, on fixed input tuples, until it completes:
//! Storm's `Testing.completeTopology`, for plugin authors (through the
//! `squall-harness` crate, which re-exports this module) and for
//! `squall test` (`[[tests]]` in the topology file).
//!
//! The topology runs on the real host (binding, executors, groupings,
//! acker, message timeouts, drain), in the caller's process. Plugins are
//! either linked into the process ([`Harness::plugin`]: the
//! `__SquallPlugin` type that `export_plugin!` generates, read exactly as a
//! loaded library's root module, without `dlopen`) or loaded from the
//! `[plugins]` paths as `squall run` loads them.
//!
//! - [`Harness::feed`] replaces a spout with a feeder that declares the same
//!   streams and emits the given tuples once each, reliably, with message
//!   id = the tuple's position in the feed, and never replays.
//! - [`Harness::inject`] adds a feeder that a bolt subscribes to as it
//!   subscribes to one of its inputs (same stream, fields and grouping):
//!   the tuples arrive at the bolt from component `__inject_BOLT`.
//! - A capture bolt is subscribed to every non-direct stream of every
//!   component; [`Completed::emitted`] lists what each component emitted.
//! - [`Harness::run_until_complete`] returns once every fed tuple has been
//!   acked or failed (a message timeout counts as a fail) and the topology
//!   has drained: every queue empty, every bolt done executing.
//! - [`Harness::simulated_time`] runs the topology on a simulated clock
//!   (tick tuples, message timeouts, processing-time windows): the feeds
//!   are processed at time 0, then the clock moves in steps of [`STEP`]
//!   up to the time asked, each step processed before the next (see
//!   [`run_simulated`]).
//!
//! Limits: tuples on direct streams are not captured (a capture bolt cannot
//! subscribe to them), and a fed spout runs one task. Spouts that are not fed
//! run as written and their tuples are captured too (unless
//! [`Harness::silence_unfed_spouts`]), but completion counts only fed
//! tuples. Only one plugin crate that calls `export_plugin!` can be linked
//! into one process (its root-module symbol is exported by name).

mod components;
mod rewrite;
mod run;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::clock::SimulatedTime;
use crate::config::{Diagnostics, TopologyConfig};
use crate::control::RunError;
use crate::metrics::Report;
use crate::plugin::{load_in_process, Library, LoadError, IN_PROCESS_PATH};
use crate::runtime::{self, RunOutcome, RunningTopology, StartError, TopologyHandle};
use crate::topology::{bind_provided, BindError};
use squall_plugin_api::abi::PluginSource;
use squall_plugin_api::{MessageId, Value, DEFAULT_STREAM};

use components::{HarnessPlugin, ALIAS};
use run::Registered;

/// How far the simulated clock moves at once: every step is processed (its
/// ticks executed, its windows run, everything they emit delivered) before
/// the next.
pub const STEP: Duration = Duration::from_millis(100);

/// Loads one in-process plugin under an alias.
type LoadFn = fn(&str) -> Result<Library, LoadError>;

/// The name of the feeder that [`Harness::inject`] adds for `bolt`.
pub fn injector(bolt: &str) -> String {
    format!("__inject_{bolt}")
}

/// One tuple to feed: its values in field order, or by field name.
#[derive(Debug, Clone, PartialEq)]
pub enum FedTuple {
    /// The values, in the stream's field order.
    Values(Vec<Value>),
    /// The values by field name (every field of the stream, once).
    Named(Vec<(String, Value)>),
}

/// Where fed tuples enter.
#[derive(Debug, Clone)]
enum Target {
    /// In place of the spout.
    Spout(String),
    /// At the bolt, as from its input from `from` (`None`: its first).
    Bolt { bolt: String, from: Option<String> },
}

/// One feed or injection, as asked.
#[derive(Debug, Clone)]
struct Request {
    target: Target,
    /// `None`: `default` for a spout, the input's stream for a bolt.
    stream: Option<String>,
    tuples: Vec<FedTuple>,
}

/// Where the topology comes from.
#[derive(Debug)]
enum Source {
    /// TOML text, read as if it were the file.
    Text { text: String, file: PathBuf },
    /// A topology already read and validated.
    Config(Box<TopologyConfig>),
}

/// A topology to run in process: its TOML text (or its validated config),
/// the plugins linked into the test, and the tuples to feed. Build it, then
/// [`run_until_complete`](Self::run_until_complete).
#[derive(Debug)]
pub struct Harness {
    source: Source,
    plugins: Vec<(String, LoadFn)>,
    requests: Vec<Request>,
    /// Simulated time: how far the clock moves once the feeds are processed.
    advance: Option<Duration>,
    silence: bool,
}

/// What a completed run produced.
#[derive(Debug)]
pub struct Completed {
    /// Per component (spouts under their topology name, fed or not): every
    /// tuple it emitted on a non-direct stream, as `(stream, values)`, in
    /// the order the capture bolt received them (tuples of one task in
    /// emit order; tasks interleaved).
    pub emitted: HashMap<String, Vec<(String, Vec<Value>)>>,
    /// Per fed spout (and injector): the message ids acked, sorted.
    pub acked: HashMap<String, Vec<MessageId>>,
    /// Per fed spout (and injector): the message ids failed (explicitly, by
    /// a panic, or by the message timeout), sorted.
    pub failed: HashMap<String, Vec<MessageId>>,
    /// Per fed spout (and injector): the message ids neither acked nor
    /// failed when the run stopped (simulated time only: otherwise a
    /// pending tree is a [`HarnessError::Timeout`]).
    pub pending: HashMap<String, Vec<MessageId>>,
    /// The field names of every captured `(component, stream)`.
    pub fields: HashMap<(String, String), Vec<String>>,
    /// Per bolt: the `(component, stream)` pairs it subscribes to, its
    /// injectors included.
    pub inputs: HashMap<String, Vec<(String, String)>>,
    /// Every component's figures (executed, acked, failed, errors, ...) at
    /// the end of the run, as `squall run` reports them.
    pub report: Report,
}

impl Completed {
    /// The ids of `spout` that were acked (empty for an unknown spout).
    pub fn acked_by(&self, spout: &str) -> &[MessageId] {
        self.acked.get(spout).map_or(&[], Vec::as_slice)
    }

    /// The ids of `spout` that were failed (empty for an unknown spout).
    pub fn failed_by(&self, spout: &str) -> &[MessageId] {
        self.failed.get(spout).map_or(&[], Vec::as_slice)
    }

    /// The values of every tuple `component` emitted on `stream`.
    pub fn values(&self, component: &str, stream: &str) -> Vec<Vec<Value>> {
        let all = self.emitted.get(component).map_or(&[][..], Vec::as_slice);
        all.iter().filter(|(s, _)| s == stream).map(|(_, v)| v.clone()).collect()
    }
}

/// Why a harness run did not complete.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The topology text is invalid (every diagnostic, with line:col).
    #[error("invalid topology:\n{0}")]
    Config(Diagnostics),
    /// A plugin could not be loaded.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Load(Vec<LoadError>),
    /// What was asked of the harness does not fit the topology (an unknown
    /// spout or stream, a tuple of the wrong arity).
    #[error("{0}")]
    Usage(String),
    /// A constructor failed, or a thread could not start.
    #[error("{0}")]
    Start(#[from] StartError),
    /// The topology failed while running (a fatal error).
    #[error("the topology failed: {error}")]
    Run {
        /// The first fatal error.
        error: RunError,
        /// What it produced until then.
        partial: Box<Completed>,
    },
    /// Fed tuples were neither acked nor failed in time.
    #[error(
        "{} fed tuple(s) neither acked nor failed after {waited:?}: {}",
        count(pending),
        describe(pending)
    )]
    Timeout {
        /// How long the harness waited.
        waited: Duration,
        /// Per spout, the ids still pending when the timeout expired.
        pending: HashMap<String, Vec<MessageId>>,
        /// What the run produced. The topology was then stopped without
        /// waiting for a drain (the timeout holds), so the pending trees
        /// were failed at shutdown and appear in `failed`.
        partial: Box<Completed>,
    },
}

fn count(pending: &HashMap<String, Vec<MessageId>>) -> usize {
    pending.values().map(Vec::len).sum()
}

fn describe(pending: &HashMap<String, Vec<MessageId>>) -> String {
    let mut spouts: Vec<_> = pending.iter().collect();
    spouts.sort();
    let parts: Vec<String> = spouts
        .into_iter()
        .map(|(spout, ids)| {
            let ids: Vec<String> = ids.iter().map(|id| id.0.to_string()).collect();
            format!("{spout} [{}]", ids.join(", "))
        })
        .collect();
    parts.join("; ")
}

impl Harness {
    /// A harness for the topology written in `toml` (the format of
    /// docs/topology.md). Relative paths in it are resolved against the
    /// current directory. Aliases given to [`plugin`](Self::plugin) need not
    /// be declared in `[plugins]`.
    pub fn new(toml: &str) -> Self {
        Self::with_source(Source::Text {
            text: toml.to_owned(),
            file: PathBuf::from("harness.toml"),
        })
    }

    /// A harness for a topology already read and validated
    /// ([`crate::config::load`]): its plugins are loaded from their paths,
    /// except aliases given to [`plugin`](Self::plugin).
    pub fn from_config(config: TopologyConfig) -> Self {
        Self::with_source(Source::Config(Box::new(config)))
    }

    fn with_source(source: Source) -> Self {
        Harness { source, plugins: Vec::new(), requests: Vec::new(), advance: None, silence: false }
    }

    /// A harness for the topology file at `path` (e.g. the `topology.toml`
    /// that ships with the plugin); its `[plugins]` paths of in-process
    /// aliases are not opened.
    ///
    /// # Errors
    /// When the file cannot be read.
    pub fn from_file(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)?;
        Ok(Self::with_source(Source::Text { text, file: path.to_path_buf() }))
    }

    /// Binds `alias` to the plugin `P` linked into this process: the
    /// `__SquallPlugin` type `export_plugin!` generates at the root of a
    /// plugin crate built with `crate-type = ["cdylib", "rlib"]`.
    pub fn plugin<P: PluginSource>(mut self, alias: &str) -> Self {
        self.plugins.push((alias.to_owned(), load_in_process::<P>));
        self
    }

    /// Replaces spout `spout` by a feeder that emits `tuples` on its default
    /// stream. Message ids count from 0 in feed order, over every feed of the
    /// spout.
    pub fn feed(self, spout: &str, tuples: Vec<Vec<Value>>) -> Self {
        self.feed_stream(spout, DEFAULT_STREAM, tuples)
    }

    /// As [`feed`](Self::feed), on the spout's stream `stream`.
    pub fn feed_stream(self, spout: &str, stream: &str, tuples: Vec<Vec<Value>>) -> Self {
        let tuples = tuples.into_iter().map(FedTuple::Values).collect();
        self.feed_tuples(spout, Some(stream), tuples)
    }

    /// As [`feed_stream`](Self::feed_stream), with tuples given in field
    /// order or by field name (`None`: the default stream).
    pub fn feed_tuples(mut self, spout: &str, stream: Option<&str>, tuples: Vec<FedTuple>) -> Self {
        let target = Target::Spout(spout.to_owned());
        self.requests.push(Request { target, stream: stream.map(str::to_owned), tuples });
        self
    }

    /// Feeds `tuples` to bolt `bolt` as if they came from its input from
    /// `from` on `stream` (`None`: its first input's component and stream):
    /// a feeder [`injector`] declares that stream, and the bolt subscribes
    /// to it with that input's grouping. Message ids count from 0 in feed
    /// order, over every injection into the bolt.
    pub fn inject(
        mut self,
        bolt: &str,
        from: Option<&str>,
        stream: Option<&str>,
        tuples: Vec<FedTuple>,
    ) -> Self {
        let target = Target::Bolt { bolt: bolt.to_owned(), from: from.map(str::to_owned) };
        self.requests.push(Request { target, stream: stream.map(str::to_owned), tuples });
        self
    }

    /// Runs on simulated time: the clock starts at 0 and only moves once the
    /// feeds are processed, by `advance` in steps of [`STEP`]. Then the
    /// windows are flushed (as at a drain) and the run stops once quiet,
    /// whether or not every tree completed ([`Completed::pending`]).
    pub fn simulated_time(mut self, advance: Duration) -> Self {
        self.advance = Some(advance);
        self
    }

    /// Replaces every spout that is not fed by a feeder of no tuples, so
    /// that only the fed tuples enter the topology.
    pub fn silence_unfed_spouts(mut self) -> Self {
        self.silence = true;
        self
    }

    /// Runs the topology until every fed tuple is acked or failed, then
    /// drains and stops it, and returns what it produced.
    ///
    /// # Errors
    /// A [`HarnessError`]: the topology or the feeds are invalid, a plugin
    /// fails to load or construct, the run fails, or fed tuples are still
    /// pending after `timeout` (the topology is drained and stopped first).
    pub fn run_until_complete(self, timeout: Duration) -> Result<Completed, HarnessError> {
        let registered = Registered::new();
        let (running, simulated, shape) = self.start(&registered)?;
        let until = Instant::now() + timeout;
        let ended = match (&simulated, self.advance) {
            (Some(simulated), Some(advance)) => {
                finish_simulated(running, &registered.run, simulated, advance, until)
            }
            _ => finish(running, &registered.run, until),
        };
        let Ended { complete, outcome, pending, collected } = ended;
        let done = Completed {
            emitted: collected.emitted,
            acked: collected.acked,
            failed: collected.failed,
            pending: collected.pending,
            fields: shape.fields,
            inputs: shape.inputs,
            report: outcome.report,
        };
        if let Some(error) = outcome.error {
            return Err(HarnessError::Run { error, partial: Box::new(done) });
        }
        if !complete {
            let pending = pending.unwrap_or_default();
            return Err(HarnessError::Timeout {
                waited: timeout,
                pending,
                partial: Box::new(done),
            });
        }
        Ok(done)
    }

    /// Binds the topology as written, rewrites it (feeders, injectors,
    /// capture), binds and starts that.
    fn start(
        &self,
        registered: &Registered,
    ) -> Result<(RunningTopology, Option<SimulatedTime>, rewrite::Shape), HarnessError> {
        let config = self.config()?;
        // Bound once as written, for every component's declared streams.
        let written = bind_provided(&config, self.libraries()?).map_err(bind_error)?;
        let (config, shape) = self.rewrite(config, &written, registered)?;
        let mut libraries = self.libraries()?;
        libraries.insert(ALIAS.to_owned(), load_in_process::<HarnessPlugin>(ALIAS).map_err(one)?);
        let mut topology = bind_provided(&config, libraries).map_err(bind_error)?;
        let simulated = self.advance.map(|_| SimulatedTime::new());
        topology.simulated = simulated.clone();
        let limit = Duration::from_secs(topology.settings.startup_timeout_secs);
        let instances = runtime::instantiate_within(&topology, limit)?;
        Ok((runtime::start(topology, instances)?, simulated, shape))
    }

    /// Parses the text, declaring in-process aliases it leaves out.
    fn config(&self) -> Result<TopologyConfig, HarnessError> {
        let (text, file) = match &self.source {
            Source::Config(config) => return Ok((**config).clone()),
            Source::Text { text, file } => (text, file),
        };
        let declared: Vec<String> = toml::from_str::<toml::Table>(text)
            .ok()
            .and_then(|t| t.get("plugins").and_then(|p| p.as_table()).cloned())
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        let mut text = text.clone();
        // Appended as sub-tables, so the line numbers of diagnostics stay
        // those of the text as written.
        for (alias, _) in &self.plugins {
            if !declared.contains(alias) {
                let alias = toml::Value::String(alias.clone());
                text.push_str(&format!("\n[plugins.{alias}]\npath = {:?}\n", IN_PROCESS_PATH));
            }
        }
        crate::config::parse_str(&text, file).map_err(HarnessError::Config)
    }

    /// Every in-process plugin, loaded.
    fn libraries(&self) -> Result<HashMap<String, Library>, HarnessError> {
        let mut out = HashMap::new();
        let mut errors = Vec::new();
        for (alias, load) in &self.plugins {
            match load(alias) {
                Ok(lib) => {
                    out.insert(alias.clone(), lib);
                }
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(HarnessError::Load(errors))
        }
    }
}

/// How a run ended: whether every fed tree completed, the stop's outcome,
/// what was still pending when that is the error, and what was collected.
struct Ended {
    complete: bool,
    outcome: RunOutcome,
    pending: Option<HashMap<String, Vec<MessageId>>>,
    collected: run::Collected,
}

/// Simulated time: runs the steps ([`run_simulated`]), then stops.
fn finish_simulated(
    running: RunningTopology,
    run: &run::Run,
    simulated: &SimulatedTime,
    advance: Duration,
    until: Instant,
) -> Ended {
    let handle = running.handle().clone();
    let complete = run_simulated(&handle, run, simulated, advance, until);
    // Taken before the stop: a tree still pending is pending, not failed
    // by the shutdown.
    let collected = run.take();
    let outcome = if collected.pending.is_empty() {
        running.stop()
    } else {
        running.stop_within(Duration::ZERO)
    };
    let pending = (!complete).then(|| collected.pending.clone());
    Ended { complete, outcome, pending, collected }
}

/// Real time: waits until every fed tree completed, then stops.
///
/// Once every fed tuple is out and nothing moves any more, the windows
/// flush: a window that never fills on a finite feed (the last tuples of a
/// count window, a time window still open) gets its tuples executed and
/// acked, as at a drain. Past the timeout, what is pending now is what the
/// error names (the drain fails it at shutdown), and the drain is not
/// waited for: the timeout holds.
fn finish(running: RunningTopology, run: &run::Run, until: Instant) -> Ended {
    let handle = running.handle().clone();
    let mut flusher = runtime::WindowFlusher::default();
    let mut polled = Instant::now();
    let complete = run.wait_complete(until, || {
        if polled.elapsed() >= Duration::from_millis(10) && run.fed_out() {
            flusher.poll(&handle);
            polled = Instant::now();
        }
        handle.fatal().is_some()
    });
    let (outcome, pending) = if complete || handle.fatal().is_some() {
        (running.stop(), None)
    } else {
        let pending = run.pending();
        (running.stop_within(Duration::ZERO), Some(pending))
    };
    let mut collected = run.take();
    collected.pending.clear();
    Ended { complete, outcome, pending, collected }
}

/// Simulated time: waits until every fed tuple is out and processed at
/// time 0, then moves the clock by `advance` in steps of [`STEP`], each
/// processed before the next, then flushes the windows until nothing more
/// comes out. False when `until` passed or the run failed first.
///
/// "Processed" ([`settle`]) is a protocol, not a wait for time: every task
/// and acker handles a `Sync` queued behind what it was sent, and the
/// topology's progress is the same before and after such a round, with no
/// tuple queued, unsent or in flight.
fn run_simulated(
    handle: &TopologyHandle,
    run: &run::Run,
    simulated: &SimulatedTime,
    advance: Duration,
    until: Instant,
) -> bool {
    if !wait_for(handle, until, || run.fed_out()) || !settle(handle, simulated, until) {
        return false;
    }
    let mut moved = Duration::ZERO;
    while moved < advance {
        let step = STEP.min(advance - moved);
        simulated.clock.advance(step);
        moved += step;
        if !settle(handle, simulated, until) {
            return false;
        }
    }
    // As at a drain: the windows still open run; what they emit can fill
    // windows downstream, which the next flush runs.
    loop {
        let before = handle.quiet_progress();
        if handle.flush_windows() == 0 {
            return true;
        }
        if !settle(handle, simulated, until) {
            return false;
        }
        if handle.quiet_progress() == before {
            return true;
        }
    }
}

/// Waits until everything due at the simulated clock's reading has been
/// sent, executed and delivered (see [`run_simulated`]).
fn settle(handle: &TopologyHandle, simulated: &SimulatedTime, until: Instant) -> bool {
    let at = simulated.clock.peek();
    if !wait_for(handle, until, || simulated.has_ticked(at)) {
        return false;
    }
    loop {
        if handle.fatal().is_some() || Instant::now() >= until {
            return false;
        }
        let before = handle.quiet_progress();
        // Tasks (their emits and acks sent), ackers (their replies sent),
        // tasks again (the spouts handled the replies).
        for round in 0..3 {
            let (done, told) = if round == 1 { handle.sync_ackers() } else { handle.sync_tasks() };
            if !wait_for(handle, until, || done.load(Ordering::Acquire) >= told) {
                return false;
            }
        }
        if before.is_some() && handle.quiet_progress() == before {
            return true;
        }
    }
}

/// Polls `ready` every 100 µs until it is true (true), or until `until`
/// passes or the run fails (false).
fn wait_for(handle: &TopologyHandle, until: Instant, mut ready: impl FnMut() -> bool) -> bool {
    loop {
        if ready() {
            return true;
        }
        if handle.fatal().is_some() || Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn one(e: LoadError) -> HarnessError {
    HarnessError::Load(vec![e])
}

fn bind_error(e: BindError) -> HarnessError {
    match e {
        BindError::Config(d) => HarnessError::Config(d),
        BindError::Load(errors) => HarnessError::Load(errors),
    }
}
