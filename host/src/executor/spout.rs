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

use std::sync::Arc;
use std::time::Instant;

use abi_stable::sabi_trait::TD_Opaque;
use crossbeam_channel::{Receiver, TryRecvError};
use hdrhistogram::Histogram;
use squall_plugin_api::abi::{ComponentBox, OutputMut, Output_TO, SpoutBox};
use squall_plugin_api::{MessageId, PluginError, TaskContext};

use super::batch::{Control, ReplyKind};
use super::output::{HostOutput, Side};
use super::tracking::SpoutTracker;
use super::transfer::{EmitError, Transfer};
use super::{count_error, RestartPolicy, RunControl, RunState};
use crate::metrics::{new_histogram, LocalStats, StatField, TaskStats};
use crate::throttle::Throttler;
use crate::wait::WaitStrategy;

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
    /// The task's context, as handed to `open`.
    pub context: TaskContext,
    /// Rebuilds the instance after a panic.
    pub constructor: crate::topology::Constructor,
    /// The component's config, for rebuilding.
    pub config: String,
    /// The instance.
    pub spout: SpoutBox,
    /// Outgoing side.
    pub transfer: Transfer,
    /// Pending roots.
    pub tracker: SpoutTracker,
    /// Control queue.
    pub control: Receiver<Control>,
    /// Spout wait strategy.
    pub spout_wait: WaitStrategy,
    /// Backpressure wait strategy.
    pub backpressure_wait: WaitStrategy,
    /// Published counters.
    pub shared: Arc<TaskStats>,
    /// Run state.
    pub run: Arc<RunControl>,
    /// `max_spout_pending` for this task.
    pub max_pending: Option<usize>,
    /// `spout_recvq_skips`.
    pub recvq_skips: u32,
    /// Optional rate limit.
    pub throttle: Option<(Throttler, ThrottleUnit)>,
    /// Restart limits.
    pub restarts: RestartPolicy,
    /// Set when a panic was not followed by a rebuild (restart limit): the
    /// instance is never called again.
    pub poisoned: bool,
}

impl std::fmt::Debug for SpoutExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpoutExecutor").field("context", &self.context).finish_non_exhaustive()
    }
}

struct Turn {
    stats: LocalStats,
    histogram: Histogram<u64>,
    emit_error: Option<EmitError>,
    active: bool,
}

impl SpoutExecutor {
    /// Runs the task to the end. Never panics on plugin failures: they are
    /// reported through the run control.
    pub fn run(mut self) {
        let mut turn = Turn {
            stats: LocalStats::default(),
            histogram: new_histogram(),
            emit_error: None,
            active: false,
        };
        let name = format!("spout \"{}\" task {}", self.context.component, self.context.task_id);
        if let Err(e) = self.spout.open(&self.context).into_result() {
            self.run.fail(format!("{name}: open failed: {e}"));
            return self.finish(&mut turn);
        }
        let acking = self.transfer.acking();
        // Storm: with ackers the receive queue is read every turn; without,
        // once every `spout_recvq_skips` turns (a countdown, not a modulo).
        let skips = if acking { 1 } else { self.recvq_skips.max(1) };
        let mut until_receive = 0u32;
        let (mut spout_counter, mut bp_counter) = (0u32, 0u32);
        let mut iteration = 0u64;
        loop {
            let state = self.run.state();
            if state == RunState::Stopping {
                break;
            }
            if state == RunState::Running && !turn.active {
                turn.active = true;
                self.call(&mut turn, &name, |s| s.activate());
            } else if state == RunState::Draining && turn.active {
                turn.active = false;
                self.call(&mut turn, &name, |s| s.deactivate());
                self.transfer.flush_all(&mut turn.stats);
            }
            // 1. receive queue
            let received = if until_receive == 0 {
                until_receive = skips - 1;
                self.drain_control(&mut turn, &name)
            } else {
                until_receive -= 1;
                0
            };
            iteration += 1;
            // 2. gate
            let gated = self.max_pending.is_some_and(|max| self.tracker.pending.len() >= max);
            // 3. pending emits
            let clear = self.transfer.flush_pending(&mut turn.stats);
            if iteration % 64 == 0 {
                self.transfer.flush_if_due(Instant::now(), &mut turn.stats);
                self.publish(&mut turn);
            }
            // 4. emit
            let mut emitted = 0;
            if turn.active && !gated && clear && !self.poisoned {
                emitted = self.next_tuple(&mut turn, &name, iteration % 64 == 1);
            }
            // 5. wait
            if self.transfer.has_pending() {
                let started = Instant::now();
                bp_counter = self.backpressure_wait.idle(bp_counter);
                turn.stats.add(StatField::BackpressureNanos, started.elapsed().as_nanos() as u64);
                continue;
            }
            bp_counter = 0;
            if emitted == 0 && received == 0 {
                self.transfer.flush_all(&mut turn.stats);
                self.publish(&mut turn);
                let started = Instant::now();
                spout_counter = self.spout_wait.idle(spout_counter);
                if gated {
                    turn.stats.add(StatField::MaxPendingNanos, started.elapsed().as_nanos() as u64);
                }
            } else if emitted > 0 {
                spout_counter = 0;
            }
        }
        self.finish(&mut turn);
    }

    /// Calls `next_tuple` and settles what it emitted; returns the tuples emitted.
    /// Busy time is sampled: when `timed`, the plugin call is timed and
    /// counts 64 times (two clock reads per call stay off the hot path).
    fn next_tuple(&mut self, turn: &mut Turn, name: &str, timed: bool) -> u64 {
        let before = turn.stats.get(StatField::Emitted);
        let bytes_before = self.transfer.emitted_bytes;
        self.tracker.begin_call();
        let result = {
            let mut output = HostOutput {
                transfer: &mut self.transfer,
                stats: &mut turn.stats,
                error: &mut turn.emit_error,
                side: Side::Spout { tracker: &mut self.tracker, task: self.context.task_id },
            };
            let output: OutputMut<'_> = Output_TO::from_ptr(&mut output, TD_Opaque);
            if timed {
                let started = Instant::now();
                let result = self.spout.next_tuple(output).into_result();
                turn.stats.add(StatField::BusyNanos, started.elapsed().as_nanos() as u64 * 64);
                result
            } else {
                self.spout.next_tuple(output).into_result()
            }
        };
        let emitted = turn.stats.get(StatField::Emitted) - before;
        if let Err(e) = result {
            self.plugin_error(turn, name, "next_tuple", e);
        }
        if let Some(e) = turn.emit_error.take() {
            count_error(&mut turn.stats, name, &format!("next_tuple: {e}"));
        }
        for id in std::mem::take(&mut self.tracker.ack_now) {
            self.ack(turn, name, id, None);
        }
        if emitted > 0 {
            if let Some((throttler, unit)) = &mut self.throttle {
                let n = match unit {
                    ThrottleUnit::Tuples => emitted,
                    ThrottleUnit::Bytes => self.transfer.emitted_bytes - bytes_before,
                };
                let outcome = self.run.throttle(throttler, n);
                turn.stats.add(StatField::ThrottleNanos, outcome.waited.as_nanos() as u64);
            }
        }
        emitted
    }

    /// Handles acker replies and timeout ticks; returns the messages handled.
    fn drain_control(&mut self, turn: &mut Turn, name: &str) -> u64 {
        let mut handled = 0;
        loop {
            match self.control.try_recv() {
                Ok(Control::Replies(replies)) => {
                    handled += replies.len() as u64;
                    for reply in replies {
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
                }
                Ok(Control::TimeoutTick) => {
                    handled += 1;
                    let expired: Vec<_> =
                        self.tracker.pending.rotate().map(|(_, p)| p.message_id).collect();
                    for id in expired {
                        self.fail(turn, name, id, StatField::FailedTimeout);
                    }
                }
                Ok(Control::TickTuple) => handled += 1,
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return handled,
            }
        }
    }

    fn ack(
        &mut self,
        turn: &mut Turn,
        name: &str,
        id: MessageId,
        latency: Option<std::time::Duration>,
    ) {
        if let Some(latency) = latency {
            let _ = turn.histogram.record(latency.as_micros().max(1) as u64);
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
        f: impl FnOnce(&mut SpoutBox) -> abi_stable::std_types::RResult<(), PluginError>,
    ) {
        if self.poisoned {
            return;
        }
        if let Err(e) = f(&mut self.spout).into_result() {
            self.plugin_error(turn, name, "call", e);
        }
    }

    fn plugin_error(&mut self, turn: &mut Turn, name: &str, what: &str, e: PluginError) {
        if !e.is_panic() {
            return count_error(&mut turn.stats, name, &format!("{what}: {e}"));
        }
        if !self.restarts.allow(Instant::now()) {
            self.poisoned = true;
            self.run
                .fail(format!("{name}: {what} {e}; restart limit reached, stopping the topology"));
            return;
        }
        tracing::warn!("{name}: {what} {e}; rebuilding the instance");
        turn.stats.add(StatField::Restarts, 1);
        match (self.constructor)(self.config.as_str().into()).into_result() {
            Ok(ComponentBox::Spout(spout)) => {
                self.spout = spout;
                if let Err(e) = self.spout.open(&self.context).into_result() {
                    self.run.fail(format!("{name}: open failed after restart: {e}"));
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
            Ok(_) => {
                self.run.fail(format!("{name}: constructor returned a component of another kind"))
            }
            Err(e) => self.run.fail(format!("{name}: rebuilding after a panic failed: {e}")),
        }
    }

    fn publish(&mut self, turn: &mut Turn) {
        turn.stats.set(StatField::Pending, self.tracker.pending.len() as u64);
        let unsent = u64::from(self.transfer.has_pending() || self.transfer.has_unsent());
        turn.stats.set(StatField::Unsent, unsent);
        turn.stats.set(StatField::Active, u64::from(turn.active));
        self.shared.publish(&turn.stats);
        self.shared.latency.merge_from(&mut turn.histogram);
    }

    /// Fails what is still pending (reason: shutdown), closes, publishes.
    fn finish(&mut self, turn: &mut Turn) {
        let name = format!("spout \"{}\" task {}", self.context.component, self.context.task_id);
        let leftover: Vec<MessageId> =
            self.tracker.pending.drain_all().map(|(_, p)| p.message_id).collect();
        for id in leftover {
            self.fail(turn, &name, id, StatField::FailedShutdown);
        }
        if self.poisoned {
            // Not called again after the panic that exhausted the restarts.
        } else if let Err(e) = self.spout.close().into_result() {
            tracing::warn!("{name}: close: {e}");
        }
        turn.active = false;
        self.transfer.flush_all(&mut turn.stats);
        self.publish(turn);
    }
}
