//! [`LineSpout`]: the lines of a file or a directory, reliably, resuming
//! from a checkpoint after a restart.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use squall_plugin_api::metrics;
use squall_plugin_api::prelude::*;

use crate::checkpoint::{self, AckTracker, Position};
use crate::pattern::Pattern;
use crate::source::{FileId, Input, Reader};

/// The spout's `config` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct LineSpoutConfig {
    /// A file, or a directory whose files are read in name order.
    path: String,
    /// Directory only: which file names to read (`*` and `?`).
    #[serde(default)]
    pattern: Option<String>,
    /// Follow the input like `tail -F` instead of stopping at its end.
    #[serde(default)]
    follow: bool,
    /// Following: how often an idle spout looks for new data.
    #[serde(default = "default_poll_interval_ms")]
    poll_interval_ms: u64,
    /// Where the checkpoint goes; `<path>.squall-checkpoint` by default.
    #[serde(default)]
    checkpoint: Option<String>,
    /// How often the checkpoint is written while it changes.
    #[serde(default = "default_checkpoint_interval_ms")]
    checkpoint_interval_ms: u64,
    /// Most lines held (in flight, or acked behind one in flight).
    #[serde(default = "default_max_pending")]
    max_pending: usize,
    /// A longer line is emitted in pieces of this many bytes.
    #[serde(default = "default_max_line_bytes")]
    max_line_bytes: usize,
}

fn default_poll_interval_ms() -> u64 {
    200
}

fn default_checkpoint_interval_ms() -> u64 {
    1000
}

fn default_max_pending() -> usize {
    10_000
}

fn default_max_line_bytes() -> usize {
    1 << 20
}

/// The most a duration key may say: one day.
const MAX_MILLIS: u64 = 86_400_000;

/// One line held until it is acked: what to emit again and where it was.
#[derive(Debug)]
struct Held {
    file: Arc<FileId>,
    offset: u64,
    /// `[line, file, offset]`, as emitted.
    values: [Value; 3],
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
    tracker: AckTracker<Held>,
    /// Failed lines, emitted again first, oldest failure first.
    replay: VecDeque<u64>,
    /// The next message id. Ids start at the wall clock in nanoseconds, so
    /// an instance rebuilt after a panic never reuses an id of its
    /// predecessor still in flight (their acks are ignored).
    next_id: u64,
    next_checkpoint: Option<Instant>,
    written: Option<Position>,
    /// The last checkpoint error logged, so a persistent one is logged once.
    checkpoint_error: Option<String>,
    metrics: Option<(metrics::Counter, metrics::Counter)>,
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
    fn checkpoint(&mut self, now: Instant, force: bool) {
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
                if self.checkpoint_error.as_ref() != Some(&e) {
                    squall_plugin_api::warn!("{e}; lines will be read again after a restart");
                    self.checkpoint_error = Some(e);
                }
            }
        }
    }

    /// Emits the oldest failed line still held; false when there is none.
    fn replay_one(&mut self, collector: &mut SpoutCollector<'_>) -> bool {
        while let Some(id) = self.replay.pop_front() {
            if let Some(held) = self.tracker.unacked(id) {
                collector.emit_with_id(&held.values, id);
                if let Some((_, replayed)) = &self.metrics {
                    replayed.inc();
                }
                return true;
            }
        }
        false
    }
}

/// Checks the config and works out the input: the errors are config errors.
fn input_of(config: &LineSpoutConfig, checkpoint_path: &Path) -> Result<Input> {
    let path = Path::new(&config.path);
    let meta = std::fs::metadata(path);
    match &meta {
        Ok(meta) if meta.is_dir() => {
            let pattern = config.pattern.as_deref().map(Pattern::new);
            // A checkpoint kept inside the directory is not input.
            let checkpoint_dir = checkpoint_path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let mut exclude = Vec::new();
            if checkpoint_dir.canonicalize().ok() == path.canonicalize().ok() {
                if let Some(name) = checkpoint_path.file_name() {
                    let mut tmp = name.to_os_string();
                    tmp.push(".tmp");
                    exclude = vec![name.to_os_string(), tmp];
                }
            }
            return Ok(Input::Dir { dir: path.to_path_buf(), pattern, exclude });
        }
        Ok(meta) if !meta.is_file() => {
            return Err(
                format!("path {:?} is neither a regular file nor a directory", config.path).into()
            )
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && config.follow => {
            if config.pattern.is_some() {
                return Err(format!("path {:?}: no such directory", config.path).into());
            }
            // Followed: it may appear later. Its directory must exist.
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            if !dir.is_dir() {
                return Err(format!(
                    "path {:?}: directory {} does not exist",
                    config.path,
                    dir.display()
                )
                .into());
            }
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

/// A duration key in milliseconds, 1 ms to one day.
fn millis(key: &str, value: u64) -> Result<Duration> {
    if value == 0 || value > MAX_MILLIS {
        return Err(format!("{key} must be between 1 and {MAX_MILLIS}, not {value}").into());
    }
    Ok(Duration::from_millis(value))
}

impl Spout for LineSpout {
    const NAME: &'static str = "LineSpout";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[
        ConfigKey::required("path", KeyKind::String, "a file, or a directory read in name order"),
        ConfigKey::maybe(
            "pattern",
            KeyKind::String,
            "directory only: file names to read (* and ?)",
        ),
        ConfigKey::optional("follow", KeyKind::Bool, "false", "follow the input like tail -F"),
        ConfigKey::optional(
            "poll_interval_ms",
            KeyKind::Integer,
            "200",
            "following: how often an idle spout looks for new data",
        ),
        ConfigKey::maybe(
            "checkpoint",
            KeyKind::String,
            "the checkpoint file (default <path>.squall-checkpoint)",
        ),
        ConfigKey::optional(
            "checkpoint_interval_ms",
            KeyKind::Integer,
            "1000",
            "how often the checkpoint is written while it changes",
        ),
        ConfigKey::optional(
            "max_pending",
            KeyKind::Integer,
            "10000",
            "most lines held in flight or acked behind one in flight",
        ),
        ConfigKey::optional(
            "max_line_bytes",
            KeyKind::Integer,
            "1048576",
            "a longer line is emitted in pieces of this many bytes",
        ),
    ]);
    const DESCRIPTION: &'static str =
        "lines of a file or directory, reliably; checkpoints the acked prefix; follows like tail -F";

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["line", "file", "offset"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: LineSpoutConfig = config.parse()?;
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
        let path = PathBuf::from(&config.path);
        let checkpoint_path = match &config.checkpoint {
            Some(p) if p.is_empty() => return Err("checkpoint must not be empty".into()),
            Some(p) => PathBuf::from(p),
            None => checkpoint::default_path(&path),
        };
        let checkpoint_dir = checkpoint_path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !checkpoint_dir.is_dir() {
            return Err(format!(
                "the checkpoint's directory {} does not exist",
                checkpoint_dir.display()
            )
            .into());
        }
        let input = input_of(&config, &checkpoint_path)?;
        let next_id =
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
        Ok(Self {
            path,
            checkpoint_path,
            checkpoint_interval,
            max_pending: config.max_pending,
            reader: Reader::new(input, config.follow, poll_interval, config.max_line_bytes),
            tracker: AckTracker::default(),
            replay: VecDeque::new(),
            next_id,
            next_checkpoint: None,
            written: None,
            checkpoint_error: None,
            metrics: None,
        })
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
        self.metrics = Some((
            metrics::counter("lines_read", "Lines read from the input."),
            metrics::counter("lines_replayed", "Failed lines emitted again."),
        ));
        Ok(())
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        if self.replay_one(collector) {
            return Ok(());
        }
        let now = Instant::now();
        self.checkpoint(now, false);
        if self.tracker.len() >= self.max_pending {
            return Ok(());
        }
        let Some(line) = self.reader.next_line(now)? else { return Ok(()) };
        let id = self.next_id;
        self.next_id += 1;
        let values = [Value::from(line.text), line.file.value.clone(), Value::U64(line.offset)];
        collector.emit_with_id(&values, id);
        self.tracker.insert(id, Held { file: line.file, offset: line.offset, values });
        if let Some((read, _)) = &self.metrics {
            read.inc();
        }
        Ok(())
    }

    fn ack(&mut self, message_id: MessageId) {
        if self.tracker.ack(message_id.0) {
            // Also here: a throttled spout, or one at max_spout_pending, gets
            // no `next_tuple` calls for a while, but its acks go on.
            self.checkpoint(Instant::now(), false);
        }
    }

    fn fail(&mut self, message_id: MessageId) {
        if self.tracker.unacked(message_id.0).is_some() {
            self.replay.push_back(message_id.0);
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
        assert_eq!(ids[1], ids[0] + 1);
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
    fn the_config_keys_match_the_config_struct() {
        squall_plugin_api::testing::check_config_keys::<LineSpoutConfig>(
            LineSpout::CONFIG_KEYS,
            "path = \"in.txt\"\npattern = \"*.log\"\ncheckpoint = \"c\"",
        )
        .unwrap();
    }
}
