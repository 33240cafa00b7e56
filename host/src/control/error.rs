//! [`RunError`]: why a running topology failed.

use std::fmt;
use std::sync::Arc;

use crate::config::Diagnostic;
use crate::ids::TaskId;
use crate::plugin::LoadError;
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
    Config(Diagnostic),
    /// A library does not load.
    #[error("{0}")]
    Load(Shared<LoadError>),
    /// A change that cannot be made live, with its file:line:col and why.
    #[error("{0}")]
    NotLive(NotLive),
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
    Reshape(ReshapeError),
}

/// A change a reload asks for that cannot be made live (a
/// [`ReloadError::NotLive`]): the whole reload is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotLive {
    /// The topology's name changed.
    #[error("the topology name changed ({old:?} -> {new:?}); it cannot change live")]
    Name {
        /// The running topology's name.
        old: String,
        /// The file's.
        new: String,
    },
    /// `[topology]` settings changed.
    #[error(
        "[topology] settings changed ({}); settings (acker_executors, timeouts, buffers...) \
         cannot change live",
        if changed_fields.is_empty() { "some setting".to_owned() } else { changed_fields.join(", ") }
    )]
    Settings {
        /// The names of the settings that differ (empty when none can be
        /// named).
        changed_fields: Vec<String>,
    },
    /// A component is not in the file any more.
    #[error("{kind} {name:?} was removed; removing components live is not supported")]
    Removed {
        /// "spout" or "bolt".
        kind: &'static str,
        /// Its name.
        name: String,
    },
    /// A spout is new in the file.
    #[error("{at}: spout {name:?} is new; adding spouts live is not supported")]
    SpoutAdded {
        /// Its file:line:col.
        at: String,
        /// Its name.
        name: String,
    },
    /// A component changed in ways a rebuild cannot carry.
    #[error("{at}: {kind} {name:?}: {} changed, which cannot change live", changed.join(", "))]
    Changed {
        /// Its file:line:col.
        at: String,
        /// "spout" or "bolt".
        kind: &'static str,
        /// Its name.
        name: String,
        /// What changed: "its kind", "its inputs or groupings", ...
        changed: Vec<&'static str>,
    },
}

/// Why adding bolts, or changing a bolt's parallelism, live did not go
/// through (a [`ReloadError::Reshape`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReshapeError {
    /// An instance for a new task (its bolt, a wait strategy or a custom
    /// grouping) could not be built. The cause keeps its type, the
    /// runtime's `StartError`, which this layer cannot name
    /// (`cause.0.downcast_ref::<StartError>()` finds it).
    #[error("{}{cause}", at.as_deref().map(|at| format!("{at}: ")).unwrap_or_default())]
    Build {
        /// The component's file:line:col, when the cause names a component.
        at: Option<String>,
        /// Why.
        cause: Shared<dyn std::error::Error + Send + Sync>,
    },
    /// A new task's thread could not be started.
    #[error("task {}: cannot start its thread: {cause}", task.0)]
    Spawn {
        /// The task.
        task: TaskId,
        /// The OS's answer.
        cause: Shared<std::io::Error>,
    },
    /// A resized bolt is missing from the running or the new topology.
    #[error("bolt {bolt:?} vanished during the reload")]
    Vanished {
        /// The bolt's name.
        bolt: String,
    },
    /// Not every old task of a resized bolt handed over its state in time.
    #[error(
        "bolt {bolt:?}: {handed} of {tasks} old tasks handed over their state within {secs} s"
    )]
    HandOver {
        /// The bolt's name.
        bolt: String,
        /// The tasks that did.
        handed: usize,
        /// The old tasks.
        tasks: u32,
        /// How long the reloader waited.
        secs: u64,
    },
    /// The old tasks of a resized bolt saved state in different formats.
    #[error(
        "bolt {bolt:?}: its tasks saved state in different formats (`{first}` and `{second}`)"
    )]
    MixedFormats {
        /// The bolt's name.
        bolt: String,
        /// One format.
        first: String,
        /// Another.
        second: String,
    },
    /// The new tasks of a resized bolt did not prepare in time.
    #[error("bolt {bolt:?}: the new tasks did not prepare in time")]
    NotPrepared {
        /// The bolt's name.
        bolt: String,
    },
}

/// An error that is not `Clone` (it holds an `io::Error`, or is a trait
/// object), shared by the copies of the [`ReloadError`] that carries it:
/// a reload's report is cloned for every request it answers. Two compare
/// equal when they say the same.
pub struct Shared<E: ?Sized>(pub Arc<E>);

impl<E: std::error::Error + Send + Sync + 'static> Shared<E> {
    /// Shares `error`.
    pub fn new(error: E) -> Self {
        Self(Arc::new(error))
    }
}

impl Shared<dyn std::error::Error + Send + Sync> {
    /// Shares `error`, whatever its type.
    pub fn erased(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(error))
    }
}

impl<E: ?Sized> Clone for Shared<E> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<E: ?Sized + fmt::Display> PartialEq for Shared<E> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl<E: ?Sized + fmt::Display> Eq for Shared<E> {}

impl<E: ?Sized + fmt::Debug> fmt::Debug for Shared<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: ?Sized + fmt::Display> fmt::Display for Shared<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: ?Sized + std::error::Error> std::error::Error for Shared<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}
