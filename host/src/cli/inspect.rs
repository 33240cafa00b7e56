//! `squall inspect`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use super::Failure;
use crate::plugin::{escape_controls, load_library};

/// Prints a library's catalogue: components, kinds, streams, fields, contract version.
///
/// A closed stdout (`squall inspect x.so | head -1`) ends the output quietly,
/// as `ls | head` does.
///
/// A bare file name (`squall inspect libx.so`) means the file in the current
/// folder: the loader opens the path itself and hands `dlopen` its open
/// descriptor, so `LD_LIBRARY_PATH` and the system folders are never
/// searched. Everything printed from the catalogue has its control
/// characters escaped: a library cannot write terminal escapes through it.
pub fn inspect(path: &Path) -> Result<(), Failure> {
    let alias = path
        .file_stem()
        .map_or_else(|| "plugin".to_owned(), |s| escape_controls(&s.to_string_lossy()));
    let library = load_library(&alias, path, None).map_err(|e| Failure::Load(vec![e]))?;
    let mut out = String::new();
    let c = &library.catalogue;
    let e = |text: &str| escape_controls(text);
    let _ = writeln!(
        out,
        "plugin {} {} (contract {})",
        e(&c.plugin),
        e(&c.version),
        e(&c.contract_version)
    );
    let _ = writeln!(out, "path   {}", e(&path.to_string_lossy()));
    for d in c.components.iter() {
        let basic = if d.auto_ack { " (basic: acked by the host)" } else { "" };
        let _ = writeln!(out, "  {:<14} {}{}", d.kind.name(), e(&d.name), basic);
        if !d.description.is_empty() {
            let _ = writeln!(out, "  {:<14}   {}", "", e(&d.description));
        }
        for s in d.outputs.iter() {
            let fields: Vec<String> = s.fields.iter().map(|f| e(f)).collect();
            let direct = if s.direct { " direct" } else { "" };
            let _ = writeln!(
                out,
                "  {:<14}   stream {}{direct} [{}]",
                "",
                e(&s.name),
                fields.join(", ")
            );
        }
    }
    match std::io::stdout().lock().write_all(out.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
