//! [`ReplaySpout`]: a reliable spout that logs every emit, ack and fail, to
//! check at-least-once delivery end to end.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};

use serde::Deserialize;
use squall_plugin_api::prelude::*;

use crate::require_path;

/// [`ReplaySpout`]'s config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayConfig {
    #[serde(default = "default_messages")]
    messages: u64,
    log: String,
    #[serde(default)]
    done_file: Option<String>,
    #[serde(default)]
    label: Option<String>,
}

/// The format tag of [`ReplaySpout`]'s saved state.
const STATE_FORMAT: &str = "testkit-replay/1";

fn default_messages() -> u64 {
    100_000
}

/// A set of ids `0..n` as a bitset: one bit per message, 12.5 KB for 100 000.
#[derive(Debug)]
struct IdSet {
    words: Vec<u64>,
}

impl IdSet {
    /// An empty set for ids `0..n`.
    ///
    /// # Errors
    /// When the bitset cannot be allocated (an absurd `messages`).
    fn with_capacity(n: u64) -> Result<Self> {
        let too_many = || format!("messages = {n} is too large: cannot allocate its ack bitset");
        let words = usize::try_from(n.div_ceil(64)).map_err(|_| too_many())?;
        let mut bits = Vec::new();
        bits.try_reserve_exact(words).map_err(|_| too_many())?;
        bits.resize(words, 0);
        Ok(Self { words: bits })
    }

    /// Adds `id`; true when it was not in the set yet.
    fn insert(&mut self, id: u64) -> bool {
        let (word, bit) = ((id / 64) as usize, 1u64 << (id % 64));
        let was_absent = self.words[word] & bit == 0;
        self.words[word] |= bit;
        was_absent
    }

    fn contains(&self, id: u64) -> bool {
        self.words.get((id / 64) as usize).is_some_and(|w| w & (1u64 << (id % 64)) != 0)
    }

    /// Removes `id`; true when it was in the set.
    fn remove(&mut self, id: u64) -> bool {
        let present = self.contains(id);
        if present {
            self.words[(id / 64) as usize] &= !(1u64 << (id % 64));
        }
        present
    }
}

/// The spout's log: whole lines through a `BufWriter`, flushed so that a
/// line never straddles two writes (the file is opened for appending, so
/// several tasks naming the same file do not cut each other's lines).
#[derive(Debug)]
struct LineLog {
    path: String,
    writer: BufWriter<File>,
}

impl LineLog {
    const CAPACITY: usize = 64 * 1024;

    fn open(path: &str) -> Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open replay log {path}: {e}"))?;
        Ok(Self { path: path.to_owned(), writer: BufWriter::with_capacity(Self::CAPACITY, file) })
    }

    /// Buffers `<event> <id>`.
    fn event(&mut self, event: &str, id: u64) -> Result<()> {
        self.line(format_args!("{event} {id}\n"))
    }

    fn line(&mut self, line: std::fmt::Arguments<'_>) -> Result<()> {
        // A line is at most ~30 bytes; flush first when it might not fit, so
        // the BufWriter never splits it.
        if self.writer.capacity() - self.writer.buffer().len() < 64 {
            self.writer.flush().map_err(|e| self.error(e))?;
        }
        self.writer.write_fmt(line).map_err(|e| self.error(e))
    }

    fn flush(&mut self) -> Result<()> {
        self.writer.flush().map_err(|e| self.error(e))
    }

    fn error(&self, e: std::io::Error) -> Error {
        format!("cannot write replay log {}: {e}", self.path).into()
    }
}

/// A reliable spout that emits message ids `0..messages` (value `U64(id)` on
/// `["value"]`, message id `id`), replays failed ones first (oldest first),
/// and logs everything.
///
/// Config: `messages` (u64, 100 000), `log` (path, required), `done_file`
/// (path, optional) and `label` (printed at `open`, optional).
///
/// The log, opened for appending at `open`, gets one line per event:
/// `emit <id>` (every emit, replays included), `ack <id>`, `fail <id>`, and
/// `close` at `close`, where it is flushed. An ack or fail of an id this
/// instance did not emit (or already settled) is logged as `stray-ack <id>`
/// or `stray-fail <id>` and otherwise ignored: its ids mean something only to
/// the instance that emitted them, so a live swap must drain it.
///
/// Contract 1.1 state (`testkit-replay/1`): the next id, the replay queue and
/// the acked set go to a replacing instance; trees in flight do not. When the number of distinct acked
/// ids reaches `messages`, the log is flushed and then `done_file` is created
/// (once), so a test can wait for it and read a complete log.
#[derive(Debug)]
pub struct ReplaySpout {
    messages: u64,
    log_path: String,
    done_file: Option<String>,
    label: Option<String>,
    log: Option<LineLog>,
    /// The ids this instance emitted and has not seen acked or failed: an
    /// ack or fail of any other id is a `stray` (the ids of a live-swapped
    /// predecessor's trees, had the host not drained them).
    in_flight: IdSet,
    /// The next id never emitted before.
    next_id: u64,
    /// Failed ids to emit again, oldest first.
    replay: VecDeque<u64>,
    acked: IdSet,
    distinct_acked: u64,
    done: bool,
    /// A log error from `ack`/`fail`/`close`, which cannot return one;
    /// reported by the next `next_tuple`.
    deferred_error: Option<Error>,
}

impl ReplaySpout {
    fn log(&mut self) -> Result<&mut LineLog> {
        self.log.as_mut().ok_or_else(|| "the replay log is not open (open was not called)".into())
    }

    /// Logs an event from a call that cannot return an error.
    fn log_deferred(&mut self, event: &str, id: u64) {
        if let Err(e) = self.log().and_then(|log| log.event(event, id)) {
            self.deferred_error.get_or_insert(e);
        }
    }

    /// Flushes the log and creates the done file, once all ids are acked.
    fn finish_if_done(&mut self) -> Result<()> {
        if self.done || self.distinct_acked < self.messages {
            return Ok(());
        }
        self.done = true;
        self.log()?.flush()?;
        if let Some(path) = &self.done_file {
            File::create(path).map_err(|e| format!("cannot create done file {path}: {e}"))?;
        }
        Ok(())
    }
}

impl Spout for ReplaySpout {
    const NAME: &'static str = "ReplaySpout";
    const DESCRIPTION: &'static str =
        "emits ids 0..messages reliably, replays failures, logs every event";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[
        ConfigKey::optional(
            "messages",
            KeyKind::Integer,
            "100000",
            "message ids emitted: 0..messages",
        ),
        ConfigKey::required(
            "log",
            KeyKind::String,
            "the file every emit, ack and fail is logged to",
        ),
        ConfigKey::maybe("done_file", KeyKind::String, "created once every message is acked"),
        ConfigKey::maybe(
            "label",
            KeyKind::String,
            "printed when the spout opens (shows which version runs after a live swap)",
        ),
    ]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: ReplayConfig = config.parse()?;
        require_path(&config.log, "log")?;
        if let Some(done_file) = &config.done_file {
            require_path(done_file, "done_file")?;
        }
        Ok(Self {
            messages: config.messages,
            log_path: config.log,
            done_file: config.done_file,
            label: config.label,
            log: None,
            in_flight: IdSet::with_capacity(config.messages)?,
            next_id: 0,
            replay: VecDeque::new(),
            acked: IdSet::with_capacity(config.messages)?,
            distinct_acked: 0,
            done: false,
            deferred_error: None,
        })
    }

    fn open(&mut self, context: &TaskContext) -> Result<()> {
        self.log = Some(LineLog::open(&self.log_path)?);
        if let Some(label) = &self.label {
            println!(
                "replay spout opened: label {label}, next id {}, {} acked, {} to replay (task {})",
                self.next_id,
                self.distinct_acked,
                self.replay.len(),
                context.task_id
            );
        }
        self.finish_if_done()
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        if let Some(e) = self.deferred_error.take() {
            return Err(e);
        }
        let (id, replayed) = match self.replay.front() {
            Some(&id) => (id, true),
            None if self.next_id < self.messages => (self.next_id, false),
            None => return Ok(()),
        };
        // Log first: if the log fails, nothing was emitted and the id stays queued.
        self.log()?.event("emit", id)?;
        if replayed {
            self.replay.pop_front();
        } else {
            self.next_id += 1;
        }
        self.in_flight.insert(id);
        collector.emit_with_id(&[Value::U64(id)], id);
        Ok(())
    }

    fn ack(&mut self, message_id: MessageId) {
        let id = message_id.0;
        if !self.in_flight.remove(id) {
            return self.log_deferred("stray-ack", id);
        }
        self.log_deferred("ack", id);
        if id < self.messages && self.acked.insert(id) {
            self.distinct_acked += 1;
            if let Err(e) = self.finish_if_done() {
                self.deferred_error.get_or_insert(e);
            }
        }
    }

    fn fail(&mut self, message_id: MessageId) {
        let id = message_id.0;
        if !self.in_flight.remove(id) {
            return self.log_deferred("stray-fail", id);
        }
        self.log_deferred("fail", id);
        if id < self.messages && !self.acked.contains(id) {
            self.replay.push_back(id);
        }
    }

    fn close(&mut self) {
        let result =
            self.log().and_then(|log| log.line(format_args!("close\n")).and_then(|()| log.flush()));
        if let Err(e) = result {
            eprintln!("squall-testkit: {e}");
        }
    }

    /// The progress a successor takes over: the next id, the replay queue
    /// and the acked set. Trees still in flight are not part of it: their
    /// ids mean something only to this instance.
    fn save_state(&mut self) -> Option<State> {
        let mut bytes = Vec::with_capacity(25 + 8 * (self.replay.len() + self.acked.words.len()));
        bytes.extend_from_slice(&self.next_id.to_le_bytes());
        bytes.extend_from_slice(&self.distinct_acked.to_le_bytes());
        bytes.push(u8::from(self.done));
        bytes.extend_from_slice(&(self.replay.len() as u64).to_le_bytes());
        for id in &self.replay {
            bytes.extend_from_slice(&id.to_le_bytes());
        }
        for word in &self.acked.words {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        let mut state = State::new(STATE_FORMAT);
        state.push(&[], bytes);
        Some(state)
    }

    fn restore_state(&mut self, state: State) -> Result<()> {
        if state.format.as_str() != STATE_FORMAT {
            return Err(format!(
                "unknown state format `{}` (expected `{STATE_FORMAT}`)",
                state.format
            )
            .into());
        }
        let entry = state.entries.first().ok_or("an empty replay state")?;
        let words: Vec<u64> = entry
            .bytes
            .get(17..)
            .unwrap_or_default()
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect();
        let head = |at: usize| -> Result<u64> {
            let b = entry.bytes.get(at..at + 8).ok_or("a truncated replay state")?;
            Ok(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        };
        let (next_id, distinct) = (head(0)?, head(8)?);
        let done = entry.bytes.get(16).ok_or("a truncated replay state")? != &0;
        let count = usize::try_from(*words.first().ok_or("a truncated replay state")?)
            .map_err(|_| "a corrupt replay state")?;
        let ids = &words[1..];
        if ids.len() < count || ids.len() - count != self.acked.words.len() {
            return Err(format!(
                "the replay state does not fit this instance's `messages` = {}",
                self.messages
            )
            .into());
        }
        let replay: VecDeque<u64> = ids[..count].iter().copied().collect();
        let acked = ids[count..].to_vec();
        self.next_id = next_id;
        self.distinct_acked = distinct;
        self.done = done;
        self.replay = replay;
        self.acked.words = acked;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_config_keys_match_the_config_struct() {
        squall_plugin_api::testing::check_config_keys::<ReplayConfig>(
            ReplaySpout::CONFIG_KEYS,
            "log = \"l\"\ndone_file = \"d\"\nlabel = \"v2\"",
        )
        .unwrap();
    }
    use crate::test_support::{context, temp_dir};
    use squall_plugin_api::testing::Recorder;

    #[test]
    fn id_set_counts_each_id_once() {
        let mut set = IdSet::with_capacity(130).unwrap();
        assert!(set.insert(0));
        assert!(set.insert(129));
        assert!(!set.insert(129));
        assert!(set.contains(0) && set.contains(129) && !set.contains(64));
        let err = IdSet::with_capacity(u64::MAX).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("messages = {} is too large: cannot allocate its ack bitset", u64::MAX)
        );
    }

    #[test]
    fn replays_failed_ids_first_logs_everything_and_signals_done() {
        let dir = temp_dir("replay");
        let (log, done) = (dir.join("replay.log"), dir.join("done"));
        let config = format!(
            "messages = 3\nlog = {:?}\ndone_file = {:?}",
            log.to_str().unwrap(),
            done.to_str().unwrap()
        );
        let mut spout = ReplaySpout::new(&ComponentConfig::new(&config)).unwrap();
        spout.open(&context("replay", 1, 0, &[("default", false)], &[])).unwrap();
        let mut recorder = Recorder::default();
        let mut next = |spout: &mut ReplaySpout| {
            spout.next_tuple(&mut SpoutCollector::new(recorder.output())).unwrap()
        };
        next(&mut spout);
        next(&mut spout);
        spout.fail(MessageId(1));
        spout.ack(MessageId(0));
        next(&mut spout); // replay of 1
        next(&mut spout); // 2
        next(&mut spout); // nothing left
        spout.ack(MessageId(2));
        assert!(!done.exists());
        spout.ack(MessageId(1));
        assert!(done.exists());
        spout.close();

        let ids: Vec<_> =
            recorder.emitted.iter().map(|e| (e.values[0].as_u64(), e.message_id)).collect();
        assert_eq!(
            ids,
            [0, 1, 1, 2].map(|id| (Some(id), Some(MessageId(id)))),
            "emits carry the id as value and message id"
        );
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text, "emit 0\nemit 1\nfail 1\nack 0\nemit 1\nemit 2\nack 2\nack 1\nclose\n");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_successor_takes_over_progress_and_calls_its_predecessors_ids_strays() {
        let dir = temp_dir("replay-swap");
        let log = dir.join("replay.log");
        let config = format!("messages = 70\nlog = {:?}", log.to_str().unwrap());
        let mut old = ReplaySpout::new(&ComponentConfig::new(&config)).unwrap();
        old.open(&context("replay", 1, 0, &[("default", false)], &[])).unwrap();
        let mut recorder = Recorder::default();
        for _ in 0..67 {
            old.next_tuple(&mut SpoutCollector::new(recorder.output())).unwrap();
        }
        old.fail(MessageId(3));
        old.ack(MessageId(66));
        for id in (0..66).filter(|&id| id != 3) {
            old.ack(MessageId(id));
        }
        let state = old.save_state().unwrap();
        old.close();

        let mut new = ReplaySpout::new(&ComponentConfig::new(&config)).unwrap();
        new.restore_state(state.clone()).unwrap();
        new.open(&context("replay", 1, 0, &[("default", false)], &[])).unwrap();
        // An id the predecessor emitted is not the successor's to settle.
        new.ack(MessageId(5));
        let mut recorder = Recorder::default();
        for _ in 0..5 {
            new.next_tuple(&mut SpoutCollector::new(recorder.output())).unwrap();
        }
        let ids: Vec<_> = recorder.emitted.iter().filter_map(|e| e.values[0].as_u64()).collect();
        assert_eq!(ids, [3, 67, 68, 69], "the replay first, then the next new ids, then nothing");
        new.close();
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(
            text.ends_with("close\nstray-ack 5\nemit 3\nemit 67\nemit 68\nemit 69\nclose\n"),
            "{text}"
        );

        // A state for another `messages` is refused.
        let other = format!("messages = 700\nlog = {:?}", log.to_str().unwrap());
        let mut wrong = ReplaySpout::new(&ComponentConfig::new(&other)).unwrap();
        let err = wrong.restore_state(state).unwrap_err().to_string();
        assert!(err.contains("does not fit"), "{err}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_log_path_is_required() {
        let err = ReplaySpout::new(&ComponentConfig::new("messages = 5")).unwrap_err().to_string();
        assert!(err.contains("missing field `log`"), "{err}");
    }
}
