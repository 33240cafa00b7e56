//! The restore at start: the last committed checkpoint, repartitioned over
//! the topology as it is now.

use std::collections::HashMap;
use std::time::Instant;

use abi_stable::std_types::{ROption, RVec};
use squall_plugin_api::abi::StoreDelta;
use squall_plugin_api::{State, StateEntry, Value};

use super::codec::{self, RecordError, RecordKey};
use super::{Backend, StateCause, StateError, POSITION_SCOPE, WINDOW_STORE};
use crate::topology::grouping::key_index;
use crate::topology::{Kind, Topology};

/// What a restore hands each task, and what it found.
#[derive(Debug, Default)]
pub struct Restored {
    /// The checkpoint restored (`None`: nothing was committed).
    pub checkpoint: Option<u64>,
    /// Each bolt task's stores, by task id.
    pub bolts: HashMap<u32, Vec<StoreDelta>>,
    /// Each spout task's position, by task id.
    pub spouts: HashMap<u32, State>,
    /// Each windowed bolt task's buffered tuples, by task id.
    pub windows: HashMap<u32, super::WindowRestore>,
    /// Keys and per-task values restored.
    pub records: u64,
    /// Scopes of components the topology no longer has (left in the backend).
    pub orphans: Vec<String>,
    /// How long it took.
    pub secs: f64,
}

/// Reads the last committed checkpoint of `topology`'s namespace and splits
/// it over the tasks: a keyed entry to the task its fields grouping routes
/// the key to ([`key_index`], as a live resize does), a per-task value from
/// old task index `i` to task index `i % parallelism`, a spout's position to
/// the task of the same index.
///
/// # Errors
/// The backend's, or records this host did not write.
pub fn load(topology: &Topology, backend: &mut Backend) -> Result<Restored, StateError> {
    let started = Instant::now();
    let mut restored = Restored { checkpoint: backend.last_committed()?, ..Restored::default() };
    if restored.checkpoint.is_none() {
        return Ok(restored);
    }
    let name = backend.name().to_owned();
    let bad = |scope: &str, error: RecordError| StateError {
        backend: name.clone(),
        call: "load",
        cause: StateCause::Record { scope: scope.to_owned(), error },
    };
    let scopes = backend.scopes()?;
    for scope in scopes {
        let Some((c, store)) = scope_owner(topology, &scope) else {
            restored.orphans.push(scope);
            continue;
        };
        let records = backend.load(&scope)?;
        restored.records += records.len() as u64;
        if c.kind == Kind::Bolt && store == WINDOW_STORE {
            split_window(records, c.tasks.start, c.parallelism(), &mut restored.windows)
                .map_err(|e| bad(&scope, e))?;
            continue;
        }
        match (c.kind, store == POSITION_SCOPE) {
            (Kind::Spout, true) => {
                split_positions(records, c, &mut restored.spouts).map_err(|e| bad(&scope, e))?;
            }
            (Kind::Bolt, false) => {
                split_store(records, store, c, &mut restored.bolts).map_err(|e| bad(&scope, e))?;
            }
            _ => restored.orphans.push(scope),
        }
    }
    restored.secs = started.elapsed().as_secs_f64();
    Ok(restored)
}

/// The component a scope (`component/store`) belongs to, and the store's
/// name; `None` for a scope of a component the topology no longer has.
fn scope_owner<'a>(
    topology: &'a Topology,
    scope: &'a str,
) -> Option<(&'a crate::topology::Component, &'a str)> {
    let (component, store) = scope.split_once('/')?;
    let c = topology.components.iter().find(|c| c.name == component)?;
    Some((c, store))
}

/// A spout's positions, each old task index's to the task of the same
/// index; one of a task index the spout no longer has is dropped (logged).
///
/// # Errors
/// A record this host did not write.
fn split_positions(
    records: Vec<squall_plugin_api::abi::StateRecord>,
    c: &crate::topology::Component,
    spouts: &mut HashMap<u32, State>,
) -> Result<(), RecordError> {
    let n = c.parallelism();
    for r in records {
        let ROption::RSome(value) = r.value else { continue };
        let RecordKey::Task(index) = codec::record_key(&r.key)? else {
            return Err(RecordError::PositionKey);
        };
        if index >= n {
            tracing::warn!(
                "spout {:?} had a position for task index {index}; it has {n} tasks now, so \
                 that position is not restored",
                c.name
            );
            continue;
        }
        let state = codec::decode_state(&value)?;
        spouts.insert(c.tasks.start + index, state);
    }
    Ok(())
}

/// A bolt's store split over its tasks: a keyed entry to the task its
/// fields grouping routes the key to, a per-task value from old task index
/// `i` to task index `i % parallelism`.
///
/// # Errors
/// A record this host did not write.
fn split_store(
    records: Vec<squall_plugin_api::abi::StateRecord>,
    store: &str,
    c: &crate::topology::Component,
    bolts: &mut HashMap<u32, Vec<StoreDelta>>,
) -> Result<(), RecordError> {
    let n = c.parallelism();
    let mut shares: Vec<RVec<StateEntry>> = (0..n).map(|_| RVec::new()).collect();
    for r in records {
        let ROption::RSome(value) = r.value else { continue };
        let (to, key) = match codec::record_key(&r.key)? {
            RecordKey::Keyed(values) => (key_index(values.iter(), n as usize), RVec::from(values)),
            RecordKey::Task(index) => ((index % n) as usize, RVec::new()),
        };
        shares[to].push(StateEntry { key, bytes: value });
    }
    for (i, entries) in shares.into_iter().enumerate() {
        if entries.is_empty() {
            continue;
        }
        let delta = StoreDelta { store: store.into(), entries, removed: RVec::new() };
        bolts.entry(c.tasks.start + i as u32).or_default().push(delta);
    }
    Ok(())
}

/// A windowed bolt's buffered tuples and trigger states, each old task
/// index's going to task index `index % parallelism` (as per-task values).
///
/// # Errors
/// A record this host did not write.
fn split_window(
    records: Vec<squall_plugin_api::abi::StateRecord>,
    first_task: u32,
    n: u32,
    windows: &mut HashMap<u32, super::WindowRestore>,
) -> Result<(), RecordError> {
    for r in records {
        let ROption::RSome(value) = r.value else { continue };
        match codec::record_key(&r.key)? {
            RecordKey::Keyed(key) => {
                let (index, seq) = match key.as_slice() {
                    [Value::U64(index), Value::U64(seq)] => (*index, *seq),
                    _ => return Err(RecordError::WindowKey(format!("{key:?}"))),
                };
                let index = u32::try_from(index).map_err(|_| RecordError::TaskIndex)?;
                let entry = codec::decode_window_entry(&value)?;
                windows
                    .entry(first_task + index % n)
                    .or_default()
                    .entries
                    .push((index, seq, entry));
            }
            RecordKey::Task(index) => {
                let meta = codec::decode_window_meta(&value)?;
                windows.entry(first_task + index % n).or_default().metas.push((index, meta));
            }
        }
    }
    Ok(())
}
