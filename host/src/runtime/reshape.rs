//! Reshaping a running topology: bolts added live, and bolts whose
//! parallelism grows or shrinks live (Storm's `rebalance`), with keyed
//! state handed to the task that now owns each key.
//!
//! # Task ids
//! Running tasks are never renumbered. [`align`] gives the new topology's
//! components the task ids they run under, and gives the tasks of an added
//! component, and every task of a resized one, fresh ids past the last one.
//! A resized component's old ids are kept in its `retired` list: their
//! threads end, their counters still count.
//!
//! # Adding a bolt
//! Its tasks are built, started and prepared before anything running is
//! touched; a failed `prepare` rolls the reload back (the tasks leave, no
//! upstream task ever routed to them). On commit, every task of every
//! component it subscribes to takes new routes ([`Control::Rewire`]).
//!
//! # Changing a bolt's parallelism
//! 1. The new tasks are built (constructors ran before the commit) and
//!    started; each waits for its state before `prepare`.
//! 2. Every upstream task sends on routes to the new tasks at once; what
//!    it had batched for the old ones goes on to them, and it reports once
//!    all of it has arrived
//!    ([`RewireMachine`](crate::executor::swap::RewireMachine)). Bolts
//!    downstream learn the new task ids.
//! 3. Once every upstream task reported, each old task executes what is
//!    queued ([`RetireMachine`](crate::executor::swap::RetireMachine)),
//!    saves its state and leaves.
//! 4. Keyed entries go to the new task the fields grouping routes their key
//!    to ([`key_index`]); an entry with an empty key goes from old task index
//!    `i` to new task index `i % new_parallelism`. Each new task restores
//!    its share and prepares. A failure there fails the run: the old tasks
//!    are gone.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};
use squall_plugin_api::State;

use super::instantiate::{custom_groupings, instantiate_only, Instances};
use super::plan::{routes, source_table, task_executor, Executor, TaskEnds, Wiring};
use super::{Live, TopologyHandle};
use crate::control::{
    Control, ReloadError, ReshapeError, Retire, Rewire, RunControl, RunState, Shared, Start,
};
use crate::executor::bolt::BoltExecutor;
use crate::ids::TaskId;
use crate::topology::grouping::key_index;
use crate::topology::{Component, Kind, Topology};

/// How long each step of a live reshape waits for the tasks it involves.
pub const RESHAPE_TIMEOUT: Duration = Duration::from_secs(10);

/// Orders and numbers `new` as the running `old` runs: components that
/// exist in both keep their index and, with the same parallelism, their
/// task ids; added components come last; added and resized tasks get ids
/// from `old.task_count` on.
pub fn align(old: &Topology, new: Topology) -> Topology {
    let Topology { name, settings, components, file, sources, libraries, state, simulated, .. } =
        new;
    let order = running_order(old, &components);
    let ids = TaskIds::assign(old, &components);
    let task_count = ids.next;
    Topology {
        name,
        settings,
        components: reorder(components, &order, ids),
        task_count,
        file,
        sources,
        libraries,
        state,
        simulated,
    }
}

/// The order `components` run in: those `old` runs, in its order, then
/// the added ones. Index `k` holds the index in `components` of the one
/// that runs `k`th.
fn running_order(old: &Topology, components: &[Component]) -> Vec<usize> {
    let mut order: Vec<usize> = old
        .components
        .iter()
        .filter_map(|o| components.iter().position(|c| c.name == o.name))
        .collect();
    let added: Vec<usize> = (0..components.len()).filter(|i| !order.contains(i)).collect();
    order.extend(added);
    order
}

/// The task ids of the new topology's components, by their index in it.
struct TaskIds {
    /// Each component's running tasks.
    tasks: Vec<std::ops::Range<u32>>,
    /// Each component's retired tasks.
    retired: Vec<Vec<u32>>,
    /// The first id not given.
    next: u32,
}

impl TaskIds {
    /// A component `old` runs with the same parallelism keeps its ids; an
    /// added or resized one gets fresh ids from `old.task_count` on, and a
    /// resized one's old ids are retired.
    fn assign(old: &Topology, components: &[Component]) -> Self {
        let mut ids = TaskIds {
            tasks: Vec::with_capacity(components.len()),
            retired: Vec::with_capacity(components.len()),
            next: old.task_count,
        };
        for c in components {
            let p = c.parallelism();
            match old.components.iter().find(|o| o.name == c.name) {
                Some(o) if o.parallelism() == p => {
                    ids.tasks.push(o.tasks.clone());
                    ids.retired.push(o.retired.clone());
                }
                found => {
                    ids.tasks.push(ids.next..ids.next + p);
                    ids.next += p;
                    let before = found.map(|o| o.counted_tasks().collect()).unwrap_or_default();
                    ids.retired.push(before);
                }
            }
        }
        ids
    }
}

/// `components` in running `order`, with their task ids, and their inputs
/// and subscribers pointing at the components' new indices and tasks.
fn reorder(components: Vec<Component>, order: &[usize], mut ids: TaskIds) -> Vec<Component> {
    let mut position = vec![0; components.len()];
    for (k, &i) in order.iter().enumerate() {
        position[i] = k;
    }
    let mut slots: Vec<Option<Component>> = components.into_iter().map(Some).collect();
    let mut aligned = Vec::with_capacity(slots.len());
    for &i in order {
        let Some(mut c) = slots[i].take() else { continue };
        c.tasks = ids.tasks[i].clone();
        c.retired = std::mem::take(&mut ids.retired[i]);
        for input in &mut c.inputs {
            input.from = position[input.from];
        }
        for stream in &mut c.outputs {
            for sub in &mut stream.subscribers {
                sub.tasks = ids.tasks[sub.component].clone().collect();
                sub.component = position[sub.component];
            }
        }
        aligned.push(c);
    }
    aligned
}

/// Tasks a reload adds, built before anything running is touched.
pub struct Reshape {
    topology: Arc<Topology>,
    /// The live wiring, grown by the new tasks' queues.
    wiring: Wiring,
    /// Added bolts: their names.
    added: Vec<String>,
    /// Resized bolts: their names.
    resized: Vec<String>,
    /// Executors of added tasks, started before the commit.
    added_tasks: Vec<(u32, BoltExecutor)>,
    /// `prepare` outcomes of the added tasks.
    added_prepared: Receiver<(u32, Result<(), ReloadError>)>,
    /// Executors of resized tasks, started at the commit, with where their state goes.
    resized_tasks: Vec<(u32, BoltExecutor, Sender<Option<State>>)>,
    /// Restore-and-prepare outcomes of the resized tasks.
    resized_prepared: Receiver<(u32, Result<(), ReloadError>)>,
}

impl std::fmt::Debug for Reshape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reshape")
            .field("added", &self.added)
            .field("resized", &self.resized)
            .finish_non_exhaustive()
    }
}

impl Reshape {
    /// Builds the tasks of `added` and `resized` components of `topology`
    /// (aligned), and their queues.
    ///
    /// # Errors
    /// A constructor that failed, with the component's file:line:col.
    pub fn build(
        handle: &TopologyHandle,
        topology: &Topology,
        added: Vec<String>,
        resized: Vec<String>,
    ) -> Result<Self, Vec<ReloadError>> {
        let names: Vec<&str> = added.iter().chain(&resized).map(String::as_str).collect();
        let mut instances =
            instantiate_only(topology, &names).map_err(|e| vec![not_built(topology, e)])?;
        let topology = Arc::new(topology.clone());
        let new_tasks = tasks_of(&topology, &names);
        let mut wiring = handle.live().wiring.clone();
        let ends = wiring.grow(&topology, &new_tasks);
        let run = handle.run_shared();
        let bolts = new_bolts(&topology, &names, &mut instances, &wiring, ends, &run);
        let (added_tx, added_prepared) = bounded(new_tasks.len().max(1));
        let (resized_tx, resized_prepared) = bounded(new_tasks.len().max(1));
        let (mut added_tasks, mut resized_tasks) = (Vec::new(), Vec::new());
        for (c, task, bolt) in bolts {
            if added.contains(&c.name) {
                let start = Start::Added { prepared: added_tx.clone() };
                added_tasks.push((task, bolt.starting(start)));
            } else {
                resized_tasks.push(resized_task(task, bolt, &resized_tx));
            }
        }
        Ok(Self {
            topology,
            wiring,
            added,
            resized,
            added_tasks,
            added_prepared,
            resized_tasks,
            resized_prepared,
        })
    }

    /// True when the reload adds or resizes nothing.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.resized.is_empty()
    }

    /// Starts the added tasks and waits until each has prepared; every
    /// failure, by component and task. The tasks receive nothing yet.
    pub fn start_added(&mut self, handle: &TopologyHandle) -> Vec<ReloadError> {
        let run = handle.run_shared();
        let total = self.added_tasks.len();
        let mut errors = Vec::new();
        for (task, bolt) in self.added_tasks.drain(..) {
            let name = format!("{}-{task}", bolt.context().component);
            match super::spawn(name, &run, move || bolt.run()) {
                Ok(thread) => handle.adopt_thread(thread),
                Err(e) => errors.push(not_started(task, e)),
            }
        }
        let deadline = Instant::now() + RESHAPE_TIMEOUT;
        let mut ready = 0;
        while ready + errors.len() < total {
            match self.added_prepared.recv_deadline(deadline) {
                Ok((_, Ok(()))) => ready += 1,
                Ok((_, Err(e))) => errors.push(e),
                Err(_) => {
                    errors.push(ReloadError::Timeout {
                        what: "the added tasks did not prepare".into(),
                        secs: RESHAPE_TIMEOUT.as_secs(),
                    });
                    break;
                }
            }
        }
        errors
    }

    /// Rolls back: the added tasks leave (nothing routes to them), the
    /// resized tasks were never started.
    pub fn abandon(self) {
        for c in self.topology.components.iter().filter(|c| self.added.contains(&c.name)) {
            for t in c.tasks.clone() {
                let _ =
                    self.wiring.controls[t as usize].send(Control::Retire(Retire { state: None }));
            }
        }
    }

    /// Commits: installs the new topology, starts the resized tasks, gives
    /// every affected task its new routes, retires the resized components'
    /// old tasks and hands their state over. Returns one line per growth,
    /// with its pause.
    ///
    /// What failed comes second: after this point the new topology runs
    /// regardless (a resized task that fails to take its state fails the
    /// run), so nothing here rolls back.
    pub fn commit(
        self,
        handle: &TopologyHandle,
        old: &Topology,
    ) -> (Vec<String>, Vec<ReloadError>) {
        let started = Instant::now();
        let Reshape { topology, wiring, added, resized, resized_tasks, resized_prepared, .. } =
            self;
        let run = handle.run_shared();
        let mut errors = Vec::new();
        let state_to = start_resized(handle, &run, resized_tasks, &mut errors);
        handle.install(Live { topology: topology.clone(), wiring: wiring.clone() });
        let (done_tx, done_rx) = bounded(topology.task_count as usize);
        let told = send_rewires(&topology, &wiring, (&added, &resized), &done_tx, &mut errors);
        await_rewired(&done_rx, told, &run, started, &mut errors);
        let rewired = started.elapsed();
        let mut lines: Vec<String> =
            added.iter().map(|name| added_line(&topology, name, rewired)).collect();
        for name in &resized {
            match hand_over(handle, old, &topology, name, &state_to, &resized_prepared) {
                Ok(line) => lines.push(line),
                Err(e) => errors.push(e),
            }
        }
        (lines, errors)
    }
}

/// Starts the resized tasks (they wait for their state); where each
/// task's state goes, by task id.
fn start_resized(
    handle: &TopologyHandle,
    run: &Arc<crate::control::RunControl>,
    resized_tasks: Vec<(u32, BoltExecutor, Sender<Option<State>>)>,
    errors: &mut Vec<ReloadError>,
) -> HashMap<u32, Sender<Option<State>>> {
    let mut state_to = HashMap::new();
    for (task, bolt, state) in resized_tasks {
        let name = format!("{}-{task}", bolt.context().component);
        match super::spawn(name, run, move || bolt.run()) {
            Ok(thread) => handle.adopt_thread(thread),
            Err(e) => errors.push(not_started(task, e)),
        }
        state_to.insert(task, state);
    }
    state_to
}

/// Gives every task that sends to an added or resized bolt (or receives
/// from a resized one) its new routes; how many tasks were told.
fn send_rewires(
    topology: &Arc<Topology>,
    wiring: &Wiring,
    (added, resized): (&[String], &[String]),
    done: &Sender<u32>,
    errors: &mut Vec<ReloadError>,
) -> usize {
    let sources = Arc::new(source_table(topology));
    let mut told = 0;
    for (i, new_sources) in rewired(topology, added, resized) {
        let c = &topology.components[i];
        for task in c.tasks.clone() {
            let mut custom = custom_groupings(topology, c).unwrap_or_else(|e| {
                let cause = Shared::erased(e);
                errors.push(ReloadError::Reshape(ReshapeError::Build { at: None, cause }));
                Vec::new()
            });
            let rewire = Rewire {
                streams: routes(c, task, &mut custom),
                queues: wiring.data.clone(),
                queue_bytes: wiring.queue_bytes.clone(),
                sources: new_sources.then(|| sources.clone()),
                done: done.clone(),
            };
            if wiring.controls[task as usize].send(Control::Rewire(Box::new(rewire))).is_ok() {
                told += 1;
            }
        }
    }
    told
}

/// Waits until every upstream task `told` reported. Every upstream task
/// sends on the new routes at once; it reports once its last batches for
/// the tasks left behind have arrived. Only then may those tasks leave: a
/// task retired earlier would drop what is still on its way. So this waits
/// as long as the run runs.
fn await_rewired(
    done: &Receiver<u32>,
    told: usize,
    run: &crate::control::RunControl,
    started: Instant,
    errors: &mut Vec<ReloadError>,
) {
    let mut heard = 0;
    while heard < told {
        match done.recv_timeout(RESHAPE_TIMEOUT) {
            Ok(_) => heard += 1,
            Err(_) if run.state() != RunState::Stopping => tracing::warn!(
                "reload: {} of {told} upstream tasks still send their last batches to the \
                 tasks it replaces ({:.0} s so far); those tasks stay until they have",
                told - heard,
                started.elapsed().as_secs_f64()
            ),
            Err(_) => {
                errors.push(ReloadError::Timeout {
                    what: format!(
                        "the run stopped while {} of {told} upstream tasks took their new routes",
                        told - heard
                    ),
                    secs: started.elapsed().as_secs(),
                });
                break;
            }
        }
    }
}

/// The line that says added bolt `name` runs, upstream rewired in `took`.
fn added_line(topology: &Topology, name: &str, took: Duration) -> String {
    let n = topology.components.iter().find(|c| c.name == name).map_or(0, Component::parallelism);
    format!(
        "added {name:?} ({n} task{}, upstream rewired in {:.2} ms)",
        if n == 1 { "" } else { "s" },
        took.as_secs_f64() * 1e3
    )
}

/// The task ids of components `names` of `topology`.
fn tasks_of(topology: &Topology, names: &[&str]) -> Vec<u32> {
    topology
        .components
        .iter()
        .filter(|c| names.contains(&c.name.as_str()))
        .flat_map(|c| c.tasks.clone())
        .collect()
}

/// The bolt executors of the tasks of components `names` of `topology`,
/// each with its component and task id, on the queue ends `ends` (by task
/// id) of the grown `wiring`.
fn new_bolts<'t>(
    topology: &'t Topology,
    names: &[&str],
    instances: &mut Instances,
    wiring: &Wiring,
    mut ends: Vec<Option<TaskEnds>>,
    run: &Arc<RunControl>,
) -> Vec<(&'t Component, u32, BoltExecutor)> {
    let sources = Arc::new(source_table(topology));
    let mut bolts = Vec::new();
    for c in topology.components.iter().filter(|c| names.contains(&c.name.as_str())) {
        for task in c.tasks.clone() {
            let Some(task_ends) = ends[task as usize].take() else { continue };
            let built =
                task_executor(topology, c, task, instances, wiring, task_ends, &sources, run);
            if let Executor::Bolt(bolt) = built {
                bolts.push((c, task, *bolt));
            }
        }
    }
    bolts
}

/// A new task of a resized bolt, started later: it waits for its state,
/// restores it and prepares; where its state goes.
fn resized_task(
    task: u32,
    bolt: BoltExecutor,
    prepared: &Sender<(u32, Result<(), ReloadError>)>,
) -> (u32, BoltExecutor, Sender<Option<State>>) {
    let (state_tx, state) = bounded(1);
    let start = Start::Resized { state, limit: RESHAPE_TIMEOUT * 3, prepared: prepared.clone() };
    (task, bolt.starting(start), state_tx)
}

/// The instances of a reload's new tasks could not be built: `e`, at the
/// component's file:line:col when it names one.
fn not_built(topology: &Topology, e: super::StartError) -> ReloadError {
    let at = match &e {
        super::StartError::Constructor { loc, .. } => {
            Some(format!("{}:{}:{}", topology.file.display(), loc.line, loc.col))
        }
        _ => None,
    };
    ReloadError::Reshape(ReshapeError::Build { at, cause: Shared::erased(e) })
}

/// A new task whose thread did not start.
fn not_started(task: u32, e: std::io::Error) -> ReloadError {
    ReloadError::Reshape(ReshapeError::Spawn { task: TaskId(task), cause: Shared::new(e) })
}

/// The components of `topology` (aligned) that a reshape adding `added`
/// and resizing `resized` rewires, by index: every one that sends to an
/// added or resized component takes new routes, and every bolt that
/// receives from a resized one also takes the new task table (`true`).
/// The added and resized components themselves are built new.
fn rewired(topology: &Topology, added: &[String], resized: &[String]) -> Vec<(usize, bool)> {
    let grown = |i: usize| {
        let name = &topology.components[i].name;
        added.contains(name) || resized.contains(name)
    };
    (0..topology.components.len())
        .filter(|&i| !grown(i))
        .filter_map(|i| {
            let c = &topology.components[i];
            let upstream =
                c.outputs.iter().flat_map(|s| &s.subscribers).any(|s| grown(s.component));
            let downstream =
                c.inputs.iter().any(|i| resized.contains(&topology.components[i.from].name));
            (upstream || downstream).then_some((i, downstream && c.kind == Kind::Bolt))
        })
        .collect()
}

/// Retires the old tasks of resized component `name`, re-partitions their
/// state over the new tasks and waits until each new task prepared.
///
/// # Errors
/// A step that failed, or the error a new task reported.
fn hand_over(
    handle: &TopologyHandle,
    old: &Topology,
    new: &Topology,
    name: &str,
    state_to: &HashMap<u32, Sender<Option<State>>>,
    prepared: &Receiver<(u32, Result<(), ReloadError>)>,
) -> Result<String, ReloadError> {
    let started = Instant::now();
    let (Some(before), Some(after)) = (
        old.components.iter().find(|c| c.name == name),
        new.components.iter().find(|c| c.name == name),
    ) else {
        return Err(ReloadError::Reshape(ReshapeError::Vanished { bolt: name.to_owned() }));
    };
    let states = retire(handle, before)?;
    let shares = partition(states, after.parallelism() as usize).map_err(|e| {
        let MixedFormats { first, second } = e;
        ReloadError::Reshape(ReshapeError::MixedFormats { bolt: name.to_owned(), first, second })
    })?;
    let entries: usize = shares.iter().flatten().map(|s| s.entries.len()).sum();
    for (i, share) in shares.into_iter().enumerate() {
        let task = after.tasks.start + i as u32;
        if let Some(to) = state_to.get(&task) {
            let _ = to.send(share);
        }
    }
    let deadline = Instant::now() + RESHAPE_TIMEOUT * 3;
    for _ in after.tasks.clone() {
        let not_prepared = || ReshapeError::NotPrepared { bolt: name.to_owned() };
        prepared.recv_deadline(deadline).map_err(|_| ReloadError::Reshape(not_prepared()))?.1?;
    }
    Ok(format!(
        "resized {name:?} from {} to {} tasks ({entries} state entries moved, pause {:.2} ms)",
        before.parallelism(),
        after.parallelism(),
        started.elapsed().as_secs_f64() * 1e3
    ))
}

/// Retires every old task of resized bolt `before`; the state each handed
/// over, by old task index.
///
/// # Errors
/// Not every task handed its state over in time.
fn retire(
    handle: &TopologyHandle,
    before: &Component,
) -> Result<BTreeMap<u32, Option<State>>, ReloadError> {
    let (states_tx, states_rx) = bounded(before.parallelism() as usize);
    let live = handle.live();
    for task in before.tasks.clone() {
        let retire = Retire { state: Some(states_tx.clone()) };
        let _ = live.wiring.controls[task as usize].send(Control::Retire(retire));
    }
    drop(states_tx);
    let deadline = Instant::now() + RESHAPE_TIMEOUT * 2;
    let mut states: BTreeMap<u32, Option<State>> = BTreeMap::new();
    while states.len() < before.parallelism() as usize {
        let Ok((task, state)) = states_rx.recv_deadline(deadline) else {
            return Err(ReloadError::Reshape(ReshapeError::HandOver {
                bolt: before.name.clone(),
                handed: states.len(),
                tasks: before.parallelism(),
                secs: (RESHAPE_TIMEOUT * 2).as_secs(),
            }));
        };
        states.insert(task - before.tasks.start, state);
    }
    Ok(states)
}

/// The old tasks of a resized bolt saved state in different formats: their
/// entries cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("its tasks saved state in different formats (`{first}` and `{second}`)")]
pub struct MixedFormats {
    /// One format.
    pub first: String,
    /// Another.
    pub second: String,
}

/// Splits the states of the old tasks (by old task index) over `n` new
/// tasks: keyed entries by [`key_index`], an entry with an empty key from
/// old index `i` to new index `i % n`.
///
/// # Errors
/// Old tasks that saved different formats.
pub fn partition(
    states: BTreeMap<u32, Option<State>>,
    n: usize,
) -> Result<Vec<Option<State>>, MixedFormats> {
    let mut format: Option<String> = None;
    let mut shares: Vec<Option<State>> = (0..n).map(|_| None).collect();
    for (index, state) in states {
        let Some(state) = state else { continue };
        match &format {
            Some(f) if f.as_str() != state.format.as_str() => {
                return Err(MixedFormats { first: f.clone(), second: state.format.to_string() })
            }
            _ => format = Some(state.format.to_string()),
        }
        for entry in state.entries {
            let to = if entry.key.is_empty() {
                index as usize % n
            } else {
                key_index(entry.key.iter(), n)
            };
            shares[to].get_or_insert_with(|| State::new(state.format.as_str())).entries.push(entry);
        }
    }
    Ok(shares)
}

#[cfg(test)]
mod tests {
    use squall_plugin_api::Value;

    use super::*;
    use crate::topology::fixtures::{bolt, component, linked, topology};

    fn keyed(words: &[&str]) -> State {
        let mut state = State::new("wc/1");
        for w in words {
            state.push(&[Value::from(*w)], vec![1]);
        }
        state
    }

    #[test]
    fn keyed_entries_go_where_the_fields_grouping_routes_their_key() {
        let words = ["a", "b", "c", "d", "e", "f", "g", "h"];
        let states = BTreeMap::from([(0, Some(keyed(&words[..4]))), (1, Some(keyed(&words[4..])))]);
        let shares = partition(states, 3).expect("one format");
        let mut router = crate::topology::grouping::Router::new(
            crate::topology::Grouping::Fields(vec![0]),
            vec![10, 11, 12],
            0,
        );
        let mut seen = 0;
        for (i, share) in shares.iter().enumerate() {
            for entry in share.iter().flat_map(|s| s.entries.iter()) {
                seen += 1;
                let routed = match router.route(&entry.key, None) {
                    crate::topology::grouping::Targets::One(t) => t,
                    _ => panic!("fields routes to one task"),
                };
                assert_eq!(routed, 10 + i as u32, "key {:?} is routed to its state", entry.key);
            }
        }
        assert_eq!(seen, words.len(), "every entry is handed over once");
    }

    #[test]
    fn unkeyed_entries_go_by_task_index_and_mixed_formats_are_refused() {
        let mut whole = State::new("wc/1");
        whole.push(&[], vec![7]);
        let states = BTreeMap::from([(0, None), (3, Some(whole))]);
        let shares = partition(states, 2).expect("one format");
        assert!(shares[0].is_none());
        assert_eq!(shares[1].as_ref().map(|s| s.entries.len()), Some(1));
        let states = BTreeMap::from([(0, Some(keyed(&["a"]))), (1, Some(State::new("other/1")))]);
        assert_eq!(
            partition(states, 2),
            Err(MixedFormats { first: "wc/1".into(), second: "other/1".into() })
        );
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_reshape_rewires_the_senders_of_grown_bolts_and_the_receivers_of_resized_ones() {
        // s -> b -> c -> e (added); s -> d. b is resized.
        let t = linked(vec![
            component("s", Kind::Spout, 0..1),
            bolt("b", 1..3, &[0]),
            bolt("c", 3..4, &[1]),
            bolt("d", 4..5, &[0]),
            bolt("e", 5..6, &[2]),
        ]);
        assert_eq!(
            rewired(&t, &names(&["e"]), &names(&["b"])),
            [(0, false), (2, true)],
            "s sends to b; c receives from b (new task table) and sends to e; d is untouched"
        );
        // Adding only: nobody needs a new task table.
        assert_eq!(rewired(&t, &names(&["e"]), &[]), [(2, false)]);
        assert!(rewired(&t, &[], &[]).is_empty());
    }

    #[test]
    fn an_unchanged_topology_aligns_to_itself() {
        let old = topology();
        let aligned = align(&old, old.clone());
        let tasks: Vec<_> = aligned.components.iter().map(|c| c.tasks.clone()).collect();
        assert_eq!(tasks, [0..1, 1..3]);
        assert_eq!(aligned.task_count, old.task_count);
        assert!(aligned.components.iter().all(|c| c.retired.is_empty()));
    }

    #[test]
    fn a_shrunk_bolt_gets_fresh_ids_and_keeps_every_old_id_counted() {
        let old = linked(vec![component("s", Kind::Spout, 0..1), bolt("b", 1..4, &[0])]);
        // The new file asks for 2 tasks (its ids are placeholders until aligned).
        let new = linked(vec![component("s", Kind::Spout, 0..1), bolt("b", 1..3, &[0])]);
        let shrunk = align(&old, new);
        assert_eq!(shrunk.components[1].tasks, 4..6);
        assert_eq!(shrunk.components[1].retired, [1, 2, 3]);
        assert_eq!(shrunk.task_count, 6);
        assert_eq!(shrunk.components[0].outputs[0].subscribers[0].tasks, [4, 5]);
        // Grown again: the ids of both earlier shapes still count.
        let again = linked(vec![component("s", Kind::Spout, 0..1), bolt("b", 1..4, &[0])]);
        let grown = align(&shrunk, again);
        assert_eq!(grown.components[1].tasks, 6..9);
        assert_eq!(grown.components[1].retired, [4, 5, 1, 2, 3]);
        assert_eq!(grown.task_count, 9);
        let counted: Vec<u32> = grown.components[1].counted_tasks().collect();
        assert_eq!(counted, [6, 7, 8, 4, 5, 1, 2, 3]);
    }

    #[test]
    fn one_new_task_takes_every_entry_and_equal_keys_end_up_together() {
        let mut whole = State::new("wc/1");
        whole.push(&[], vec![9]);
        let states = BTreeMap::from([
            (0, Some(keyed(&["a", "b"]))),
            (1, Some(keyed(&["a", "c"]))),
            (2, Some(whole)),
        ]);
        let shares = partition(states.clone(), 1).expect("one format");
        assert_eq!(shares.len(), 1);
        let only = shares[0].as_ref().expect("a share");
        assert_eq!(only.format.as_str(), "wc/1");
        assert_eq!(only.entries.len(), 5);
        let shares = partition(states, 4).expect("one format");
        let holding_a: Vec<usize> = (0..4)
            .filter(|&i| {
                shares[i]
                    .iter()
                    .flat_map(|s| &s.entries)
                    .any(|e| e.key.as_slice() == [Value::from("a")])
            })
            .collect();
        assert_eq!(holding_a.len(), 1, "both tasks' \"a\" entries go to one new task");
        let total: usize = shares.iter().flatten().map(|s| s.entries.len()).sum();
        assert_eq!(total, 5);
        assert!(partition(BTreeMap::new(), 3).expect("nothing").iter().all(Option::is_none));
    }
}
