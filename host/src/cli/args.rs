//! Command-line arguments.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// squall: a Storm-style stream processor whose spouts, bolts and wait
/// strategies are plugins loaded at run time.
#[derive(Debug, Parser)]
#[command(name = "squall", version, about)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a topology until Ctrl-C or --duration, then drain it gracefully.
    Run(RunArgs),
    /// Load the plugins and check the whole topology without running it.
    Validate {
        /// The topology file.
        topology: PathBuf,
    },
    /// Print a plugin library's catalogue.
    Inspect {
        /// The plugin library (.so).
        plugin: PathBuf,
    },
    /// A live terminal dashboard of a topology run with --http (q quits).
    Top {
        /// The --http address of `squall run`: PORT (loopback) or HOST:PORT.
        #[arg(value_name = "ADDR", value_parser = crate::http::parse_addr)]
        addr: std::net::SocketAddr,
    },
}

/// Arguments of `squall run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The topology file.
    pub topology: PathBuf,
    /// Stop (gracefully) after this long, e.g. 10s, 500ms, 2m.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Print a stats table this often (0s = never).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s")]
    pub stats_interval: Duration,
    /// Write the end-of-run summary as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Serve metrics, the REST API and the live page on this address:
    /// PORT (loopback) or HOST:PORT. Off by default.
    #[arg(long, value_name = "ADDR", value_parser = crate::http::parse_addr)]
    pub http: Option<std::net::SocketAddr>,
}
