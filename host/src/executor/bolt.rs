//! The bolt loop, as Storm 2.x's `BoltExecutor` runs it (seed 000).
//!
//! # State machine (one turn)
//! 1. **Pending emits first.** Retry batches that found a full queue. If
//!    any is still pending, wait with the backpressure strategy and start
//!    the next turn without consuming: the stall propagates upstream as this
//!    bolt's own queue fills.
//! 2. **Control queue.** Timeout ticks (rotate open inputs), tick tuples
//!    (executed on `__tick` from `__system`) and the bolt's own wakes
//!    (`woken`, contract 1.3).
//! 3. **Consume.** Execute tuples from the receive queue, batch after batch,
//!    and stop as soon as emits become pending — even in the middle of a
//!    batch, whose rest is kept for the next turn.
//! 4. **Wait.** Consumed nothing → flush partial batches and wait with the
//!    bolt strategy; otherwise reset the bolt counter.
//!
//! The loop ends on `Stopping`; the runtime only stops bolts once every
//! queue is drained (or the drain timed out). Then `cleanup` runs.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Select, Sender, TryRecvError};
use squall_plugin_api::abi::{TaskContext, WakerBox};
use squall_plugin_api::{
    Anchor, InputStream, PluginError, RunView, State, Tuple, SYSTEM_COMPONENT, TICK_STREAM,
};

use super::batch::{Batch, QueueBytes};
use super::core::TaskCore;
use super::output::{HostOutput, Side};
use super::spout::ThrottleUnit;
use super::swap::{Action, RetireAction, RetireMachine, SwapMachine, Verdict};
use super::tracking::InputTracker;
use super::transfer::EmitError;
use super::wake::{bolt_waker, take_wake};
use super::{count_emit_error, count_error};
use super::{Idle, Step};
use crate::control::{BoltSwap, Control, ReloadError, Retire, RunError, RunState, Start, SwapDone};
use crate::ids::TaskId;
use crate::metrics::{LocalHistogram, LocalStats, StatField};
use crate::plugin::{BoltObj, Factory, Instance};
use crate::throttle::Throttler;
use crate::wait::progressive::Level;
use crate::wait::WaitStrategy;

mod windowed;
pub use windowed::WindowState;

/// How long an idle bolt blocks on its queues before a housekeeping turn.
/// A tuple, a tick or any control message ends the wait, and so does a
/// change of run state ([`Control::Wake`]), so the turn finds nothing to do:
/// it only bounds how long a missed wake could go unnoticed. It is long
/// because every timed wake-up costs CPU an idle topology would not spend
/// otherwise.
pub(super) const DEEP_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

/// The longest a bolt executes a backlog before a housekeeping turn
/// (publishing stats, seeing the run state).
const HOUSEKEEPING: std::time::Duration = std::time::Duration::from_millis(5);

/// The tuples a contract 1.3 bolt gets in its first `execute_batch` call:
/// the per-tuple loop looks at its clock every 64 tuples, and a run ends
/// where it would look. Later runs follow [`next_run_len`].
const RUN: usize = 64;

/// The most tuples one run holds (a run never spans queue batches either).
const RUN_MAX: usize = 1024;

/// The length of the next run, from the last run's length and how long it
/// took. The loop looks at its clock after each run, so a run must stay
/// well inside [`HOUSEKEEPING`] for ticks and control messages to wait no
/// longer than they did with runs of 64: a run that took under a
/// sixteenth of it doubles (fewer calls and clock reads for a fast bolt),
/// one that took over a quarter of it halves (a slow bolt sees its
/// control queue sooner than every 64 tuples).
#[inline]
fn next_run_len(len: usize, took: std::time::Duration) -> usize {
    if took * 16 < HOUSEKEEPING {
        (len * 2).min(RUN_MAX)
    } else if took * 4 > HOUSEKEEPING {
        (len / 2).max(1)
    } else {
        len
    }
}

pub use crate::queue::{SourceComponent, SourceTable};

/// Everything a bolt task owns.
pub struct BoltExecutor {
    core: TaskCore,
    bolt: BoltObj,
    auto_ack: bool,
    inputs: InputTracker,
    receive: Receiver<Batch>,
    sources: Arc<SourceTable>,
    edge_throttle: Vec<Vec<Option<usize>>>,
    throttles: Vec<(Throttler, ThrottleUnit)>,
    recycle: Vec<Sender<Batch>>,
    queue_bytes: Option<Arc<QueueBytes>>,
    /// A windowed bolt's buffer and triggers (`None`: an ordinary bolt).
    window: Option<Box<WindowState>>,
    /// How a task a live reload started begins (`None`: at topology start).
    start: Option<Start>,
    /// Set when a live reload retires the task: it leaves once its queue is empty.
    retiring: Option<Retire>,
    /// A live swap under way (cold: boxed).
    swap: Option<Box<Swapping>>,
    /// The tasks that feed this one: a checkpoint's barrier must come from
    /// each before the stores are read (durable state).
    upstream: Vec<u32>,
    /// A checkpoint whose barrier came from some of `upstream` (cold: boxed).
    align: Option<Box<Align>>,
    /// Batches held back during an alignment, executed before the queue.
    released: std::collections::VecDeque<Batch>,
    /// Barriers of checkpoints up to this one are stale (done or abandoned).
    settled: u64,
    /// The buffer a run's anchors are gathered in (contract 1.3 bolts),
    /// kept empty between runs.
    anchors: Vec<Anchor>,
    /// The length of the next run (contract 1.3 bolts; [`next_run_len`]).
    run_len: usize,
    /// The bolt's wake handle and its pending flag (see
    /// [`BoltExecutor::woken_by`]); none in the loop tests.
    waker: Option<(WakerBox, Arc<AtomicBool>)>,
}

/// A checkpoint barrier that has come from some of the input tasks.
struct Align {
    checkpoint: u64,
    /// The input tasks whose barrier came.
    seen: Vec<u32>,
    /// What they sent after it, in order.
    held: std::collections::VecDeque<Batch>,
}

/// A bolt's live swap: the machine, and what the executor holds for it.
struct Swapping {
    machine: SwapMachine,
    /// The new instance: built, then prepared (once the machine is held).
    new: Option<BoltObj>,
    /// While the new instance is prepared on its own thread: where it
    /// comes back with the outcome ([`prepare_off_thread`]).
    preparing: Option<Receiver<Prepared>>,
    factory: Factory,
    config: String,
    /// Taken when the take-over's outcome is reported.
    ready: Option<Sender<(u32, Result<(), ReloadError>)>>,
    done: Sender<SwapDone>,
    /// The state handed to the new instance at the take-over: at the
    /// commit, a bolt whose state differs from it (it executed tuples or
    /// ticks meanwhile) hands its current state to a fresh instance.
    saved: Option<State>,
    /// How long the task executed nothing because of the swap.
    paused: std::time::Duration,
}

/// A bolt task's inputs and their settings.
#[derive(Debug)]
pub struct BoltInputs {
    /// A basic bolt: anchored and acked by the host.
    pub auto_ack: bool,
    /// Receive queue.
    pub receive: Receiver<Batch>,
    /// Stream names and fields of every source.
    pub sources: Arc<SourceTable>,
    /// Per-edge throttles: `[component][stream]` → index into `throttles`.
    pub edge_throttle: Vec<Vec<Option<usize>>>,
    /// The throttles of this bolt's input edges.
    pub throttles: Vec<(Throttler, ThrottleUnit)>,
    /// Where to hand emptied batches back to their producer, by task id.
    pub recycle: Vec<Sender<Batch>>,
    /// The byte budget of the receive queue (`receive_buffer_bytes`).
    pub queue_bytes: Option<Arc<QueueBytes>>,
    /// A windowed bolt's window state.
    pub window: Option<Box<WindowState>>,
    /// The task ids that send to this task (checkpoint barriers come from each).
    pub upstream: Vec<u32>,
}

impl BoltExecutor {
    /// A bolt task running `bolt`.
    pub fn new(core: TaskCore, bolt: BoltObj, inputs: BoltInputs) -> Self {
        Self {
            core,
            bolt,
            auto_ack: inputs.auto_ack,
            inputs: InputTracker::new(),
            receive: inputs.receive,
            sources: inputs.sources,
            edge_throttle: inputs.edge_throttle,
            throttles: inputs.throttles,
            recycle: inputs.recycle,
            queue_bytes: inputs.queue_bytes,
            window: inputs.window,
            start: None,
            retiring: None,
            swap: None,
            upstream: inputs.upstream,
            align: None,
            released: std::collections::VecDeque::new(),
            settled: 0,
            anchors: Vec::new(),
            run_len: RUN,
            waker: None,
        }
    }

    /// Gives the bolt a wake handle that sends [`Control::Woken`] on
    /// `control`, the sending end of its own control queue (contract 1.3
    /// bolts take it before `prepare`).
    #[must_use]
    pub fn woken_by(mut self, control: Sender<Control>) -> Self {
        self.waker = Some(bolt_waker(control));
        self
    }

    /// A task started by a live reload begins as `start` says.
    #[must_use]
    pub fn starting(mut self, start: Start) -> Self {
        self.start = Some(start);
        self
    }

    /// The task's context.
    pub fn context(&self) -> &TaskContext {
        &self.core.context
    }
}

impl std::fmt::Debug for BoltExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoltExecutor").field("context", &self.core.context).finish_non_exhaustive()
    }
}

struct Turn {
    stats: LocalStats,
    emit_error: Option<EmitError>,
    current: Option<(Batch, usize)>,
    /// Execute latency (µs): one sample per consumed run, its mean.
    histogram: LocalHistogram,
}

/// A bolt task's loop state between turns: the turn's counters and the
/// wait counters (see [`BoltExecutor::step`]).
pub struct BoltLoop {
    turn: Turn,
    name: String,
    bolt_counter: u32,
    bp_counter: u32,
}

impl std::fmt::Debug for BoltLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoltLoop").field("name", &self.name).finish_non_exhaustive()
    }
}

impl BoltExecutor {
    /// Runs the task to the end.
    pub fn run(mut self) {
        let mut lp = self.enter();
        if self.begin() {
            while self.step::<true>(&mut lp) != Step::Stop {}
        }
        self.finish(&mut lp.turn, &lp.name);
    }

    /// Takes the task onto the calling thread: what the loop writes on
    /// every tuple moves into its memory, and plugin calls from it are
    /// attributed to this task.
    pub(super) fn enter(&mut self) -> BoltLoop {
        self.core.transfer.rehome();
        self.inputs.rehome();
        crate::plugin::services::enter_task(
            &self.core.name.component,
            self.core.name.task.0,
            self.core.shared.clone(),
        );
        BoltLoop {
            turn: Turn {
                stats: LocalStats::default(),
                emit_error: None,
                current: None,
                histogram: LocalHistogram::default(),
            },
            name: self.core.label.clone(),
            bolt_counter: 0,
            bp_counter: 0,
        }
    }

    /// Ends the task: its last commit notices, `cleanup`, its last stats.
    pub(super) fn end(&mut self, lp: &mut BoltLoop) {
        self.finish(&mut lp.turn, &lp.name);
    }

    /// One turn of the loop, in the module doc's order.
    ///
    /// The hot loop: receive, execute, wait, kept in one function (as
    /// tokio's schedulers keep theirs) so that the common turn is a few
    /// compares and the cold paths are calls. `ALONE`: the task has its
    /// thread to itself and waits here; otherwise (a chain, see
    /// [`super::chain`]) it returns what it would wait for, and the chain
    /// waits for all its tasks at once.
    #[inline(always)]
    pub(super) fn step<const ALONE: bool>(&mut self, lp: &mut BoltLoop) -> Step {
        let BoltLoop { turn, name, bolt_counter, bp_counter } = lp;
        let name = name.as_str();
        if self.core.run.state() == RunState::Stopping {
            return Step::Stop;
        }
        if self.core.rewiring.is_some() {
            self.core.advance_rewire();
        }
        if self.retiring.is_some() && self.leaves(turn) {
            return Step::Stop;
        }
        // 1. pending emits first
        if !self.core.transfer.flush_pending(&mut turn.stats) {
            self.publish(turn);
            if ALONE {
                let started = Instant::now();
                *bp_counter = self.core.backpressure_idle(*bp_counter);
                turn.stats.add(StatField::BackpressureNanos, started.elapsed().as_nanos() as u64);
            }
            return Step::Blocked;
        }
        *bp_counter = 0;
        // 2. control
        let ticks = self.drain_control(turn, name);
        if self.swap.is_some() {
            self.advance_swap();
        }
        // 3. consume
        let consumed = self.consume(turn, name);
        if self.window.is_some() {
            self.run_windows(turn, name);
        }
        // 4. wait
        if consumed == 0 && ticks == 0 {
            self.core.transfer.flush_all(&mut turn.stats);
            self.publish(turn);
            // A rewire whose last batches just left is done before a long wait.
            if self.core.rewiring.is_some() {
                self.core.advance_rewire();
            }
            if ALONE {
                *bolt_counter = self.idle(*bolt_counter);
            }
            Step::Idle(Idle::Queues)
        } else {
            *bolt_counter = 0;
            self.core.transfer.flush_if_due(Instant::now(), &mut turn.stats);
            self.publish(turn);
            Step::Busy
        }
    }

    /// Adds the time a chain spent in its backpressure wait for this task.
    pub(super) fn blocked_for(&self, lp: &mut BoltLoop, waited: std::time::Duration) {
        lp.turn.stats.add(StatField::BackpressureNanos, waited.as_nanos() as u64);
    }

    /// The task's core (its queues and wait strategies), for a chain's wait.
    pub(super) fn core(&self) -> &TaskCore {
        &self.core
    }

    /// The task's core, to rewire it (the loop tests).
    #[cfg(test)]
    pub(super) fn core_mut(&mut self) -> &mut TaskCore {
        &mut self.core
    }

    /// The backpressure wait of a chain whose task this is.
    pub(super) fn backpressure_wait(&mut self, counter: u32) -> u32 {
        self.core.backpressure_idle(counter)
    }

    /// The bolt wait strategy's own wait (a strategy other than
    /// progressive, which waits on the queues instead).
    pub(super) fn bolt_wait(&mut self, counter: u32) -> u32 {
        self.core.wait.idle(counter, &self.core.run.canceler)
    }

    /// The receive queue, for a chain's wait.
    pub(super) fn receive(&self) -> &Receiver<Batch> {
        &self.receive
    }

    /// Prepares the instance (a resized task first takes over its keys'
    /// state); false when the task must not run. A failure at topology start,
    /// or in a resized task, fails the run; a failure of a task a reload
    /// added is reported to the reloader, which rolls back.
    pub(super) fn begin(&mut self) -> bool {
        let start = self.start.take();
        let result = match &start {
            Some(Start::Resized { state, limit, .. }) => {
                let state = state.recv_timeout(*limit).map_err(|_| {
                    ("take its state", format!("no state arrived within {} s", limit.as_secs()))
                });
                state
                    .and_then(|s| self.take_state(s).map_err(|e| ("restore_state", e)))
                    .and_then(|()| self.prepare().map_err(|e| ("prepare", e)))
            }
            _ => self.prepare().map_err(|e| ("prepare", e)),
        };
        let as_reload = |(call, cause): (&'static str, String)| ReloadError::Task {
            task: self.core.name.clone(),
            call,
            cause,
        };
        let task = self.core.name.task.0;
        match start {
            Some(Start::Added { prepared }) => {
                let ok = result.is_ok();
                let _ = prepared.send((task, result.map_err(as_reload)));
                ok
            }
            Some(Start::Resized { prepared, .. }) => {
                let _ = prepared.send((task, result.clone().map_err(as_reload)));
                result
                    .map_err(|(call, cause)| {
                        self.core.fail(|task| RunError::Lifecycle { task, call, cause });
                    })
                    .is_ok()
            }
            None => result
                .map_err(|(call, cause)| {
                    self.core.fail(|task| RunError::Lifecycle { task, call, cause });
                })
                .is_ok(),
        }
    }

    // String: the cause becomes `RunError::Lifecycle`'s text, as a plugin's message does.
    fn prepare(&mut self) -> Result<(), String> {
        let waker = self.waker.as_ref().map(|(w, _)| w);
        self.bolt
            .prepare(&self.core.context, &self.core.ext, waker)
            .into_result()
            .map_err(|e| e.to_string())
    }

    /// Restores the state the retired tasks held for this task's keys.
    // String: the cause becomes `RunError::Lifecycle`'s text (see `prepare`).
    fn take_state(&mut self, state: Option<State>) -> Result<(), String> {
        let takes_state = self.bolt.takes_state();
        self.core.hand_state(state, takes_state, |s| self.bolt.restore_state(s))
    }

    /// A retiring task has left when nothing is queued, nothing is half
    /// executed and nothing waits to be sent (no upstream routes to it now).
    fn left(&self, turn: &Turn) -> bool {
        self.receive.is_empty()
            && self.released.is_empty()
            && turn.current.is_none()
            && !self.core.transfer.has_pending()
    }

    /// A retiring task's turn ([`RetireMachine`]): true once it has left,
    /// its state handed over as [`Retire`] asks.
    #[cold]
    fn leaves(&mut self, turn: &Turn) -> bool {
        let Some(retire) = &self.retiring else { return false };
        let machine = RetireMachine::new(retire.state.is_some());
        match machine.poll(self.left(turn), self.core.rewiring.is_some()) {
            RetireAction::Run => false,
            RetireAction::Leave { hand_state } => {
                let to = self.retiring.take().and_then(|r| r.state);
                if let (true, Some(to)) = (hand_state, to) {
                    let state = match self.bolt.save_state().into_result() {
                        Ok(state) => state.into_option(),
                        Err(e) => {
                            tracing::warn!("{}: save_state while retiring: {e}", self.core.label);
                            None
                        }
                    };
                    let _ = to.send((self.core.name.task.0, state));
                }
                true
            }
        }
    }

    /// The bolt wait. At progressive level 3 a bolt blocks on its receive
    /// and control queues instead of sleeping: a tuple or a tick wakes it at
    /// once, and an idle bolt wakes only for housekeeping (see the wait
    /// module's deliberate differences).
    fn idle(&mut self, counter: u32) -> u32 {
        if let WaitStrategy::Progressive(p) = &self.core.wait {
            // The first idle turn after work polls the queues for a while: a
            // tuple that follows soon is taken without a futex wake-up.
            if counter == 0 && !p.spin.is_zero() {
                let (receive, control) = (&self.receive, &self.core.control);
                if crate::wait::spin_until(p.spin, || !receive.is_empty() || !control.is_empty()) {
                    return 0;
                }
            }
            let (level, next) = p.level(counter);
            let timeout = match level {
                Level::Spin => return p.idle(counter, &self.core.run.canceler),
                // Level 2: wait for a tuple for as long as a 1 ns park really
                // sleeps under timer slack, but wake as soon as one arrives.
                Level::Park => crate::wait::PARK_WAIT,
                Level::Sleep => DEEP_IDLE,
            };
            // A windowed bolt wakes for its next window's end.
            let timeout = match self.window.as_ref().and_then(|w| w.until_deadline()) {
                Some(until) => timeout.min(until),
                None => timeout,
            };
            let mut select = Select::new();
            select.recv(&self.receive);
            select.recv(&self.core.control);
            let _ = select.ready_timeout(timeout);
            return next;
        }
        self.bolt_wait(counter)
    }

    /// Executes queued tuples until the queue is empty or emits are pending.
    /// A windowed bolt buffers them instead; the choice is made once per turn.
    fn consume(&mut self, turn: &mut Turn, name: &str) -> u64 {
        if self.window.is_some() {
            self.consume_with::<true>(turn, name)
        } else {
            self.consume_with::<false>(turn, name)
        }
    }

    #[inline(always)]
    fn consume_with<const WINDOWED: bool>(&mut self, turn: &mut Turn, name: &str) -> u64 {
        let started = Instant::now();
        // When the last run ended (contract 1.3 bolts).
        let mut last = started;
        let sources = self.sources.clone();
        let mut consumed = 0;
        let mut due = false;
        loop {
            let (batch, mut pos) = match turn.current.take() {
                Some(current) => current,
                None => {
                    let batch = match self.released.pop_front() {
                        Some(batch) => batch,
                        None => match self.receive.try_recv() {
                            Ok(batch) => {
                                turn.stats.add(StatField::Received, batch.len() as u64);
                                if let Some(budget) = &self.queue_bytes {
                                    budget.release(batch.bytes);
                                }
                                batch
                            }
                            Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                        },
                    };
                    // One predictable branch per batch when no checkpoint runs.
                    if batch.barrier != 0 || self.align.is_some() {
                        match self.checkpoint_gate(turn, name, batch) {
                            Some(batch) => (batch, 0),
                            None => continue,
                        }
                    } else {
                        (batch, 0)
                    }
                }
            };
            let component = sources.task_component[batch.source_task.0 as usize] as usize;
            let (component_name, streams) = &sources.components[component];
            let mut starts = batch.starts(pos);
            // One relaxed load per batch while no tap is attached.
            let tapped = self.core.transfer.tap().attached();
            // A contract 1.3 bolt gets runs of at most `run_len` tuples,
            // and the loop looks at its clock and its pending emits after
            // each run, as it does every 64 tuples below.
            let batched = !WINDOWED && self.bolt.batches();
            while batched && pos < batch.len() {
                let end = (pos + self.run_len).min(batch.len());
                let run = (&batch, pos..end, starts);
                let from = (component, component_name.as_str(), streams.as_slice());
                let (executed, next) = self.execute_run(turn, name, run, from, tapped);
                (pos, starts) = (end, next);
                turn.stats.add(StatField::Executed, executed);
                consumed += executed;
                let now = Instant::now();
                // A run cut short by its batch's end says little of a full one.
                if executed as usize == self.run_len || now - last >= HOUSEKEEPING / 16 {
                    self.run_len = next_run_len(self.run_len, now - last);
                }
                last = now;
                if self.core.transfer.has_pending() {
                    break;
                }
                if now - started >= HOUSEKEEPING {
                    due = true;
                    break;
                }
            }
            while !batched && pos < batch.len() {
                let ((stream, values, ids), next) = batch.tuple_at(pos, starts);
                starts = next;
                pos += 1;
                if tapped && self.core.transfer.tap_due(crate::tap::TapSide::Inputs) {
                    let s = &streams[stream as usize];
                    let from = (component_name.as_str(), batch.source_task.0);
                    let stream = (s.name.as_str(), s.fields.as_slice());
                    tap_input(&mut self.core.transfer, from, stream, values, ids);
                }
                if !self.throttles.is_empty() {
                    self.throttle_edge(turn, component, stream, values);
                }
                if WINDOWED {
                    let from = (component as u32, stream, batch.source_task.0);
                    self.window_tuple(turn, name, from, values, ids);
                } else {
                    let s = &streams[stream as usize];
                    let anchor = self.inputs.begin(ids);
                    let tuple = Tuple::new(
                        values,
                        &s.fields,
                        component_name,
                        &s.name,
                        batch.source_task.0,
                        anchor,
                    );
                    self.execute(turn, name, &tuple);
                }
                turn.stats.add(StatField::Executed, 1);
                consumed += 1;
                if self.core.transfer.has_pending() {
                    break;
                }
                // A slow bolt with a backlog still publishes its stats and
                // sees the run state every few milliseconds (one clock read
                // per 64 tuples).
                if consumed % 64 == 0 && started.elapsed() >= HOUSEKEEPING {
                    due = true;
                    break;
                }
            }
            let stop = due || self.core.transfer.has_pending();
            if pos < batch.len() {
                turn.current = Some((batch, pos));
            } else {
                self.recycle(batch);
            }
            if stop {
                break;
            }
        }
        if consumed == 0 {
            return 0;
        }
        let busy = started.elapsed().as_nanos() as u64;
        turn.stats.add(StatField::BusyNanos, busy);
        turn.histogram.record(busy / consumed / 1000);
        consumed
    }

    /// A batch met while a checkpoint runs, or a barrier: returns the batch
    /// when it is to be executed now. A barrier is recorded (and, once it
    /// has come from every input task, the stores are read and reported and
    /// the barrier forwarded); a batch from an input task whose barrier came
    /// is held back until then.
    #[cold]
    fn checkpoint_gate(&mut self, turn: &mut Turn, name: &str, batch: Batch) -> Option<Batch> {
        let source = batch.source_task.0;
        if batch.barrier == 0 {
            let align = self.align.as_mut()?;
            if align.seen.contains(&source) {
                align.held.push_back(batch);
                return None;
            }
            return Some(batch);
        }
        let checkpoint = batch.barrier;
        if checkpoint <= self.settled {
            return None; // a barrier of an abandoned checkpoint
        }
        if self.align.as_ref().is_some_and(|a| a.checkpoint != checkpoint) {
            // A newer checkpoint began: the older one was abandoned (its
            // abort is still on its way).
            let older = self.align.as_ref().map_or(0, |a| a.checkpoint);
            self.abandon(older);
        }
        let align = self.align.get_or_insert_with(|| {
            Box::new(Align { checkpoint, seen: Vec::new(), held: Default::default() })
        });
        if !align.seen.contains(&source) {
            align.seen.push(source);
        }
        if self.upstream.iter().all(|t| align.seen.contains(t)) {
            self.complete_checkpoint(turn, name, checkpoint);
        }
        None
    }

    /// The barrier of `checkpoint` came from every input task: the stores
    /// (and the window's changes) are read and reported, the barrier goes
    /// downstream, and what was held back is released.
    #[cold]
    fn complete_checkpoint(&mut self, turn: &mut Turn, name: &str, checkpoint: u64) {
        let align = self.align.take().expect("aligning");
        self.settled = checkpoint;
        let part = match self.bolt.checkpoint(checkpoint).into_result() {
            Ok(deltas) => {
                let mut deltas = deltas.into_vec();
                let sources = &*self.sources;
                if let Some(delta) = self.window.as_mut().and_then(|w| w.checkpoint_delta(sources))
                {
                    deltas.push(delta);
                }
                Ok(deltas)
            }
            Err(e) => {
                let e = format!("checkpoint: {e}");
                count_error(&mut turn.stats, &self.core.shared, name, &e);
                Err(e)
            }
        };
        self.core.report(checkpoint, crate::state::Part::Bolt(part));
        self.core.transfer.barrier(checkpoint, &mut turn.stats);
        // What was held back goes before anything still queued.
        for held in align.held.into_iter().rev() {
            self.released.push_front(held);
        }
    }

    /// Stops aligning on `checkpoint` (abandoned): what was held back is
    /// executed, and its late barriers are ignored.
    #[cold]
    fn abandon(&mut self, checkpoint: u64) {
        self.settled = self.settled.max(checkpoint);
        if self.align.as_ref().is_some_and(|a| a.checkpoint <= checkpoint) {
            let align = self.align.take().expect("aligning");
            for held in align.held.into_iter().rev() {
                self.released.push_front(held);
            }
        }
    }

    /// Hands an executed batch back to its producer, so its buffers are
    /// reused instead of freed here and allocated (and page-faulted) there.
    fn recycle(&self, mut batch: Batch) {
        let source = batch.source_task.0 as usize;
        batch.clear();
        if let Some(back) = self.recycle.get(source) {
            let _ = back.try_send(batch);
        }
    }

    fn throttle_edge(
        &mut self,
        turn: &mut Turn,
        component: usize,
        stream: u32,
        values: &[squall_plugin_api::Value],
    ) {
        let Some(Some(i)) = self.edge_throttle.get(component).and_then(|s| s.get(stream as usize))
        else {
            return;
        };
        let (throttler, unit) = &mut self.throttles[*i];
        let n = match unit {
            ThrottleUnit::Tuples => 1,
            ThrottleUnit::Bytes => values.iter().map(|v| v.encoded_len() as u64).sum(),
        };
        // The wait may be long: publish first, so the stats show what was
        // executed up to it (only throttled edges pay for this).
        self.core.shared.publish(&turn.stats);
        let outcome = self.core.run.throttle(throttler, n);
        turn.stats.add(StatField::ThrottleNanos, outcome.waited.as_nanos() as u64);
    }

    /// Executes the tuples `range` of a queue batch (the first at offsets
    /// `starts`) through the bolt's batch entry point (contract 1.3): the
    /// inputs are registered as open and handed over in one call, which
    /// anchors each emit and acks or fails each input itself (a basic
    /// bolt's inputs that succeeded are acked here). On an error or a panic,
    /// the input the bolt was executing fails, as one call per tuple would
    /// fail it, and the inputs after it go to the next call (to the
    /// restarted instance after a panic). Returns the number of inputs
    /// executed, and the offsets of the tuple after the range.
    fn execute_run(
        &mut self,
        turn: &mut Turn,
        name: &str,
        (batch, range, starts): (&Batch, std::ops::Range<usize>, (usize, usize)),
        (component, component_name, streams): (usize, &str, &[InputStream]),
        tapped: bool,
    ) -> (u64, (usize, usize)) {
        // The anchors' buffer is kept between runs (empty between them).
        let mut anchors = std::mem::take(&mut self.anchors);
        if self.auto_ack {
            self.inputs.begin_run();
        }
        let source = batch.source_task.0;
        // Nothing tracked in the whole batch (a topology without ackers),
        // no tap and no throttled edge: the run goes over as it lies in the
        // batch, with no anchors and no work per input.
        if batch.ids.is_empty() && !tapped && self.throttles.is_empty() {
            if !self.auto_ack {
                // What `open_input` does for an untracked input.
                self.inputs.open_input(&[]);
            }
        } else {
            let mut at = starts;
            for pos in range.clone() {
                let ((stream, values, ids), next) = batch.tuple_at(pos, at);
                at = next;
                if tapped && self.core.transfer.tap_due(crate::tap::TapSide::Inputs) {
                    let s = &streams[stream as usize];
                    let from = (component_name, source);
                    let stream = (s.name.as_str(), s.fields.as_slice());
                    tap_input(&mut self.core.transfer, from, stream, values, ids);
                }
                if !self.throttles.is_empty() {
                    self.throttle_edge(turn, component, stream, values);
                }
                anchors.push(if self.auto_ack {
                    self.inputs.run_input(ids)
                } else {
                    self.inputs.open_input(ids)
                });
            }
        }
        let anchor_of =
            |anchors: &[Anchor], i: usize| anchors.get(i).copied().unwrap_or(Anchor::NONE);
        let ends = batch.starts(range.end);
        let headers = &batch.tuples[range];
        let count = headers.len();
        // The run's inputs from `start` on go to the next call; their
        // values start at `base` in the batch.
        let (mut start, mut base) = (0, starts.0);
        while start < count {
            if self.core.poisoned {
                for i in start..count {
                    let (transfer, stats) = (&mut self.core.transfer, &mut turn.stats);
                    self.inputs.fail(
                        anchor_of(&anchors, i),
                        transfer,
                        stats,
                        StatField::FailedPanic,
                    );
                }
                break;
            }
            // The streams that go nowhere, unless a tap watches the task.
            let (unwired, default_unwired) = match self.core.transfer.tap().attached() {
                false => self.core.transfer.unwired(),
                true => (&[][..], false),
            };
            let view = RunView::new(
                &batch.values[base..ends.0],
                base as u32,
                &headers[start..],
                anchors.get(start..).unwrap_or_default(),
                streams,
                component_name,
                source,
            )
            .with_unwired(unwired.iter().copied(), default_unwired);
            let mut taken = 0u32;
            let result = {
                let mut output = HostOutput {
                    transfer: &mut self.core.transfer,
                    stats: &mut turn.stats,
                    error: &mut turn.emit_error,
                    side: Side::Bolt { inputs: &mut self.inputs, auto_ack: false },
                };
                self.bolt.execute_batch(view, &mut output, &mut taken).into_result()
            };
            if let Some(e) = turn.emit_error.take() {
                count_emit_error(&mut turn.stats, &self.core, "execute_batch", &e);
            }
            // The input being executed when it failed (the first when none
            // was taken); every input before it succeeded.
            let rest = count - start;
            let failed = match result {
                Ok(()) => rest,
                Err(_) => (taken as usize).clamp(1, rest) - 1,
            };
            // A basic bolt: what one call per tuple acked on `Ok` (nothing
            // when no input of the run is tracked).
            if self.auto_ack && self.inputs.run_tracks_any() {
                for &anchor in anchors.get(start..start + failed).unwrap_or_default() {
                    self.inputs.ack(anchor, &mut self.core.transfer, &mut turn.stats);
                }
            }
            let Err(e) = result else { break };
            let anchor = anchor_of(&anchors, start + failed);
            let (transfer, stats) = (&mut self.core.transfer, &mut turn.stats);
            if e.is_panic() {
                self.inputs.fail(anchor, transfer, stats, StatField::FailedPanic);
                self.restart(turn, e);
            } else {
                self.inputs.fail(anchor, transfer, stats, StatField::FailedExplicit);
                count_error(&mut turn.stats, &self.core.shared, name, &format!("execute: {e}"));
            }
            start += failed + 1;
            base = headers[start - 1].values_end as usize;
        }
        if self.auto_ack {
            self.inputs.end_run();
        }
        anchors.clear();
        self.anchors = anchors;
        (count as u64, ends)
    }

    /// Executes one tuple and settles its ack.
    // Inlined: it runs once per tuple, and its failure paths are calls.
    #[inline(always)]
    fn execute(&mut self, turn: &mut Turn, name: &str, tuple: &Tuple<'_>) {
        if self.core.poisoned {
            self.inputs.fail_current_panic(&mut self.core.transfer, &mut turn.stats);
            return;
        }
        let result = {
            let mut output = HostOutput {
                transfer: &mut self.core.transfer,
                stats: &mut turn.stats,
                error: &mut turn.emit_error,
                side: Side::Bolt { inputs: &mut self.inputs, auto_ack: self.auto_ack },
            };
            self.bolt.execute(tuple, &mut output).into_result()
        };
        if let Some(e) = turn.emit_error.take() {
            count_emit_error(&mut turn.stats, &self.core, "execute", &e);
        }
        match result {
            Ok(()) => {
                self.inputs.finish(true, self.auto_ack, &mut self.core.transfer, &mut turn.stats)
            }
            Err(e) if e.is_panic() => {
                self.inputs.fail_current_panic(&mut self.core.transfer, &mut turn.stats);
                self.restart(turn, e);
            }
            Err(e) => {
                count_error(&mut turn.stats, &self.core.shared, name, &format!("execute: {e}"));
                self.inputs.finish(false, self.auto_ack, &mut self.core.transfer, &mut turn.stats);
            }
        }
    }

    fn restart(&mut self, turn: &mut Turn, e: PluginError) {
        match self.core.rebuild("execute", &e, &mut turn.stats) {
            Some(Instance::Bolt(bolt)) => {
                self.bolt = bolt;
                let waker = self.waker.as_ref().map(|(w, _)| w);
                let prepared = self.bolt.prepare(&self.core.context, &self.core.ext, waker);
                if let Err(e) = prepared.into_result() {
                    let cause = e.to_string();
                    let call = "prepare after restart";
                    self.core.fail(|task| RunError::Lifecycle { task, call, cause });
                }
            }
            Some(_) => self.core.fail(|task| RunError::WrongKind { task }),
            None => {}
        }
    }

    /// Handles ticks; returns how many tick tuples were executed.
    fn drain_control(&mut self, turn: &mut Turn, name: &str) -> u64 {
        let mut ticks = 0;
        loop {
            match self.core.control.try_recv() {
                Ok(Control::TimeoutTick) => {
                    self.inputs.rotate();
                }
                Ok(Control::TickTuple) if self.window.is_some() => {
                    // Tick tuples never enter a window.
                }
                Ok(Control::FlushWindows) => {
                    if let Some(window) = self.window.as_mut() {
                        window.flush();
                    }
                }
                Ok(Control::TickTuple) => {
                    ticks += 1;
                    self.execute_tick(turn, name);
                }
                Ok(Control::Woken) => {
                    ticks += 1;
                    self.woken(turn, name);
                }
                Ok(
                    message @ (Control::SwapBolt(_)
                    | Control::SwapSpout(_)
                    | Control::Verdict { .. }
                    | Control::Rewire(_)
                    | Control::Retire(_)),
                ) => self.handle_reload(turn, message),
                Ok(
                    Control::Replies(_) | Control::Activate | Control::Deactivate | Control::Wake,
                ) => {}
                // Barriers reach bolts on their data queues.
                Ok(Control::Barrier(_)) => {}
                Ok(Control::Committed(checkpoint)) => self.committed(turn, name, checkpoint),
                Ok(Control::AbortCheckpoint(checkpoint)) => self.abandon(checkpoint),
                Ok(Control::Sync(done)) => self.sync(turn, name, &done),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return ticks,
            }
        }
    }

    /// Handles one message of a live reload: a swap, its verdict, a rewire
    /// or the task's retirement. Other messages do nothing here.
    #[cold]
    fn handle_reload(&mut self, turn: &mut Turn, message: Control) {
        match message {
            Control::SwapBolt(swap) => self.begin_swap(turn, *swap),
            Control::Verdict { reload, commit } => {
                let verdict = if commit { Verdict::Commit } else { Verdict::Abort };
                if let Some(swap) = &mut self.swap {
                    swap.machine.verdict(reload, verdict);
                }
            }
            Control::Rewire(rewire) => {
                if let Some(sources) = self.core.rewire(*rewire, &mut turn.stats) {
                    self.sources = sources;
                }
            }
            Control::Retire(retire) => self.retiring = Some(retire),
            // Only spouts take a spout swap; dropping it tells the reloader.
            _ => {}
        }
    }

    /// Executes a tick tuple (never for a windowed bolt: ticks never
    /// enter a window).
    fn execute_tick(&mut self, turn: &mut Turn, name: &str) {
        turn.stats.add(StatField::Ticks, 1);
        self.inputs.begin(&[]);
        let tuple =
            Tuple::new(&[], &[], SYSTEM_COMPONENT, TICK_STREAM, TaskId::SYSTEM.0, Anchor::NONE);
        self.execute(turn, name, &tuple);
    }

    /// Calls `woken`: the bolt's wake handle was called. Like a tick, it
    /// runs between batches, with no current input; a panic restarts the
    /// instance as one in `execute` does.
    fn woken(&mut self, turn: &mut Turn, name: &str) {
        let Some((_, pending)) = &self.waker else { return };
        take_wake(pending);
        if self.core.poisoned {
            return;
        }
        self.inputs.begin(&[]);
        let result = {
            let mut output = HostOutput {
                transfer: &mut self.core.transfer,
                stats: &mut turn.stats,
                error: &mut turn.emit_error,
                side: Side::Bolt { inputs: &mut self.inputs, auto_ack: self.auto_ack },
            };
            self.bolt.woken(&mut output).into_result()
        };
        if let Some(e) = turn.emit_error.take() {
            count_emit_error(&mut turn.stats, &self.core, "woken", &e);
        }
        self.inputs.finish(true, false, &mut self.core.transfer, &mut turn.stats);
        match result {
            Ok(()) => {}
            Err(e) if e.is_panic() => self.restart(turn, e),
            Err(e) => count_error(&mut turn.stats, &self.core.shared, name, &format!("woken: {e}")),
        }
    }

    /// Tells the bolt that `checkpoint` committed; an error is counted.
    #[cold]
    fn committed(&mut self, turn: &mut Turn, name: &str, checkpoint: u64) {
        if let Err(e) = self.bolt.committed(checkpoint).into_result() {
            let e = format!("committed: {e}");
            count_error(&mut turn.stats, &self.core.shared, name, &e);
        }
    }

    /// A sync point: due windows run, everything emitted is flushed and
    /// the counters published, then `done` counts this task in.
    #[cold]
    fn sync(&mut self, turn: &mut Turn, name: &str, done: &std::sync::atomic::AtomicUsize) {
        if self.window.is_some() {
            self.run_windows(turn, name);
        }
        self.core.transfer.flush_all(&mut turn.stats);
        self.publish(turn);
        done.fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// A swap request (see [`BoltSwap`]): the new instance takes over at
    /// once, then waits for the verdict while the old one executes on.
    #[cold]
    fn begin_swap(&mut self, turn: &mut Turn, request: BoltSwap) {
        let task = self.core.name.task.0;
        let BoltSwap { instance, factory, config, reload, ready, done, .. } = request;
        if self.swap.is_some() {
            let reason = "another swap of this task is under way".to_owned();
            let _ = ready
                .send((task, Err(ReloadError::Refused { task: self.core.name.clone(), reason })));
            let _ = done.send(SwapDone {
                task,
                committed: false,
                error: None,
                pause: std::time::Duration::ZERO,
            });
            return;
        }
        // Between two tuples: the rest of a partly executed batch and
        // everything queued go to whichever instance wins.
        self.publish(turn);
        self.swap = Some(Box::new(Swapping {
            machine: SwapMachine::new(reload, Instant::now(), None),
            new: Some(instance),
            preparing: None,
            factory,
            config,
            ready: Some(ready),
            done,
            saved: None,
            paused: std::time::Duration::ZERO,
        }));
    }

    /// Carries the swap on as its machine says (see [`SwapMachine`]).
    #[cold]
    #[inline(never)]
    fn advance_swap(&mut self) {
        let running = self.core.run.state() == RunState::Running;
        loop {
            let Some(swap) = &mut self.swap else { return };
            if swap.machine.is_preparing() {
                let came = swap.preparing.as_ref().map(Receiver::try_recv);
                match came {
                    Some(Ok((new, outcome))) => {
                        swap.preparing = None;
                        if !self.prepared(new, outcome) {
                            return self.end_swap(false, None);
                        }
                        continue;
                    }
                    Some(Err(TryRecvError::Empty)) => {}
                    Some(Err(TryRecvError::Disconnected)) | None => return self.prepare_lost(),
                }
            }
            match swap.machine.poll(Instant::now(), running, true) {
                Action::Wait => return,
                Action::TakeOver { .. } => return self.begin_take_over(),
                Action::Commit => return self.commit_swap(),
                Action::Discard => {
                    // Prepared but not wanted (another task failed): it never executed.
                    if let Some(new) = swap.new.take() {
                        self.retire(new, "the rolled back new instance");
                    }
                    return self.end_swap(false, None);
                }
                Action::Abandon => return self.end_swap(false, None),
            }
        }
    }

    /// The thread preparing the new instance ended without an answer: the
    /// reloader hears so, and the swap ends.
    #[cold]
    fn prepare_lost(&mut self) {
        let task = self.core.name.clone();
        let cause = "the thread preparing it ended without an answer".to_owned();
        let e = ReloadError::Task { task, call: "prepare on the new instance", cause };
        if let Some(ready) = self.swap.as_mut().and_then(|swap| swap.ready.take()) {
            let _ = ready.send((self.core.name.task.0, Err(e)));
        }
        self.end_swap(false, None);
    }

    /// The take-over: the new instance gets the state and prepares on a
    /// thread of its own while the old one executes on until the outcome.
    /// A take-over that fails is reported and ends the swap.
    #[cold]
    fn begin_take_over(&mut self) {
        let began = Instant::now();
        let Some(swap) = &mut self.swap else { return };
        let new = swap.new.take().expect("built, not yet taken over");
        let started = self.take_over(new);
        let Some(swap) = &mut self.swap else { return };
        swap.paused += began.elapsed();
        match started {
            Ok((preparing, saved)) => {
                // The old instance executes on until the outcome.
                swap.saved = saved;
                swap.preparing = Some(preparing);
                swap.machine.preparing();
            }
            Err(e) => {
                if let Some(ready) = swap.ready.take() {
                    let _ = ready.send((self.core.name.task.0, Err(e)));
                }
                self.end_swap(false, None);
            }
        }
    }

    /// The verdict committed: the prepared instance replaces the old one,
    /// unless the old one's state moved on since the take-over; then a
    /// fresh instance takes the state as it is now (restore runs before
    /// prepare, as the contract says, and only once per instance).
    fn commit_swap(&mut self) {
        let began = Instant::now();
        let Some(swap) = &mut self.swap else { return };
        let prepared = swap.new.take().expect("held");
        let (factory, config) = (swap.factory, swap.config.clone());
        let saved = swap.saved.take();
        let now = self.save_state();
        let replacement = match now {
            Ok(state) if state == saved => Ok(prepared),
            Ok(state) => {
                self.retire(prepared, "the instance prepared before the verdict");
                self.rebuild_with(factory, &config, state)
            }
            Err(e) => {
                self.retire(prepared, "the new instance");
                Err(e)
            }
        };
        match replacement {
            Ok(new) => {
                let old = std::mem::replace(&mut self.bolt, new);
                self.retire(old, "the old instance");
                self.core.constructor = factory;
                self.core.config = config;
                if let Some(swap) = &mut self.swap {
                    swap.paused += began.elapsed();
                }
                self.end_swap(true, None);
            }
            Err(e) => {
                tracing::error!(
                    "{}: the reload committed, but this task keeps its old instance: {e}",
                    self.core.label
                );
                if let Some(swap) = &mut self.swap {
                    swap.paused += began.elapsed();
                }
                self.end_swap(false, Some(e));
            }
        }
    }

    /// Reports the swap's end and forgets it.
    fn end_swap(&mut self, committed: bool, error: Option<ReloadError>) {
        let Some(swap) = self.swap.take() else { return };
        let task = self.core.name.task.0;
        if let Some(ready) = swap.ready {
            let reason = if self.core.run.state() == RunState::Running {
                "the reload was aborted before this task's new instance was prepared"
            } else {
                "the topology began draining"
            }
            .to_owned();
            let refused = ReloadError::Refused { task: self.core.name.clone(), reason };
            let _ = ready.send((task, Err(refused)));
        }
        let _ = swap.done.send(SwapDone { task, committed, error, pause: swap.paused });
    }

    /// `save_state` on the running instance.
    fn save_state(&mut self) -> Result<Option<State>, ReloadError> {
        self.bolt.save_state().into_result().map(|s| s.into_option()).map_err(|e| {
            ReloadError::Task {
                task: self.core.name.clone(),
                call: "save_state on the running instance",
                cause: e.to_string(),
            }
        })
    }

    /// A fresh instance of the new version with `state`, prepared.
    fn rebuild_with(
        &mut self,
        factory: Factory,
        config: &str,
        state: Option<State>,
    ) -> Result<BoltObj, ReloadError> {
        let task = self.core.name.clone();
        let call = |call: &'static str, cause: String| ReloadError::Task {
            task: task.clone(),
            call,
            cause,
        };
        let mut fresh = match factory.build(config) {
            Ok(Instance::Bolt(b)) => b,
            Ok(_) => {
                let cause = "it built a component of another kind".to_owned();
                return Err(call("rebuilding the new version at the commit", cause));
            }
            Err(e) => return Err(call("rebuilding the new version at the commit", e.to_string())),
        };
        let takes_state = fresh.takes_state();
        if let Err(e) = self.core.hand_state(state, takes_state, |s| fresh.restore_state(s)) {
            return Err(call("restore_state on the new instance at the commit", e));
        }
        let waker = self.waker.as_ref().map(|(w, _)| w);
        if let Err(e) = fresh.prepare(&self.core.context, &self.core.ext, waker).into_result() {
            self.retire(fresh, "the rebuilt new instance");
            return Err(call("prepare on the new instance at the commit", e.to_string()));
        }
        Ok(fresh)
    }

    /// Phase 1 of a swap: the running instance's state is saved here,
    /// then handed to `new` and `new` prepared on a thread of its own
    /// ([`prepare_off_thread`]); where the outcome will come, and the state
    /// handed over.
    fn take_over(
        &mut self,
        new: BoltObj,
    ) -> Result<(Receiver<Prepared>, Option<State>), ReloadError> {
        let task = self.core.name.clone();
        if self.core.poisoned {
            let reason = "the running instance reached the restart limit".to_owned();
            return Err(ReloadError::Refused { task, reason });
        }
        let state = self.save_state()?;
        let preparing = prepare_off_thread(
            self.core.label.clone(),
            task.clone(),
            new,
            state.clone(),
            (self.core.context.clone(), self.core.ext.clone()),
            self.waker.as_ref().map(|(w, _)| w.clone()),
        )
        .map_err(|e| ReloadError::Task {
            task,
            call: "starting a thread to prepare the new instance",
            cause: e.to_string(),
        })?;
        Ok((preparing, state))
    }

    /// The new instance came back from [`prepare_off_thread`]: reports the
    /// outcome to the reloader; true when the swap now waits for its
    /// verdict with `new` held.
    fn prepared(&mut self, new: BoltObj, outcome: Result<(), ReloadError>) -> bool {
        let task = self.core.name.task.0;
        let Some(swap) = &mut self.swap else { return false };
        let ok = outcome.is_ok();
        // A reloader that has gone away has aborted.
        let delivered = swap.ready.take().is_some_and(|ready| ready.send((task, outcome)).is_ok());
        if swap.machine.prepared(ok && delivered) {
            swap.new = Some(new);
            true
        } else {
            if ok {
                self.retire(new, "the new instance (the reloader has gone)");
            }
            false
        }
    }

    /// `cleanup` on an instance leaving the task.
    fn retire(&self, mut bolt: BoltObj, which: &str) {
        if let Err(e) = bolt.cleanup().into_result() {
            tracing::warn!("{}: cleanup of {which}: {e}", self.core.label);
        }
    }

    fn publish(&mut self, turn: &mut Turn) {
        let unsent = self.core.transfer.has_pending()
            || self.core.transfer.has_unsent()
            || turn.current.is_some();
        turn.stats.set(StatField::Unsent, u64::from(unsent));
        self.core.shared.publish(&turn.stats);
        turn.histogram.merge_into(&self.core.shared.execute_latency, false);
    }

    fn finish(&mut self, turn: &mut Turn, name: &str) {
        // A swap still under way when the run stops keeps the old instance.
        if let Some(new) =
            self.swap.as_mut().filter(|s| s.machine.held()).and_then(|s| s.new.take())
        {
            self.retire(new, "the new instance (the run stopped before the verdict)");
        }
        self.end_swap(false, None);
        if !self.core.poisoned {
            // A graceful stop's last checkpoint committed before the run
            // said Stopping; its `committed` may still be queued. A sink
            // writes what it staged for it, so the bolt hears it first.
            while let Ok(control) = self.core.control.try_recv() {
                if let Control::Committed(checkpoint) = control {
                    if let Err(e) = self.bolt.committed(checkpoint).into_result() {
                        let e = format!("committed: {e}");
                        count_error(&mut turn.stats, &self.core.shared, name, &e);
                    }
                }
            }
        }
        if self.core.poisoned {
            // Not called again after the panic that exhausted the restarts.
        } else if let Err(e) = self.bolt.cleanup().into_result() {
            tracing::warn!("{name}: cleanup: {e}");
        }
        self.core.transfer.flush_all(&mut turn.stats);
        self.publish(turn);
        turn.histogram.merge_into(&self.core.shared.execute_latency, true);
    }
}

/// Offers one input tuple to the taps on the task's inputs (cold: only
/// while a tap is attached).
#[cold]
#[inline(never)]
fn tap_input(
    transfer: &mut crate::executor::transfer::Transfer,
    (from, source_task): (&str, u32),
    (stream, fields): (&str, &[abi_stable::std_types::RString]),
    values: &[squall_plugin_api::Value],
    ids: &[(crate::ids::RootId, crate::ids::EdgeId)],
) {
    let (task, tap) = transfer.tap_mut();
    tap.offer(crate::tap::TapSide::Inputs, stream, || crate::tap::Sample {
        side: crate::tap::TapSide::Inputs,
        task,
        stream: stream.to_owned(),
        from: Some((from.to_owned(), source_task)),
        fields: Some(fields.iter().map(ToString::to_string).collect()),
        values: values.to_vec(),
        roots: ids.iter().map(|(root, _)| root.0).collect(),
        message_id: None,
    });
}

/// A new instance back from [`prepare_off_thread`], with the outcome.
type Prepared = (BoltObj, Result<(), ReloadError>);

/// Hands `state` to `new` and prepares it on a thread of its own, so that
/// the task's old instance executes on however long `prepare` takes (and
/// the reloader's deadline holds: an abort ends the swap at once). The
/// instance comes back on the returned channel with the outcome; when the
/// swap has ended meanwhile (nobody receives), the thread cleans the
/// instance up itself. Libraries are never unloaded, so a `prepare` still
/// running at exit runs in mapped code.
fn prepare_off_thread(
    label: String,
    task: crate::control::TaskName,
    mut new: BoltObj,
    state: Option<State>,
    (context, ext): (TaskContext, squall_plugin_api::abi::TaskExt),
    waker: Option<WakerBox>,
) -> std::io::Result<Receiver<Prepared>> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let name = format!("__prepare-{}", task.task.0);
    std::thread::Builder::new().name(name).spawn(move || {
        let takes_state = new.takes_state();
        let outcome = super::core::hand_state(&label, state, takes_state, |s| new.restore_state(s))
            .map_err(|cause| ReloadError::Task {
                task: task.clone(),
                call: "restore_state on the new instance",
                cause,
            })
            .and_then(|()| {
                new.prepare(&context, &ext, waker.as_ref()).into_result().map_err(|e| {
                    ReloadError::Task {
                        task: task.clone(),
                        call: "prepare on the new instance",
                        cause: e.to_string(),
                    }
                })
            });
        if let Err(crossbeam_channel::SendError((mut late, outcome))) = tx.send((new, outcome)) {
            // The swap ended first: rolled back at the reloader's deadline,
            // or the run stopped.
            if outcome.is_ok() {
                if let Err(e) = late.cleanup().into_result() {
                    tracing::warn!("{label}: cleanup of the late new instance: {e}");
                }
            }
            tracing::info!(
                "{label}: the new instance finished preparing after its reload had ended; \
                 it was discarded"
            );
        }
    })?;
    Ok(rx)
}
