//! Stream groupings: which task(s) of a subscribing bolt receive a tuple.
//!
//! Storm's groupings, for one worker process (so `local_or_shuffle` is
//! `shuffle`, as every task is local):
//! - `shuffle` and `none`: round robin from a per-producer random start, so the
//!   load is even and no random number is drawn per tuple;
//! - `fields`: a hash of the selected fields' values (FxHash of the content;
//!   a string hashes the same whatever its storage), modulo the task count;
//! - `all`: every task; `global`: the task with the lowest id;
//! - `direct`: the task the emitter names with `emit_direct`;
//! - `custom` (contract 1.1): a plugin's [`Grouping`](squall_plugin_api::Grouping),
//!   one instance per sending task and subscription, asked per tuple.

use std::sync::Arc;

use abi_stable::std_types::{RString, RVec};
use squall_plugin_api::abi::{ComponentExtBox, GroupingBox, GroupingContext};

use crate::plugin::ExtConstructor;

use squall_plugin_api::Value;

/// How a stream's tuples are spread over a subscriber's tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grouping {
    /// Even spread.
    Shuffle,
    /// By the values of these field indexes.
    Fields(Vec<usize>),
    /// Every task gets every tuple.
    All,
    /// Everything goes to the lowest task id.
    Global,
    /// The emitter chooses with `emit_direct`.
    Direct,
    /// Local tasks first; in one process, the same as shuffle.
    LocalOrShuffle,
    /// No preference; the same as shuffle.
    None,
    /// A plugin's grouping (contract 1.1).
    Custom(Arc<CustomGrouping>),
}

/// A custom grouping of one subscription: how to build its instances.
pub struct CustomGrouping {
    /// `alias::Name`.
    pub name: String,
    /// Builds an instance.
    pub new: ExtConstructor,
    /// Its `config` table as a TOML document.
    pub config: String,
    /// The sending component.
    pub source: String,
    /// The stream.
    pub stream: String,
    /// The stream's fields.
    pub fields: Vec<RString>,
    /// The subscribing component.
    pub target: String,
    /// Where the topology names the grouping (`custom = "alias::Name"`).
    pub loc: crate::config::Loc,
}

/// Why a custom grouping instance could not be had.
#[derive(Debug, thiserror::Error)]
pub enum GroupingError {
    /// The constructor built something else.
    #[error("{name} is not a grouping")]
    NotAGrouping {
        /// `alias::Name`.
        name: String,
    },
    /// The constructor or `prepare` failed or panicked.
    #[error("grouping {name}: {call} failed: {cause}")]
    Failed {
        /// `alias::Name`.
        name: String,
        /// "constructor" or "prepare".
        call: &'static str,
        /// The plugin's error.
        cause: squall_plugin_api::PluginError,
    },
}

impl CustomGrouping {
    /// Builds and prepares one instance, for a sending task's subscription
    /// of `target`, whose tasks are `tasks`.
    ///
    /// # Errors
    /// The constructor or `prepare` failed (or panicked), or built something
    /// that is not a grouping.
    pub fn instantiate(&self, target: &str, tasks: &[u32]) -> Result<GroupingBox, GroupingError> {
        let failed = |call, cause| GroupingError::Failed { name: self.name.clone(), call, cause };
        let mut instance = match (self.new)(self.config.as_str().into()).into_result() {
            Ok(ComponentExtBox::Grouping(g)) => g,
            Ok(_) => return Err(GroupingError::NotAGrouping { name: self.name.clone() }),
            Err(e) => return Err(failed("constructor", e)),
        };
        let context = GroupingContext {
            source: self.source.as_str().into(),
            stream: self.stream.as_str().into(),
            fields: self.fields.clone().into(),
            target: target.into(),
            targets: tasks.to_vec().into(),
        };
        instance.prepare(&context).into_result().map_err(|e| failed("prepare", e))?;
        Ok(instance)
    }
}

/// Custom groupings compare by identity: two are equal when they are the
/// same subscription's.
impl PartialEq for CustomGrouping {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for CustomGrouping {}

impl std::fmt::Debug for CustomGrouping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomGrouping").field("name", &self.name).finish_non_exhaustive()
    }
}

/// One sending task's instance of a custom grouping.
struct CustomRouter {
    instance: GroupingBox,
    /// Indexes the instance chose for the current tuple.
    chosen: RVec<u32>,
    /// Their task ids.
    targets: Vec<u32>,
    /// One bit per target index: the indexes already taken for the
    /// current tuple (to skip a duplicate), cleared after each tuple.
    seen: Vec<u64>,
    /// The first bad index of the last misrouted tuple, for the error.
    last_bad: Option<BadIndex>,
}

/// What a custom grouping got wrong for one tuple: its
/// [`Grouping::choose`](squall_plugin_api::Grouping::choose) named indexes
/// that are out of range (the tuple does not reach them: dropped) or named
/// an index twice (delivered once). Each bad index is an error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Misroute {
    /// Indexes at or past the target task count.
    pub out_of_range: u32,
    /// Indexes named again for the same tuple.
    pub duplicated: u32,
}

impl Misroute {
    /// True when anything was wrong.
    #[inline(always)]
    pub fn any(self) -> bool {
        self.out_of_range != 0 || self.duplicated != 0
    }

    /// Bad indexes in all: each one is counted as an error.
    pub fn errors(self) -> u64 {
        u64::from(self.out_of_range) + u64::from(self.duplicated)
    }

    /// Adds another router's.
    pub fn add(&mut self, other: Misroute) {
        self.out_of_range += other.out_of_range;
        self.duplicated += other.duplicated;
    }
}

/// The first bad index a custom grouping chose for a tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadIndex {
    /// The index.
    pub index: u32,
    /// How many target tasks there are.
    pub tasks: usize,
    /// True when it was out of range, false when it was named twice.
    pub out_of_range: bool,
}

impl std::fmt::Debug for CustomRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CustomRouter")
    }
}

impl Grouping {
    /// The grouping's name as the topology file spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Grouping::Shuffle => "shuffle",
            Grouping::Fields(_) => "fields",
            Grouping::All => "all",
            Grouping::Global => "global",
            Grouping::Direct => "direct",
            Grouping::LocalOrShuffle => "local_or_shuffle",
            Grouping::None => "none",
            Grouping::Custom(_) => "custom",
        }
    }

    /// The grouping as the topology file writes it, for people: `shuffle`,
    /// `fields(word)` (`fields` are the stream's fields), `custom(alias::Name)`.
    pub fn label<S: AsRef<str>>(&self, fields: &[S]) -> String {
        match self {
            Grouping::Fields(ix) => {
                let names: Vec<&str> =
                    ix.iter().filter_map(|&i| fields.get(i).map(AsRef::as_ref)).collect();
                format!("fields({})", names.join(", "))
            }
            Grouping::Custom(custom) => format!("custom({})", custom.name),
            other => other.name().to_owned(),
        }
    }
}

/// Per-producer routing state for one subscriber.
#[derive(Debug)]
pub struct Router {
    grouping: Grouping,
    tasks: Vec<u32>,
    next: usize,
    custom: Option<CustomRouter>,
}

/// Where one tuple goes among a subscriber's tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Targets<'a> {
    /// One task.
    One(u32),
    /// Every task in the slice.
    Many(&'a [u32]),
    /// No task (a direct stream without a direct target for this subscriber).
    Nothing,
    /// A custom grouping's choice with bad indexes: the tasks that receive
    /// the tuple (possibly none) and what was wrong.
    Misrouted(&'a [u32], Misroute),
}

/// The index, among `n` tasks, of the task a fields grouping sends `key`
/// (the values of the grouping fields, in grouping order) to. A live change
/// of parallelism hands keyed state to the same task with it; the plugin
/// API exports it, so a plugin can pick keys its task owns.
pub use squall_plugin_api::state::key_index;

impl Router {
    /// A router over `tasks` (non-empty), starting round robin at `seed`.
    pub fn new(grouping: Grouping, tasks: Vec<u32>, seed: u64) -> Self {
        let next = (seed % tasks.len().max(1) as u64) as usize;
        Self { grouping, tasks, next, custom: None }
    }

    /// A router with a custom grouping's instance (built by
    /// [`CustomGrouping::instantiate`] for this sending task).
    pub fn with_instance(grouping: Grouping, tasks: Vec<u32>, instance: GroupingBox) -> Self {
        let mut router = Self::new(grouping, tasks, 0);
        router.custom = Some(CustomRouter {
            instance,
            chosen: RVec::new(),
            targets: Vec::new(),
            seen: Vec::new(),
            last_bad: None,
        });
        router
    }

    /// A custom grouping's first bad index of its last misrouted tuple
    /// (taken: the next call returns `None` until another tuple is
    /// misrouted), with the grouping.
    pub fn take_bad_index(&mut self) -> Option<(&CustomGrouping, BadIndex)> {
        let bad = self.custom.as_mut()?.last_bad.take()?;
        match &self.grouping {
            Grouping::Custom(custom) => Some((custom, bad)),
            _ => None,
        }
    }

    /// The grouping.
    pub fn grouping(&self) -> &Grouping {
        &self.grouping
    }

    /// The subscriber's tasks.
    pub fn tasks(&self) -> &[u32] {
        &self.tasks
    }

    /// The one task this router sends every tuple to, when that does not
    /// depend on the tuple: a shuffle-like, `all` or fields grouping over a
    /// single task (every key hashes to it), or `global`. `None` for the
    /// others (fields over several tasks, direct and custom groupings
    /// route per tuple).
    #[inline]
    pub fn single_target(&self) -> Option<u32> {
        match (&self.grouping, self.tasks.as_slice()) {
            (
                Grouping::Shuffle
                | Grouping::LocalOrShuffle
                | Grouping::None
                | Grouping::All
                | Grouping::Fields(_),
                [task],
            ) => Some(*task),
            (Grouping::Global, [first, ..]) => Some(*first),
            _ => None,
        }
    }

    /// Chooses the target tasks of a tuple. `direct` is the task named by
    /// `emit_direct`; it is honoured only by a direct grouping and only if it
    /// is one of this subscriber's tasks.
    // The shuffle-like groupings, the most common, are always inlined into
    // the emit path; the others are a call away.
    #[inline(always)]
    pub fn route(&mut self, values: &[Value], direct: Option<u32>) -> Targets<'_> {
        match &self.grouping {
            Grouping::Shuffle | Grouping::LocalOrShuffle | Grouping::None => {
                Targets::One(self.next_round_robin())
            }
            _ => self.route_other(values, direct),
        }
    }

    /// The next task of the round robin.
    #[inline(always)]
    fn next_round_robin(&mut self) -> u32 {
        let task = self.tasks[self.next];
        self.next += 1;
        if self.next == self.tasks.len() {
            self.next = 0;
        }
        task
    }

    /// [`route`](Self::route) for the groupings that are not shuffle-like.
    #[inline]
    fn route_other(&mut self, values: &[Value], direct: Option<u32>) -> Targets<'_> {
        match &self.grouping {
            Grouping::Shuffle | Grouping::LocalOrShuffle | Grouping::None => {
                Targets::One(self.next_round_robin())
            }
            Grouping::Fields(indexes) => {
                let key = indexes.iter().map(|&i| values.get(i).unwrap_or(&Value::Null));
                Targets::One(self.tasks[key_index(key, self.tasks.len())])
            }
            Grouping::All => Targets::Many(&self.tasks),
            Grouping::Global => Targets::One(self.tasks[0]),
            Grouping::Direct => match direct {
                Some(task) if self.tasks.contains(&task) => Targets::One(task),
                _ => Targets::Nothing,
            },
            Grouping::Custom(_) => match &mut self.custom {
                Some(custom) => custom.route(values, &self.tasks),
                None => Targets::Nothing,
            },
        }
    }
}

impl CustomRouter {
    /// Asks the instance. An index out of range is skipped, and an index
    /// named twice is delivered once; either is reported as a
    /// [`Targets::Misrouted`] (the transfer counts it as an error and fails
    /// the tree of a tuple that an out-of-range index dropped).
    fn route(&mut self, values: &[Value], tasks: &[u32]) -> Targets<'_> {
        self.chosen.clear();
        self.instance.choose(values.into(), &mut self.chosen);
        self.targets.clear();
        if let [one] = self.chosen.as_slice() {
            // The common case: one index, no duplicate possible.
            if let Some(&task) = tasks.get(*one as usize) {
                return Targets::One(task);
            }
            self.last_bad = Some(BadIndex { index: *one, tasks: tasks.len(), out_of_range: true });
            return Targets::Misrouted(&[], Misroute { out_of_range: 1, duplicated: 0 });
        }
        self.route_many(tasks)
    }

    /// `route` for any number of chosen indices but one: each in range
    /// delivered once, in the order chosen.
    fn route_many(&mut self, tasks: &[u32]) -> Targets<'_> {
        let mut misroute = Misroute::default();
        if self.seen.len() * 64 < tasks.len() {
            self.seen.resize(tasks.len().div_ceil(64), 0);
        }
        let mut first_bad = None;
        for &i in self.chosen.iter() {
            let Some(&task) = tasks.get(i as usize) else {
                misroute.out_of_range += 1;
                first_bad.get_or_insert(BadIndex {
                    index: i,
                    tasks: tasks.len(),
                    out_of_range: true,
                });
                continue;
            };
            let (word, bit) = (i as usize / 64, 1u64 << (i % 64));
            if self.seen[word] & bit != 0 {
                misroute.duplicated += 1;
                first_bad.get_or_insert(BadIndex {
                    index: i,
                    tasks: tasks.len(),
                    out_of_range: false,
                });
                continue;
            }
            self.seen[word] |= bit;
            self.targets.push(task);
        }
        for &i in self.chosen.iter() {
            if let Some(word) = self.seen.get_mut(i as usize / 64) {
                *word = 0;
            }
        }
        if misroute.any() {
            self.last_bad = first_bad;
            return Targets::Misrouted(&self.targets, misroute);
        }
        match self.targets.as_slice() {
            [] => Targets::Nothing,
            [one] => Targets::One(*one),
            _ => Targets::Many(&self.targets),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(
        router: &mut Router,
        tuples: &[Vec<Value>],
    ) -> std::collections::BTreeMap<u32, usize> {
        let mut out = std::collections::BTreeMap::new();
        for t in tuples {
            match router.route(t, None) {
                Targets::One(task) => *out.entry(task).or_default() += 1,
                Targets::Many(tasks) => {
                    tasks.iter().for_each(|&task| *out.entry(task).or_default() += 1)
                }
                Targets::Misrouted(tasks, _) => {
                    tasks.iter().for_each(|&task| *out.entry(task).or_default() += 1)
                }
                Targets::Nothing => {}
            }
        }
        out
    }

    #[test]
    fn shuffle_spreads_evenly() {
        let mut r = Router::new(Grouping::Shuffle, vec![3, 4, 5], 7);
        let tuples: Vec<Vec<Value>> = (0..300).map(|i| vec![Value::I64(i)]).collect();
        assert_eq!(counts(&mut r, &tuples).into_values().collect::<Vec<_>>(), [100, 100, 100]);
    }

    #[test]
    fn fields_sends_equal_keys_to_one_task_and_spreads_keys() {
        let mut r = Router::new(Grouping::Fields(vec![0]), vec![0, 1, 2, 3], 0);
        let mut seen = std::collections::HashMap::new();
        for i in 0..1000 {
            let key = format!("key{}", i % 50);
            let t = match r.route(&[Value::from(key.as_str()), Value::I64(i)], None) {
                Targets::One(t) => t,
                other => panic!("{other:?}"),
            };
            assert_eq!(*seen.entry(key).or_insert(t), t, "a key moved between tasks");
        }
        let used: std::collections::HashSet<u32> = seen.values().copied().collect();
        assert_eq!(used.len(), 4, "50 keys should reach all 4 tasks");
    }

    #[test]
    fn key_index_spreads_strings_and_integers_evenly_over_any_task_count() {
        // 20,000 distinct keys of each kind: every task gets within 10 % of
        // its share, for task counts that are and are not powers of two.
        let strings: Vec<Value> = (0..20_000).map(|i| Value::from(format!("word{i}"))).collect();
        let ints: Vec<Value> = (0..20_000).map(Value::I64).collect();
        let spaced: Vec<Value> = (0..20_000).map(|i| Value::U64(i << 20)).collect();
        for keys in [&strings, &ints, &spaced] {
            for n in [2usize, 3, 4, 7, 16] {
                let mut per_task = vec![0usize; n];
                for k in keys.iter() {
                    let i = key_index(std::iter::once(k), n);
                    assert!(i < n);
                    per_task[i] += 1;
                }
                let share = keys.len() / n;
                for (task, &c) in per_task.iter().enumerate() {
                    assert!(
                        c.abs_diff(share) <= share / 10,
                        "{n} tasks: task {task} got {c} of {} keys ({:?})",
                        keys.len(),
                        &keys[0]
                    );
                }
            }
        }
        assert_eq!(key_index(std::iter::once(&Value::from("x")), 1), 0);
        assert_eq!(key_index(std::iter::once(&Value::from("x")), 0), 0, "no task: index 0");
    }

    #[test]
    fn fields_routing_ignores_string_storage() {
        let mut r = Router::new(Grouping::Fields(vec![0]), (0..16).collect(), 0);
        let long = "a-long-key-that-does-not-fit-inline-at-all";
        let a = format!("{:?}", r.route(&[Value::from(long)], None));
        let b = format!("{:?}", r.route(&[Value::shared_str(long)], None));
        assert_eq!(a, b);
    }

    #[test]
    fn all_global_and_direct_route_as_storm_does() {
        let mut all = Router::new(Grouping::All, vec![1, 2], 0);
        assert_eq!(all.route(&[], None), Targets::Many(&[1, 2]));
        let mut global = Router::new(Grouping::Global, vec![4, 5, 6], 2);
        assert_eq!(global.route(&[], None), Targets::One(4));
        let mut direct = Router::new(Grouping::Direct, vec![7, 8], 0);
        assert_eq!(direct.route(&[], Some(8)), Targets::One(8));
        assert_eq!(direct.route(&[], Some(9)), Targets::Nothing);
        assert_eq!(direct.route(&[], None), Targets::Nothing);
    }

    #[test]
    fn a_fields_grouping_over_one_task_has_that_task_as_its_single_target() {
        let mut one = Router::new(Grouping::Fields(vec![0]), vec![6], 0);
        assert_eq!(one.single_target(), Some(6));
        for v in [Value::from("the"), Value::from("cow"), Value::I64(42)] {
            assert_eq!(one.route(&[v], None), Targets::One(6), "every key routes to it");
        }
        assert_eq!(one.route(&[], None), Targets::One(6), "a missing field too");
        let several = Router::new(Grouping::Fields(vec![0]), vec![6, 7], 0);
        assert_eq!(several.single_target(), None);
        let direct = Router::new(Grouping::Direct, vec![6], 0);
        assert_eq!(direct.single_target(), None, "a direct emit names its task");
    }
}
