//! The control plane shared by every thread of a run: the run state
//! ([`RunControl`], [`RunState`]), the per-task control messages
//! ([`Control`], the acker's [`Reply`] among them) and the run's error
//! types ([`RunError`], [`ReloadError`]).
//!
//! The executors, the ackers, the system thread and the
//! [`RunningTopology`](crate::runtime::RunningTopology) handle all depend on
//! this module; it depends only on the layers below them (the queues'
//! types, plugins, the topology, the canceler; see `host/tests/layers.rs`).

mod error;

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

pub use error::{NotLive, ReloadError, ReshapeError, RunError, Shared, TaskName};

use crate::cancel::Canceler;
use crate::clock::SystemClock;
use crate::ids::RootId;
use crate::plugin::{BoltObj, Factory, SpoutObj};
use crate::queue::batch::{Batch, QueueBytes};
use crate::queue::{SourceTable, StreamRoutes};
use crate::throttle::{RealSleeper, Sleeper, ThrottleOutcome, Throttler};
use squall_plugin_api::State;
use std::sync::Arc;

/// The topology's run state, shared by every thread.
#[derive(Debug)]
pub struct RunControl {
    state: AtomicU8,
    fatal: Mutex<Option<RunError>>,
    /// Canceled when the drain begins: ends every throttled wait, and every
    /// host-side sleep that waits on it, at once (see [`RunControl::advance`]).
    pub canceler: Canceler,
    /// When the run's time is up (`squall run --duration`); set at most once.
    deadline: OnceLock<Instant>,
    /// Wakes every task and acker that blocks on its queues, so that each
    /// sees a new run state at once (set by the runtime when it starts).
    waker: OnceLock<StateWaker>,
}

/// What [`RunControl::set_waker`] takes: called on every change of state
/// from `Draining` on.
pub struct StateWaker(pub Box<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for StateWaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateWaker")
    }
}

/// The phases of a run (see `runtime`'s shutdown protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum RunState {
    /// Spouts are active (unless deactivated one by one).
    Running = 0,
    /// Spouts are deactivated; in-flight trees complete or time out.
    Draining = 1,
    /// Every executor leaves its loop, calls cleanup/close and exits.
    Stopping = 2,
}

impl Default for RunControl {
    fn default() -> Self {
        Self {
            state: AtomicU8::new(RunState::Running as u8),
            fatal: Mutex::new(None),
            canceler: Canceler::new(),
            deadline: OnceLock::new(),
            waker: OnceLock::new(),
        }
    }
}

impl RunControl {
    /// The current state (a relaxed load: executors poll it once per turn).
    #[inline]
    pub fn state(&self) -> RunState {
        match self.state.load(Ordering::Relaxed) {
            0 => RunState::Running,
            1 => RunState::Draining,
            _ => RunState::Stopping,
        }
    }

    /// Moves to `state` if it is later than the current one.
    ///
    /// From `Draining` on, every throttled wait is canceled, at once and for
    /// good (a canceled throttler never waits again). A spout pays after use,
    /// so its wait is for an emit the drain forbids anyway; without the cancel
    /// the drain would sit out the rest of that wait (up to a whole period, or
    /// `shutdown_timeout_secs`). A bolt edge's backlog is executed without its
    /// throttle, so the drain finishes the trees in flight instead of waiting
    /// out the rate.
    pub fn advance(&self, state: RunState) {
        let before = self.state.fetch_max(state as u8, Ordering::AcqRel);
        if state >= RunState::Draining {
            self.canceler.cancel();
            if (state as u8) > before {
                if let Some(StateWaker(wake)) = self.waker.get() {
                    wake();
                }
            }
        }
    }

    /// Sets what wakes the blocked tasks on a change of state (only the
    /// first call counts). Tasks block on their queues for up to a second
    /// when idle; the wake makes them see `Draining` and `Stopping` at once.
    pub fn set_waker(&self, wake: StateWaker) {
        let _ = self.waker.set(wake);
    }

    /// Sets the run's deadline (`--duration`); only the first call counts.
    pub fn set_deadline(&self, at: Instant) {
        let _ = self.deadline.set(at);
    }

    /// The run's deadline, if it has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline.get().copied()
    }

    /// Throttles `n` units with the run's canceler. A wait that ends at or
    /// past the deadline starts the drain at once.
    ///
    /// Why: the period mode hands out its budget in lumps at period starts,
    /// and a run whose duration is a multiple of the period ends exactly where
    /// the next lump begins. The run loop only notices the deadline on its
    /// next poll, so without this check the executor, just woken at the
    /// deadline, would spend a whole extra period's budget (10 % more tuples
    /// in a 5 s run at the default 500 ms period) before the drain begins.
    /// Only a wait that happened pays for the clock read.
    #[inline]
    pub fn throttle(&self, throttler: &mut Throttler, n: u64) -> ThrottleOutcome {
        self.throttle_with(throttler, n, &mut RealSleeper)
    }

    /// As [`RunControl::throttle`], waiting through `sleeper` (a spout's
    /// serves its control queue while it waits).
    #[inline]
    pub fn throttle_with<S: Sleeper + ?Sized>(
        &self,
        throttler: &mut Throttler,
        n: u64,
        sleeper: &mut S,
    ) -> ThrottleOutcome {
        let outcome = throttler.throttle_with(n, &SystemClock, sleeper, &self.canceler);
        if !outcome.waited.is_zero()
            && self.deadline.get().is_some_and(|&deadline| Instant::now() >= deadline)
        {
            self.advance(RunState::Draining);
        }
        outcome
    }

    /// Records a fatal error (the first one wins), logs it, and starts draining.
    pub fn fail(&self, error: RunError) {
        if let Ok(mut fatal) = self.fatal.lock() {
            if fatal.is_none() {
                tracing::error!("{error}");
                *fatal = Some(error);
            }
        }
        self.advance(RunState::Draining);
    }

    /// The fatal error, if any.
    pub fn fatal(&self) -> Option<RunError> {
        self.fatal.lock().ok().and_then(|f| f.clone())
    }
}

/// How a tree ended, as the acker reports it to the spout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyKind {
    /// Every edge was acked.
    Acked,
    /// Some task failed a tuple of the tree.
    Failed,
    /// A task asked to restart the tree's timeout.
    Reset,
}

/// An acker's message to a spout task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// The tree.
    pub root: RootId,
    /// What happened.
    pub kind: ReplyKind,
    /// When the acker saw the tree end: complete latency is measured up to
    /// here (as Storm's acker does), not up to when the spout reads the reply.
    pub at: std::time::Instant,
}

/// Control messages to an executor. They travel on their own unbounded
/// channel, so they never wait behind data tuples (STORM-2359).
#[derive(Debug)]
pub enum Control {
    /// Acker replies (spouts only).
    Replies(Vec<Reply>),
    /// Rotate the message-timeout maps (every `message_timeout_secs`).
    TimeoutTick,
    /// Deliver a tick tuple on `__tick` (bolts with `tick_tuple_freq_secs`).
    TickTuple,
    /// Activate the spout again after a [`Control::Deactivate`] (Storm's
    /// `activate` of one topology). Ignored while draining.
    Activate,
    /// Deactivate the spout: `deactivate` is called once and `next_tuple`
    /// no more, while acks and timeouts keep flowing (Storm's `deactivate`).
    Deactivate,
    /// Replace the bolt instance between two tuples (a live reload; bolts
    /// only). Boxed: it is much larger than the other messages.
    SwapBolt(Box<BoltSwap>),
    /// Replace the spout instance (a live reload; spouts only): deactivate,
    /// drain, hand over, activate. Boxed like [`Control::SwapBolt`].
    SwapSpout(Box<SpoutSwap>),
    /// Replace the task's routes (a live reload added or replaced tasks
    /// downstream): everything already emitted is handed to the old targets
    /// first.
    Rewire(Box<Rewire>),
    /// Leave the topology (a live reload retired the task, or rolls back one
    /// it added): a bolt executes what is queued, hands over its state, and
    /// exits. Sent once no upstream task routes to it any more.
    Retire(Retire),
    /// The reloader's verdict on the swap of reload `reload` (see [`Swap`]):
    /// read between two tuples like every other control message.
    Verdict {
        /// The reload the verdict belongs to ([`Swap::reload`]).
        reload: u64,
        /// True commits; false keeps the old instance.
        commit: bool,
    },
    /// Nothing to do: ends a blocking wait so that the task sees a new run
    /// state (see [`RunControl::set_waker`]).
    Wake,
    /// The bolt's own wake handle was called (contract 1.3): the executor
    /// calls the bolt's `woken` (bolts only).
    Woken,
    /// No more tuples will come for now (the end of a harness feed, a
    /// drain): a windowed bolt fires the windows its buffered tuples wait
    /// for, then acks them (windowed bolts only; others ignore it).
    FlushWindows,
    /// Checkpoint `n` starts (spouts only): report the position, then send
    /// the barrier downstream behind everything emitted (see `crate::state`).
    Barrier(u64),
    /// Checkpoint `n` is committed: everything emitted before its barrier
    /// is durable (spouts may acknowledge their broker).
    Committed(u64),
    /// Checkpoint `n` was abandoned (bolts): stop aligning on its barrier
    /// and execute what was held back for it.
    AbortCheckpoint(u64),
    /// Simulated time (`squall test`): once every control message before
    /// this one is handled, a windowed bolt runs the windows due at the
    /// simulated clock, the task sends what it batched and publishes its
    /// counters, then adds one to the counter. When every task has, the
    /// ticks sent before it have been executed and their emits are counted.
    Sync(Arc<std::sync::atomic::AtomicUsize>),
}

/// New routes for one task (see [`Control::Rewire`]).
#[derive(Debug)]
pub struct Rewire {
    /// The component's output streams with their routers, by stream index.
    pub streams: Vec<StreamRoutes>,
    /// Every task's data queue, by task id.
    pub queues: Vec<Option<Sender<Batch>>>,
    /// Every task's queue byte budget, by task id.
    pub queue_bytes: Vec<Option<Arc<QueueBytes>>>,
    /// Bolts downstream of replaced tasks: the new task → component table.
    pub sources: Option<Arc<SourceTable>>,
    /// Told the task id once the old routes are flushed and the new ones in place.
    pub done: Sender<u32>,
}

/// How a retiring task hands over (see [`Control::Retire`]).
#[derive(Debug)]
pub struct Retire {
    /// Where the task sends its saved state (`None`: it keeps none), with
    /// its task id, once its queue is empty. `None`: the state is dropped.
    pub state: Option<Sender<(u32, Option<State>)>>,
}

/// How a task that a live reload starts begins (see [`Start`]).
#[derive(Debug)]
pub enum Start {
    /// A new component's task: prepare, report the outcome, and on failure
    /// exit without failing the run (the reload rolls back).
    Added {
        /// The outcome of `prepare`, with the task id.
        prepared: Sender<(u32, Result<(), ReloadError>)>,
    },
    /// A task of a component whose parallelism changed: wait for the state
    /// its keys had in the retired tasks, restore it, then prepare.
    Resized {
        /// The state (`None`: none) from the reloader.
        state: Receiver<Option<State>>,
        /// The longest it waits for the state before it starts fresh.
        limit: Duration,
        /// The outcome of restore and prepare, with the task id.
        prepared: Sender<(u32, Result<(), ReloadError>)>,
    },
}

/// A live swap of one task's instance, in two phases so that every task of
/// every changed component swaps, or none does. The executor's side is the
/// state machine [`SwapMachine`](crate::executor::swap::SwapMachine).
///
/// 0. A spout first deactivates the old instance and lets its pending trees
///    complete or fail back to it, for at most `drain` (none when its ids
///    survive the swap, see `Spout::IDS_SURVIVE_SWAP`: the pending trees are
///    then handed to the new instance). A bolt goes on at once.
/// 1. Prepare: the old instance's `save_state` goes to the new instance's
///    `restore_state`, then the new instance is prepared (opened). The
///    outcome goes to `ready`. The old instance goes on meanwhile: a bolt
///    keeps executing tuples with it, a spout stays deactivated (and the
///    acker replies it receives wait for the verdict, so its state stays as
///    it was saved).
/// 2. Verdict: a [`Control::Verdict`] with this `reload`, read between two
///    tuples, never waited for. Commit: a bolt whose state changed since
///    phase 1 hands the state it holds now to a fresh instance (built,
///    restored and prepared again; the phase 1 instance is cleaned up), and
///    the new instance continues with the same queue and anchors (a spout is
///    activated); `cleanup` (`close`) on the old one. Abort: the new
///    instance, if it was prepared, is cleaned up and dropped; the old one
///    goes on (a spout is activated again).
///
/// The executor reports the outcome and its pause on `done`.
#[derive(Debug)]
pub struct Swap<T> {
    /// The new instance, built but not prepared.
    pub instance: T,
    /// How to rebuild the new version (after a panic, or at the commit of a
    /// bolt whose state changed).
    pub factory: Factory,
    /// The new version's config, for rebuilding.
    pub config: String,
    /// Spouts only: the longest the old instance's pending trees may take
    /// to complete before the rest are failed back to it; `None` hands them
    /// to the new instance with no drain.
    pub drain: Option<Duration>,
    /// The reload this swap belongs to: its verdict carries the same number.
    pub reload: u64,
    /// Phase 1's outcome, with the task: `Ok` when the new instance took
    /// over the state and prepared.
    pub ready: Sender<(u32, Result<(), ReloadError>)>,
    /// Where the executor reports how the swap ended.
    pub done: Sender<SwapDone>,
}

/// A live swap of a bolt task's instance.
pub type BoltSwap = Swap<BoltObj>;

/// A live swap of a spout task's instance.
pub type SpoutSwap = Swap<SpoutObj>;

/// How one task's swap ended.
#[derive(Debug, Clone)]
pub struct SwapDone {
    /// The task.
    pub task: u32,
    /// True when the new instance runs now.
    pub committed: bool,
    /// Why a committed verdict could not be carried out (the task kept its
    /// old instance); `None` otherwise.
    pub error: Option<ReloadError>,
    /// How long the task executed no tuple (a spout: emitted none) because
    /// of the swap.
    pub pause: Duration,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn each_later_run_state_wakes_the_tasks_once() {
        let run = RunControl::default();
        let (tx, wakes) = crossbeam_channel::unbounded();
        run.set_waker(StateWaker(Box::new(move || {
            let _ = tx.send(());
        })));
        run.advance(RunState::Running);
        assert_eq!(wakes.try_iter().count(), 0, "no change, no wake");
        run.advance(RunState::Draining);
        assert_eq!(wakes.try_iter().count(), 1);
        run.advance(RunState::Draining);
        assert_eq!(wakes.try_iter().count(), 0, "the same state again wakes nobody");
        run.advance(RunState::Stopping);
        run.advance(RunState::Draining);
        assert_eq!(wakes.try_iter().count(), 1, "Stopping wakes; going back is ignored");
        assert_eq!(run.state(), RunState::Stopping);
    }

    #[test]
    fn run_state_only_moves_forward() {
        let c = RunControl::default();
        c.advance(RunState::Stopping);
        c.advance(RunState::Draining);
        assert_eq!(c.state(), RunState::Stopping);
        assert!(c.canceler.is_canceled());
    }

    #[test]
    fn the_drain_cancels_throttled_waits() {
        let c = RunControl::default();
        assert!(!c.canceler.is_canceled());
        c.advance(RunState::Draining);
        assert!(c.canceler.is_canceled(), "a drain does not sit out throttled waits");
    }

    #[test]
    fn the_first_fatal_error_wins_and_starts_the_drain() {
        let c = RunControl::default();
        c.fail(RunError::ThreadDied { thread: "a".into(), cause: "x".into() });
        c.fail(RunError::ThreadDied { thread: "b".into(), cause: "y".into() });
        assert_eq!(c.state(), RunState::Draining);
        assert!(matches!(c.fatal(), Some(RunError::ThreadDied { thread, .. }) if thread == "a"));
    }

    #[test]
    fn a_throttled_wait_that_ends_past_the_deadline_starts_the_drain() {
        use crate::throttle::ThrottleMode;

        let c = RunControl::default();
        c.set_deadline(Instant::now());
        // 1000 units/s with a 5 ms period: a budget of 5; the fifth call
        // exhausts it and waits for the next period, past the deadline.
        let mut t = Throttler::new(ThrottleMode::Period, 1000, Duration::from_millis(5));
        for _ in 0..4 {
            assert!(c.throttle(&mut t, 1).waited.is_zero());
            assert_eq!(c.state(), RunState::Running, "no wait, no clock read, no drain");
        }
        assert!(!c.throttle(&mut t, 1).waited.is_zero());
        assert_eq!(c.state(), RunState::Draining);
        assert!(c.canceler.is_canceled());
    }

    #[test]
    fn a_throttled_wait_before_the_deadline_keeps_the_run_going() {
        use crate::throttle::ThrottleMode;

        let c = RunControl::default();
        c.set_deadline(Instant::now() + Duration::from_secs(3600));
        let mut t = Throttler::new(ThrottleMode::Period, 1000, Duration::from_millis(5));
        let waited: Duration = (0..6).map(|_| c.throttle(&mut t, 1).waited).sum();
        assert!(!waited.is_zero());
        assert_eq!(c.state(), RunState::Running);
        assert!(!c.canceler.is_canceled());
    }
}
