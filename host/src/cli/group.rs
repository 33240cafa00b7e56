//! `squall run` of a topology with `[group]`: this process joins the group
//! through its coordinator plugin and runs one instance of the topology per
//! partition assigned to it (see `group`); and `squall group status`, which
//! asks the coordinator.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use squall_plugin_api::abi::{ComponentKind, CoordinatorBox};

use super::args::RunArgs;
use super::signals::Signals;
use super::Failure;
use crate::config::{Diagnostics, GroupDecl, Override, TopologyConfig};
use crate::group::{Counters, Member, PartitionError, Partitions, Settings};
use crate::http::group::{BoundGroup, GroupEndpoint, GroupView};
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
    fn start(&self, k: u32, fence: Arc<Fence>) -> Result<RunningTopology, PartitionError> {
        // One line in the log: the first diagnostic of a bind.
        let one_line = |f: Failure| match f {
            Failure::Config(mut d) => {
                d.items.truncate(1);
                PartitionError::Config(d)
            }
            Failure::Load(errors) => PartitionError::Load(errors),
            Failure::Start(e) => PartitionError::Start(e),
            other => PartitionError::Other(format!("{other:?}")),
        };
        let config = crate::config::load_partition(&self.path, &self.sets, k)
            .map_err(PartitionError::Config)?;
        let mut topology = super::bind(&config).map_err(one_line)?;
        if let Some(plan) = topology.state.as_mut() {
            plan.namespace = super::partition_namespace(&plan.namespace, k);
        }
        let instances = super::instantiate(&topology).map_err(one_line)?;
        crate::runtime::start_fenced(topology, instances, fence).map_err(PartitionError::Start)
    }
}

/// Each partition's spouts of the coordinator's own plugin, for its config
/// (`spouts`): `[[{ component, config }, ...], ...]`, one list per partition.
fn partition_spouts(
    topology: &std::path::Path,
    sets: &[Override],
    group: &GroupDecl,
) -> Result<toml::Value, Failure> {
    let mut all = Vec::new();
    for k in 0..group.partitions {
        let config = crate::config::load_partition(topology, sets, k).map_err(Failure::Config)?;
        let spouts = config
            .spouts
            .iter()
            .filter(|s| s.decl.component.alias == group.coordinator.alias)
            .map(|s| {
                let mut t = toml::Table::new();
                t.insert("component".into(), s.decl.component.component.clone().into());
                t.insert("config".into(), s.decl.config.clone().into());
                toml::Value::Table(t)
            })
            .collect();
        all.push(toml::Value::Array(spouts));
    }
    Ok(toml::Value::Array(all))
}

/// Builds the group's coordinator: its plugin's constructor, given the
/// coordinator's keys of `[group]`, the group's `name` and each partition's
/// spouts of the same plugin (`spouts`). A config the coordinator refuses
/// is an error at `[group]`.
fn coordinator(
    config: &TopologyConfig,
    group: &GroupDecl,
    sets: &[Override],
) -> Result<CoordinatorBox, Failure> {
    let reference = &group.coordinator;
    let named = format!("{}::{}", reference.alias, reference.component);
    let decl = config.plugins.iter().find(|p| p.alias == reference.alias).ok_or_else(|| {
        Failure::Group(format!("group {}: no plugin alias {:?}", group.name, reference.alias))
    })?;
    let options = crate::plugin::LoadOptions {
        allow_writable: decl.allow_writable || config.settings.allow_writable_plugins,
    };
    let library =
        crate::plugin::load_library_with(&decl.alias, &decl.path, decl.sha256.as_deref(), options)
            .map_err(|e| Failure::Load(vec![e]))?;
    let descriptor = library
        .descriptor(&reference.component, ComponentKind::COORDINATOR)
        .ok_or_else(|| Failure::Group(format!("{named} is not a group coordinator")))?;
    let mut table: toml::Table = group.config.parse().unwrap_or_default();
    table.insert("name".into(), group.name.clone().into());
    table.insert("spouts".into(), partition_spouts(&config.file, sets, group)?);
    let text = toml::to_string(&table).unwrap_or_default();
    let refused = |message: String| {
        let mut d = Diagnostics::new();
        d.push_at(
            &config.sources,
            group.loc,
            format!("{named} refused its config: {message}"),
            None,
        );
        Failure::Config(d)
    };
    match descriptor.factory.build(&text) {
        Ok(crate::plugin::Instance::Coordinator(c)) => Ok(c),
        Ok(_) => Err(Failure::Group(format!("{named} is not a group coordinator"))),
        Err(e) => Err(refused(e.message.to_string())),
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
    let coordinator = coordinator(config, &group, &sets)?;
    let http = bind_http(args, config)?;
    if args.watch {
        tracing::warn!("group {}: --watch is ignored by a group member", group.name);
    }
    let settings = member_settings(&group)?;
    let partitions = Arc::new(FilePartitions { path: args.topology.clone(), sets });
    let deadline = args.duration.map(|d| Instant::now() + d);
    let member = Member::start(settings, coordinator, partitions)
        .map_err(|e| Failure::Group(e.to_string()))?;
    let ready = Arc::new(AtomicBool::new(true));
    let endpoint = http.and_then(|http| serve_http(http, config, &member, &ready, &group.name));
    tracing::info!(
        "running in group {}; SIGINT (Ctrl-C) or SIGTERM checkpoints and releases every \
         partition, a second one exits at once",
        group.name
    );
    let reason = wait_for_stop(signals, deadline, &member);
    tracing::info!("{reason}: leaving group {}", group.name);
    ready.store(false, std::sync::atomic::Ordering::SeqCst);
    let counters = member.counters().clone();
    member.leave();
    if let Some(endpoint) = endpoint {
        endpoint.stop();
    }
    print_counters(&group.name, &counters);
    Ok(())
}

/// The group's HTTP endpoint, bound but not yet serving, with its access
/// rules: `None` without an address (`--http` or `[settings] http`).
fn bind_http(
    args: &RunArgs,
    config: &TopologyConfig,
) -> Result<Option<(BoundGroup, crate::http::Access)>, Failure> {
    let Some(addr) = args.http.or(config.settings.http) else {
        return Ok(None);
    };
    let options = &config.settings.http_options;
    let access = crate::http::access_from(options, args.http_token_file.as_deref(), addr)
        .map_err(Failure::http_config)?;
    let bound = BoundGroup::bind(addr)
        .map_err(|e| Failure::Bind(crate::http::BindError { addr, message: e.to_string() }))?;
    Ok(Some((bound, access)))
}

/// The member's settings from `[group]`: its name, partition count and
/// host id (`host_id`, else this machine's), checked to be a valid id.
fn member_settings(group: &GroupDecl) -> Result<Settings, Failure> {
    let host_id = group.host_id.clone().unwrap_or_else(crate::group::default_host_id);
    if !crate::config::group::host_id_ok(&host_id) {
        return Err(Failure::Group(format!(
            "host id {host_id:?} is not valid: letters, digits, '_', '-' and '=' (--host-id)"
        )));
    }
    Ok(Settings { name: group.name.clone(), partitions: group.partitions, host_id })
}

/// Starts serving the member's status on the bound endpoint; an endpoint
/// that cannot start is logged and the member runs without it.
fn serve_http(
    (bound, access): (BoundGroup, crate::http::Access),
    config: &TopologyConfig,
    member: &Member,
    ready: &Arc<AtomicBool>,
    name: &str,
) -> Option<GroupEndpoint> {
    let view = GroupView {
        status: member.status_cell(),
        counters: member.counters().clone(),
        ready: ready.clone(),
    };
    let limits = crate::http::limits_from(&config.settings.http_options);
    match bound.serve(access, limits, view) {
        Ok(endpoint) => Some(endpoint),
        Err(e) => {
            tracing::error!("group {name}: the HTTP endpoint cannot start: {e}");
            None
        }
    }
}

/// Waits, polling every 50 ms, for a stop signal, the deadline or the
/// member's end, and says which came first.
fn wait_for_stop(signals: &Signals, deadline: Option<Instant>, member: &Member) -> &'static str {
    loop {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(signal) = signals.stop_requested() {
            return signal;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return "duration reached";
        }
        if member.is_finished() {
            return "the group member stopped";
        }
    }
}

/// Prints the member's partition counts on leaving, on stderr.
fn print_counters(name: &str, counters: &Counters) {
    use std::sync::atomic::Ordering::Relaxed;
    eprintln!(
        "group {}: taken {}, of which taken over {}, released {}, lost {}, start failures {}",
        name,
        counters.taken.load(Relaxed),
        counters.takeovers.load(Relaxed),
        counters.released.load(Relaxed),
        counters.lost.load(Relaxed),
        counters.start_failures.load(Relaxed),
    );
}

/// `squall group status TOPOLOGY.toml`: the group as its coordinator
/// reads it, without joining: one JSON document (`--json`), or its tables
/// as text.
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
    drop(super::bind(&config)?);
    let mut coordinator = coordinator(&config, &group, sets)?;
    let text = coordinator.status().into_result().map_err(|e| Failure::Group(e.message.into()))?;
    let report: serde_json::Value = serde_json::from_str(text.as_str()).map_err(|e| {
        Failure::Group(format!("group {}: the coordinator's status is not JSON: {e}", group.name))
    })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

/// A status document as text: its plain fields on one line, then each list
/// of objects as a table whose columns are the objects' fields.
fn render(report: &serde_json::Value) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let Some(fields) = report.as_object() else {
        let _ = writeln!(out, "{report}");
        return out;
    };
    let plain: Vec<String> = fields
        .iter()
        .filter(|(_, v)| !v.is_array() && !v.is_object())
        .map(|(k, v)| format!("{k} {}", cell(v)))
        .collect();
    let _ = writeln!(out, "{}", plain.join(", "));
    for (name, value) in fields {
        if let Some(rows) = value.as_array().filter(|r| r.iter().all(serde_json::Value::is_object))
        {
            render_table(&mut out, name, rows);
        }
    }
    out
}

/// One value as a table cell: `-` for null or an empty list, a list's
/// items joined by commas, a string without its quotes.
fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "-".to_owned(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) if items.is_empty() => "-".to_owned(),
        serde_json::Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}

/// Appends a list of objects as a table under its name: the first object's
/// fields are the columns, upper-cased in the header, each padded to its
/// widest cell.
fn render_table(out: &mut String, name: &str, rows: &[serde_json::Value]) {
    use std::fmt::Write as _;
    let columns: Vec<&String> =
        rows.first().and_then(|r| r.as_object()).map(|r| r.keys().collect()).unwrap_or_default();
    let table: Vec<Vec<String>> =
        rows.iter().map(|r| columns.iter().map(|c| cell(&r[c.as_str()])).collect()).collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| table.iter().map(|r| r[i].len()).chain([c.len()]).max().unwrap_or(0))
        .collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> =
            cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        padded.join("  ").trim_end().to_owned()
    };
    let _ = writeln!(out, "\n{name}");
    let _ = writeln!(out, "{}", line(columns.iter().map(|c| c.to_uppercase()).collect()));
    for row in table {
        let _ = writeln!(out, "{}", line(row));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_document_renders_as_tables_of_its_lists() {
        let report = serde_json::json!({
            "group": "g",
            "members": [{"host": "h0", "partitions": []}],
            "partitions": [{"partition": 0, "owner": null}],
        });
        let text = render(&report);
        assert!(text.starts_with("group g\n"), "{text}");
        assert!(text.contains("\nmembers\nHOST  PARTITIONS\nh0    -\n"), "{text}");
        assert!(
            text.contains("\npartitions\nOWNER  PARTITION\n-      0\n")
                || text.contains("\npartitions\nPARTITION  OWNER\n0          -\n"),
            "{text}"
        );
    }
}
