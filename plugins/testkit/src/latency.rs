//! [`LatencyBolt`]: a sink that measures how long its inputs took to reach
//! `execute` since a send time written into them, for latency benches.

use std::time::{SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use serde::Deserialize;
use squall_plugin_api::prelude::*;

use crate::require_path;

/// [`LatencyBolt`]'s config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct LatencyConfig {
    out: String,
    #[serde(default)]
    skip: u64,
}

/// The longest latency the histogram holds (60 s, in nanoseconds); longer
/// ones are recorded as this.
const MAX_NANOS: u64 = 60_000_000_000;

/// Records, for each input, the wall-clock time at `execute` minus the send
/// time its first value carries, into an HDR histogram (nanoseconds, 3
/// significant digits), and writes the percentiles to `<out>.<task_id>` at
/// cleanup. No outputs.
///
/// The first value is the send time in nanoseconds since the Unix epoch
/// (`SystemTime`, i.e. `CLOCK_REALTIME`), as decimal digits in bytes or a
/// string (what a broker spout emits as a payload), or as an integer. The
/// sender must run on the same machine (same clock). An input whose first
/// value is none of these is counted as `unparsed`, and a send time in the
/// future as 0 ns.
///
/// Config: `out` (path prefix, required); `skip` (default 0): the first
/// `skip` inputs of each task are counted but not recorded (a warm-up).
/// The file (written through `<out>.<task_id>.tmp`, then renamed) reads,
/// with latencies in nanoseconds:
///
/// ```text
/// tuples <n>        inputs seen (ticks excluded), skipped ones included
/// recorded <n>
/// unparsed <n>
/// p50 <ns>
/// p99 <ns>
/// p999 <ns>
/// max <ns>
/// ```
#[derive(Debug)]
pub struct LatencyBolt {
    out: String,
    skip: u64,
    task_id: Option<u32>,
    tuples: u64,
    unparsed: u64,
    histogram: Histogram<u64>,
}

/// The send time an input carries, in nanoseconds since the epoch.
fn sent_nanos(value: &Value) -> Option<u64> {
    if let Some(n) = value.as_u64() {
        return Some(n);
    }
    let digits = value.as_bytes().or_else(|| value.as_str().map(str::as_bytes))?;
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit().then_some(())?;
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

impl LatencyBolt {
    /// The report written at cleanup.
    fn report(&self) -> String {
        let h = &self.histogram;
        format!(
            "tuples {}\nrecorded {}\nunparsed {}\np50 {}\np99 {}\np999 {}\nmax {}\n",
            self.tuples,
            h.len(),
            self.unparsed,
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.99),
            h.value_at_quantile(0.999),
            h.max(),
        )
    }
}

impl BasicBolt for LatencyBolt {
    const NAME: &'static str = "LatencyBolt";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[
        ConfigKey::required(
            "out",
            KeyKind::String,
            "path prefix of the per-task report <out>.<task_id>",
        ),
        ConfigKey::optional(
            "skip",
            KeyKind::Integer,
            "0",
            "the first inputs of each task that are not recorded (warm-up)",
        ),
    ]);
    const DESCRIPTION: &'static str =
        "records execute time minus the send time in the first value; writes percentiles at cleanup";

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: LatencyConfig = config.parse()?;
        require_path(&config.out, "out")?;
        let histogram = Histogram::new_with_bounds(1, MAX_NANOS, 3)
            .map_err(|e| format!("cannot make the histogram: {e}"))?;
        Ok(Self {
            out: config.out,
            skip: config.skip,
            task_id: None,
            tuples: 0,
            unparsed: 0,
            histogram,
        })
    }

    fn prepare(&mut self, context: &TaskContext) -> Result<()> {
        self.task_id = Some(context.task_id);
        Ok(())
    }

    fn execute(&mut self, input: &Tuple<'_>, _collector: &mut BasicCollector<'_>) -> Result<()> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        if input.is_tick() {
            return Ok(());
        }
        self.tuples += 1;
        let Some(sent) = input.get(0).and_then(sent_nanos) else {
            self.unparsed += 1;
            return Ok(());
        };
        if self.tuples > self.skip {
            self.histogram.saturating_record(now.saturating_sub(sent).clamp(1, MAX_NANOS));
        }
        Ok(())
    }

    fn cleanup(&mut self) {
        let Some(task_id) = self.task_id else {
            eprintln!("squall-testkit: LatencyBolt cleaned up before prepare; nothing written");
            return;
        };
        let path = format!("{}.{task_id}", self.out);
        let tmp = format!("{path}.tmp");
        if let Err(e) =
            std::fs::write(&tmp, self.report()).and_then(|()| std::fs::rename(&tmp, &path))
        {
            eprintln!("squall-testkit: cannot write {path}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use squall_plugin_api::testing::{check_config_keys, tick_tuple, Recorder};

    use super::*;

    #[test]
    fn declared_config_keys_match_the_config_struct() {
        check_config_keys::<LatencyConfig>(LatencyBolt::CONFIG_KEYS, r#"out = "lat""#).unwrap();
    }

    #[test]
    fn send_times_are_read_from_digits_and_integers_only() {
        assert_eq!(
            sent_nanos(&Value::from("1700000000000000000")),
            Some(1_700_000_000_000_000_000)
        );
        assert_eq!(sent_nanos(&Value::shared_bytes(b"42")), Some(42));
        assert_eq!(sent_nanos(&Value::U64(7)), Some(7));
        assert_eq!(sent_nanos(&Value::I64(-1)), None);
        assert_eq!(sent_nanos(&Value::from("")), None);
        assert_eq!(sent_nanos(&Value::from("12x")), None);
        assert_eq!(sent_nanos(&Value::from("99999999999999999999")), None, "overflows u64");
    }

    #[test]
    fn the_report_counts_skipped_and_unparsed_inputs_and_records_the_rest() {
        let dir = crate::test_support::temp_dir("latency");
        let out = dir.join("lat");
        let config = format!("out = {:?}\nskip = 1", out.to_str().unwrap());
        let mut bolt = LatencyBolt::new(&ComponentConfig::new(&config)).unwrap();
        bolt.prepare(&crate::test_support::context("sink", 3, 0, &[], &[])).unwrap();
        let second_ago =
            SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64 - 1_000_000_000;
        let mut recorder = Recorder::default();
        let inputs = [
            Value::U64(second_ago),
            Value::from(second_ago.to_string().as_str()),
            Value::from("nope"),
            Value::shared_bytes(second_ago.to_string().as_bytes()),
        ];
        for value in inputs {
            let values = [value];
            let input = Tuple::new(&values, &[], "in", "default", 0, Anchor::NONE);
            bolt.execute(&input, &mut BasicCollector::new(recorder.output())).unwrap();
        }
        bolt.execute(&tick_tuple(), &mut BasicCollector::new(recorder.output())).unwrap();
        bolt.cleanup();
        let report = std::fs::read_to_string(dir.join("lat.3")).unwrap();
        assert!(report.starts_with("tuples 4\nrecorded 2\nunparsed 1\n"), "{report}");
        // Both recorded inputs were sent at least a second before execute.
        let p50: u64 =
            report.lines().nth(3).unwrap().strip_prefix("p50 ").unwrap().parse().unwrap();
        assert!(p50 >= 1_000_000_000, "{report}");
    }
}
