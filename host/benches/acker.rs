//! Benchmarks for the acker's pure cores: [`AckLedger`] (one acker task's
//! bookkeeping) and [`RotatingMap`] (the spout's pending map).
//!
//! Both sit on the per-tuple hot path when acking is on. Every spout tuple
//! costs the spout one `put` and one `remove`, and costs the acker one `init`
//! plus one `ack` per edge. Throughput is counted in roots (spout tuples), so
//! the figures read as "roots per second one acker task can settle", leaving
//! out channels and threads. Ids are drawn before timing starts.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use squall_host::acker::ledger::AckLedger;
use squall_host::ids::{EdgeId, RootId, TaskId};
use squall_host::timeout::rotating_map::RotatingMap;
use squall_plugin_api::rng::SplitMix64;

/// Roots settled per timed iteration.
const ROOTS: usize = 1024;
/// Roots in flight in the steady-state benches (a typical `max_spout_pending`).
const IN_FLIGHT: usize = 1000;
const SPOUT: TaskId = TaskId(1);

/// `n` random-looking ids, as the executors' RNG draws them (SplitMix64,
/// here from a fixed seed).
fn random_ids(seed: u64, n: usize) -> Vec<u64> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| rng.next_u64()).collect()
}

/// Pairs of (root id, edge id) for `n` spout tuples sent to one task each.
fn roots_with_one_edge(n: usize) -> Vec<(RootId, EdgeId)> {
    let roots = random_ids(1, n);
    let edges = random_ids(2, n);
    roots.into_iter().zip(edges).map(|(r, e)| (RootId(r), EdgeId(e))).collect()
}

/// `AckLedger`: init + ack until the root completes, per root.
fn ack_ledger(c: &mut Criterion) {
    let mut group = c.benchmark_group("squall_host::acker::AckLedger");
    group.throughput(Throughput::Elements(ROOTS as u64));
    let roots = roots_with_one_edge(ROOTS);

    // A spout tuple sent to one bolt, which acks it: the minimal tree.
    group.bench_function("init_ack_complete/1_edge", |b| {
        let mut ledger = AckLedger::default();
        b.iter(|| {
            for &(root, edge) in &roots {
                black_box(ledger.init(root, edge, SPOUT));
                black_box(ledger.ack(root, edge));
            }
        })
    });

    // The bolt's ack overtakes the spout's init, so the ack creates the entry.
    group.bench_function("ack_init_complete/1_edge_ack_first", |b| {
        let mut ledger = AckLedger::default();
        b.iter(|| {
            for &(root, edge) in &roots {
                black_box(ledger.ack(root, edge));
                black_box(ledger.init(root, edge, SPOUT));
            }
        })
    });

    // A spout tuple sent to two bolts, one of which emits a child anchored on
    // its input: one init and three acks per root.
    let children = random_ids(3, 2 * ROOTS);
    group.bench_function("init_ack_complete/3_edge_tree", |b| {
        let mut ledger = AckLedger::default();
        b.iter(|| {
            for (i, &(root, a)) in roots.iter().enumerate() {
                let (b_edge, child) = (EdgeId(children[2 * i]), EdgeId(children[2 * i + 1]));
                black_box(ledger.init(root, a ^ b_edge, SPOUT));
                black_box(ledger.ack(root, a ^ child));
                black_box(ledger.ack(root, b_edge));
                black_box(ledger.ack(root, child));
            }
        })
    });

    // Steady state with IN_FLIGHT roots pending: each new root's init is
    // followed by the ack that completes the root emitted IN_FLIGHT earlier.
    let window = roots_with_one_edge(IN_FLIGHT + ROOTS);
    let mut prefilled = AckLedger::default();
    for &(root, edge) in &window[..IN_FLIGHT] {
        assert!(prefilled.init(root, edge, SPOUT).is_none());
    }
    group.bench_function("init_ack_complete/1000_in_flight", |b| {
        b.iter_batched_ref(
            || prefilled.clone(),
            |ledger| {
                for i in 0..ROOTS {
                    let (new_root, new_edge) = window[IN_FLIGHT + i];
                    black_box(ledger.init(new_root, new_edge, SPOUT));
                    let (old_root, old_edge) = window[i];
                    black_box(ledger.ack(old_root, old_edge));
                }
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// `RotatingMap`: one put and one remove per key, as the spout's pending map
/// does for each tuple.
fn rotating_map(c: &mut Criterion) {
    let mut group = c.benchmark_group("squall_host::timeout::RotatingMap");
    group.throughput(Throughput::Elements(ROOTS as u64));
    let keys = random_ids(4, ROOTS);

    for buckets in [2, 3] {
        group.bench_function(format!("put_remove/{buckets}_buckets"), |b| {
            let mut map = RotatingMap::new(buckets);
            b.iter(|| {
                for &key in &keys {
                    map.put(RootId(key), key);
                    black_box(map.remove(&RootId(key)));
                }
            })
        });
    }

    // Steady state: IN_FLIGHT keys spread over both buckets, each new put
    // followed by the remove of the key put IN_FLIGHT earlier.
    let window = random_ids(5, IN_FLIGHT + ROOTS);
    let mut prefilled = RotatingMap::new(2);
    for (i, &key) in window[..IN_FLIGHT].iter().enumerate() {
        if i == IN_FLIGHT / 2 {
            assert_eq!(prefilled.rotate().count(), 0);
        }
        prefilled.put(RootId(key), key);
    }
    group.bench_function("put_remove/2_buckets_1000_in_flight", |b| {
        b.iter_batched_ref(
            || prefilled.clone(),
            |map| {
                for i in 0..ROOTS {
                    map.put(RootId(window[IN_FLIGHT + i]), i as u64);
                    black_box(map.remove(&RootId(window[i])));
                }
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, ack_ledger, rotating_map);
criterion_main!(benches);
