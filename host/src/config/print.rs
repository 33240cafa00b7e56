//! `squall validate --print`: the composed topology (after every include and
//! `--set`) written back as one TOML document.
//!
//! Keys come out in merged file order. Top-level tables and the tables
//! directly under them (`[topology]`, `[wait.spout]`, `[spouts.NAME]`, ...)
//! are written as headers, anything deeper inline (`config = { ... }`,
//! `inputs = [{ ... }]`). Strings are written as the file that set them last
//! wrote them (`${VAR}` is kept), with one exception: each plugin path is
//! written as the library the host loads, interpolated and made absolute, so
//! that the printed topology means the same wherever it is saved (a relative
//! path in an included file is relative to *that* file's folder). Defaults
//! that no file sets are not written.

use std::fmt::Write as _;

use toml::de::{DeTable, DeValue};

use super::model::PluginDecl;
use super::walk::{entries, integer};

/// `doc` as a TOML document, with the plugin paths of `plugins`.
pub(crate) fn render(doc: &DeTable<'_>, plugins: &[PluginDecl]) -> String {
    let mut out = String::new();
    write_table(&mut out, &mut Vec::new(), doc, plugins);
    out
}

/// Writes `table`, whose path from the top is `path`, and its sub-tables.
fn write_table(
    out: &mut String,
    path: &mut Vec<String>,
    table: &DeTable<'_>,
    plugins: &[PluginDecl],
) {
    let (sections, inline): (Vec<_>, Vec<_>) = entries(table)
        .into_iter()
        .partition(|(_, value)| path.len() < 2 && value.get_ref().is_table());
    if !path.is_empty() && (!inline.is_empty() || sections.is_empty()) {
        if !out.is_empty() {
            out.push('\n');
        }
        let keys: Vec<String> = path.iter().map(|k| key(k)).collect();
        let _ = writeln!(out, "[{}]", keys.join("."));
    }
    for (name, value) in inline {
        let text = match plugin_path(path, name.get_ref(), plugins) {
            Some(resolved) => quoted(&resolved),
            None => inline_value(value.get_ref()),
        };
        let _ = writeln!(out, "{} = {text}", key(name.get_ref()));
    }
    for (name, value) in sections {
        if let DeValue::Table(inner) = value.get_ref() {
            path.push(name.get_ref().to_string());
            write_table(out, path, inner, plugins);
            path.pop();
        }
    }
}

/// The resolved library path when `name` in the table at `path` is a plugin
/// path: `plugins.ALIAS` as a string, or `plugins.ALIAS.path`. A `$` is
/// doubled, so that reading the printed file does not interpolate it again.
fn plugin_path(path: &[String], name: &str, plugins: &[PluginDecl]) -> Option<String> {
    let alias = match path {
        [plugins] if plugins == "plugins" => name,
        [plugins, alias] if plugins == "plugins" && name == "path" => alias.as_str(),
        _ => return None,
    };
    let decl = plugins.iter().find(|p| p.alias == alias)?;
    let absolute = std::path::absolute(&decl.path).unwrap_or_else(|_| decl.path.clone());
    Some(absolute.to_string_lossy().replace('$', "$$"))
}

/// A value written inline.
fn inline_value(value: &DeValue<'_>) -> String {
    match value {
        DeValue::String(text) => quoted(text),
        DeValue::Integer(int) => {
            integer(int).map_or_else(|| int.as_str().to_string(), |n| n.to_string())
        }
        DeValue::Float(float) => float
            .as_str()
            .parse::<f64>()
            .map_or_else(|_| float.as_str().to_string(), |x| toml::Value::Float(x).to_string()),
        DeValue::Boolean(b) => b.to_string(),
        DeValue::Datetime(d) => d.to_string(),
        DeValue::Array(items) => {
            let items: Vec<String> = items.iter().map(|v| inline_value(v.get_ref())).collect();
            format!("[{}]", items.join(", "))
        }
        DeValue::Table(table) => {
            let items: Vec<String> = entries(table)
                .into_iter()
                .map(|(k, v)| format!("{} = {}", key(k.get_ref()), inline_value(v.get_ref())))
                .collect();
            if items.is_empty() {
                "{}".to_string()
            } else {
                format!("{{ {} }}", items.join(", "))
            }
        }
    }
}

/// A TOML basic string.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// A key: bare when it can be, quoted otherwise.
fn key(name: &str) -> String {
    let bare =
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        name.to_string()
    } else {
        quoted(name)
    }
}
