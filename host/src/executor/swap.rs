//! The executor's side of a live swap ([`Swap`](crate::control::Swap)) as
//! pure logic: [`SwapMachine`] takes what the task observed (the time, the
//! run state, whether its pending trees drained, the verdict) and returns
//! what the task must do next ([`Action`]). It calls no plugin code and
//! reads no channel, so it is tested on its own, and the model test at the
//! end of this file runs it under random interleavings.
//!
//! Two smaller machines cover the other changes a reload makes to a
//! running task: [`RewireMachine`] (new routes) and [`RetireMachine`] (a
//! task that leaves, handing its state over).
//!
//! # Phases
//! ```text
//!   spout with a drain:  Draining ──drained or overdue──► TakeOver
//!   bolt, or ids survive:                                 TakeOver
//!   TakeOver ──prepared──► Held ──verdict──► Commit | Discard
//!   bolt: TakeOver ──preparing──► Preparing ──prepared──► Held
//!   any phase before Held ──abort, or the run drains──► Abandon
//! ```
//!
//! A bolt prepares its new instance on a thread of its own (`Preparing`):
//! its old instance executes on meanwhile, however long `prepare` takes,
//! and an abort (the reloader's deadline) ends the swap at once; the
//! instance still preparing is cleaned up by that thread when `prepare`
//! returns.
//!
//! A held task waits for its verdict even when the run begins to drain:
//! the reloader always sends one, and deciding alone would let one task
//! swap while another keeps its old instance.
//!
//! Nothing in it waits: the verdict is a control message the task reads
//! between two tuples, and a task holding a prepared instance keeps running
//! its old one. So a spout's drain inside a reload can always complete,
//! whatever the order in which its tasks and the bolts downstream receive
//! their swaps.

use std::time::{Duration, Instant};

/// What the reloader decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every task prepared: the new instances run from now on.
    Commit,
    /// Something failed before the commit point: every old instance stays.
    Abort,
}

/// Where one task is in its swap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// A spout's old instance is deactivated; its pending trees complete
    /// until `until`, when the rest are failed back to it.
    Draining {
        /// When the drain gives up.
        until: Instant,
    },
    /// The new instance may take over (state handed, prepared) now.
    TakeOver,
    /// The new instance is being prepared off the task thread; the old one
    /// runs.
    Preparing,
    /// The new instance is prepared; the old one runs until the verdict.
    Held,
}

/// What the task does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing yet: run the old instance as usual.
    Wait,
    /// Hand the state over and prepare (open) the new instance, then report
    /// to the reloader and call [`SwapMachine::prepared`]. `fail_pending`:
    /// the drain is overdue, fail what is still pending back to the old
    /// instance first.
    TakeOver {
        /// Fail the old instance's remaining trees first.
        fail_pending: bool,
    },
    /// The verdict committed: the new instance replaces the old one.
    Commit,
    /// Aborted after the new instance was prepared: clean it up; the old
    /// one goes on.
    Discard,
    /// Aborted before anything was prepared: the old one goes on.
    Abandon,
}

/// One task's swap, from the request to its end.
#[derive(Debug, Clone)]
pub struct SwapMachine {
    reload: u64,
    phase: Phase,
    verdict: Option<Verdict>,
    started: Instant,
}

impl SwapMachine {
    /// A swap for reload `reload` that arrived at `now`. `drain`: a spout
    /// whose old instance drains first, for at most this long; `None`: a
    /// bolt, or a spout whose ids survive the swap.
    pub fn new(reload: u64, now: Instant, drain: Option<Duration>) -> Self {
        let phase = match drain {
            Some(d) => Phase::Draining { until: now + d },
            None => Phase::TakeOver,
        };
        Self { reload, phase, verdict: None, started: now }
    }

    /// The reload this swap belongs to.
    pub fn reload(&self) -> u64 {
        self.reload
    }

    /// Where the swap is.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// When the request arrived: the swap's pause is measured from there.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// True once the new instance is prepared and the old one waits for
    /// the verdict.
    pub fn held(&self) -> bool {
        self.phase == Phase::Held
    }

    /// Takes a verdict read from the control queue. One for another reload
    /// (a late one, for a swap that has already ended) is ignored; so is a
    /// second one. Returns true when it was taken.
    pub fn verdict(&mut self, reload: u64, verdict: Verdict) -> bool {
        if reload != self.reload || self.verdict.is_some() {
            return false;
        }
        self.verdict = Some(verdict);
        true
    }

    /// What to do now, given the time, whether the run still runs (not
    /// draining or stopping) and whether the old instance has no pending
    /// tree left. An action other than [`Action::Wait`] and
    /// [`Action::TakeOver`] ends the swap.
    pub fn poll(&self, now: Instant, running: bool, drained: bool) -> Action {
        match (self.phase, self.verdict) {
            (Phase::Held, Some(Verdict::Commit)) => Action::Commit,
            (Phase::Held, Some(Verdict::Abort)) => Action::Discard,
            (Phase::Held, None) => Action::Wait,
            (_, _) if !running => Action::Abandon,
            // A verdict before this task was ready can only be an abort (the
            // reloader commits once every task is ready); a commit here
            // would be a protocol error, and keeping the old is the safe side.
            (_, Some(_)) => Action::Abandon,
            (Phase::TakeOver, None) => Action::TakeOver { fail_pending: false },
            (Phase::Preparing, None) => Action::Wait,
            (Phase::Draining { .. }, None) if drained => Action::TakeOver { fail_pending: false },
            (Phase::Draining { until }, None) if now >= until => {
                Action::TakeOver { fail_pending: true }
            }
            (Phase::Draining { .. }, None) => Action::Wait,
        }
    }

    /// The take-over began off the task thread: the swap waits (the old
    /// instance runs) until [`Self::prepared`], or ends on an abort.
    pub fn preparing(&mut self) {
        if self.phase == Phase::TakeOver {
            self.phase = Phase::Preparing;
        }
    }

    /// True while the new instance is being prepared off the task thread.
    pub fn is_preparing(&self) -> bool {
        self.phase == Phase::Preparing
    }

    /// The take-over's outcome: prepared, the swap waits for its verdict
    /// (true); it failed, the swap ends and the old instance goes on (false).
    pub fn prepared(&mut self, ok: bool) -> bool {
        if ok {
            self.phase = Phase::Held;
        }
        ok
    }
}

/// How long a task taking new routes waits for its batches to old tasks
/// before it warns (it goes on waiting: a retired task leaves only once
/// every batch for it has arrived).
pub const REWIRE_WARN_AFTER: Duration = Duration::from_secs(10);

/// What a task taking new routes does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewireAction {
    /// Batches for tasks the new routes no longer reach still wait for
    /// room: send them first.
    Wait,
    /// They have waited [`REWIRE_WARN_AFTER`]: say so once, and wait on.
    Warn,
    /// Every one of them arrived: tell the reloader.
    Done,
}

/// One task's side of taking new routes ([`Control::Rewire`]): the new
/// routes are installed at once, so taking them never pauses the task (it
/// emits as its downstream queues allow, as always); the
/// batches it had made for tasks that the new routes no longer reach go on
/// to those tasks, and the reloader hears `done` only once all of them
/// have arrived. Only then does it retire those tasks ([`RetireMachine`]),
/// so none leaves with a batch still on its way to it.
///
/// [`Control::Rewire`]: crate::control::Control::Rewire
#[derive(Debug, Clone)]
pub struct RewireMachine {
    /// Tasks the old routes reached and the new ones do not, sorted.
    left_behind: Vec<u32>,
    since: Instant,
    warned: bool,
}

impl RewireMachine {
    /// New routes that reach `new` (task ids) replace routes that reached
    /// `old`, at `now`.
    pub fn new(now: Instant, old: &[u32], new: &[u32]) -> Self {
        let mut left_behind: Vec<u32> = old.iter().filter(|t| !new.contains(t)).copied().collect();
        left_behind.sort_unstable();
        left_behind.dedup();
        Self { left_behind, since: now, warned: false }
    }

    /// The tasks the new routes no longer reach, sorted.
    pub fn left_behind(&self) -> &[u32] {
        &self.left_behind
    }

    /// What to do, given whether a batch for one of
    /// [`left_behind`](Self::left_behind) still waits to be sent.
    pub fn poll(&mut self, now: Instant, pending_to_left_behind: bool) -> RewireAction {
        if !pending_to_left_behind {
            RewireAction::Done
        } else if !self.warned && now.duration_since(self.since) >= REWIRE_WARN_AFTER {
            self.warned = true;
            RewireAction::Warn
        } else {
            RewireAction::Wait
        }
    }
}

/// What a retiring task does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetireAction {
    /// Something is still queued for it, half executed or waiting to be
    /// sent: execute on.
    Run,
    /// Nothing is left: save the state when asked for it, hand it over and
    /// end the task.
    Leave {
        /// The reloader wants the state (a resize); false: drop it (an
        /// added task of a rolled-back reload).
        hand_state: bool,
    },
}

/// One task's side of leaving a running topology ([`Control::Retire`]).
/// The reloader retires a task only after every task upstream reported its
/// rewire done ([`RewireMachine`]), so nothing new can reach it: once its
/// queue is empty, nothing is half executed and its own sends are out, it
/// has executed everything ever routed to it, and the state it hands over
/// holds all of it.
///
/// [`Control::Retire`]: crate::control::Control::Retire
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetireMachine {
    hand_state: bool,
}

impl RetireMachine {
    /// A retire request; `hand_state`: the reloader takes the state.
    pub fn new(hand_state: bool) -> Self {
        Self { hand_state }
    }

    /// What to do, given whether the task has `left` (queue empty, nothing
    /// half executed or unsent) and whether it is itself still taking new
    /// routes (a retiring task's own batches to old tasks come first).
    pub fn poll(&self, left: bool, rewiring: bool) -> RetireAction {
        if left && !rewiring {
            RetireAction::Leave { hand_state: self.hand_state }
        } else {
            RetireAction::Run
        }
    }
}

#[cfg(test)]
mod tests;
