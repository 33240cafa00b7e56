//! The topology bound to its plugins: components, tasks, streams and groupings.
//!
//! Stages: [`config::TopologyConfig`](crate::config::TopologyConfig) (validated
//! TOML) → [`bind`] (plugins loaded, component names resolved, streams and
//! fields checked) → [`Topology`] → `runtime::start` (threads). Nothing here
//! spawns a thread.

mod bind;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod grouping;

use std::ops::Range;

use squall_plugin_api::{StreamDecl, WaitSituation};

pub use bind::{bind, bind_provided, bind_with, BindError, LibraryLoader, LATE_STREAM};
pub use grouping::Grouping;

use crate::config::{Settings, ThrottleSpec, WaitSpec};

pub use crate::plugin::Constructor;

/// A validated topology bound to loaded plugins.
#[derive(Debug, Clone)]
pub struct Topology {
    /// The topology's name.
    pub name: String,
    /// Topology-wide settings, defaults applied.
    pub settings: Settings,
    /// Spouts first, then bolts, in file order; a component's index is its id.
    pub components: Vec<Component>,
    /// The number of spout and bolt tasks; task ids are `0..task_count`.
    pub task_count: u32,
    /// The topology file, for messages.
    pub file: std::path::PathBuf,
    /// The files (and `--set` arguments) it was read from, which a
    /// [`crate::config::Loc`] names.
    pub sources: crate::config::Sources,
    /// The plugin libraries, in `[plugins]` order, with the digest of the
    /// bytes loaded (a live reload rebuilds the components of a library
    /// whose digest changed).
    pub libraries: Vec<LibraryInfo>,
    /// Where durable state is checkpointed (`[state]`; `None`: nowhere).
    pub state: Option<StatePlan>,
    /// Simulated time (`squall test`): tick tuples, message timeouts and
    /// processing-time windows read this clock instead of the system's
    /// (`None`: the system clock).
    pub simulated: Option<crate::clock::SimulatedTime>,
}

/// `[state]`, bound: the backend to build, and how often to checkpoint.
#[derive(Debug, Clone)]
pub struct StatePlan {
    /// The backend.
    pub backend: BackendPlan,
    /// The state's name in the backend (`namespace`, or the topology's name).
    pub namespace: String,
    /// The checkpoint interval.
    pub interval: std::time::Duration,
}

/// Which backend a [`StatePlan`] builds.
#[derive(Debug, Clone)]
pub enum BackendPlan {
    /// The host's in-memory backend.
    Memory,
    /// A plugin's backend: its `alias::Name`, its 1.2 constructor and its
    /// `[state.config]` document.
    Plugin {
        /// `alias::Name`, for messages.
        reference: String,
        /// The constructor.
        new: crate::plugin::Constructor12,
        /// `[state.config]` as a TOML document.
        config: String,
    },
}

/// One loaded plugin library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryInfo {
    /// Its alias in `[plugins]`.
    pub alias: String,
    /// The path the topology names.
    pub path: std::path::PathBuf,
    /// SHA-256 of the bytes loaded, 64 lowercase hex digits.
    pub digest: String,
}

impl Component {
    /// The alias of the library the component comes from.
    pub fn alias(&self) -> &str {
        self.reference.split("::").next().unwrap_or_default()
    }
}

impl Topology {
    /// True when acker tasks track tuple trees.
    pub fn acking(&self) -> bool {
        self.settings.acker_executors > 0
    }
}

/// Spout or bolt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A spout.
    Spout,
    /// A bolt.
    Bolt,
}

/// One spout or bolt of the topology.
#[derive(Debug, Clone)]
pub struct Component {
    /// Its name in the topology.
    pub name: String,
    /// Spout or bolt.
    pub kind: Kind,
    /// `alias::Component`, for messages.
    pub reference: String,
    /// Where the component is declared in the topology file.
    pub loc: crate::config::Loc,
    /// Builds an instance.
    pub factory: crate::plugin::Factory,
    /// The fields the component expects on every input (contract 1.1).
    pub input_fields: Vec<String>,
    /// Its `config` table as a TOML document.
    pub config: String,
    /// Its task ids.
    pub tasks: Range<u32>,
    /// Task ids it had before a live change of parallelism: no longer
    /// running, their counters still count.
    pub retired: Vec<u32>,
    /// Declared output streams, each with its subscribers.
    pub outputs: Vec<OutputStream>,
    /// The index of the stream called `"default"`, if declared.
    pub default_stream: Option<u32>,
    /// A basic bolt: the host anchors and acks for it.
    pub auto_ack: bool,
    /// A windowed bolt (contract 1.1): the host buffers its inputs into
    /// windows and calls `execute_window`.
    pub windowed: bool,
    /// A spout whose message ids its successor can ack (contract 1.1,
    /// `Spout::IDS_SURVIVE_SWAP`): a live swap needs no drain.
    pub ids_survive_swap: bool,
    /// A windowed bolt's window (its `window`, `timestamp_field`, `lag`).
    pub window: Option<crate::config::WindowDecl>,
    /// Input edges (bolts only).
    pub inputs: Vec<Input>,
    /// Tick tuple period (bolts only).
    pub tick_tuple_freq_secs: Option<u64>,
    /// Rate limit of the spout's emits (spouts only).
    pub throttle: Option<ThrottleSpec>,
    /// Max-spout-pending per task (spouts only), after the topology default.
    pub max_spout_pending: Option<u32>,
    /// Wait strategies for spout wait, bolt wait and backpressure wait.
    pub wait: [WaitPlan; 3],
    /// A live reload committed a new version of this component, but not
    /// every task could take it (see `runtime::reload::ReloadOutcome::Partial`):
    /// some still run the version before. The next reload rebuilds it.
    pub outdated: bool,
    /// How long its `close` or `cleanup` may take at shutdown (contract
    /// 1.2's `CLOSE_BUDGET`; `None`: not declared).
    pub close_budget: Option<std::time::Duration>,
    /// A bolt that needs tick tuples at least this often (contract 1.2's
    /// `Bolt::TICKS`; `None`: it needs none).
    pub needs_ticks: Option<std::time::Duration>,
    /// A spout that keeps a checkpoint position (contract 1.2's
    /// `Spout::CHECKPOINTS`): durable state is exact across restarts.
    pub checkpoints: bool,
    /// The component this bolt is chained to (`config::chain`): its task
    /// `k` runs on the thread of that component's task `k`.
    pub chain_from: Option<usize>,
}

impl Topology {
    /// Keeps each bolt's `chain_from` only where `running` (the topology
    /// whose threads run) chains it to the same upstream over the same
    /// tasks: tasks are put on threads at start, and a live reload moves
    /// none, so a chain the new file would allow is not one that runs.
    pub fn keep_running_chains(&mut self, running: &Topology) {
        let runs = |c: &Component, up: &Component| {
            let Some(old) = running.components.iter().find(|o| o.name == c.name) else {
                return false;
            };
            let old_up = old.chain_from.and_then(|i| running.components.get(i));
            old_up.is_some_and(|o| o.name == up.name && o.tasks == up.tasks) && old.tasks == c.tasks
        };
        for i in 0..self.components.len() {
            let Some(from) = self.components[i].chain_from else { continue };
            if !runs(&self.components[i], &self.components[from]) {
                self.components[i].chain_from = None;
            }
        }
    }
}

impl Component {
    /// Every task whose counters belong to this component: its tasks, and
    /// those a live change of parallelism retired.
    pub fn counted_tasks(&self) -> impl Iterator<Item = u32> + '_ {
        self.tasks.clone().chain(self.retired.iter().copied())
    }

    /// The number of tasks.
    pub fn parallelism(&self) -> u32 {
        self.tasks.end - self.tasks.start
    }

    /// The wait plan for a situation.
    pub fn wait_plan(&self, situation: WaitSituation) -> &WaitPlan {
        match situation {
            WaitSituation::SPOUT_WAIT => &self.wait[0],
            WaitSituation::BOLT_WAIT => &self.wait[1],
            _ => &self.wait[2],
        }
    }

    /// The declared streams as the plugin API describes them.
    pub fn stream_decls(&self) -> Vec<StreamDecl> {
        self.outputs.iter().map(|s| s.decl.clone()).collect()
    }
}

/// A bolt's inputs as contract 1.1 describes them to the bolt.
pub fn input_decls(
    components: &[Component],
    bolt: &Component,
) -> Vec<squall_plugin_api::InputDecl> {
    bolt.inputs
        .iter()
        .map(|input| {
            let source = &components[input.from];
            let decl = &source.outputs[input.stream as usize].decl;
            let (grouping, grouping_fields) = match &input.grouping {
                Grouping::Fields(indexes) => {
                    ("fields", indexes.iter().map(|&i| decl.fields[i].clone()).collect())
                }
                other => (other.name(), Default::default()),
            };
            squall_plugin_api::InputDecl {
                component: source.name.as_str().into(),
                stream: decl.name.clone(),
                grouping: grouping.into(),
                grouping_fields,
                fields: decl.fields.clone(),
                custom: match &input.grouping {
                    Grouping::Custom(custom) => custom.name.as_str().into(),
                    _ => Default::default(),
                },
            }
        })
        .collect()
}

impl Topology {
    /// What contract 1.1 tells a task of `component` about its settings.
    pub fn task_ext(&self, component: &Component) -> squall_plugin_api::abi::TaskExt {
        let timeout = if self.settings.enable_message_timeouts {
            self.settings.message_timeout_secs * 1000
        } else {
            0
        };
        let dir = self.file.parent().map(|d| d.to_string_lossy().into_owned()).unwrap_or_default();
        squall_plugin_api::abi::TaskExt {
            tick_freq_millis: component.tick_tuple_freq_secs.map_or(0, |s| s * 1000),
            message_timeout_millis: timeout,
            max_spout_pending: component.max_spout_pending.unwrap_or(0),
            ackers: self.settings.acker_executors,
            inputs: input_decls(&self.components, component).into(),
            topology_dir: dir.into(),
            window: component.window.as_ref().map(window_settings).into(),
        }
    }
}

/// A bolt's window as contract 1.1 tells it to the bolt.
fn window_settings(window: &crate::config::WindowDecl) -> squall_plugin_api::abi::WindowSettings {
    use crate::config::WindowSize;
    use squall_plugin_api::abi::{WindowKind, WindowSettings};
    let (kind, length, slide) = match window.size {
        WindowSize::Count { length, slide } => (WindowKind::COUNT, length, slide),
        WindowSize::Time { length_millis, slide_millis } => {
            (WindowKind::TIME, length_millis, slide_millis)
        }
    };
    WindowSettings {
        kind,
        length,
        slide,
        timestamp_field: window.timestamp_field.as_deref().unwrap_or_default().into(),
        lag_millis: window.lag_millis,
    }
}

/// One declared output stream.
#[derive(Debug, Clone)]
pub struct OutputStream {
    /// Name, fields and directness, as declared.
    pub decl: StreamDecl,
    /// The bolts subscribed to it.
    pub subscribers: Vec<Subscriber>,
}

/// A bolt subscribed to a stream.
#[derive(Debug, Clone)]
pub struct Subscriber {
    /// The subscribing component's index.
    pub component: usize,
    /// How tuples are routed among its tasks.
    pub grouping: Grouping,
    /// Its task ids.
    pub tasks: Vec<u32>,
    /// A chained `local_or_shuffle` edge: the sender's task `k` sends only
    /// to the subscriber's task `k`, which runs on its thread.
    pub pairwise: bool,
}

/// An input edge of a bolt.
#[derive(Debug, Clone)]
pub struct Input {
    /// The source component's index.
    pub from: usize,
    /// The source stream's index among the source's outputs.
    pub stream: u32,
    /// How the source routes to this bolt's tasks.
    pub grouping: Grouping,
    /// Where the input is written.
    pub loc: crate::config::Loc,
    /// Rate limit on this edge.
    pub throttle: Option<ThrottleSpec>,
}

/// A resolved wait strategy choice.
#[derive(Debug, Clone)]
pub enum WaitPlan {
    /// `progressive` or `park`.
    Builtin(WaitSpec),
    /// A plugin's strategy.
    Plugin {
        /// `alias::Component`.
        name: String,
        /// Its constructor.
        new: Constructor,
        /// Its config as a TOML document.
        config: String,
        /// Where the strategy is named in the topology file.
        loc: crate::config::Loc,
    },
}

#[cfg(test)]
mod tests {
    use squall_plugin_api::abi::WindowKind;
    use squall_plugin_api::{TaskContext, WindowSpec};

    use super::window_settings;
    use crate::config::{Loc, WindowDecl, WindowSize};

    /// What the bolt reads back from the settings the host builds.
    fn read_back(window: &WindowDecl) -> Option<WindowSpec> {
        let context = TaskContext::builder("w").build();
        let mut ext = context.ext().clone();
        ext.window = abi_stable::std_types::ROption::RSome(window_settings(window));
        TaskContext::from_host(context.raw().clone(), Some(ext), None).window()
    }

    #[test]
    fn a_count_window_crosses_as_tuples() {
        let window = WindowDecl {
            loc: Loc::START,
            size: WindowSize::Count { length: 1000, slide: 100 },
            timestamp_field: None,
            lag_millis: 0,
        };
        let settings = window_settings(&window);
        assert_eq!(settings.kind, WindowKind::COUNT);
        assert_eq!((settings.length, settings.slide), (1000, 100));
        assert!(settings.timestamp_field.is_empty());
        assert_eq!(read_back(&window), Some(WindowSpec::count(1000, 100)));
    }

    #[test]
    fn an_event_time_window_crosses_with_its_field_and_lag() {
        use std::time::Duration;
        let window = WindowDecl {
            loc: Loc::START,
            size: WindowSize::Time { length_millis: 30_000, slide_millis: 5_000 },
            timestamp_field: Some("ts".into()),
            lag_millis: 2_000,
        };
        let settings = window_settings(&window);
        assert_eq!(settings.kind, WindowKind::TIME);
        assert_eq!((settings.length, settings.slide, settings.lag_millis), (30_000, 5_000, 2_000));
        let expected = WindowSpec::time(Duration::from_secs(30), Duration::from_secs(5))
            .with_event_time("ts", Duration::from_secs(2));
        assert_eq!(read_back(&window), Some(expected));
    }
}
