//! The acker task: a thin loop around an [`AckLedger`].
//!
//! # State machine
//! Block on the acker's channel (an idle acker costs no CPU; right after a
//! batch it first polls the channel for `spin`, see the wait module's
//! deliberate differences), then for each
//! message batch apply every message to the ledger, collect completions per
//! spout task, and send each spout its replies in one control message. A
//! `Tick` rotates the ledger; expired roots are dropped silently, as in
//! Storm: the spout times them out by itself. The loop ends when the run
//! state is `Stopping`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::ledger::{AckLedger, Outcome};
use super::msg::{AckerInput, AckerMsg, Reply, ReplyKind};
use crate::control::{Control, RunControl, RunState};
use crate::ids::EdgeId;

/// How long an idle acker blocks before it looks at the run state again. A
/// change of run state wakes it at once ([`AckerInput::Wake`]).
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// An acker task.
#[derive(Debug)]
pub struct AckerTask {
    /// The pending trees.
    pub ledger: AckLedger,
    /// Incoming messages.
    pub input: Receiver<AckerInput>,
    /// Control queues of every task, indexed by task id.
    pub spouts: Vec<Sender<Control>>,
    /// Run state.
    pub run: Arc<RunControl>,
    /// How long it polls its queue when it runs out of messages before it
    /// blocks (the bolt wait's `spin_micros`).
    pub spin: Duration,
}

impl AckerTask {
    /// Runs until the topology stops.
    pub fn run(mut self) {
        // The ledger's per-update data, into this thread's memory.
        self.ledger.rehome();
        let mut replies: Vec<Vec<Reply>> = self.spouts.iter().map(|_| Vec::new()).collect();
        // True after a batch of messages: the next wait spins first.
        let mut busy = false;
        loop {
            if busy && self.input.is_empty() {
                let input = &self.input;
                crate::wait::spin_until(self.spin, || !input.is_empty());
            }
            busy = false;
            match self.input.recv_timeout(IDLE_WAIT) {
                Ok(AckerInput::Msgs(msgs)) => {
                    for msg in msgs {
                        self.apply(msg, &mut replies);
                    }
                    self.send(&mut replies);
                    busy = true;
                }
                Ok(AckerInput::Tick) => {
                    let dropped = self.ledger.rotate();
                    if dropped > 0 {
                        tracing::debug!(dropped, "acker dropped expired trees");
                    }
                }
                Ok(AckerInput::Sync(done)) => {
                    done.fetch_add(1, std::sync::atomic::Ordering::Release);
                }
                Ok(AckerInput::Wake) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            if self.run.state() == RunState::Stopping && self.input.is_empty() {
                return;
            }
        }
    }

    fn apply(&mut self, msg: AckerMsg, replies: &mut [Vec<Reply>]) {
        let completion = match msg {
            AckerMsg::Init { root, val, spout_task } => {
                self.ledger.init(root, EdgeId(val), spout_task)
            }
            AckerMsg::Ack { root, val } => self.ledger.ack(root, EdgeId(val)),
            AckerMsg::Fail { root } => self.ledger.fail(root),
            AckerMsg::Reset { root } => {
                if let Some(task) = self.ledger.reset_timeout(root) {
                    replies[task.0 as usize].push(Reply {
                        root,
                        kind: ReplyKind::Reset,
                        at: Instant::now(),
                    });
                }
                None
            }
        };
        if let Some(c) = completion {
            let kind = match c.outcome {
                Outcome::Acked => ReplyKind::Acked,
                Outcome::Failed => ReplyKind::Failed,
            };
            replies[c.spout_task.0 as usize].push(Reply { root: c.root, kind, at: Instant::now() });
        }
    }

    fn send(&self, replies: &mut [Vec<Reply>]) {
        for (task, batch) in replies.iter_mut().enumerate() {
            if !batch.is_empty() {
                let _ = self.spouts[task].send(Control::Replies(std::mem::take(batch)));
            }
        }
    }
}
