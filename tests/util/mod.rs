//! The harness: build the real host and plugins once, give each test its own
//! directory, run the `squall` binary under a watchdog and read what it left.
//!
//! - [`squall_bin`] and [`plugin_path`] build (once per test process) and find
//!   the artifacts, in whatever target directory this test binary lives in.
//! - [`Workspace`] is a fresh temporary directory per test; topologies written
//!   into it get the plugin paths filled in.
//! - [`SquallCommand`] runs `squall` with a hard time limit and returns an
//!   [`Output`] (exit status, stdout, stderr, the `--json` summary); or starts
//!   it in the background as a [`Running`] child that can be interrupted.

mod build;
mod command;
mod logs;
mod proxy;
mod servers;
mod services;

pub use build::*;
pub use command::*;
pub use logs::*;
pub use proxy::*;
pub use servers::*;
pub use services::*;

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn the_watchdog_kills_a_run_that_outlives_its_limit() {
        let ws = Workspace::new("watchdog");
        let topology = ws.write_topology(
            "idle.toml",
            r#"
[plugins]
testkit = "{testkit}"

[spouts.source]
component = "testkit::EmptySpout"

[bolts.sink]
component = "testkit::NullBolt"
inputs = [{ from = "source" }]
"#,
        );
        // No --duration: it would run forever.
        let mut cmd = SquallCommand::run_until_interrupted(&ws, &topology);
        cmd.limit(Duration::from_secs(2));
        let started = Instant::now();
        let panic = std::panic::catch_unwind(|| cmd.output()).expect_err("the watchdog fires");
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(message.contains("killed by the watchdog"), "{message}");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    }

    #[test]
    fn replay_log_tallies_ids_and_spots_replays_without_a_fail() {
        let log = ReplayLog::parse("ok", "emit 0\nemit 1\nfail 1\nack 0\nemit 1\nack 1\nclose\n");
        assert_eq!((log.emits(), log.acks(), log.fails()), (3, 2, 1));
        assert_eq!(log.closes(), [6]);
        let tally = log.tally();
        assert_eq!(
            tally[&1],
            IdTally { emits: 2, acks: 1, fails: 1, last: Some(ReplayEvent::Ack(1)) }
        );
        assert_eq!(log.replay_without_fail(), None);
        // The second emit of 1 comes after a fail of 0, not of 1.
        let bad = ReplayLog::parse("bad", "emit 0\nemit 1\nfail 0\nemit 1\n");
        assert_eq!(bad.replay_without_fail(), Some((1, 4)));
        assert!(bad.history(1).contains("line 4: Emit(1)"), "{}", bad.history(1));
        let malformed = std::panic::catch_unwind(|| ReplayLog::parse("m", "emit x\n"));
        assert!(malformed.is_err());
    }

    #[test]
    fn tail_keeps_the_last_lines_and_says_how_many_it_skipped() {
        assert_eq!(tail("a\nb\nc\n", 2), "[... 1 earlier lines ...]\nb\nc\n");
        assert_eq!(tail("a\n", 5), "a\n");
    }

    #[test]
    fn latest_row_reads_one_complete_row_of_the_latest_table() {
        let stderr = "component emitted acked\nsource 5 1\nsink 0 0\n\
                      component emitted acked\nsource 12 7\nsource 10";
        // The last line has no newline yet: it may be cut short, so the row
        // before it is the latest.
        assert_eq!(latest_row(stderr, "source", &["acked", "emitted"]), Some(vec![7, 12]));
        assert_eq!(latest_stat(stderr, "sink", "emitted"), Some(0));
        assert_eq!(latest_row(stderr, "source", &["emitted", "queued"]), None);
        assert_eq!(latest_stat(stderr, "other", "emitted"), None);
    }

    #[test]
    fn loc_of_counts_lines_and_characters_from_one() {
        assert_eq!(loc_of("a\nbé \"x\"", "\"x\""), (2, 4));
        assert_eq!(loc_of("key", "key"), (1, 1));
    }
}
