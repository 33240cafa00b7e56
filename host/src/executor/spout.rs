//! The spout loop, as Storm 2.x's `SpoutExecutor` runs it (seed 000).
//!
//! # State machine (one turn)
//! 1. **Receive queue.** Drain the control queue (acker replies, timeout
//!    ticks): every turn when acking is on, else once every
//!    `spout_recvq_skips` turns.
//! 2. **Gate.** `gated` when the pending map holds `max_spout_pending` roots.
//! 3. **Pending emits first.** Retry batches that found a full queue, in
//!    order, stopping at the first that still does not fit.
//! 4. **Emit.** Only when active, not gated and nothing is pending:
//!    `next_tuple`, then the throttle (pay after use), then the acks of
//!    tuples emitted without tracking.
//! 5. **Wait.**
//!    - emits pending → backpressure strategy (its counter goes up; the
//!      spout counter is kept);
//!    - otherwise nothing emitted and nothing received → spout strategy
//!      (time counted as max-spout-pending time when gated);
//!    - otherwise, if it emitted → the spout counter resets to 0.
//!
//!    Before any wait, partial batches are flushed so that nothing sits in a
//!    buffer while the thread sleeps.
//!
//! On `Draining` the spout is deactivated once and stops emitting, but keeps
//! receiving acks and timeouts. On `Stopping` it fails what is still pending
//! (reason: shutdown), calls `close`, and exits.

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select, TryRecvError};
use squall_plugin_api::abi::{TaskContext, WakerBox};
use squall_plugin_api::{MessageId, PluginError};

use super::core::TaskCore;
use super::output::{HostOutput, Side};
use super::swap::{Action, SwapMachine, Verdict};
use super::tracking::SpoutTracker;
use super::transfer::EmitError;
use super::wake::spout_waker;
use super::{count_emit_error, count_error};
use super::{Idle, Step};
use crate::acker::msg::ReplyKind;
use crate::control::{Control, ReloadError, Reply, RunError, RunState, SpoutSwap, SwapDone};
use crate::metrics::{LocalHistogram, LocalStats, StatField};
use crate::plugin::{Factory, Instance, SpoutObj};
use crate::throttle::{Canceler, Sleeper, Throttler};

/// The longest an idle spout blocks before it looks at the run state again.
/// A change of run state ends the wait at once ([`Control::Wake`]); this
/// only bounds how long a missed wake could go unnoticed.
const BLOCK_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The longest a spout whose swap is draining blocks: the drain's deadline
/// is checked between two waits.
const SWAP_BLOCK_LIMIT: std::time::Duration = std::time::Duration::from_millis(100);

/// How a throttle counts a spout's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThrottleUnit {
    /// Tuples.
    Tuples,
    /// Encoded bytes of the values.
    Bytes,
}

/// Everything a spout task owns.
pub struct SpoutExecutor {
    core: TaskCore,
    spout: SpoutObj,
    /// The wake handle handed to the spout, and the receiving end its
    /// `wake` calls signal.
    waker: (WakerBox, Receiver<()>),
    /// True when the spout took its wake handle: an idle turn blocks until
    /// it wakes the executor (or a control message arrives).
    wakes: bool,
    tracker: SpoutTracker,
    max_pending: Option<usize>,
    recvq_skips: u32,
    throttle: Option<(Throttler, ThrottleUnit)>,
    /// False after a [`Control::Deactivate`], until a [`Control::Activate`].
    enabled: bool,
    /// When the drain began: the pending trees and the counters then, so the
    /// drain's figures come from this task's own pending map, exactly.
    drain_base: Option<(u64, LocalStats)>,
    /// A live swap under way: the old instance is deactivated (cold: boxed).
    swap: Option<Box<Swapping>>,
}

/// A spout's live swap: the machine, and what the executor holds for it.
struct Swapping {
    machine: SwapMachine,
    /// The new instance: built, then opened (once the machine is held).
    new: Option<SpoutObj>,
    /// Whether the opened new instance took its wake handle.
    new_wakes: bool,
    factory: Factory,
    config: String,
    /// Taken when the take-over's outcome is reported.
    ready: Option<crossbeam_channel::Sender<(u32, Result<(), ReloadError>)>>,
    done: crossbeam_channel::Sender<SwapDone>,
    /// Acker replies and timeout ticks that arrived while the new instance
    /// waited for the verdict: they go to whichever instance the verdict
    /// leaves, so the state handed over stays the old instance's last.
    deferred: Vec<Control>,
}

/// A spout task's own settings.
#[derive(Debug)]
pub struct SpoutOptions {
    /// `max_spout_pending` for this task, already normalised (`None` = unlimited).
    pub max_pending: Option<usize>,
    /// `spout_recvq_skips`.
    pub recvq_skips: u32,
    /// Buckets of the pending map (`timeout_buckets`).
    pub timeout_buckets: usize,
    /// Optional rate limit.
    pub throttle: Option<(Throttler, ThrottleUnit)>,
}

impl SpoutExecutor {
    /// A spout task running `spout`.
    pub fn new(core: TaskCore, spout: SpoutObj, options: SpoutOptions) -> Self {
        Self {
            core,
            spout,
            waker: spout_waker(),
            wakes: false,
            tracker: SpoutTracker::new(options.timeout_buckets),
            max_pending: options.max_pending,
            recvq_skips: options.recvq_skips,
            throttle: options.throttle,
            enabled: true,
            drain_base: None,
            swap: None,
        }
    }

    /// The task's context.
    pub fn context(&self) -> &TaskContext {
        &self.core.context
    }

    /// Replaces the instance before the task starts (tests).
    #[cfg(test)]
    pub(crate) fn replace_instance(&mut self, spout: SpoutObj) {
        self.spout = spout;
    }
}

impl std::fmt::Debug for SpoutExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpoutExecutor").field("context", &self.core.context).finish_non_exhaustive()
    }
}

/// The shortest throttle wait spent waiting on the control queue as well
/// (see `SpoutExecutor::serve_control_for`).
const SERVE_WAIT_MIN: Duration = Duration::from_millis(1);

/// A throttle wait that serves the spout's control queue (see
/// `SpoutExecutor::pay_throttle`); it may return early, and the throttler
/// then reads its clock and waits again for what is left.
struct ServingSleeper<'a, F: FnMut(Duration) + Send>(&'a mut F);

impl<F: FnMut(Duration) + Send> std::fmt::Debug for ServingSleeper<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServingSleeper")
    }
}

impl<F: FnMut(Duration) + Send> Sleeper for ServingSleeper<'_, F> {
    fn sleep(&mut self, duration: Duration, canceler: &Canceler) {
        if !canceler.is_canceled() {
            (self.0)(duration);
        }
    }
}

struct Turn {
    stats: LocalStats,
    histogram: LocalHistogram,
    emit_error: Option<EmitError>,
    active: bool,
}

/// A spout task's loop state between turns (see [`SpoutExecutor::step`]).
pub struct SpoutLoop {
    turn: Turn,
    name: String,
    acking: bool,
    /// Storm: with ackers the receive queue is read every turn; without,
    /// once every `spout_recvq_skips` turns (a countdown, not a modulo).
    skips: u32,
    until_receive: u32,
    spout_counter: u32,
    bp_counter: u32,
    iteration: u64,
    /// The last turn found the spout gated by max-spout-pending.
    gated: bool,
}

impl std::fmt::Debug for SpoutLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpoutLoop").field("name", &self.name).finish_non_exhaustive()
    }
}

impl SpoutExecutor {
    /// Runs the task to the end. Never panics on plugin failures: they are
    /// reported through the run control.
    pub fn run(mut self) {
        let mut lp = self.enter();
        if self.begin() {
            while self.step::<true>(&mut lp) != Step::Stop {}
        }
        self.finish(&mut lp.turn);
    }

    /// Takes the task onto the calling thread: what the loop writes on
    /// every tuple moves into its memory, and plugin calls from it are
    /// attributed to this task.
    pub(super) fn enter(&mut self) -> SpoutLoop {
        self.core.transfer.rehome();
        self.tracker.pending.rehome();
        crate::plugin::services::enter_task(
            &self.core.name.component,
            self.core.name.task.0,
            self.core.shared.clone(),
        );
        let acking = self.core.transfer.acking();
        SpoutLoop {
            turn: Turn {
                stats: LocalStats::default(),
                histogram: LocalHistogram::default(),
                emit_error: None,
                active: false,
            },
            name: self.core.label.clone(),
            acking,
            skips: if acking { 1 } else { self.recvq_skips.max(1) },
            until_receive: 0,
            spout_counter: 0,
            bp_counter: 0,
            iteration: 0,
            gated: false,
        }
    }

    /// Opens the instance; false (the run failed) when it cannot run.
    pub(super) fn begin(&mut self) -> bool {
        match self.open() {
            Ok(()) => true,
            Err(cause) => {
                self.core.fail(|task| RunError::Lifecycle { task, call: "open", cause });
                false
            }
        }
    }

    /// Ends the task: what is pending fails, `close`, its last stats.
    pub(super) fn end(&mut self, lp: &mut SpoutLoop) {
        self.finish(&mut lp.turn);
    }

    /// One turn of the loop, in the module doc's order.
    ///
    /// The hot loop, kept in one function (as tokio's schedulers keep
    /// theirs) so that the common turn is a few compares and the cold paths
    /// are calls. `ALONE`: the task has its thread to itself and waits
    /// here; otherwise (a chain, see [`super::chain`]) it returns what it
    /// would wait for, and the chain waits for all its tasks at once.
    #[inline(always)]
    pub(super) fn step<const ALONE: bool>(&mut self, lp: &mut SpoutLoop) -> Step {
        let state = self.core.run.state();
        if state == RunState::Stopping {
            return Step::Stop;
        }
        let turn = &mut lp.turn;
        let name = lp.name.as_str();
        // The common case costs two compares; the transitions are cold.
        let wanted = state == RunState::Running && self.enabled && self.swap.is_none();
        if wanted != turn.active || (state == RunState::Draining && self.drain_base.is_none()) {
            self.follow(turn, name, state);
        }
        // 1. receive queue
        let received = if lp.until_receive == 0 {
            lp.until_receive = lp.skips - 1;
            self.drain_control(turn, name)
        } else {
            lp.until_receive -= 1;
            0
        };
        if self.swap.is_some() {
            self.advance_swap(turn, name, state);
        }
        if self.core.rewiring.is_some() {
            self.core.advance_rewire();
        }
        lp.iteration += 1;
        let iteration = lp.iteration;
        // 2. gate
        let gated = self.max_pending.is_some_and(|max| self.tracker.pending.len() >= max);
        // 3. pending emits
        let clear = self.core.transfer.flush_pending(&mut turn.stats);
        if iteration.is_multiple_of(64) {
            self.core.transfer.flush_if_due(Instant::now(), &mut turn.stats);
            self.publish(turn);
        }
        // 4. emit
        let mut emitted = 0;
        if turn.active && !gated && clear && !self.core.poisoned {
            emitted = self.next_tuple(turn, name, iteration % 64 == 1);
        }
        // 5. wait
        if self.core.transfer.has_pending() {
            if ALONE {
                let started = Instant::now();
                lp.bp_counter = self.core.backpressure_idle(lp.bp_counter);
                turn.stats.add(StatField::BackpressureNanos, started.elapsed().as_nanos() as u64);
            }
            return Step::Blocked;
        }
        lp.bp_counter = 0;
        if emitted == 0 && received == 0 {
            self.core.transfer.flush_all(&mut turn.stats);
            self.publish(turn);
            if self.core.rewiring.is_some() {
                self.core.advance_rewire();
            }
            // Only an acker reply (or a timeout tick) can ungate the spout,
            // or finish a swap's drain: it waits for one on the control
            // queue. A draining spout emits nothing more, so it too waits for
            // replies and ticks (and the stop's wake) instead of napping: a
            // thousand spouts napping 1 ms each took the cores the drain's
            // bolts needed.
            let idle = if (gated && lp.acking) || self.swap.is_some() || state == RunState::Draining
            {
                Idle::Block { woken: false }
            } else if self.wakes && turn.active && !gated {
                Idle::Block { woken: true }
            } else {
                Idle::Nap
            };
            lp.gated = gated;
            if ALONE {
                let started = Instant::now();
                match idle {
                    Idle::Block { woken } => self.block(woken),
                    _ => self.nap(lp),
                }
                self.waited(lp, started.elapsed());
            }
            return Step::Idle(idle);
        } else if emitted > 0 {
            lp.spout_counter = 0;
        }
        Step::Busy
    }

    /// Counts a wait that followed an idle turn: max-spout-pending time
    /// when the spout was gated.
    pub(super) fn waited(&self, lp: &mut SpoutLoop, waited: Duration) {
        if lp.gated {
            lp.turn.stats.add(StatField::MaxPendingNanos, waited.as_nanos() as u64);
        }
    }

    /// Adds the time a chain spent in its backpressure wait for this task.
    pub(super) fn blocked_for(&self, lp: &mut SpoutLoop, waited: Duration) {
        lp.turn.stats.add(StatField::BackpressureNanos, waited.as_nanos() as u64);
    }

    /// The spout's nap (its wait strategy); the counter is the loop's own.
    pub(super) fn nap(&mut self, lp: &mut SpoutLoop) {
        lp.spout_counter = self.core.wait.idle(lp.spout_counter, &self.core.run.canceler);
    }

    /// The task's core (its queues and wait strategies), for a chain's wait.
    pub(super) fn core(&self) -> &TaskCore {
        &self.core
    }

    /// The backpressure wait of a chain whose task this is.
    pub(super) fn backpressure_wait(&mut self, counter: u32) -> u32 {
        self.core.backpressure_idle(counter)
    }

    /// What a chain waits on for this spout: its wake signal, and how long
    /// a block may last.
    pub(super) fn wake_signal(&self) -> (&Receiver<()>, Duration) {
        let limit = if self.swap.is_some() { SWAP_BLOCK_LIMIT } else { BLOCK_LIMIT };
        (&self.waker.1, limit)
    }

    /// Takes the wake token a chain's wait may have left (one token stands
    /// for every wake since the last turn).
    pub(super) fn take_wake(&self) {
        let _ = self.waker.1.try_recv();
    }

    /// Opens the instance; remembers whether it took its wake handle.
    // String: the cause becomes `RunError::Lifecycle`'s text, as a plugin's message does.
    fn open(&mut self) -> Result<(), String> {
        let core = &self.core;
        match self.spout.open(&core.context, &core.ext, &self.waker.0).into_result() {
            Ok(wakes) => {
                self.wakes = wakes;
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Blocks until the control queue has a message, or (when `woken`) the
    /// spout wakes its executor, or [`BLOCK_LIMIT`] passes (so the run state
    /// is seen).
    fn block(&mut self, woken: bool) {
        let mut select = Select::new();
        select.recv(&self.core.control);
        if woken {
            select.recv(&self.waker.1);
        }
        let limit = if self.swap.is_some() { SWAP_BLOCK_LIMIT } else { BLOCK_LIMIT };
        let _ = select.ready_timeout(limit);
        // One token stands for every wake since the last turn.
        let _ = self.waker.1.try_recv();
    }

    /// Activates or deactivates the instance as the run state and the
    /// operator ([`Control::Activate`], [`Control::Deactivate`]) want it.
    #[cold]
    #[inline(never)]
    fn follow(&mut self, turn: &mut Turn, name: &str, state: RunState) {
        if state == RunState::Draining {
            self.mark_drain(turn);
        }
        let wanted = state == RunState::Running && self.enabled && self.swap.is_none();
        if wanted && !turn.active {
            turn.active = true;
            self.call(turn, name, |s| s.activate());
        } else if !wanted && turn.active {
            turn.active = false;
            self.call(turn, name, |s| s.deactivate());
            self.core.transfer.flush_all(&mut turn.stats);
        }
    }

    /// Calls `next_tuple` and settles what it emitted; returns the tuples emitted.
    /// Busy time is sampled: when `timed`, the plugin call is timed and
    /// counts 64 times (two clock reads per call stay off the hot path).
    fn next_tuple(&mut self, turn: &mut Turn, name: &str, timed: bool) -> u64 {
        let before = turn.stats.get(StatField::Emitted);
        let bytes_before = self.core.transfer.emitted_bytes;
        self.tracker.begin_call();
        // A contract 1.3 spout emits up to a batch in one call, and no more
        // than max-spout-pending leaves room for (the gate holds when there
        // is none); a throttled one, one `next_tuple`'s worth, so that the
        // throttle paces its calls as before.
        let room = self
            .max_pending
            .map_or(usize::MAX, |max| max.saturating_sub(self.tracker.pending.len()).max(1));
        let cap = if self.throttle.is_some() { 1 } else { self.core.transfer.batch_size() };
        let max = room.min(cap) as u32;
        let result = {
            let mut output = HostOutput {
                transfer: &mut self.core.transfer,
                stats: &mut turn.stats,
                error: &mut turn.emit_error,
                side: Side::Spout { tracker: &mut self.tracker, task: self.core.name.task },
            };
            if timed {
                let started = Instant::now();
                let result = self.spout.next_batch(max, &mut output).into_result();
                turn.stats.add(StatField::BusyNanos, started.elapsed().as_nanos() as u64 * 64);
                result
            } else {
                self.spout.next_batch(max, &mut output).into_result()
            }
        };
        let emitted = turn.stats.get(StatField::Emitted) - before;
        if let Err(e) = result {
            self.plugin_error(turn, name, "next_tuple", e);
        }
        if let Some(e) = turn.emit_error.take() {
            count_emit_error(&mut turn.stats, &self.core, "next_tuple", &e);
        }
        if !self.tracker.ack_now.is_empty() {
            // The list goes back afterwards, so its buffer is reused.
            let mut ids = std::mem::take(&mut self.tracker.ack_now);
            for id in ids.drain(..) {
                self.ack(turn, name, id, None);
            }
            self.tracker.ack_now = ids;
        }
        if emitted > 0 && self.throttle.is_some() {
            let bytes = self.core.transfer.emitted_bytes - bytes_before;
            self.pay_throttle(turn, name, emitted, bytes);
        }
        emitted
    }

    /// Pays the throttle for what one call emitted. The wait may be long (a
    /// spout that emits a whole batch per call owes the batch's time), so it
    /// is spent serving the control queue: checkpoint barriers, commit
    /// notices and acker replies are handled as they come, and only the
    /// next emit waits.
    #[cold]
    fn pay_throttle(&mut self, turn: &mut Turn, name: &str, tuples: u64, bytes: u64) {
        let Some((mut throttler, unit)) = self.throttle.take() else { return };
        let n = match unit {
            ThrottleUnit::Tuples => tuples,
            ThrottleUnit::Bytes => bytes,
        };
        // Publish first, so the stats show what was emitted up to the wait.
        self.core.shared.publish(&turn.stats);
        let run = self.core.run.clone();
        let mut serve = |wait: Duration| self.serve_control_for(turn, name, wait);
        let outcome = run.throttle_with(&mut throttler, n, &mut ServingSleeper(&mut serve));
        turn.stats.add(StatField::ThrottleNanos, outcome.waited.as_nanos() as u64);
        self.throttle = Some((throttler, unit));
    }

    /// Flushes the partial batches (nothing sits in a buffer while the
    /// thread waits), then waits up to `wait` for the control queue (or the
    /// run's cancel), and handles what it holds.
    ///
    /// A short wait (under [`SERVE_WAIT_MIN`]: one tuple's time at a rate
    /// above 1,000 tuples/s, or what is left of a wait after an early
    /// return) sleeps without waiting on the control queue and then
    /// handles what it holds: a
    /// reply waking the thread in the middle of every such wait cost the
    /// throttled const-null-ack about 10 µs of complete latency at 100 k/s.
    fn serve_control_for(&mut self, turn: &mut Turn, name: &str, wait: Duration) {
        self.core.transfer.flush_all(&mut turn.stats);
        if wait < SERVE_WAIT_MIN {
            self.core.run.canceler.wait_timeout(wait);
            self.drain_control(turn, name);
            return;
        }
        let mut select = Select::new();
        select.recv(&self.core.control);
        select.recv(self.core.run.canceler.closed());
        if select.ready_timeout(wait).is_ok() {
            self.drain_control(turn, name);
        }
    }

    /// A swap request: the old instance is deactivated by the next turn
    /// (`wanted` is false while a swap is under way) and drains.
    #[cold]
    fn begin_swap(&mut self, request: SpoutSwap) {
        let task = self.core.name.task.0;
        let SpoutSwap { instance, factory, config, drain, reload, ready, done } = request;
        if self.swap.is_some() {
            let reason = "another swap of this task is under way".to_owned();
            let busy = ReloadError::Refused { task: self.core.name.clone(), reason };
            let _ = ready.send((task, Err(busy)));
            let pause = std::time::Duration::ZERO;
            let _ = done.send(SwapDone { task, committed: false, error: None, pause });
            return;
        }
        self.swap = Some(Box::new(Swapping {
            machine: SwapMachine::new(reload, Instant::now(), drain),
            new: Some(instance),
            new_wakes: false,
            factory,
            config,
            ready: Some(ready),
            done,
            deferred: Vec::new(),
        }));
    }

    /// Carries the swap on as its machine says (see [`SwapMachine`]).
    #[cold]
    #[inline(never)]
    fn advance_swap(&mut self, turn: &mut Turn, name: &str, state: RunState) {
        let running = state == RunState::Running;
        loop {
            let Some(swap) = &mut self.swap else { return };
            let action =
                swap.machine.poll(Instant::now(), running, self.tracker.pending.is_empty());
            match action {
                Action::Wait => return,
                // Deactivated by `follow` first, on the next turn.
                Action::TakeOver { .. } if turn.active => return,
                Action::TakeOver { fail_pending } => {
                    if !self.begin_take_over(turn, name, fail_pending) {
                        return;
                    }
                }
                Action::Commit => {
                    let new = swap.new.take().expect("held");
                    let old = std::mem::replace(&mut self.spout, new);
                    self.wakes = swap.new_wakes;
                    self.core.constructor = swap.factory;
                    self.core.config = std::mem::take(&mut swap.config);
                    self.retire(old, "the old instance");
                    return self.end_swap(turn, name, true);
                }
                Action::Discard => {
                    // Opened but not wanted (another task failed): it never emitted.
                    if let Some(new) = swap.new.take() {
                        self.retire(new, "the rolled back new instance");
                    }
                    return self.end_swap(turn, name, false);
                }
                Action::Abandon => return self.end_swap(turn, name, false),
            }
        }
    }

    /// The take-over: what is still pending fails back (when
    /// `fail_pending`), everything emitted is flushed, then the new instance
    /// gets the state and opens. False when the swap ended (the take-over
    /// failed, or the reloader has gone).
    #[cold]
    fn begin_take_over(&mut self, turn: &mut Turn, name: &str, fail_pending: bool) -> bool {
        if fail_pending {
            // Bounded by the message timeout: what is still pending
            // fails back to the instance that emitted it.
            let late: Vec<MessageId> =
                self.tracker.pending.drain_all().map(|(_, p)| p.message_id).collect();
            for id in late {
                self.fail(turn, name, id, StatField::FailedTimeout);
            }
        }
        self.core.transfer.flush_all(&mut turn.stats);
        self.publish(turn);
        let Some(swap) = &mut self.swap else { return false };
        let mut new = swap.new.take().expect("built, not yet taken over");
        let taken = self.take_over(&mut new);
        let Some(swap) = &mut self.swap else { return false };
        let report = taken.as_ref().map(|_| ()).map_err(Clone::clone);
        let ready = swap.ready.take().expect("reported once");
        // A reloader that has gone away has aborted.
        let delivered = ready.send((self.core.name.task.0, report)).is_ok();
        let ok = taken.is_ok();
        if swap.machine.prepared(ok && delivered) {
            swap.new_wakes = taken.unwrap_or(false);
            swap.new = Some(new);
            true
        } else {
            if ok {
                self.retire(new, "the new instance (the reloader has gone)");
            }
            self.end_swap(turn, name, false);
            false
        }
    }

    /// Reports the swap's end (and, if the take-over never came, why to
    /// the reloader), forgets it, and hands the replies it deferred to the
    /// instance that now runs. The next turn activates that instance.
    fn end_swap(&mut self, turn: &mut Turn, name: &str, committed: bool) {
        let Some(swap) = self.swap.take() else { return };
        let task = self.core.name.task.0;
        if let Some(ready) = swap.ready {
            let reason = if self.core.run.state() == RunState::Running {
                "the reload was aborted before this task took over"
            } else {
                "the topology began draining"
            };
            let refused =
                ReloadError::Refused { task: self.core.name.clone(), reason: reason.into() };
            let _ = ready.send((task, Err(refused)));
        }
        let pause = swap.machine.started().elapsed();
        let _ = swap.done.send(SwapDone { task, committed, error: None, pause });
        for message in swap.deferred {
            self.handle_control(turn, name, message);
        }
    }

    /// Phase 1 of a swap: state handed over, then `open` on `new`; whether
    /// it took its wake handle.
    fn take_over(&mut self, new: &mut SpoutObj) -> Result<bool, ReloadError> {
        let task = self.core.name.clone();
        if self.core.poisoned {
            let reason = "the running instance reached the restart limit".to_owned();
            return Err(ReloadError::Refused { task, reason });
        }
        let call = |call: &'static str, cause: String| ReloadError::Task {
            task: task.clone(),
            call,
            cause,
        };
        let state = self
            .spout
            .save_state()
            .into_result()
            .map_err(|e| call("save_state on the running instance", e.to_string()))?;
        let takes_state = new.takes_state();
        self.core
            .hand_state(state.into_option(), takes_state, |s| new.restore_state(s))
            .map_err(|e| call("restore_state on the new instance", e))?;
        new.open(&self.core.context, &self.core.ext, &self.waker.0)
            .into_result()
            .map_err(|e| call("open on the new instance", e.to_string()))
    }

    /// `close` on an instance leaving the task.
    fn retire(&self, mut spout: SpoutObj, which: &str) {
        if let Err(e) = spout.close().into_result() {
            tracing::warn!("{}: close of {which}: {e}", self.core.label);
        }
    }

    /// Handles acker replies and timeout ticks; returns the messages handled.
    fn drain_control(&mut self, turn: &mut Turn, name: &str) -> u64 {
        let mut handled = 0;
        loop {
            match self.core.control.try_recv() {
                Ok(message) => handled += self.handle_control(turn, name, message),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return handled,
            }
        }
    }

    /// Handles one control message; the work it counted.
    fn handle_control(&mut self, turn: &mut Turn, name: &str, message: Control) -> u64 {
        match message {
            Control::Replies(_) | Control::TimeoutTick
                if self.swap.as_ref().is_some_and(|s| s.machine.held()) =>
            {
                if let Some(swap) = &mut self.swap {
                    swap.deferred.push(message);
                }
                0
            }
            Control::Replies(replies) => {
                let handled = replies.len() as u64;
                for reply in replies {
                    self.reply(turn, name, reply);
                }
                handled
            }
            Control::TimeoutTick => {
                self.time_out(turn, name);
                1
            }
            Control::TickTuple => 1,
            Control::Wake | Control::Woken | Control::FlushWindows => 0,
            Control::Activate => {
                self.enabled = true;
                0
            }
            Control::Deactivate => {
                self.enabled = false;
                0
            }
            Control::SwapSpout(_)
            | Control::Verdict { .. }
            | Control::SwapBolt(_)
            | Control::Rewire(_)
            | Control::Retire(_) => self.handle_reload(turn, message),
            Control::Barrier(_)
            | Control::Committed(_)
            | Control::AbortCheckpoint(_)
            | Control::Sync(_) => self.handle_checkpoint(turn, name, message),
        }
    }

    /// Handles one message of a live reload (a swap, its verdict, a
    /// rewire); the work it counted. Other messages count none here.
    #[cold]
    fn handle_reload(&mut self, turn: &mut Turn, message: Control) -> u64 {
        match message {
            Control::SwapSpout(request) => {
                self.begin_swap(*request);
                1
            }
            Control::Verdict { reload, commit } => {
                let verdict = if commit { Verdict::Commit } else { Verdict::Abort };
                if let Some(swap) = &mut self.swap {
                    swap.machine.verdict(reload, verdict);
                }
                1
            }
            Control::Rewire(rewire) => {
                let _ = self.core.rewire(*rewire, &mut turn.stats);
                0
            }
            // Only bolts take a bolt swap (the reloader never sends one
            // here), and spouts are not retired live (a reload refuses that).
            _ => 0,
        }
    }

    /// Handles one message of a checkpoint or a sync point; the work it
    /// counted. Other messages count none here.
    #[cold]
    fn handle_checkpoint(&mut self, turn: &mut Turn, name: &str, message: Control) -> u64 {
        match message {
            Control::Barrier(checkpoint) => {
                self.barrier(turn, name, checkpoint);
                1
            }
            Control::Committed(checkpoint) => {
                self.committed(turn, name, checkpoint);
                0
            }
            Control::Sync(done) => {
                self.core.transfer.flush_all(&mut turn.stats);
                self.publish(turn);
                done.fetch_add(1, std::sync::atomic::Ordering::Release);
                0
            }
            // An abort needs nothing of a spout.
            _ => 0,
        }
    }

    /// One acker reply: the tuple tree of `reply.root` was reset (its
    /// timeout starts over), completed (acked, with its latency) or failed.
    fn reply(&mut self, turn: &mut Turn, name: &str, reply: Reply) {
        match reply.kind {
            ReplyKind::Reset => {
                self.tracker.pending.reset(&reply.root);
            }
            ReplyKind::Acked => {
                if let Some(p) = self.tracker.pending.remove(&reply.root) {
                    let latency = reply.at.saturating_duration_since(p.emitted);
                    self.ack(turn, name, p.message_id, Some(latency));
                }
            }
            ReplyKind::Failed => {
                if let Some(p) = self.tracker.pending.remove(&reply.root) {
                    self.fail(turn, name, p.message_id, StatField::FailedExplicit);
                }
            }
        }
    }

    /// A timeout tick: the pending tuples of the oldest bucket have timed
    /// out and fail back to the spout.
    fn time_out(&mut self, turn: &mut Turn, name: &str) {
        let expired: Vec<_> = self.tracker.pending.rotate().map(|(_, p)| p.message_id).collect();
        for id in expired {
            self.fail(turn, name, id, StatField::FailedTimeout);
        }
    }

    /// Tells the spout that `checkpoint` committed; an error is counted.
    #[cold]
    fn committed(&mut self, turn: &mut Turn, name: &str, checkpoint: u64) {
        if let Err(e) = self.spout.committed(checkpoint).into_result() {
            count_error(&mut turn.stats, &self.core.shared, name, &format!("committed: {e}"));
        }
    }

    /// Checkpoint `checkpoint`'s barrier: the position covering everything
    /// emitted so far goes to the coordinator, and the barrier downstream
    /// behind those tuples.
    #[cold]
    fn barrier(&mut self, turn: &mut Turn, name: &str, checkpoint: u64) {
        let position = match self.spout.checkpoint(checkpoint).into_result() {
            Ok(position) => Ok(position.into_option()),
            Err(e) => {
                count_error(&mut turn.stats, &self.core.shared, name, &format!("checkpoint: {e}"));
                Err(e.to_string())
            }
        };
        self.core.transfer.barrier(checkpoint, &mut turn.stats);
        self.core.report(checkpoint, crate::state::Part::Spout(position));
    }

    fn ack(
        &mut self,
        turn: &mut Turn,
        name: &str,
        id: MessageId,
        latency: Option<std::time::Duration>,
    ) {
        if let Some(latency) = latency {
            turn.histogram.record(latency.as_micros() as u64);
        }
        turn.stats.add(StatField::Acked, 1);
        self.call(turn, name, |s| s.ack(id));
    }

    fn fail(&mut self, turn: &mut Turn, name: &str, id: MessageId, reason: StatField) {
        turn.stats.add(reason, 1);
        self.call(turn, name, |s| s.fail(id));
    }

    /// Calls into the plugin, handling a panic with the restart policy.
    fn call(
        &mut self,
        turn: &mut Turn,
        name: &str,
        f: impl FnOnce(&mut SpoutObj) -> abi_stable::std_types::RResult<(), PluginError>,
    ) {
        if self.core.poisoned {
            return;
        }
        if let Err(e) = f(&mut self.spout).into_result() {
            self.plugin_error(turn, name, "call", e);
        }
    }

    fn plugin_error(&mut self, turn: &mut Turn, name: &str, what: &'static str, e: PluginError) {
        if !e.is_panic() {
            return count_error(&mut turn.stats, &self.core.shared, name, &format!("{what}: {e}"));
        }
        match self.core.rebuild(what, &e, &mut turn.stats) {
            Some(Instance::Spout(spout)) => {
                self.spout = spout;
                if let Err(cause) = self.open() {
                    let call = "open after restart";
                    self.core.fail(|task| RunError::Lifecycle { task, call, cause });
                    return;
                }
                if turn.active {
                    let _ = self.spout.activate();
                }
                // The old instance's in-flight trees fail now, towards the new
                // instance, so a spout backed by a replayable source re-emits
                // them; their late acks find no pending entry and are dropped.
                let in_flight: Vec<MessageId> =
                    self.tracker.pending.drain_all().map(|(_, p)| p.message_id).collect();
                for id in in_flight {
                    turn.stats.add(StatField::FailedPanic, 1);
                    if let Err(e) = self.spout.fail(id).into_result() {
                        tracing::warn!("{name}: fail after restart: {e}");
                    }
                }
            }
            Some(_) => self.core.fail(|task| RunError::WrongKind { task }),
            None => {}
        }
    }

    fn publish(&mut self, turn: &mut Turn) {
        turn.stats.set(StatField::Pending, self.tracker.pending.len() as u64);
        let unsent = u64::from(self.core.transfer.has_pending() || self.core.transfer.has_unsent());
        turn.stats.set(StatField::Unsent, unsent);
        turn.stats.set(StatField::Active, u64::from(turn.active));
        self.core.shared.publish(&turn.stats);
        let force = self.core.run.state() == RunState::Stopping;
        turn.histogram.merge_into(&self.core.shared.latency, force);
    }

    /// Remembers the pending trees and the counters when the drain begins
    /// (once; at the latest when the task stops).
    fn mark_drain(&mut self, turn: &Turn) {
        if self.drain_base.is_none() {
            self.drain_base = Some((self.tracker.pending.len() as u64, turn.stats.clone()));
        }
    }

    /// The drain's figures: every tree pending when the drain began ended in
    /// exactly one of the four outcomes (no tree is emitted while draining).
    fn settle_drain(&self, turn: &mut Turn) {
        let Some((in_flight, base)) = &self.drain_base else { return };
        let delta = |f: StatField| turn.stats.get(f) - base.get(f);
        let failed = delta(StatField::FailedExplicit) + delta(StatField::FailedPanic);
        let (acked, timed_out) = (delta(StatField::Acked), delta(StatField::FailedTimeout));
        let shutdown = delta(StatField::FailedShutdown);
        turn.stats.set(StatField::DrainInFlight, *in_flight);
        turn.stats.set(StatField::DrainAcked, acked);
        turn.stats.set(StatField::DrainFailed, failed);
        turn.stats.set(StatField::DrainTimedOut, timed_out);
        turn.stats.set(StatField::DrainShutdown, shutdown);
    }

    /// What reached the control queue before the stop still counts: the
    /// acks that came back, and the last checkpoint's `Committed`, which the
    /// coordinator sends just before the run stops and which a spout turns
    /// into its broker acknowledgements. The rest is dropped.
    #[cold]
    fn take_last_replies(&mut self, turn: &mut Turn, name: &str) {
        while let Ok(message) = self.core.control.try_recv() {
            if matches!(message, Control::Replies(_) | Control::Committed(_)) {
                self.handle_control(turn, name, message);
            }
        }
    }

    /// Fails what is still pending (reason: shutdown), closes, publishes.
    fn finish(&mut self, turn: &mut Turn) {
        self.mark_drain(turn);
        let name = self.core.label.clone();
        // A swap still under way when the run stops keeps the old instance,
        // which takes the replies deferred for the verdict.
        if let Some(new) =
            self.swap.as_mut().filter(|s| s.machine.held()).and_then(|s| s.new.take())
        {
            self.retire(new, "the new instance (the run stopped before the verdict)");
        }
        self.end_swap(turn, &name, false);
        if !self.core.poisoned {
            self.take_last_replies(turn, &name);
        }
        let leftover: Vec<MessageId> =
            self.tracker.pending.drain_all().map(|(_, p)| p.message_id).collect();
        for id in leftover {
            self.fail(turn, &name, id, StatField::FailedShutdown);
        }
        if self.core.poisoned {
            // Not called again after the panic that exhausted the restarts.
        } else if let Err(e) = self.spout.close().into_result() {
            tracing::warn!("{name}: close: {e}");
        }
        turn.active = false;
        self.settle_drain(turn);
        self.core.transfer.flush_all(&mut turn.stats);
        self.publish(turn);
    }
}
