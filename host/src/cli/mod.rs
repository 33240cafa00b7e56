//! The `squall` command line: `run`, `validate`, `inspect`.
//!
//! Exit codes: 0 success; 1 the topology failed while running; 2 usage
//! error (clap); 69 (`EX_UNAVAILABLE`) a plugin library could not be loaded
//! or a constructor panicked; 78 (`EX_CONFIG`) the topology file is invalid,
//! including a component whose constructor rejects its `config`; 130 a
//! second Ctrl-C ended the process at once.

mod args;
mod inspect;
mod run;
mod validate;

use std::process::ExitCode;

pub use args::{Args, Command};

use crate::config::Diagnostics;
use crate::topology::{BindError, Topology};

/// `EX_CONFIG` from sysexits.h.
pub const EXIT_CONFIG: u8 = 78;
/// `EX_UNAVAILABLE` from sysexits.h.
pub const EXIT_UNAVAILABLE: u8 = 69;

/// Runs a parsed command line.
///
/// # Errors
/// Unexpected failures (IO on the JSON summary, ...); expected failures are
/// printed and mapped to an exit code here.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Run(a) => run::run(a),
        Command::Validate { topology } => validate::validate(&topology),
        Command::Inspect { plugin } => inspect::inspect(&plugin),
    }
}

/// Loads, validates and binds a topology file, printing errors.
fn load(path: &std::path::Path) -> Result<Topology, ExitCode> {
    let config = crate::config::load(path).map_err(|d| print_config_errors(&d))?;
    crate::topology::bind(&config).map_err(|e| match e {
        BindError::Config(d) => print_config_errors(&d),
        BindError::Load(errors) => {
            for e in errors {
                eprintln!("error: {e}");
            }
            ExitCode::from(EXIT_UNAVAILABLE)
        }
    })
}

/// Builds every instance; a constructor that rejects its config is a
/// config error (file:line:col, exit 78), any other failure exits 69.
fn instantiate(topology: &Topology) -> Result<crate::runtime::Instances, ExitCode> {
    let limit = std::time::Duration::from_secs(topology.settings.startup_timeout_secs);
    crate::runtime::instantiate_within(topology, limit).map_err(|e| match e {
        crate::runtime::StartError::Constructor { config: true, loc, .. } => {
            let mut d = Diagnostics::new();
            d.push(&topology.file, loc, e.to_string(), None);
            print_config_errors(&d)
        }
        other => {
            eprintln!("error: {other}");
            ExitCode::from(EXIT_UNAVAILABLE)
        }
    })
}

fn print_config_errors(d: &Diagnostics) -> ExitCode {
    eprintln!("{d}");
    ExitCode::from(EXIT_CONFIG)
}
