//! Unit-testing helpers for plugin authors.
//!
//! [`Recorder`] plays the host's part: it records every emit, ack and fail a
//! component makes, so a spout or bolt can be tested as a plain struct:
//!
//! ```
//! use squall_plugin_api::prelude::*;
//! use squall_plugin_api::testing::Recorder;
//!
//! let mut recorder = Recorder::default();
//! {
//!     let mut collector = BasicCollector::new(recorder.output());
//!     collector.emit(&[Value::from("word")]);
//! }
//! assert_eq!(recorder.first_strings(), ["word"]);
//! ```

use abi_stable::{
    sabi_trait::TD_Opaque,
    sabi_types::RMut,
    std_types::{ROption, RSlice},
};

use crate::abi::{Output, OutputMut, Output_TO};
use crate::{Anchor, MessageId, Value};

/// One recorded emit.
#[derive(Debug, Clone, PartialEq)]
pub struct Emitted {
    /// The stream index (`u32::MAX` for the default stream).
    pub stream: u32,
    /// The values.
    pub values: Vec<Value>,
    /// The anchors (rich bolts).
    pub anchors: Vec<Anchor>,
    /// The message id (spouts).
    pub message_id: Option<MessageId>,
    /// The target task of an `emit_direct`.
    pub direct_task: Option<u32>,
}

/// Records every call a component makes on its collector.
#[derive(Debug, Default)]
pub struct Recorder {
    /// Every emit, in order.
    pub emitted: Vec<Emitted>,
    /// Every acked input.
    pub acked: Vec<Anchor>,
    /// Every failed input.
    pub failed: Vec<Anchor>,
    /// Every input whose timeout was reset.
    pub reset: Vec<Anchor>,
}

impl Recorder {
    /// The host-side object a collector wraps, e.g. `SpoutCollector::new(recorder.output())`.
    pub fn output(&mut self) -> OutputMut<'_> {
        Output_TO::from_ptr(RMut::new(self), TD_Opaque)
    }

    /// The first value of every emit, as strings.
    pub fn first_strings(&self) -> Vec<String> {
        self.emitted
            .iter()
            .map(|e| e.values.first().map(ToString::to_string).unwrap_or_default())
            .collect()
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

    fn reset_timeout(&mut self, anchor: Anchor) {
        self.reset.push(anchor);
    }
}
