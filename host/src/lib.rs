//! The squall host: reads a topology from TOML, loads its spouts, bolts and
//! wait strategies from stable-ABI plugin libraries, and runs them under
//! Storm 2.x's executor semantics, acker, message timeouts and throttler.
//!
//! # Overview
//! The pipeline, one typed stage per arrow:
//! 1. [`config::load`] — TOML → [`config::TopologyConfig`], every error at
//!    once with file:line:col.
//! 2. [`topology::bind`] — loads the [`plugin`] libraries and resolves
//!    components, streams and fields → [`topology::Topology`].
//! 3. [`runtime::instantiate`] — calls every constructor.
//! 4. [`runtime::start`] — spawns the [`executor`] threads (spout and bolt
//!    loops), the [`acker`] tasks and the system thread →
//!    [`runtime::RunningTopology`].
//! 5. [`runtime::RunningTopology::shutdown`] — the graceful drain.
//!
//! With `[group]`, [`group::Member`] runs one such topology per partition
//! its coordinator plugin assigns to this host, in a group of hosts
//! (docs/scaling.md).
//!
//! Pure cores, free of threads and clocks: [`acker::ledger`],
//! [`timeout::RotatingMap`], [`throttle`]'s period and smooth modes,
//! and [`wait::progressive`].

#![warn(missing_docs)]

pub mod acker;
pub mod cancel;
pub mod cli;
pub mod clock;
pub mod config;
pub mod control;
pub mod executor;
pub mod files;
pub mod group;
pub mod harness;
pub mod http;
pub mod ids;
pub mod metrics;
pub mod plugin;
pub mod queue;
pub mod runtime;
pub mod state;
pub mod tap;
pub mod throttle;
pub mod timeout;
pub mod topology;
pub mod wait;
