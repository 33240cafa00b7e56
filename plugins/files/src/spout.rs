//! [`LineSpout`]: the lines of a file or a directory, reliably, resuming
//! from a checkpoint after a restart.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use squall_connector::{Acked, Backoff, Failed, Pending, Redelivery, RetryPolicy};
use squall_plugin_api::metrics;
use squall_plugin_api::prelude::*;

use crate::checkpoint::{self, AckTracker, Position};
use crate::pattern::Pattern;
use crate::source::{FileId, Input, Reader};

squall_connector::connector_config! {
    /// The spout's `config` table: the struct and its declared keys.
    #[derive(Debug, Clone, PartialEq)]
    struct LineSpoutConfig {
        path: String = required(String, "a file, or a directory read in name order"),
        pattern: Option<String> = maybe(String, "directory only: file names to read (* and ?)"),
        follow: bool = default(Bool, "false", "follow the input like tail -F"),
        poll_interval_ms: u64 = default(Integer, "200", "following: how often an idle spout looks for new data"),
        checkpoint: Option<String> = maybe(String, "the checkpoint file (default <path>.squall-checkpoint)"),
        checkpoint_interval_ms: u64 = default(Integer, "1000", "how often the checkpoint is written while it changes"),
        max_pending: usize = default(Integer, "10000", "most lines held in flight or acked behind one in flight"),
        max_line_bytes: usize = default(Integer, "1048576", "a longer line is emitted in pieces of this many bytes"),
        max_deliver: u32 = default(Integer, "10", "deliveries after which a failing line goes to the dead-letter file"),
        dead_letter: Option<String> = maybe(String, "the dead-letter file, JSON lines (default <path>.squall-dead-letters)"),
    }
}

/// The most a duration key may say: one day.
const MAX_MILLIS: u64 = 86_400_000;

/// Where a line held until its tree completes was (the checkpoint's part).
#[derive(Debug)]
struct Held {
    file: Arc<FileId>,
    offset: u64,
}

/// The spout's counters.
#[derive(Debug)]
struct LineMetrics {
    read: metrics::Counter,
    replayed: metrics::Counter,
    dead_lettered: metrics::Counter,
}

impl LineMetrics {
    fn register() -> Self {
        Self {
            read: metrics::counter("lines_read", "Lines read from the input."),
            replayed: metrics::counter("lines_replayed", "Failed lines emitted again."),
            dead_lettered: metrics::counter(
                "lines_dead_lettered",
                "Lines written to the dead-letter file after max_deliver failed deliveries.",
            ),
        }
    }
}

/// Emits the lines of a file, or of the files of a directory in name
/// order, on the default stream `["line", "file", "offset"]`: the text
/// without its line ending, the path of its file and its byte offset in
/// that file. `line` comes first so that components reading their input's
/// first value (such as `examples::SplitSentence`) take the text.
///
/// Every line is emitted with a message id and held until it is acked; a
/// failed line is emitted again (same id) before any new one. The spout
/// records the contiguous acked prefix of its input (the first line not
/// yet acked: a later line's ack does not move it) in a checkpoint file,
/// written atomically at most every `checkpoint_interval_ms` while it
/// changes (checked at each `next_tuple` and `ack`) and at `close`, and resumes from it in `open`: at-least-once across
/// restarts, including `kill -9`. With `follow = true` it reads on at the
/// end of the input like `tail -F`, following rotation and truncation.
///
/// Config keys: `path` (required), `pattern`, `follow` (false),
/// `poll_interval_ms` (200), `checkpoint` (`<path>.squall-checkpoint`),
/// `checkpoint_interval_ms` (1000), `max_pending` (10000),
/// `max_line_bytes` (1 MiB). See docs/connectors.md. The spout must run
/// with `parallelism = 1`.
#[derive(Debug)]
pub struct LineSpout {
    path: PathBuf,
    checkpoint_path: PathBuf,
    checkpoint_interval: Duration,
    max_pending: usize,
    reader: Reader,
    /// Every line whose tree has not completed, in reading order, keyed by
    /// its message id (ids grow: `squall_connector::MessageIds`): its
    /// first entry is the checkpoint. A line leaves it when its tree is
    /// acked or it is dead-lettered.
    tracker: AckTracker<Held>,
    /// The lines in flight with what to emit again (`[line, file,
    /// offset]`), their deliveries and replays: the connector core.
    pending: Pending<[Value; 3]>,
    dead_letter_path: PathBuf,
    dead_letters: Option<File>,
    next_checkpoint: Option<Instant>,
    written: Option<Position>,
    /// The last checkpoint error logged, so a persistent one is logged once.
    checkpoint_error: Option<String>,
    metrics: Option<LineMetrics>,
    /// Durable state (contract 1.2): the position lives in the topology's
    /// checkpoints instead of the checkpoint file (`None`: no `[state]`).
    durable: Option<DurablePosition>,
}

/// The position format in checkpoints and in swap state.
const POSITION_FORMAT: &str = "squall-files-position/1";

/// A durable spout's position: where reading goes on, and the failed lines
/// still to emit again (with their text: the file may be rotated away).
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DurablePosition {
    read: Option<Position>,
    replay: Vec<(String, String, u64)>,
}

impl DurablePosition {
    fn from_state(state: &State) -> Result<Self> {
        if state.is_no_checkpoint() {
            return Ok(Self::default());
        }
        if state.format != POSITION_FORMAT {
            return Err(format!(
                "a position in format {:?} is not a LineSpout's ({POSITION_FORMAT:?})",
                state.format
            )
            .into());
        }
        let Some(entry) = state.entries.first() else { return Ok(Self::default()) };
        serde_json::from_slice(&entry.bytes)
            .map_err(|e| format!("a LineSpout position that does not parse: {e}").into())
    }

    fn to_state(&self) -> State {
        let mut state = State::new(POSITION_FORMAT);
        state.push(&[], serde_json::to_vec(self).expect("a position serializes"));
        state
    }
}

impl LineSpout {
    /// The position the checkpoint records now: the first line held, or,
    /// when every line read is acked, where the reader goes on.
    fn checkpoint_position(&self) -> Option<Position> {
        let Some(held) = self.tracker.first() else {
            return self.reader.position();
        };
        if let Some(current) = self.reader.current_file() {
            if current.inode == held.file.inode
                && current.path == held.file.path
                && current.generation > held.file.generation
            {
                // The line's content was truncated away: what can still be
                // read again starts at 0 of the file as it is now.
                return Some(Position {
                    file: current.path.clone(),
                    inode: current.inode,
                    offset: 0,
                });
            }
        }
        Some(Position { file: held.file.path.clone(), inode: held.file.inode, offset: held.offset })
    }

    /// Writes the checkpoint if it is due (or `force`) and has changed.
    /// With durable state the topology's checkpoints hold the position, and
    /// the file is not written.
    fn checkpoint(&mut self, now: Instant, force: bool) {
        if self.durable.is_some() {
            return;
        }
        if !force && self.next_checkpoint.is_some_and(|at| now < at) {
            return;
        }
        self.next_checkpoint = Some(now + self.checkpoint_interval);
        let Some(position) = self.checkpoint_position() else { return };
        if self.written.as_ref() == Some(&position) {
            return;
        }
        match checkpoint::write_atomic(&self.checkpoint_path, &position) {
            Ok(()) => {
                self.written = Some(position);
                if self.checkpoint_error.take().is_some() {
                    squall_plugin_api::info!(
                        "checkpoint {} written again",
                        self.checkpoint_path.display()
                    );
                }
            }
            Err(e) => {
                let e = e.to_string();
                if self.checkpoint_error.as_ref() != Some(&e) {
                    squall_plugin_api::warn!("{e}; lines will be read again after a restart");
                    self.checkpoint_error = Some(e);
                }
            }
        }
    }

    /// The durable position now, with `restored`: the restored failed lines
    /// not emitted again yet.
    fn durable_position(&self, restored: Vec<(String, String, u64)>) -> DurablePosition {
        let mut replay = restored;
        for (_, [line, file, offset]) in self.pending.replays() {
            replay.push((
                line.as_str().unwrap_or_default().to_owned(),
                file.as_str().unwrap_or_default().to_owned(),
                offset.as_u64().unwrap_or_default(),
            ));
        }
        DurablePosition { read: self.reader.position(), replay }
    }

    /// Emits the next failed line a restored position holds (as a new
    /// message); false when there is none.
    fn replay_restored(&mut self, collector: &mut SpoutCollector<'_>) -> bool {
        let Some(durable) = &mut self.durable else { return false };
        if durable.replay.is_empty() || !self.pending.has_room() {
            return false;
        }
        let (line, file, offset) = durable.replay.remove(0);
        let values = [Value::from(line), Value::from(file), Value::U64(offset)];
        let id = self.pending.insert(values, 1);
        if let Some(values) = self.pending.get(id) {
            collector.emit_with_id(values, id);
        }
        if let Some(m) = &self.metrics {
            m.replayed.inc();
        }
        true
    }

    /// Emits the oldest failed line still held; false when there is none.
    fn replay_one(&mut self, collector: &mut SpoutCollector<'_>) -> bool {
        if !self.pending.has_replays() {
            return false;
        }
        let Some((id, values)) = self.pending.next_replay(Instant::now()) else { return false };
        collector.emit_with_id(values, id);
        if let Some(m) = &self.metrics {
            m.replayed.inc();
        }
        true
    }

    /// Appends `record` as one line to the dead-letter file (opened at the
    /// first), and syncs it.
    fn write_dead_letter(&mut self, record: &serde_json::Value) -> std::io::Result<()> {
        if self.dead_letters.is_none() {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.dead_letter_path)?;
            self.dead_letters = Some(file);
        }
        let file = self.dead_letters.as_mut().expect("just opened");
        let mut line = record.to_string();
        line.push('\n');
        file.write_all(line.as_bytes())?;
        file.sync_data()
    }

    /// Appends a dead line to the dead-letter file (one JSON object, synced)
    /// and lets the checkpoint pass it. When it cannot be written the line
    /// stays held: the checkpoint stops before it, so a restart reads it again.
    fn dead_letter(&mut self, id: u64, values: [Value; 3], reason: &str) {
        let record = serde_json::json!({
            "line": values[0].as_str().unwrap_or_default(),
            "file": values[1].as_str().unwrap_or_default(),
            "offset": values[2].as_u64().unwrap_or_default(),
            "reason": reason,
        });
        match self.write_dead_letter(&record) {
            Ok(()) => {
                if let Some(m) = &self.metrics {
                    let n = m.dead_lettered.get() + 1;
                    m.dead_lettered.inc();
                    if n.is_power_of_two() {
                        squall_plugin_api::warn!(
                            "line at {} offset {} dead-lettered to {}: {reason} ({n} so far)",
                            record["file"],
                            record["offset"],
                            self.dead_letter_path.display()
                        );
                    }
                }
                self.tracker.ack(id);
                self.checkpoint(Instant::now(), false);
            }
            Err(e) => {
                self.dead_letters = None;
                squall_plugin_api::error!(
                    "cannot write dead letter to {}: {e}; the line stays unacked, and the \
                     checkpoint stops before it",
                    self.dead_letter_path.display()
                );
            }
        }
    }
}

/// Checks the config and works out the input: the errors are config errors.
fn input_of(
    config: &LineSpoutConfig,
    checkpoint_path: &Path,
    dead_letter_path: &Path,
) -> Result<Input> {
    let path = Path::new(&config.path);
    let meta = std::fs::metadata(path);
    match &meta {
        Ok(meta) if meta.is_dir() => {
            let pattern = config.pattern.as_deref().map(Pattern::new);
            let exclude = side_files(path, &[checkpoint_path, dead_letter_path]);
            return Ok(Input::Dir { dir: path.to_path_buf(), pattern, exclude });
        }
        Ok(meta) if !meta.is_file() => {
            return Err(
                format!("path {:?} is neither a regular file nor a directory", config.path).into()
            )
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && config.follow => {
            check_followed(config, path)?;
        }
        Err(e) => return Err(format!("path {:?}: {e}", config.path).into()),
    }
    if config.pattern.is_some() {
        return Err(format!(
            "pattern applies to a directory, and path {:?} is a file",
            config.path
        )
        .into());
    }
    Ok(Input::File(path.to_path_buf()))
}

/// The checkpoint and the dead letters (`sides`), kept inside the input
/// directory `dir`, are not input: their names, and their `.tmp` names.
fn side_files(dir: &Path, sides: &[&Path]) -> Vec<std::ffi::OsString> {
    let mut exclude = Vec::new();
    for side in sides {
        let side_dir =
            side.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if side_dir.canonicalize().ok() == dir.canonicalize().ok() {
            if let Some(name) = side.file_name() {
                let mut tmp = name.to_os_string();
                tmp.push(".tmp");
                exclude.push(name.to_os_string());
                exclude.push(tmp);
            }
        }
    }
    exclude
}

/// A followed input file that does not exist yet may appear later; its
/// directory must exist (and it must not be a directory input, with a
/// `pattern`).
fn check_followed(config: &LineSpoutConfig, path: &Path) -> Result<()> {
    if config.pattern.is_some() {
        return Err(format!("path {:?}: no such directory", config.path).into());
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(
            format!("path {:?}: directory {} does not exist", config.path, dir.display()).into()
        );
    }
    Ok(())
}

/// `<input><suffix>` beside the input (for a directory `dir/`, beside it).
fn side_path(input: &Path, suffix: &str) -> PathBuf {
    let mut name = input.file_name().map(|n| n.to_os_string()).unwrap_or_else(|| ".".into());
    name.push(suffix);
    input.with_file_name(name)
}

/// The checkpoint file (its directory must exist) and the dead-letter file
/// of input `path`: as configured, or beside the input.
fn side_paths(config: &LineSpoutConfig, path: &Path) -> Result<(PathBuf, PathBuf)> {
    let checkpoint_path = match &config.checkpoint {
        Some(p) if p.is_empty() => return Err("checkpoint must not be empty".into()),
        Some(p) => PathBuf::from(p),
        None => checkpoint::default_path(path),
    };
    let checkpoint_dir =
        checkpoint_path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !checkpoint_dir.is_dir() {
        return Err(format!(
            "the checkpoint's directory {} does not exist",
            checkpoint_dir.display()
        )
        .into());
    }
    let dead_letter_path = match &config.dead_letter {
        Some(p) if p.is_empty() => return Err("dead_letter must not be empty".into()),
        Some(p) => PathBuf::from(p),
        None => side_path(path, ".squall-dead-letters"),
    };
    Ok((checkpoint_path, dead_letter_path))
}

/// A duration key in milliseconds, 1 ms to one day.
fn millis(key: &str, value: u64) -> Result<Duration> {
    if value == 0 || value > MAX_MILLIS {
        return Err(format!("{key} must be between 1 and {MAX_MILLIS}, not {value}").into());
    }
    Ok(Duration::from_millis(value))
}

impl Spout for LineSpout {
    const NAME: &'static str = "LineSpout";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(LineSpoutConfig::KEYS);
    const DESCRIPTION: &'static str =
        "lines of a file or directory, reliably; checkpoints the acked prefix; follows like tail -F";
    /// With durable state the position is in the topology's checkpoints.
    const CHECKPOINTS: bool = true;

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["line", "file", "offset"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = LineSpoutConfig::parse(config)?;
        if config.path.is_empty() {
            return Err("path must not be empty".into());
        }
        let poll_interval = millis("poll_interval_ms", config.poll_interval_ms)?;
        let checkpoint_interval = millis("checkpoint_interval_ms", config.checkpoint_interval_ms)?;
        if config.max_pending == 0 {
            return Err("max_pending must be at least 1".into());
        }
        if config.max_line_bytes == 0 {
            return Err("max_line_bytes must be at least 1".into());
        }
        if config.max_deliver == 0 {
            return Err("max_deliver must be at least 1".into());
        }
        let path = PathBuf::from(&config.path);
        let (checkpoint_path, dead_letter_path) = side_paths(&config, &path)?;
        let input = input_of(&config, &checkpoint_path, &dead_letter_path)?;
        let policy = RetryPolicy { max_deliver: config.max_deliver, backoff: Backoff::NONE };
        Ok(Self {
            path,
            checkpoint_path,
            checkpoint_interval,
            max_pending: config.max_pending,
            reader: Reader::new(input, config.follow, poll_interval, config.max_line_bytes),
            tracker: AckTracker::default(),
            pending: Pending::new(config.max_pending, policy, Redelivery::Local),
            dead_letter_path,
            dead_letters: None,
            next_checkpoint: None,
            written: None,
            checkpoint_error: None,
            metrics: None,
            durable: None,
        })
    }

    fn restore_checkpoint(&mut self, position: State) -> Result<()> {
        self.durable = Some(DurablePosition::from_state(&position)?);
        Ok(())
    }

    /// The position at a barrier: where reading goes on, and the failed
    /// lines waiting for their replay. The lines in flight are covered:
    /// their effects are in this checkpoint.
    fn checkpoint(&mut self, _checkpoint: u64) -> Option<State> {
        let durable = self.durable.as_ref()?;
        Some(self.durable_position(durable.replay.clone()).to_state())
    }

    /// A live swap hands a durable spout's position to its successor
    /// (the host drains the spout first).
    fn save_state(&mut self) -> Option<State> {
        let durable = self.durable.as_ref()?;
        Some(self.durable_position(durable.replay.clone()).to_state())
    }

    fn restore_state(&mut self, state: State) -> Result<()> {
        self.restore_checkpoint(state)
    }

    fn open(&mut self, context: &TaskContext) -> Result<()> {
        if context.parallelism > 1 {
            return Err(format!(
                "LineSpout reads {} with one task, but parallelism is {}; set parallelism = 1 \
                 (one spout per input)",
                self.path.display(),
                context.parallelism
            )
            .into());
        }
        if let Some(durable) = &self.durable {
            self.reader.resume(durable.read.as_ref())?;
            squall_plugin_api::info!(
                "{}: durable state holds the position ({}, {} failed line(s) to emit again); \
                 the checkpoint file {} is not used",
                self.path.display(),
                durable.read.as_ref().map_or_else(
                    || "from the start".to_owned(),
                    |at| format!("resuming at {} offset {}", at.file, at.offset)
                ),
                durable.replay.len(),
                self.checkpoint_path.display()
            );
            self.metrics = Some(LineMetrics::register());
            return Ok(());
        }
        let at = checkpoint::read(&self.checkpoint_path)?;
        self.reader.resume(at.as_ref())?;
        self.written = at.clone();
        match at {
            Some(at) => squall_plugin_api::info!(
                "resuming {} at {} offset {} (checkpoint {})",
                self.path.display(),
                at.file,
                at.offset,
                self.checkpoint_path.display()
            ),
            None => squall_plugin_api::info!(
                "reading {} from the start (no checkpoint at {})",
                self.path.display(),
                self.checkpoint_path.display()
            ),
        }
        self.metrics = Some(LineMetrics::register());
        Ok(())
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        if self.replay_one(collector) || self.replay_restored(collector) {
            return Ok(());
        }
        let now = Instant::now();
        self.checkpoint(now, false);
        if self.tracker.len() >= self.max_pending {
            return Ok(());
        }
        let Some(line) = self.reader.next_line(now)? else { return Ok(()) };
        let values = [Value::from(line.text), line.file.value.clone(), Value::U64(line.offset)];
        let id = self.pending.insert(values, 1);
        self.tracker.insert(id, Held { file: line.file, offset: line.offset });
        if let Some(values) = self.pending.get(id) {
            collector.emit_with_id(values, id);
        }
        if let Some(m) = &self.metrics {
            m.read.inc();
        }
        Ok(())
    }

    fn ack(&mut self, message_id: MessageId) {
        // The file's "broker ack" is the checkpoint passing the line (with
        // durable state, the topology's checkpoint: nothing to do here).
        if let Acked::Now(_) = self.pending.ack(message_id.0) {
            if self.tracker.ack(message_id.0) {
                // Also here: a throttled spout, or one at max_spout_pending,
                // gets no `next_tuple` calls for a while, but its acks go on.
                self.checkpoint(Instant::now(), false);
            }
        }
    }

    fn fail(&mut self, message_id: MessageId) {
        // A replay is emitted by next_tuple; a dead line is written to the
        // dead-letter file and then counts as done for the checkpoint.
        if let Failed::Dead { item, reason } = self.pending.fail(message_id.0, Instant::now()) {
            self.dead_letter(message_id.0, item, &reason.to_string());
        }
    }

    fn close(&mut self) {
        self.checkpoint(Instant::now(), true);
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::MetadataExt;

    use squall_plugin_api::testing::Recorder;

    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("squall-files-spout-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn context(parallelism: u32) -> TaskContext {
        TaskContext::builder("lines").topology("t").task(0, 0, parallelism).build()
    }

    fn spout(config: &str) -> LineSpout {
        let mut spout = LineSpout::new(&ComponentConfig::new(config)).unwrap();
        spout.open(&context(1)).unwrap();
        spout
    }

    /// Calls `next_tuple` `calls` times; returns the `(id, line)` emitted.
    fn next(spout: &mut LineSpout, calls: usize) -> Vec<(u64, String)> {
        let mut recorder = Recorder::default();
        for _ in 0..calls {
            spout.next_tuple(&mut SpoutCollector::new(recorder.output())).unwrap();
        }
        recorder
            .emitted
            .iter()
            .map(|e| (e.message_id.expect("reliable").0, e.values[0].to_string()))
            .collect()
    }

    fn error_of(config: &str) -> String {
        LineSpout::new(&ComponentConfig::new(config)).unwrap_err().to_string()
    }

    #[test]
    fn emits_line_file_and_offset_with_an_id() {
        let dir = temp_dir("emit");
        let path = dir.join("in.txt");
        fs::write(&path, "hello\nworld\n").unwrap();
        let mut spout = spout(&format!("path = {:?}", path.display().to_string()));
        let mut recorder = Recorder::default();
        for _ in 0..3 {
            spout.next_tuple(&mut SpoutCollector::new(recorder.output())).unwrap();
        }
        let file = path.display().to_string();
        let values: Vec<_> = recorder.emitted.iter().map(|e| e.values.clone()).collect();
        assert_eq!(
            values,
            [
                vec![Value::from("hello"), Value::from(file.as_str()), Value::U64(0)],
                vec![Value::from("world"), Value::from(file.as_str()), Value::U64(6)],
            ]
        );
        let ids: Vec<_> = recorder.emitted.iter().map(|e| e.message_id.unwrap().0).collect();
        assert!(ids[1] > ids[0], "ids grow in reading order");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_checkpoint_records_the_contiguous_acked_prefix_and_a_restart_resumes_there() {
        let dir = temp_dir("resume");
        let path = dir.join("in.txt");
        fs::write(&path, "a\nb\nc\nd\n").unwrap();
        let config = format!("path = {:?}", path.display().to_string());
        let mut first = spout(&config);
        let emitted = next(&mut first, 4);
        assert_eq!(emitted.len(), 4);
        // b and d acked, a failed then acked on replay, c never acked.
        first.ack(MessageId(emitted[1].0));
        first.ack(MessageId(emitted[3].0));
        first.close();
        let checkpoint_path = dir.join("in.txt.squall-checkpoint");
        let at = checkpoint::read(&checkpoint_path).unwrap().unwrap();
        assert_eq!(at.offset, 0, "a is not acked: nothing is safe yet");
        first.fail(MessageId(emitted[0].0));
        let replayed = next(&mut first, 1);
        assert_eq!(replayed, [(emitted[0].0, "a".to_owned())]);
        first.ack(MessageId(emitted[0].0));
        first.close();
        let at = checkpoint::read(&checkpoint_path).unwrap().unwrap();
        assert_eq!(at.offset, 4, "a and b acked; c (offset 4) is the first unacked line");

        // A restart (a new instance, as after kill -9) reads from c on.
        let mut second = spout(&config);
        let again: Vec<_> = next(&mut second, 5).into_iter().map(|(_, line)| line).collect();
        assert_eq!(again, ["c", "d"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn everything_acked_checkpoints_the_end_and_a_restart_emits_nothing() {
        let dir = temp_dir("all-acked");
        let path = dir.join("in.txt");
        fs::write(&path, "a\nb").unwrap();
        let config = format!("path = {:?}", path.display().to_string());
        let mut first = spout(&config);
        for (id, _) in next(&mut first, 3) {
            first.ack(MessageId(id));
        }
        first.close();
        let at = checkpoint::read(&dir.join("in.txt.squall-checkpoint")).unwrap().unwrap();
        assert_eq!(at.offset, 3);
        let mut second = spout(&config);
        assert!(next(&mut second, 3).is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn at_most_max_pending_lines_are_held() {
        let dir = temp_dir("max-pending");
        let path = dir.join("in.txt");
        fs::write(&path, "1\n2\n3\n4\n").unwrap();
        let mut spout = spout(&format!("path = {:?}\nmax_pending = 2", path.display().to_string()));
        let emitted = next(&mut spout, 5);
        assert_eq!(emitted.len(), 2);
        // An ack behind an unacked line frees nothing.
        spout.ack(MessageId(emitted[1].0));
        assert!(next(&mut spout, 2).is_empty());
        spout.ack(MessageId(emitted[0].0));
        assert_eq!(next(&mut spout, 5).len(), 2);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn config_errors_are_clear() {
        let dir = temp_dir("config");
        let missing = dir.join("missing.txt").display().to_string();
        assert!(error_of("").contains("missing field `path`"), "{}", error_of(""));
        assert!(error_of("path = \"x\"\nfolow = true").contains("unknown field `folow`"));
        assert_eq!(error_of("path = \"\""), "path must not be empty");
        let err = error_of(&format!("path = {missing:?}"));
        assert!(err.contains("missing.txt") && err.contains("No such file"), "{err}");
        let err = error_of(&format!("path = {missing:?}\nfollow = true\npattern = \"*\""));
        assert!(err.contains("no such directory"), "{err}");
        let file = dir.join("f");
        fs::write(&file, "").unwrap();
        let file = file.display().to_string();
        let err = error_of(&format!("path = {file:?}\npattern = \"*.log\""));
        assert!(err.contains("pattern applies to a directory"), "{err}");
        let err = error_of(&format!("path = {file:?}\npoll_interval_ms = 0"));
        assert!(err.contains("poll_interval_ms must be between 1"), "{err}");
        let err = error_of(&format!("path = {file:?}\nmax_pending = 0"));
        assert_eq!(err, "max_pending must be at least 1");
        let err = error_of(&format!("path = {file:?}\ncheckpoint = \"/nonexistent-dir/c\""));
        assert!(err.contains("/nonexistent-dir does not exist"), "{err}");
        // Following, a missing file is awaited.
        assert!(LineSpout::new(&ComponentConfig::new(&format!(
            "path = {missing:?}\nfollow = true"
        )))
        .is_ok());
        let mut two = LineSpout::new(&ComponentConfig::new(&format!("path = {file:?}"))).unwrap();
        let err = two.open(&context(2)).unwrap_err().to_string();
        assert!(err.contains("set parallelism = 1"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Calls `next_tuple` until a line is emitted (a follower looks at its
    /// input once per millisecond here); panics after many tries.
    fn next_line_following(spout: &mut LineSpout) -> (u64, String) {
        for _ in 0..5000 {
            if let Some(emitted) = next(spout, 1).pop() {
                return emitted;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("the follower emitted nothing");
    }

    #[test]
    fn lines_truncated_away_while_in_flight_checkpoint_the_start_of_the_file() {
        let dir = temp_dir("truncated-in-flight");
        let path = dir.join("app.log");
        fs::write(&path, "old-1\nold-2\n").unwrap();
        let config =
            format!("path = {:?}\nfollow = true\npoll_interval_ms = 1", path.display().to_string());
        let mut spout = spout(&config);
        let (old_1, _) = next_line_following(&mut spout);
        let (old_2, _) = next_line_following(&mut spout);
        spout.ack(MessageId(old_1));
        let checkpoint_path = dir.join("app.log.squall-checkpoint");
        spout.close();
        assert_eq!(checkpoint::read(&checkpoint_path).unwrap().unwrap().offset, 6, "at old-2");
        // Truncated (copytruncate) with old-2 still in flight; new content follows.
        fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(0).unwrap();
        fs::write(&path, "new\n").unwrap();
        let (new, line) = next_line_following(&mut spout);
        assert_eq!(line, "new");
        spout.close();
        // old-2's bytes are gone: what can be read again starts at 0 of the
        // file as it is now, not at old-2's offset 6 (which would skip "new").
        let at = checkpoint::read(&checkpoint_path).unwrap().unwrap();
        assert_eq!((at.offset, at.inode), (0, fs::metadata(&path).unwrap().ino()));
        spout.ack(MessageId(old_2));
        spout.close();
        assert_eq!(checkpoint::read(&checkpoint_path).unwrap().unwrap().offset, 0, "new in flight");
        spout.ack(MessageId(new));
        spout.close();
        assert_eq!(checkpoint::read(&checkpoint_path).unwrap().unwrap().offset, 4, "all acked");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_is_read_in_name_order_without_its_checkpoint() {
        let dir = temp_dir("dir");
        fs::write(dir.join("2.log"), "two\n").unwrap();
        fs::write(dir.join("1.log"), "one\n").unwrap();
        let config = format!(
            "path = {:?}\ncheckpoint = {:?}",
            dir.display().to_string(),
            dir.join("in.ckpt").display().to_string()
        );
        let mut first = spout(&config);
        let emitted = next(&mut first, 4);
        let lines: Vec<_> = emitted.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(lines, ["one", "two"]);
        first.ack(MessageId(emitted[0].0));
        first.close();
        // The checkpoint now sits in the directory; it is not read as input.
        let mut second = spout(&config);
        let lines: Vec<_> = next(&mut second, 4).into_iter().map(|(_, l)| l).collect();
        assert_eq!(lines, ["two"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_declared_defaults_are_the_ones_used() {
        let c = LineSpoutConfig::parse(&ComponentConfig::new("path = \"in.txt\"")).unwrap();
        assert_eq!((c.max_pending, c.max_deliver, c.follow), (10_000, 10, false));
        assert_eq!(LineSpout::CONFIG_KEYS.unwrap().len(), 10);
    }
}
