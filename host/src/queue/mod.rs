//! What travels between tasks, and how it is addressed: the batches on the
//! data queues ([`batch`]), each output stream's routes ([`StreamRoutes`])
//! and the task -> component table a bolt reads its tuples' sources from
//! ([`SourceTable`]). The executors fill and drain them; the control plane
//! hands new ones to a task that a live reload rewires.

pub mod batch;

use squall_plugin_api::InputStream;

use crate::topology::grouping::Router;

/// One output stream's routing: its name, whether it is direct, and one router per subscriber.
#[derive(Debug)]
pub struct StreamRoutes {
    /// The stream's name, for errors.
    pub name: String,
    /// True for a direct stream.
    pub direct: bool,
    /// The number of fields the stream declares: every emit must carry as many values.
    pub fields: usize,
    /// One router per subscribing component.
    pub routers: Vec<Router>,
}

/// A source component's name and, per output stream, the stream's name and
/// fields (as a contract 1.3 bolt's runs carry them).
pub type SourceComponent = (String, Vec<InputStream>);

/// Names and fields of every stream, for building tuple views without allocation.
#[derive(Debug, Default)]
pub struct SourceTable {
    /// The component index of each task.
    pub task_component: Vec<u32>,
    /// Per component: its name and, per output stream, the stream's name and fields.
    pub components: Vec<SourceComponent>,
}

impl SourceTable {
    /// The indices of `component`'s stream `stream`, if the table has it.
    pub fn find(&self, component: &str, stream: &str) -> Option<(u32, u32)> {
        let c = self.components.iter().position(|(name, _)| name == component)?;
        let s = self.components[c].1.iter().position(|s| s.name == stream)?;
        Some((c as u32, s as u32))
    }
}
