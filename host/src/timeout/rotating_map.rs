//! `RotatingMap`: a map whose entries expire in coarse steps when the caller
//! rotates it.
//!
//! This follows Storm's `org.apache.storm.utils.RotatingMap` (seed 003). Both
//! the spout's pending map (2 buckets) and the acker's pending map (3 buckets)
//! are RotatingMaps, and a tick every `message_timeout_secs` rotates them.
//!
//! # Structure
//!
//! The map is a queue of `n` hash maps called buckets, from newest to oldest.
//! - [`put`](RotatingMap::put) and [`reset`](RotatingMap::reset) place the key
//!   in the newest bucket and take it out of every other bucket.
//! - [`rotate`](RotatingMap::rotate) removes the oldest bucket, returns its
//!   entries (they have expired) and pushes an empty bucket at the new end.
//! - `get`, `get_mut`, `get_or_insert_with`, `contains_key` and `remove` look
//!   in every bucket and do not move an existing entry. They cost `O(n)` hash
//!   look-ups, like Storm's.
//!
//! # Invariants
//!
//! - There are always exactly `n >= 2` buckets.
//! - A key is in at most one bucket, so [`len`](RotatingMap::len) is the sum of
//!   the bucket sizes.
//! - An entry that has sat through `a` rotations since it was last put or reset
//!   is in bucket `a` (0 = newest), and `a < n`.
//!
//! # Expiry law
//!
//! Count the rotations that follow a `put` (or `reset`) of a key that is not
//! touched again. The entry survives the first `n - 1` of them, and the `n`-th
//! returns it from [`rotate`](RotatingMap::rotate). If the caller rotates every
//! `T`, the entry expires more than `(n - 1)·T` and at most `n·T` after it was
//! put. It is exactly `n·T` when the put immediately follows a rotation.
//!
//! | buckets `n` | survives | returned by rotation | expires after |
//! |---|---|---|---|
//! | 2 (spout) | 1 rotation | 2nd | `T < age <= 2T` |
//! | 3 (acker) | 2 rotations | 3rd | `2T < age <= 3T` |
//!
//! Storm's javadoc states the same law as "between E and E·(1 + 1/(n−1))" with
//! `E = T·(n−1)`. This is why the timeout a user sees for
//! `message_timeout_secs = 30` lies between 30 and 60 seconds.
//!
//! # Deliberate differences
//!
//! - Storm calls an `ExpiredCallback` for each expired entry. Here
//!   [`rotate`](RotatingMap::rotate) returns the expired entries as an iterator,
//!   so the caller decides what an expiry means (`fail` with reason TIMEOUT for
//!   the spout, a silent drop for the acker). The map stays free of callbacks
//!   and borrows.
//! - The bucket that drops out is cleared and reused as the new newest bucket.
//!   It keeps its allocation, so a steady stream of puts does not reallocate a
//!   table after every rotation.
//! - Buckets use `FxHashMap`. The keys are random 64-bit ids, and every spout
//!   tuple costs one put and one remove, so a fast non-cryptographic hash
//!   matters more than resistance to chosen keys.

use std::collections::VecDeque;
use std::hash::Hash;
use std::mem;

use rustc_hash::FxHashMap;

/// A map whose entries expire after `n - 1` to `n` rotations (see the
/// [module docs](self) for the exact law).
///
/// # Example
///
/// ```
/// # use squall_host::timeout::RotatingMap;
/// let mut pending = RotatingMap::new(2);
/// pending.put(7_u64, "msg-7");
/// assert_eq!(pending.rotate().count(), 0); // survives the first rotation
/// let expired: Vec<_> = pending.rotate().collect();
/// assert_eq!(expired, vec![(7, "msg-7")]); // the second one returns it
/// assert!(pending.is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct RotatingMap<K, V> {
    /// `buckets[0]` is the newest bucket and `buckets[n - 1]` the oldest. The
    /// length never changes after `new`.
    buckets: VecDeque<FxHashMap<K, V>>,
}

impl<K: Eq + Hash, V> RotatingMap<K, V> {
    /// Creates an empty map with `num_buckets` buckets.
    ///
    /// # Panics
    ///
    /// Panics if `num_buckets < 2`. With a single bucket a rotation would
    /// expire entries put just before it, so nothing would be guaranteed to
    /// live for any time at all. Storm refuses it too.
    pub fn new(num_buckets: usize) -> Self {
        assert!(num_buckets >= 2, "a RotatingMap needs at least 2 buckets, got {num_buckets}");
        let buckets = (0..num_buckets).map(|_| FxHashMap::default()).collect();
        RotatingMap { buckets }
    }

    /// Moves the buckets' headers (each map's length, written on every
    /// insert and remove) into memory that the calling thread allocates, so
    /// that they share no cache line with another thread's data (see
    /// `Transfer::rehome`). The maps' tables are allocated on first use.
    pub fn rehome(&mut self) {
        let mut buckets = VecDeque::with_capacity(self.buckets.len());
        buckets.extend(self.buckets.drain(..));
        self.buckets = buckets;
    }

    /// The number of buckets `n` given to [`new`](RotatingMap::new).
    pub fn num_buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Inserts `key` into the newest bucket, taking it out of any older bucket,
    /// and returns the value it had before, if any.
    ///
    /// The entry's timeout restarts: it now expires on the `n`-th rotation from
    /// here.
    pub fn put(&mut self, key: K, value: V) -> Option<V> {
        // A key is in at most one bucket, so stop at the first older hit.
        let older = self.buckets.iter_mut().skip(1).find_map(|bucket| bucket.remove(&key));
        let newest = self.newest_mut().insert(key, value);
        newest.or(older)
    }

    /// Returns the value of `key` without moving it.
    pub fn get(&self, key: &K) -> Option<&V> {
        self.buckets.iter().find_map(|bucket| bucket.get(key))
    }

    /// Returns the value of `key` for update, without moving it: changing the
    /// value does not restart its timeout.
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.buckets.iter_mut().find_map(|bucket| bucket.get_mut(key))
    }

    /// Returns the value of `key` for update, inserting `default()` into the
    /// newest bucket first if `key` is missing. An existing entry is not moved.
    ///
    /// This is the acker's "create the entry if missing" step in one call.
    pub fn get_or_insert_with(&mut self, key: K, default: impl FnOnce() -> V) -> &mut V {
        let found = self.buckets.iter().position(|bucket| bucket.contains_key(&key));
        let bucket = &mut self.buckets[found.unwrap_or(0)];
        bucket.entry(key).or_insert_with(default)
    }

    /// Tells whether `key` is in the map.
    pub fn contains_key(&self, key: &K) -> bool {
        self.buckets.iter().any(|bucket| bucket.contains_key(key))
    }

    /// Removes `key` and returns its value, if it was in the map.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.buckets.iter_mut().find_map(|bucket| bucket.remove(key))
    }

    /// Moves `key` to the newest bucket, which restarts its timeout exactly as
    /// a fresh [`put`](RotatingMap::put) would. This is Storm's
    /// `reset_timeout`. Returns `false`, and changes nothing, if `key` is not in
    /// the map.
    pub fn reset(&mut self, key: &K) -> bool {
        if self.buckets[0].contains_key(key) {
            return true;
        }
        let found = self.buckets.iter_mut().skip(1).find_map(|bucket| bucket.remove_entry(key));
        match found {
            Some((key, value)) => {
                self.newest_mut().insert(key, value);
                true
            }
            None => false,
        }
    }

    /// Drops the oldest bucket and returns its entries, which have now expired.
    /// An empty bucket becomes the newest one.
    ///
    /// The entries come in no particular order. The map is updated as soon as
    /// this is called. If the iterator is dropped before it is used up, the
    /// remaining expired entries are dropped with it.
    pub fn rotate(&mut self) -> impl Iterator<Item = (K, V)> + '_ {
        // Move the oldest bucket to the front and drain it: its table is reused
        // as the new newest bucket, empty but with its capacity kept.
        self.buckets.rotate_right(1);
        self.newest_mut().drain()
    }

    /// The number of entries across all buckets.
    pub fn len(&self) -> usize {
        self.buckets.iter().map(|bucket| bucket.len()).sum()
    }

    /// Tells whether the map has no entries.
    pub fn is_empty(&self) -> bool {
        self.buckets.iter().all(|bucket| bucket.is_empty())
    }

    /// Removes every entry and returns them, oldest bucket first, for example
    /// at shutdown.
    ///
    /// The map is empty as soon as this returns, whether or not the iterator
    /// is used up, and stays usable. The buckets' tables go with the iterator,
    /// so the next puts allocate afresh.
    pub fn drain_all(&mut self) -> impl Iterator<Item = (K, V)> {
        let oldest_first: Vec<FxHashMap<K, V>> =
            self.buckets.iter_mut().rev().map(mem::take).collect();
        oldest_first.into_iter().flatten()
    }

    /// Iterates over all entries, newest bucket first, in no particular order
    /// within a bucket.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> + '_ {
        self.buckets.iter().flat_map(|bucket| bucket.iter())
    }

    fn newest_mut(&mut self) -> &mut FxHashMap<K, V> {
        &mut self.buckets[0]
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn expired_keys<K: Eq + Hash + Ord, V>(map: &mut RotatingMap<K, V>) -> Vec<K> {
        let mut keys: Vec<K> = map.rotate().map(|(k, _)| k).collect();
        keys.sort();
        keys
    }

    #[test]
    #[should_panic(expected = "at least 2 buckets")]
    fn new_panics_with_fewer_than_two_buckets() {
        let _map: RotatingMap<u64, ()> = RotatingMap::new(1);
    }

    #[test]
    fn entry_survives_one_rotation_and_expires_on_the_second_with_two_buckets() {
        let mut map = RotatingMap::new(2);
        map.put(1_u64, 'a');
        assert!(expired_keys(&mut map).is_empty());
        assert_eq!(map.get(&1), Some(&'a'));
        assert_eq!(expired_keys(&mut map), vec![1]);
        assert!(!map.contains_key(&1));
        assert!(map.is_empty());
    }

    #[test]
    fn put_moves_an_existing_key_to_the_newest_bucket_and_returns_the_old_value() {
        let mut map = RotatingMap::new(2);
        map.put(1_u64, 'a');
        assert!(expired_keys(&mut map).is_empty());
        assert_eq!(map.put(1, 'b'), Some('a'));
        assert_eq!(map.len(), 1);
        assert!(expired_keys(&mut map).is_empty());
        assert_eq!(map.remove(&1), Some('b'));
        assert_eq!(map.remove(&1), None);
    }

    #[test]
    fn get_mut_changes_the_value_without_restarting_the_timeout() {
        let mut map = RotatingMap::new(2);
        map.put(1_u64, 10);
        assert!(expired_keys(&mut map).is_empty());
        *map.get_mut(&1).expect("key was put") += 1;
        assert_eq!(map.rotate().collect::<Vec<_>>(), vec![(1, 11)]);
    }

    #[test]
    fn reset_of_a_missing_key_returns_false_and_inserts_nothing() {
        let mut map: RotatingMap<u64, ()> = RotatingMap::new(3);
        assert!(!map.reset(&5));
        assert!(map.is_empty());
    }

    #[test]
    fn drain_all_returns_every_entry_and_leaves_the_map_usable() {
        let mut map = RotatingMap::new(3);
        map.put(1_u64, ());
        let _ = map.rotate();
        map.put(2, ());
        let _ = map.rotate();
        map.put(3, ());
        let mut drained: Vec<u64> = map.drain_all().map(|(k, ())| k).collect();
        drained.sort();
        assert_eq!(drained, vec![1, 2, 3]);
        assert!(map.is_empty());
        map.put(4, ());
        assert_eq!(map.len(), 1);
    }

    #[test]
    fn dropping_the_rotate_iterator_still_expires_the_oldest_bucket() {
        let mut map = RotatingMap::new(2);
        map.put(1_u64, ());
        map.put(2, ());
        let _ = map.rotate();
        drop(map.rotate());
        assert!(map.is_empty());
    }

    #[test]
    fn drain_all_empties_the_map_even_if_the_iterator_is_dropped() {
        let mut map = RotatingMap::new(2);
        map.put(1_u64, ());
        let _ = map.rotate();
        map.put(2, ());
        assert_eq!(map.drain_all().next(), Some((1, ())), "oldest bucket first");
        assert!(map.is_empty());
    }

    #[test]
    fn iter_visits_every_entry() {
        let mut map = RotatingMap::new(2);
        map.put(1_u64, 'a');
        let _ = map.rotate();
        map.put(2, 'b');
        let mut seen: Vec<(u64, char)> = map.iter().map(|(k, v)| (*k, *v)).collect();
        seen.sort();
        assert_eq!(seen, vec![(1, 'a'), (2, 'b')]);
    }

    /// One operation of the model-based test. Keys come from a small range so
    /// that puts, resets and removes hit the same keys often.
    #[derive(Clone, Debug)]
    enum Action {
        Put(u8, u32),
        GetOrInsert(u8, u32),
        Get(u8),
        GetMut(u8, u32),
        Remove(u8),
        Reset(u8),
        Rotate,
    }

    fn arb_action() -> impl Strategy<Value = Action> {
        let key = 0_u8..8;
        prop_oneof![
            4 => (key.clone(), any::<u32>()).prop_map(|(k, v)| Action::Put(k, v)),
            1 => (key.clone(), any::<u32>()).prop_map(|(k, v)| Action::GetOrInsert(k, v)),
            1 => key.clone().prop_map(Action::Get),
            1 => (key.clone(), any::<u32>()).prop_map(|(k, v)| Action::GetMut(k, v)),
            2 => key.clone().prop_map(Action::Remove),
            2 => key.prop_map(Action::Reset),
            3 => Just(Action::Rotate),
        ]
    }

    /// The reference model: each live key with its value and the number of
    /// rotations it has sat through since its last put or reset.
    #[derive(Debug, Default)]
    struct Model {
        entries: BTreeMap<u8, (u32, usize)>,
    }

    impl Model {
        fn rotate(&mut self, num_buckets: usize) -> Vec<(u8, u32)> {
            let expired: Vec<(u8, u32)> = self
                .entries
                .iter()
                .filter(|(_, (_, age))| *age == num_buckets - 1)
                .map(|(k, (v, _))| (*k, *v))
                .collect();
            for (k, _) in &expired {
                self.entries.remove(k);
            }
            for (_, age) in self.entries.values_mut() {
                *age += 1;
            }
            expired
        }
    }

    fn sorted<K: Ord, V: Ord>(mut entries: Vec<(K, V)>) -> Vec<(K, V)> {
        entries.sort();
        entries
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The map agrees with a model that counts each entry's rotations,
        /// after every operation and for every bucket count.
        #[test]
        fn map_agrees_with_a_model_of_entry_ages(
            num_buckets in 2_usize..6,
            actions in prop::collection::vec(arb_action(), 0..200),
        ) {
            let mut map = RotatingMap::new(num_buckets);
            let mut model = Model::default();
            for action in actions {
                match action {
                    Action::Put(k, v) => {
                        let expected = model.entries.insert(k, (v, 0)).map(|(old, _)| old);
                        prop_assert_eq!(map.put(k, v), expected);
                    }
                    Action::GetOrInsert(k, v) => {
                        let expected = model.entries.entry(k).or_insert((v, 0)).0;
                        prop_assert_eq!(*map.get_or_insert_with(k, || v), expected);
                    }
                    Action::Get(k) => {
                        prop_assert_eq!(map.get(&k), model.entries.get(&k).map(|(v, _)| v));
                    }
                    Action::GetMut(k, v) => {
                        let expected = model.entries.get_mut(&k).map(|(old, _)| {
                            *old = v;
                        });
                        let actual = map.get_mut(&k).map(|old| {
                            *old = v;
                        });
                        prop_assert_eq!(actual, expected);
                    }
                    Action::Remove(k) => {
                        let expected = model.entries.remove(&k).map(|(v, _)| v);
                        prop_assert_eq!(map.remove(&k), expected);
                    }
                    Action::Reset(k) => {
                        let expected = match model.entries.get_mut(&k) {
                            Some((_, age)) => {
                                *age = 0;
                                true
                            }
                            None => false,
                        };
                        prop_assert_eq!(map.reset(&k), expected);
                    }
                    Action::Rotate => {
                        let expired = sorted(map.rotate().collect());
                        prop_assert_eq!(expired, model.rotate(num_buckets));
                    }
                }
                prop_assert_eq!(map.len(), model.entries.len());
                prop_assert_eq!(map.is_empty(), model.entries.is_empty());
                for k in 0_u8..8 {
                    prop_assert_eq!(map.contains_key(&k), model.entries.contains_key(&k));
                }
            }
            let drained = sorted(map.drain_all().collect());
            let expected: Vec<(u8, u32)> = model.entries.iter().map(|(k, (v, _))| (*k, *v)).collect();
            prop_assert_eq!(drained, expected);
        }

        /// An entry put between two rotations survives exactly `n - 1`
        /// rotations and is returned by the `n`-th, whatever else goes on in
        /// the map.
        #[test]
        fn entry_expires_on_exactly_the_nth_rotation_after_its_put(
            num_buckets in 2_usize..6,
            rotations_before in 0_usize..5,
            noise in prop::collection::vec(1_u64..50, 0..40),
        ) {
            const TARGET: u64 = 0;
            let mut map = RotatingMap::new(num_buckets);
            let mut noise = noise.into_iter();
            for _ in 0..rotations_before {
                map.extend_with(noise.by_ref().take(3));
                let _ = map.rotate();
            }
            map.put(TARGET, ());
            for _ in 1..num_buckets {
                map.extend_with(noise.by_ref().take(3));
                prop_assert!(!expired_keys(&mut map).contains(&TARGET));
                prop_assert!(map.contains_key(&TARGET));
            }
            prop_assert!(expired_keys(&mut map).contains(&TARGET));
            prop_assert!(!map.contains_key(&TARGET));
        }

        /// With rotations every `T`, an entry put at any moment expires more
        /// than `(n - 1)·T` and at most `n·T` later. For the spout's 2 buckets
        /// that is between `T` and `2T`.
        #[test]
        fn timeout_fires_between_t_and_2t(
            num_buckets in 2_usize..5,
            period_ms in 1_u64..60_000,
            put_at_ms in 0_u64..600_000,
        ) {
            // Rotations happen at period, 2·period, ...; a put at exactly a
            // rotation's time comes after that rotation.
            let mut map = RotatingMap::new(num_buckets);
            let mut now = 0;
            while now + period_ms <= put_at_ms {
                now += period_ms;
                let _ = map.rotate();
            }
            map.put((), ());
            let expired_at = loop {
                now += period_ms;
                if map.rotate().count() == 1 {
                    break now;
                }
            };
            let age = expired_at - put_at_ms;
            let n = num_buckets as u64;
            prop_assert!(age > (n - 1) * period_ms, "expired too early: {age} ms");
            prop_assert!(age <= n * period_ms, "expired too late: {age} ms");
        }

        /// `reset` moves an entry to the newest bucket: from then on it takes
        /// `n` more rotations to expire, however old it was.
        #[test]
        fn reset_moves_the_entry_to_the_newest_bucket(
            num_buckets in 2_usize..6,
            rotations_before_reset in 0_usize..5,
        ) {
            let rotations_before_reset = rotations_before_reset % num_buckets;
            let mut map = RotatingMap::new(num_buckets);
            map.put(1_u64, ());
            for _ in 0..rotations_before_reset {
                let _ = map.rotate();
            }
            prop_assert!(map.reset(&1));
            for _ in 1..num_buckets {
                prop_assert_eq!(map.rotate().count(), 0);
            }
            prop_assert_eq!(expired_keys(&mut map), vec![1]);
        }

        /// `len` always equals the puts of keys that were not live, minus the
        /// successful removes, minus the entries that rotations returned.
        #[test]
        fn len_is_conserved(
            num_buckets in 2_usize..5,
            actions in prop::collection::vec(arb_action(), 0..200),
        ) {
            let mut map = RotatingMap::new(num_buckets);
            let (mut fresh_puts, mut removes, mut expired) = (0_usize, 0_usize, 0_usize);
            for action in actions {
                match action {
                    Action::Put(k, v) => {
                        if map.put(k, v).is_none() {
                            fresh_puts += 1;
                        }
                    }
                    Action::Remove(k) => {
                        if map.remove(&k).is_some() {
                            removes += 1;
                        }
                    }
                    Action::Reset(k) => {
                        map.reset(&k);
                    }
                    Action::GetOrInsert(k, v) => {
                        if !map.contains_key(&k) {
                            fresh_puts += 1;
                        }
                        map.get_or_insert_with(k, || v);
                    }
                    Action::Rotate => expired += map.rotate().count(),
                    Action::Get(_) | Action::GetMut(..) => {}
                }
                prop_assert_eq!(map.len(), fresh_puts - removes - expired);
            }
        }
    }

    impl RotatingMap<u64, ()> {
        /// Test helper: puts each key with a unit value.
        fn extend_with(&mut self, keys: impl Iterator<Item = u64>) {
            for key in keys {
                self.put(key, ());
            }
        }
    }
}
