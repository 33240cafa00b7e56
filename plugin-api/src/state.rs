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

use crate::abi::{StateEntry, StoreDelta};
use crate::{Result, State, Value};

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
    pub fn take_changes(&mut self) -> Result<RVec<StoreDelta>> {
        let mut out = RVec::new();
        for store in &mut self.0 {
            let (mut entries, mut removed) = (RVec::new(), RVec::new());
            store.take_changes(&mut entries, &mut removed)?;
            if !entries.is_empty() || !removed.is_empty() {
                out.push(StoreDelta { store: store.name().into(), entries, removed });
            }
        }
        Ok(out)
    }

    /// Takes back what a checkpoint holds for this task's keys.
    ///
    /// # Errors
    /// A store the bolt does not keep, or bytes that do not decode.
    pub fn restore(&mut self, deltas: &[StoreDelta]) -> Result<()> {
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

fn encode<V: Serialize>(store: &str, value: &V) -> Result<RVec<u8>> {
    serde_json::to_vec(value)
        .map(RVec::from)
        .map_err(|e| format!("store {store:?}: cannot encode a value: {e}").into())
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
        Self { name: name.to_owned(), map: FxMap::default(), touched: Vec::new() }
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
                }
            }
            None => {
                self.touched.push(key.clone());
                self.map.insert(key, Slot { value, changed: true });
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &Value) -> Option<V> {
        let slot = self.map.remove(key)?;
        if !slot.changed {
            self.touched.push(key.clone());
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
    fn name(&self) -> &str {
        &self.name
    }

    fn take_changes(
        &mut self,
        changes: &mut RVec<StateEntry>,
        removed: &mut RVec<RVec<Value>>,
    ) -> Result<()> {
        for key in std::mem::take(&mut self.touched) {
            match self.map.get_mut(&key) {
                Some(slot) if slot.changed => {
                    slot.changed = false;
                    let bytes = encode(&self.name, &slot.value)?;
                    changes.push(StateEntry { key: key_fields(&key), bytes });
                }
                // Recorded twice (removed, then inserted again): written once.
                Some(_) => {}
                None => removed.push(key_fields(&key)),
            }
        }
        Ok(())
    }

    fn restore(&mut self, entry: &StateEntry, changed: bool) -> Result<()> {
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
            let bytes = encode(&self.name, &slot.value)?;
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
        Self { name: name.to_owned(), value: T::default(), changed: false, merge }
    }

    /// The value.
    pub fn get(&self) -> &T {
        &self.value
    }

    /// The value, to change in place.
    pub fn get_mut(&mut self) -> &mut T {
        self.changed = true;
        &mut self.value
    }

    /// Replaces the value.
    pub fn set(&mut self, value: T) {
        self.changed = true;
        self.value = value;
    }
}

impl<T: Serialize + DeserializeOwned + Default + Send> StateStore for ValueState<T> {
    fn name(&self) -> &str {
        &self.name
    }

    fn take_changes(
        &mut self,
        changes: &mut RVec<StateEntry>,
        _removed: &mut RVec<RVec<Value>>,
    ) -> Result<()> {
        if std::mem::take(&mut self.changed) {
            changes.push(StateEntry { key: RVec::new(), bytes: encode(&self.name, &self.value)? });
        }
        Ok(())
    }

    fn restore(&mut self, entry: &StateEntry, changed: bool) -> Result<()> {
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
            StateEntry { key: RVec::new(), bytes: encode(&self.name, &self.value)? },
            self.changed,
        ));
        Ok(())
    }
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
}
