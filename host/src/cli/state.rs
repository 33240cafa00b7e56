//! `squall state ls|show|rm TOPOLOGY.toml`: a topology's committed durable
//! state, read from (or deleted in) its `[state]` backend without running it.

use std::io::{BufRead as _, Write as _};
use std::path::Path;

use super::Failure;
use crate::config::Override;
use crate::state::{codec, Backend};

/// What `squall state` does.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum StateCommand {
    /// List the committed state: the last checkpoint, then each scope
    /// (`component/store`) with its record count.
    Ls(StateTarget),
    /// Print every record of one scope (`component/store`), one
    /// `key = value` line each (values as JSON where they are).
    Show {
        #[command(flatten)]
        target: StateTarget,
        /// The scope, as `squall state ls` lists it.
        scope: String,
    },
    /// Delete the topology's whole committed state (asks first).
    Rm {
        #[command(flatten)]
        target: StateTarget,
        /// Do not ask.
        #[arg(long)]
        yes: bool,
    },
}

/// The topology whose state is meant.
#[derive(Debug, Clone, clap::Args)]
pub struct StateTarget {
    /// The topology file (its `[state]` names the backend).
    pub topology: std::path::PathBuf,
    /// Override one key of the topology (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<Override>,
    /// The partition, for a topology with `[group]` (each partition has
    /// its own namespace, `NAMESPACE.pK`).
    #[arg(long, value_name = "K")]
    pub partition: Option<u32>,
}

/// The line `squall state` prints for a topology on the `memory` backend.
pub const MEMORY_LINE: &str = "[state] backend = \"memory\": checkpoints live in the running \
                               squall process only, so there is nothing to list, show or delete \
                               outside it (GET /api/v1/topology shows a running one's)";

/// The topology's backend, opened; `None` for `memory`, which keeps
/// nothing outside the process that runs the topology.
fn open(target: &StateTarget) -> Result<Option<Backend>, Failure> {
    let config = super::load_config(&target.topology, &target.sets)?;
    let (config, partition) = match (&config.group, target.partition) {
        (None, None) => (config, None),
        (Some(g), Some(k)) if k < g.partitions => {
            let config = crate::config::load_partition(&target.topology, &target.sets, k)
                .map_err(Failure::Config)?;
            (config, Some(k))
        }
        (Some(g), _) => {
            return Err(Failure::Other(anyhow::anyhow!(
                "{}: the topology is group {:?}'s, with {} partitions: name one with \
                 --partition K (0 to {})",
                target.topology.display(),
                g.name,
                g.partitions,
                g.partitions - 1
            )))
        }
        (None, Some(_)) => {
            return Err(Failure::Other(anyhow::anyhow!(
                "{}: the topology has no [group] table, so it has no partitions",
                target.topology.display()
            )))
        }
    };
    let mut topology = super::bind(&config)?;
    if let (Some(plan), Some(k)) = (topology.state.as_mut(), partition) {
        plan.namespace = super::partition_namespace(&plan.namespace, k);
    }
    let Some(plan) = &topology.state else {
        return Err(Failure::Other(anyhow::anyhow!(
            "{}: the topology has no [state] table, so it keeps no durable state",
            target.topology.display()
        )));
    };
    if matches!(plan.backend, crate::topology::BackendPlan::Memory) {
        return Ok(None);
    }
    let mut backend = Backend::build(&plan.backend).map_err(state_error)?;
    backend.open(&plan.namespace).map_err(state_error)?;
    Ok(Some(backend))
}

fn state_error(e: crate::state::StateError) -> Failure {
    Failure::Start(crate::runtime::StartError::State(e))
}

/// Runs one `squall state` command.
pub fn state(command: StateCommand) -> Result<(), Failure> {
    match command {
        StateCommand::Ls(target) => ls(&target),
        StateCommand::Show { target, scope } => show(&target, &scope),
        StateCommand::Rm { target, yes } => rm(&target.topology, &target, yes),
    }
}

fn ls(target: &StateTarget) -> Result<(), Failure> {
    let Some(mut backend) = open(target)? else { return print(&format!("{MEMORY_LINE}\n")) };
    let last = backend.last_committed().map_err(state_error)?;
    let mut out = String::new();
    match last {
        Some(n) => out.push_str(&format!("last committed checkpoint: {n}\n")),
        None => out.push_str("no checkpoint committed\n"),
    }
    for scope in backend.scopes().map_err(state_error)? {
        let records = backend.load(&scope).map_err(state_error)?;
        out.push_str(&format!("{scope}\t{} records\n", records.len()));
    }
    backend.close();
    print(&out)
}

fn show(target: &StateTarget, scope: &str) -> Result<(), Failure> {
    let Some(mut backend) = open(target)? else { return print(&format!("{MEMORY_LINE}\n")) };
    let mut records = backend.load(scope).map_err(state_error)?;
    backend.close();
    if records.is_empty() {
        return Err(Failure::Other(anyhow::anyhow!(
            "no committed records in scope {scope:?} (squall state ls lists the scopes)"
        )));
    }
    let mut lines: Vec<(String, String)> = records
        .drain(..)
        .map(|r| {
            let value = r.value.as_ref().map_or_else(String::new, |v| codec::show_value(v));
            (codec::show_key(&r.key), value)
        })
        .collect();
    lines.sort();
    let mut out = String::new();
    for (key, value) in lines {
        out.push_str(&format!("{key} = {value}\n"));
    }
    print(&out)
}

fn rm(path: &Path, target: &StateTarget, yes: bool) -> Result<(), Failure> {
    let Some(mut backend) = open(target)? else { return print(&format!("{MEMORY_LINE}\n")) };
    if !yes {
        eprint!(
            "delete every committed checkpoint of {} in {}? [y/N] ",
            path.display(),
            backend.name()
        );
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return Err(Failure::Other(anyhow::anyhow!("nothing deleted")));
        }
    }
    backend.clear().map_err(state_error)?;
    backend.close();
    print(&format!("deleted the committed state of {}\n", path.display()))
}

fn print(text: &str) -> Result<(), Failure> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
