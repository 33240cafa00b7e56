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
        /// Override one key of the topology (repeatable).
        #[command(flatten)]
        sets: SetArgs,
        /// Print the effective topology (after includes and --set) as TOML on
        /// stdout; the validation summary then goes to stderr.
        #[arg(long)]
        print: bool,
    },
    /// Print the topology's graph (Graphviz DOT or JSON) without loading any plugin.
    Graph {
        /// The topology file.
        topology: PathBuf,
        /// Override one key of the topology (repeatable).
        #[command(flatten)]
        sets: SetArgs,
        /// Output format.
        #[arg(long, value_enum, default_value = "dot")]
        format: GraphFormat,
    },
    /// Print a plugin library's catalogue: components, streams, config keys, expected inputs.
    Inspect {
        /// The plugin library (.so).
        plugin: PathBuf,
    },
    /// Write a new project from a template.
    New {
        /// What to create.
        #[command(subcommand)]
        what: NewCommand,
    },
    /// A topology's committed durable state: list, show or delete it.
    State {
        /// What to do.
        #[command(subcommand)]
        what: super::state::StateCommand,
    },
    /// A group of hosts sharing a topology's partitions, read from its
    /// broker without joining it.
    Group {
        /// What to do.
        #[command(subcommand)]
        what: GroupCommand,
    },
    /// Print sampled tuples flowing out of or into a component of a running topology (--http).
    Tap(super::tap::TapArgs),
    /// Run the topology's [[tests]] in process on simulated time; exit 1 if any fails.
    Test {
        /// The topology file (or a file that includes it and adds [[tests]]).
        topology: PathBuf,
        /// Override one key of the topology (repeatable).
        #[command(flatten)]
        sets: SetArgs,
        /// Also write the results as JUnit XML to FILE.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// Run only the tests whose name contains TEXT.
        #[arg(long, value_name = "TEXT")]
        only: Option<String>,
    },
    /// A live terminal dashboard of a topology run with --http (q quits).
    Top {
        /// The --http address of `squall run`: PORT (loopback) or HOST:PORT.
        #[arg(value_name = "ADDR", value_parser = crate::http::parse_addr)]
        addr: std::net::SocketAddr,
        /// A file holding a bearer token (read or control scope) to send.
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
        /// Connect over HTTPS, trusting the PEM certificate(s) in FILE (the
        /// endpoint's certificate or its CA).
        #[arg(long, value_name = "FILE")]
        tls_ca: Option<PathBuf>,
    },
}

/// `--set KEY=VALUE`, repeatable: overrides applied after the includes
/// (see `docs/topology.md`).
#[derive(Debug, Default, clap::Args)]
pub struct SetArgs {
    /// Override one key: a dotted key and a TOML value (a bare word is a
    /// string), e.g. --set topology.max_spout_pending=1000. Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<crate::config::Override>,
}

/// What `squall group` does.
#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// Every host in the topology's group with its heartbeat and the
    /// partitions it holds, then each partition's lease (owner, epoch,
    /// when it was last renewed) and the lag of its JetStream consumers.
    Status {
        /// The topology file (its `[group]` names the group and broker).
        topology: PathBuf,
        /// Override one key of the topology (repeatable).
        #[command(flatten)]
        sets: SetArgs,
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
}

/// What `squall graph` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormat {
    /// Graphviz DOT, for `dot -Tsvg`.
    Dot,
    /// The same information as JSON.
    Json,
}

/// What `squall new` creates.
#[derive(Debug, Subcommand)]
pub enum NewCommand {
    /// A plugin crate: a spout and a bolt with tests, a topology that runs
    /// them, and a README.
    Plugin(super::new::NewPluginArgs),
}

/// Arguments of `squall run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The topology file.
    pub topology: PathBuf,
    /// Override one key of the topology (repeatable).
    #[command(flatten)]
    pub sets: SetArgs,
    /// Stop (gracefully) after this long, e.g. 10s, 500ms, 2m.
    #[arg(long, value_parser = parse_run_duration)]
    pub duration: Option<Duration>,
    /// Print a stats table this often (0s = never).
    #[arg(long, value_parser = parse_stats_interval, default_value = "5s")]
    pub stats_interval: Duration,
    /// Write the end-of-run summary as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Serve metrics, the REST API and the live page on this address:
    /// PORT (loopback) or HOST:PORT. Off by default.
    #[arg(long, value_name = "ADDR", value_parser = crate::http::parse_addr)]
    pub http: Option<std::net::SocketAddr>,
    /// A file holding the bearer token of the `control` scope (which grants
    /// `read` too); overrides `token_file` of `[topology.http]`. Needed to
    /// bind anything but loopback.
    #[arg(long, value_name = "FILE")]
    pub http_token_file: Option<PathBuf>,
    /// Reload live when the topology file or a plugin library it names
    /// changes (SIGHUP and `POST /api/v1/reload` reload too, always).
    #[arg(long)]
    pub watch: bool,
    /// Join this group of hosts sharing the topology's partitions (sets
    /// `group.name`; the topology needs a `[group]` table with `partitions`).
    #[arg(long, value_name = "NAME")]
    pub group: Option<String>,
    /// This host's id in its group (sets `group.host_id`; default: the host
    /// name and the process id).
    #[arg(long, value_name = "ID")]
    pub host_id: Option<String>,
}

impl RunArgs {
    /// The `--set` overrides, then `--group` and `--host-id` as overrides of
    /// `group.name` and `group.host_id`.
    pub fn all_sets(&self) -> Vec<crate::config::Override> {
        let mut sets = self.sets.sets.clone();
        let flags = [("group.name", &self.group), ("group.host_id", &self.host_id)];
        for (key, value) in flags {
            if let Some(value) = value {
                let quoted = serde_json::to_string(value).unwrap_or_default();
                if let Ok(set) = format!("{key}={quoted}").parse() {
                    sets.push(set);
                }
            }
        }
        sets
    }
}

/// The longest `--duration`: 366 days. Longer runs have no `--duration` and
/// end with Ctrl-C.
pub const MAX_RUN_DURATION: Duration = Duration::from_secs(366 * 86_400);
/// The longest `--stats-interval`: one day.
pub const MAX_STATS_INTERVAL: Duration = Duration::from_secs(86_400);

/// Why a duration argument is refused; clap turns it into a usage error
/// (exit 2).
#[derive(Debug, thiserror::Error)]
enum DurationArgError {
    /// Not a humantime duration.
    #[error("{0}")]
    Parse(#[from] humantime::DurationError),
    /// Longer than the option allows.
    #[error("must be at most {0}")]
    TooLong(&'static str),
}

/// A humantime duration of at most `max` (`max_text` in words).
fn bounded_duration(
    text: &str,
    max: Duration,
    max_text: &'static str,
) -> Result<Duration, DurationArgError> {
    let d = humantime::parse_duration(text)?;
    if d > max {
        return Err(DurationArgError::TooLong(max_text));
    }
    Ok(d)
}

/// `--duration`: at most [`MAX_RUN_DURATION`].
fn parse_run_duration(text: &str) -> Result<Duration, DurationArgError> {
    bounded_duration(text, MAX_RUN_DURATION, "366 days (omit --duration to run until Ctrl-C)")
}

/// `--stats-interval`: at most [`MAX_STATS_INTERVAL`].
fn parse_stats_interval(text: &str) -> Result<Duration, DurationArgError> {
    bounded_duration(text, MAX_STATS_INTERVAL, "1 day")
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("squall").chain(args.iter().copied()))
    }

    #[test]
    fn a_huge_duration_is_a_usage_error() {
        for huge in ["9223372036854775807s", "367days", "18446744073709551615s"] {
            let e = parse(&["run", "t.toml", "--duration", huge]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{huge}: {e}");
        }
        let e = parse(&["run", "t.toml", "--stats-interval", "2days"]).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
    }

    #[test]
    fn set_needs_a_key_and_an_equals_sign() {
        for bad in ["topology.name", "=1", " =1"] {
            let e = parse(&["validate", "t.toml", "--set", bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}: {e}");
        }
        let Args { command: Command::Validate { sets, print, .. } } =
            parse(&["validate", "t.toml", "--set", "a.b=1=2", "--set", "c=", "--print"]).unwrap()
        else {
            panic!("not a validate command")
        };
        let pairs: Vec<(&str, &str)> = sets.sets.iter().map(|s| (s.key(), s.value())).collect();
        assert_eq!(pairs, [("a.b", "1=2"), ("c", "")]);
        assert!(print);
    }

    #[test]
    fn graph_takes_a_format() {
        let Args { command: Command::Graph { format, .. } } =
            parse(&["graph", "t.toml", "--format", "json"]).unwrap()
        else {
            panic!("not a graph command")
        };
        assert_eq!(format, GraphFormat::Json);
        assert_eq!(parse(&["graph", "t.toml", "--format", "png"]).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn durations_within_bounds_are_accepted() {
        let Args { command: Command::Run(run) } =
            parse(&["run", "t.toml", "--duration", "366days", "--stats-interval", "1day"]).unwrap()
        else {
            panic!("not a run command")
        };
        assert_eq!(run.duration, Some(MAX_RUN_DURATION));
        assert_eq!(run.stats_interval, MAX_STATS_INTERVAL);
    }
}
