//! [`RunError`]: why a running topology failed.

use std::fmt;

use crate::ids::TaskId;
use crate::topology::Kind;

/// A task, as errors name it: `spout "words" task 3`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskName {
    /// Spout or bolt.
    pub kind: Kind,
    /// The component's name in the topology.
    pub component: String,
    /// The task.
    pub task: TaskId,
}

impl fmt::Display for TaskName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            Kind::Spout => "spout",
            Kind::Bolt => "bolt",
        };
        write!(f, "{kind} {:?} task {}", self.component, self.task.0)
    }
}

/// Why a running topology failed. The first one recorded
/// ([`RunControl::fail`](super::RunControl::fail)) starts the drain and
/// decides the run's outcome; `cli::exit` maps it to the exit code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RunError {
    /// `open` or `prepare` returned an error or panicked (also after a rebuild).
    #[error("{task}: {call} failed: {cause}")]
    Lifecycle {
        /// The task.
        task: TaskName,
        /// `open`, `prepare`, `open after restart`, ...
        call: &'static str,
        /// The plugin's message.
        cause: String,
    },
    /// A plugin call panicked once too often within the restart window.
    #[error("{task}: {call} {cause}; restart limit reached, stopping the topology")]
    RestartLimit {
        /// The task.
        task: TaskName,
        /// The call that panicked last.
        call: &'static str,
        /// The panic's message.
        cause: String,
    },
    /// The constructor failed while rebuilding an instance after a panic.
    #[error("{task}: rebuilding after a panic failed: {cause}")]
    Rebuild {
        /// The task.
        task: TaskName,
        /// The constructor's message.
        cause: String,
    },
    /// The constructor returned a component of another kind on a rebuild.
    #[error("{task}: constructor returned a component of another kind")]
    WrongKind {
        /// The task.
        task: TaskName,
    },
    /// A host thread (executor loop, acker, system thread) panicked: the
    /// timeouts, ticks or tuples it handled would stop silently.
    #[error("host thread {thread} died: {cause}")]
    ThreadDied {
        /// The thread's name.
        thread: String,
        /// The panic's message.
        cause: String,
    },
    /// Threads still inside plugin code after the stop and its grace period.
    #[error(
        "{} thread(s) did not stop within {grace_secs} s of shutdown (blocked in plugin code): {}",
        threads.len(),
        threads.join(", ")
    )]
    Stuck {
        /// The threads' names.
        threads: Vec<String>,
        /// The grace period they had.
        grace_secs: u64,
    },
}
