//! Topologies built by hand for unit tests (the runtime's, durable state's): no file is read
//! and no plugin is loaded (every factory fails, and none is called).

use abi_stable::std_types::RStr;
use squall_plugin_api::abi::{ComponentBox, PResult};
use squall_plugin_api::{ErrorKind, PluginError, StreamDecl};

use super::{
    Component, Grouping, Input, Kind, LibraryInfo, OutputStream, Subscriber, Topology, WaitPlan,
};
use crate::config::{Loc, Settings, WaitSpec};
use crate::plugin::Factory;

extern "C" fn never(_config: RStr<'_>) -> PResult<ComponentBox> {
    abi_stable::std_types::RResult::RErr(PluginError::new(ErrorKind::RUNTIME, "not built"))
}

/// A component of `lib` with one output stream, `default` (field `value`),
/// no inputs and no subscribers.
pub(crate) fn component(name: &str, kind: Kind, tasks: std::ops::Range<u32>) -> Component {
    let park = WaitPlan::Builtin(WaitSpec::Park { park_micros: 0 });
    Component {
        name: name.to_owned(),
        kind,
        reference: format!("lib::{name}"),
        loc: Loc::new(3, 1),
        factory: Factory::V1(never),
        input_fields: Vec::new(),
        config: String::new(),
        tasks,
        retired: Vec::new(),
        outputs: vec![OutputStream {
            decl: StreamDecl {
                name: "default".into(),
                fields: vec!["value".into()].into(),
                direct: false,
            },
            subscribers: Vec::new(),
        }],
        default_stream: Some(0),
        auto_ack: true,
        windowed: false,
        ids_survive_swap: false,
        window: None,
        inputs: Vec::new(),
        tick_tuple_freq_secs: None,
        throttle: None,
        max_spout_pending: None,
        wait: [park.clone(), park.clone(), park],
        outdated: false,
        close_budget: None,
        needs_ticks: None,
        checkpoints: false,
        chain_from: None,
    }
}

/// A shuffle input from the default stream of component `from`.
pub(crate) fn input(from: usize) -> Input {
    Input { from, stream: 0, grouping: Grouping::Shuffle, loc: Loc::new(9, 1), throttle: None }
}

/// A bolt on `tasks` that subscribes to each of `from`.
pub(crate) fn bolt(name: &str, tasks: std::ops::Range<u32>, from: &[usize]) -> Component {
    let mut bolt = component(name, Kind::Bolt, tasks);
    bolt.inputs = from.iter().map(|&f| input(f)).collect();
    bolt
}

/// `components` as a topology named "t" from `t.toml`, every component of
/// library `lib` (digest "d1"): the subscribers follow from the inputs, and
/// the task count from the highest task.
pub(crate) fn linked(mut components: Vec<Component>) -> Topology {
    for c in &mut components {
        for stream in &mut c.outputs {
            stream.subscribers.clear();
        }
    }
    let edges: Vec<(usize, usize, u32, Grouping, Vec<u32>)> = components
        .iter()
        .enumerate()
        .flat_map(|(to, c)| {
            c.inputs
                .iter()
                .map(move |i| (to, i.from, i.stream, i.grouping.clone(), c.tasks.clone().collect()))
        })
        .collect();
    for (to, from, stream, grouping, tasks) in edges {
        components[from].outputs[stream as usize].subscribers.push(Subscriber {
            component: to,
            grouping,
            tasks,
            pairwise: false,
        });
    }
    let task_count =
        components.iter().flat_map(Component::counted_tasks).max().map_or(0, |t| t + 1);
    Topology {
        name: "t".into(),
        settings: Settings::default(),
        components,
        task_count,
        file: "t.toml".into(),
        sources: Default::default(),
        libraries: vec![LibraryInfo {
            alias: "lib".into(),
            path: "lib.so".into(),
            digest: "d1".into(),
        }],
        state: None,
        simulated: None,
    }
}

/// spout "s" (task 0) -> bolt "b" (tasks 1 and 2, shuffle).
pub(crate) fn topology() -> Topology {
    linked(vec![component("s", Kind::Spout, 0..1), bolt("b", 1..3, &[0])])
}
