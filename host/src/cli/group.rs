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
            let limits = crate::http::limits_from(&config.settings.http_options);
            match bound.serve(access, limits, view) {
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

/// One partition as `squall group status` reads it from the broker.
#[derive(Debug, serde::Serialize)]
struct PartitionRow {
    partition: u32,
    /// The lease's owner (`None`: released, or never taken).
    owner: Option<String>,
    epoch: u64,
    /// How long ago the lease was last written (a renewal, a take, a release).
    age_ms: u64,
    /// `held`, `expired` (its owner stopped renewing), `released` or `free`.
    state: &'static str,
    /// Messages of the partition's JetStream consumers not yet delivered
    /// (`None`: no JetStream spout, or it could not be read).
    pending: Option<u64>,
    /// Delivered and not yet acknowledged (with durable state, acks wait
    /// for the checkpoint that covers them).
    unacked: Option<u64>,
}

/// One member's heartbeat.
#[derive(Debug, serde::Serialize)]
struct MemberRow {
    host: String,
    /// `alive`, `silent` (no heartbeat within the lease time) or `left`.
    state: &'static str,
    age_ms: u64,
    partitions: Vec<u32>,
}

/// What `squall group status` prints.
#[derive(Debug, serde::Serialize)]
struct GroupReport {
    group: String,
    bucket: String,
    lease_ms: u64,
    members: Vec<MemberRow>,
    partitions: Vec<PartitionRow>,
}

/// `squall group status TOPOLOGY.toml`: every member of the topology's
/// group, the partitions each holds and their lag, read from the broker
/// without joining the group.
pub(super) fn status(
    topology: &std::path::Path,
    sets: &[Override],
    json: bool,
) -> Result<(), Failure> {
    let config = super::load_config(topology, sets)?;
    let Some(group) = config.group.clone() else {
        return Err(Failure::Other(anyhow::anyhow!(
            "{}: the topology has no [group] table",
            topology.display()
        )));
    };
    // The consumers each partition's spouts read, from its own config.
    let mut consumers = Vec::new();
    for k in 0..group.partitions {
        let config = crate::config::load_partition(topology, sets, k).map_err(Failure::Config)?;
        consumers.push(jetstream_consumers(&config));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Other(anyhow::anyhow!("cannot start a runtime: {e}")))?;
    let report = runtime.block_on(read_group(&group, &consumers))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

/// A JetStream spout's server, stream and consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Consumer {
    url: String,
    stream: String,
    consumer: String,
}

/// The JetStream consumers the spouts of one partition's topology read
/// (`nats::JetStreamSpout` with a named consumer).
fn jetstream_consumers(config: &crate::config::TopologyConfig) -> Vec<Consumer> {
    config
        .spouts
        .iter()
        .filter(|s| s.decl.component.component == "JetStreamSpout")
        .filter_map(|s| {
            let table: toml::Table = s.decl.config.parse().ok()?;
            let text = |key: &str| table.get(key).and_then(toml::Value::as_str).map(str::to_owned);
            Some(Consumer {
                url: text("url").unwrap_or_else(|| "nats://127.0.0.1:4222".to_owned()),
                stream: text("stream")?,
                consumer: text("consumer")?,
            })
        })
        .collect()
}

async fn read_group(
    group: &crate::config::GroupDecl,
    consumers: &[Vec<Consumer>],
) -> Result<GroupReport, Failure> {
    use crate::group::assign::LeaseValue;
    use crate::group::lease::{member_key, partition_key, Leases};
    let timeout = Duration::from_secs(2);
    let broker =
        |e: crate::group::lease::LeaseError| Failure::Group(format!("group {}: {e}", group.name));
    let leases = Leases::attach(&group.url, &group.bucket, timeout).await.map_err(broker)?;
    let lease = Duration::from_millis(group.lease_ms);
    let age = |at: std::time::SystemTime| {
        std::time::SystemTime::now().duration_since(at).unwrap_or_default()
    };
    let mut members = Vec::new();
    for key in leases.keys("h.").await.map_err(broker)? {
        let Some((_, value, at)) = leases.entry(&key).await.map_err(broker)? else { continue };
        let age = age(at);
        let state = match value.as_ref() {
            b"alive" if age <= lease => "alive",
            b"alive" => "silent",
            b"leaving" => "leaving",
            _ => "left",
        };
        let host = key["h.".len()..].to_owned();
        debug_assert_eq!(member_key(&host), key);
        members.push(MemberRow { host, state, age_ms: millis(age), partitions: Vec::new() });
    }
    members.sort_by(|a, b| a.host.cmp(&b.host));
    let mut clients: Vec<(String, async_nats::jetstream::Context)> = Vec::new();
    let mut partitions = Vec::new();
    for k in 0..group.partitions {
        let entry = leases.entry(&partition_key(k)).await.map_err(broker)?;
        let (owner, epoch, age) = match entry {
            Some((_, bytes, at)) => match serde_json::from_slice::<LeaseValue>(&bytes) {
                Ok(v) => (v.owner, v.epoch, Some(age(at))),
                Err(_) => (None, 0, Some(age(at))),
            },
            None => (None, 0, None),
        };
        let state = match (&owner, age) {
            (Some(_), Some(a)) if a <= lease => "held",
            (Some(_), _) => "expired",
            (None, Some(_)) => "released",
            (None, None) => "free",
        };
        if let (Some(o), "held" | "expired") = (&owner, state) {
            if let Some(m) = members.iter_mut().find(|m| &m.host == o) {
                m.partitions.push(k);
            }
        }
        let (mut pending, mut unacked) = (None, None);
        for c in consumers.get(k as usize).into_iter().flatten() {
            let js = match clients.iter().find(|(url, _)| url == &c.url) {
                Some((_, js)) => js.clone(),
                None => {
                    let Ok(client) =
                        crate::group::lease::connect(&c.url, timeout, "squall group status").await
                    else {
                        continue;
                    };
                    let js = async_nats::jetstream::new(client);
                    clients.push((c.url.clone(), js.clone()));
                    js
                }
            };
            let Ok(stream) = js.get_stream(&c.stream).await else { continue };
            let Ok(info) = stream.consumer_info(&c.consumer).await else { continue };
            *pending.get_or_insert(0) += info.num_pending;
            *unacked.get_or_insert(0) += info.num_ack_pending as u64;
        }
        partitions.push(PartitionRow {
            partition: k,
            owner,
            epoch,
            age_ms: age.map_or(0, millis),
            state,
            pending,
            unacked,
        });
    }
    Ok(GroupReport {
        group: group.name.clone(),
        bucket: group.bucket.clone(),
        lease_ms: group.lease_ms,
        members,
        partitions,
    })
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The report as text: the group, one line per member, one per partition.
fn render(report: &GroupReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "group {} (bucket {}, {} partitions, lease {} ms)",
        report.group,
        report.bucket,
        report.partitions.len(),
        report.lease_ms
    );
    let _ = writeln!(out, "\n{:<24} {:<7} {:>10}  partitions", "HOST", "STATE", "HEARTBEAT");
    for m in &report.members {
        let held = m.partitions.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let held = if held.is_empty() { "-".to_owned() } else { held };
        let _ = writeln!(out, "{:<24} {:<7} {:>8}ms  {held}", m.host, m.state, m.age_ms);
    }
    let _ = writeln!(
        out,
        "\n{:>9} {:<24} {:<9} {:>6} {:>10} {:>10} {:>10}",
        "PARTITION", "OWNER", "STATE", "EPOCH", "RENEWED", "PENDING", "UNACKED"
    );
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    for p in &report.partitions {
        let _ = writeln!(
            out,
            "{:>9} {:<24} {:<9} {:>6} {:>8}ms {:>10} {:>10}",
            p.partition,
            p.owner.as_deref().unwrap_or("-"),
            p.state,
            p.epoch,
            p.age_ms,
            opt(p.pending),
            opt(p.unacked)
        );
    }
    out
}
