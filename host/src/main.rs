//! `squall`: see `squall --help` and the crate docs of `squall_host`.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use clap::Parser;

// The executors free on one thread what another allocated, batch after
// batch; mimalloc handles that pattern well (see docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    small_thread_heaps();
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

/// Turns transparent huge pages off for this process, unless
/// `MIMALLOC_ALLOW_THP` is set (then mimalloc's own option decides).
///
/// mimalloc advises huge pages on its 1 GiB arenas, and every thread's first
/// small allocations then fault in a whole zeroed 2 MiB page. A topology runs
/// a thread per task, so with huge pages a topology of many tasks holds
/// several times the memory it uses and spends seconds of kernel time
/// faulting it in, at the same throughput (docs/performance.md, "Memory").
fn small_thread_heaps() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and touches no
    // memory of ours; it sets a flag the kernel reads when it faults pages in.
    // A kernel that does not know it returns an error, and then nothing changes.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
