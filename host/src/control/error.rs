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

/// Why a live reload, or one task's part in it, did not go through. The
/// reloader collects them into its
/// [`ReloadOutcome`](crate::runtime::reload::ReloadOutcome); the executors
/// report theirs with the task.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReloadError {
    /// The topology is draining: nothing is reloaded any more.
    #[error("the topology is draining")]
    Draining,
    /// The file does not parse, validate or bind (one diagnostic, with its
    /// file:line:col).
    #[error("{0}")]
    Config(String),
    /// A library does not load.
    #[error("{0}")]
    Load(String),
    /// A change that cannot be made live, with its file:line:col and why.
    #[error("{0}")]
    NotLive(String),
    /// A constructor failed, panicked, or built a component of another kind.
    #[error("{at}: {kind} {component:?} ({reference}): {cause}")]
    Construct {
        /// The component's file:line:col.
        at: String,
        /// "spout" or "bolt".
        kind: &'static str,
        /// The component's name.
        component: String,
        /// `alias::Name`.
        reference: String,
        /// What went wrong.
        cause: String,
    },
    /// A plugin call a task made for the reload failed: `save_state` on the
    /// running instance, `restore_state`, `prepare` or `open` on the new one,
    /// or the rebuild of a stateful bolt at the commit.
    #[error("{task}: {call}: {cause}")]
    Task {
        /// The task.
        task: TaskName,
        /// The call, as the log names it ("prepare on the new instance").
        call: &'static str,
        /// The plugin's message.
        cause: String,
    },
    /// A task could not take part: it has stopped, another swap is under
    /// way, its instance reached the restart limit, or the run began draining.
    #[error("{task}: {reason}")]
    Refused {
        /// The task.
        task: TaskName,
        /// Why.
        reason: String,
    },
    /// Tasks did not answer in time.
    #[error("{what} within {secs} s (a task busy in plugin code or under backpressure)")]
    Timeout {
        /// What did not happen ("not every task prepared its new instance").
        what: String,
        /// How long the reloader waited.
        secs: u64,
    },
    /// Adding or resizing bolts failed.
    #[error("{0}")]
    Reshape(String),
}
