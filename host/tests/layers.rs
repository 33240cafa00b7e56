//! The host's modules form layers that point one way: a module uses only
//! the modules of the layers below its own. The table is written once, here;
//! a `crate::` path anywhere in a module's files (its tests included;
//! comments aside) that reaches its own layer or a higher one fails this
//! test, naming the file, the line and the path.

use std::path::{Path, PathBuf};

/// From the bottom up. A module may use the modules of the layers before its
/// own, never its own layer's others or a later layer's.
const LAYERS: &[&[&str]] = &[
    // Ids, the clock, the "stop waiting" signal, and opening the files a
    // user names (regular files only, read up to a cap).
    &["ids", "clock", "cancel", "files"],
    // Throttling (HDFS's throttler and the smooth one).
    &["throttle"],
    // Loading plugin libraries and calling them.
    &["plugin"],
    // The TOML model, its validation and errors.
    &["config"],
    // The bound topology: components, tasks, streams, groupings.
    &["topology"],
    // What the executors are built from: counters, waits, timeouts, queues,
    // and the tap points `squall tap` reads.
    &["metrics", "wait", "timeout", "queue", "tap"],
    // The run state and the messages every task reads.
    &["control"],
    // The ackers, and durable state's checkpoints (coordinator, backends,
    // restore): both take task messages and answer through control.
    &["acker", "state"],
    // The spout and bolt loops, and their side of a live swap.
    &["executor"],
    // Planning, starting, steering, reloading and stopping a topology.
    &["runtime"],
    // Running a topology in process on fixed input (the harness crate and
    // `squall test`).
    &["harness"],
    // Groups of hosts sharing partitions, as a coordinator plugin assigns them.
    &["group"],
    // The HTTP endpoint.
    &["http"],
    // The command line.
    &["cli"],
];

fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file, line by line, comments blanked out. Test modules
/// and test files are code too: a test that reaches up the layers couples
/// them as much as the code it tests.
fn code(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.split("//").next().unwrap_or_default().to_owned()))
        .collect()
}

/// Every `crate::module` a line names.
fn crate_paths(line: &str) -> Vec<&str> {
    line.match_indices("crate::")
        .filter(|(at, _)| {
            // Not `squall_crate::` or the like.
            *at == 0
                || !line.as_bytes()[at - 1].is_ascii_alphanumeric()
                    && line.as_bytes()[at - 1] != b'_'
        })
        .map(|(at, _)| {
            let rest = &line[at + "crate::".len()..];
            let end =
                rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
            &rest[..end]
        })
        .collect()
}

/// Every use of a module at or above the using module's layer.
fn violations(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for path in files {
        let rel = path.strip_prefix(src).expect("under src");
        let top = rel.components().next().and_then(|c| c.as_os_str().to_str()).unwrap_or_default();
        let top = top.trim_end_matches(".rs");
        if top == "lib" || top == "main" {
            continue;
        }
        let Some(own) = layer(top) else {
            found.push(format!("{}: module `{top}` is in no layer of LAYERS", rel.display()));
            continue;
        };
        let text = std::fs::read_to_string(&path).expect("read a source file");
        for (line, code) in code(&text) {
            for used in crate_paths(&code) {
                if used == top {
                    continue;
                }
                match layer(used) {
                    Some(l) if l < own => {}
                    Some(l) => found.push(format!(
                        "{}:{line}: `{top}` (layer {own}) uses `crate::{used}` (layer {l}): \
                         a layer may only use the layers below it",
                        rel.display()
                    )),
                    None => found.push(format!(
                        "{}:{line}: `crate::{used}` is in no layer of LAYERS",
                        rel.display()
                    )),
                }
            }
        }
    }
    found
}

#[test]
fn the_host_modules_use_only_the_layers_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&src);
    assert!(found.is_empty(), "{} layering violation(s):\n{}", found.len(), found.join("\n"));
}

#[test]
fn the_check_sees_an_upward_use_in_code_and_in_tests_and_ignores_comments() {
    let dir = std::env::temp_dir().join(format!("squall-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("config")).expect("a folder");
    std::fs::write(
        dir.join("config/mod.rs"),
        "//! See [`x`](crate::runtime::X).\nuse crate::plugin::A;\nfn f() { crate::http::parse(); }\n\
         #[cfg(test)]\nmod tests {\n    use crate::runtime::Y;\n}\n",
    )
    .expect("write");
    std::fs::write(dir.join("config/model_tests.rs"), "use crate::cli::Z;\n").expect("write");
    let found = violations(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(
        found[0].starts_with("config/mod.rs:3: `config` (layer 3) uses `crate::http`"),
        "{found:?}"
    );
    assert!(
        found[1].starts_with("config/mod.rs:6: `config` (layer 3) uses `crate::runtime`"),
        "{found:?}"
    );
    assert!(
        found[2].starts_with("config/model_tests.rs:1: `config` (layer 3) uses `crate::cli`"),
        "{found:?}"
    );
}
