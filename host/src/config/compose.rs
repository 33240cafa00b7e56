//! `include = ["base.toml", ...]`: one topology composed from several files.
//!
//! # Rules
//!
//! - `include` is a top-level array of file names, each relative to the folder
//!   of the file that writes it (strings are interpolated like any other).
//!   An included file may include others.
//! - The files are applied in one order: every included file, depth first
//!   and each after the files it includes, in the order `include` lists
//!   them; then the including file. Each file overrides what came before it,
//!   key by key: a table merges into a table recursively; anything else (a
//!   scalar, an array, or a table meeting a non-table) replaces the earlier
//!   value. Arrays are never merged: `inputs` is replaced whole.
//! - A file that includes itself, directly or not, is an error, and so is an
//!   included file that cannot be read. At most [`MAX_INCLUDE_DEPTH`] levels
//!   and [`MAX_INCLUDED_FILES`] files, and all of them together at most
//!   [`super::MAX_TOPOLOGY_BYTES`].
//!
//! # How errors keep their place
//!
//! Every file is parsed on its own, and its spans are shifted into the
//! shared offset space of a [`SourceMap`] before the trees are merged. A key
//! that overrides keeps its own span; a table that merges keeps the span of
//! its first definition (so a spout declared in a base file stays where the
//! base file puts it, and file order is the order of first definition).
//! Errors found later, by the readers or against the plugins, therefore
//! point at the file that wrote the value.
//!
//! Reading happens in two passes, because the merged tree borrows every
//! text: [`read_tree`] reads and parses each file once to find its
//! includes, and [`merge`] parses the texts again, from the map, to build the
//! tree the readers walk.

use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::diagnostic::{Diagnostics, LineIndex};
use super::interpolate::interpolate;
use super::source::SourceMap;

/// Most levels of `include` below the topology file.
pub const MAX_INCLUDE_DEPTH: usize = 16;
/// Most files one topology may include, counted with repeats.
pub const MAX_INCLUDED_FILES: usize = 64;

/// A file and the files it includes, read but not yet merged.
#[derive(Debug)]
pub(crate) struct FileNode {
    path: PathBuf,
    text: String,
    includes: Vec<FileNode>,
}

/// Why an include is refused: the message and a help.
type Refusal = (String, Option<String>);

/// One entry of an `include` array, resolved.
struct Include {
    /// The file, resolved against the including file's folder.
    path: PathBuf,
    /// As written (after interpolation), for messages.
    written: String,
    /// Where it is written in the including file.
    span: Range<usize>,
}

/// Reads `text` (the content of `file`) and, recursively, every file it
/// includes.
///
/// # Errors
///
/// A syntax error in any file, a malformed `include`, a missing or unreadable
/// file, a cycle, or a limit crossed; each at the place that causes it.
pub(crate) fn read_tree(
    text: String,
    file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<FileNode, Diagnostics> {
    let mut reader = Reader { env, diags: Diagnostics::new(), files: 0, bytes: text.len() };
    let root = reader.node(file.to_path_buf(), text, &mut Vec::new());
    reader.diags.into_result(root)
}

struct Reader<'e> {
    env: &'e dyn Fn(&str) -> Option<String>,
    diags: Diagnostics,
    /// Included files read so far.
    files: usize,
    /// Bytes of every file read so far.
    bytes: usize,
}

impl Reader<'_> {
    /// Reads the includes of `path` (whose content is `text`). `chain` holds
    /// the files from the topology file down to `path`'s includer.
    fn node(&mut self, path: PathBuf, text: String, chain: &mut Vec<PathBuf>) -> FileNode {
        let includes = self.includes(&path, &text);
        chain.push(canonical(&path));
        let children = includes
            .into_iter()
            .filter_map(|include| self.child(&path, &text, include, chain))
            .collect();
        chain.pop();
        FileNode { path, text, includes: children }
    }

    /// Reads one included file, unless that breaks a rule (reported at the
    /// entry in `includer`, whose content is `text`).
    fn child(
        &mut self,
        includer: &Path,
        text: &str,
        include: Include,
        chain: &mut Vec<PathBuf>,
    ) -> Option<FileNode> {
        match self.check_limits(&include, chain).and_then(|()| self.read(&include)) {
            Ok(included) => Some(self.node(include.path, included, chain)),
            Err((message, help)) => {
                let loc = LineIndex::new(text).loc(include.span.start);
                self.diags.push(includer, loc, message, help);
                None
            }
        }
    }

    /// No cycle, and the depth and file count within their limits.
    fn check_limits(&mut self, include: &Include, chain: &[PathBuf]) -> Result<(), Refusal> {
        let target = canonical(&include.path);
        if let Some(start) = chain.iter().position(|p| *p == target) {
            let mut names: Vec<String> =
                chain[start..].iter().map(|p| p.display().to_string()).collect();
            names.push(target.display().to_string());
            return Err((format!("include cycle: {}", names.join(" -> ")), None));
        }
        if chain.len() > MAX_INCLUDE_DEPTH {
            return Err((format!("includes are nested more than {MAX_INCLUDE_DEPTH} deep"), None));
        }
        self.files += 1;
        if self.files > MAX_INCLUDED_FILES {
            let message = format!("the topology includes more than {MAX_INCLUDED_FILES} files");
            return Err((message, None));
        }
        Ok(())
    }

    /// The included file's text, within the size budget of all files together.
    fn read(&mut self, include: &Include) -> Result<String, Refusal> {
        let text = super::read_topology_file(&include.path).map_err(|e| {
            let message = format!(
                "cannot read included file \"{}\" ({}): {e}",
                include.written,
                include.path.display()
            );
            let help = "a relative include is relative to the folder of the file that includes it";
            (message, Some(help.to_string()))
        })?;
        self.bytes += text.len();
        if self.bytes as u64 > super::MAX_TOPOLOGY_BYTES {
            let message = format!(
                "the topology and its includes are larger than {} MiB together",
                super::MAX_TOPOLOGY_BYTES >> 20
            );
            return Err((message, None));
        }
        Ok(text)
    }

    /// The `include` entries of a file, resolved against its folder; reports
    /// a syntax error or a malformed entry.
    fn includes(&mut self, path: &Path, text: &str) -> Vec<Include> {
        let doc = match DeTable::parse(text) {
            Ok(doc) => doc,
            Err(e) => {
                self.diags.append(super::syntax_error(text, path, &e));
                return Vec::new();
            }
        };
        let Some(value) = doc.get_ref().get("include") else { return Vec::new() };
        let mut error = |span: &Range<usize>, message: String, help: &str| {
            let loc = LineIndex::new(text).loc(span.start);
            self.diags.push(path, loc, message, Some(help.to_string()));
        };
        let DeValue::Array(items) = value.get_ref() else {
            let help = "write include = [\"base.toml\", ...]";
            error(&value.span(), "\"include\" must be an array of file names".to_string(), help);
            return Vec::new();
        };
        let dir = path.parent().unwrap_or(Path::new(""));
        let mut out = Vec::new();
        for item in items.iter() {
            let span = item.span();
            let DeValue::String(name) = item.get_ref() else {
                error(&span, "an \"include\" entry must be a file name".to_string(), "quote it");
                continue;
            };
            let written = match interpolate(name, self.env) {
                Ok(written) => written,
                Err(errors) => {
                    for e in errors {
                        let help = e.help().unwrap_or_default();
                        error(&span, format!("\"include\" entry {e}"), &help);
                    }
                    continue;
                }
            };
            if written.is_empty() {
                error(&span, "an \"include\" entry is empty".to_string(), "name a file");
                continue;
            }
            out.push(Include { path: dir.join(&written), written, span });
        }
        out
    }
}

/// `path` made absolute with symbolic links resolved, for cycle checks; as it
/// is when that fails (a file given as text that does not exist on disk).
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Adds every file of `root` to `map` (the topology file first, so that its
/// index is 0) and lays them out in merge order. Returns the indices in merge
/// order.
pub(crate) fn add_sources(root: FileNode, map: &mut SourceMap) -> Vec<u32> {
    let mut order = Vec::new();
    add_node(root, map, &mut order);
    // `add_node` adds a file before its includes and lists it after them.
    map.lay_out(&order);
    order
}

fn add_node(node: FileNode, map: &mut SourceMap, order: &mut Vec<u32>) {
    let id = map.add_file(&node.path, node.text);
    for include in node.includes {
        add_node(include, map, order);
    }
    order.push(id);
}

/// Parses every source in `order` and merges them, each overriding the ones
/// before it. The `include` keys are dropped.
///
/// # Errors
///
/// A text that no longer parses (read twice, it changed nowhere: this cannot
/// happen, but it is reported rather than trusted).
pub(crate) fn merge<'t>(map: &'t SourceMap, order: &[u32]) -> Result<DeTable<'t>, Diagnostics> {
    let mut merged = DeTable::default();
    let names = map.names();
    for &id in order {
        let text = map.text(id);
        let file = names.names().get(id as usize).cloned().unwrap_or_default();
        let mut doc = DeTable::parse(text).map_err(|e| super::syntax_error(text, &file, &e))?;
        doc.get_mut().remove("include");
        merge_into(&mut merged, shift_table(doc.into_inner(), map.base(id)));
    }
    Ok(merged)
}

/// Merges `over` into `base`: tables merge recursively, anything else replaces.
pub(crate) fn merge_into<'t>(base: &mut DeTable<'t>, over: DeTable<'t>) {
    for (key, value) in over {
        let name: &str = key.get_ref();
        if let Some(existing) = base.get_mut(name) {
            if let (DeValue::Table(target), DeValue::Table(_)) =
                (existing.get_mut(), value.get_ref())
            {
                if let DeValue::Table(table) = value.into_inner() {
                    merge_into(target, table);
                }
                continue;
            }
        }
        // Removed first, so that the overriding key's own span is kept.
        base.remove(name);
        base.insert(key, value);
    }
}

/// `table` with every span moved `by` bytes on.
pub(crate) fn shift_table(table: DeTable<'_>, by: usize) -> DeTable<'_> {
    table
        .into_iter()
        .map(|(key, value)| {
            let span = key.span();
            (Spanned::new(span.start + by..span.end + by, key.into_inner()), shift(value, by))
        })
        .collect()
}

/// `value` with every span moved `by` bytes on.
pub(crate) fn shift(value: Spanned<DeValue<'_>>, by: usize) -> Spanned<DeValue<'_>> {
    let span = value.span();
    let inner = match value.into_inner() {
        DeValue::Table(table) => DeValue::Table(shift_table(table, by)),
        DeValue::Array(items) => DeValue::Array(items.into_iter().map(|v| shift(v, by)).collect()),
        other => other,
    };
    Spanned::new(span.start + by..span.end + by, inner)
}
