//! Building every component instance before anything runs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use squall_plugin_api::abi::ComponentBox;
use squall_plugin_api::WaitSituation;

use crate::plugin::{BoltObj, Instance, SpoutObj};
use crate::topology::{Component, Kind, Topology, WaitPlan};
use crate::wait::{PluginWait, WaitStrategy};

/// Why a topology could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A constructor returned an error or panicked.
    #[error("{kind} \"{component}\" ({reference}): constructor {what}: {message}")]
    Constructor {
        /// "spout", "bolt" or "wait strategy".
        kind: &'static str,
        /// The component's name in the topology.
        component: String,
        /// `alias::Component`.
        reference: String,
        /// "failed" or "panicked".
        what: &'static str,
        /// The plugin's message.
        message: String,
        /// True when the plugin rejected its config (`ErrorKind::CONFIG`).
        config: bool,
        /// Where the component is declared.
        loc: crate::config::Loc,
    },
    /// A constructor returned a component of another kind.
    #[error("{component} ({reference}): constructor returned a component of another kind")]
    WrongKind {
        /// The component's name in the topology.
        component: String,
        /// `alias::Component`.
        reference: String,
    },
    /// A constructor did not return within `startup_timeout_secs`.
    #[error("{component}: constructor did not return within {secs} s (blocked in plugin code)")]
    Blocked {
        /// The component whose constructor was running, as `kind "name" (alias::Component)`.
        component: String,
        /// The limit.
        secs: u64,
    },
    /// A custom grouping could not be built or prepared.
    #[error("{component}: {cause}")]
    Grouping {
        /// The sending component.
        component: String,
        /// What failed.
        cause: crate::topology::grouping::GroupingError,
        /// Where the topology names the grouping (`custom = "alias::Name"`).
        loc: crate::config::Loc,
    },
    /// A thread could not be spawned.
    #[error("cannot spawn a thread: {0}")]
    Spawn(#[from] std::io::Error),
    /// Durable state could not be opened or restored.
    #[error("durable state: {0}")]
    State(#[from] crate::state::StateError),
    /// A task refused the state a restore gave it.
    #[error("{component} task {task}: restoring its durable state failed: {cause}")]
    Restore {
        /// The component.
        component: String,
        /// The task id.
        task: u32,
        /// Why.
        cause: String,
    },
}

/// One instance per task, plus the wait strategies of each task.
#[derive(Default)]
pub struct Instances {
    /// Spout instances by task id (`None` for bolt tasks).
    pub spouts: Vec<Option<SpoutObj>>,
    /// Bolt instances by task id (`None` for spout tasks).
    pub bolts: Vec<Option<BoltObj>>,
    /// Per task: the main wait strategy (spout or bolt wait) and the backpressure wait.
    pub waits: Vec<Option<(WaitStrategy, WaitStrategy)>>,
    /// Per task: its custom groupings' instances, one per subscription.
    pub groupings: Vec<Vec<CustomInstance>>,
    /// Durable state: each windowed bolt task's buffered tuples restored
    /// from the last committed checkpoint, by task id.
    pub windows: std::collections::HashMap<u32, crate::state::WindowRestore>,
}

/// A sending task's instance of a custom grouping, for one subscription.
pub struct CustomInstance {
    /// The index of the output stream.
    pub stream: usize,
    /// The index of the subscriber among the stream's subscribers.
    pub subscriber: usize,
    /// The prepared instance.
    pub instance: squall_plugin_api::abi::GroupingBox,
}

impl std::fmt::Debug for CustomInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomInstance")
            .field("stream", &self.stream)
            .field("subscriber", &self.subscriber)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Instances {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instances").field("tasks", &self.spouts.len()).finish_non_exhaustive()
    }
}

/// Builds every instance on a helper thread, and gives up after `limit`
/// if a constructor blocks: the blocked thread is left behind and the
/// component named.
///
/// # Errors
/// The first constructor that fails, panics or blocks, named with its component.
pub fn instantiate_within(topology: &Topology, limit: Duration) -> Result<Instances, StartError> {
    let progress = Arc::new(Mutex::new(String::new()));
    let (done_tx, done_rx) = crossbeam_channel::bounded(1);
    let (topology_copy, progress_copy) = (topology.clone(), progress.clone());
    std::thread::Builder::new().name("__constructors".into()).spawn(move || {
        let _ = done_tx.send(build(&topology_copy, &progress_copy));
    })?;
    match done_rx.recv_timeout(limit) {
        Ok(result) => result,
        Err(_) => Err(StartError::Blocked {
            component: progress.lock().map(|p| p.clone()).unwrap_or_default(),
            secs: limit.as_secs(),
        }),
    }
}

/// Builds every instance by calling the plugins' constructors, on this thread.
///
/// # Errors
/// The first constructor that fails or panics, named with its component.
pub fn instantiate(topology: &Topology) -> Result<Instances, StartError> {
    build(topology, &Mutex::new(String::new()))
}

/// Builds the instances of the components `only` names (a live reload's
/// new tasks); every other task's slots stay empty.
///
/// # Errors
/// As [`instantiate`].
pub fn instantiate_only(topology: &Topology, only: &[&str]) -> Result<Instances, StartError> {
    build_some(topology, &Mutex::new(String::new()), &|c| only.contains(&c.name.as_str()))
}

fn build(topology: &Topology, progress: &Mutex<String>) -> Result<Instances, StartError> {
    build_some(topology, progress, &|_| true)
}

/// Builds the instances of every task of the components `only` accepts,
/// naming in `progress` the one whose constructor runs.
fn build_some(
    topology: &Topology,
    progress: &Mutex<String>,
    only: &dyn Fn(&Component) -> bool,
) -> Result<Instances, StartError> {
    let n = topology.task_count as usize;
    let mut out = Instances {
        spouts: (0..n).map(|_| None).collect(),
        bolts: (0..n).map(|_| None).collect(),
        waits: (0..n).map(|_| None).collect(),
        groupings: (0..n).map(|_| Vec::new()).collect(),
        windows: Default::default(),
    };
    for c in topology.components.iter().filter(|c| only(c)) {
        for task in c.tasks.clone() {
            if let Ok(mut p) = progress.lock() {
                *p = format!("{} \"{}\" ({})", kind_name(c.kind), c.name, c.reference);
            }
            out.build_task(topology, c, task)?;
        }
    }
    Ok(out)
}

/// A component kind as messages name it.
fn kind_name(kind: Kind) -> &'static str {
    if kind == Kind::Spout {
        "spout"
    } else {
        "bolt"
    }
}

impl Instances {
    /// Builds task `task` of `c`: its instance (the plugin's constructor),
    /// its wait strategies and its custom groupings, all while the task is
    /// [`Constructing`](crate::plugin::services::Constructing).
    fn build_task(
        &mut self,
        topology: &Topology,
        c: &Component,
        task: u32,
    ) -> Result<(), StartError> {
        let t = task as usize;
        let constructing = crate::plugin::services::Constructing::enter(&c.name, task);
        match (c.kind, build_instance(c)?) {
            (Kind::Spout, Instance::Spout(s)) => self.spouts[t] = Some(s),
            (Kind::Bolt, Instance::Bolt(b)) => self.bolts[t] = Some(b),
            _ => {
                return Err(StartError::WrongKind {
                    component: c.name.clone(),
                    reference: c.reference.clone(),
                })
            }
        }
        let main = if c.kind == Kind::Spout {
            WaitSituation::SPOUT_WAIT
        } else {
            WaitSituation::BOLT_WAIT
        };
        let back_pressure = WaitSituation::BACK_PRESSURE_WAIT;
        let waits = (
            wait_strategy(c.wait_plan(main), main, &c.name)?,
            wait_strategy(c.wait_plan(back_pressure), back_pressure, &c.name)?,
        );
        self.waits[t] = Some(waits);
        self.groupings[t] = custom_groupings(topology, c)?;
        drop(constructing);
        Ok(())
    }
}

/// Calls `c`'s constructor with its config; a failure or a panic is named
/// with the component.
fn build_instance(c: &Component) -> Result<Instance, StartError> {
    c.factory.build(&c.config).map_err(failure).map_err(|(what, message, config)| {
        StartError::Constructor {
            kind: kind_name(c.kind),
            component: c.name.clone(),
            reference: c.reference.clone(),
            what,
            message,
            config,
            loc: c.loc,
        }
    })
}

/// Builds and prepares the custom grouping instances one task of `c` routes with.
pub(super) fn custom_groupings(
    topology: &Topology,
    c: &crate::topology::Component,
) -> Result<Vec<CustomInstance>, StartError> {
    let mut out = Vec::new();
    for (stream, s) in c.outputs.iter().enumerate() {
        for (subscriber, sub) in s.subscribers.iter().enumerate() {
            if let crate::topology::grouping::Grouping::Custom(custom) = &sub.grouping {
                let target = topology.components[sub.component].name.as_str();
                let instance = custom.instantiate(target, &sub.tasks).map_err(|cause| {
                    StartError::Grouping { component: c.name.clone(), cause, loc: custom.loc }
                })?;
                out.push(CustomInstance { stream, subscriber, instance });
            }
        }
    }
    Ok(out)
}

fn construct(
    new: crate::topology::Constructor,
    config: &str,
) -> Result<ComponentBox, (&'static str, String, bool)> {
    new(config.into()).into_result().map_err(failure)
}

fn failure(e: squall_plugin_api::PluginError) -> (&'static str, String, bool) {
    let what = if e.is_panic() { "panicked" } else { "failed" };
    (what, e.message.to_string(), e.kind == squall_plugin_api::ErrorKind::CONFIG)
}

/// Builds the strategy for one situation of one task.
///
/// # Errors
/// When a plugin strategy's constructor or `prepare` fails.
pub fn wait_strategy(
    plan: &WaitPlan,
    situation: WaitSituation,
    component: &str,
) -> Result<WaitStrategy, StartError> {
    match plan {
        WaitPlan::Builtin(spec) => {
            Ok(WaitStrategy::builtin(spec).unwrap_or_else(|| WaitStrategy::default_for(situation)))
        }
        WaitPlan::Plugin { name, new, config, loc } => {
            // A strategy that rejects its config is a config error, at the
            // place the topology names the strategy.
            let error = |what, message, config| StartError::Constructor {
                kind: "wait strategy",
                component: format!("{component}/{}", situation.name()),
                reference: name.clone(),
                what,
                message,
                config,
                loc: *loc,
            };
            match construct(*new, config).map_err(|(what, m, c)| error(what, m, c))? {
                ComponentBox::WaitStrategy(w) => PluginWait::new(w, situation, name.clone())
                    .map(WaitStrategy::Plugin)
                    .map_err(|e| {
                        let config = e.kind == squall_plugin_api::ErrorKind::CONFIG;
                        error("failed in prepare", e.message.to_string(), config)
                    }),
                _ => Err(StartError::WrongKind {
                    component: component.to_owned(),
                    reference: name.clone(),
                }),
            }
        }
    }
}
