//! Contract 1.2: durable state stores a bolt keeps, which the host
//! checkpoints into a state backend and restores after a crash.
//!
//! A bolt owns its stores as ordinary fields and lists them in
//! [`Bolt::stores`](crate::Bolt::stores). The stores live in the plugin's
//! memory: a read or an update is a hash-map operation, with no boundary
//! crossing. At each checkpoint the host asks for what changed since the
//! previous one (only those keys are written: checkpoints are incremental),
//! and at start it hands back what the last committed checkpoint holds for
//! the keys this task owns.
//!
//! - [`KeyValueState`] maps a key to a value. The key is the values of the
//!   fields the bolt's input is grouped by ([`Value`]; several fields as a
//!   [`Value::List`]), so the host can give each key to the task that the
//!   fields grouping routes it to, whatever the parallelism: a restart or a
//!   live resize with another task count repartitions the state.
//! - [`ValueState`] holds one small value per task. With another task count,
//!   old task `i`'s value goes to new task `i % n`, merged with the
//!   function given at construction when two land on one task.
//!
//! Values are typed through serde on the plugin side and cross the boundary
//! as JSON bytes (which also makes `squall state show` readable).

use std::hash::BuildHasherDefault;

use abi_stable::std_types::RVec;
use serde::{de::DeserializeOwned, Serialize};

pub use crate::abi::StoreKind;
use crate::abi::{StateEntry, StoreDelta};
use crate::{Result, State, Value};

use std::sync::atomic::{AtomicU64, Ordering};

/// The highest checkpoint number the host asked this library's components
/// about (a bolt's stores, a spout's position), and how many distinct ones.
static LATEST_CHECKPOINT: AtomicU64 = AtomicU64::new(0);
static CHECKPOINTS_SEEN: AtomicU64 = AtomicU64::new(0);

/// How many checkpoints may pass without reading a store before a write
/// to it warns that the store is not listed in `stores()`.
const UNREAD_CHECKPOINTS: u64 = 3;

/// The host asked a component of this library for checkpoint `n`.
pub(crate) fn checkpoint_seen(n: u64) {
    if LATEST_CHECKPOINT.fetch_max(n, Ordering::Relaxed) < n {
        CHECKPOINTS_SEEN.fetch_add(1, Ordering::Relaxed);
    }
}

fn checkpoints_seen() -> u64 {
    CHECKPOINTS_SEEN.load(Ordering::Relaxed)
}

/// Whether a store is read by the checkpoints: a store the host never
/// reads (not listed in `stores()`, or kept by a spout) warns once, at the
/// first write after [`UNREAD_CHECKPOINTS`] checkpoints went by without it.
#[derive(Debug)]
struct ReadBy {
    /// [`checkpoints_seen`] when the store was last read (or built).
    at: u64,
    warned: bool,
}

impl ReadBy {
    fn now() -> Self {
        Self { at: checkpoints_seen(), warned: false }
    }

    fn read(&mut self) {
        self.at = checkpoints_seen();
    }

    /// Called on a store's first change since it was last read.
    #[inline]
    fn check(&mut self, store: &str) {
        if !self.warned && checkpoints_seen() > self.at + UNREAD_CHECKPOINTS {
            self.warned = true;
            unread(store);
        }
    }
}

#[cold]
fn unread(store: &str) {
    crate::warn!(
        "store {store:?} was written, but the last {UNREAD_CHECKPOINTS} checkpoints did not read \
         it: its changes are not durable. List it in the bolt's stores() (a spout cannot keep \
         stores; it keeps a checkpoint position)"
    );
}

type FxMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<rustc_hash::FxHasher>>;

/// The format tag of a [`State`] that carries stores through a live swap
/// (see [`Stores::save`]).
pub const STORES_FORMAT: &str = "squall-stores/1";

/// One durable store, as the host drives it. Implemented by
/// [`KeyValueState`] and [`ValueState`]; a plugin can implement it for a
/// store of its own.
pub trait StateStore: Send {
    /// The store's name, unique within its bolt.
    fn name(&self) -> &str;
    /// What kind of store it is ([`StoreKind::OTHER`] unless the store
    /// says otherwise), checked against the bolt's
    /// [`STORES`](crate::Bolt::STORES) declaration.
    fn kind(&self) -> StoreKind {
        StoreKind::OTHER
    }
    /// Appends what changed since the previous call to `changes` (entries
    /// written) and `removed` (keys deleted), and forgets the changes.
    ///
    /// # Errors
    /// When a value cannot be encoded.
    fn take_changes(
        &mut self,
        changes: &mut RVec<StateEntry>,
        removed: &mut RVec<RVec<Value>>,
    ) -> Result<()>;
    /// Takes one entry back from a checkpoint or a predecessor, before
    /// `prepare`. `changed`: the entry was not yet checkpointed, so the next
    /// checkpoint writes it.
    ///
    /// # Errors
    /// When the bytes do not decode.
    fn restore(&mut self, entry: &StateEntry, changed: bool) -> Result<()>;
    /// Forgets a key that a predecessor deleted but had not checkpointed yet.
    fn restore_removed(&mut self, key: &[Value]);
    /// Gives back changes [`take_changes`](Self::take_changes) took, as
    /// not yet checkpointed: the checkpoint that took them failed (another
    /// store of the bolt could not encode a value), and the next one must
    /// write them. The default does nothing; a store of a plugin's own that
    /// forgets its changes in `take_changes` implements it.
    fn retake(&mut self, changes: &[StateEntry], removed: &[RVec<Value>]) {
        let _ = (changes, removed);
    }
    /// Appends every entry, each with whether it changed since the last
    /// checkpoint, and the keys removed since then (a live swap's handover).
    ///
    /// # Errors
    /// When a value cannot be encoded.
    fn export(
        &self,
        out: &mut Vec<(StateEntry, bool)>,
        removed: &mut Vec<RVec<Value>>,
    ) -> Result<()>;
}

/// One durable store as a bolt declares it in
/// [`Bolt::STORES`](crate::Bolt::STORES): its name and kind, known without
/// building the bolt, so that `squall inspect` lists it and `squall
/// validate` checks a keyed store's inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreSpec {
    /// The store's name, as the store itself gives it.
    pub name: &'static str,
    /// Its kind.
    pub kind: StoreKind,
}

impl StoreSpec {
    /// A [`KeyValueState`] called `name`.
    pub const fn keyed(name: &'static str) -> Self {
        Self { name, kind: StoreKind::KEYED }
    }

    /// A [`ValueState`] called `name`.
    pub const fn value(name: &'static str) -> Self {
        Self { name, kind: StoreKind::VALUE }
    }

    /// A store of the plugin's own called `name`.
    pub const fn other(name: &'static str) -> Self {
        Self { name, kind: StoreKind::OTHER }
    }
}

/// The stores a bolt keeps, as [`Bolt::stores`](crate::Bolt::stores)
/// returns them.
#[derive(Default)]
pub struct Stores<'a>(Vec<&'a mut dyn StateStore>);

impl std::fmt::Debug for Stores<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|s| s.name())).finish()
    }
}

impl<'a> Stores<'a> {
    /// No stores (a bolt without durable state).
    pub fn none() -> Self {
        Self(Vec::new())
    }

    /// Adds a store.
    #[must_use]
    pub fn with(mut self, store: &'a mut dyn StateStore) -> Self {
        self.0.push(store);
        self
    }

    /// True when the bolt keeps no store.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// What changed in every store since the previous checkpoint.
    ///
    /// # Errors
    /// When a value cannot be encoded.
    /// Takes everything or nothing: when a store fails, the stores before
    /// it get their changes back ([`StateStore::retake`]), so the next
    /// checkpoint writes them.
    ///
    /// # Errors
    /// When a value cannot be encoded (naming the store and the key), or
    /// two stores have one name.
    pub fn take_changes(&mut self) -> Result<RVec<StoreDelta>> {
        self.check_names()?;
        let mut out: RVec<StoreDelta> = RVec::new();
        for i in 0..self.0.len() {
            let (mut entries, mut removed) = (RVec::new(), RVec::new());
            if let Err(e) = self.0[i].take_changes(&mut entries, &mut removed) {
                for delta in &out {
                    if let Ok(store) = self.find(delta.store.as_str()) {
                        store.retake(&delta.entries, &delta.removed);
                    }
                }
                return Err(e);
            }
            if !entries.is_empty() || !removed.is_empty() {
                out.push(StoreDelta { store: self.0[i].name().into(), entries, removed });
            }
        }
        Ok(out)
    }

    /// Refuses two stores with one name: they would share one scope in
    /// the backend, and each would restore the other's entries.
    fn check_names(&self) -> Result<()> {
        for (i, a) in self.0.iter().enumerate() {
            if self.0[..i].iter().any(|b| b.name() == a.name()) {
                return Err(format!(
                    "two of its stores are called {:?}: each store needs a name of its own \
                     within the bolt (they would share one scope in the state backend)",
                    a.name()
                )
                .into());
            }
        }
        Ok(())
    }

    /// Refuses stores that differ from the bolt's declaration (when it
    /// declares them): `squall inspect` and `squall validate` trust the
    /// declaration, so a store it leaves out, or declares of another kind,
    /// is an error here. A declared store the bolt does not return is not
    /// (a bolt may keep a store only for some configs).
    ///
    /// # Errors
    /// The first difference, with what the declaration says.
    pub fn check_declared(&self, declared: Option<&[StoreSpec]>) -> Result<()> {
        let Some(declared) = declared else { return Ok(()) };
        let listed = || {
            let names: Vec<String> =
                declared.iter().map(|d| format!("{:?} ({})", d.name, d.kind.name())).collect();
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        };
        for store in &self.0 {
            match declared.iter().find(|d| d.name == store.name()) {
                None => {
                    return Err(format!(
                        "its stores() returns store {:?}, which its STORES does not declare \
                         (it declares: {}): add it to STORES, so that squall inspect and \
                         validate know it",
                        store.name(),
                        listed()
                    )
                    .into())
                }
                Some(d) if d.kind != store.kind() => {
                    return Err(format!(
                        "store {:?} is declared {} in STORES, but it is a {} store",
                        d.name,
                        d.kind.name(),
                        store.kind().name()
                    )
                    .into())
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Takes back what a checkpoint holds for this task's keys.
    ///
    /// # Errors
    /// A store the bolt does not keep, or bytes that do not decode.
    pub fn restore(&mut self, deltas: &[StoreDelta]) -> Result<()> {
        self.check_names()?;
        for delta in deltas {
            let store = self.find(delta.store.as_str())?;
            for entry in delta.entries.iter() {
                store.restore(entry, false)?;
            }
        }
        Ok(())
    }

    fn find(&mut self, name: &str) -> Result<&mut &'a mut dyn StateStore> {
        self.0
            .iter_mut()
            .find(|s| s.name() == name)
            .ok_or_else(|| format!("it keeps no store called {name:?}").into())
    }

    /// Every store as one [`State`] in [`STORES_FORMAT`], for the instance
    /// that replaces this one in a live swap (or a resize): keyed entries
    /// keep their keys, so a resize routes them like the fields grouping.
    ///
    /// # Errors
    /// When a value cannot be encoded.
    pub fn save(&self) -> Result<State> {
        let mut state = State::new(STORES_FORMAT);
        for store in &self.0 {
            let (mut entries, mut removed) = (Vec::new(), Vec::new());
            store.export(&mut entries, &mut removed)?;
            let name = store.name();
            for (entry, changed) in entries {
                let tag = if changed { HANDOVER_CHANGED } else { HANDOVER_CLEAN };
                state.entries.push(StateEntry {
                    key: entry.key,
                    bytes: handover_bytes(tag, name, &entry.bytes),
                });
            }
            for key in removed {
                state
                    .entries
                    .push(StateEntry { key, bytes: handover_bytes(HANDOVER_REMOVED, name, &[]) });
            }
        }
        Ok(state)
    }

    /// Takes over a predecessor's stores ([`save`](Self::save)'s state).
    ///
    /// # Errors
    /// Another format, a store this bolt does not keep, or bytes that do
    /// not decode.
    pub fn restore_saved(&mut self, state: &State) -> Result<()> {
        self.check_names()?;
        if state.format.as_str() != STORES_FORMAT {
            return Err(format!("expected state `{STORES_FORMAT}`, got `{}`", state.format).into());
        }
        for entry in state.entries.iter() {
            let (tag, name, bytes) = split_handover(&entry.bytes)?;
            let store = self.find(name)?;
            match tag {
                HANDOVER_REMOVED => store.restore_removed(&entry.key),
                tag => store.restore(
                    &StateEntry { key: entry.key.clone(), bytes: bytes.into() },
                    tag == HANDOVER_CHANGED,
                )?,
            }
        }
        Ok(())
    }
}

const HANDOVER_CLEAN: u8 = 0;
const HANDOVER_CHANGED: u8 = 1;
const HANDOVER_REMOVED: u8 = 2;

fn handover_bytes(tag: u8, store: &str, value: &[u8]) -> RVec<u8> {
    let mut out = Vec::with_capacity(2 + store.len() + value.len());
    out.push(tag);
    out.push(store.len() as u8);
    out.extend_from_slice(store.as_bytes());
    out.extend_from_slice(value);
    out.into()
}

fn split_handover(bytes: &[u8]) -> Result<(u8, &str, &[u8])> {
    let bad = || crate::Error::from("a handed-over store entry is truncated");
    let (&tag, rest) = bytes.split_first().ok_or_else(bad)?;
    let (&len, rest) = rest.split_first().ok_or_else(bad)?;
    if rest.len() < usize::from(len) {
        return Err(bad());
    }
    let (name, value) = rest.split_at(usize::from(len));
    let name = std::str::from_utf8(name).map_err(|_| bad())?;
    Ok((tag, name, value))
}

/// A value as JSON bytes. `key`: the key it is stored under (`None`: a
/// per-task value), for the message.
///
/// JSON has no NaN or infinity: serde_json writes them as `null`, which
/// does not decode back into a float. Bytes holding a `null` are decoded
/// once to be sure they come back, so such a value is refused here, by the
/// write that holds it, not at the next start.
fn encode<V: Serialize + DeserializeOwned>(
    store: &str,
    key: Option<&Value>,
    value: &V,
) -> Result<RVec<u8>> {
    let refuse = |why: String| -> crate::Error {
        match key {
            Some(key) => format!("store {store:?}, key {key}: cannot encode its value: {why}"),
            None => format!("store {store:?}: cannot encode its value: {why}"),
        }
        .into()
    };
    let bytes = serde_json::to_vec(value).map_err(|e| refuse(e.to_string()))?;
    if bytes.windows(4).any(|w| w == b"null") {
        if let Err(e) = serde_json::from_slice::<V>(&bytes) {
            return Err(refuse(format!(
                "it encodes as {} which does not decode back ({e}); JSON has no NaN or \
                 infinity, which become null",
                String::from_utf8_lossy(&bytes[..bytes.len().min(80)])
            )));
        }
    }
    Ok(bytes.into())
}

fn decode<V: DeserializeOwned>(store: &str, bytes: &[u8]) -> Result<V> {
    serde_json::from_slice(bytes)
        .map_err(|e| format!("store {store:?}: cannot decode a value: {e}").into())
}

struct Slot<V> {
    value: V,
    changed: bool,
}

/// A durable map from a key (the grouping fields' values) to a `V`.
///
/// Reads are plain hash-map reads. The first change of a key after a
/// checkpoint records the key once; the next checkpoint writes the keys
/// recorded, and nothing else.
pub struct KeyValueState<V> {
    name: String,
    map: FxMap<Value, Slot<V>>,
    /// Keys changed or removed since the last checkpoint (a key at most
    /// once while its slot says `changed`; removed keys are absent from `map`).
    touched: Vec<Value>,
    read_by: ReadBy,
}

impl<V> std::fmt::Debug for KeyValueState<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyValueState")
            .field("name", &self.name)
            .field("keys", &self.map.len())
            .field("touched", &self.touched.len())
            .finish()
    }
}

/// A key as the stores keep it: one value, or several as a list.
fn key_value(key: &[Value]) -> Value {
    match key {
        [one] => one.clone(),
        many => Value::List(many.to_vec().into()),
    }
}

fn key_fields(key: &Value) -> RVec<Value> {
    match key {
        Value::List(items) => items.clone(),
        one => RVec::from(vec![one.clone()]),
    }
}

impl<V: Serialize + DeserializeOwned + Send> KeyValueState<V> {
    /// An empty store called `name`.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            map: FxMap::default(),
            touched: Vec::new(),
            read_by: ReadBy::now(),
        }
    }

    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: &Value) -> Option<&V> {
        self.map.get(key).map(|s| &s.value)
    }

    /// The value of `key`, to change in place (recorded as changed).
    #[inline]
    pub fn get_mut(&mut self, key: &Value) -> Option<&mut V> {
        let slot = self.map.get_mut(key)?;
        if !slot.changed {
            slot.changed = true;
            self.touched.push(key.clone());
            self.read_by.check(&self.name);
        }
        Some(&mut slot.value)
    }

    /// The value of `key`, inserted with `V::default()` when absent, to
    /// change in place (recorded as changed).
    #[inline]
    pub fn entry(&mut self, key: &Value) -> &mut V
    where
        V: Default,
    {
        if !self.map.contains_key(key) {
            self.map.insert(key.clone(), Slot { value: V::default(), changed: false });
        }
        let slot = self.map.get_mut(key).expect("inserted above");
        if !slot.changed {
            slot.changed = true;
            self.touched.push(key.clone());
            self.read_by.check(&self.name);
        }
        &mut slot.value
    }

    /// Sets `key` to `value`.
    pub fn insert(&mut self, key: Value, value: V) {
        match self.map.get_mut(&key) {
            Some(slot) => {
                slot.value = value;
                if !slot.changed {
                    slot.changed = true;
                    self.touched.push(key);
                    self.read_by.check(&self.name);
                }
            }
            None => {
                self.touched.push(key.clone());
                self.read_by.check(&self.name);
                self.map.insert(key, Slot { value, changed: true });
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &Value) -> Option<V> {
        let slot = self.map.remove(key)?;
        if !slot.changed {
            self.touched.push(key.clone());
            self.read_by.check(&self.name);
        }
        Some(slot.value)
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when the store holds no key.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every key and its value, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&Value, &V)> {
        self.map.iter().map(|(k, s)| (k, &s.value))
    }
}

impl<V: Serialize + DeserializeOwned + Send> StateStore for KeyValueState<V> {
    fn kind(&self) -> StoreKind {
        StoreKind::KEYED
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn take_changes(
        &mut self,
        changes: &mut RVec<StateEntry>,
        removed: &mut RVec<RVec<Value>>,
    ) -> Result<()> {
        self.read_by.read();
        let (first, first_removed) = (changes.len(), removed.len());
        for key in &self.touched {
            match self.map.get_mut(key) {
                Some(slot) if slot.changed => match encode(&self.name, Some(key), &slot.value) {
                    Ok(bytes) => {
                        slot.changed = false;
                        changes.push(StateEntry { key: key_fields(key), bytes });
                    }
                    Err(e) => {
                        // Nothing taken: every key stays recorded.
                        for entry in changes.iter().skip(first) {
                            if let Some(slot) = self.map.get_mut(&key_value(&entry.key)) {
                                slot.changed = true;
                            }
                        }
                        changes.truncate(first);
                        removed.truncate(first_removed);
                        return Err(e);
                    }
                },
                // Recorded twice (removed, then inserted again): written once.
                Some(_) => {}
                None => removed.push(key_fields(key)),
            }
        }
        self.touched.clear();
        Ok(())
    }

    fn retake(&mut self, changes: &[StateEntry], removed: &[RVec<Value>]) {
        for entry in changes {
            let key = key_value(&entry.key);
            if let Some(slot) = self.map.get_mut(&key) {
                if !slot.changed {
                    slot.changed = true;
                    self.touched.push(key);
                }
            }
        }
        for key in removed {
            let key = key_value(key);
            if !self.map.contains_key(&key) {
                self.touched.push(key);
            }
        }
    }

    fn restore(&mut self, entry: &StateEntry, changed: bool) -> Result<()> {
        self.read_by.read();
        let value: V = decode(&self.name, &entry.bytes)?;
        let key = key_value(&entry.key);
        if changed {
            self.touched.push(key.clone());
        }
        self.map.insert(key, Slot { value, changed });
        Ok(())
    }

    fn restore_removed(&mut self, key: &[Value]) {
        let key = key_value(key);
        self.map.remove(&key);
        self.touched.push(key);
    }

    fn export(
        &self,
        out: &mut Vec<(StateEntry, bool)>,
        removed: &mut Vec<RVec<Value>>,
    ) -> Result<()> {
        out.reserve(self.map.len());
        for (key, slot) in &self.map {
            let bytes = encode(&self.name, Some(key), &slot.value)?;
            out.push((StateEntry { key: key_fields(key), bytes }, slot.changed));
        }
        removed.extend(self.touched.iter().filter(|k| !self.map.contains_key(*k)).map(key_fields));
        Ok(())
    }
}

/// A durable value per task, for small state (a running total, a
/// watermark). Changing it through [`get_mut`](Self::get_mut) or
/// [`set`](Self::set) marks it for the next checkpoint.
pub struct ValueState<T> {
    name: String,
    value: T,
    changed: bool,
    merge: fn(&mut T, T),
    read_by: ReadBy,
}

impl<T: std::fmt::Debug> std::fmt::Debug for ValueState<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueState").field("name", &self.name).field("value", &self.value).finish()
    }
}

impl<T: Serialize + DeserializeOwned + Default + Send> ValueState<T> {
    /// A store called `name` holding `T::default()`. `merge` combines two
    /// tasks' values when a restore with fewer tasks gives both to one task
    /// (it is given the value already there and the one arriving).
    pub fn new(name: &str, merge: fn(&mut T, T)) -> Self {
        Self {
            name: name.to_owned(),
            value: T::default(),
            changed: false,
            merge,
            read_by: ReadBy::now(),
        }
    }

    /// The value.
    pub fn get(&self) -> &T {
        &self.value
    }

    /// The value, to change in place.
    pub fn get_mut(&mut self) -> &mut T {
        self.mark();
        &mut self.value
    }

    /// Replaces the value.
    pub fn set(&mut self, value: T) {
        self.mark();
        self.value = value;
    }

    #[inline]
    fn mark(&mut self) {
        if !self.changed {
            self.changed = true;
            self.read_by.check(&self.name);
        }
    }
}

impl<T: Serialize + DeserializeOwned + Default + Send> StateStore for ValueState<T> {
    fn kind(&self) -> StoreKind {
        StoreKind::VALUE
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn take_changes(
        &mut self,
        changes: &mut RVec<StateEntry>,
        _removed: &mut RVec<RVec<Value>>,
    ) -> Result<()> {
        self.read_by.read();
        if self.changed {
            // Taken only once encoded: a failed encode keeps the change.
            let bytes = encode(&self.name, None, &self.value)?;
            changes.push(StateEntry { key: RVec::new(), bytes });
            self.changed = false;
        }
        Ok(())
    }

    fn retake(&mut self, changes: &[StateEntry], _removed: &[RVec<Value>]) {
        if !changes.is_empty() {
            self.changed = true;
        }
    }

    fn restore(&mut self, entry: &StateEntry, changed: bool) -> Result<()> {
        self.read_by.read();
        let value: T = decode(&self.name, &entry.bytes)?;
        (self.merge)(&mut self.value, value);
        self.changed |= changed;
        Ok(())
    }

    fn restore_removed(&mut self, _key: &[Value]) {}

    fn export(
        &self,
        out: &mut Vec<(StateEntry, bool)>,
        _removed: &mut Vec<RVec<Value>>,
    ) -> Result<()> {
        out.push((
            StateEntry { key: RVec::new(), bytes: encode(&self.name, None, &self.value)? },
            self.changed,
        ));
        Ok(())
    }
}

/// The index, among `n` tasks, of the task a fields grouping sends `key`
/// (the values of the grouping fields, in grouping order) to: the task
/// that owns `key` in a [`KeyValueState`]. A restore, and a live change of
/// parallelism, give each key to this task; the host refuses a checkpoint
/// in which another task wrote it.
///
/// A store keyed by something other than the grouping fields' values (a
/// sink's own batch ids) picks keys this task owns, with this function and
/// the `task_index` and `parallelism` of its [`TaskContext`](crate::TaskContext).
#[inline]
pub fn key_index<'v>(key: impl Iterator<Item = &'v Value>, n: usize) -> usize {
    use std::hash::{Hash, Hasher};
    let mut hasher = rustc_hash::FxHasher::default();
    for v in key {
        v.hash(&mut hasher);
    }
    // A multiply and a shift map the hash onto 0..n by its high bits
    // (Lemire's range reduction), which FxHash mixes well; a `%` would
    // compile to a 64-bit division, the costliest step of the grouping.
    let h = hasher.finish();
    ((u128::from(h) * n.max(1) as u128) >> 64) as usize
}

/// Contract 1.2: a state backend, where the host commits a topology's
/// checkpoints (export it with `state_backends: [...]` in
/// [`export_plugin!`](crate::export_plugin)). The host calls it from one
/// thread, one call at a time; keys and values are opaque bytes.
pub trait StateBackend: Send + Sized + 'static {
    /// The name a topology's `[state] backend = "alias::Name"` uses.
    const NAME: &'static str;
    /// A one-line description for `squall inspect`.
    const DESCRIPTION: &'static str = "";
    /// The config keys `[state.config]` accepts (checked by `squall validate`).
    const CONFIG_KEYS: Option<&'static [crate::ConfigKey]> = None;

    /// Builds an instance from `[state.config]`.
    ///
    /// # Errors
    /// When the config is invalid.
    fn new(config: &crate::ComponentConfig<'_>) -> Result<Self>;

    /// Connects, for the state of the topology called `namespace`.
    ///
    /// # Errors
    /// When the backend cannot be reached.
    fn open(&mut self, namespace: &str) -> Result<()>;

    /// The last committed checkpoint (`None`: nothing committed yet).
    ///
    /// # Errors
    /// When the backend cannot be read.
    fn last_committed(&mut self) -> Result<Option<u64>>;

    /// Commits `checkpoint` atomically: every write and the checkpoint's
    /// number become visible together, or (on any error, or a crash
    /// midway) none of them.
    ///
    /// # Errors
    /// When the commit did not happen; the host retries the writes with
    /// the next checkpoint.
    fn commit(&mut self, checkpoint: u64, writes: &[crate::abi::ScopeWrites]) -> Result<()>;

    /// Every record of `scope` as last committed.
    ///
    /// # Errors
    /// When the backend cannot be read.
    fn load(&mut self, scope: &str) -> Result<Vec<crate::abi::StateRecord>>;

    /// The scopes that hold committed records.
    ///
    /// # Errors
    /// When the backend cannot be read.
    fn scopes(&mut self) -> Result<Vec<String>>;

    /// Deletes the namespace's whole state.
    ///
    /// # Errors
    /// When the backend cannot be written.
    fn clear(&mut self) -> Result<()>;

    /// Disconnects (at the end of the run).
    fn close(&mut self) {}
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn word(w: &str) -> Value {
        Value::from(w)
    }

    #[test]
    fn only_keys_changed_since_the_last_checkpoint_are_taken_once_each() {
        let mut counts: KeyValueState<u64> = KeyValueState::new("counts");
        for w in ["a", "b", "a", "a"] {
            *counts.entry(&word(w)) += 1;
        }
        let mut stores = Stores::none().with(&mut counts);
        let first = stores.take_changes().unwrap();
        assert_eq!(first.len(), 1);
        let mut got: Vec<(String, String)> = first[0]
            .entries
            .iter()
            .map(|e| {
                (
                    e.key[0].as_str().unwrap().to_owned(),
                    String::from_utf8(e.bytes.to_vec()).unwrap(),
                )
            })
            .collect();
        got.sort();
        assert_eq!(got, [("a".into(), "3".into()), ("b".into(), "1".into())]);
        assert!(stores.take_changes().unwrap().is_empty(), "nothing changed since");
        drop(stores);
        *counts.entry(&word("b")) += 1;
        counts.remove(&word("a"));
        let mut stores = Stores::none().with(&mut counts);
        let second = stores.take_changes().unwrap();
        assert_eq!(second[0].entries.len(), 1);
        assert_eq!(second[0].entries[0].bytes.as_slice(), b"2");
        assert_eq!(second[0].removed.as_slice(), &[RVec::from(vec![word("a")])]);
    }

    #[test]
    fn a_removed_then_reinserted_key_is_written_not_deleted() {
        let mut s: KeyValueState<u64> = KeyValueState::new("s");
        s.insert(word("k"), 1);
        let _ = Stores::none().with(&mut s).take_changes().unwrap();
        s.remove(&word("k"));
        s.insert(word("k"), 5);
        let d = Stores::none().with(&mut s).take_changes().unwrap();
        assert_eq!(d[0].entries.len(), 1);
        assert_eq!(d[0].entries[0].bytes.as_slice(), b"5");
        assert!(d[0].removed.is_empty());
    }

    #[test]
    fn a_swap_handover_keeps_values_and_what_was_not_yet_checkpointed() {
        let mut old: KeyValueState<u64> = KeyValueState::new("counts");
        let mut total: ValueState<u64> = ValueState::new("total", |a, b| *a += b);
        old.insert(word("clean"), 1);
        old.insert(word("gone"), 9);
        *total.get_mut() = 10;
        let _ = Stores::none().with(&mut old).with(&mut total).take_changes().unwrap();
        old.insert(word("dirty"), 2);
        old.remove(&word("gone"));
        let saved = Stores::none().with(&mut old).with(&mut total).save().unwrap();

        let mut new: KeyValueState<u64> = KeyValueState::new("counts");
        let mut new_total: ValueState<u64> = ValueState::new("total", |a, b| *a += b);
        Stores::none().with(&mut new).with(&mut new_total).restore_saved(&saved).unwrap();
        assert_eq!(new.get(&word("clean")), Some(&1));
        assert_eq!(new.get(&word("dirty")), Some(&2));
        assert_eq!(new.get(&word("gone")), None);
        assert_eq!(*new_total.get(), 10);
        let d = Stores::none().with(&mut new).with(&mut new_total).take_changes().unwrap();
        assert_eq!(d.len(), 1, "the total was checkpointed before the swap");
        assert_eq!(d[0].entries.len(), 1);
        assert_eq!(d[0].entries[0].key.as_slice(), &[word("dirty")]);
        assert_eq!(d[0].removed.as_slice(), &[RVec::from(vec![word("gone")])]);
    }

    #[test]
    fn multi_field_keys_travel_as_their_fields() {
        let mut s: KeyValueState<u64> = KeyValueState::new("pairs");
        let key = Value::List(vec![word("x"), Value::I64(3)].into());
        s.insert(key.clone(), 7);
        let d = Stores::none().with(&mut s).take_changes().unwrap();
        assert_eq!(d[0].entries[0].key.as_slice(), &[word("x"), Value::I64(3)]);
        let mut back: KeyValueState<u64> = KeyValueState::new("pairs");
        Stores::none().with(&mut back).restore(&d).unwrap();
        assert_eq!(back.get(&key), Some(&7));
    }

    #[test]
    fn restoring_into_an_unknown_store_or_bad_bytes_is_an_error() {
        let mut s: KeyValueState<u64> = KeyValueState::new("s");
        let delta = StoreDelta {
            store: "other".into(),
            entries: vec![StateEntry { key: vec![word("k")].into(), bytes: b"1".to_vec().into() }]
                .into(),
            removed: RVec::new(),
        };
        let e = Stores::none().with(&mut s).restore(std::slice::from_ref(&delta)).unwrap_err();
        assert!(e.to_string().contains("no store called \"other\""), "{e}");
        let delta = StoreDelta { store: "s".into(), ..delta };
        let mut bad = delta.clone();
        bad.entries[0].bytes = b"not json".to_vec().into();
        assert!(Stores::none().with(&mut s).restore(&[bad]).is_err());
    }

    /// The keys of a checkpoint's deltas, as strings, sorted.
    fn taken_keys(deltas: &[StoreDelta]) -> Vec<String> {
        let mut keys: Vec<String> =
            deltas.iter().flat_map(|d| d.entries.iter()).map(|e| format!("{:?}", e.key)).collect();
        keys.sort();
        keys
    }

    #[test]
    fn a_nan_is_refused_with_its_store_and_key_and_no_change_is_lost() {
        let mut sums: KeyValueState<f64> = KeyValueState::new("sums");
        sums.insert(word("a"), 1.0);
        sums.insert(word("b"), f64::NAN);
        sums.insert(word("c"), 2.0);
        let e = Stores::none().with(&mut sums).take_changes().unwrap_err().to_string();
        assert!(e.contains("store \"sums\", key b") && e.contains("NaN"), "{e}");
        // Fixed by the bolt: every change is still there for the next checkpoint.
        sums.insert(word("b"), 3.0);
        let d = Stores::none().with(&mut sums).take_changes().unwrap();
        assert_eq!(taken_keys(&d).len(), 3, "{:?}", taken_keys(&d));
    }

    #[test]
    fn a_value_serde_refuses_fails_the_take_and_earlier_stores_keep_their_changes() {
        let mut counts: KeyValueState<u64> = KeyValueState::new("counts");
        let mut total: ValueState<u64> = ValueState::new("total", |a, b| *a += b);
        let mut pairs: KeyValueState<HashMap<(u8, u8), u8>> = KeyValueState::new("pairs");
        counts.insert(word("a"), 1);
        total.set(5);
        pairs.insert(word("p"), HashMap::from([((1, 2), 3)]));
        let e = Stores::none()
            .with(&mut counts)
            .with(&mut total)
            .with(&mut pairs)
            .take_changes()
            .unwrap_err()
            .to_string();
        assert!(e.contains("store \"pairs\", key p: cannot encode"), "{e}");
        pairs.remove(&word("p"));
        let d = Stores::none().with(&mut counts).with(&mut total).with(&mut pairs).take_changes();
        let d = d.unwrap();
        let stores: Vec<&str> = d.iter().map(|d| d.store.as_str()).collect();
        assert_eq!(stores, ["counts", "total", "pairs"], "nothing of the failed take is lost");
        assert_eq!(d[1].entries[0].bytes.as_slice(), b"5");
    }

    #[test]
    fn two_stores_with_one_name_are_refused() {
        let mut counts: KeyValueState<u64> = KeyValueState::new("counts");
        let mut sums: KeyValueState<u64> = KeyValueState::new("counts");
        counts.insert(word("a"), 1);
        let e = Stores::none().with(&mut counts).with(&mut sums).take_changes().unwrap_err();
        assert!(e.to_string().contains("two of its stores are called \"counts\""), "{e}");
        let e = Stores::none().with(&mut counts).with(&mut sums).restore(&[]).unwrap_err();
        assert!(e.to_string().contains("two of its stores"), "{e}");
    }

    #[test]
    fn stores_are_checked_against_their_declaration() {
        let mut counts: KeyValueState<u64> = KeyValueState::new("counts");
        let mut total: ValueState<u64> = ValueState::new("total", |a, b| *a += b);
        let stores = Stores::none().with(&mut counts).with(&mut total);
        let both = [StoreSpec::keyed("counts"), StoreSpec::value("total")];
        stores.check_declared(None).unwrap();
        stores.check_declared(Some(&both)).unwrap();
        // A declared store the bolt does not return (for this config) is fine.
        let more = [both[0], both[1], StoreSpec::other("staged")];
        stores.check_declared(Some(&more)).unwrap();
        let e = stores.check_declared(Some(&both[..1])).unwrap_err().to_string();
        assert!(e.contains("returns store \"total\", which its STORES does not declare"), "{e}");
        assert!(e.contains("it declares: \"counts\" (keyed)"), "{e}");
        let e = stores.check_declared(Some(&[])).unwrap_err().to_string();
        assert!(e.contains("it declares: none"), "{e}");
        let swapped = [StoreSpec::value("counts"), StoreSpec::value("total")];
        let e = stores.check_declared(Some(&swapped)).unwrap_err().to_string();
        assert!(
            e.contains("store \"counts\" is declared value in STORES, but it is a keyed"),
            "{e}"
        );
    }

    #[test]
    fn a_store_the_checkpoints_never_read_warns_at_a_write() {
        let mut listed: KeyValueState<u64> = KeyValueState::new("listed");
        let mut forgotten: KeyValueState<u64> = KeyValueState::new("forgotten");
        let mut total: ValueState<u64> = ValueState::new("total", |a, b| *a += b);
        let last = LATEST_CHECKPOINT.load(Ordering::Relaxed);
        for n in 1..=UNREAD_CHECKPOINTS + 1 {
            checkpoint_seen(last + n);
        }
        let _ = Stores::none().with(&mut listed).take_changes().unwrap();
        listed.insert(word("a"), 1);
        assert!(!listed.read_by.warned, "read by the last checkpoint");
        forgotten.insert(word("a"), 1);
        assert!(forgotten.read_by.warned, "never read: warned at its write");
        total.set(1);
        assert!(total.read_by.warned);
    }
}
