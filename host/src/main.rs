//! `squall`: see `squall --help` and the crate docs of `squall_host`.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use clap::Parser;

// The executors free on one thread what another allocated, batch after
// batch; mimalloc handles that pattern well (see docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = squall_host::cli::Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal, and never with NO_COLOR set (no-color.org).
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .init();
    squall_host::cli::run(args)
}
