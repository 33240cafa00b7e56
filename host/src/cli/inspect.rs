//! `squall inspect`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use super::Failure;
use crate::plugin::load_library;

/// Prints a library's catalogue: components, kinds, streams, fields, contract version.
///
/// A closed stdout (`squall inspect x.so | head -1`) ends the output quietly,
/// as `ls | head` does.
pub fn inspect(path: &Path) -> Result<(), Failure> {
    let alias =
        path.file_stem().map_or_else(|| "plugin".to_owned(), |s| s.to_string_lossy().into_owned());
    let library = load_library(&alias, path, None).map_err(|e| Failure::Load(vec![e]))?;
    let mut out = String::new();
    let c = &library.catalogue;
    let _ = writeln!(out, "plugin {} {} (contract {})", c.plugin, c.version, c.contract_version);
    let _ = writeln!(out, "path   {}", path.display());
    for d in c.components.iter() {
        let basic = if d.auto_ack { " (basic: acked by the host)" } else { "" };
        let _ = writeln!(out, "  {:<14} {}{}", d.kind.name(), d.name, basic);
        if !d.description.is_empty() {
            let _ = writeln!(out, "  {:<14}   {}", "", d.description);
        }
        for s in d.outputs.iter() {
            let fields: Vec<&str> = s.fields.iter().map(|f| f.as_str()).collect();
            let direct = if s.direct { " direct" } else { "" };
            let _ =
                writeln!(out, "  {:<14}   stream {}{direct} [{}]", "", s.name, fields.join(", "));
        }
    }
    match std::io::stdout().lock().write_all(out.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
