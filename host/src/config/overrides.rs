//! `--set KEY=VALUE`: one key of the composed topology, overridden from the
//! command line.
//!
//! - `KEY` is a dotted TOML key (`topology.max_spout_pending`,
//!   `bolts.count.parallelism`, `bolts."my.bolt".parallelism`); the first
//!   `=` ends it.
//! - `VALUE` is parsed as a TOML value (`1000`, `true`, `"text"`,
//!   `{ seed = 7 }`, `[{ from = "split" }]`). A bare word that is not valid
//!   TOML is taken as a string (`--set topology.name=wc2`); a value that
//!   starts like a string, an array or a table must be valid TOML.
//! - The value replaces the key whole, even when both are tables. Missing
//!   tables on the way are created, so `--set` can set a key the files leave
//!   out; but it cannot declare a spout, a bolt or a plugin alias: the name
//!   after `spouts.`, `bolts.` or `plugins.` must exist.
//! - Overrides apply after every include, in command-line order.
//!
//! Each argument is a source of its own ([`SourceMap::add_argument`]), so an
//! error in an overridden value, or an unknown key it sets, is reported
//! against `--set KEY=VALUE` rather than a file.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::compose::shift;
use super::diagnostic::Diagnostics;
use super::source::SourceMap;
use super::suggest::did_you_mean;

/// One `--set KEY=VALUE` argument, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Override {
    arg: String,
    /// Where the first `=` is.
    equals: usize,
}

impl Override {
    /// The dotted key, before the first `=`.
    pub fn key(&self) -> &str {
        &self.arg[..self.equals]
    }

    /// The value, after the first `=`.
    pub fn value(&self) -> &str {
        &self.arg[self.equals + 1..]
    }
}

/// A `--set` argument with no `=`, or nothing before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("expected KEY=VALUE, e.g. topology.max_spout_pending=1000")]
pub struct NotKeyValue;

impl FromStr for Override {
    type Err = NotKeyValue;

    /// Accepts `KEY=VALUE` with a non-empty key; the key and the value are
    /// checked when the topology is read.
    fn from_str(arg: &str) -> Result<Self, NotKeyValue> {
        match arg.find('=') {
            Some(equals) if !arg[..equals].trim().is_empty() => {
                Ok(Override { arg: arg.to_string(), equals })
            }
            _ => Err(NotKeyValue),
        }
    }
}

impl fmt::Display for Override {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.arg)
    }
}

/// Adds one source per override; returns their indices.
pub(crate) fn add_sources(sets: &[Override], map: &mut SourceMap) -> Vec<u32> {
    sets.iter().map(|set| map.add_argument(&set.arg)).collect()
}

/// Applies every override to `doc`, in order. An override that cannot apply
/// is reported and skipped.
pub(crate) fn apply<'t>(
    doc: &mut DeTable<'t>,
    map: &'t SourceMap,
    ids: &[u32],
    sets: &[Override],
) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let names = map.names();
    for (&id, set) in ids.iter().zip(sets) {
        if let Err((message, help)) = apply_one(doc, map, id, set.equals) {
            diags.push_at(&names, map.loc(map.base(id)), message, help);
        }
    }
    diags
}

/// Why an override cannot apply: the message and a help.
type Refusal = (String, Option<String>);

fn apply_one<'t>(
    doc: &mut DeTable<'t>,
    map: &'t SourceMap,
    id: u32,
    equals: usize,
) -> Result<(), Refusal> {
    let text = map.text(id);
    let base = map.base(id);
    let path = key_path(&text[..equals], base)?;
    let value = parse_value(&text[equals + 1..], base + equals + 1)?;
    let (leaf, parents) = path.split_last().ok_or_else(|| invalid_key(&text[..equals]))?;
    if leaf.get_ref() == "include" && parents.is_empty() {
        let help = "list the file in the topology's include array instead".to_string();
        return Err(("\"include\" cannot be set with --set".to_string(), Some(help)));
    }
    let mut table = doc;
    for (depth, segment) in parents.iter().enumerate() {
        table = descend(table, &path[..depth], segment)?;
    }
    check_declared(table, &path[..path.len() - 1], leaf)?;
    let name: &str = leaf.get_ref();
    table.remove(name);
    table.insert(leaf.clone(), value);
    Ok(())
}

/// The table under `segment` of `table` (whose own path is `above`),
/// created when missing.
fn descend<'d, 't>(
    table: &'d mut DeTable<'t>,
    above: &[Spanned<Cow<'t, str>>],
    segment: &Spanned<Cow<'t, str>>,
) -> Result<&'d mut DeTable<'t>, Refusal> {
    check_declared(table, above, segment)?;
    let name: &str = segment.get_ref();
    if table.get(name).is_none() {
        let empty = Spanned::new(segment.span(), DeValue::Table(DeTable::default()));
        table.insert(segment.clone(), empty);
    }
    match table.get_mut(name).map(Spanned::get_mut) {
        Some(DeValue::Table(inner)) => Ok(inner),
        Some(other) => {
            let mut full: Vec<&str> = above.iter().map(|s| s.get_ref().as_ref()).collect();
            full.push(name);
            let message = format!("\"{}\" is a {}, not a table", full.join("."), other.type_str());
            Err((message, Some("set the key itself, or a key of a table".to_string())))
        }
        None => Err((format!("cannot set a key under \"{name}\""), None)),
    }
}

/// The name after `spouts.`, `bolts.` or `plugins.` must be declared:
/// `--set` overrides components, it does not add them.
fn check_declared(
    table: &DeTable<'_>,
    above: &[Spanned<Cow<'_, str>>],
    segment: &Spanned<Cow<'_, str>>,
) -> Result<(), Refusal> {
    let [section] = above else { return Ok(()) };
    let kind = match section.get_ref().as_ref() {
        "spouts" => "spout",
        "bolts" => "bolt",
        "plugins" => "plugin alias",
        _ => return Ok(()),
    };
    let name: &str = segment.get_ref();
    if table.get(name).is_some() {
        return Ok(());
    }
    let help = did_you_mean(name, table.iter().map(|(k, _)| k.get_ref().as_ref()))
        .or_else(|| Some(format!("--set overrides a declared {kind}; it cannot add one")));
    Err((format!("unknown {kind} \"{name}\""), help))
}

/// The segments of a dotted TOML key, with their spans moved `by` bytes on.
fn key_path<'t>(key: &str, by: usize) -> Result<Vec<Spanned<Cow<'t, str>>>, Refusal> {
    let probe = format!("{key}=0");
    let doc = DeTable::parse(&probe).map_err(|_| invalid_key(key))?;
    let mut segments = Vec::new();
    let mut table = doc.get_ref();
    loop {
        let mut entries = table.iter();
        let (Some((segment, value)), None) = (entries.next(), entries.next()) else {
            return Err(invalid_key(key));
        };
        let span = segment.span();
        let owned = Cow::Owned(segment.get_ref().to_string());
        segments.push(Spanned::new(span.start + by..span.end + by, owned));
        match value.get_ref() {
            DeValue::Table(inner) => table = inner,
            DeValue::Integer(_) => return Ok(segments),
            _ => return Err(invalid_key(key)),
        }
    }
}

fn invalid_key(key: &str) -> Refusal {
    let help = "write a dotted TOML key, e.g. bolts.count.parallelism=4".to_string();
    (format!("invalid key \"{key}\""), Some(help))
}

/// The value as TOML, or a bare word as a string; spans moved `by` bytes on.
fn parse_value(text: &str, by: usize) -> Result<Spanned<DeValue<'_>>, Refusal> {
    match DeValue::parse(text) {
        Ok(value) => Ok(shift(value, by)),
        Err(e) if text.trim_start().starts_with(['"', '\'', '[', '{']) => {
            let message = format!("invalid TOML value: {}", e.message().trim().replace('\n', " "));
            let help = "quote the value for the shell, e.g. --set 'spouts.s.config={ seed = 7 }'";
            Err((message, Some(help.to_string())))
        }
        Err(_) => Ok(Spanned::new(by..by + text.len(), DeValue::String(Cow::Borrowed(text)))),
    }
}
