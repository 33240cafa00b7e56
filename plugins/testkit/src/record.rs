//! [`RecordBolt`]: a sink that writes down what reached each task, to check
//! groupings' routing and tick delivery.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Deserialize;
use squall_plugin_api::prelude::*;

use crate::require_path;

/// [`RecordBolt`]'s config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordConfig {
    out: String,
}

/// Counts its inputs, per key, and writes the counts to `<out>.<task_id>` at
/// cleanup. No outputs.
///
/// Config: `out` (path prefix, required). The key of an input is the
/// `Display` of its first value (an input without values has no key). Tick
/// tuples are counted apart and are not tuples. The file, written at cleanup
/// (to `<out>.<task_id>.tmp`, then renamed, so it appears complete), reads:
///
/// ```text
/// task <task_id>
/// index <task_index>
/// tuples <n>
/// ticks <n>
/// key <key> <count>     one line per key, sorted by key
/// ```
#[derive(Debug)]
pub struct RecordBolt {
    out: String,
    /// `(task_id, task_index)`, known from `prepare`.
    task: Option<(u32, u32)>,
    tuples: u64,
    ticks: u64,
    keys: HashMap<String, u64>,
    /// Reused to format each key, so a known key costs no allocation.
    key: String,
}

impl RecordBolt {
    /// The report written at cleanup.
    fn report(&self, task_id: u32, task_index: u32) -> String {
        let mut keys: Vec<_> = self.keys.iter().collect();
        keys.sort_unstable();
        let mut report = format!(
            "task {task_id}\nindex {task_index}\ntuples {}\nticks {}\n",
            self.tuples, self.ticks
        );
        for (key, count) in keys {
            // Writing to a String cannot fail.
            let _ = writeln!(report, "key {key} {count}");
        }
        report
    }

    /// Writes the report to `<out>.<task_id>` through a temporary file.
    fn write_report(&self, task_id: u32, task_index: u32) -> std::io::Result<String> {
        let path = format!("{}.{task_id}", self.out);
        let tmp = format!("{path}.tmp");
        std::fs::write(&tmp, self.report(task_id, task_index))?;
        std::fs::rename(&tmp, &path)?;
        Ok(path)
    }
}

impl BasicBolt for RecordBolt {
    const NAME: &'static str = "RecordBolt";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[ConfigKey::required(
        "out",
        KeyKind::String,
        "path prefix of the per-task report <out>.<task_id>",
    )]);
    const DESCRIPTION: &'static str =
        "counts inputs per first value and ticks; writes <out>.<task_id> at cleanup";

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: RecordConfig = config.parse()?;
        require_path(&config.out, "out")?;
        Ok(Self {
            out: config.out,
            task: None,
            tuples: 0,
            ticks: 0,
            keys: HashMap::new(),
            key: String::new(),
        })
    }

    fn prepare(&mut self, context: &TaskContext) -> Result<()> {
        self.task = Some((context.task_id, context.task_index));
        Ok(())
    }

    fn execute(&mut self, input: &Tuple<'_>, _collector: &mut BasicCollector<'_>) -> Result<()> {
        if input.is_tick() {
            self.ticks += 1;
            return Ok(());
        }
        self.tuples += 1;
        if let Some(value) = input.get(0) {
            self.key.clear();
            // Writing to a String cannot fail.
            let _ = write!(self.key, "{value}");
            match self.keys.get_mut(self.key.as_str()) {
                Some(count) => *count += 1,
                None => {
                    self.keys.insert(self.key.clone(), 1);
                }
            }
        }
        Ok(())
    }

    fn cleanup(&mut self) {
        let Some((task_id, task_index)) = self.task else {
            eprintln!("squall-testkit: RecordBolt cleaned up before prepare; nothing written");
            return;
        };
        if let Err(e) = self.write_report(task_id, task_index) {
            eprintln!("squall-testkit: cannot write {}.{task_id}: {e}", self.out);
        }
    }
}

#[cfg(test)]
mod tests {
    use squall_plugin_api::{SYSTEM_COMPONENT, TICK_STREAM};

    use super::*;

    #[test]
    fn declared_config_keys_match_the_config_struct() {
        squall_plugin_api::testing::check_config_keys::<RecordConfig>(
            RecordBolt::CONFIG_KEYS,
            "out = \"o\"",
        )
        .unwrap();
    }
    use crate::test_support::{context, temp_dir};
    use squall_plugin_api::testing::Recorder;

    #[test]
    fn counts_tuples_per_key_and_ticks_apart_and_writes_the_report() {
        let dir = temp_dir("record");
        let out = dir.join("record");
        let mut bolt =
            RecordBolt::new(&ComponentConfig::new(&format!("out = {:?}", out.to_str().unwrap())))
                .unwrap();
        bolt.prepare(&context("sink", 7, 1, &[], &[])).unwrap();
        let mut recorder = Recorder::default();
        let mut execute =
            |bolt: &mut RecordBolt, values: &[Value], component: &str, stream: &str| {
                let input = Tuple::new(values, &[], component, stream, 1, Anchor::NONE);
                bolt.execute(&input, &mut BasicCollector::new(recorder.output())).unwrap();
            };
        execute(&mut bolt, &[Value::U64(7), Value::from("x")], "src", "default");
        execute(&mut bolt, &[Value::from("b")], "src", "default");
        execute(&mut bolt, &[Value::U64(7)], "src", "default");
        execute(&mut bolt, &[], "src", "default");
        execute(&mut bolt, &[Value::U64(1)], SYSTEM_COMPONENT, TICK_STREAM);
        bolt.cleanup();
        let text = std::fs::read_to_string(dir.join("record.7")).unwrap();
        assert_eq!(text, "task 7\nindex 1\ntuples 4\nticks 1\nkey 7 2\nkey b 1\n");
        assert!(!dir.join("record.7.tmp").exists());
        assert!(recorder.emitted.is_empty());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_out_prefix_is_required() {
        let err = RecordBolt::new(&ComponentConfig::new("")).unwrap_err().to_string();
        assert!(err.contains("missing field `out`"), "{err}");
    }
}
