//! Reading what a run left: locations in text, log tails, the
//! `testkit::ReplaySpout` log and `testkit::RecordBolt` reports.

use std::collections::BTreeMap;
use std::path::Path;

use super::command::{Output, Workspace};

/// The 1-based `(line, column)` where `needle` first occurs in `text` (columns
/// count characters); panics if it does not occur.
pub fn loc_of(text: &str, needle: &str) -> (usize, usize) {
    let at = text.find(needle).unwrap_or_else(|| panic!("{needle:?} is not in the text"));
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// The last `n` lines of `text`, for assertion messages about long outputs.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let skipped = lines.len().saturating_sub(n);
    let mut out = String::new();
    if skipped > 0 {
        out.push_str(&format!("[... {skipped} earlier lines ...]\n"));
    }
    for line in &lines[skipped..] {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// One event of a `testkit::ReplaySpout` log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayEvent {
    /// `emit <id>`: emitted (first time or replay).
    Emit(u64),
    /// `ack <id>`: the spout's `ack` ran.
    Ack(u64),
    /// `fail <id>`: the spout's `fail` ran.
    Fail(u64),
    /// `close`: the spout's `close` ran.
    Close,
    /// `stray-ack <id>` or `stray-fail <id>`: an ack or fail reached an
    /// instance that did not emit the id.
    Stray(u64),
}

/// What a `testkit::ReplaySpout` log says about one message id.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IdTally {
    /// `emit` lines.
    pub emits: u64,
    /// `ack` lines.
    pub acks: u64,
    /// `fail` lines.
    pub fails: u64,
    /// The id's last line.
    pub last: Option<ReplayEvent>,
}

/// A `testkit::ReplaySpout` log, parsed: its events in order.
#[derive(Debug)]
pub struct ReplayLog {
    /// Every line, in order.
    pub events: Vec<ReplayEvent>,
}

impl ReplayLog {
    /// Reads and parses the log at `rel` in `ws`; panics naming the line on
    /// anything but `emit <id>`, `ack <id>`, `fail <id>`, `stray-ack <id>`,
    /// `stray-fail <id>` and `close`.
    pub fn read(ws: &Workspace, rel: &str) -> Self {
        Self::parse(rel, &ws.read(rel))
    }

    /// Parses the text of a log; `name` is for messages.
    pub fn parse(name: &str, text: &str) -> Self {
        let events = text
            .lines()
            .enumerate()
            .map(|(i, line)| {
                let bad =
                    || -> ! { panic!("{name}:{}: malformed replay log line {line:?}", i + 1) };
                if line == "close" {
                    return ReplayEvent::Close;
                }
                let (word, id) = line.split_once(' ').unwrap_or_else(|| bad());
                let id: u64 = id.parse().unwrap_or_else(|_| bad());
                match word {
                    "emit" => ReplayEvent::Emit(id),
                    "ack" => ReplayEvent::Ack(id),
                    "fail" => ReplayEvent::Fail(id),
                    "stray-ack" | "stray-fail" => ReplayEvent::Stray(id),
                    _ => bad(),
                }
            })
            .collect();
        Self { events }
    }

    /// How many events satisfy `pred`.
    pub fn count(&self, pred: impl Fn(&ReplayEvent) -> bool) -> u64 {
        self.events.iter().filter(|e| pred(e)).count() as u64
    }

    /// `emit` lines.
    pub fn emits(&self) -> u64 {
        self.count(|e| matches!(e, ReplayEvent::Emit(_)))
    }

    /// `ack` lines.
    pub fn acks(&self) -> u64 {
        self.count(|e| matches!(e, ReplayEvent::Ack(_)))
    }

    /// `fail` lines.
    pub fn fails(&self) -> u64 {
        self.count(|e| matches!(e, ReplayEvent::Fail(_)))
    }

    /// `stray-ack` and `stray-fail` lines.
    pub fn strays(&self) -> u64 {
        self.count(|e| matches!(e, ReplayEvent::Stray(_)))
    }

    /// The 0-based positions of the `close` lines.
    pub fn closes(&self) -> Vec<usize> {
        (0..self.events.len()).filter(|&i| self.events[i] == ReplayEvent::Close).collect()
    }

    /// Per message id: how many `emit`, `ack` and `fail` lines it has, and
    /// its last event.
    pub fn tally(&self) -> BTreeMap<u64, IdTally> {
        let mut tally: BTreeMap<u64, IdTally> = BTreeMap::new();
        for &event in &self.events {
            let (id, field) = match event {
                ReplayEvent::Emit(id) => (id, 0),
                ReplayEvent::Ack(id) => (id, 1),
                ReplayEvent::Fail(id) => (id, 2),
                ReplayEvent::Close | ReplayEvent::Stray(_) => continue,
            };
            let t = tally.entry(id).or_default();
            match field {
                0 => t.emits += 1,
                1 => t.acks += 1,
                _ => t.fails += 1,
            }
            t.last = Some(event);
        }
        tally
    }

    /// The first `emit` that is a replay not preceded by a `fail` of its own:
    /// the k-th emit of an id (k ≥ 2) needs k - 1 earlier fails of that id.
    /// Returns the id and the 1-based line.
    pub fn replay_without_fail(&self) -> Option<(u64, usize)> {
        let mut seen: std::collections::HashMap<u64, (u64, u64)> = Default::default();
        for (i, &event) in self.events.iter().enumerate() {
            match event {
                ReplayEvent::Emit(id) => {
                    let (emits, fails) = seen.entry(id).or_default();
                    if *emits > *fails {
                        return Some((id, i + 1));
                    }
                    *emits += 1;
                }
                ReplayEvent::Fail(id) => seen.entry(id).or_default().1 += 1,
                ReplayEvent::Ack(_) | ReplayEvent::Close | ReplayEvent::Stray(_) => {}
            }
        }
        None
    }

    /// Every event of message `id`, with its 1-based line number, for
    /// assertion messages.
    pub fn history(&self, id: u64) -> String {
        let lines: Vec<String> = self
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| match e {
                ReplayEvent::Emit(x)
                | ReplayEvent::Ack(x)
                | ReplayEvent::Fail(x)
                | ReplayEvent::Stray(x) => *x == id,
                ReplayEvent::Close => false,
            })
            .map(|(i, e)| format!("  line {}: {e:?}", i + 1))
            .collect();
        if lines.is_empty() {
            format!("  (no line mentions id {id})")
        } else {
            lines.join("\n")
        }
    }
}

/// One `testkit::RecordBolt` report (`<out>.<task_id>`, written at cleanup).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `task <id>`.
    pub task: u32,
    /// `index <i>`: the task's index among its component's tasks.
    pub index: u32,
    /// `tuples <n>`: inputs other than ticks.
    pub tuples: u64,
    /// `ticks <n>`.
    pub ticks: u64,
    /// `key <key> <count>` lines.
    pub keys: BTreeMap<String, u64>,
}

impl Record {
    /// Parses a report; panics naming `path` on a malformed line.
    fn parse(path: &Path, text: &str) -> Self {
        let bad = |line: &str| -> ! { panic!("{}: malformed line {line:?}", path.display()) };
        let mut record = Record { task: 0, index: 0, tuples: 0, ticks: 0, keys: BTreeMap::new() };
        for line in text.lines() {
            let (word, rest) = line.split_once(' ').unwrap_or_else(|| bad(line));
            match word {
                "task" => record.task = rest.parse().unwrap_or_else(|_| bad(line)),
                "index" => record.index = rest.parse().unwrap_or_else(|_| bad(line)),
                "tuples" => record.tuples = rest.parse().unwrap_or_else(|_| bad(line)),
                "ticks" => record.ticks = rest.parse().unwrap_or_else(|_| bad(line)),
                "key" => {
                    let (key, count) = rest.rsplit_once(' ').unwrap_or_else(|| bad(line));
                    record.keys.insert(key.to_owned(), count.parse().unwrap_or_else(|_| bad(line)));
                }
                _ => bad(line),
            }
        }
        record
    }
}

/// Every `RecordBolt` report written under the prefix `<ws>/<prefix>` (the
/// bolt's `out`), keyed by task id. Fails if there are not exactly `tasks`.
#[track_caller]
pub fn read_records(
    ws: &Workspace,
    prefix: &str,
    tasks: usize,
    out: &Output,
) -> BTreeMap<u32, Record> {
    let mut records = BTreeMap::new();
    let entries = std::fs::read_dir(ws.dir()).expect("the workspace is readable");
    for entry in entries {
        let name = entry.expect("a directory entry").file_name().to_string_lossy().into_owned();
        let Some(task) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('.')) else {
            continue;
        };
        let Ok(task) = task.parse::<u32>() else { continue };
        let path = ws.path(&name);
        let record = Record::parse(&path, &ws.read(&name));
        assert_eq!(record.task, task, "{} names another task", path.display());
        records.insert(task, record);
    }
    assert_eq!(
        records.len(),
        tasks,
        "expected {tasks} RecordBolt reports {prefix}.<task>, found {:?}\n{}",
        records.keys().collect::<Vec<_>>(),
        out.context()
    );
    records
}
