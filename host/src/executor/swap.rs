//! The executor's side of a live swap ([`Swap`](crate::control::Swap)) as
//! pure logic: [`SwapMachine`] takes what the task observed (the time, the
//! run state, whether its pending trees drained, the verdict) and returns
//! what the task must do next ([`Action`]). It calls no plugin code and
//! reads no channel, so it is tested on its own, and the model test at the
//! end of this file runs it under random interleavings.
//!
//! # Phases
//! ```text
//!   spout with a drain:  Draining ──drained or overdue──► TakeOver
//!   bolt, or ids survive:                                 TakeOver
//!   TakeOver ──prepared──► Held ──verdict──► Commit | Discard
//!   any phase before Held ──abort, or the run drains──► Abandon
//! ```
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
            (Phase::Draining { .. }, None) if drained => Action::TakeOver { fail_pending: false },
            (Phase::Draining { until }, None) if now >= until => {
                Action::TakeOver { fail_pending: true }
            }
            (Phase::Draining { .. }, None) => Action::Wait,
        }
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

#[cfg(test)]
mod tests;
