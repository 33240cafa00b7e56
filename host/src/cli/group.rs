//! `squall run` of a topology with `[group]`: this process joins the group
//! and runs one instance of the topology per partition it holds a lease
//! for (see `group`).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::args::RunArgs;
use super::signals::Signals;
use super::Failure;
use crate::config::{GroupDecl, Override, TopologyConfig};
use crate::group::{Member, Partitions, Settings};
use crate::http::group::{BoundGroup, GroupView};
use crate::runtime::RunningTopology;
use crate::state::Fence;

/// Builds partition `k`'s topology from the file: `${SQUALL_PARTITION}` is
/// `k` in its strings, and its state lives in namespace `NAMESPACE.pK`.
#[derive(Debug)]
struct FilePartitions {
    path: PathBuf,
    sets: Vec<Override>,
}

impl Partitions for FilePartitions {
    fn start(&self, k: u32, fence: Arc<Fence>) -> Result<RunningTopology, String> {
        let one_line = |f: Failure| match f {
            Failure::Config(d) => d.to_string().lines().next().unwrap_or_default().to_owned(),
            Failure::Load(errors) => {
                errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
            }
            Failure::Start(e) => e.to_string(),
            other => format!("{other:?}"),
        };
        let config =
            crate::config::load_partition(&self.path, &self.sets, k).map_err(|d| d.to_string())?;
        let mut topology = super::bind(&config).map_err(one_line)?;
        if let Some(plan) = topology.state.as_mut() {
            plan.namespace = super::partition_namespace(&plan.namespace, k);
        }
        let instances = super::instantiate(&topology).map_err(one_line)?;
        crate::runtime::start_fenced(topology, instances, fence).map_err(|e| e.to_string())
    }
}

/// Joins the group and runs until a stop signal, `--duration`, or the
/// member's end; then leaves (every partition stops gracefully and is
/// released).
pub(super) fn run_group(
    args: &RunArgs,
    sets: Vec<Override>,
    config: &TopologyConfig,
    group: GroupDecl,
    signals: &Signals,
) -> Result<(), Failure> {
    // The plugins and every component check out before this host joins:
    // an error is the file's, at its line and column.
    drop(super::bind(config)?);
    let addr = args.http.or(config.settings.http);
    let access = addr
        .map(|addr| {
            let options = &config.settings.http_options;
            crate::http::access_from(options, args.http_token_file.as_deref(), addr)
        })
        .transpose()
        .map_err(Failure::HttpConfig)?;
    let bound = addr
        .map(|addr| {
            BoundGroup::bind(addr)
                .map_err(|e| Failure::Bind(crate::http::BindError { addr, message: e.to_string() }))
        })
        .transpose()?;
    if args.watch {
        tracing::warn!("group {}: --watch is ignored by a group member", group.name);
    }
    let host_id = group.host_id.clone().unwrap_or_else(crate::group::default_host_id);
    if !crate::config::group::host_id_ok(&host_id) {
        return Err(Failure::Group(format!(
            "host id {host_id:?} is not valid: letters, digits, '_', '-' and '=' (--host-id)"
        )));
    }
    let settings = Settings {
        name: group.name.clone(),
        partitions: group.partitions,
        lease: Duration::from_millis(group.lease_ms),
        url: group.url.clone(),
        bucket: group.bucket.clone(),
        host_id,
    };
    let partitions = Arc::new(FilePartitions { path: args.topology.clone(), sets });
    let deadline = args.duration.map(|d| Instant::now() + d);
    let member = Member::start(settings, partitions).map_err(Failure::Group)?;
    let ready = Arc::new(AtomicBool::new(true));
    let endpoint = match (bound, access) {
        (Some(bound), Some(access)) => {
            let view = GroupView {
                status: member.status_cell(),
                counters: member.counters().clone(),
                ready: ready.clone(),
            };
            match bound.serve(access, view) {
                Ok(endpoint) => Some(endpoint),
                Err(e) => {
                    tracing::error!("group {}: the HTTP endpoint cannot start: {e}", group.name);
                    None
                }
            }
        }
        _ => None,
    };
    tracing::info!(
        "running in group {}; SIGINT (Ctrl-C) or SIGTERM checkpoints and releases every \
         partition, a second one exits at once",
        group.name
    );
    let reason = loop {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(signal) = signals.stop_requested() {
            break signal;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break "duration reached";
        }
        if member.is_finished() {
            break "the group member stopped";
        }
    };
    tracing::info!("{reason}: leaving group {}", group.name);
    ready.store(false, std::sync::atomic::Ordering::SeqCst);
    let counters = member.counters().clone();
    member.leave();
    if let Some(endpoint) = endpoint {
        endpoint.stop();
    }
    use std::sync::atomic::Ordering::Relaxed;
    eprintln!(
        "group {}: taken {}, of which taken over {}, released {}, lost {}, start failures {}",
        group.name,
        counters.taken.load(Relaxed),
        counters.takeovers.load(Relaxed),
        counters.released.load(Relaxed),
        counters.lost.load(Relaxed),
        counters.start_failures.load(Relaxed),
    );
    Ok(())
}
