//! Test helpers: a host `Output` that records what a component emits.

use abi_stable::{
    sabi_trait::TD_Opaque,
    sabi_types::RMut,
    std_types::{ROption, RSlice},
};
use squall_plugin_api::abi::{Output, OutputMut, Output_TO};
use squall_plugin_api::{Anchor, MessageId, Value};

/// One recorded emit.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Emitted {
    pub(crate) stream: u32,
    pub(crate) values: Vec<Value>,
    pub(crate) anchors: Vec<Anchor>,
    pub(crate) message_id: Option<MessageId>,
    pub(crate) direct_task: Option<u32>,
}

/// Records every call a component makes on its collector.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    pub(crate) emitted: Vec<Emitted>,
    pub(crate) acked: Vec<Anchor>,
    pub(crate) failed: Vec<Anchor>,
}

impl Recorder {
    /// The host-side object a collector wraps.
    pub(crate) fn output(&mut self) -> OutputMut<'_> {
        Output_TO::from_ptr(RMut::new(self), TD_Opaque)
    }

    /// The first value of every emit, as strings.
    pub(crate) fn first_strings(&self) -> Vec<String> {
        self.emitted.iter().map(|e| e.values[0].to_string()).collect()
    }
}

impl Output for Recorder {
    fn emit(
        &mut self,
        stream: u32,
        values: RSlice<'_, Value>,
        anchors: RSlice<'_, Anchor>,
        message_id: ROption<MessageId>,
        direct_task: ROption<u32>,
    ) {
        self.emitted.push(Emitted {
            stream,
            values: values.to_vec(),
            anchors: anchors.to_vec(),
            message_id: message_id.into_option(),
            direct_task: direct_task.into_option(),
        });
    }

    fn ack(&mut self, anchor: Anchor) {
        self.acked.push(anchor);
    }

    fn fail(&mut self, anchor: Anchor) {
        self.failed.push(anchor);
    }

    fn reset_timeout(&mut self, _anchor: Anchor) {}
}
