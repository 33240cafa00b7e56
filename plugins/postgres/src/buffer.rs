//! The sink's staging buffer: a durable store (contract 1.2) of rows that
//! are executed but not yet written to PostgreSQL.
//!
//! Rows arrive into the *open* batch. At checkpoint `n`'s barrier the open
//! batch is sealed as batch `n`, and the store reports it, so the batch is
//! in checkpoint `n` and commits atomically with the rest of the state.
//! Once `committed(k)` says `k` committed, every batch numbered `k` or less
//! is durable and may be written; after it was, it leaves the store (a
//! change of the next checkpoint).
//!
//! Batches are grouped by *generation*: a random number each sink instance
//! draws when it is built. One store entry per generation (key: the
//! generation) holds its unwritten batches in order, so a restore with any
//! parallelism gives a generation's batches to one task, in order, and the
//! progress table needs one row per generation: the last checkpoint of it
//! that was written. A batch is written only if its number is above that
//! row's, in the same transaction that raises it (see `sink.rs`).
//! Generations, not task indexes, keep sinks apart across restarts:
//! checkpoint numbers start again at 1 after `squall state rm` or with the
//! `memory` backend, and a new generation's batches can never be mistaken
//! for an old one's.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use abi_stable::std_types::RVec;
use serde::{Deserialize, Serialize};
use squall_plugin_api::state::StateStore;
use squall_plugin_api::{Result, StateEntry, Value};

use crate::render::Unwritable;

/// The store's name (its scope is `COMPONENT/staged`).
pub(crate) const STORE: &str = "staged";

/// Rows sealed at one checkpoint's barrier, as `COPY` text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Batch {
    /// The checkpoint whose barrier sealed it.
    pub checkpoint: u64,
    /// How many rows `text` holds.
    pub rows: u64,
    /// The rows, one `COPY` text line each.
    pub text: String,
}

/// One generation's unwritten batches, as the store entry holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
struct Entry {
    /// The index of the task that drew the generation (for the progress
    /// table; informative only).
    task: u32,
    batches: VecDeque<Batch>,
    /// A live swap's handover only: rows executed since the last barrier.
    #[serde(default)]
    open: String,
    #[serde(default)]
    open_rows: u64,
}

/// [`Entry`], borrowed, to encode.
#[derive(Serialize)]
struct EntryRef<'a> {
    task: u32,
    batches: &'a VecDeque<Batch>,
    #[serde(skip_serializing_if = "str::is_empty")]
    open: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    open_rows: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A batch due to be written: its generation, the drawing task, the batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Due<'a> {
    pub generation: i64,
    pub task: u32,
    pub batch: &'a Batch,
}

/// The staging buffer (see the module docs).
#[derive(Debug)]
pub(crate) struct Buffer {
    generation: i64,
    task: u32,
    /// Rows since the last barrier, as `COPY` text.
    open: String,
    open_rows: u64,
    /// Sealed, unwritten batches by generation (this instance's and those
    /// restored or handed over); a generation with none is absent.
    sealed: BTreeMap<i64, (u32, VecDeque<Batch>)>,
    /// Generations whose entry changed since the last checkpoint.
    dirty: BTreeSet<i64>,
}

fn key(generation: i64) -> RVec<Value> {
    RVec::from(vec![Value::I64(generation)])
}

fn generation_of(key: &[Value]) -> Result<i64> {
    match key {
        [Value::I64(g)] => Ok(*g),
        _ => Err(format!("store {STORE:?}: an entry keyed {key:?}, not by a generation").into()),
    }
}

impl Buffer {
    /// An empty buffer drawing `generation`, for task index `task`.
    pub(crate) fn new(generation: i64, task: u32) -> Self {
        Self {
            generation,
            task,
            open: String::with_capacity(1 << 16),
            open_rows: 0,
            sealed: BTreeMap::new(),
            dirty: BTreeSet::new(),
        }
    }

    /// This instance's generation.
    pub(crate) fn generation(&self) -> i64 {
        self.generation
    }

    /// Draws this instance's generation again (at `prepare`, before any
    /// row is staged under it).
    pub(crate) fn set_generation(&mut self, generation: i64) {
        debug_assert!(self.open_rows == 0 && !self.sealed.contains_key(&self.generation));
        self.generation = generation;
    }

    /// Sets the task index (known at `prepare`).
    pub(crate) fn set_task(&mut self, task: u32) {
        self.task = task;
    }

    /// Appends one row: `render` writes its text (without the newline) at
    /// the end of the open batch; when it fails, what it wrote is cut off.
    ///
    /// # Errors
    /// `render`'s.
    pub(crate) fn push(
        &mut self,
        render: impl FnOnce(&mut String) -> std::result::Result<(), Unwritable>,
    ) -> std::result::Result<(), Unwritable> {
        let start = self.open.len();
        match render(&mut self.open) {
            Ok(()) => {
                self.open.push('\n');
                self.open_rows += 1;
                Ok(())
            }
            Err(e) => {
                self.open.truncate(start);
                Err(e)
            }
        }
    }

    /// Rows executed since the last barrier.
    pub(crate) fn open_rows(&self) -> u64 {
        self.open_rows
    }

    /// Rows sealed and not yet written.
    pub(crate) fn sealed_rows(&self) -> u64 {
        self.sealed.values().flat_map(|(_, b)| b.iter()).map(|b| b.rows).sum()
    }

    /// Checkpoint `checkpoint`'s barrier: the open rows become its batch.
    pub(crate) fn seal(&mut self, checkpoint: u64) {
        if self.open_rows == 0 {
            return;
        }
        let capacity = self.open.capacity();
        let text = std::mem::replace(&mut self.open, String::with_capacity(capacity));
        let batch = Batch { checkpoint, rows: std::mem::take(&mut self.open_rows), text };
        let task = self.task;
        self.sealed
            .entry(self.generation)
            .or_insert_with(|| (task, VecDeque::new()))
            .1
            .push_back(batch);
        self.dirty.insert(self.generation);
    }

    /// The batches checkpoint `committed` covers (numbered `committed` or
    /// less), by generation and in order.
    pub(crate) fn due(&self, committed: u64) -> Vec<Due<'_>> {
        let mut out = Vec::new();
        for (&generation, (task, batches)) in &self.sealed {
            for batch in batches.iter().take_while(|b| b.checkpoint <= committed) {
                out.push(Due { generation, task: *task, batch });
            }
        }
        out
    }

    /// Forgets the batches [`due`](Self::due) returned for `committed`:
    /// they are written (or were already).
    pub(crate) fn written(&mut self, committed: u64) {
        let mut emptied = Vec::new();
        for (&generation, (_, batches)) in &mut self.sealed {
            let before = batches.len();
            while batches.front().is_some_and(|b| b.checkpoint <= committed) {
                batches.pop_front();
            }
            if batches.len() != before {
                self.dirty.insert(generation);
            }
            if batches.is_empty() {
                emptied.push(generation);
            }
        }
        for g in emptied {
            self.sealed.remove(&g);
        }
    }

    fn entry_bytes(&self, generation: i64, with_open: bool) -> Result<Option<RVec<u8>>> {
        static NONE: VecDeque<Batch> = VecDeque::new();
        let (task, batches) = match self.sealed.get(&generation) {
            Some((task, batches)) => (*task, batches),
            None => (self.task, &NONE),
        };
        let own_open = with_open && generation == self.generation;
        let (open, open_rows) =
            if own_open { (self.open.as_str(), self.open_rows) } else { ("", 0) };
        if batches.is_empty() && open_rows == 0 {
            return Ok(None);
        }
        let entry = EntryRef { task, batches, open, open_rows };
        serde_json::to_vec(&entry)
            .map(|v| Some(RVec::from(v)))
            .map_err(|e| format!("store {STORE:?}: cannot encode: {e}").into())
    }
}

impl StateStore for Buffer {
    fn name(&self) -> &str {
        STORE
    }

    fn take_changes(
        &mut self,
        changes: &mut RVec<StateEntry>,
        removed: &mut RVec<RVec<Value>>,
    ) -> Result<()> {
        for generation in std::mem::take(&mut self.dirty) {
            match self.entry_bytes(generation, false)? {
                Some(bytes) => changes.push(StateEntry { key: key(generation), bytes }),
                None => removed.push(key(generation)),
            }
        }
        Ok(())
    }

    fn restore(&mut self, entry: &StateEntry, changed: bool) -> Result<()> {
        let generation = generation_of(&entry.key)?;
        let got: Entry = serde_json::from_slice(&entry.bytes)
            .map_err(|e| format!("store {STORE:?}: cannot decode an entry: {e}"))?;
        // Rows a predecessor executed after its last barrier: they belong
        // to this instance's next batch.
        self.open.push_str(&got.open);
        self.open_rows += got.open_rows;
        if !got.batches.is_empty() {
            let slot = self.sealed.entry(generation).or_insert_with(|| (got.task, VecDeque::new()));
            slot.1.extend(got.batches);
            slot.1.make_contiguous().sort_by_key(|b| b.checkpoint);
        }
        if changed {
            self.dirty.insert(generation);
        }
        Ok(())
    }

    fn restore_removed(&mut self, key: &[Value]) {
        if let Ok(generation) = generation_of(key) {
            self.sealed.remove(&generation);
            self.dirty.insert(generation);
        }
    }

    fn export(
        &self,
        out: &mut Vec<(StateEntry, bool)>,
        removed: &mut Vec<RVec<Value>>,
    ) -> Result<()> {
        let mut generations: BTreeSet<i64> = self.sealed.keys().copied().collect();
        generations.insert(self.generation);
        for generation in generations {
            let open = generation == self.generation && self.open_rows > 0;
            match self.entry_bytes(generation, true)? {
                Some(bytes) => out.push((
                    StateEntry { key: key(generation), bytes },
                    open || self.dirty.contains(&generation),
                )),
                None if self.dirty.contains(&generation) => removed.push(key(generation)),
                None => {}
            }
        }
        for &generation in &self.dirty {
            if !self.sealed.contains_key(&generation) && generation != self.generation {
                removed.push(key(generation));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use squall_plugin_api::state::Stores;

    use super::*;

    fn rows(b: &mut Buffer, items: &[&str]) {
        for item in items {
            b.push(|s| {
                s.push_str(item);
                Ok(())
            })
            .unwrap();
        }
    }

    fn texts(due: &[Due<'_>]) -> Vec<(i64, u64, String)> {
        due.iter().map(|d| (d.generation, d.batch.checkpoint, d.batch.text.clone())).collect()
    }

    /// What a checkpoint at `n` records: the barrier seals, the host reads.
    fn checkpoint(b: &mut Buffer, n: u64) -> Vec<squall_plugin_api::abi::StoreDelta> {
        b.seal(n);
        Stores::none().with(b).take_changes().unwrap().into_vec()
    }

    #[test]
    fn a_batch_is_due_only_once_its_checkpoint_committed_and_rows_after_the_barrier_wait() {
        let mut b = Buffer::new(7, 0);
        rows(&mut b, &["a", "b"]);
        let d1 = checkpoint(&mut b, 1);
        assert_eq!(d1.len(), 1);
        assert_eq!(d1[0].entries.len(), 1, "one entry: the generation");
        rows(&mut b, &["c"]); // after barrier 1: batch 2's
        assert!(b.due(0).is_empty());
        assert_eq!(texts(&b.due(1)), [(7, 1, "a\nb\n".to_owned())]);
        // Barrier 2 came before committed(1) reached the task: batch 2 is
        // sealed but not due at 1.
        let _ = checkpoint(&mut b, 2);
        assert_eq!(texts(&b.due(1)), [(7, 1, "a\nb\n".to_owned())]);
        b.written(1);
        assert_eq!(texts(&b.due(2)), [(7, 2, "c\n".to_owned())]);
        b.written(2);
        assert!(b.due(u64::MAX).is_empty());
        let d3 = checkpoint(&mut b, 3);
        assert_eq!(d3[0].removed.as_slice(), &[key(7)], "all written: the entry goes");
        assert!(checkpoint(&mut b, 4).is_empty(), "nothing changed since");
    }

    #[test]
    fn a_restore_hands_back_unwritten_batches_under_their_own_generation() {
        let mut old = Buffer::new(11, 1);
        rows(&mut old, &["x"]);
        let _ = checkpoint(&mut old, 5);
        rows(&mut old, &["y"]);
        let d = checkpoint(&mut old, 6);
        // Crash: checkpoint 6 committed, nothing written. A new instance
        // (another generation) restores it.
        let mut new = Buffer::new(12, 0);
        Stores::none().with(&mut new).restore(&d).unwrap();
        assert_eq!(new.generation(), 12);
        assert_eq!(texts(&new.due(6)), [(11, 5, "x\n".into()), (11, 6, "y\n".into())]);
        assert_eq!(new.due(6)[0].task, 1, "the task that drew it");
        // New rows go to the new generation.
        rows(&mut new, &["z"]);
        new.seal(7);
        assert_eq!(texts(&new.due(7)).last().unwrap(), &(12, 7, "z\n".to_owned()));
        assert_eq!(new.sealed_rows(), 3);
        new.written(7);
        let d = Stores::none().with(&mut new).take_changes().unwrap();
        let mut gone: Vec<_> = d[0].removed.iter().cloned().collect();
        gone.sort_by_key(|k| format!("{k:?}"));
        assert_eq!(gone.len(), 2, "both generations' entries are deleted: {gone:?}");
    }

    #[test]
    fn restored_entries_are_clean_until_written() {
        let mut old = Buffer::new(3, 0);
        rows(&mut old, &["r"]);
        let d = checkpoint(&mut old, 1);
        let mut new = Buffer::new(4, 0);
        Stores::none().with(&mut new).restore(&d).unwrap();
        assert!(Stores::none().with(&mut new).take_changes().unwrap().is_empty());
    }

    #[test]
    fn a_live_swap_hands_over_sealed_batches_and_the_open_rows() {
        let mut old = Buffer::new(21, 0);
        rows(&mut old, &["a"]);
        let _ = checkpoint(&mut old, 1);
        rows(&mut old, &["b", "c"]);
        let saved = Stores::none().with(&mut old).save().unwrap();
        let mut new = Buffer::new(22, 0);
        Stores::none().with(&mut new).restore_saved(&saved).unwrap();
        assert_eq!(new.open_rows(), 2);
        assert_eq!(texts(&new.due(1)), [(21, 1, "a\n".into())]);
        new.seal(2);
        assert_eq!(texts(&new.due(2))[1], (22, 2, "b\nc\n".to_owned()));
    }

    #[test]
    fn a_failed_render_leaves_no_trace() {
        let mut b = Buffer::new(1, 0);
        rows(&mut b, &["ok"]);
        let e = b.push(|s| {
            s.push_str("half");
            Err(Unwritable::Nul)
        });
        assert!(e.is_err());
        assert_eq!(b.open_rows(), 1);
        b.seal(1);
        assert_eq!(texts(&b.due(1)), [(1, 1, "ok\n".into())]);
    }
}
