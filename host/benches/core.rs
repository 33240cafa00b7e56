//! Criterion benches of squall's core pieces, for catching regressions:
//! - `transfer`: one queue hop — routing 1000 tuples into an outgoing batch,
//!   sending it over the bounded channel and receiving it (one thread);
//! - `grouping`: routing one tuple with a shuffle and with a fields grouping;
//! - `wait`: one `idle` call of each wait strategy level that returns
//!   quickly (progressive level 1 and 2, park 0 µs).
//!
//! Cross-implementation throughput claims live in the `throughput` bench.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use crossbeam_channel::bounded;
use squall_host::executor::transfer::{StreamRoutes, Transfer, TransferWiring};
use squall_host::ids::TaskId;
use squall_host::metrics::LocalStats;
use squall_host::topology::grouping::{Grouping, Router, Targets};
use squall_host::wait::park::Park;
use squall_host::wait::progressive::Progressive;
use squall_plugin_api::{StreamId, Value};

/// One hop: 1000 tuples routed, batched, sent and received.
fn transfer(c: &mut Criterion) {
    let mut group = c.benchmark_group("squall_host::executor::transfer::Transfer");
    group.throughput(Throughput::Elements(1000));
    let (tx, rx) = bounded(4);
    let routes = vec![StreamRoutes {
        name: "default".into(),
        direct: false,
        fields: 1,
        routers: vec![Router::new(Grouping::Shuffle, vec![1], 0)],
    }];
    let wiring = TransferWiring {
        batch_size: 1000,
        flush_interval: Duration::ZERO,
        streams: routes,
        default_stream: Some(0),
        queues: vec![None, Some(tx)],
        ackers: vec![],
        recycled: None,
        count_bytes: false,
        queue_bytes: Vec::new(),
        tap: Default::default(),
    };
    let mut transfer = Transfer::new(TaskId(0), wiring);
    let mut stats = LocalStats::default();
    let values = [Value::from("some data")];
    group.bench_function("route_push_send_recv_1000", |b| {
        b.iter(|| {
            for _ in 0..1000 {
                let (stream, n) =
                    transfer.route(StreamId::DEFAULT, &values, None).expect("declared stream");
                for i in 0..n {
                    let target = transfer.target(i);
                    transfer.push(target, stream, &values, &[], &mut stats);
                }
            }
            black_box(rx.try_recv().expect("a full batch was sent"));
        });
    });
    group.finish();
}

/// Routing one tuple.
fn grouping(c: &mut Criterion) {
    let mut group = c.benchmark_group("squall_host::topology::grouping::Router");
    group.throughput(Throughput::Elements(1));
    let mut shuffle = Router::new(Grouping::Shuffle, (0..4).collect(), 0);
    let mut fields = Router::new(Grouping::Fields(vec![0]), (0..4).collect(), 0);
    let tuple = [Value::from("jumped"), Value::U64(3)];
    let first = |t: Targets<'_>| match t {
        Targets::One(task) => task,
        _ => u32::MAX,
    };
    group.bench_function("shuffle_4_tasks", |b| {
        b.iter(|| black_box(first(shuffle.route(black_box(&tuple), None))))
    });
    group.bench_function("fields_4_tasks_short_string", |b| {
        b.iter(|| black_box(first(fields.route(black_box(&tuple), None))))
    });
    group.finish();
}

/// One idle call per strategy level that does not sleep for milliseconds.
fn wait(c: &mut Criterion) {
    let mut group = c.benchmark_group("squall_host::wait");
    let drain = squall_host::throttle::Canceler::new();
    let progressive = Progressive::new(u32::MAX, 0, 1);
    group.bench_function("progressive_level1_spin", |b| {
        b.iter(|| black_box(progressive.idle(black_box(0), &drain)))
    });
    let parking = Progressive::new(0, u32::MAX, 1);
    group.sample_size(20);
    group.bench_function("progressive_level2_park_1ns", |b| {
        b.iter(|| black_box(parking.idle(black_box(0), &drain)))
    });
    let park = Park::new(0);
    group
        .bench_function("park_0us_spin", |b| b.iter(|| black_box(park.idle(black_box(0), &drain))));
    group.finish();
}

criterion_group!(benches, transfer, grouping, wait);
criterion_main!(benches);
