//! `GET /api/v1/tap`: a stream of sampled tuples, one JSON object a line
//! (`application/x-ndjson`), for `squall tap` and the live page's tap
//! panel. It needs the `control` scope: the samples carry payloads.
//!
//! Query: `outputs_of=C` or `inputs_of=C` (one of them), `stream=S`,
//! `sample=RATE` (a share in (0, 1], default 1), `limit=N` (end after N
//! samples; absent: until the client goes or the topology stops).
//!
//! Lines: one object per sampled tuple (see [`sample_json`]), and
//! `{"status": {"sampled": N, "dropped": M}}` after each second in which a
//! sample was dropped, and once at the end (the only lines with a `status`
//! key). The samples travel through a
//! bounded channel that this body drains every [`POLL`]; a client that
//! reads slowly fills it and the tasks drop samples (counted), never
//! waiting (see [`crate::tap`]).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Frame;
use serde_json::{json, Value as Json};
use squall_plugin_api::Value;

use crate::control::RunState;
use crate::runtime::TopologyHandle;
use crate::tap::{Sample, Tap, TapError, TapRequest, TapSide};

/// How often the body looks for samples.
pub const POLL: Duration = Duration::from_millis(20);
/// How many samples wait for a reader before the tasks drop.
pub const CAPACITY: usize = 1024;
/// The most samples one frame carries.
const FRAME_SAMPLES: usize = 256;
/// A frame ends after the sample that brings it past this many bytes.
const FRAME_BYTES: usize = crate::tap::TAP_FRAME_BYTES as usize;

/// A tap request's query, checked.
///
/// # Errors
/// A one-line reason for a 400.
pub fn request(query: &str) -> Result<(TapRequest, Option<u64>), TapError> {
    let param = |key: &str| super::query_param(query, key);
    let (component, side) = match (param("outputs_of"), param("inputs_of")) {
        (Some(c), None) => (c, TapSide::Outputs),
        (None, Some(c)) => (c, TapSide::Inputs),
        (Some(_), Some(_)) => return Err(TapError::BothSides),
        (None, None) => return Err(TapError::NoSide),
    };
    if component.is_empty() {
        return Err(TapError::EmptyComponent);
    }
    let rate = match param("sample") {
        None => 1.0,
        Some(text) => match text.parse::<f64>() {
            Ok(rate) if rate > 0.0 && rate <= 1.0 => rate,
            _ => return Err(TapError::Rate(text)),
        },
    };
    let limit = match param("limit") {
        None => None,
        Some(text) => match text.parse::<u64>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(TapError::Limit(text)),
        },
    };
    let stream = param("stream").filter(|s| !s.is_empty());
    let max_bytes = crate::tap::TAP_BUFFER_BYTES;
    Ok((TapRequest { component, side, stream, rate, capacity: CAPACITY, max_bytes }, limit))
}

/// One value as JSON: numbers, strings, booleans, lists as arrays, null;
/// bytes as `{"bytes": "<hex>"}`; a float that is not finite as its text.
pub fn value_json(value: &Value) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Bool(b) => json!(b),
        Value::I64(n) => json!(n),
        Value::U64(n) => json!(n),
        Value::F64(x) if x.is_finite() => json!(x),
        Value::F64(x) => json!(x.to_string()),
        Value::List(items) => Json::Array(items.iter().map(value_json).collect()),
        other => match (other.as_str(), other.as_bytes()) {
            (Some(s), _) => json!(s),
            (None, Some(bytes)) => {
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                json!({ "bytes": hex })
            }
            (None, None) => json!(other.to_string()),
        },
    }
}

/// One sample as the line's `sample` object: `component`, `side`, `task`,
/// `stream`, `fields` (names) and `values` (in field order), `roots` (the
/// tree roots as 16 hex digits; empty when untracked), `message_id` (a
/// spout's, or null) and, for inputs, `from` (`{"component", "task"}`).
pub fn sample_json(component: &str, sample: &Sample, fields: &[String]) -> Json {
    let side = match sample.side {
        TapSide::Outputs => "outputs",
        TapSide::Inputs => "inputs",
    };
    let fields = sample.fields.as_deref().unwrap_or(fields);
    let from =
        sample.from.as_ref().map_or(Json::Null, |(c, t)| json!({ "component": c, "task": t }));
    json!({
        "component": component,
        "side": side,
        "task": sample.task,
        "stream": sample.stream,
        "fields": fields,
        "values": sample.values.iter().map(value_json).collect::<Vec<_>>(),
        "roots": sample.roots.iter().map(|r| format!("{r:016x}")).collect::<Vec<_>>(),
        "message_id": sample.message_id,
        "from": from,
    })
}

/// Clears the connection's "answering" flag when the stream ends, so that
/// its idle timeout applies again (see `server::Deadline`).
#[derive(Debug)]
pub struct Busy(pub Arc<AtomicBool>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// The streaming body of one tap; dropping it detaches the tap.
#[derive(Debug)]
pub struct TapBody {
    tap: Tap,
    component: String,
    /// Field names by stream.
    streams: Vec<(String, Vec<String>)>,
    remaining: Option<u64>,
    handle: TopologyHandle,
    tick: tokio::time::Interval,
    /// Polls since the last status line.
    since_status: u32,
    dropped_reported: u64,
    done: bool,
    _busy: Busy,
}

impl TapBody {
    /// The body of `tap` on `component`, ending after `limit` samples.
    pub fn new(
        tap: Tap,
        component: String,
        streams: Vec<(String, Vec<String>)>,
        limit: Option<u64>,
        handle: TopologyHandle,
        busy: Busy,
    ) -> Self {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            tap,
            component,
            streams,
            remaining: limit,
            handle,
            tick,
            since_status: 0,
            dropped_reported: 0,
            done: false,
            _busy: busy,
        }
    }

    fn status_line(&mut self, out: &mut String) {
        let sampled = self.tap.counters.sampled.load(Ordering::Relaxed);
        let dropped = self.tap.counters.dropped.load(Ordering::Relaxed);
        self.dropped_reported = dropped;
        self.since_status = 0;
        out.push_str(&json!({ "status": { "sampled": sampled, "dropped": dropped } }).to_string());
        out.push('\n');
    }

    /// The lines of the samples waiting now (at most [`FRAME_SAMPLES`]).
    fn drain(&mut self, out: &mut String) {
        for _ in 0..FRAME_SAMPLES {
            if self.remaining == Some(0) {
                break;
            }
            let Some(sample) = self.tap.try_recv() else { break };
            let fields = self
                .streams
                .iter()
                .find(|(s, _)| *s == sample.stream)
                .map_or(&[][..], |(_, f)| f.as_slice());
            out.push_str(&sample_json(&self.component, &sample, fields).to_string());
            out.push('\n');
            if let Some(n) = self.remaining.as_mut() {
                *n -= 1;
            }
            if out.len() >= FRAME_BYTES {
                break;
            }
        }
    }
}

impl hyper::body::Body for TapBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            let mut out = String::new();
            this.drain(&mut out);
            let finished = this.remaining == Some(0) || this.handle.state() == RunState::Stopping;
            let dropped = this.tap.counters.dropped.load(Ordering::Relaxed);
            let second = this.since_status as u128 * POLL.as_millis() >= 1000;
            if finished || (second && dropped != this.dropped_reported) {
                this.status_line(&mut out);
            }
            if finished {
                this.done = true;
            }
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
            }
            match this.tick.poll_tick(cx) {
                Poll::Ready(_) => this.since_status = this.since_status.saturating_add(1),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tap_query_names_one_side_a_rate_and_a_limit() {
        let (r, limit) = request("outputs_of=split&stream=default&sample=0.25&limit=10").unwrap();
        assert_eq!(
            (r.component.as_str(), r.side, r.stream.as_deref()),
            ("split", TapSide::Outputs, Some("default"))
        );
        assert_eq!((r.rate, limit), (0.25, Some(10)));
        let (r, limit) = request("inputs_of=count").unwrap();
        assert_eq!((r.side, r.rate, limit, r.stream), (TapSide::Inputs, 1.0, None, None));
        for (bad, why) in [
            ("", "give outputs_of"),
            ("outputs_of=a&inputs_of=b", "not both"),
            ("outputs_of=a&sample=0", "sample must be"),
            ("outputs_of=a&sample=1.5", "sample must be"),
            ("outputs_of=a&sample=x", "sample must be"),
            ("outputs_of=a&limit=0", "limit must be"),
            ("outputs_of=a&limit=-1", "limit must be"),
            ("outputs_of=", "empty"),
        ] {
            assert!(request(bad).unwrap_err().to_string().contains(why), "{bad}");
        }
    }

    #[test]
    fn a_sample_line_names_its_fields_and_values_in_order() {
        let sample = Sample {
            side: TapSide::Inputs,
            task: 3,
            stream: "default".into(),
            from: Some(("split".into(), 1)),
            fields: Some(vec!["word".into(), "n".into()]),
            values: vec![Value::from("cow"), Value::U64(2)],
            roots: vec![0xab],
            message_id: None,
        };
        let line = sample_json("count", &sample, &[]);
        assert_eq!(
            line,
            json!({
                "component": "count", "side": "inputs", "task": 3, "stream": "default",
                "fields": ["word", "n"], "values": ["cow", 2], "roots": ["00000000000000ab"],
                "message_id": null, "from": { "component": "split", "task": 1 },
            })
        );
        assert_eq!(value_json(&Value::Bytes(vec![1u8, 255].into())), json!({ "bytes": "01ff" }));
        assert_eq!(value_json(&Value::F64(f64::NAN)), json!("NaN"));
    }
}
