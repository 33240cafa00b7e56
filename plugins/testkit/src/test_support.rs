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
    use squall_plugin_api::{ComponentTasks, StreamDecl, TaskContext};
    TaskContext {
        topology: "test".into(),
        component: component.into(),
        task_id,
        task_index,
        parallelism: task_index + 1,
        outputs: outputs
            .iter()
            .map(|&(name, direct)| StreamDecl {
                name: name.into(),
                fields: vec!["value".into()].into(),
                direct,
            })
            .collect(),
        downstream: downstream
            .iter()
            .map(|&(name, tasks)| ComponentTasks {
                component: name.into(),
                tasks: tasks.to_vec().into(),
            })
            .collect(),
    }
}

/// A fresh, empty directory under the system temp dir, unique to this test.
pub(crate) fn temp_dir(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("squall-testkit-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the system temp dir is writable");
    dir
}
