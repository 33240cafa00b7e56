//! `squall run`.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::args::RunArgs;
use super::load;
use crate::metrics::{Report, RunSummary};

/// Runs a topology until Ctrl-C, `--duration` or a fatal error, then drains it.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let topology = match load(&args.topology) {
        Ok(t) => t,
        Err(code) => return Ok(code),
    };
    let instances = match super::instantiate(&topology) {
        Ok(i) => i,
        Err(code) => return Ok(code),
    };
    let interrupts = install_ctrl_c()?;
    let name = topology.name.clone();
    // The duration counts from before any executor (and its throttler) starts,
    // so a throttle period that begins `--duration` after its throttler's
    // start begins at or past the deadline, and an executor that wakes for it
    // starts the drain instead of spending it (see `RunControl::throttle`).
    let started = Instant::now();
    let deadline = args.duration.map(|d| started + d);
    let running = crate::runtime::start(topology, instances)?;
    if let Some(deadline) = deadline {
        running.run.set_deadline(deadline);
    }
    tracing::info!(topology = %name, "running; Ctrl-C drains and stops, a second Ctrl-C exits at once");
    let mut next_stats = (!args.stats_interval.is_zero()).then(|| started + args.stats_interval);
    let mut previous: Option<Report> = None;
    let reason = loop {
        // Sleep until the next thing to do: the deadline, the next stats
        // table, or a 100 ms check for Ctrl-C. A fatal error (or a throttled
        // spout reaching the deadline) starts the drain, which cancels the run's
        // canceler and wakes this wait at once.
        let now = Instant::now();
        let mut wake = now + Duration::from_millis(100);
        for at in [deadline, next_stats].into_iter().flatten() {
            wake = wake.min(at);
        }
        running.run.canceler.wait_until(wake);
        if interrupts.load(Ordering::SeqCst) > 0 {
            break "interrupted";
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break "duration reached";
        }
        if running.run.fatal().is_some() {
            break "fatal error";
        }
        if running.run.state() != crate::executor::RunState::Running {
            break "draining";
        }
        if let Some(next) = next_stats.as_mut() {
            if Instant::now() >= *next {
                *next += args.stats_interval;
                let report = running.report();
                eprint!("{}", report.table(previous.as_ref()));
                previous = Some(report);
            }
        }
    };
    tracing::info!("{reason}: draining");
    let run = running.run.clone();
    let (report, drain) = running.shutdown();
    let stuck = (!drain.stuck_threads.is_empty()).then(|| {
        format!(
            "{} thread(s) did not stop within {} s of shutdown (blocked in plugin code): {}",
            drain.stuck_threads.len(),
            crate::runtime::JOIN_GRACE.as_secs(),
            drain.stuck_threads.join(", ")
        )
    });
    let fatal = run.fatal().or(stuck);
    eprint!("{}", report.table(None));
    eprintln!(
        "drain: {} in flight at start; {} acked, {} failed, {} timed out, {} failed at shutdown; {} in {:.2}s",
        drain.in_flight_at_start,
        drain.acked,
        drain.failed,
        drain.timed_out,
        drain.failed_at_shutdown,
        if drain.completed { "completed" } else { "timed out" },
        drain.secs
    );
    let summary = RunSummary {
        schema_version: 1,
        topology: name,
        outcome: if fatal.is_some() { "failed" } else { "completed" },
        error: fatal.clone(),
        elapsed_secs: report.elapsed_secs,
        drain,
        components: report.components,
    };
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&summary)?;
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(match fatal {
        Some(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
        None => ExitCode::SUCCESS,
    })
}

/// First Ctrl-C: counted, the run loop starts the drain. Second: exit at once.
fn install_ctrl_c() -> anyhow::Result<Arc<AtomicU32>> {
    let interrupts = Arc::new(AtomicU32::new(0));
    let seen = interrupts.clone();
    ctrlc::set_handler(move || {
        if seen.fetch_add(1, Ordering::SeqCst) >= 1 {
            eprintln!("second interrupt: exiting at once");
            std::process::exit(130);
        }
        eprintln!("interrupt: draining (press Ctrl-C again to exit at once)");
    })
    .context("cannot install the Ctrl-C handler")?;
    Ok(interrupts)
}
