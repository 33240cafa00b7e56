//! `squall run`: load, start, run until a stop, drain, report.

use std::time::{Duration, Instant};

use super::args::RunArgs;
use super::signals::Signals;
use super::Failure;
use crate::control::RunState;
use crate::metrics::{JsonReporter, Outcome, Reporter, RunSummary, TableReporter};
use crate::runtime::{RunOutcome, TopologyHandle};

/// Runs a topology until a stop signal, `--duration` or a fatal error, then
/// drains it and hands the summary to every reporter.
pub fn run(args: RunArgs) -> Result<(), Failure> {
    let signals = Signals::install()?;
    let sets = args.all_sets();
    let config = super::load_config(&args.topology, &sets)?;
    if let Some(group) = config.group.clone() {
        return super::group::run_group(&args, sets, &config, group, &signals);
    }
    let topology = super::bind(&config)?;
    // Bound before any topology thread starts: a port in use is a clean error.
    let http = bind_http(&args, &topology)?;
    let instances = super::instantiate(&topology)?;
    let name = topology.name.clone();
    let mut reporters = reporters(&args);
    // The duration counts from before any executor (and its throttler) starts,
    // so a throttle period that begins `--duration` after its throttler's
    // start begins at or past the deadline, and an executor that wakes for it
    // starts the drain instead of spending it (see `RunControl::throttle`).
    let started = Instant::now();
    let deadline = args.duration.map(|d| started + d);
    let running = crate::runtime::start(topology, instances).map_err(Failure::Start)?;
    let handle = running.handle().clone();
    attach_controls(&args, &handle, &signals, deadline)?;
    let http = http.map(|(server, options)| server.serve(handle.clone(), options)).transpose()?;
    tracing::info!(topology = %name, "running; SIGINT (Ctrl-C) or SIGTERM drains and stops, a second one exits at once");
    let interval = (!args.stats_interval.is_zero()).then_some(args.stats_interval);
    let reason = run_loop(&handle, &signals, deadline, interval, &mut reporters);
    tracing::info!("{reason}: draining");
    let reloads = handle.reloads();
    let outcome = running.stop();
    if let Some(http) = http {
        http.stop();
    }
    let error = outcome.error.clone();
    let summary = summary(name, outcome, reloads, &handle);
    for r in &mut reporters {
        r.finish(&summary)?;
    }
    error.map_or(Ok(()), |e| Err(Failure::Run(e)))
}

/// The HTTP endpoint, bound but not yet serving, with its options: `None`
/// without an address (`--http` or `[topology] http`).
fn bind_http(
    args: &RunArgs,
    topology: &crate::topology::Topology,
) -> Result<Option<(crate::http::HttpServer, crate::http::ServeOptions)>, Failure> {
    let Some(addr) = args.http.or(topology.settings.http) else {
        return Ok(None);
    };
    let options = &topology.settings.http_options;
    let options = crate::http::serve_options(options, args.http_token_file.as_deref(), addr)
        .map_err(Failure::http_config)?;
    let server = crate::http::HttpServer::bind(addr).map_err(Failure::Bind)?;
    Ok(Some((server, options)))
}

/// Hands the running topology its controls: the deadline, the reloader
/// (SIGHUP and the API), the file watcher with `--watch`, and the stop
/// signals.
fn attach_controls(
    args: &RunArgs,
    handle: &TopologyHandle,
    signals: &Signals,
    deadline: Option<Instant>,
) -> Result<(), Failure> {
    if let Some(deadline) = deadline {
        handle.run().set_deadline(deadline);
    }
    crate::runtime::Reloader::new(args.topology.clone(), handle.clone()).spawn()?;
    if args.watch {
        crate::runtime::watch::spawn(args.topology.clone(), handle.clone())?;
    }
    signals.attach(handle.clone());
    Ok(())
}

/// The end-of-run summary of topology `name` from how it stopped and the
/// reloads it had (succeeded, failed).
fn summary(
    name: String,
    outcome: RunOutcome,
    reloads: (u64, u64),
    handle: &TopologyHandle,
) -> RunSummary {
    let RunOutcome { report, drain, error } = outcome;
    RunSummary {
        schema_version: 1,
        topology: name,
        outcome: if error.is_some() { Outcome::Failed } else { Outcome::Completed },
        error: error.as_ref().map(ToString::to_string),
        elapsed_secs: report.elapsed_secs,
        drain,
        reloads: crate::metrics::ReloadSummary {
            succeeded: reloads.0,
            failed: reloads.1,
            partial: handle.partial_reloads(),
        },
        durable_state: handle.durable().map_or(serde_json::Value::Null, |d| d.to_json()),
        components: report.components,
    }
}

/// The reporters `args` ask for.
fn reporters(args: &RunArgs) -> Vec<Box<dyn Reporter>> {
    let mut out: Vec<Box<dyn Reporter>> = vec![Box::new(TableReporter::default())];
    if let Some(path) = &args.json {
        out.push(Box::new(JsonReporter::new(path.clone())));
    }
    out
}

/// Waits until something stops the run, handing one snapshot per
/// `interval` to every reporter; returns why it stopped.
fn run_loop(
    handle: &TopologyHandle,
    signals: &Signals,
    deadline: Option<Instant>,
    interval: Option<Duration>,
    reporters: &mut [Box<dyn Reporter>],
) -> &'static str {
    let mut next_stats = interval.map(|i| Instant::now() + i);
    loop {
        // Sleep until the next thing to do: the deadline or the next stats
        // snapshot. A stop signal, a fatal error or a throttled spout
        // reaching the deadline starts the drain, which wakes this wait at
        // once; the 1 s cap is only a safety net.
        let mut wake = Instant::now() + Duration::from_secs(1);
        for at in [deadline, next_stats].into_iter().flatten() {
            wake = wake.min(at);
        }
        handle.wait_until(wake);
        if let Some(reason) = stop_reason(handle, signals, deadline) {
            return reason;
        }
        if let (Some(next), Some(interval)) = (next_stats.as_mut(), interval) {
            if Instant::now() >= *next {
                *next += interval;
                let report = handle.report();
                for r in reporters.iter_mut() {
                    r.interval(&report);
                }
            }
        }
    }
}

/// Why the run must stop now, if it must: a stop signal, the deadline, a
/// fatal error, or a drain asked for otherwise.
fn stop_reason(
    handle: &TopologyHandle,
    signals: &Signals,
    deadline: Option<Instant>,
) -> Option<&'static str> {
    if let Some(signal) = signals.stop_requested() {
        return Some(signal);
    }
    if deadline.is_some_and(|d| Instant::now() >= d) {
        return Some("duration reached");
    }
    if handle.fatal().is_some() {
        return Some("fatal error");
    }
    if handle.state() != RunState::Running {
        return Some("drain requested");
    }
    None
}
