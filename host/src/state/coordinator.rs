//! The checkpoint coordinator: one host thread that starts a checkpoint
//! every interval, gathers every task's part, and commits them atomically.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abi_stable::std_types::{ROption, RVec};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use squall_plugin_api::abi::{ScopeWrites, StateRecord};

use super::codec;
use super::{Backend, Part, Report, POSITION_SCOPE};
use crate::control::{Control, RunControl, RunState};
use crate::topology::grouping::key_index;
use crate::topology::{Kind, Topology};

/// What the coordinator needs of the running topology: the topology as it
/// is now (a live reload changes it), and every task's control queue.
pub trait TaskDirectory: Send {
    /// The current topology and the control queues by task id.
    fn current(&self) -> (Arc<Topology>, Vec<Sender<Control>>);
}

/// Counters the coordinator publishes (read by `/metrics` and the API).
#[derive(Debug, Default)]
pub struct CheckpointStats {
    /// The last committed checkpoint (0: none yet).
    pub last_committed: AtomicU64,
    /// Checkpoints committed by this process.
    pub committed: AtomicU64,
    /// Commits the backend refused (their writes are retried with the next).
    pub failed: AtomicU64,
    /// Checkpoints abandoned because a task's part did not arrive in time,
    /// or a bolt's stores could not be read.
    pub aborted: AtomicU64,
    /// The last committed checkpoint's duration, barrier to commit (µs).
    pub last_micros: AtomicU64,
    /// The last commit's records written.
    pub last_records: AtomicU64,
    /// The last commit's bytes written (keys and values).
    pub last_bytes: AtomicU64,
    /// Records the last restore read.
    pub restored_records: AtomicU64,
    /// The restore's duration at start (µs).
    pub restore_micros: AtomicU64,
    /// Durations of every committed checkpoint (µs), for p50/p99.
    pub durations: Mutex<Vec<u64>>,
    /// The last error, if the last attempt failed.
    pub last_error: Mutex<Option<String>>,
    /// Commits refused by the partition's fence (a group's lease was lost
    /// or expired; see [`Fence`](super::Fence)).
    pub fenced: AtomicU64,
}

impl CheckpointStats {
    /// The `q` quantile (0..=1) of committed checkpoints' durations (µs).
    pub fn duration_quantile(&self, q: f64) -> Option<u64> {
        let mut d = self.durations.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if d.is_empty() {
            return None;
        }
        d.sort_unstable();
        let i = ((d.len() - 1) as f64 * q).round() as usize;
        Some(d[i])
    }
}

/// Writes gathered and not yet committed, by scope then key (later writes
/// of a key replace earlier ones; `None` deletes).
type Pending = BTreeMap<String, HashMap<Vec<u8>, Option<Vec<u8>>>>;

/// How many checkpoint durations are kept for the quantiles.
const KEPT_DURATIONS: usize = 100_000;

/// The coordinator, before its thread starts.
pub struct Coordinator {
    backend: Backend,
    interval: Duration,
    /// How long a checkpoint may take to gather its parts.
    timeout: Duration,
    reports: Receiver<Report>,
    next: u64,
    pending: Pending,
    stats: Arc<CheckpointStats>,
    gate: Arc<Mutex<()>>,
    fence: Option<Arc<super::Fence>>,
    /// A task's part that must never be committed (a misplaced key, a
    /// store that cannot be encoded): the run stops, and nothing is
    /// committed from then on, so no checkpoint leaves out its changes.
    refused: Option<Refusal>,
}

/// Why the coordinator refused to commit: the task and the cause.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// The task whose part was refused.
    pub task: crate::control::TaskName,
    /// Why, with what to do.
    pub cause: String,
}

/// Why a checkpoint's parts were not all gathered.
enum Stop {
    /// Abandoned (late or missing parts): the next checkpoint covers it.
    Abandon(String),
    /// Refused: the run must stop.
    Refuse(Refusal),
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("backend", &self.backend.name())
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

impl Coordinator {
    /// A coordinator committing into `backend` (opened, restored from) every
    /// `interval`, gathering parts from `reports`, numbering checkpoints
    /// after `last` (the one restored). `gate` is held for the whole of each
    /// checkpoint; a live reload holds it too, so the two never overlap.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        backend: Backend,
        interval: Duration,
        timeout: Duration,
        reports: Receiver<Report>,
        last: Option<u64>,
        stats: Arc<CheckpointStats>,
        gate: Arc<Mutex<()>>,
    ) -> Self {
        Self {
            backend,
            interval,
            timeout,
            reports,
            next: last.map_or(1, |n| n + 1),
            pending: Pending::new(),
            stats,
            gate,
            fence: None,
            refused: None,
        }
    }

    /// Commits only while `fence` allows it (a partition of a group).
    pub fn with_fence(mut self, fence: Arc<super::Fence>) -> Self {
        self.fence = Some(fence);
        self
    }

    /// Checkpoints every interval while the run is `Running`; then waits for
    /// the final request (the drain is over) and takes one last checkpoint,
    /// so a graceful stop leaves nothing to replay.
    pub fn run(mut self, tasks: &dyn TaskDirectory, run: &RunControl, last: Receiver<Sender<()>>) {
        let mut due = Instant::now() + self.interval;
        while run.state() == RunState::Running {
            let now = Instant::now();
            if now < due {
                std::thread::sleep((due - now).min(Duration::from_millis(20)));
                continue;
            }
            self.checkpoint(tasks);
            if let Some(r) = &self.refused {
                run.fail(crate::control::RunError::Lifecycle {
                    task: r.task.clone(),
                    call: "checkpoint",
                    cause: r.cause.clone(),
                });
            }
            due = Instant::now() + self.interval;
        }
        // Draining: the stop asks for the last checkpoint once the drain is
        // over (or gives up, dropping the sender).
        if let Ok(done) = last.recv() {
            if let Some(error) = run.fatal() {
                // A task that failed may never answer a barrier: the
                // checkpoint would wait out its timeout for nothing. A
                // restart replays from the last committed one.
                tracing::info!("no last checkpoint: the run failed ({error})");
            } else if run.state() != RunState::Stopping {
                self.checkpoint(tasks);
            }
            let _ = done.send(());
        }
        self.backend.close();
    }

    /// One checkpoint: barriers, parts, commit. Returns true when committed.
    pub fn checkpoint(&mut self, tasks: &dyn TaskDirectory) -> bool {
        if self.refused.is_some() {
            return false;
        }
        let gate = self.gate.clone();
        let _held = gate.lock().unwrap_or_else(|p| p.into_inner());
        let (topology, controls) = tasks.current();
        let n = self.next;
        self.next += 1;
        let started = Instant::now();
        let (spouts, bolts) = task_sets(&topology);
        for &t in &spouts {
            if let Some(c) = controls.get(t as usize) {
                let _ = c.send(Control::Barrier(n));
            }
        }
        if let Err(stop) = self.gather(&topology, n, spouts.len() + bolts.len(), started) {
            self.give_up(n, stop, &controls, &bolts);
            return false;
        }
        if self.fenced(n) {
            return false;
        }
        self.commit(n, started, &controls)
    }

    /// Gives up checkpoint `n` whose parts were not all gathered: every
    /// bolt task drops its part of it, and the error is recorded. A refusal
    /// also stops every later commit; an abandoned checkpoint's changes are
    /// covered by the next one.
    fn give_up(&mut self, n: u64, stop: Stop, controls: &[Sender<Control>], bolts: &[u32]) {
        for &t in bolts {
            if let Some(c) = controls.get(t as usize) {
                let _ = c.send(Control::AbortCheckpoint(n));
            }
        }
        self.stats.aborted.fetch_add(1, Ordering::Relaxed);
        match stop {
            Stop::Refuse(refusal) => {
                self.set_error(Some(format!(
                    "checkpoint {n} refused: {}: {}",
                    refusal.task, refusal.cause
                )));
                self.refused = Some(refusal);
            }
            Stop::Abandon(why) => {
                tracing::warn!("checkpoint {n} abandoned: {why}; the next one covers its changes");
                self.set_error(Some(format!("checkpoint {n} abandoned: {why}")));
            }
        }
    }

    /// True (and counted, logged and recorded as the last error) when the
    /// partition's fence forbids committing checkpoint `n`.
    fn fenced(&self, n: u64) -> bool {
        let Some(Err(fenced)) = self.fence.as_ref().map(|f| f.check()) else {
            return false;
        };
        self.stats.fenced.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            "checkpoint {n} not committed: {fenced}; nothing is committed or acknowledged to \
             the broker for it"
        );
        self.set_error(Some(format!("checkpoint {n} fenced: {fenced}")));
        true
    }

    /// Commits the pending writes as checkpoint `n` and tells every task it
    /// is committed; a refused commit keeps them pending for the next one.
    /// Returns true when committed.
    fn commit(&mut self, n: u64, started: Instant, controls: &[Sender<Control>]) -> bool {
        let (writes, records, bytes) = as_writes(&self.pending);
        if let Err(e) = self.backend.commit(n, &writes) {
            self.stats.failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                "checkpoint {n} not committed ({e}); its {records} writes are retried with the \
                 next checkpoint, and spouts keep their broker acknowledgements until then"
            );
            self.set_error(Some(e.to_string()));
            return false;
        }
        self.pending.clear();
        let micros = started.elapsed().as_micros() as u64;
        self.record_commit(n, micros, records, bytes);
        tracing::debug!("checkpoint {n} committed: {records} records, {bytes} bytes, {micros} µs");
        let was_failing = self.set_error(None);
        if was_failing {
            tracing::info!("checkpoint {n} committed: the state backend is back");
        }
        for c in controls {
            let _ = c.send(Control::Committed(n));
        }
        true
    }

    /// Publishes a committed checkpoint's number, duration and size.
    fn record_commit(&self, n: u64, micros: u64, records: u64, bytes: u64) {
        let s = &self.stats;
        s.last_committed.store(n, Ordering::Relaxed);
        s.committed.fetch_add(1, Ordering::Relaxed);
        s.last_micros.store(micros, Ordering::Relaxed);
        s.last_records.store(records, Ordering::Relaxed);
        s.last_bytes.store(bytes, Ordering::Relaxed);
        let mut d = s.durations.lock().unwrap_or_else(|p| p.into_inner());
        if d.len() < KEPT_DURATIONS {
            d.push(micros);
        }
    }

    /// Sets the last error; returns true when there was one.
    fn set_error(&self, error: Option<String>) -> bool {
        let mut last = self.stats.last_error.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::replace(&mut *last, error).is_some()
    }

    /// Gathers `expected` parts of checkpoint `n` into the pending writes.
    ///
    /// Every part is kept, also when `n` is then abandoned, and a late part
    /// of an abandoned checkpoint too: a task that reported has taken its
    /// changes out of its stores, so they are committed with the next
    /// checkpoint or never. (A task reports its checkpoints in order, so
    /// its part of `n` arrives before its part of any later one.)
    fn gather(
        &mut self,
        topology: &Topology,
        n: u64,
        expected: usize,
        started: Instant,
    ) -> Result<(), Stop> {
        let mut got = 0;
        while got < expected {
            let left = self.timeout.saturating_sub(started.elapsed());
            match self.reports.recv_timeout(left) {
                Ok(r) if r.checkpoint == n => {
                    if let Part::Spout(Err(e)) = &r.part {
                        return Err(Stop::Abandon(format!(
                            "task {} could not give its position: {e}",
                            r.task
                        )));
                    }
                    check_part(topology, &r, n).map_err(Stop::Refuse)?;
                    self.merge(topology, r);
                    got += 1;
                }
                Ok(r) if r.checkpoint < n => {
                    check_part(topology, &r, n).map_err(Stop::Refuse)?;
                    self.merge(topology, r);
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    return Err(Stop::Abandon(format!(
                        "{got} of {expected} tasks reported within {} ms",
                        self.timeout.as_millis()
                    )))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Stop::Abandon("the tasks are gone".into()))
                }
            }
        }
        Ok(())
    }

    /// Adds a part's changes to the pending writes.
    fn merge(&mut self, topology: &Topology, r: Report) {
        let Some(c) = topology.components.iter().find(|c| c.tasks.contains(&r.task)) else {
            return;
        };
        let index = r.task - c.tasks.start;
        match r.part {
            Part::Spout(Ok(Some(position))) => {
                let scope = super::scope(&c.name, POSITION_SCOPE);
                let value = codec::encode_state(&position);
                self.pending.entry(scope).or_default().insert(codec::task(index), Some(value));
            }
            Part::Spout(_) => {}
            Part::Bolt(Ok(deltas)) => {
                for d in deltas {
                    let scope = self.pending.entry(super::scope(&c.name, &d.store)).or_default();
                    for e in d.entries {
                        let key = if e.key.is_empty() {
                            codec::task(index)
                        } else {
                            codec::keyed(&e.key)
                        };
                        scope.insert(key, Some(e.bytes.into_vec()));
                    }
                    for key in d.removed {
                        scope.insert(codec::keyed(&key), None);
                    }
                }
            }
            Part::Bolt(Err(_)) => {}
        }
    }
}

/// Refuses a bolt task's part that must not be committed: its stores could
/// not be read (a value that does not encode, two stores with one name:
/// the bolt keeps those changes, so no later commit may leave them out),
/// or it wrote a key that another task owns.
///
/// A keyed entry belongs to the task the fields grouping sends its key to
/// ([`key_index`]): a restore gives it there. A task that writes a key it
/// does not own is fed by a grouping that does not route by the store's
/// key (shuffle, a custom grouping, fields the key is not made of, or the
/// key's fields in another order): another task writes the same key, or
/// the restored value lands where the key's tuples never go, and the last
/// writer wins. Windows' buffers (host-kept, per task) are exempt.
fn check_part(topology: &Topology, r: &Report, n: u64) -> Result<(), Refusal> {
    let Some(c) = topology.components.iter().find(|c| c.tasks.contains(&r.task)) else {
        return Ok(());
    };
    let task = crate::control::TaskName {
        kind: c.kind,
        component: c.name.clone(),
        task: crate::ids::TaskId(r.task),
    };
    let deltas = match &r.part {
        Part::Bolt(Ok(deltas)) => deltas,
        Part::Bolt(Err(e)) => {
            return Err(Refusal {
                task,
                cause: format!(
                    "{e}; checkpoint {n} and every later one are not committed (the \
                     last committed stays), and the topology stops"
                ),
            })
        }
        Part::Spout(_) => return Ok(()),
    };
    let parallelism = c.parallelism() as usize;
    if parallelism < 2 {
        return Ok(());
    }
    let index = (r.task - c.tasks.start) as usize;
    match misplaced_key(deltas, index, parallelism) {
        None => Ok(()),
        Some(misplaced) => Err(Refusal { task, cause: misplaced.cause(topology, c, index, n) }),
    }
}

/// A keyed entry written (or removed) by a task that does not own its key.
struct MisplacedKey<'a> {
    /// The store written.
    store: &'a str,
    /// The key's fields.
    key: &'a [squall_plugin_api::Value],
    /// The task index the fields grouping gives the key to.
    owner: usize,
}

/// The first key of task `index`'s deltas (windows' buffers aside) that
/// the fields grouping gives to another of the `parallelism` tasks.
fn misplaced_key(
    deltas: &[squall_plugin_api::abi::StoreDelta],
    index: usize,
    parallelism: usize,
) -> Option<MisplacedKey<'_>> {
    for d in deltas.iter().filter(|d| d.store.as_str() != super::WINDOW_STORE) {
        let keys = d.entries.iter().map(|e| &e.key).chain(d.removed.iter());
        for key in keys.filter(|k| !k.is_empty()) {
            let owner = key_index(key.iter(), parallelism);
            if owner != index {
                return Some(MisplacedKey { store: d.store.as_str(), key, owner });
            }
        }
    }
    None
}

impl MisplacedKey<'_> {
    /// Why the part of task `index` of bolt `c` in checkpoint `n` is
    /// refused, with what to do.
    fn cause(
        &self,
        topology: &Topology,
        c: &crate::topology::Component,
        index: usize,
        n: u64,
    ) -> String {
        let shown = match self.key {
            [one] => one.to_string(),
            many => format!("{:?}", many.iter().map(ToString::to_string).collect::<Vec<_>>()),
        };
        format!(
            "store {:?}: task index {index} wrote key {shown}, which the fields \
             grouping (and a restore) gives to task index {}: several tasks would \
             write one key and the last would win. Its input is {}; group every input \
             by the fields the key is made of, in the key's order, or keep the store \
             in a bolt with parallelism 1. Checkpoint {n} and every later one are not \
             committed, and the topology stops (docs/state.md, \"Mistakes squall \
             refuses\")",
            self.store,
            self.owner,
            inputs_label(topology, c),
        )
    }
}

/// A bolt's inputs as people read them: `"split" by fields(word)`.
fn inputs_label(topology: &Topology, c: &crate::topology::Component) -> String {
    let labels: Vec<String> = c
        .inputs
        .iter()
        .map(|input| {
            let source = &topology.components[input.from];
            let decl = &source.outputs[input.stream as usize].decl;
            let fields: Vec<&str> = decl.fields.iter().map(|f| f.as_str()).collect();
            format!("{:?} by {}", source.name, input.grouping.label(&fields))
        })
        .collect();
    if labels.is_empty() {
        "none".into()
    } else {
        labels.join(", ")
    }
}

/// The spout tasks and the bolt tasks of `topology`.
fn task_sets(topology: &Topology) -> (Vec<u32>, Vec<u32>) {
    let (mut spouts, mut bolts) = (Vec::new(), Vec::new());
    for c in &topology.components {
        match c.kind {
            Kind::Spout => spouts.extend(c.tasks.clone()),
            Kind::Bolt => bolts.extend(c.tasks.clone()),
        }
    }
    (spouts, bolts)
}

/// The pending writes as the backend takes them, with their record and byte counts.
fn as_writes(pending: &Pending) -> (Vec<ScopeWrites>, u64, u64) {
    let (mut records, mut bytes) = (0u64, 0u64);
    let writes = pending
        .iter()
        .map(|(scope, entries)| ScopeWrites {
            scope: scope.as_str().into(),
            records: entries
                .iter()
                .map(|(k, v)| {
                    records += 1;
                    bytes += (k.len() + v.as_ref().map_or(0, Vec::len)) as u64;
                    StateRecord {
                        key: RVec::from(k.clone()),
                        value: v.clone().map(RVec::from).map_or(ROption::RNone, ROption::RSome),
                    }
                })
                .collect(),
        })
        .collect();
    (writes, records, bytes)
}

#[cfg(test)]
mod tests {
    use abi_stable::std_types::RVec;
    use squall_plugin_api::abi::StoreDelta;
    use squall_plugin_api::{StateEntry, Value};

    use super::*;

    /// The fixture topology (spout task 0, bolt tasks 1 and 2) and control
    /// queues whose receivers stay alive.
    struct Tasks {
        topology: Arc<Topology>,
        controls: Vec<Sender<Control>>,
        _receivers: Vec<Receiver<Control>>,
    }

    impl TaskDirectory for Tasks {
        fn current(&self) -> (Arc<Topology>, Vec<Sender<Control>>) {
            (self.topology.clone(), self.controls.clone())
        }
    }

    fn tasks() -> Tasks {
        let (controls, receivers) = (0..3).map(|_| crossbeam_channel::unbounded()).unzip();
        Tasks {
            topology: Arc::new(crate::topology::fixtures::topology()),
            controls,
            _receivers: receivers,
        }
    }

    fn spout(checkpoint: u64) -> Report {
        Report { checkpoint, task: 0, part: Part::Spout(Ok(None)) }
    }

    /// Bolt task `task`'s part: `word` = `count` in store `counts` (or nothing).
    fn bolt(checkpoint: u64, task: u32, change: Option<(&str, &str)>) -> Report {
        let deltas = change
            .map(|(word, count)| StoreDelta {
                store: "counts".into(),
                entries: vec![StateEntry {
                    key: vec![Value::from(word)].into(),
                    bytes: count.as_bytes().to_vec().into(),
                }]
                .into(),
                removed: RVec::new(),
            })
            .into_iter()
            .collect();
        Report { checkpoint, task, part: Part::Bolt(Ok(deltas)) }
    }

    fn committed(coordinator: &mut Coordinator, word: &str) -> Option<String> {
        let Backend::Memory(m) = &mut coordinator.backend else { unreachable!() };
        let key = codec::keyed(&[Value::from(word)]);
        m.load("b/counts")
            .into_iter()
            .find(|r| r.key.as_slice() == key.as_slice())
            .and_then(|r| r.value.into_option())
            .map(|v| String::from_utf8(v.into_vec()).unwrap())
    }

    #[test]
    fn changes_reported_for_an_abandoned_checkpoint_are_committed_with_the_next() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut backend = Backend::Memory(Default::default());
        backend.open("ns").unwrap();
        let mut c = Coordinator::new(
            backend,
            Duration::from_secs(3600),
            Duration::from_millis(50),
            rx,
            None,
            Arc::default(),
            Arc::default(),
        );
        let t = tasks();
        // Checkpoint 1: task 1 took its changes and reported them; task 2
        // never did, so 1 is abandoned.
        let (cow, moon) = (owned_by(0), owned_by(1));
        tx.send(spout(1)).unwrap();
        tx.send(bolt(1, 1, Some((&cow, "3")))).unwrap();
        assert!(!c.checkpoint(&t));
        // Checkpoint 2: task 2 reports 1 late, then everyone reports 2
        // (task 1 has nothing new: its changes went out with 1).
        tx.send(bolt(1, 2, Some((&moon, "1")))).unwrap();
        for r in [spout(2), bolt(2, 1, None), bolt(2, 2, None)] {
            tx.send(r).unwrap();
        }
        assert!(c.checkpoint(&t));
        assert_eq!(committed(&mut c, &cow).as_deref(), Some("3"), "reported in time for 1");
        assert_eq!(committed(&mut c, &moon).as_deref(), Some("1"), "reported late for 1");
    }

    /// A word that the fields grouping gives to task index `index` of 2.
    fn owned_by(index: usize) -> String {
        (0..)
            .map(|k| format!("w{k}"))
            .find(|w| key_index(std::iter::once(&Value::from(w.as_str())), 2) == index)
            .expect("some word")
    }

    fn coordinator(rx: Receiver<Report>) -> Coordinator {
        let mut backend = Backend::Memory(Default::default());
        backend.open("ns").unwrap();
        Coordinator::new(
            backend,
            Duration::from_secs(3600),
            Duration::from_millis(50),
            rx,
            None,
            Arc::default(),
            Arc::default(),
        )
    }

    #[test]
    fn a_key_written_by_a_task_that_does_not_own_it_is_refused_and_nothing_commits_after() {
        // Bolt "b" is fed by a shuffle grouping: both tasks count one word.
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut c = coordinator(rx);
        let t = tasks();
        let word = owned_by(0);
        for r in [spout(1), bolt(1, 1, Some((&word, "1"))), bolt(1, 2, Some((&word, "1")))] {
            tx.send(r).unwrap();
        }
        assert!(!c.checkpoint(&t), "refused");
        let refusal = c.refused.clone().expect("a refusal");
        assert_eq!(refusal.task.to_string(), "bolt \"b\" task 2");
        let cause = &refusal.cause;
        for part in [
            format!("store \"counts\": task index 1 wrote key {word}"),
            "gives to task index 0".into(),
            "Its input is \"s\" by shuffle".into(),
            "the topology stops".into(),
        ] {
            assert!(cause.contains(&part), "{part:?} not in {cause}");
        }
        assert_eq!(committed(&mut c, &word), None, "nothing committed");
        // Nothing commits from then on, not even the last checkpoint of the
        // stop: the refused task's changes are out of its stores.
        for r in [spout(2), bolt(2, 1, None), bolt(2, 2, None)] {
            tx.send(r).unwrap();
        }
        assert!(!c.checkpoint(&t));
        assert_eq!(committed(&mut c, &word), None);
    }

    #[test]
    fn a_bolt_whose_stores_cannot_be_read_stops_the_commits() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut c = coordinator(rx);
        let t = tasks();
        let err = Report {
            checkpoint: 1,
            task: 2,
            part: Part::Bolt(Err("store \"sums\", key b: cannot encode its value".into())),
        };
        for r in [spout(1), bolt(1, 1, Some((&owned_by(0), "1"))), err] {
            tx.send(r).unwrap();
        }
        assert!(!c.checkpoint(&t));
        let cause = c.refused.clone().expect("a refusal").cause;
        assert!(cause.contains("key b: cannot encode") && cause.contains("stops"), "{cause}");
        for r in [spout(2), bolt(2, 1, None), bolt(2, 2, None)] {
            tx.send(r).unwrap();
        }
        assert!(!c.checkpoint(&t), "no commit leaves the refused changes out");
    }
}
