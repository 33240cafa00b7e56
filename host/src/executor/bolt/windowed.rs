//! The windowed bolt task: the part of the bolt loop that only windowed bolts
//! run (the loop picks it once per turn, so ordinary bolts never pay for it).
//!
//! Each input tuple is copied into the [`Windower`]'s buffer with its anchor,
//! and its tracking moves to the input tracker's open map (as a rich bolt's
//! unacked input). A due window is handed to `execute_window` as a
//! [`WindowView`] over the buffer; its emits are anchored to every tuple of
//! the window. Then the tuples no later window holds are acked (or failed,
//! when `execute_window` returned an error or panicked). Event-time tuples
//! behind the watermark go out on the `late` stream, anchored to themselves,
//! and are acked at once. Tick tuples never enter a window.
//!
//! A [`Control::FlushWindows`](crate::control::Control::FlushWindows) (the
//! end of a harness feed, a drain, once no tuple is moving) flushes: the
//! windows the buffered tuples still wait for run at once, whatever the
//! clock, the watermark or a count window's slide says, then every tuple
//! left is acked ([`Windower::fire_flush`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use abi_stable::std_types::{ROption, RSlice, RVec};
use squall_plugin_api::abi::{Output, StoreDelta, WindowView};
use squall_plugin_api::{Anchor, InputStream, PluginError, StateEntry, Tuple, Value};

use super::super::output::{HostOutput, Side};
use super::super::window::{Entry, Firing, Pushed, Trigger, Windower};
use super::super::{count_emit_error, count_error};
use super::{BoltExecutor, SourceTable, Turn};
use crate::config::{WindowDecl, WindowSize};
use crate::ids::{EdgeId, RootId};
use crate::metrics::StatField;

/// A buffered input tuple: an owned copy of its values, where it came from,
/// its anchor in the input tracker, and its sequence number in the task.
#[derive(Debug)]
pub struct Held {
    values: Vec<Value>,
    component: u32,
    stream: u32,
    task: u32,
    anchor: Anchor,
    seq: u64,
}

impl Held {
    fn view<'a>(&'a self, sources: &'a SourceTable, anchor: Anchor) -> Tuple<'a> {
        let (component, streams) = &sources.components[self.component as usize];
        let InputStream { name: stream, fields } = &streams[self.stream as usize];
        Tuple::new(&self.values, fields, component, stream, self.task, anchor)
    }
}

/// What a windowed bolt task adds to a bolt task.
#[derive(Debug)]
pub struct WindowState {
    windower: Windower<Held>,
    /// Event time: per source component and stream, the timestamp field's
    /// position.
    timestamp_index: Option<Vec<Vec<Option<usize>>>>,
    /// The `late` stream's index among the bolt's outputs.
    late_stream: Option<u32>,
    /// The sequence number of the next buffered tuple.
    next_seq: u64,
    /// Durable state: what the next checkpoint writes (`None`: no `[state]`).
    log: Option<Box<WindowLog>>,
    /// Restored tuples renumbered here: their old keys (task index, sequence
    /// number), which the next checkpoint removes.
    moved: Vec<(u32, u64)>,
    /// A flush is under way (it goes on over turns while emits back up).
    flushing: bool,
    /// Simulated time (`squall test`): processing time is its reading.
    simulated: Option<crate::clock::SimulatedTime>,
}

/// What a durable windowed task's checkpoints have written: the tuples
/// below `saved_upto` are in the backend, and `removed` of them have left
/// the buffer since the last checkpoint.
#[derive(Debug)]
struct WindowLog {
    /// The task's index in its component (the entries' key).
    index: u32,
    saved_upto: u64,
    removed: Vec<u64>,
}

/// A restored window rebuilt for one task: the tuples back in the buffer,
/// those already expired, the old keys to remove (old task, sequence
/// number), and how many tuples had no stream left to go back to.
#[derive(Default)]
struct Rebuilt {
    buffer: Vec<Entry<Held>>,
    expired: Vec<Entry<Held>>,
    moved: Vec<(u32, u64)>,
    dropped: u64,
}

/// Whether everything `restored` holds came from the old task `index`
/// alone (so its numbering can be kept).
fn only_from(restored: &crate::state::WindowRestore, index: u32) -> bool {
    let origins: std::collections::BTreeSet<u32> =
        restored.entries.iter().map(|e| e.0).chain(restored.metas.iter().map(|m| m.0)).collect();
    origins.len() == 1 && origins.first() == Some(&index)
}

/// The restored `entries` in the order they go back into the buffer: by
/// their own sequence numbers when the numbering is kept (`same`), else
/// by time (then old task and number) as tuples merged from several tasks.
fn in_restore_order(
    mut entries: Vec<(u32, u64, crate::state::codec::WindowEntry)>,
    same: bool,
) -> Vec<(u32, u64, crate::state::codec::WindowEntry)> {
    if same {
        entries.sort_by_key(|e| e.1);
    } else {
        entries.sort_by_key(|e| (e.2.time, e.0, e.1));
    }
    entries
}

impl WindowState {
    /// The state for a bolt with `window`, fed from `sources`, whose output
    /// streams are `outputs`.
    /// Processing time reads `simulated` when given, the system clock otherwise.
    pub fn new(
        window: &WindowDecl,
        sources: &SourceTable,
        outputs: &[&str],
        simulated: Option<crate::clock::SimulatedTime>,
    ) -> Self {
        let trigger = match window.size {
            WindowSize::Count { length, slide } => {
                Trigger::Count { length: length as usize, slide: slide as usize }
            }
            WindowSize::Time { length_millis, slide_millis } => Trigger::Time {
                length: length_millis,
                slide: slide_millis,
                lag: window.timestamp_field.as_ref().map(|_| window.lag_millis),
            },
        };
        let timestamp_index = window.timestamp_field.as_ref().map(|field| {
            sources
                .components
                .iter()
                .map(|(_, streams)| {
                    streams
                        .iter()
                        .map(|s| s.fields.iter().position(|f| f.as_str() == field))
                        .collect()
                })
                .collect()
        });
        let late_stream =
            outputs.iter().position(|s| *s == crate::topology::LATE_STREAM).map(|i| i as u32);
        Self {
            windower: Windower::new(trigger),
            timestamp_index,
            late_stream,
            next_seq: 0,
            log: None,
            moved: Vec::new(),
            flushing: false,
            simulated,
        }
    }

    /// Makes the window durable: each checkpoint writes the tuples buffered
    /// since the last one and removes those that left, and `restored` (this
    /// task's part of the last committed checkpoint) is buffered again, its
    /// tuples untracked (their trees ended with the process that held them).
    /// A restored tuple from a stream the topology no longer has is dropped,
    /// with a warning.
    pub fn make_durable(
        &mut self,
        label: &str,
        index: u32,
        restored: Option<crate::state::WindowRestore>,
        sources: &SourceTable,
    ) {
        let mut log = Box::new(WindowLog { index, saved_upto: 0, removed: Vec::new() });
        let Some(restored) = restored else {
            self.log = Some(log);
            return;
        };
        // One old task per new one keeps its numbering (the backend holds
        // those keys); tuples merged from several are numbered afresh and
        // written again, and their old keys removed.
        let same = only_from(&restored, index);
        let meta =
            restored.metas.iter().min_by_key(|m| m.0).map(|m| m.1.clone()).unwrap_or_default();
        let expired: std::collections::HashSet<u64> =
            if same { meta.expired.iter().copied().collect() } else { Default::default() };
        let entries = in_restore_order(restored.entries, same);
        // Fresh numbers start above every restored one, so that no new key
        // is one that the same checkpoint removes.
        self.next_seq = entries.iter().map(|e| e.1 + 1).max().unwrap_or(0);
        let rebuilt = self.rebuild(entries, same, &expired, sources);
        if rebuilt.dropped > 0 {
            tracing::warn!(
                "{label}: {} restored window tuple(s) came from a stream this topology no \
                 longer has; they are dropped",
                rebuilt.dropped
            );
        }
        let triggers = (meta.since_fire as usize, meta.next_end, meta.max_seen);
        self.windower.restore(rebuilt.buffer, rebuilt.expired, triggers);
        self.moved = rebuilt.moved;
        log.saved_upto = if same { self.next_seq } else { 0 };
        self.log = Some(log);
    }

    /// Turns the restored `entries` (sorted) back into window entries.
    /// With `same` numbering they keep their sequence numbers and those in
    /// `expired` go back to the expired list; otherwise each is numbered
    /// afresh and its old key is to be removed. An entry whose stream is
    /// gone from `sources` is dropped (its old key removed too).
    fn rebuild(
        &mut self,
        entries: Vec<(u32, u64, crate::state::codec::WindowEntry)>,
        same: bool,
        expired: &std::collections::HashSet<u64>,
        sources: &SourceTable,
    ) -> Rebuilt {
        let mut out = Rebuilt::default();
        for (origin, seq, entry) in entries {
            let Some((component, stream)) = sources.find(&entry.component, &entry.stream) else {
                out.dropped += 1;
                out.moved.push((origin, seq));
                continue;
            };
            let is_expired = same && expired.contains(&seq);
            let seq = if same {
                seq
            } else {
                out.moved.push((origin, seq));
                self.next_seq += 1;
                self.next_seq - 1
            };
            let item = Held {
                values: entry.values,
                component,
                stream,
                task: entry.task,
                anchor: Anchor::NONE,
                seq,
            };
            let e = Entry { time: entry.time, item };
            if is_expired {
                out.expired.push(e);
            } else {
                out.buffer.push(e);
            }
        }
        out
    }

    /// Durable state: what changed in the window since the last checkpoint,
    /// as a delta of store [`WINDOW_STORE`](crate::state::WINDOW_STORE).
    pub fn checkpoint_delta(&mut self, sources: &SourceTable) -> Option<StoreDelta> {
        let log = self.log.as_mut()?;
        let mut entries = RVec::new();
        let all = self.windower.expired().iter().chain(self.windower.buffer().iter());
        for e in all.filter(|e| e.item.seq >= log.saved_upto) {
            let (component, streams) = &sources.components[e.item.component as usize];
            let stream = &streams[e.item.stream as usize].name;
            let key = [Value::U64(u64::from(log.index)), Value::U64(e.item.seq)];
            let bytes = crate::state::codec::encode_window_entry(
                e.time,
                (component.as_str(), stream.as_str(), e.item.task),
                &e.item.values,
            );
            entries.push(StateEntry { key: RVec::from_slice(&key), bytes: bytes.into() });
        }
        let (since_fire, next_end, max_seen) = self.windower.triggers();
        let meta = crate::state::codec::WindowMeta {
            since_fire: since_fire as u64,
            next_end,
            max_seen,
            expired: self.windower.expired().iter().map(|e| e.item.seq).collect(),
        };
        // The trigger state: the per-task record (an empty key).
        let meta = crate::state::codec::encode_window_meta(&meta);
        entries.push(StateEntry { key: RVec::new(), bytes: meta.into() });
        let index = u64::from(log.index);
        let mut removed: RVec<RVec<Value>> = log
            .removed
            .drain(..)
            .map(|seq| RVec::from_slice(&[Value::U64(index), Value::U64(seq)]))
            .collect();
        for (origin, seq) in self.moved.drain(..) {
            removed.push(RVec::from_slice(&[Value::U64(u64::from(origin)), Value::U64(seq)]));
        }
        log.saved_upto = self.next_seq;
        Some(StoreDelta { store: crate::state::WINDOW_STORE.into(), entries, removed })
    }

    /// Before a settle drops the previous window's expired tuples: the
    /// saved ones among them are removed at the next checkpoint.
    fn forget_expired(&mut self) {
        let Some(log) = self.log.as_mut() else { return };
        let saved = log.saved_upto;
        log.removed
            .extend(self.windower.expired().iter().map(|e| e.item.seq).filter(|&seq| seq < saved));
    }

    /// Starts a flush: the next [`BoltExecutor::run_windows`] runs every
    /// window the buffered tuples wait for, then acks what is left.
    pub fn flush(&mut self) {
        self.flushing = !self.windower.is_empty();
    }

    /// How long the bolt may block before its next processing-time window
    /// (`None` on simulated time: a [`Control::Sync`](crate::control::Control::Sync)
    /// runs the windows due once the clock moved).
    pub fn until_deadline(&self) -> Option<Duration> {
        if self.simulated.is_some() {
            return None;
        }
        let deadline = self.windower.next_deadline()?;
        Some(Duration::from_millis(deadline.saturating_sub(self.now_millis())))
    }

    /// Processing time: milliseconds since the epoch, or the simulated reading.
    fn now_millis(&self) -> u64 {
        match &self.simulated {
            Some(simulated) => simulated.now_millis(),
            None => {
                SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
            }
        }
    }
}

impl BoltExecutor {
    /// Buffers one input tuple (a late one goes out on `late` and is acked),
    /// then runs the windows it made due.
    pub(super) fn window_tuple(
        &mut self,
        turn: &mut Turn,
        name: &str,
        (component, stream, task): (u32, u32, u32),
        values: &[Value],
        ids: &[(RootId, EdgeId)],
    ) {
        let Some(state) = self.window.as_mut() else { return };
        let time = match &state.timestamp_index {
            None => state.now_millis(),
            Some(index) => {
                let at = index[component as usize][stream as usize];
                match at.and_then(|i| values.get(i)) {
                    Some(Value::I64(ts)) if *ts >= 0 => *ts as u64,
                    Some(Value::U64(ts)) => *ts,
                    _ => {
                        // No usable timestamp: the tuple cannot be placed.
                        let anchor = self.inputs.begin(ids);
                        let message = "a tuple without an integer timestamp field (ms since the \
                                       epoch) was failed";
                        count_error(&mut turn.stats, &self.core.shared, name, message);
                        let (transfer, stats) = (&mut self.core.transfer, &mut turn.stats);
                        self.inputs.fail(anchor, transfer, stats, StatField::FailedExplicit);
                        return;
                    }
                }
            }
        };
        let anchor = self.inputs.begin(ids);
        // Tracked until the tuple leaves its last window.
        self.inputs.finish(true, false, &mut self.core.transfer, &mut turn.stats);
        let seq = state.next_seq;
        state.next_seq += 1;
        let held = Held { values: values.to_vec(), component, stream, task, anchor, seq };
        if let Pushed::Late(held) = state.windower.push(time, held) {
            self.late(turn, held);
        }
        self.run_windows(turn, name);
    }

    /// Emits a late tuple on `late`, anchored to it, then acks it.
    fn late(&mut self, turn: &mut Turn, held: Held) {
        if let Some(late) = self.window.as_ref().and_then(|s| s.late_stream) {
            let anchors = [held.anchor];
            let mut output = HostOutput {
                transfer: &mut self.core.transfer,
                stats: &mut turn.stats,
                error: &mut turn.emit_error,
                side: Side::Window { inputs: &mut self.inputs, anchors: &anchors },
            };
            output.emit(
                late,
                RSlice::from_slice(&held.values),
                RSlice::from_slice(&[]),
                ROption::RNone,
                ROption::RNone,
            );
        }
        if let Some(e) = turn.emit_error.take() {
            count_emit_error(&mut turn.stats, &self.core, "late", &e);
        }
        self.inputs.ack(held.anchor, &mut self.core.transfer, &mut turn.stats);
    }

    /// Runs every window that is due now (until emits back up: the rest
    /// run on the next turn).
    pub(super) fn run_windows(&mut self, turn: &mut Turn, name: &str) {
        // The clock is read only for windows on processing time.
        let Some(now) =
            self.window.as_ref().map(|w| if w.windower.reads_clock() { w.now_millis() } else { 0 })
        else {
            return;
        };
        loop {
            let Some(state) = self.window.as_mut() else { return };
            let firing =
                if state.flushing { state.windower.fire_flush() } else { state.windower.fire(now) };
            let Some(firing) = firing else {
                if state.flushing {
                    state.flushing = false;
                    retire_rest(self, turn);
                }
                return;
            };
            let result = if self.core.poisoned {
                Err(None)
            } else {
                self.execute_window(turn, name, &firing)
            };
            let (ok, panic) = match result {
                Ok(()) => (true, None),
                Err(panic) => (false, panic),
            };
            settle(self, turn, ok);
            if let Some(e) = panic {
                self.restart(turn, e);
            }
            if self.core.transfer.has_pending() {
                return;
            }
        }
    }

    /// Hands the window `firing` to `execute_window` as a view over the
    /// buffer (emits anchored to every tuple of the window). An error is
    /// counted; `Err` carries it on when it was a panic (the task restarts).
    fn execute_window(
        &mut self,
        turn: &mut Turn,
        name: &str,
        firing: &Firing,
    ) -> Result<(), Option<PluginError>> {
        let Some(state) = self.window.as_mut() else { return Err(None) };
        let sources = &*self.sources;
        let buffer = state.windower.buffer();
        let mut anchors = Vec::with_capacity(firing.tuples.len());
        let tuples: Vec<Tuple<'_>> = firing
            .tuples
            .clone()
            .map(|i| {
                let held = &buffer[i].item;
                anchors.push(held.anchor);
                held.view(sources, held.anchor)
            })
            .collect();
        let expired: Vec<Tuple<'_>> =
            state.windower.expired().iter().map(|e| e.item.view(sources, Anchor::NONE)).collect();
        let new_from = firing.new_tuples.start - firing.tuples.start;
        let view = WindowView {
            tuples: RSlice::from_slice(&tuples),
            new_tuples: RSlice::from_slice(&tuples[new_from..]),
            expired: RSlice::from_slice(&expired),
            start_millis: firing.start,
            end_millis: firing.end,
        };
        let mut output = HostOutput {
            transfer: &mut self.core.transfer,
            stats: &mut turn.stats,
            error: &mut turn.emit_error,
            side: Side::Window { inputs: &mut self.inputs, anchors: &anchors },
        };
        let result = self.bolt.execute_window(&view, &mut output).into_result();
        self.count_window_errors(turn, name, result)
    }

    /// Counts what went wrong in `execute_window`: a refused emit, and the
    /// call's own error, passed on when it was a panic.
    fn count_window_errors(
        &self,
        turn: &mut Turn,
        name: &str,
        result: Result<(), PluginError>,
    ) -> Result<(), Option<PluginError>> {
        if let Some(e) = turn.emit_error.take() {
            count_emit_error(&mut turn.stats, &self.core, "window", &e);
        }
        result.map_err(|e| {
            count_error(&mut turn.stats, &self.core.shared, name, &format!("execute_window: {e}"));
            e.is_panic().then_some(e)
        })
    }
}

/// Acks the tuples a flush leaves: they had every window they will get.
fn retire_rest(bolt: &mut BoltExecutor, turn: &mut Turn) {
    let Some(state) = bolt.window.as_mut() else { return };
    state.forget_expired();
    for entry in state.windower.retire_rest() {
        bolt.inputs.ack(entry.item.anchor, &mut bolt.core.transfer, &mut turn.stats);
    }
}

/// Acks (or fails) the tuples that left their last window.
fn settle(bolt: &mut BoltExecutor, turn: &mut Turn, ok: bool) {
    let Some(state) = bolt.window.as_mut() else { return };
    state.forget_expired();
    for entry in state.windower.settle() {
        let anchor = entry.item.anchor;
        if ok {
            bolt.inputs.ack(anchor, &mut bolt.core.transfer, &mut turn.stats);
        } else {
            bolt.inputs.fail(
                anchor,
                &mut bolt.core.transfer,
                &mut turn.stats,
                StatField::FailedExplicit,
            );
        }
    }
}
