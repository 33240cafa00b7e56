//! Transfer: routing emitted tuples to task queues, in batches, with Storm's
//! pending-emits overflow.
//!
//! Each executor owns one [`Transfer`]. An emitted tuple is routed by the
//! stream's groupings to target tasks and appended to that target's
//! outgoing batch. A full batch is sent with `try_send`. If the queue is full
//! — or anything is already pending, so that order is kept — the batch goes
//! to `pending`, which the executor loop retries first on every turn
//! (Storm's `ExecutorTransfer.tryTransferLocal` + `pendingEmits`). While
//! anything is pending, the loops stop producing (no `next_tuple`, no
//! consuming), so `pending` holds at most one turn's output: memory is
//! bounded by the queues, not by the speed difference of the stages.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use squall_plugin_api::rng::SplitMix64;
use squall_plugin_api::{StreamId, Value};

use crate::acker::ledger::acker_for;
use crate::acker::msg::{AckerInput, AckerMsg};
use crate::ids::{EdgeId, RootId, TaskId};
use crate::metrics::{LocalStats, StatField};
use crate::queue::batch::{Batch, QueueBytes};
use crate::topology::grouping::{BadIndex, Misroute, Targets};

/// Why an emit was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    /// The stream index is not one of the component's declared outputs.
    #[error("emit on undeclared stream #{0}")]
    UndeclaredStream(u32),
    /// `emit` on the default stream, which the component did not declare.
    #[error("emit on the default stream, which the component does not declare")]
    NoDefaultStream,
    /// The tuple has another number of values than the stream declares
    /// fields. Boxed, so the emit path's `Result` stays small.
    #[error("emit on stream \"{}\" with {} values, but it declares {} fields", .0.stream, .0.got, .0.declared)]
    Arity(Box<ArityMismatch>),
    /// `emit_direct` on a stream that is not direct, or the reverse.
    #[error("emit_direct on stream \"{0}\" which is not declared direct (or a plain emit on a direct stream)")]
    DirectMismatch(String),
    /// An `emit_many` whose values or message ids do not fit its tuple
    /// count. Boxed, so the emit path's `Result` stays small.
    #[error("emit_many on stream \"{}\" of {} tuples with {} values and {} message ids, but it declares {} fields (values must be {} × {}, ids none or {})", .0.stream, .0.count, .0.values, .0.ids, .0.declared, .0.count, .0.declared, .0.count)]
    Many(Box<ManyMismatch>),
    /// A custom grouping chose an index out of range (the tuple did not
    /// reach it) or an index twice (delivered once). Boxed, so the emit
    /// path's `Result` stays small.
    #[error("{}", .0)]
    Misrouted(Box<MisrouteDetail>),
}

/// What an [`EmitError::Misrouted`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MisrouteDetail {
    /// `alias::Name`.
    pub grouping: String,
    /// The stream's name.
    pub stream: String,
    /// The subscribing component.
    pub target: String,
    /// The first bad index.
    pub bad: BadIndex,
    /// Bad indexes of the emit (or `emit_many` call), each counted as an error.
    pub errors: u64,
}

impl std::fmt::Display for MisrouteDetail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (grouping, stream, target) = (&self.grouping, &self.stream, &self.target);
        let (index, tasks) = (self.bad.index, self.bad.tasks);
        if self.bad.out_of_range {
            write!(
                f,
                "custom grouping {grouping} of stream \"{stream}\" to \"{target}\" chose index \
                 {index}, out of range ({tasks} tasks): the tuple did not reach it, and its \
                 tree fails"
            )
        } else {
            write!(
                f,
                "custom grouping {grouping} of stream \"{stream}\" to \"{target}\" chose index \
                 {index} twice for one tuple: delivered once"
            )
        }
    }
}

/// What an [`EmitError::Many`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManyMismatch {
    /// The stream's name.
    pub stream: String,
    /// Fields the stream declares.
    pub declared: usize,
    /// Tuples the call announced.
    pub count: usize,
    /// Values it carried.
    pub values: usize,
    /// Message ids it carried.
    pub ids: usize,
}

/// What an [`EmitError::Arity`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArityMismatch {
    /// The stream's name.
    pub stream: String,
    /// Fields the stream declares.
    pub declared: usize,
    /// Values the emit carried.
    pub got: usize,
}

/// Builds the arity error, out of the emit path.
#[cold]
#[inline(never)]
fn arity_error(stream: &str, declared: usize, got: usize) -> EmitError {
    EmitError::Arity(Box::new(ArityMismatch { stream: stream.to_owned(), declared, got }))
}

/// Builds the `emit_many` shape error, out of the emit path.
#[cold]
#[inline(never)]
fn many_error(stream: &str, declared: usize, count: usize, values: usize, ids: usize) -> EmitError {
    EmitError::Many(Box::new(ManyMismatch {
        stream: stream.to_owned(),
        declared,
        count,
        values,
        ids,
    }))
}

pub use crate::queue::StreamRoutes;

/// Adds the encoded size of `values` to `batch.bytes` (byte budgets, on by
/// default: on every tuple, so inline, and [`Value::encoded_len`] reads
/// lengths only).
#[inline]
fn count_bytes(batch: &mut Batch, values: &[Value]) {
    batch.bytes += values.iter().map(|v| v.encoded_len() as u64).sum::<u64>();
}

/// Everything a [`Transfer`] is wired to.
#[derive(Debug)]
pub struct TransferWiring {
    /// Tuples per batch (`producer_batch_size`).
    pub batch_size: usize,
    /// Partial batches are flushed this often (`batch_flush_interval_millis`).
    pub flush_interval: Duration,
    /// The component's output streams with their routers, by stream index.
    pub streams: Vec<StreamRoutes>,
    /// The index of the stream called `default`, if declared.
    pub default_stream: Option<u32>,
    /// Queues of every task, indexed by task id (`None` for spouts).
    pub queues: Vec<Option<Sender<Batch>>>,
    /// The acker tasks' queues.
    pub ackers: Vec<Sender<AckerInput>>,
    /// Emptied batches handed back by consumers, reused before allocating.
    pub recycled: Option<Receiver<Batch>>,
    /// Count the encoded bytes of emitted values (a byte-rate throttle).
    pub count_bytes: bool,
    /// The byte budget of each task's receive queue, by task id (empty, or
    /// `None` for a task, when `receive_buffer_bytes` is off).
    pub queue_bytes: Vec<Option<std::sync::Arc<QueueBytes>>>,
    /// The task's tap point (`squall tap`).
    pub tap: std::sync::Arc<crate::tap::TapPoint>,
}

/// An executor's outgoing side.
#[derive(Debug)]
pub struct Transfer {
    task: TaskId,
    batch_size: usize,
    flush_interval: Duration,
    last_flush: Instant,
    streams: Vec<StreamRoutes>,
    default_stream: Option<u32>,
    /// Queues of every task, indexed by task id (`None` for spouts).
    queues: Vec<Option<Sender<Batch>>>,
    /// The batch being filled for each target task.
    outgoing: Vec<Option<Batch>>,
    /// Targets with a batch in `outgoing`, possibly with stale entries.
    active: Vec<u32>,
    pending: VecDeque<(u32, Batch)>,
    /// Scratch list of the current emit's targets.
    targets: Vec<u32>,
    /// What custom groupings got wrong since [`take_misroute`](Self::take_misroute).
    misroute: Misroute,
    ackers: Vec<Sender<AckerInput>>,
    acker_buffers: Vec<Vec<AckerMsg>>,
    /// This executor's random numbers (edge and root ids, Storm's
    /// `MessageId.generateId`): unpredictable enough that XOR collisions
    /// are negligible, not cryptographic.
    pub rng: SplitMix64,
    /// Count the encoded bytes of emitted values (only for a byte-rate throttle).
    count_bytes: bool,
    /// Encoded bytes emitted so far, when counting bytes (a byte-rate throttle).
    pub emitted_bytes: u64,
    /// Emptied batches handed back by consumers, reused before allocating.
    recycled: Option<Receiver<Batch>>,
    /// Byte budgets of the targets' queues (see [`QueueBytes`]).
    queue_bytes: Vec<Option<std::sync::Arc<QueueBytes>>>,
    /// True when any target has a byte budget: the per-tuple cost of the
    /// feature when it is off is this one predictable branch.
    budgeted: bool,
    /// The task's tap port: one relaxed load per emit while no tap is
    /// attached (see [`crate::tap`]).
    tap: crate::tap::TapPort,
    /// The output streams no component subscribes to, and whether the
    /// default stream is one of them (see [`Self::unwired`]).
    unwired: (Vec<u32>, bool),
}

/// The output streams of `streams` that no component subscribes to, and
/// whether the default stream (`default`) is one of them.
fn unwired_streams(streams: &[StreamRoutes], default: Option<u32>) -> (Vec<u32>, bool) {
    let unwired: Vec<u32> =
        (0..streams.len() as u32).filter(|&i| streams[i as usize].routers.is_empty()).collect();
    let default_unwired = default.is_some_and(|d| unwired.contains(&d));
    (unwired, default_unwired)
}

/// `v`'s elements in a buffer allocated by the calling thread (see
/// [`Transfer::rehome`]).
pub(crate) fn rehomed<T>(v: Vec<T>) -> Vec<T> {
    let mut out = Vec::with_capacity(v.len());
    out.extend(v);
    out
}

impl StreamRoutes {
    /// The one task every tuple of this stream goes to, when the stream has
    /// one subscriber whose grouping sends everything to a single task
    /// (shuffle-like or `all` over one task, `global`): then a run of tuples
    /// can be appended to one batch without routing each.
    #[inline]
    fn single_target(&self) -> Option<u32> {
        match self.routers.as_slice() {
            [router] => router.single_target(),
            _ => None,
        }
    }
}

impl Transfer {
    /// A transfer for `task`, wired as `wiring` says.
    pub fn new(task: TaskId, wiring: TransferWiring) -> Self {
        let task_count = wiring.queues.len();
        let unwired = unwired_streams(&wiring.streams, wiring.default_stream);
        Self {
            task,
            batch_size: wiring.batch_size.max(1),
            flush_interval: wiring.flush_interval,
            last_flush: Instant::now(),
            streams: wiring.streams,
            default_stream: wiring.default_stream,
            outgoing: (0..task_count).map(|_| None).collect(),
            queues: wiring.queues,
            active: Vec::new(),
            pending: VecDeque::new(),
            targets: Vec::new(),
            misroute: Misroute::default(),
            acker_buffers: wiring.ackers.iter().map(|_| Vec::new()).collect(),
            ackers: wiring.ackers,
            rng: SplitMix64::unpredictable(u64::from(task.0)),
            count_bytes: wiring.count_bytes,
            emitted_bytes: 0,
            recycled: wiring.recycled,
            budgeted: wiring.queue_bytes.iter().any(Option::is_some),
            queue_bytes: wiring.queue_bytes,
            tap: crate::tap::TapPort::new(wiring.tap),
            unwired,
        }
    }

    /// The output streams that go nowhere now: no component subscribes
    /// to them (a tap is the caller's to check), and whether the default
    /// stream is one of them. A contract 1.3 bolt is told per run, so it
    /// may skip building tuples no one would get.
    #[inline]
    pub fn unwired(&self) -> (&[u32], bool) {
        (&self.unwired.0, self.unwired.1)
    }

    /// Replaces the routes and the queues: a live reload added or replaced
    /// tasks downstream. Call it with no partial batch (after
    /// [`flush_all`](Self::flush_all)); pending batches stay pending for
    /// the tasks they were routed to, whose queues keep their slots (see
    /// [`TaskCore::rewire`](super::core::TaskCore::rewire)).
    pub fn rewire(
        &mut self,
        streams: Vec<StreamRoutes>,
        queues: Vec<Option<Sender<Batch>>>,
        queue_bytes: Vec<Option<std::sync::Arc<QueueBytes>>>,
    ) {
        self.unwired = unwired_streams(&streams, self.default_stream);
        self.streams = streams;
        self.queues = queues;
        if self.outgoing.len() < self.queues.len() {
            self.outgoing.resize_with(self.queues.len(), || None);
        }
        self.budgeted = queue_bytes.iter().any(Option::is_some);
        self.queue_bytes = queue_bytes;
        // The reloader built the new routes on its own thread.
        self.rehome();
    }

    /// Moves what the emit path writes on every tuple into memory that the
    /// calling thread allocates: the executor's thread calls it when it
    /// starts.
    ///
    /// The routers (each writes its round-robin position on every tuple)
    /// and the batches being filled (each writes its length) were allocated
    /// by the thread that built the topology, next to the other tasks'. Two
    /// tasks whose buffers share a cache line fight over it on every tuple,
    /// and whether they do depends on unrelated allocations. mimalloc
    /// serves each thread from its own pages, so a copy made here shares no
    /// line with another task's.
    pub fn rehome(&mut self) {
        self.outgoing = rehomed(std::mem::take(&mut self.outgoing));
        for routes in &mut self.streams {
            routes.routers = rehomed(std::mem::take(&mut routes.routers));
        }
        self.acker_buffers = rehomed(std::mem::take(&mut self.acker_buffers));
        // `targets` and `active` start empty: their first push, on this
        // thread, allocates them.
    }

    /// True when emitted bytes are counted (a byte-rate throttle).
    #[inline]
    pub fn counts_bytes(&self) -> bool {
        self.count_bytes
    }

    /// The task's tap port.
    #[inline(always)]
    pub fn tap(&self) -> &crate::tap::TapPort {
        &self.tap
    }

    /// While a tap is attached: true when this tuple on `side` must be
    /// offered to the task's taps (see [`crate::tap::TapPort::due`]).
    #[inline(always)]
    pub fn tap_due(&mut self, side: crate::tap::TapSide) -> bool {
        self.tap.due(side)
    }

    /// The task's id and tap port, to offer a tuple to (only while a tap
    /// is attached).
    pub fn tap_mut(&mut self) -> (u32, &mut crate::tap::TapPort) {
        (self.task.0, &mut self.tap)
    }

    /// The name of `stream` (as [`Self::stream_name`]), the task's id and
    /// its tap port, to offer an emitted tuple to.
    pub fn tap_outputs(&mut self, stream: u32) -> (&str, u32, &mut crate::tap::TapPort) {
        let name = self.streams.get(stream as usize).map_or("", |s| s.name.as_str());
        (name, self.task.0, &mut self.tap)
    }

    /// The name of stream `stream` (an index of the component's outputs).
    pub fn stream_name(&self, stream: u32) -> &str {
        self.streams.get(stream as usize).map_or("", |s| s.name.as_str())
    }

    /// The task this transfer sends for.
    pub fn task(&self) -> TaskId {
        self.task
    }

    /// Tuples per outgoing batch (`producer_batch_size`).
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// True when acker tasks exist.
    pub fn acking(&self) -> bool {
        !self.ackers.is_empty()
    }

    /// The index of `stream`, the declared default for [`StreamId::DEFAULT`].
    ///
    /// # Errors
    /// When the default is asked for and none is declared.
    #[inline(always)]
    fn stream_index(&self, stream: StreamId) -> Result<u32, EmitError> {
        // No `ok_or(error)?`: it builds the error, and drops it, on every call.
        if stream != StreamId::DEFAULT {
            Ok(stream.0)
        } else if let Some(default) = self.default_stream {
            Ok(default)
        } else {
            Err(EmitError::NoDefaultStream)
        }
    }

    /// Routes one tuple: fills the target list and returns how many targets.
    ///
    /// # Errors
    /// When the stream is undeclared or directness does not match.
    // Always inlined: its one caller is the emit path, where a call's
    // prologue and epilogue cost as much as the routing of a shuffle.
    #[inline(always)]
    pub fn route(
        &mut self,
        stream: StreamId,
        values: &[Value],
        direct: Option<u32>,
    ) -> Result<(u32, usize), EmitError> {
        let stream = self.stream_index(stream)?;
        let Some(routes) = self.streams.get_mut(stream as usize) else {
            return Err(EmitError::UndeclaredStream(stream));
        };
        if routes.direct != direct.is_some() {
            return Err(EmitError::DirectMismatch(routes.name.clone()));
        }
        if values.len() != routes.fields {
            return Err(arity_error(&routes.name, routes.fields, values.len()));
        }
        self.targets.clear();
        for router in &mut routes.routers {
            match router.route(values, direct) {
                Targets::One(t) => self.targets.push(t),
                Targets::Many(ts) => self.targets.extend_from_slice(ts),
                Targets::Nothing => {}
                Targets::Misrouted(ts, bad) => {
                    self.targets.extend_from_slice(ts);
                    self.misroute.add(bad);
                }
            }
        }
        Ok((stream, self.targets.len()))
    }

    /// What custom groupings got wrong since the last call (reset).
    #[inline(always)]
    pub fn take_misroute(&mut self) -> Misroute {
        std::mem::take(&mut self.misroute)
    }

    /// The error of a misrouted emit on `stream` carrying `errors` bad
    /// indexes: the first bad index a custom grouping of the stream chose.
    #[cold]
    #[inline(never)]
    pub fn misroute_error(&mut self, stream: u32, errors: u64) -> EmitError {
        let routes = &mut self.streams[stream as usize];
        let name = routes.name.clone();
        let detail = routes.routers.iter_mut().find_map(|r| {
            let (custom, bad) = r.take_bad_index()?;
            Some(MisrouteDetail {
                grouping: custom.name.clone(),
                stream: name.clone(),
                target: custom.target.clone(),
                bad,
                errors,
            })
        });
        EmitError::Misrouted(Box::new(detail.unwrap_or(MisrouteDetail {
            grouping: "?".into(),
            stream: name,
            target: "?".into(),
            bad: BadIndex { index: 0, tasks: 0, out_of_range: true },
            errors,
        })))
    }

    /// Checks an `emit_many` of `count` tuples carrying `values` values and
    /// `ids` message ids: the stream must be declared and not direct, the
    /// values `count` times its field count, the ids none or one per tuple.
    /// Returns the stream's index and its field count.
    ///
    /// # Errors
    /// When any rule is broken: the call then emits nothing.
    pub fn check_many(
        &self,
        stream: StreamId,
        count: usize,
        values: usize,
        ids: usize,
    ) -> Result<(u32, usize), EmitError> {
        let stream = self.stream_index(stream)?;
        let Some(routes) = self.streams.get(stream as usize) else {
            return Err(EmitError::UndeclaredStream(stream));
        };
        if routes.direct {
            return Err(EmitError::DirectMismatch(routes.name.clone()));
        }
        if count.checked_mul(routes.fields) != Some(values) || (ids != 0 && ids != count) {
            return Err(many_error(&routes.name, routes.fields, count, values, ids));
        }
        Ok((stream, routes.fields))
    }

    /// Routes one tuple of a stream already checked by
    /// [`check_many`](Self::check_many): fills the target list and returns
    /// how many targets.
    #[inline]
    pub fn route_checked(&mut self, stream: u32, values: &[Value]) -> usize {
        self.targets.clear();
        for router in &mut self.streams[stream as usize].routers {
            match router.route(values, None) {
                Targets::One(t) => self.targets.push(t),
                Targets::Many(ts) => self.targets.extend_from_slice(ts),
                Targets::Nothing => {}
                Targets::Misrouted(ts, bad) => {
                    self.targets.extend_from_slice(ts);
                    self.misroute.add(bad);
                }
            }
        }
        self.targets.len()
    }

    /// Appends `count` untracked tuples of `arity` values each (`values`
    /// back to back) on a stream checked by [`check_many`](Self::check_many).
    /// When the whole stream goes to one task, runs of tuples are appended
    /// to its batch at once, up to the batch size; otherwise each tuple is
    /// routed as by [`route`](Self::route).
    pub fn push_many(
        &mut self,
        stream: u32,
        arity: usize,
        count: usize,
        values: &[Value],
        stats: &mut LocalStats,
    ) {
        let routes = &self.streams[stream as usize];
        // A stream no one subscribes to: nothing to route (word count's
        // `(word, count)` tuples).
        if routes.routers.is_empty() {
            return;
        }
        let Some(target) = routes.single_target() else {
            for i in 0..count {
                let tuple = &values[i * arity..(i + 1) * arity];
                for t in 0..self.route_checked(stream, tuple) {
                    let target = self.targets[t];
                    self.push(target, stream, tuple, &[], stats);
                }
            }
            return;
        };
        let (budgeted, batch_size) = (self.budgeted, self.batch_size);
        let mut done = 0;
        while done < count {
            let batch = self.batch_for(target);
            let n = batch_size.saturating_sub(batch.len()).clamp(1, count - done);
            let run = &values[done * arity..(done + n) * arity];
            if budgeted {
                batch.push_many::<true>(stream, arity, n, run);
            } else {
                batch.push_many::<false>(stream, arity, n, run);
            }
            if batch.len() >= batch_size {
                self.send(target, stats);
            }
            done += n;
        }
    }

    /// `target`'s outgoing batch, taking a recycled or new one when it has none.
    #[inline]
    fn batch_for(&mut self, target: u32) -> &mut Batch {
        let slot = &mut self.outgoing[target as usize];
        match slot {
            Some(b) => b,
            None => {
                self.active.push(target);
                let batch = match self.recycled.as_ref().and_then(|r| r.try_recv().ok()) {
                    Some(batch) => batch,
                    None => Batch::with_capacity(self.task, self.batch_size),
                };
                slot.insert(batch)
            }
        }
    }

    /// The `i`th target of the last [`route`](Self::route).
    #[inline]
    pub fn target(&self, i: usize) -> u32 {
        self.targets[i]
    }

    /// Appends a routed tuple to `target`'s outgoing batch, sending the batch when full.
    #[inline(always)]
    pub fn push(
        &mut self,
        target: u32,
        stream: u32,
        values: &[Value],
        ids: &[(RootId, EdgeId)],
        stats: &mut LocalStats,
    ) {
        let (budgeted, batch_size) = (self.budgeted, self.batch_size);
        let batch = self.batch_for(target);
        batch.push(stream, values, ids);
        if budgeted {
            count_bytes(batch, values);
        }
        if batch.len() >= batch_size {
            self.send(target, stats);
        }
    }

    fn send(&mut self, target: u32, stats: &mut LocalStats) {
        let Some(batch) = self.outgoing[target as usize].take() else { return };
        if !self.pending.is_empty() {
            self.pending.push_back((target, batch));
            return;
        }
        if let Some(batch) = self.try_send(target, batch, stats) {
            self.pending.push_back((target, batch));
        }
    }

    /// Sends or gives the batch back when the queue is full.
    fn try_send(&mut self, target: u32, batch: Batch, stats: &mut LocalStats) -> Option<Batch> {
        let Some(queue) = &self.queues[target as usize] else { return None };
        let n = batch.len() as u64;
        let budget = if self.budgeted {
            self.queue_bytes.get(target as usize).and_then(Option::as_ref)
        } else {
            None
        };
        let bytes = batch.bytes;
        if budget.is_some_and(|b| !b.admit(bytes)) {
            return Some(batch);
        }
        match queue.try_send(batch) {
            Ok(()) => {
                stats.add(StatField::Transferred, n);
                None
            }
            Err(TrySendError::Full(batch)) => {
                if let Some(b) = budget {
                    b.release(bytes);
                }
                Some(batch)
            }
            // The consumer is gone: only at the end of shutdown.
            Err(TrySendError::Disconnected(_)) => None,
        }
    }

    /// Retries pending batches in order, stopping at the first that does not
    /// fit. Returns true when nothing is left pending.
    pub fn flush_pending(&mut self, stats: &mut LocalStats) -> bool {
        while let Some((target, batch)) = self.pending.pop_front() {
            if let Some(batch) = self.try_send(target, batch, stats) {
                self.pending.push_front((target, batch));
                return false;
            }
        }
        true
    }

    /// Blocks until the queue of the first pending batch has room, or
    /// `cancel` is ready, or for `timeout`; true when it waited on that
    /// queue (room came, the cancel, or the time passed), false when there
    /// was nothing to wait on: nothing
    /// pending, or the batch waits for its target's byte budget rather
    /// than a queue slot (a slot would be free at once, so the caller waits
    /// with its strategy instead). The consumer's receive wakes the waiter
    /// (crossbeam wakes a blocked sender when a slot frees), so a task
    /// under backpressure wakes once per slot made free instead of once per
    /// park.
    pub fn wait_for_room(&self, timeout: Duration, cancel: Option<&Receiver<()>>) -> bool {
        let Some((target, _)) = self.pending.front() else { return false };
        let Some(Some(queue)) = self.queues.get(*target as usize) else { return false };
        if !queue.is_full() {
            return false;
        }
        let mut select = crossbeam_channel::Select::new();
        select.send(queue);
        if let Some(cancel) = cancel {
            select.recv(cancel);
        }
        let _ = select.ready_timeout(timeout);
        true
    }

    /// Every task the current routes can send to, sorted, once each.
    pub fn targets(&self) -> Vec<u32> {
        let mut targets: Vec<u32> = self
            .streams
            .iter()
            .flat_map(|s| s.routers.iter())
            .flat_map(|r| r.tasks())
            .copied()
            .collect();
        targets.sort_unstable();
        targets.dedup();
        targets
    }

    /// True while a batch for one of `targets` (sorted) waits for room.
    /// Scans the pending batches: for a task taking new routes, not for
    /// the loop.
    pub fn pending_to(&self, targets: &[u32]) -> bool {
        self.pending.iter().any(|(t, _)| targets.binary_search(t).is_ok())
    }

    /// True while emits wait for room downstream.
    #[inline]
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// True when partial batches or acker messages wait to be sent.
    pub fn has_unsent(&self) -> bool {
        !self.active.is_empty() || self.acker_buffers.iter().any(|b| !b.is_empty())
    }

    /// Sends every partial batch and every buffered acker message.
    pub fn flush_all(&mut self, stats: &mut LocalStats) {
        for target in std::mem::take(&mut self.active) {
            self.send(target, stats);
        }
        self.flush_acker();
        self.last_flush = Instant::now();
    }

    /// Flushes when `batch_flush_interval_millis` has passed since the last
    /// flush (Storm's flush tuple). Reads the clock, so callers call it once
    /// per batch or every few dozen loop turns, not per tuple.
    pub fn flush_if_due(&mut self, now: Instant, stats: &mut LocalStats) {
        if !self.flush_interval.is_zero()
            && now.duration_since(self.last_flush) >= self.flush_interval
        {
            self.flush_all(stats);
        }
    }

    /// Sends everything batched, then the barrier of checkpoint `checkpoint`
    /// to every task this one feeds, behind it (in order with whatever is
    /// still pending for a full queue).
    pub fn barrier(&mut self, checkpoint: u64, stats: &mut LocalStats) {
        self.flush_all(stats);
        for target in self.targets() {
            let batch = Batch::barrier(self.task, checkpoint);
            if !self.pending.is_empty() {
                self.pending.push_back((target, batch));
            } else if let Some(batch) = self.try_send(target, batch, stats) {
                self.pending.push_back((target, batch));
            }
        }
    }

    /// Queues a message for the acker that owns `root`.
    #[inline]
    pub fn to_acker(&mut self, root: RootId, msg: AckerMsg) {
        let i = acker_for(root, self.ackers.len());
        let buffer = &mut self.acker_buffers[i];
        buffer.push(msg);
        if buffer.len() >= self.batch_size {
            let msgs = std::mem::take(buffer);
            let _ = self.ackers[i].send(AckerInput::Msgs(msgs));
        }
    }

    /// Sends every buffered acker message.
    pub fn flush_acker(&mut self) {
        for (buffer, acker) in self.acker_buffers.iter_mut().zip(&self.ackers) {
            if !buffer.is_empty() {
                let _ = acker.send(AckerInput::Msgs(std::mem::take(buffer)));
            }
        }
    }
}
