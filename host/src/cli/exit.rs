//! The one exit-code boundary: every failure of a command is a [`Failure`],
//! and [`Failure::exit_code`] is the only place that maps failures to codes.
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | success |
//! | 1 | the topology failed while running, or an unexpected I/O error |
//! | 2 | usage error (clap) |
//! | 69 | `EX_UNAVAILABLE`: a plugin library could not be loaded, a constructor failed or panicked, the `--http` address cannot be bound, or a group's lease broker cannot be reached |
//! | 78 | `EX_CONFIG`: the topology file is invalid, including a component or wait strategy rejecting its `config`; or the `--http` access settings are (an unreadable token, a non-loopback address without a control token) |
//! | 130 | a second SIGINT or SIGTERM ended the process at once |

use std::process::ExitCode;

use crate::config::Diagnostics;
use crate::control::RunError;
use crate::plugin::LoadError;
use crate::runtime::StartError;

/// `EX_CONFIG` from sysexits.h.
pub const EXIT_CONFIG: u8 = 78;
/// `EX_UNAVAILABLE` from sysexits.h.
pub const EXIT_UNAVAILABLE: u8 = 69;
/// A second SIGINT or SIGTERM: 128 + SIGINT, as shells report an interrupt.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Why a command failed.
#[derive(Debug)]
pub enum Failure {
    /// The topology file is invalid (every error, with file:line:col).
    Config(Diagnostics),
    /// Plugin libraries could not be loaded.
    Load(Vec<LoadError>),
    /// The topology could not start (a constructor failed, panicked or blocked).
    Start(StartError),
    /// The HTTP endpoint could not be bound (`--http`).
    Bind(crate::http::BindError),
    /// The HTTP endpoint's access settings are unusable: a token that
    /// cannot be read, or a non-loopback address with no control token.
    HttpConfig(String),
    /// The topology failed while running.
    Run(RunError),
    /// A group member could not join: its lease broker cannot be reached.
    Group(String),
    /// Anything else (I/O on an output file, ...).
    Other(anyhow::Error),
}

impl Failure {
    /// An unusable HTTP setting (a token, a TLS file, an address), as the
    /// one line it prints.
    pub fn http_config(e: impl std::fmt::Display) -> Self {
        Failure::HttpConfig(e.to_string())
    }

    /// The process exit code for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Config(_) | Failure::HttpConfig(_) => EXIT_CONFIG,
            Failure::Load(_) | Failure::Start(_) | Failure::Bind(_) | Failure::Group(_) => {
                EXIT_UNAVAILABLE
            }
            Failure::Run(_) | Failure::Other(_) => 1,
        }
    }

    /// Prints the failure on stderr.
    pub fn print(&self) {
        match self {
            Failure::Config(d) => eprintln!("{d}"),
            Failure::Load(errors) => {
                for e in errors {
                    eprintln!("error: {e}");
                }
            }
            Failure::Start(e) => eprintln!("error: {e}"),
            Failure::Bind(e) => eprintln!("error: {e}"),
            Failure::HttpConfig(e) => eprintln!("error: {e}"),
            Failure::Run(e) => eprintln!("error: {e}"),
            Failure::Group(e) => eprintln!("error: {e}"),
            Failure::Other(e) => eprintln!("error: {e:#}"),
        }
    }
}

impl From<RunError> for Failure {
    fn from(e: RunError) -> Self {
        Failure::Run(e)
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Other(e)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Other(e.into())
    }
}

/// Prints `result`'s failure, if any, and returns the process exit code.
pub fn exit_code(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            f.print();
            ExitCode::from(f.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_class_has_its_documented_code() {
        let run = RunError::ThreadDied { thread: "t".into(), cause: "c".into() };
        assert_eq!(Failure::Config(Diagnostics::new()).exit_code(), 78);
        assert_eq!(Failure::Load(Vec::new()).exit_code(), 69);
        let blocked = StartError::Blocked { component: "x".into(), secs: 1 };
        assert_eq!(Failure::Start(blocked).exit_code(), 69);
        assert_eq!(Failure::Run(run).exit_code(), 1);
        assert_eq!(Failure::Other(anyhow::anyhow!("io")).exit_code(), 1);
    }
}
