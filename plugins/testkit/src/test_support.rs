//! Test helpers: task contexts and temp dirs. The recording `Output` is
//! `squall_plugin_api::testing::Recorder`.

/// A task context for `component`'s task `task_id` (index `task_index`),
/// with the given output streams `(name, direct)` and downstream
/// components `(name, tasks)`.
pub(crate) fn context(
    component: &str,
    task_id: u32,
    task_index: u32,
    outputs: &[(&str, bool)],
    downstream: &[(&str, &[u32])],
) -> squall_plugin_api::TaskContext {
    use squall_plugin_api::{OutputDeclarer, TaskContext};
    let mut declared = OutputDeclarer::default();
    for &(name, direct) in outputs {
        if direct {
            declared.declare_direct_stream(name, &["value"]);
        } else {
            declared.declare_stream(name, &["value"]);
        }
    }
    let mut builder =
        TaskContext::builder(component).task(task_id, task_index, task_index + 1).outputs(declared);
    for &(name, tasks) in downstream {
        builder = builder.downstream(name, tasks);
    }
    builder.build()
}

/// A fresh, empty directory under the system temp dir, unique to this test.
pub(crate) fn temp_dir(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("squall-testkit-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the system temp dir is writable");
    dir
}
