//! [`JsonLinesSink`]: every input tuple as one JSON line, acked once written.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use squall_plugin_api::metrics;
use squall_plugin_api::prelude::*;

use squall_connector::Backoff;

use crate::json::encode_tuple;

/// When the sink makes what it wrote durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fsync {
    /// `fdatasync` after every tuple, before acking it: survives a power loss.
    Always,
    /// `fdatasync` at most every `fsync_interval_ms` (checked at each tuple
    /// and tick), and at cleanup; tuples are acked once written.
    #[default]
    Interval,
    /// Never; the operating system writes back when it likes. Acked tuples
    /// survive a crash of squall, not of the machine.
    Never,
}

squall_connector::connector_config! {
    /// The sink's `config` table: the struct and its declared keys, from
    /// this one definition.
    #[derive(Debug, Clone, PartialEq)]
    struct SinkConfig {
        path: String = required(String, "the output file; {task} becomes the task index"),
        fsync: Fsync = default(String, "\"interval\"", "\"always\", \"interval\" or \"never\""),
        // No declared default: writing one out would be refused under
        // fsync = "always" or "never"; "interval" uses 1000 when it is absent.
        fsync_interval_ms: Option<u64> = maybe(Integer, "with fsync = \"interval\" only: the interval (1000 when absent)"),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        resource_wait: Duration = default(Duration, "\"10s\"", "how long a write that finds the disk full (ENOSPC, EDQUOT) is tried again, with backoff, before the tuple fails; \"0s\" fails it at once"),
    }
}

/// The pauses between the tries of a write that found the disk full.
const RESOURCE_BACKOFF: Backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(1));

/// True for an error that says a resource ran out (the disk or the
/// quota), not that this line is bad: worth waiting for, not a delivery.
fn out_of_resource(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded)
}

/// The placeholder for the task index in `path`.
const TASK_PLACEHOLDER: &str = "{task}";

/// Writes each input tuple as one JSON object keyed by field name, one per
/// line, appended to `path`; it declares no output.
///
/// A tuple is acked only after its line was written to the file (and,
/// under `fsync = "always"`, synced). A write that finds the disk full
/// (`ENOSPC`, `EDQUOT`) is cut back and tried again after a pause (50 ms,
/// doubled up to 1 s) for up to `resource_wait` (10 s), holding the
/// tuple, so that a short disk-full costs no delivery: the spout's
/// `max_deliver` counts failures of the line, not of the disk. Any other
/// write error, a sync error, or a disk still full after `resource_wait`,
/// fails the tuple, so the spout replays it; a partly written line is cut
/// off again.
/// At `prepare`, a torn last line left by a crash (no newline; never acked)
/// is cut off too. Values map to JSON as [`crate::json::encode_tuple`]
/// says (bytes as base64 strings). Tick tuples are not written; under
/// `interval` they trigger a due sync.
///
/// Config keys: `path` (required; with `parallelism` > 1 it must contain
/// `{task}`), `fsync` (`"always"`, `"interval"` (default) or `"never"`),
/// `fsync_interval_ms` (1000; only with `"interval"`), `resource_wait`
/// (`"10s"`). See docs/connectors.md.
#[derive(Debug)]
pub struct JsonLinesSink {
    path: String,
    fsync: Fsync,
    interval: Duration,
    resource_wait: Duration,
    file: Option<File>,
    /// The file's length up to the last complete line written.
    good_len: u64,
    /// Written since the last sync.
    dirty: bool,
    last_sync: Instant,
    line: Vec<u8>,
    metrics: Option<(metrics::Counter, metrics::Counter)>,
    /// Writes tried again after the disk was full.
    resource_retries: Option<metrics::Counter>,
}

impl JsonLinesSink {
    /// Syncs what was written; counts it.
    fn sync(&mut self) -> io::Result<()> {
        let Some(file) = &self.file else { return Ok(()) };
        file.sync_data()?;
        self.dirty = false;
        self.last_sync = Instant::now();
        if let Some((_, syncs)) = &self.metrics {
            syncs.inc();
        }
        Ok(())
    }

    /// Writes one line; on error, cuts the file back to its last complete line.
    fn write_line(&mut self) -> io::Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Err(io::Error::other("the sink is not prepared"));
        };
        if let Err(e) = file.write_all(&self.line) {
            // Best effort: a device may refuse set_len; the error stands anyway.
            let _ = file.set_len(self.good_len);
            return Err(e);
        }
        self.good_len += self.line.len() as u64;
        self.dirty = true;
        Ok(())
    }

    /// [`Self::write_line`], tried again with [`RESOURCE_BACKOFF`] while
    /// the disk is full, for up to `resource_wait`.
    fn write_line_waiting(&mut self) -> io::Result<()> {
        let mut attempts = RESOURCE_BACKOFF.attempts();
        let mut waited = Duration::ZERO;
        loop {
            match self.write_line() {
                Err(e) if out_of_resource(&e) && waited < self.resource_wait => {
                    let pause = attempts.next_delay().min(self.resource_wait - waited);
                    if attempts.failures() == 1 {
                        squall_plugin_api::warn!(
                            "{}: {e}; trying the write again for up to {:?} before the tuple fails",
                            self.path,
                            self.resource_wait
                        );
                    }
                    if let Some(retries) = &self.resource_retries {
                        retries.inc();
                    }
                    std::thread::sleep(pause);
                    waited += pause;
                }
                other => return other,
            }
        }
    }
}

/// Cuts a last line without a newline (a write torn by a crash) off `file`;
/// returns how many bytes were cut.
fn trim_torn_tail(file: &mut File) -> io::Result<u64> {
    let len = file.metadata()?.len();
    let mut end = len;
    let mut chunk = vec![0_u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let buf = &mut chunk[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(buf)?;
        if let Some(i) = buf.iter().rposition(|&b| b == b'\n') {
            let keep = start + i as u64 + 1;
            if keep < len {
                file.set_len(keep)?;
            }
            return Ok(len - keep);
        }
        end = start;
    }
    if len > 0 {
        file.set_len(0)?;
    }
    Ok(len)
}

impl Bolt for JsonLinesSink {
    const NAME: &'static str = "JsonLinesSink";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(SinkConfig::KEYS);
    const DESCRIPTION: &'static str =
        "appends each tuple as a JSON line; acks after the write (and fsync, if asked)";

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = SinkConfig::parse(config)?;
        if config.path.is_empty() {
            return Err("path must not be empty".into());
        }
        let interval_ms = match (config.fsync, config.fsync_interval_ms) {
            (Fsync::Interval, None) => 1000,
            (Fsync::Interval, Some(ms)) if (1..=86_400_000).contains(&ms) => ms,
            (Fsync::Interval, Some(ms)) => {
                return Err(
                    format!("fsync_interval_ms must be between 1 and 86400000, not {ms}").into()
                )
            }
            (_, Some(_)) => {
                return Err("fsync_interval_ms applies only with fsync = \"interval\"".into())
            }
            (_, None) => 0,
        };
        let path = Path::new(&config.path);
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !dir.to_string_lossy().contains(TASK_PLACEHOLDER) && !dir.is_dir() {
            return Err(format!(
                "path {:?}: directory {} does not exist",
                config.path,
                dir.display()
            )
            .into());
        }
        Ok(Self {
            path: config.path,
            fsync: config.fsync,
            interval: Duration::from_millis(interval_ms),
            resource_wait: config.resource_wait,
            file: None,
            good_len: 0,
            dirty: false,
            last_sync: Instant::now(),
            line: Vec::with_capacity(256),
            metrics: None,
            resource_retries: None,
        })
    }

    fn prepare(&mut self, context: &TaskContext) -> Result<()> {
        if context.parallelism > 1 && !self.path.contains(TASK_PLACEHOLDER) {
            return Err(format!(
                "{} tasks would write to one file {:?}; put {TASK_PLACEHOLDER} in path (it \
                 becomes the task index) or set parallelism = 1",
                context.parallelism, self.path
            )
            .into());
        }
        let path =
            PathBuf::from(self.path.replace(TASK_PLACEHOLDER, &context.task_index.to_string()));
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        if file.metadata().is_ok_and(|m| m.is_file()) {
            let cut = trim_torn_tail(&mut file)
                .map_err(|e| format!("cannot read the end of {}: {e}", path.display()))?;
            if cut > 0 {
                squall_plugin_api::warn!(
                    "{}: cut off a torn last line ({cut} bytes, never acked: it is replayed)",
                    path.display()
                );
            }
            self.good_len = file.metadata()?.len();
        }
        self.file = Some(file);
        self.path = path.display().to_string();
        self.metrics = Some((
            metrics::counter("lines_written", "JSON lines written."),
            metrics::counter("fsyncs", "fdatasync calls on the output."),
        ));
        self.resource_retries = Some(metrics::counter(
            "disk_full_retries",
            "Writes tried again after a pause because the disk was full.",
        ));
        Ok(())
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BoltCollector<'_>) -> Result<()> {
        if input.is_tick() {
            if self.fsync == Fsync::Interval
                && self.dirty
                && self.last_sync.elapsed() >= self.interval
            {
                self.sync().map_err(|e| format!("cannot sync {}: {e}", self.path))?;
            }
            return Ok(());
        }
        self.line.clear();
        encode_tuple(input, &mut self.line);
        self.line.push(b'\n');
        self.write_line_waiting().map_err(|e| format!("cannot write to {}: {e}", self.path))?;
        let due = match self.fsync {
            Fsync::Always => true,
            Fsync::Interval => self.last_sync.elapsed() >= self.interval,
            Fsync::Never => false,
        };
        if due {
            self.sync().map_err(|e| format!("cannot sync {}: {e}", self.path))?;
        }
        if let Some((written, _)) = &self.metrics {
            written.inc();
        }
        collector.ack(input);
        Ok(())
    }

    fn cleanup(&mut self) {
        if self.fsync != Fsync::Never && self.dirty {
            if let Err(e) = self.sync() {
                squall_plugin_api::warn!("cannot sync {}: {e}", self.path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use abi_stable::std_types::RString;
    use squall_plugin_api::testing::Recorder;

    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("squall-files-sink-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn context(parallelism: u32, task_index: u32) -> TaskContext {
        TaskContext::builder("sink").topology("t").task(3, task_index, parallelism).build()
    }

    fn sink(config: &str) -> JsonLinesSink {
        let mut sink = JsonLinesSink::new(&ComponentConfig::new(config)).unwrap();
        sink.prepare(&context(1, 0)).unwrap();
        sink
    }

    fn execute(
        sink: &mut JsonLinesSink,
        recorder: &mut Recorder,
        anchor: u64,
        word: &str,
    ) -> Result<()> {
        let fields = [RString::from("word"), RString::from("n")];
        let values = [Value::from(word), Value::U64(anchor)];
        let tuple = Tuple::new(&values, &fields, "count", "default", 1, Anchor(anchor));
        sink.execute(&tuple, &mut BoltCollector::new(recorder.output()))
    }

    #[test]
    fn writes_one_json_line_per_tuple_and_acks_it_under_every_policy() {
        let dir = temp_dir("write");
        for policy in ["always", "interval", "never"] {
            let path = dir.join(format!("{policy}.jsonl"));
            let mut sink =
                sink(&format!("path = {:?}\nfsync = {policy:?}", path.display().to_string()));
            let mut recorder = Recorder::default();
            execute(&mut sink, &mut recorder, 1, "a").unwrap();
            execute(&mut sink, &mut recorder, 2, "b\"c").unwrap();
            sink.cleanup();
            assert_eq!(
                fs::read_to_string(&path).unwrap(),
                "{\"word\":\"a\",\"n\":1}\n{\"word\":\"b\\\"c\",\"n\":2}\n",
                "{policy}"
            );
            assert_eq!(recorder.acked, [Anchor(1), Anchor(2)], "{policy}");
            let syncs = sink.metrics.as_ref().unwrap().1.get();
            match policy {
                "always" => assert_eq!(syncs, 2),
                "never" => assert_eq!(syncs, 0),
                _ => assert!(syncs >= 1, "interval: at least the sync at cleanup"),
            }
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_write_error_fails_the_tuple_and_acks_nothing() {
        if !Path::new("/dev/full").exists() {
            return;
        }
        // Every write to /dev/full fails with ENOSPC.
        let mut sink = sink("path = \"/dev/full\"\nfsync = \"never\"\nresource_wait = \"0s\"");
        let mut recorder = Recorder::default();
        let err = execute(&mut sink, &mut recorder, 1, "a").unwrap_err().to_string();
        assert!(err.contains("cannot write to /dev/full"), "{err}");
        assert!(recorder.acked.is_empty());
        assert_eq!(sink.resource_retries.as_ref().unwrap().get(), 0, "no wait asked for");
    }

    #[test]
    fn a_full_disk_is_tried_again_before_the_tuple_fails() {
        if !Path::new("/dev/full").exists() {
            return;
        }
        // 50 + 100 + 150 (the rest of the wait) ms: three more tries.
        let mut sink = sink("path = \"/dev/full\"\nfsync = \"never\"\nresource_wait = \"300ms\"");
        let mut recorder = Recorder::default();
        let err = execute(&mut sink, &mut recorder, 1, "a").unwrap_err().to_string();
        assert!(err.contains("No space left"), "{err}");
        assert!(recorder.acked.is_empty() && recorder.failed.is_empty());
        assert_eq!(sink.resource_retries.as_ref().unwrap().get(), 3);
        assert!(out_of_resource(&io::Error::from(io::ErrorKind::StorageFull)));
        assert!(!out_of_resource(&io::Error::from(io::ErrorKind::PermissionDenied)));
    }

    #[test]
    fn a_torn_last_line_is_cut_off_at_prepare() {
        let dir = temp_dir("torn");
        let path = dir.join("out.jsonl");
        fs::write(&path, "{\"a\":1}\n{\"a\":").unwrap();
        let mut sink = sink(&format!("path = {:?}", path.display().to_string()));
        let mut recorder = Recorder::default();
        execute(&mut sink, &mut recorder, 7, "x").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\"a\":1}\n{\"word\":\"x\",\"n\":7}\n");
        fs::write(&path, "no newline at all").unwrap();
        drop(self::sink(&format!("path = {:?}", path.display().to_string())));
        assert_eq!(fs::read_to_string(&path).unwrap(), "");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ticks_are_not_written() {
        let dir = temp_dir("tick");
        let path = dir.join("out.jsonl");
        let mut sink = sink(&format!("path = {:?}", path.display().to_string()));
        let mut recorder = Recorder::default();
        let tick = Tuple::new(
            &[],
            &[],
            squall_plugin_api::SYSTEM_COMPONENT,
            squall_plugin_api::TICK_STREAM,
            u32::MAX,
            Anchor::NONE,
        );
        sink.execute(&tick, &mut BoltCollector::new(recorder.output())).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "");
        assert!(recorder.acked.is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn config_errors_are_clear() {
        let err = |config: &str| {
            JsonLinesSink::new(&ComponentConfig::new(config)).unwrap_err().to_string()
        };
        assert!(err("").contains("missing field `path`"));
        assert!(
            err("path = \"/tmp/x\"\nfsync = \"sometimes\"").contains("unknown variant `sometimes`")
        );
        assert_eq!(
            err("path = \"/tmp/x\"\nfsync = \"always\"\nfsync_interval_ms = 5"),
            "fsync_interval_ms applies only with fsync = \"interval\""
        );
        assert!(err("path = \"/nonexistent-dir/x\"").contains("/nonexistent-dir does not exist"));
        assert!(err("path = \"/tmp/x\"\nfsync_intervall_ms = 5").contains("unknown field"));
        let mut two = JsonLinesSink::new(&ComponentConfig::new("path = \"/tmp/x\"")).unwrap();
        assert!(two.prepare(&context(2, 1)).unwrap_err().to_string().contains("{task}"));
    }

    #[test]
    fn task_placeholder_gives_each_task_its_file() {
        let dir = temp_dir("tasks");
        let pattern = dir.join("out-{task}.jsonl").display().to_string();
        let mut sink =
            JsonLinesSink::new(&ComponentConfig::new(&format!("path = {pattern:?}"))).unwrap();
        sink.prepare(&context(2, 1)).unwrap();
        let mut recorder = Recorder::default();
        execute(&mut sink, &mut recorder, 1, "a").unwrap();
        assert!(dir.join("out-1.jsonl").exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_declared_keys_are_the_ones_parsed() {
        let names: Vec<&str> = SinkConfig::KEYS.iter().map(|k| k.name).collect();
        assert_eq!(names, ["path", "fsync", "fsync_interval_ms", "resource_wait"]);
        assert_eq!(SinkConfig::KEYS[1].default, Some("\"interval\""));
        let c = SinkConfig::parse(&ComponentConfig::new("path = \"o\"")).unwrap();
        assert_eq!((c.fsync, c.fsync_interval_ms), (Fsync::Interval, None));
        assert_eq!(c.resource_wait, Duration::from_secs(10));
    }
}
