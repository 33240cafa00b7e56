//! Sticky fair shares: which partitions this host takes and gives up, from
//! what it sees of the leases and the members. A pure function of the view,
//! so every rule is tested here without a broker or a clock.
//!
//! # The rules
//! With `P` partitions and `H` live members, `base = P / H` and
//! `extra = P % H`: a fair assignment gives `base + 1` partitions to `extra`
//! hosts and `base` to the others. Each host, on its own:
//!
//! 1. **Keeps what it holds** up to its share: partitions never move
//!    between hosts that both stay under their share (sticky).
//! 2. **Its share** is `base + 1` if it is among the first `extra` (by host
//!    id) of the live hosts that hold more than `base`, counting itself as
//!    one of them when it holds `base` or more; otherwise `base`.
//! 3. **Gives up** what it holds beyond its share, highest partitions first,
//!    after a graceful stop (the caller does that).
//! 4. **Takes** free partitions, lowest first, up to its share. A partition
//!    is free when its key is absent, when it was released, when it still
//!    names this host (an earlier run with the same host id), or when its
//!    lease has not changed for the lease time on this host's clock (its
//!    owner stopped renewing). Taking is a compare-and-set in the broker, so
//!    two hosts that both try get one winner.
//!
//! A member is live while its heartbeat changed within the lease time, or
//! until it says it is leaving or left. Hosts act on views that may differ for a moment
//! (one has seen a join, another not yet); the compare-and-set keeps each
//! partition with one owner at a time, and the shares settle once the views
//! agree (see the convergence test).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// What a lease key holds (JSON in the broker).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeaseValue {
    /// The host holding it; `None` once released.
    pub owner: Option<String>,
    /// The fencing epoch: one more at every change of owner.
    pub epoch: u64,
}

/// A key as last read, with when this host first saw its revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen<T> {
    /// The broker's revision of the key.
    pub revision: u64,
    /// Its value.
    pub value: T,
    /// When this host first saw this revision (its own clock).
    pub since: Instant,
}

/// What one host sees of its group.
#[derive(Debug, Clone)]
pub struct View {
    /// This host.
    pub me: String,
    /// How many partitions the group has.
    pub partitions: u32,
    /// The lease time.
    pub lease: Duration,
    /// Each partition's lease key (`None`: absent).
    pub leases: BTreeMap<u32, Option<Seen<LeaseValue>>>,
    /// Every member's heartbeat: `true` while it runs, `false` once it left.
    pub members: BTreeMap<String, Seen<bool>>,
    /// The partitions this host holds (its own record, not the broker's).
    pub held: BTreeSet<u32>,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Take `partition`: create its key (`revision: None`) or replace the
    /// value of `revision`, with owner this host and `epoch`.
    Take {
        /// The partition.
        partition: u32,
        /// The revision to replace (`None`: the key is absent).
        revision: Option<u64>,
        /// The new epoch.
        epoch: u64,
        /// The host it is taken from because its lease expired (`None`: it
        /// was free).
        from: Option<String>,
    },
    /// Stop `partition` gracefully, then release it.
    Release {
        /// The partition.
        partition: u32,
    },
}

impl View {
    /// The live members, this host always among them.
    pub fn live(&self, now: Instant) -> BTreeSet<&str> {
        let mut live: BTreeSet<&str> = self
            .members
            .iter()
            .filter(|(_, seen)| seen.value && now.duration_since(seen.since) < self.lease)
            .map(|(id, _)| id.as_str())
            .collect();
        live.insert(self.me.as_str());
        live
    }

    /// The next instant after `now` at which, unless renewed before, a
    /// lease another host holds expires or another live member's heartbeat
    /// ages out: when the plan may change without anything being written.
    pub fn next_expiry(&self, now: Instant) -> Option<Instant> {
        let leases = self
            .leases
            .values()
            .flatten()
            .filter(|seen| seen.value.owner.as_deref().is_some_and(|o| o != self.me))
            .map(|seen| seen.since + self.lease);
        let members = self
            .members
            .iter()
            .filter(|(id, seen)| seen.value && **id != self.me)
            .map(|(_, seen)| seen.since + self.lease);
        leases.chain(members).filter(|at| *at > now).min()
    }

    /// How many partitions each live member holds, as the leases say (this
    /// host: as it knows).
    fn counts<'a>(&'a self, live: &BTreeSet<&'a str>) -> BTreeMap<&'a str, u32> {
        let mut counts: BTreeMap<&str, u32> = live.iter().map(|id| (*id, 0)).collect();
        for seen in self.leases.values().flatten() {
            if let Some(owner) = seen.value.owner.as_deref() {
                if owner != self.me {
                    if let Some(c) = counts.get_mut(owner) {
                        *c += 1;
                    }
                }
            }
        }
        counts.insert(self.me.as_str(), self.held.len() as u32);
        counts
    }

    /// This host's share now (rule 2).
    pub fn share(&self, now: Instant) -> u32 {
        let live = self.live(now);
        let hosts = live.len() as u32;
        let (base, extra) = (self.partitions / hosts, self.partitions % hosts);
        if extra == 0 {
            return base;
        }
        let counts = self.counts(&live);
        let mine = counts.get(self.me.as_str()).copied().unwrap_or(0);
        let ahead = counts
            .iter()
            .filter(|(id, c)| **id != self.me && **c > base && **id < self.me.as_str())
            .count() as u32;
        let others_over =
            counts.iter().filter(|(id, c)| **id != self.me && **c > base).count() as u32;
        if mine > base {
            // Among the holders of more than `base`, the first `extra` by id keep one more.
            if ahead < extra {
                base + 1
            } else {
                base
            }
        } else if others_over < extra {
            base + 1
        } else {
            base
        }
    }

    /// Whether `partition` is free for this host at `now` (rule 4), and
    /// from whom it would be taken.
    fn free(&self, partition: u32, now: Instant) -> Option<(Option<u64>, u64, Option<String>)> {
        match self.leases.get(&partition) {
            None | Some(None) => Some((None, 1, None)),
            Some(Some(seen)) => {
                let next = seen.value.epoch + 1;
                match seen.value.owner.as_deref() {
                    None => Some((Some(seen.revision), next, None)),
                    Some(owner) if owner == self.me => Some((Some(seen.revision), next, None)),
                    Some(owner) if now.duration_since(seen.since) >= self.lease => {
                        Some((Some(seen.revision), next, Some(owner.to_owned())))
                    }
                    Some(_) => None,
                }
            }
        }
    }

    /// What this host should do now; `busy` partitions (starting or
    /// stopping) are left alone, and `avoid` ones are not taken.
    pub fn plan(&self, now: Instant, busy: &BTreeSet<u32>, avoid: &BTreeSet<u32>) -> Vec<Action> {
        let share = self.share(now) as usize;
        let mut actions = Vec::new();
        let held = self.held.len();
        if held > share {
            let extra = self.held.iter().rev().filter(|p| !busy.contains(p)).take(held - share);
            actions.extend(extra.map(|&partition| Action::Release { partition }));
            return actions;
        }
        let want = share - held;
        let free = (0..self.partitions)
            .filter(|p| !self.held.contains(p) && !avoid.contains(p))
            .filter_map(|p| self.free(p, now).map(|f| (p, f)))
            .take(want);
        for (partition, (revision, epoch, from)) in free {
            actions.push(Action::Take { partition, revision, epoch, from });
        }
        actions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(5);

    fn lease(owner: Option<&str>, epoch: u64, revision: u64, since: Instant) -> Seen<LeaseValue> {
        Seen { revision, value: LeaseValue { owner: owner.map(str::to_owned), epoch }, since }
    }

    /// The group as the broker holds it, and every host's own record.
    struct Group {
        partitions: u32,
        leases: BTreeMap<u32, Seen<LeaseValue>>,
        hosts: BTreeMap<String, BTreeSet<u32>>,
        revision: u64,
        /// Partitions that left an owner: released, or taken from one.
        moves: u32,
    }

    impl Group {
        fn new(partitions: u32, hosts: &[&str]) -> Self {
            let hosts = hosts.iter().map(|h| ((*h).to_owned(), BTreeSet::new())).collect();
            Group { partitions, leases: BTreeMap::new(), hosts, revision: 0, moves: 0 }
        }

        fn view(&self, me: &str, at: Instant) -> View {
            View {
                me: me.to_owned(),
                partitions: self.partitions,
                lease: LEASE,
                leases: (0..self.partitions).map(|p| (p, self.leases.get(&p).cloned())).collect(),
                members: self
                    .hosts
                    .keys()
                    .map(|h| (h.clone(), Seen { revision: 1, value: true, since: at }))
                    .collect(),
                held: self.hosts[me].clone(),
            }
        }

        /// One host acts on its view; a take is a compare-and-set.
        fn step(&mut self, me: &str, at: Instant) -> bool {
            let actions = self.view(me, at).plan(at, &BTreeSet::new(), &BTreeSet::new());
            let changed = !actions.is_empty();
            for a in actions {
                self.revision += 1;
                match a {
                    Action::Take { partition, revision, epoch, from } => {
                        let current = self.leases.get(&partition).map(|s| s.revision);
                        assert_eq!(current, revision, "a stale compare-and-set would fail");
                        if from.is_some() || current.is_some() {
                            let old = &self.leases[&partition];
                            assert!(epoch > old.value.epoch, "the epoch grows");
                        }
                        if self.leases.get(&partition).and_then(|s| s.value.owner.clone()).is_some()
                        {
                            self.moves += 1;
                        }
                        self.leases.insert(partition, lease(Some(me), epoch, self.revision, at));
                        self.hosts.get_mut(me).unwrap().insert(partition);
                    }
                    Action::Release { partition } => {
                        let epoch = self.leases[&partition].value.epoch;
                        self.leases.insert(partition, lease(None, epoch, self.revision, at));
                        self.hosts.get_mut(me).unwrap().remove(&partition);
                        self.moves += 1;
                    }
                }
            }
            changed
        }

        /// The hosts still in the group renew their leases at `at` (a new
        /// revision each, seen from `at`).
        fn renew(&mut self, at: Instant) {
            let hosts = &self.hosts;
            for seen in self.leases.values_mut() {
                if seen.value.owner.as_deref().is_some_and(|o| hosts.contains_key(o)) {
                    self.revision += 1;
                    seen.revision = self.revision;
                    seen.since = at;
                }
            }
        }

        /// Every host acts in turn until nobody has anything to do.
        fn settle(&mut self, at: Instant) {
            for _ in 0..100 {
                let hosts: Vec<String> = self.hosts.keys().cloned().collect();
                let mut changed = false;
                for h in &hosts {
                    changed |= self.step(h, at);
                }
                if !changed {
                    return;
                }
            }
            panic!("the group did not settle");
        }

        fn shares(&self) -> Vec<usize> {
            let mut s: Vec<usize> = self.hosts.values().map(BTreeSet::len).collect();
            s.sort_unstable();
            s
        }

        fn check_one_owner_each(&self) {
            let mut owners: BTreeMap<u32, &str> = BTreeMap::new();
            for (h, held) in &self.hosts {
                for p in held {
                    assert!(owners.insert(*p, h).is_none(), "partition {p} held twice");
                    assert_eq!(self.leases[p].value.owner.as_deref(), Some(h.as_str()));
                }
            }
            assert_eq!(owners.len() as u32, self.partitions, "every partition is held");
        }
    }

    #[test]
    fn three_hosts_share_eight_partitions_three_three_two() {
        let at = Instant::now();
        let mut g = Group::new(8, &["a", "b", "c"]);
        g.settle(at);
        assert_eq!(g.shares(), [2, 3, 3]);
        g.check_one_owner_each();
    }

    #[test]
    fn shares_are_fair_for_every_count_of_hosts_and_partitions() {
        let at = Instant::now();
        let names = ["a", "b", "c", "d", "e", "f", "g"];
        for partitions in 1..=20 {
            for hosts in 1..=names.len() {
                let mut g = Group::new(partitions, &names[..hosts]);
                g.settle(at);
                g.check_one_owner_each();
                let s = g.shares();
                assert!(s[s.len() - 1] - s[0] <= 1, "{partitions} on {hosts}: {s:?}");
            }
        }
    }

    #[test]
    fn a_host_that_joins_takes_a_fair_share_and_only_that_moves() {
        let at = Instant::now();
        let mut g = Group::new(8, &["a", "b"]);
        g.settle(at);
        assert_eq!(g.shares(), [4, 4]);
        let before: BTreeMap<String, BTreeSet<u32>> = g.hosts.clone();
        g.moves = 0;
        g.hosts.insert("c".into(), BTreeSet::new());
        g.settle(at);
        assert_eq!(g.shares(), [2, 3, 3]);
        g.check_one_owner_each();
        assert_eq!(g.moves, 2, "only the two partitions the joiner needs move");
        for h in ["a", "b"] {
            assert!(g.hosts[h].is_subset(&before[h]), "{h} kept what it kept");
        }
    }

    #[test]
    fn four_partitions_on_three_hosts_give_the_joiner_one() {
        let at = Instant::now();
        let mut g = Group::new(4, &["a", "b"]);
        g.settle(at);
        g.moves = 0;
        g.hosts.insert("c".into(), BTreeSet::new());
        g.settle(at);
        assert_eq!(g.shares(), [1, 1, 2]);
        assert_eq!(g.moves, 1, "one partition moves");
        g.check_one_owner_each();
    }

    #[test]
    fn a_dead_hosts_partitions_are_taken_only_after_the_lease_time() {
        let at = Instant::now();
        let mut g = Group::new(8, &["a", "b", "c"]);
        g.settle(at);
        let dead = g.hosts.remove("c").unwrap();
        // Before the lease time, the survivors see c's leases as held, and c
        // as a member (its heartbeat changed just now).
        let mut early = g.view("a", at);
        early.members.insert("c".into(), Seen { revision: 1, value: true, since: at });
        let soon = at + LEASE - Duration::from_millis(1);
        let takes = early.plan(soon, &BTreeSet::new(), &BTreeSet::new());
        assert!(takes.is_empty(), "{takes:?}");
        // The instant the plan changes is foreseen: c's leases and its
        // heartbeat expire a lease time after they were seen.
        assert_eq!(early.next_expiry(soon), Some(at + LEASE));
        // After it, they take them, with higher epochs, from c (the
        // survivors renewed theirs meanwhile).
        g.renew(soon);
        let later = at + LEASE;
        let mut view = g.view("a", at);
        view.members.insert("c".into(), Seen { revision: 1, value: true, since: at });
        let takes = view.plan(later, &BTreeSet::new(), &BTreeSet::new());
        assert!(!takes.is_empty());
        // What expires next is b's renewal of `soon`, after `later`.
        assert_eq!(view.next_expiry(later), Some(soon + LEASE));
        for t in &takes {
            let Action::Take { partition, from, epoch, .. } = t else { panic!("{t:?}") };
            assert!(dead.contains(partition), "{t:?}");
            assert_eq!(from.as_deref(), Some("c"));
            assert_eq!(*epoch, g.leases[partition].value.epoch + 1);
        }
        g.settle(later);
        assert_eq!(g.shares(), [4, 4]);
        g.check_one_owner_each();
    }

    #[test]
    fn a_member_that_said_it_left_no_longer_counts() {
        let at = Instant::now();
        let mut view = Group::new(8, &["a"]).view("a", at);
        view.members.insert("b".into(), Seen { revision: 3, value: false, since: at });
        assert_eq!(view.share(at), 8);
        view.members.insert("b".into(), Seen { revision: 4, value: true, since: at });
        assert_eq!(view.share(at), 4);
    }

    #[test]
    fn a_lease_that_still_names_this_host_is_taken_back_at_once_with_a_new_epoch() {
        let at = Instant::now();
        let mut view = Group::new(2, &["a"]).view("a", at);
        view.leases.insert(0, Some(lease(Some("a"), 6, 40, at)));
        view.leases.insert(1, Some(lease(Some("zz"), 2, 41, at)));
        let actions = view.plan(at, &BTreeSet::new(), &BTreeSet::new());
        assert_eq!(
            actions,
            [Action::Take { partition: 0, revision: Some(40), epoch: 7, from: None }],
            "zz's live lease is left alone"
        );
    }

    #[test]
    fn busy_and_avoided_partitions_are_left_alone() {
        let at = Instant::now();
        let mut view = Group::new(4, &["a", "b"]).view("a", at);
        view.held = [0, 1, 2, 3].into();
        let busy: BTreeSet<u32> = [3].into();
        let actions = view.plan(at, &busy, &BTreeSet::new());
        // The share is 2 (b is live and holds none): give up 2, not the busy 3.
        assert_eq!(actions, [Action::Release { partition: 2 }, Action::Release { partition: 1 }]);
        let mut view = Group::new(2, &["a"]).view("a", at);
        view.held.clear();
        let avoid: BTreeSet<u32> = [0].into();
        let actions = view.plan(at, &BTreeSet::new(), &avoid);
        assert_eq!(actions, [Action::Take { partition: 1, revision: None, epoch: 1, from: None }]);
    }
}
