//! Durable state (contract 1.2): checkpoints of the bolts' stores and the
//! spouts' positions, committed atomically into a state backend, and the
//! restore at start.
//!
//! # The protocol (docs/state.md)
//! Aligned barriers, as Flink's, on squall's queues:
//! 1. Every `interval`, the [`coordinator`] sends checkpoint `n`'s barrier to
//!    every spout task ([`Control::Barrier`](crate::control::Control)). A
//!    spout reports its position (covering every tuple it emitted so far),
//!    then sends the barrier behind everything it emitted, on every queue
//!    it feeds.
//! 2. A bolt task that has the barrier from some of its input tasks holds
//!    back what those tasks send after it, and executes the others' tuples,
//!    until the barrier has come from every input task. Then its stores
//!    hold exactly the effects of the tuples emitted before the barrier: it
//!    reports what they changed, forwards the barrier, and executes what it
//!    held back.
//! 3. With every task's report in, the coordinator commits the changes and
//!    the positions in one atomic backend commit, then tells every task
//!    ([`Control::Committed`](crate::control::Control)); spouts then
//!    acknowledge their broker for what the checkpoint covers.
//!
//! A restart restores the last committed checkpoint: each key to the task
//! its fields grouping routes it to now (any parallelism), each spout's
//! position to its task; spouts emit again from there. Acks are never held:
//! a spout's pending set does not grow with the interval.

pub mod codec;
pub mod coordinator;
pub mod fence;
mod memory;
pub mod restore;

use abi_stable::std_types::{RSlice, RStr};
use squall_plugin_api::abi::{ScopeWrites, StateBackendBox, StateRecord, StoreDelta};
use squall_plugin_api::State;

pub use coordinator::{CheckpointStats, Coordinator};
pub use fence::{Fence, Fenced};
pub use memory::MemoryBackend;

/// The scope of a spout component's positions.
pub const POSITION_SCOPE: &str = "$position";

/// The store (scope `component/$window`) that holds a windowed bolt's
/// buffered tuples, keyed by `[task index, sequence number]`, and each
/// task's trigger state (a per-task record).
pub const WINDOW_STORE: &str = "$window";

/// A windowed bolt task's part of a restored checkpoint, decoded.
#[derive(Debug, Default)]
pub struct WindowRestore {
    /// Buffered tuples: old task index, sequence number, the tuple.
    pub entries: Vec<(u32, u64, codec::WindowEntry)>,
    /// Trigger states by old task index.
    pub metas: Vec<(u32, codec::WindowMeta)>,
}

/// The backend scope of `store` of `component`.
pub fn scope(component: &str, store: &str) -> String {
    format!("{component}/{store}")
}

/// A state backend failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("state backend {backend}: {call}: {cause}")]
pub struct StateError {
    /// `memory`, or the plugin's `alias::Name`.
    pub backend: String,
    /// The call that failed.
    pub call: &'static str,
    /// Why.
    pub cause: StateCause,
}

/// Why a state backend call failed: what was said, or a record that does
/// not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateCause {
    /// The backend's message (a plugin's crosses the ABI as text), or the
    /// host's about what the backend did.
    #[error("{0}")]
    Said(String),
    /// A record the backend returned is not one this host wrote.
    #[error("scope {scope:?}: {error}")]
    Record {
        /// The scope it was read from.
        scope: String,
        /// What is wrong with it.
        error: codec::RecordError,
    },
}

impl From<String> for StateCause {
    fn from(said: String) -> Self {
        Self::Said(said)
    }
}

impl From<&str> for StateCause {
    fn from(said: &str) -> Self {
        Self::Said(said.to_owned())
    }
}

/// Where checkpoints go: the host's memory, or a plugin's backend.
pub enum Backend {
    /// The in-memory backend.
    Memory(MemoryBackend),
    /// A plugin's backend and its `alias::Name`.
    Plugin {
        /// `alias::Name`, for messages.
        reference: String,
        /// The instance.
        object: StateBackendBox,
    },
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Backend({})", self.name())
    }
}

impl Backend {
    /// Builds the backend a topology's `[state]` names (not opened yet).
    ///
    /// # Errors
    /// The plugin's constructor refused its config or panicked.
    pub fn build(plan: &crate::topology::BackendPlan) -> Result<Self, StateError> {
        use crate::topology::BackendPlan;
        match plan {
            BackendPlan::Memory => Ok(Backend::Memory(MemoryBackend::default())),
            BackendPlan::Plugin { reference, new, config } => {
                match new(config.as_str().into()).into_result() {
                    Ok(squall_plugin_api::abi::ComponentBox12::StateBackend(object)) => {
                        Ok(Backend::Plugin { reference: reference.clone(), object })
                    }
                    Ok(_) => Err(StateError {
                        backend: reference.clone(),
                        call: "new",
                        cause: "it built something other than a state backend".into(),
                    }),
                    Err(e) => Err(StateError {
                        backend: reference.clone(),
                        call: "new",
                        cause: e.to_string().into(),
                    }),
                }
            }
        }
    }

    /// `memory` or `alias::Name`.
    pub fn name(&self) -> &str {
        match self {
            Backend::Memory(_) => "memory",
            Backend::Plugin { reference, .. } => reference,
        }
    }

    fn err(
        &self,
        call: &'static str,
    ) -> impl FnOnce(squall_plugin_api::PluginError) -> StateError + '_ {
        move |e| StateError { backend: self.name().to_owned(), call, cause: e.to_string().into() }
    }

    /// Connects, for `namespace`.
    ///
    /// # Errors
    /// The backend's.
    pub fn open(&mut self, namespace: &str) -> Result<(), StateError> {
        match self {
            Backend::Memory(m) => {
                m.open(namespace);
                Ok(())
            }
            Backend::Plugin { object, .. } => {
                let r = object.open(RStr::from(namespace)).into_result();
                r.map_err(self.err("open"))
            }
        }
    }

    /// The last committed checkpoint.
    ///
    /// # Errors
    /// The backend's.
    pub fn last_committed(&mut self) -> Result<Option<u64>, StateError> {
        match self {
            Backend::Memory(m) => Ok(m.last_committed()),
            Backend::Plugin { object, .. } => {
                let r = object.last_committed().into_result();
                r.map(|o| o.into_option()).map_err(self.err("last_committed"))
            }
        }
    }

    /// Commits `checkpoint` with `writes`, atomically. A backend refuses a
    /// `checkpoint` that is not above the last one committed.
    ///
    /// # Errors
    /// The backend's (a refused number among them): nothing was committed.
    pub fn commit(&mut self, checkpoint: u64, writes: &[ScopeWrites]) -> Result<(), StateError> {
        match self {
            Backend::Memory(m) => match m.last_committed() {
                // Every backend refuses a number not above the last one: a
                // group's fencing rests on it (see `fence`).
                Some(last) if last >= checkpoint => Err(StateError {
                    backend: "memory".into(),
                    call: "commit",
                    cause: format!(
                        "checkpoint {checkpoint} is not above the last committed, {last}: \
                         refused (a newer owner of this state committed)"
                    )
                    .into(),
                }),
                _ => {
                    m.commit(checkpoint, writes);
                    Ok(())
                }
            },
            Backend::Plugin { object, .. } => {
                let r = object.commit(checkpoint, RSlice::from_slice(writes)).into_result();
                r.map_err(self.err("commit"))
            }
        }
    }

    /// Every committed record of `scope`.
    ///
    /// # Errors
    /// The backend's.
    pub fn load(&mut self, scope: &str) -> Result<Vec<StateRecord>, StateError> {
        match self {
            Backend::Memory(m) => Ok(m.load(scope)),
            Backend::Plugin { object, .. } => {
                let r = object.load(RStr::from(scope)).into_result();
                r.map(|v| v.into_vec()).map_err(self.err("load"))
            }
        }
    }

    /// The scopes holding committed records.
    ///
    /// # Errors
    /// The backend's.
    pub fn scopes(&mut self) -> Result<Vec<String>, StateError> {
        match self {
            Backend::Memory(m) => Ok(m.scopes()),
            Backend::Plugin { object, .. } => {
                let r = object.scopes().into_result();
                r.map(|v| v.into_iter().map(|s| s.into_string()).collect())
                    .map_err(self.err("scopes"))
            }
        }
    }

    /// Deletes the namespace's state.
    ///
    /// # Errors
    /// The backend's.
    pub fn clear(&mut self) -> Result<(), StateError> {
        match self {
            Backend::Memory(m) => {
                m.clear();
                Ok(())
            }
            Backend::Plugin { object, .. } => {
                let r = object.clear().into_result();
                r.map_err(self.err("clear"))
            }
        }
    }

    /// Disconnects; an error is logged.
    pub fn close(&mut self) {
        if let Backend::Plugin { object, reference } = self {
            if let Err(e) = object.close().into_result() {
                tracing::warn!("state backend {reference}: close: {e}");
            }
        }
    }
}

/// What one task reports for one checkpoint.
#[derive(Debug)]
pub struct Report {
    /// The checkpoint.
    pub checkpoint: u64,
    /// The task id.
    pub task: u32,
    /// Its part.
    pub part: Part,
}

/// A task's part of a checkpoint.
#[derive(Debug)]
pub enum Part {
    /// A spout's position (`None`: it keeps none); an error fails the
    /// checkpoint (a restart must not go back to a position it lacks).
    // String error: the plugin's message, crossed from the ABI by the executor.
    Spout(Result<Option<State>, String>),
    /// What a bolt's stores changed; an error fails the checkpoint.
    // String error: the plugin's message, crossed from the ABI by the executor.
    Bolt(Result<Vec<StoreDelta>, String>),
}
