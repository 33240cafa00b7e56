//! [`LifecycleSpout`] and [`LifecycleBolt`]: components that log every
//! lifecycle call the host makes, so tests can check the order.
//!
//! Each event is one line `<component>:<task_id> <event>` appended to the
//! `log` file. The constructor runs before the task is known, so it writes
//! `spout:? new` or `bolt:? new`. Events: `new`, `open`, `activate`,
//! `deactivate`, `first_next_tuple`, `close` (spout) and `new`, `prepare`,
//! `first_execute`, `cleanup` (bolt); the `first_*` events are written once per
//! instance, never per tuple.

use std::fs::{File, OpenOptions};
use std::io::Write;

use serde::Deserialize;
use squall_plugin_api::prelude::*;

use crate::require_path;

/// An append-only event log shared by every task (and process) that names it.
///
/// Each line goes out in one `write` on a file opened with `O_APPEND`, so
/// lines of concurrent tasks never interleave.
#[derive(Debug)]
struct EventLog {
    path: String,
    file: File,
    /// `<component>:<task_id>`, or `<kind>:?` before the task is known.
    who: String,
}

impl EventLog {
    fn open(path: &str, kind: &str) -> Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open lifecycle log {path}: {e}"))?;
        Ok(Self { path: path.to_owned(), file, who: format!("{kind}:?") })
    }

    fn set_task(&mut self, context: &TaskContext) {
        self.who = format!("{}:{}", context.component, context.task_id);
    }

    /// Appends `<who> <event>`.
    fn write(&mut self, event: &str) -> Result<()> {
        let line = format!("{} {event}\n", self.who);
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|e| format!("cannot write lifecycle log {}: {e}", self.path).into())
    }

    /// Appends `<who> <event>` from a call that cannot return an error.
    fn write_or_warn(&mut self, event: &str) {
        if let Err(e) = self.write(event) {
            eprintln!("squall-testkit: {e}");
        }
    }
}

/// [`LifecycleSpout`]'s config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct LifecycleSpoutConfig {
    log: String,
    #[serde(default = "default_limit")]
    limit: u64,
}

fn default_limit() -> u64 {
    10
}

/// Logs its lifecycle to `log` (path, required) and emits a counter 0, 1, ...
/// (`U64`, unreliable) on `["value"]`, `limit` (u64, 10) tuples in all.
#[derive(Debug)]
pub struct LifecycleSpout {
    log: EventLog,
    limit: u64,
    emitted: u64,
    called: bool,
}

impl Spout for LifecycleSpout {
    const NAME: &'static str = "LifecycleSpout";
    const DESCRIPTION: &'static str = "logs each lifecycle call to a file; emits `limit` counters";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[
        ConfigKey::required("log", KeyKind::String, "the file each lifecycle call is appended to"),
        ConfigKey::optional("limit", KeyKind::Integer, "10", "counters emitted in all"),
    ]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: LifecycleSpoutConfig = config.parse()?;
        let mut log = EventLog::open(require_path(&config.log, "log")?, "spout")?;
        log.write("new")?;
        Ok(Self { log, limit: config.limit, emitted: 0, called: false })
    }

    fn open(&mut self, context: &TaskContext) -> Result<()> {
        self.log.set_task(context);
        self.log.write("open")
    }

    fn activate(&mut self) {
        self.log.write_or_warn("activate");
    }

    fn deactivate(&mut self) {
        self.log.write_or_warn("deactivate");
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        if !self.called {
            self.called = true;
            self.log.write("first_next_tuple")?;
        }
        if self.emitted < self.limit {
            collector.emit(&[Value::U64(self.emitted)]);
            self.emitted += 1;
        }
        Ok(())
    }

    fn close(&mut self) {
        self.log.write_or_warn("close");
    }
}

/// [`LifecycleBolt`]'s config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct LifecycleBoltConfig {
    log: String,
}

/// Logs its lifecycle to `log` (path, required) and discards its inputs. No outputs.
#[derive(Debug)]
pub struct LifecycleBolt {
    log: EventLog,
    called: bool,
}

impl BasicBolt for LifecycleBolt {
    const NAME: &'static str = "LifecycleBolt";
    const DESCRIPTION: &'static str = "logs each lifecycle call to a file; discards its inputs";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[ConfigKey::required(
        "log",
        KeyKind::String,
        "the file each lifecycle call is appended to",
    )]);

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: LifecycleBoltConfig = config.parse()?;
        let mut log = EventLog::open(require_path(&config.log, "log")?, "bolt")?;
        log.write("new")?;
        Ok(Self { log, called: false })
    }

    fn prepare(&mut self, context: &TaskContext) -> Result<()> {
        self.log.set_task(context);
        self.log.write("prepare")
    }

    fn execute(&mut self, _input: &Tuple<'_>, _collector: &mut BasicCollector<'_>) -> Result<()> {
        if !self.called {
            self.called = true;
            self.log.write("first_execute")?;
        }
        Ok(())
    }

    fn cleanup(&mut self) {
        self.log.write_or_warn("cleanup");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{context, temp_dir};
    use squall_plugin_api::testing::Recorder;

    #[test]
    fn spout_and_bolt_log_each_event_once_in_order() {
        let dir = temp_dir("lifecycle");
        let log = dir.join("events.log");
        let config = format!("log = {:?}\nlimit = 2", log.to_str().unwrap());
        let mut spout = LifecycleSpout::new(&ComponentConfig::new(&config)).unwrap();
        spout.open(&context("source", 3, 0, &[("default", false)], &[])).unwrap();
        spout.activate();
        let mut recorder = Recorder::default();
        for _ in 0..4 {
            spout.next_tuple(&mut SpoutCollector::new(recorder.output())).unwrap();
        }
        spout.deactivate();
        spout.close();
        assert_eq!(recorder.first_strings(), ["0", "1"]);

        let bolt_config = format!("log = {:?}", log.to_str().unwrap());
        let mut bolt = LifecycleBolt::new(&ComponentConfig::new(&bolt_config)).unwrap();
        bolt.prepare(&context("sink", 4, 0, &[], &[])).unwrap();
        let values = [Value::U64(0)];
        for _ in 0..2 {
            let input = Tuple::new(&values, &[], "source", "default", 3, Anchor::NONE);
            bolt.execute(&input, &mut BasicCollector::new(recorder.output())).unwrap();
        }
        bolt.cleanup();

        let text = std::fs::read_to_string(&log).unwrap();
        let expected = "spout:? new\nsource:3 open\nsource:3 activate\nsource:3 first_next_tuple\n\
                        source:3 deactivate\nsource:3 close\nbolt:? new\nsink:4 prepare\nsink:4 first_execute\n\
                        sink:4 cleanup\n";
        assert_eq!(text, expected);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn declared_config_keys_match_the_config_structs() {
        use squall_plugin_api::testing::check_config_keys;
        check_config_keys::<LifecycleSpoutConfig>(LifecycleSpout::CONFIG_KEYS, "log = \"l\"")
            .unwrap();
        check_config_keys::<LifecycleBoltConfig>(LifecycleBolt::CONFIG_KEYS, "log = \"l\"")
            .unwrap();
    }

    #[test]
    fn the_log_path_is_required() {
        let err = LifecycleBolt::new(&ComponentConfig::new("")).unwrap_err().to_string();
        assert!(err.contains("missing field `log`"), "{err}");
        let err = LifecycleBolt::new(&ComponentConfig::new("log = \"\"")).unwrap_err().to_string();
        assert_eq!(err, "log must not be empty");
    }
}
