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
//! 100 000/s to `target/throttle-rate.csv` (or to `THROTTLE_BENCH_CSV`), and
//! plots them, one panel per mode with the target's share as a red line, to
//! `docs/throttling-rate.png` (or to `THROTTLE_BENCH_PNG`).
//!
//! The plot's labels use the TrueType font at `THROTTLE_BENCH_FONT`, else the
//! first DejaVu Sans found in the usual system places; with no font the plot
//! is drawn without text (the axes are described in `docs/throttling.md`).
//!
//! Run with `cargo bench -p squall-host --bench throttle_accuracy`.
//! `-- --test` (CI's bench smoke) does one 0.2 s run per row and writes no
//! file unless `THROTTLE_BENCH_CSV` or `THROTTLE_BENCH_PNG` asks for one;
//! `THROTTLE_BENCH_SECS` overrides the length in both cases.

use std::env;
use std::error::Error;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use plotters::prelude::*;
use plotters::style::register_font;
use squall_host::clock::{Clock, SystemClock};
use squall_host::throttle::{Canceler, ThrottleMode, Throttler, DEFAULT_PERIOD};

const RATES: [u64; 3] = [1_000, 100_000, 1_000_000];
const REPEATS: usize = 3;
const WINDOW: Duration = Duration::from_millis(10);
/// Timestamp resolution of the sliding window.
const BUCKET: Duration = Duration::from_micros(10);
/// The rate whose per-10 ms counts are written and plotted.
const PLOT_RATE: u64 = 100_000;
/// The length of each run in a `--test` smoke run.
const SMOKE_SECS: f64 = 0.2;
/// Where the plot's font is looked for when `THROTTLE_BENCH_FONT` is unset.
const FONTS: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];
/// The family name the font is registered under.
const FAMILY: &str = "sans-serif";

/// What one run measured.
struct Run {
    /// Achieved rate divided by the target.
    rate_ratio: f64,
    /// Largest 10 ms window count divided by the target's share of 10 ms.
    burst_ratio: f64,
    /// Units returned in each aligned 10 ms window.
    per_window: Vec<u64>,
}

/// What to run and which files to write.
struct Options {
    duration: Duration,
    repeats: usize,
    csv: Option<PathBuf>,
    png: Option<PathBuf>,
}

fn options() -> Options {
    // `cargo bench -- --test` passes `--test` (and cargo adds `--bench`).
    let smoke = env::args().any(|a| a == "--test");
    let secs = env::var("THROTTLE_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(if smoke { SMOKE_SECS } else { 10.0 });
    let asked = |var: &str| env::var_os(var).map(PathBuf::from);
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest.parent().unwrap_or(manifest).to_path_buf();
    let default_csv = || {
        env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace.join("target"))
            .join("throttle-rate.csv")
    };
    Options {
        duration: Duration::from_secs_f64(secs.max(0.05)),
        repeats: if smoke { 1 } else { REPEATS },
        csv: asked("THROTTLE_BENCH_CSV").or_else(|| (!smoke).then(default_csv)),
        png: asked("THROTTLE_BENCH_PNG")
            .or_else(|| (!smoke).then(|| workspace.join("docs").join("throttling-rate.png"))),
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let options = options();
    let duration = options.duration;
    let repeats = options.repeats;
    println!("throttle accuracy: {repeats} runs of {duration:?} per row, medians shown");
    println!("{:<8} {:>12} {:>12} {:>14}", "mode", "target/s", "rate/target", "max10ms/share");

    let mut plotted: Vec<(ThrottleMode, Vec<u64>)> = Vec::new();
    for mode in ThrottleMode::ALL {
        for rate in RATES {
            let mut runs: Vec<Run> = (0..repeats).map(|_| run(mode, rate, duration)).collect();
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
            if rate == PLOT_RATE {
                plotted.push((mode, std::mem::take(&mut runs[0].per_window)));
            }
        }
    }

    if let Some(path) = &options.csv {
        write_csv(path, &plotted)?;
        println!("per-10ms counts at {PLOT_RATE}/s written to {}", path.display());
    }
    if let Some(path) = &options.png {
        let labelled = plot(path, &plotted, duration)?;
        println!(
            "rate over time at {PLOT_RATE}/s plotted to {}{}",
            path.display(),
            if labelled { "" } else { " (no font found: drawn without text)" }
        );
    }
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
    // Whole windows only (the buckets run one past the end).
    let per_window =
        buckets.chunks_exact(per_bucket).map(|c| c.iter().map(|&n| u64::from(n)).sum()).collect();
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

/// One row per 10 ms window: its start in ms, then each mode's count.
fn write_csv(path: &Path, columns: &[(ThrottleMode, Vec<u64>)]) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let mut csv = String::from("t_ms");
    for (mode, _) in columns {
        csv.push_str(&format!(",{}_{}", mode.as_str(), PLOT_RATE));
    }
    csv.push('\n');
    let rows = columns.iter().map(|(_, c)| c.len()).max().unwrap_or(0);
    for row in 0..rows {
        csv.push_str(&(row as u128 * WINDOW.as_millis()).to_string());
        for (_, column) in columns {
            csv.push_str(&format!(",{}", column.get(row).copied().unwrap_or(0)));
        }
        csv.push('\n');
    }
    fs::write(path, csv)
}

/// Registers a TrueType font for the plot's text; false when none is found.
fn load_font() -> bool {
    let candidates: Vec<PathBuf> = match env::var_os("THROTTLE_BENCH_FONT") {
        Some(path) => vec![PathBuf::from(path)],
        None => FONTS.iter().map(PathBuf::from).collect(),
    };
    candidates.iter().filter_map(|path| fs::read(path).ok()).any(|bytes| {
        // plotters keeps registered fonts for the life of the process.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        register_font(FAMILY, FontStyle::Normal, bytes).is_ok()
    })
}

/// Plots the per-10 ms counts, one panel per mode (top to bottom, in the
/// order given), each with its own y scale and the target's share of a
/// window as a red line, to a 1200 x 800 PNG at `path`. Returns whether the
/// text (captions, axis labels) could be drawn.
fn plot(
    path: &Path,
    columns: &[(ThrottleMode, Vec<u64>)],
    duration: Duration,
) -> Result<bool, Box<dyn Error>> {
    const WIDTH: u32 = 1200;
    const HEIGHT: u32 = 800;
    let labelled = load_font();
    let share = (PLOT_RATE as f64 * WINDOW.as_secs_f64()).round() as u64;
    let secs = duration.as_secs_f64();
    let mut pixels = vec![0u8; WIDTH as usize * HEIGHT as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let panels = root.split_evenly((columns.len().max(1), 1));
        for (area, (mode, counts)) in panels.iter().zip(columns) {
            let top = counts.iter().copied().max().unwrap_or(0).max(share);
            let y_max = top + top / 10 + 1;
            let mut builder = ChartBuilder::on(area);
            builder.margin(12);
            if labelled {
                let burst = counts.iter().copied().max().unwrap_or(0) as f64 / share as f64;
                builder
                    .caption(
                        format!(
                            "{mode} mode at {PLOT_RATE} tuples/s: tuples per 10 ms \
                             (red: the target's {share}; highest bin {burst:.2}x)"
                        ),
                        (FAMILY, 20),
                    )
                    .x_label_area_size(40)
                    .y_label_area_size(70);
            }
            let mut chart = builder.build_cartesian_2d(0f64..secs, 0u64..y_max)?;
            let mut mesh = chart.configure_mesh();
            mesh.x_labels(11).y_labels(6);
            if labelled {
                mesh.x_desc("time (s)").y_desc("tuples per 10 ms").label_style((FAMILY, 15));
            }
            mesh.draw()?;
            let window = WINDOW.as_secs_f64();
            chart.draw_series(LineSeries::new(
                counts.iter().enumerate().map(|(i, &count)| (i as f64 * window, count)),
                BLUE.stroke_width(1),
            ))?;
            chart
                .draw_series(LineSeries::new([(0.0, share), (secs, share)], RED.stroke_width(2)))?;
        }
        root.present()?;
    }
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let file = io::BufWriter::new(fs::File::create(path)?);
    let mut encoder = png::Encoder::new(file, WIDTH, HEIGHT);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&pixels)?;
    writer.finish()?;
    Ok(labelled)
}
