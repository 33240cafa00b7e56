//! What the host tells a component instance about its place in the topology,
//! as it crosses the boundary.
//!
//! Contract 1.0 passes [`TaskContext`]; contract 1.1 adds [`TaskExt`] (the
//! effective settings and the subscribed inputs) beside it. Plugin code sees
//! both through [`crate::TaskContext`].

use abi_stable::{
    std_types::{ROption, RString, RVec},
    StableAbi,
};

use crate::{ComponentTasks, StreamDecl, StreamId, DEFAULT_STREAM};

/// Handed to `open` / `prepare`: the topology, the component and the task.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct TaskContext {
    /// The topology's name.
    pub topology: RString,
    /// This component's name in the topology (not its plugin name).
    pub component: RString,
    /// This task's id, unique in the topology.
    pub task_id: u32,
    /// This task's index among the component's tasks, from 0.
    pub task_index: u32,
    /// How many tasks the component has.
    pub parallelism: u32,
    /// This component's output streams; a [`StreamId`] is an index into it.
    pub outputs: RVec<StreamDecl>,
    /// The components that subscribe to this one, with their tasks.
    pub downstream: RVec<ComponentTasks>,
}

impl TaskContext {
    /// The id of the declared output stream called `name`.
    pub fn stream_id(&self, name: &str) -> Option<StreamId> {
        if name == DEFAULT_STREAM {
            return Some(StreamId::DEFAULT);
        }
        let index = self.outputs.iter().position(|s| s.name.as_str() == name)?;
        Some(StreamId(u32::try_from(index).ok()?))
    }

    /// The task ids of a downstream component (empty if it does not subscribe).
    pub fn tasks_of(&self, component: &str) -> &[u32] {
        self.downstream
            .iter()
            .find(|c| c.component.as_str() == component)
            .map_or(&[], |c| c.tasks.as_slice())
    }
}

/// One input a bolt subscribes to (contract 1.1).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct InputDecl {
    /// The upstream component.
    pub component: RString,
    /// The stream it reads.
    pub stream: RString,
    /// The grouping's name: `shuffle`, `fields`, `all`, `global`, `none`,
    /// `direct`, `local_or_shuffle`, or `custom` (then see `custom`).
    pub grouping: RString,
    /// The grouping's fields (fields grouping only).
    pub grouping_fields: RVec<RString>,
    /// The fields of the stream, as the upstream component declared them.
    pub fields: RVec<RString>,
    /// The `alias::Name` of a custom grouping (empty otherwise).
    pub custom: RString,
}

/// The effective settings of a task, beyond [`TaskContext`] (contract 1.1).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct TaskExt {
    /// Tick tuple period in milliseconds; 0 when the component gets no ticks.
    pub tick_freq_millis: u64,
    /// The message timeout in milliseconds; 0 when timeouts are off.
    pub message_timeout_millis: u64,
    /// `max_spout_pending` of this task; 0 when unlimited.
    pub max_spout_pending: u32,
    /// How many acker tasks run (0: tuple trees are not tracked).
    pub ackers: u32,
    /// The inputs this component subscribes to (empty for spouts).
    pub inputs: RVec<InputDecl>,
    /// The folder of the topology file, against which relative config paths
    /// are resolved.
    pub topology_dir: RString,
    /// A windowed bolt's window, as its topology entry configures it
    /// (`RNone` for every other component).
    pub window: ROption<WindowSettings>,
}

/// How a window is measured: an open set, as [`ComponentKind`](super::ComponentKind)
/// (a plugin reads a kind it does not know as no window).
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WindowKind(pub u8);

impl WindowKind {
    /// By tuple count: `length` and `slide` are numbers of tuples.
    pub const COUNT: Self = Self(0);
    /// By time: `length` and `slide` are milliseconds.
    pub const TIME: Self = Self(1);
}

/// A windowed bolt's window, as it crosses the boundary (contract 1.1).
/// Plugin code reads it as a [`WindowSpec`](crate::WindowSpec) through
/// [`crate::TaskContext::window`].
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct WindowSettings {
    /// Count or time.
    pub kind: WindowKind,
    /// The window's length: tuples (count) or milliseconds (time).
    pub length: u64,
    /// How far it moves between two windows, in the same unit; equal to
    /// `length` for a tumbling window.
    pub slide: u64,
    /// Event time: the input field that holds each tuple's timestamp
    /// (empty: processing time, and always for count windows).
    pub timestamp_field: RString,
    /// Event time: how far the watermark trails the largest timestamp seen,
    /// in milliseconds (0 otherwise).
    pub lag_millis: u64,
}
