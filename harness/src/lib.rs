//! Runs a squall topology in process, on fixed input tuples, until it
//! completes: Storm's `Testing.completeTopology` for plugin authors.
//!
//! The topology runs on the real host (`squall-host`: binding, executors,
//! groupings, acker, message timeouts, drain), in the test's own process.
//! The plugin under test is not loaded from its `.so`: a plugin crate built
//! with `crate-type = ["cdylib", "rlib"]` is linked into its own tests, and
//! [`Harness::plugin`] hands the `__SquallPlugin` type that `export_plugin!`
//! generates to the host, which reads its root module exactly as it reads a
//! loaded library's (contract check, host services, panic strategy), without
//! `dlopen`.
//!
//! - [`Harness::feed`] replaces a spout of the topology with a feeder that
//!   declares the same streams and emits the given tuples once each,
//!   reliably, with message id = the tuple's position in the feed, and never
//!   replays.
//! - A capture bolt is subscribed to every non-direct stream of every
//!   component; [`Completed::emitted`] lists what each component emitted.
//! - [`Harness::run_until_complete`] returns once every fed tuple has been
//!   acked or failed (a message timeout counts as a fail) and the topology
//!   has drained: every queue empty, every bolt done executing.
//!
//! ```
//! use std::time::Duration;
//! use squall_harness::Harness;
//! use squall_plugin_api::{MessageId, Value};
//!
//! let done = Harness::new(
//!     r#"
//!     [spouts.sentences]
//!     component = "examples::RandomSentenceSpout"
//!
//!     [bolts.split]
//!     component = "examples::SplitSentence"
//!     inputs = [{ from = "sentences" }]
//!     "#,
//! )
//! .plugin::<squall_examples::__SquallPlugin>("examples")
//! .feed("sentences", vec![vec![Value::from("a b a")]])
//! .run_until_complete(Duration::from_secs(10))
//! .unwrap();
//! assert_eq!(done.acked_by("sentences"), [MessageId(0)]);
//! assert_eq!(done.values("split", "default").len(), 3);
//! ```
//!
//! Limits: tuples on direct streams are not captured (a capture bolt cannot
//! subscribe to them), and a fed spout runs one task. Spouts that are not fed
//! run as written and their tuples are captured too, but completion counts
//! only fed tuples. Only one plugin crate that calls `export_plugin!` can be
//! linked into one test binary (its root-module symbol is exported by name).

#![warn(missing_docs)]

mod components;
mod run;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use squall_host::config::{
    ComponentDecl, ComponentRef, Diagnostics, GroupingSpec, InputDecl, Loc, PluginDecl,
    TopologyConfig, WaitOverrides,
};
use squall_host::control::RunError;
use squall_host::metrics::Report;
use squall_host::plugin::{load_in_process, Library, LoadError, IN_PROCESS_PATH};
use squall_host::runtime::{self, StartError};
use squall_host::topology::{bind_provided, BindError, Topology};
use squall_plugin_api::abi::PluginSource;
use squall_plugin_api::{MessageId, Value, DEFAULT_STREAM};

use components::{CaptureConfig, FeederConfig, HarnessPlugin, StreamSpec, ALIAS, CAPTURE};
use run::Registered;

/// Loads one in-process plugin under an alias.
type LoadFn = fn(&str) -> Result<Library, LoadError>;

/// A topology to run in process: its TOML text, the plugins linked into the
/// test, and the tuples to feed. Build it, then [`run_until_complete`](Self::run_until_complete).
#[derive(Debug)]
pub struct Harness {
    text: String,
    file: PathBuf,
    plugins: Vec<(String, LoadFn)>,
    feeds: Vec<(String, String, Vec<Vec<Value>>)>,
}

/// What a completed run produced.
#[derive(Debug)]
pub struct Completed {
    /// Per component (spouts under their topology name, fed or not): every
    /// tuple it emitted on a non-direct stream, as `(stream, values)`, in
    /// the order the capture bolt received them (tuples of one task in
    /// emit order; tasks interleaved).
    pub emitted: HashMap<String, Vec<(String, Vec<Value>)>>,
    /// Per fed spout: the message ids acked, sorted.
    pub acked: HashMap<String, Vec<MessageId>>,
    /// Per fed spout: the message ids failed (explicitly, by a panic, or by
    /// the message timeout), sorted.
    pub failed: HashMap<String, Vec<MessageId>>,
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
        Harness {
            text: toml.to_owned(),
            file: PathBuf::from("harness.toml"),
            plugins: Vec::new(),
            feeds: Vec::new(),
        }
    }

    /// A harness for the topology file at `path` (e.g. the `topology.toml`
    /// that ships with the plugin); its `[plugins]` paths of in-process
    /// aliases are not opened.
    ///
    /// # Errors
    /// When the file cannot be read.
    pub fn from_file(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let path = path.as_ref();
        let mut harness = Harness::new(&std::fs::read_to_string(path)?);
        harness.file = path.to_path_buf();
        Ok(harness)
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
    pub fn feed_stream(mut self, spout: &str, stream: &str, tuples: Vec<Vec<Value>>) -> Self {
        self.feeds.push((spout.to_owned(), stream.to_owned(), tuples));
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
        let config = self.config()?;
        // Bound once as written, for every component's declared streams.
        let written = bind_provided(&config, self.libraries()?).map_err(bind_error)?;
        let config = self.rewrite(config, &written, &registered)?;
        let mut libraries = self.libraries()?;
        libraries.insert(ALIAS.to_owned(), load_in_process::<HarnessPlugin>(ALIAS).map_err(one)?);
        let topology = bind_provided(&config, libraries).map_err(bind_error)?;
        let limit = Duration::from_secs(topology.settings.startup_timeout_secs);
        let instances = runtime::instantiate_within(&topology, limit)?;
        let running = runtime::start(topology, instances)?;
        let handle = running.handle().clone();
        let until = Instant::now() + timeout;
        // Once every fed tuple is out and nothing moves any more, the
        // windows flush: a window that never fills on a finite feed (the
        // last tuples of a count window, a time window still open) gets its
        // tuples executed and acked, as at a drain.
        let mut flusher = runtime::WindowFlusher::default();
        let mut polled = Instant::now();
        let complete = registered.run.wait_complete(until, || {
            if polled.elapsed() >= Duration::from_millis(10) && registered.run.fed_out() {
                flusher.poll(&handle);
                polled = Instant::now();
            }
            handle.fatal().is_some()
        });
        // Past the timeout, what is pending now is what the error names
        // (the drain fails it at shutdown), and the drain is not waited for:
        // the timeout holds.
        let (outcome, pending) = if complete || handle.fatal().is_some() {
            (running.stop(), None)
        } else {
            let pending = registered.run.pending();
            (running.stop_within(Duration::ZERO), Some(pending))
        };
        let collected = registered.run.take();
        let done = Completed {
            emitted: collected.emitted,
            acked: collected.acked,
            failed: collected.failed,
            report: outcome.report,
        };
        if let Some(error) = outcome.error {
            return Err(HarnessError::Run { error, partial: Box::new(done) });
        }
        if !complete {
            let pending = pending.unwrap_or(collected.pending);
            return Err(HarnessError::Timeout {
                waited: timeout,
                pending,
                partial: Box::new(done),
            });
        }
        Ok(done)
    }

    /// Parses the text, declaring in-process aliases it leaves out.
    fn config(&self) -> Result<TopologyConfig, HarnessError> {
        let declared: Vec<String> = toml::from_str::<toml::Table>(&self.text)
            .ok()
            .and_then(|t| t.get("plugins").and_then(|p| p.as_table()).cloned())
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        let mut text = self.text.clone();
        // Appended as sub-tables, so the line numbers of diagnostics stay
        // those of the text as written.
        for (alias, _) in &self.plugins {
            if !declared.contains(alias) {
                let alias = toml::Value::String(alias.clone());
                text.push_str(&format!("\n[plugins.{alias}]\npath = {:?}\n", IN_PROCESS_PATH));
            }
        }
        squall_host::config::parse_str(&text, &self.file).map_err(HarnessError::Config)
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

    /// Replaces fed spouts by feeders and adds the capture bolt.
    fn rewrite(
        &self,
        mut config: TopologyConfig,
        written: &Topology,
        registered: &Registered,
    ) -> Result<TopologyConfig, HarnessError> {
        let run = registered.id;
        let mut feeds: Vec<(String, Vec<run::Fed>)> = Vec::new();
        for (spout, stream, tuples) in &self.feeds {
            let Some(component) = written
                .components
                .iter()
                .find(|c| c.name == *spout && config_is_spout(&config, spout))
            else {
                let spouts: Vec<&str> =
                    config.spouts.iter().map(|s| s.decl.name.as_str()).collect();
                return Err(HarnessError::Usage(format!(
                    "feed: the topology has no spout {spout:?} (its spouts: {})",
                    spouts.join(", ")
                )));
            };
            let Some(out) = component.outputs.iter().find(|o| o.decl.name.as_str() == stream)
            else {
                let streams: Vec<&str> =
                    component.outputs.iter().map(|o| o.decl.name.as_str()).collect();
                return Err(HarnessError::Usage(format!(
                    "feed: spout {spout:?} declares no stream {stream:?} (it declares: {})",
                    streams.join(", ")
                )));
            };
            if out.decl.direct {
                return Err(HarnessError::Usage(format!(
                    "feed: stream {stream:?} of spout {spout:?} is direct; the harness feeds only non-direct streams"
                )));
            }
            let arity = out.decl.fields.len();
            if let Some((i, bad)) = tuples.iter().enumerate().find(|(_, t)| t.len() != arity) {
                return Err(HarnessError::Usage(format!(
                    "feed: tuple {i} for {spout:?} stream {stream:?} has {} value(s); the stream declares {arity} field(s)",
                    bad.len()
                )));
            }
            let entry = match feeds.iter_mut().find(|(s, _)| s == spout) {
                Some(entry) => entry,
                None => {
                    feeds.push((spout.clone(), Vec::new()));
                    feeds.last_mut().expect("just pushed")
                }
            };
            entry.1.extend(tuples.iter().map(|t| (stream.clone(), t.clone())));
        }
        for (spout, tuples) in feeds {
            let component =
                written.components.iter().find(|c| c.name == spout).expect("checked above");
            let streams = component
                .outputs
                .iter()
                .map(|o| StreamSpec {
                    name: o.decl.name.to_string(),
                    fields: o.decl.fields.iter().map(ToString::to_string).collect(),
                    direct: o.decl.direct,
                })
                .collect();
            let feeder = FeederConfig { run, spout: spout.clone(), streams };
            let decl = &mut config
                .spouts
                .iter_mut()
                .find(|s| s.decl.name == spout)
                .expect("checked above")
                .decl;
            decl.component = reference("Feeder", decl.component.loc);
            decl.parallelism = 1;
            decl.config = to_toml(&feeder);
            decl.config_keys.clear();
            registered.run.set_feed(&spout, tuples);
        }
        let inputs: Vec<InputDecl> = written
            .components
            .iter()
            .flat_map(|c| c.outputs.iter().filter(|o| !o.decl.direct).map(move |o| (c, o)))
            .map(|(c, o)| InputDecl {
                from: c.name.clone(),
                from_loc: Loc::START,
                stream: o.decl.name.to_string(),
                stream_loc: Loc::START,
                grouping: GroupingSpec::Shuffle,
                grouping_loc: Loc::START,
                throttle: None,
                loc: Loc::START,
            })
            .collect();
        if !inputs.is_empty() {
            config.bolts.push(squall_host::config::BoltDecl {
                decl: ComponentDecl {
                    name: CAPTURE.to_owned(),
                    loc: Loc::START,
                    component: reference("Capture", Loc::START),
                    parallelism: 1,
                    config: to_toml(&CaptureConfig { run }),
                    config_keys: Vec::new(),
                    wait: WaitOverrides::default(),
                },
                inputs,
                tick_tuple_freq_secs: None,
                window: None,
            });
        }
        config.plugins.push(PluginDecl {
            alias: ALIAS.to_owned(),
            path: PathBuf::from(IN_PROCESS_PATH),
            sha256: None,
            allow_writable: false,
            loc: Loc::START,
        });
        Ok(config)
    }
}

fn config_is_spout(config: &TopologyConfig, name: &str) -> bool {
    config.spouts.iter().any(|s| s.decl.name == name)
}

fn reference(component: &str, loc: Loc) -> ComponentRef {
    ComponentRef { alias: ALIAS.to_owned(), component: component.to_owned(), loc }
}

fn to_toml<T: serde::Serialize>(value: &T) -> String {
    // Plain structs of strings, numbers and lists always serialize.
    toml::to_string(value).expect("harness configs serialize to TOML")
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
