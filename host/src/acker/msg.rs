//! The messages of the acker protocol: what tasks send to an acker
//! ([`AckerMsg`], Storm's `__ack_*` streams) and what an acker answers a
//! spout ([`Reply`]).

use crate::ids::{RootId, TaskId};

pub use crate::control::{Reply, ReplyKind};

/// A message to an acker task (Storm's `__ack_init`, `__ack_ack`,
/// `__ack_fail`, `__ack_reset_timeout` streams).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckerMsg {
    /// A spout emitted a tracked tuple: XOR of its edge ids.
    Init {
        /// The tree.
        root: RootId,
        /// XOR of the edges the spout emitted.
        val: u64,
        /// The spout task to report to.
        spout_task: TaskId,
    },
    /// A task acked an input: its edge id XOR the edges of its anchored children.
    Ack {
        /// The tree.
        root: RootId,
        /// The value to XOR in.
        val: u64,
    },
    /// A task failed an input.
    Fail {
        /// The tree.
        root: RootId,
    },
    /// A task asked to restart the tree's timeout.
    Reset {
        /// The tree.
        root: RootId,
    },
}

/// Input of an acker task.
#[derive(Debug)]
pub enum AckerInput {
    /// A batch of messages from one task.
    Msgs(Vec<AckerMsg>),
    /// Rotate the pending map.
    Tick,
    /// Nothing to do: ends the acker's wait so that it sees a new run state.
    Wake,
    /// Simulated time (`squall test`): adds one to the counter once every
    /// message before it is applied and its replies are sent.
    Sync(std::sync::Arc<std::sync::atomic::AtomicUsize>),
}
