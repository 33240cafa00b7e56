//! The `squall` command line: `run`, `validate`, `graph`, `inspect`, `new`,
//! `state`, `tap`, `test`, `top`.
//!
//! Every command returns `Result<(), Failure>`; [`exit::exit_code`] is the
//! one place that prints a failure and maps it to the exit code (see the
//! table in [`exit`]).

mod args;
pub mod exit;
mod graph;
mod group;
mod inspect;
mod new;
mod run;
pub mod signals;
mod state;
mod tap;
mod test;
mod top;
mod validate;

use std::process::ExitCode;

pub use args::{Args, Command, GraphFormat, GroupCommand, NewCommand, SetArgs};
pub use exit::{Failure, EXIT_CONFIG, EXIT_INTERRUPTED, EXIT_UNAVAILABLE};

use crate::config::{Diagnostics, Override};
use crate::runtime::StartError;
use crate::topology::{BindError, Topology};

/// Runs a parsed command line and returns the process exit code.
pub fn run(args: Args) -> ExitCode {
    // Every library is loaded from a private copy (see `plugin`); the folders
    // holding the copies go when the command ends, however it ends.
    let copies = crate::plugin::PrivateCopies::guard();
    let result = match args.command {
        Command::Run(a) => run::run(a),
        Command::Validate { topology, sets, print } => {
            validate::validate(&topology, &sets.sets, print)
        }
        Command::Graph { topology, sets, format } => graph::graph(&topology, &sets.sets, format),
        Command::Inspect { plugin } => inspect::inspect(&plugin),
        Command::New { what: NewCommand::Plugin(a) } => new::new_plugin(a),
        Command::State { what } => state::state(what),
        Command::Group { what: GroupCommand::Status { topology, sets, json } } => {
            group::status(&topology, &sets.sets, json)
        }
        Command::Tap(a) => tap::tap(a),
        Command::Test { topology, sets, junit, only } => {
            test::test(&topology, &sets.sets, junit.as_deref(), only.as_deref())
        }
        Command::Top { addr, token_file, tls_ca } => {
            top::top(addr, token_file.as_deref(), tls_ca.as_deref())
        }
    };
    drop(copies);
    exit::exit_code(result)
}

/// Loads and validates a topology file, with `sets` applied; with errors,
/// also those the plugins find in what is intact.
fn load_config(
    path: &std::path::Path,
    sets: &[Override],
) -> Result<crate::config::TopologyConfig, Failure> {
    crate::config::load_partial(path, sets)
        .map_err(|(diags, config)| with_plugin_checks(diags, config.as_deref()))
}

/// The namespace of partition `k` of a group whose `[state]` namespace is
/// `namespace`: each partition's state and positions live apart, so a
/// host that takes the partition restores exactly its part.
pub fn partition_namespace(namespace: &str, k: u32) -> String {
    format!("{namespace}.p{k}")
}

/// The file's own errors `diags`, and, when the file could be read
/// (`config`), the errors the plugins find in what is intact: a field
/// mistake is not hidden behind a structural one. An error at a place the
/// file's checks already reported is left out (it follows from that one);
/// a library that cannot be loaded adds nothing (it is reported once the
/// file is fixed).
pub(super) fn with_plugin_checks(
    mut diags: Diagnostics,
    config: Option<&crate::config::TopologyConfig>,
) -> Failure {
    let Some(config) = config else { return Failure::Config(diags) };
    if let Err(BindError::Config(found)) = crate::topology::bind(config) {
        let known: std::collections::HashSet<(std::path::PathBuf, crate::config::Loc)> =
            diags.items.iter().map(|d| (d.file.clone(), d.loc)).collect();
        let new = found.items.into_iter().filter(|d| !known.contains(&(d.file.clone(), d.loc)));
        diags.items.extend(new);
        diags.sort();
    }
    Failure::Config(diags)
}

/// Binds a validated topology to its plugins.
fn bind(config: &crate::config::TopologyConfig) -> Result<Topology, Failure> {
    crate::topology::bind(config).map_err(|e| match e {
        BindError::Config(d) => Failure::Config(d),
        BindError::Load(errors) => Failure::Load(errors),
    })
}

/// Builds every instance; a constructor (or wait strategy) that rejects its
/// config is a config error at the component's file:line:col.
fn instantiate(topology: &Topology) -> Result<crate::runtime::Instances, Failure> {
    let limit = std::time::Duration::from_secs(topology.settings.startup_timeout_secs);
    crate::runtime::instantiate_within(topology, limit).map_err(|e| match e {
        StartError::Constructor { config: true, loc, .. } | StartError::Grouping { loc, .. } => {
            let mut d = Diagnostics::new();
            d.push_at(&topology.sources, loc, e.to_string(), None);
            Failure::Config(d)
        }
        other => Failure::Start(other),
    })
}
