//! What a component instance learns about its place in the topology.

use abi_stable::{
    std_types::{RString, RVec},
    StableAbi,
};

use crate::{StreamId, DEFAULT_STREAM};

/// One declared output stream: its name, its fields, and whether it is direct.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct StreamDecl {
    /// The stream's name.
    pub name: RString,
    /// The names of its fields, in order.
    pub fields: RVec<RString>,
    /// True when tuples on this stream are sent with `emit_direct`.
    pub direct: bool,
}

/// The tasks of one downstream component, for `emit_direct`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct ComponentTasks {
    /// The component's name in the topology.
    pub component: RString,
    /// Its task ids.
    pub tasks: RVec<u32>,
}

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

/// Collects a component's output stream declarations (Storm's `declareOutputFields`).
#[derive(Debug, Default)]
pub struct OutputDeclarer {
    streams: Vec<StreamDecl>,
}

impl OutputDeclarer {
    /// Declares the default stream with these fields.
    pub fn declare(&mut self, fields: &[&str]) -> &mut Self {
        self.declare_stream(DEFAULT_STREAM, fields)
    }

    /// Declares a named stream with these fields.
    pub fn declare_stream(&mut self, name: &str, fields: &[&str]) -> &mut Self {
        self.push(name, fields, false)
    }

    /// Declares a named stream whose tuples are sent with `emit_direct`.
    pub fn declare_direct_stream(&mut self, name: &str, fields: &[&str]) -> &mut Self {
        self.push(name, fields, true)
    }

    fn push(&mut self, name: &str, fields: &[&str], direct: bool) -> &mut Self {
        self.streams.retain(|s| s.name.as_str() != name);
        self.streams.push(StreamDecl {
            name: name.into(),
            fields: fields.iter().map(|f| RString::from(*f)).collect(),
            direct,
        });
        self
    }

    /// The declared streams, in declaration order.
    pub fn into_streams(self) -> Vec<StreamDecl> {
        self.streams
    }
}
