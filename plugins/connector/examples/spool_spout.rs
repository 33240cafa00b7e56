//! A third-party connector on `squall-connector`: a spool directory as the
//! broker. Each file in `dir` is one message; its tree's ack deletes the
//! file, a message failing `max_deliver` times is moved to `dir/dead/` with
//! the reason beside it. (The whole connector; docs/plugins.md walks through it.)

use std::path::PathBuf;
use std::time::{Duration, Instant};

use squall_connector::feed::Empty;
use squall_connector::{
    feed, Acked, Backoff, Failed, Feed, Health, IoThread, Pending, Redelivery, RetryPolicy,
};
use squall_plugin_api::prelude::*;

squall_connector::connector_config! {
    #[derive(Debug, Clone, PartialEq)]
    pub struct SpoolConfig {
        dir: PathBuf = required(String, "the spool directory; one file is one message"),
        max_pending: usize = default(Integer, "1000", "most messages in flight"),
        max_deliver: u32 = default(Integer, "10", "deliveries before a message is dead"),
        retry_ms: u64 = default(Integer, "100", "first retry pause, doubled per retry"),
    }
}

/// What the spout asks its I/O thread to do.
#[derive(Debug)]
enum Command {
    Ack(PathBuf),
    Dead(PathBuf, String),
    Stop,
}

/// Emits each spool file's content on `["payload"]`, at least once.
#[derive(Debug)]
pub struct SpoolSpout {
    config: SpoolConfig,
    pending: Pending<(PathBuf, Value)>,
    health: Health,
    io: Option<Io>,
}

/// The feed of `(file, content)`, the commands, the thread.
type Io = (Feed<(PathBuf, Vec<u8>)>, crossbeam_channel::Sender<Command>, IoThread);

impl Spout for SpoolSpout {
    const NAME: &'static str = "SpoolSpout";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(SpoolConfig::KEYS);
    const CLOSE_BUDGET: Option<Duration> = Some(Duration::from_secs(2));

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["payload"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = SpoolConfig::parse(config)?;
        let backoff = Backoff::new(Duration::from_millis(config.retry_ms), Duration::from_secs(30));
        let policy = RetryPolicy { max_deliver: config.max_deliver.max(1), backoff };
        let pending = Pending::new(config.max_pending, policy, Redelivery::Local);
        Ok(Self { config, pending, health: Health::new("spool"), io: None })
    }

    fn open(&mut self, context: &TaskContext) -> Result<()> {
        self.health = Health::new(format!("spool {}", self.config.dir.display()));
        self.health.register("spool", context.waker());
        let (feeder, feed) = feed(256, context.waker());
        let (tx, rx) = crossbeam_channel::unbounded();
        let (dir, health) = (self.config.dir.clone(), self.health.clone());
        let mut thread = IoThread::spawn("spool-io", move |ready| {
            ready.ready(std::fs::create_dir_all(dir.join("dead")));
            let mut seen = std::collections::HashSet::new();
            loop {
                for command in rx.try_iter() {
                    match command {
                        Command::Ack(path) => drop(std::fs::remove_file(&path)),
                        Command::Dead(path, why) => {
                            let dead = dir.join("dead").join(path.file_name().unwrap_or_default());
                            let _ = std::fs::write(dead.with_extension("reason"), why);
                            let _ = std::fs::rename(&path, dead);
                        }
                        Command::Stop => return,
                    }
                }
                match std::fs::read_dir(&dir) {
                    Ok(entries) => {
                        health.restored("the spool is readable again");
                        for path in entries.flatten().map(|e| e.path()).filter(|p| p.is_file()) {
                            if feeder.room() > 0 && seen.insert(path.clone()) {
                                let bytes = std::fs::read(&path).unwrap_or_default();
                                feeder.push((path, bytes));
                            }
                        }
                    }
                    Err(e) => health.failing(&e.to_string()),
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })?;
        thread.wait_ready(Duration::from_secs(5))?;
        self.io = Some((feed, tx, thread));
        Ok(())
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        if let Some(e) = self.health.take_error() {
            return Err(e.into());
        }
        if let Some((id, (_, payload))) = self.pending.next_replay(Instant::now()) {
            collector.emit_with_id(std::slice::from_ref(payload), id);
        }
        let Some((feed, ..)) = &self.io else { return Ok(()) };
        while self.pending.has_room() {
            let (path, bytes) = match feed.take() {
                Ok(message) => message,
                Err(Empty::Now) => break,
                Err(Empty::Closed) => return Err("the spool thread has stopped".into()),
            };
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let id = self.pending.insert((path, Value::from(text)), 1);
            let (_, payload) = self.pending.get(id).expect("just inserted");
            collector.emit_with_id(std::slice::from_ref(payload), id);
        }
        Ok(())
    }

    fn ack(&mut self, id: MessageId) {
        if let (Acked::Now((path, _)), Some((_, tx, _))) = (self.pending.ack(id.0), &self.io) {
            let _ = tx.send(Command::Ack(path));
        }
    }

    fn fail(&mut self, id: MessageId) {
        let failed = self.pending.fail(id.0, Instant::now());
        if let (Failed::Dead { item: (path, _), reason }, Some((_, tx, _))) = (failed, &self.io) {
            let _ = tx.send(Command::Dead(path, reason.to_string()));
        }
    }

    fn close(&mut self) {
        if let Some((_, tx, mut thread)) = self.io.take() {
            let _ = tx.send(Command::Stop);
            thread.join_within(Self::CLOSE_BUDGET.unwrap_or_default());
        }
    }
}

squall_plugin_api::export_plugin! { spouts: [SpoolSpout] }
