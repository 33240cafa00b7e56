//! Throttle accuracy on the real clock (`harness = false`).
//!
//! For each mode and each target rate, a single thread calls `throttle(1)` in a
//! tight loop for `THROTTLE_BENCH_SECS` seconds (default 10) and timestamps each
//! return. It reports, as the median of 3 runs:
//!
//! - `rate/target`: units returned per second divided by the target rate;
//! - `max10ms/share`: the most units returned in any 10 ms window (slid in
//!   10 µs steps) divided by the target's share of 10 ms (`rate * 0.01`).
//!
//! It also writes the per-10 ms counts of the first run of both modes at
//! 100 000/s to `target/throttle-rate.csv` (or to `THROTTLE_BENCH_CSV`).
//!
//! Run with `cargo bench --bench throttle_accuracy`;
//! `THROTTLE_BENCH_SECS=1` gives a quick smoke run.

use std::env;
use std::fs;
use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use squall_host::clock::{Clock, SystemClock};
use squall_host::throttle::{Canceler, ThrottleMode, Throttler, DEFAULT_PERIOD};

const RATES: [u64; 3] = [1_000, 100_000, 1_000_000];
const REPEATS: usize = 3;
const WINDOW: Duration = Duration::from_millis(10);
/// Timestamp resolution of the sliding window.
const BUCKET: Duration = Duration::from_micros(10);
const CSV_RATE: u64 = 100_000;

/// What one run measured.
struct Run {
    /// Achieved rate divided by the target.
    rate_ratio: f64,
    /// Largest 10 ms window count divided by the target's share of 10 ms.
    burst_ratio: f64,
    /// Units returned in each aligned 10 ms window.
    per_window: Vec<u64>,
}

fn main() -> io::Result<()> {
    let secs =
        env::var("THROTTLE_BENCH_SECS").ok().and_then(|s| s.parse::<f64>().ok()).unwrap_or(10.0);
    let duration = Duration::from_secs_f64(secs.max(0.05));
    println!("throttle accuracy: {REPEATS} runs of {duration:?} per row, medians shown");
    println!("{:<8} {:>12} {:>12} {:>14}", "mode", "target/s", "rate/target", "max10ms/share");

    let mut csv_columns: Vec<(ThrottleMode, Vec<u64>)> = Vec::new();
    for mode in ThrottleMode::ALL {
        for rate in RATES {
            let mut runs: Vec<Run> = (0..REPEATS).map(|_| run(mode, rate, duration)).collect();
            let rate_ratio = median(runs.iter().map(|r| r.rate_ratio).collect());
            let burst_ratio = median(runs.iter().map(|r| r.burst_ratio).collect());
            println!(
                "{:<8} {:>12} {:>12.4} {:>14.3}",
                mode.as_str(),
                rate,
                rate_ratio,
                burst_ratio
            );
            io::stdout().flush()?;
            if rate == CSV_RATE {
                csv_columns.push((mode, std::mem::take(&mut runs[0].per_window)));
            }
        }
    }

    let path = csv_path();
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let mut csv = String::from("t_ms");
    for (mode, _) in &csv_columns {
        csv.push_str(&format!(",{}_{}", mode.as_str(), CSV_RATE));
    }
    csv.push('\n');
    let rows = csv_columns.iter().map(|(_, c)| c.len()).max().unwrap_or(0);
    for row in 0..rows {
        csv.push_str(&(row as u128 * WINDOW.as_millis()).to_string());
        for (_, column) in &csv_columns {
            csv.push_str(&format!(",{}", column.get(row).copied().unwrap_or(0)));
        }
        csv.push('\n');
    }
    fs::write(&path, csv)?;
    println!("per-10ms counts at {CSV_RATE}/s written to {}", path.display());
    Ok(())
}

/// Calls `throttle(1)` as fast as possible for `duration` and measures it.
fn run(mode: ThrottleMode, rate: u64, duration: Duration) -> Run {
    let clock = SystemClock::new();
    let canceler = Canceler::new();
    let bucket_nanos = BUCKET.as_nanos();
    let buckets_len = usize::try_from(duration.as_nanos() / bucket_nanos).unwrap_or(usize::MAX) + 1;
    let mut buckets = vec![0u32; buckets_len];
    let mut throttler = Throttler::new(mode, rate, DEFAULT_PERIOD);
    let start = clock.now();
    let mut units = 0u64;
    loop {
        throttler.throttle(1, &canceler);
        let elapsed = clock.now() - start;
        if elapsed >= duration {
            break;
        }
        units += 1;
        let index = usize::try_from(elapsed.as_nanos() / bucket_nanos).unwrap_or(usize::MAX);
        buckets[index.min(buckets_len - 1)] += 1;
    }

    let per_bucket = usize::try_from(WINDOW.as_nanos() / bucket_nanos).unwrap_or(1);
    let (mut sum, mut max) = (0u64, 0u64);
    for (i, &count) in buckets.iter().enumerate() {
        sum += u64::from(count);
        if i >= per_bucket {
            sum -= u64::from(buckets[i - per_bucket]);
        }
        max = max.max(sum);
    }
    let per_window =
        buckets.chunks(per_bucket).map(|c| c.iter().map(|&n| u64::from(n)).sum()).collect();
    let share = rate as f64 * WINDOW.as_secs_f64();
    Run {
        rate_ratio: units as f64 / duration.as_secs_f64() / rate as f64,
        burst_ratio: max as f64 / share,
        per_window,
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// `THROTTLE_BENCH_CSV`, else `$CARGO_TARGET_DIR/throttle-rate.csv`, else the
/// workspace's `target/throttle-rate.csv`.
fn csv_path() -> PathBuf {
    if let Some(path) = env::var_os("THROTTLE_BENCH_CSV") {
        return PathBuf::from(path);
    }
    let target = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("target"));
    target.join("throttle-rate.csv")
}
