//! End-to-end tests: build the real host and plugins, run the real `squall`
//! binary on topologies written into a temporary directory, and check what it
//! printed, the exit code, the `--json` summary and the files the testkit
//! components wrote.
//!
//! Every run is under a watchdog (`util::SquallCommand`), so a hang fails its
//! test instead of stalling CI. The first test to need a binary builds the host
//! and the plugins once, into the target directory of this test binary.
//!
//! ```text
//! cargo test -p squall-tests --release -- --test-threads=2
//! ```

// The harness: build once, Workspace, SquallCommand, RecordBolt reports.
mod util;

// `squall run`: exact word counts, two libraries at once, groupings, named
// streams, tick tuples, lifecycle order, a plugin wait strategy, Ctrl-C.
mod run;

// The plugin loader's error matrix, `squall inspect`, side-by-side copies of
// one library, and swapping a rebuilt `.so` between two runs.
mod loading;

// `squall validate`: every error with file:line:col, did-you-mean, exit 78,
// environment interpolation.
mod validate;

// Composed topologies: include, --set, validate --print; errors at the
// file:line:col of an included file.
mod compose;

// `squall graph`: DOT rendered by Graphviz, and JSON.
mod graph;

// Panicking plugins: rebuilt under the restart policy, or the topology stops.
mod faults;

// At-least-once delivery under chaos (fails, timeouts, panics) with the
// ReplaySpout's log; no ackers; a bolt that never acks.
mod acking;

// A slow bolt slows the spout: nothing dropped, memory plateaus.
mod backpressure;

// Memory bounds: a default byte budget per bolt queue; memory_budget_mib
// counts what a task costs (1,000 tasks).
mod memory;

// Ctrl-C mid-run: every emitted message is acked or failed before `close`.
mod drain;

// SIGTERM drains, a second stop signal exits with 130, SIGHUP keeps
// running; no colour in piped logs; `inspect | head` exits quietly.
mod signals;

// `--http`: every route, its errors, steering, drain, port in use, promtool.
mod http;

// The control surface: cross-site, DNS rebinding, tokens and scopes, a
// public bind without a control token.
mod security;

// Hostile clients: 500 slow or idle ones and a stalled body, the connection
// and body limits, running out of file descriptors.
mod hostile;

// HTTPS with rustls: certificate files, reloaded on SIGHUP.
mod tls;

// The running server against its OpenAPI document, with schemathesis.
mod openapi;

// `squall tap`: exact fields of a known input, the asked sampling rate, a
// stalled client that loses samples while the topology completes.
mod tap;

// `squall test`: [[tests]] on the real plugins and simulated time, diffs,
// exit 1, JUnit XML, config errors at their file:line:col.
mod topology_test;

// The live page in headless Chromium: names, a growing count, deactivate.
mod browser;

// `squall top` under tmux: the live table, the window key, an endpoint that
// goes away or is not there yet, quitting with the terminal restored.
mod top;

// Contract 1.0 plugins (built from git history) run in this host; 1.1
// plugins log through it and export user metrics.
mod compat;

// Throttled spouts and bolt inputs hold their rate over a run, in both modes,
// in tuples/s and bytes/s; Ctrl-C cuts a long throttled wait short.
mod throttle;

// Issue 14's hostile inputs: a pin under a rename loop, FIFOs, devices and
// symlink loops as plugins, bare names for inspect, writable libraries, huge
// numbers and hostile names.
mod hardening;

// Issue 42's control plane: token and TLS files that are FIFOs, devices or
// huge; reloads waiting while the other control actions answer; thousands
// of unknown `from` names.
mod control_plane;

// The file connectors: LineSpout resumes from its checkpoint after kill -9
// with no line skipped, follows a file across rotation and truncation, and
// JsonLinesSink writes every tuple; bad config exits 78 at file:line:col.
mod files;
// Live reload: bolts swapped while a reliable spout runs, state handed over,
// every id acked once, a refused change and a rolled back prepare.
mod reload;

// Reload as one transaction (issue 20): one library holding the spout and
// the bolts rebuilt while running, a windowed bolt downstream, a reload
// that is only partly applied.
mod reload_tx;
// The NATS JetStream connector against the real server: no loss under chaos,
// a killed host, SIGTERM and a cut connection; config errors.
mod nats;
// The Redis Streams connector against the local server: no loss under chaos
// and a restart, a host killed (-9) among three, SIGTERM's flushed acks, a
// cut connection, bad config.
mod redis;
// The RabbitMQ connector (issue 24's fourth broker) against the local
// server: exact round trip, a cut connection, poison to the dead letters.
mod rabbitmq;
// The Kafka connector against the local broker (Tansu): exact counts and
// committed offsets end to end, poison to the dead-letter topic, bad input.
mod kafka;

// Groups coordinated by Kafka's consumer group protocol (kafka::KafkaGroup):
// three hosts, one killed with -9, one added; exact counts, no overlap.
mod kafka_group;
// KafkaPublish exactly once: a Kafka transaction per checkpoint, visible to
// read_committed only after the commit, each record once after kills, and
// fencing of a second instance with the same transactional id.
mod kafka_tx;
// Nexmark from Kafka: the generator's events pre-loaded into a topic
// (load-kafka.toml), q0 reads them back through Decode: exactly the bids.
mod nexmark_kafka;
// The broker faults of issue 24 against real servers: Redis restarted with
// its stream lost, NATS stopped for 10 s, poison input for each connector,
// the file checkpoint while every line fails.
mod broker_faults;
// `squall new plugin`: the generated crate builds, passes its unit and
// in-process tests, and runs; existing folders and bad names are refused.
mod new_plugin;

// Operator chains: a local_or_shuffle line runs each task index on one
// thread (thread names, summary, API, graph); chain = false opts out.
mod chain;

// Windowed bolts: count tumbling and time sliding windows with acking on:
// every message acked exactly once, the windows' shapes as configured.
mod windows;

// Plugin authoring (contract 1.1): outputs declared from config
// (examples::Project's fields checked downstream at file:line:col, upstream
// by check_inputs, in inspect and in a run); every shipped library declares
// its config keys.
mod authoring;

// Durable state (issue 21) in the embedded store and against the real Redis
// and PostgreSQL: counts exact after kills and a rescale; a second squall on
// one embedded store refused; `squall state`.
mod state;
// Groups (issue 22): hosts sharing 8 partitions through leases in JetStream
// KV; a kill, a join, a zombie woken past its lease, a rolling restart.
mod group;
// The exactly-once PostgreSQL sink (issue 21): each row once after kills,
// with the Redis and the PostgreSQL state backend; no [state]; bad columns.
mod sink;
