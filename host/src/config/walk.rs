//! Reading typed values out of the span-preserving TOML tree.
//!
//! The parsed document is a tree of `Spanned<DeValue>` (toml's `de` layer): the
//! same data serde would see, plus a byte span on every key and value. Instead of
//! deserializing it with serde, which stops at the first error, the readers in
//! this module and its siblings walk it by hand. Each accessor checks the type and
//! range of one value, pushes a [`Diagnostic`](super::Diagnostic) when it is wrong
//! and returns `None`, so the caller falls back to the default and carries on. That
//! is what lets one run report every error in the file.
//!
//! Messages are built from two pieces the callers pass down: the *context* that
//! names the table (`bolt "split"`, `[topology]`, `input 1 of bolt "count"`) and,
//! for one value, `"key" in <context>`.

use std::ops::Range;
use std::path::Path;

use toml::de::{DeInteger, DeString, DeTable, DeValue};
use toml::Spanned;

use super::diagnostic::{Diagnostics, Loc, Sources};
use super::interpolate::interpolate;
use super::source::SourceMap;
use super::suggest::did_you_mean;

/// A value in the parsed document.
pub(crate) type Value<'i> = Spanned<DeValue<'i>>;
/// A key in the parsed document.
pub(crate) type Key<'i> = Spanned<DeString<'i>>;

/// The state shared by every reader: the sources (for diagnostics and relative
/// paths), the environment (for interpolation), the plugin aliases declared so far
/// and the diagnostics found so far.
pub(crate) struct Walker<'a> {
    sources: &'a SourceMap,
    names: Sources,
    env: &'a dyn Fn(&str) -> Option<String>,
    /// Aliases from `[plugins]`, in file order; read before any component.
    pub(crate) aliases: Vec<String>,
    diags: Diagnostics,
    /// Unknown keys found so far; past [`UNKNOWN_KEYS_LISTED`] they are
    /// counted, not listed.
    unknown_keys: usize,
    /// Where the first unlisted unknown key is.
    first_unlisted: Option<Loc>,
}

/// How many unknown keys are listed one per line; the rest are one line
/// that says how many more there are (10,000 of them were 10,000 lines).
pub(crate) const UNKNOWN_KEYS_LISTED: usize = 20;

impl<'a> Walker<'a> {
    pub(crate) fn new(sources: &'a SourceMap, env: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Walker {
            sources,
            names: sources.names(),
            env,
            aliases: Vec::new(),
            diags: Diagnostics::new(),
            unknown_keys: 0,
            first_unlisted: None,
        }
    }

    /// The directory relative paths written at `span` are resolved against:
    /// the folder of the file that wrote them.
    pub(crate) fn dir_at(&self, span: &Range<usize>) -> &Path {
        self.sources.dir_at(span.start)
    }

    /// Where `span` starts.
    pub(crate) fn loc(&self, span: &Range<usize>) -> Loc {
        self.sources.loc(span.start)
    }

    /// The file (or `--set` argument) `loc` is in, as errors name it.
    pub(crate) fn file_of(&self, loc: Loc) -> &Path {
        self.names.name(loc)
    }

    /// Records an error at the start of `span`.
    pub(crate) fn error(&mut self, span: &Range<usize>, message: String, help: Option<String>) {
        let loc = self.loc(span);
        self.error_at(loc, message, help);
    }

    /// Records an error at `loc`.
    pub(crate) fn error_at(&mut self, loc: Loc, message: String, help: Option<String>) {
        self.diags.push_at(&self.names, loc, message, help);
    }

    /// Every diagnostic recorded.
    pub(crate) fn finish(mut self) -> Diagnostics {
        if let Some(loc) = self.first_unlisted {
            let more = self.unknown_keys - UNKNOWN_KEYS_LISTED;
            let message = format!(
                "and {more} more unknown key{} (not listed; the first {UNKNOWN_KEYS_LISTED} are)",
                if more == 1 { "" } else { "s" }
            );
            self.error_at(loc, message, None);
        }
        self.diags
    }

    /// Reports a value of the wrong type.
    pub(crate) fn wrong_type(&mut self, value: &Value<'_>, what: &str, expected: &str) {
        let found = describe(value.get_ref());
        self.error(&value.span(), format!("{what} must be {expected}, found {found}"), None);
    }

    /// The table inside `value`, or an error naming `what`.
    pub(crate) fn table<'v, 'i>(
        &mut self,
        value: &'v Value<'i>,
        what: &str,
    ) -> Option<&'v DeTable<'i>> {
        match value.get_ref() {
            DeValue::Table(table) => Some(table),
            _ => {
                self.wrong_type(value, what, "a table");
                None
            }
        }
    }

    /// The string inside `value` after environment interpolation.
    pub(crate) fn string(&mut self, value: &Value<'_>, what: &str) -> Option<String> {
        match value.get_ref() {
            DeValue::String(text) => self.interpolate(text, &value.span(), what),
            _ => {
                self.wrong_type(value, what, "a string");
                None
            }
        }
    }

    /// Interpolates `text`, reporting each problem at `span`.
    fn interpolate(&mut self, text: &str, span: &Range<usize>, what: &str) -> Option<String> {
        match interpolate(text, self.env) {
            Ok(text) => Some(text),
            Err(errors) => {
                for e in errors {
                    self.error(span, format!("{what} {e}"), e.help());
                }
                None
            }
        }
    }

    /// The boolean inside `value`.
    pub(crate) fn bool(&mut self, value: &Value<'_>, what: &str) -> Option<bool> {
        match value.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.wrong_type(value, what, "true or false");
                None
            }
        }
    }

    /// The integer inside `value`, which must lie in `min..=max`.
    pub(crate) fn uint(
        &mut self,
        value: &Value<'_>,
        what: &str,
        min: u64,
        max: u64,
    ) -> Option<u64> {
        let DeValue::Integer(int) = value.get_ref() else {
            self.wrong_type(value, what, "an integer");
            return None;
        };
        let span = value.span();
        let Some(n) = integer(int) else {
            self.error(&span, format!("{what} is out of range, found {int}"), None);
            return None;
        };
        if n < i128::from(min) {
            self.error(&span, format!("{what} must be at least {min}, found {n}"), None);
            None
        } else if n > i128::from(max) {
            self.error(&span, format!("{what} must be at most {max}, found {n}"), None);
            None
        } else {
            u64::try_from(n).ok()
        }
    }

    /// Reports every key of `table` that is not in `known`, with a suggestion.
    pub(crate) fn check_keys(&mut self, table: &DeTable<'_>, known: &[&str], context: &str) {
        for (key, _) in entries(table) {
            if !known.contains(&key.get_ref().as_ref()) {
                self.unknown_key(key, known, context);
            }
        }
    }

    /// Reports one unknown key.
    pub(crate) fn unknown_key(&mut self, key: &Key<'_>, known: &[&str], context: &str) {
        self.unknown_keys += 1;
        if self.unknown_keys > UNKNOWN_KEYS_LISTED {
            if self.first_unlisted.is_none() {
                self.first_unlisted = Some(self.loc(&key.span()));
            }
            return;
        }
        let name: &str = key.get_ref();
        let help = did_you_mean(name, known.iter().copied())
            .or_else(|| (known.len() <= 6).then(|| format!("expected {}", quoted_list(known))));
        self.error(&key.span(), format!("unknown key {name:?} in {context}"), help);
    }

    /// Converts a user table (a component's `config`) to a `toml::Table`,
    /// interpolating every string in it. Bad strings are reported and left out.
    pub(crate) fn user_table<'v, 'i: 'v>(
        &mut self,
        entries: impl IntoIterator<Item = (&'v Key<'i>, &'v Value<'i>)>,
        path: &str,
        context: &str,
    ) -> toml::Table {
        let mut out = toml::Table::new();
        for (key, value) in entries {
            let name: &str = key.get_ref();
            let key_path =
                if path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
            if let Some(converted) = self.user_value(value, &key_path, context) {
                out.insert(name.to_string(), converted);
            }
        }
        out
    }

    /// Converts one user value, interpolating every string in it.
    pub(crate) fn user_value(
        &mut self,
        value: &Value<'_>,
        path: &str,
        context: &str,
    ) -> Option<toml::Value> {
        let span = value.span();
        Some(match value.get_ref() {
            DeValue::String(s) => toml::Value::String(self.interpolate(
                s,
                &span,
                &format!("\"{path}\" in {context}"),
            )?),
            DeValue::Integer(int) => match integer(int).and_then(|n| i64::try_from(n).ok()) {
                Some(n) => toml::Value::Integer(n),
                None => {
                    let message = format!("\"{path}\" in {context} is out of range, found {int}");
                    self.error(&span, message, None);
                    return None;
                }
            },
            DeValue::Float(f) => match f.as_str().parse::<f64>() {
                Ok(x) => toml::Value::Float(x),
                Err(_) => {
                    let message = format!("\"{path}\" in {context} is not a valid float");
                    self.error(&span, message, None);
                    return None;
                }
            },
            DeValue::Boolean(b) => toml::Value::Boolean(*b),
            DeValue::Datetime(d) => toml::Value::Datetime(*d),
            DeValue::Array(items) => toml::Value::Array(
                items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| self.user_value(item, &format!("{path}[{i}]"), context))
                    .collect(),
            ),
            DeValue::Table(table) => {
                toml::Value::Table(self.user_table(entries(table), path, context))
            }
        })
    }

    /// Writes a user table as the TOML document handed to a plugin.
    pub(crate) fn document(
        &mut self,
        table: &toml::Table,
        span: &Range<usize>,
        context: &str,
    ) -> String {
        match toml::to_string(table) {
            Ok(text) => text,
            Err(e) => {
                self.error(span, format!("{context} cannot be written as TOML: {e}"), None);
                String::new()
            }
        }
    }
}

/// A table being read, with the words that name it in diagnostics.
pub(crate) struct Section<'v, 'i> {
    /// The table's entries.
    pub(crate) table: &'v DeTable<'i>,
    /// What a missing key is reported at: the table's name, or the inline table.
    pub(crate) span: Range<usize>,
    /// Names the table in messages, e.g. `bolt "split"` or `[topology]`.
    pub(crate) context: String,
}

impl<'v, 'i> Section<'v, 'i> {
    pub(crate) fn new(table: &'v DeTable<'i>, span: Range<usize>, context: String) -> Self {
        Section { table, span, context }
    }

    /// The value under `key`, if present.
    pub(crate) fn get(&self, key: &str) -> Option<&'v Value<'i>> {
        self.table.get(key)
    }

    /// `"key" in <context>`, the subject of a message about one value.
    pub(crate) fn what(&self, key: &str) -> String {
        format!("\"{key}\" in {}", self.context)
    }

    /// Reports every key not in `known`.
    pub(crate) fn check_keys(&self, w: &mut Walker<'_>, known: &[&str]) {
        w.check_keys(self.table, known, &self.context);
    }

    /// Reports that a required key is missing.
    pub(crate) fn missing(&self, w: &mut Walker<'_>, key: &str, help: Option<String>) {
        w.error(&self.span, format!("missing key \"{key}\" in {}", self.context), help);
    }

    /// The string under `key`, interpolated, with its span.
    pub(crate) fn string(&self, w: &mut Walker<'_>, key: &str) -> Option<Spanned<String>> {
        let value = self.get(key)?;
        let text = w.string(value, &self.what(key))?;
        Some(Spanned::new(value.span(), text))
    }

    /// The boolean under `key`, or `default`.
    pub(crate) fn bool_or(&self, w: &mut Walker<'_>, key: &str, default: bool) -> bool {
        self.get(key).and_then(|v| w.bool(v, &self.what(key))).unwrap_or(default)
    }

    /// The integer under `key` if present and in `min..=max`.
    pub(crate) fn uint(&self, w: &mut Walker<'_>, key: &str, min: u64, max: u64) -> Option<u64> {
        self.get(key).and_then(|v| w.uint(v, &self.what(key), min, max))
    }

    /// The `u32` under `key` if present and at least `min`.
    pub(crate) fn opt_u32(&self, w: &mut Walker<'_>, key: &str, min: u32) -> Option<u32> {
        let n = self.uint(w, key, u64::from(min), u64::from(u32::MAX))?;
        u32::try_from(n).ok()
    }

    /// The `u32` under `key` (at least `min`), or `default`.
    pub(crate) fn u32_or(&self, w: &mut Walker<'_>, key: &str, default: u32, min: u32) -> u32 {
        self.opt_u32(w, key, min).unwrap_or(default)
    }

    /// The `u64` under `key` if it lies in `min..=max`, or `default`.
    pub(crate) fn u64_in(
        &self,
        w: &mut Walker<'_>,
        key: &str,
        default: u64,
        min: u64,
        max: u64,
    ) -> u64 {
        self.uint(w, key, min, max).unwrap_or(default)
    }

    /// The `u32` under `key` if it lies in `min..=max`, or `default`.
    pub(crate) fn u32_in(
        &self,
        w: &mut Walker<'_>,
        key: &str,
        default: u32,
        min: u32,
        max: u32,
    ) -> u32 {
        self.uint(w, key, u64::from(min), u64::from(max))
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(default)
    }
}

/// The entries of `table` in file order. (toml's map is sorted by key unless its
/// `preserve_order` feature is on; spans give the written order either way.)
pub(crate) fn entries<'v, 'i>(table: &'v DeTable<'i>) -> Vec<(&'v Key<'i>, &'v Value<'i>)> {
    let mut entries: Vec<_> = table.iter().collect();
    entries.sort_by_key(|(key, _)| key.span().start);
    entries
}

/// The value of a TOML integer. `None` only past `i128`, which TOML's 64-bit
/// integers never reach, but the parser hands over digits, not numbers.
pub(crate) fn integer(int: &DeInteger<'_>) -> Option<i128> {
    i128::from_str_radix(int.as_str(), int.radix()).ok()
}

/// A value's type with its article, for "found …".
fn describe(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// `"a", "b" or "c"`.
pub(crate) fn quoted_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("\"{s}\"")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn with_doc(text: &str, check: impl FnOnce(&mut Walker<'_>, &DeTable<'_>)) -> Diagnostics {
        let doc = DeTable::parse(text).expect("test document is valid TOML");
        let sources = SourceMap::single(Path::new("t.toml"), text);
        let mut w = Walker::new(&sources, &no_env);
        check(&mut w, doc.get_ref());
        w.finish()
    }

    #[test]
    fn integers_in_every_radix_are_read() {
        let diags = with_doc("a = 0x10\nb = 0o10\nc = 0b10\nd = 1_000", |w, t| {
            let s = Section::new(t, 0..0, "[t]".to_string());
            assert_eq!(s.u64_in(w, "a", 0, 0, u64::MAX), 16);
            assert_eq!(s.u64_in(w, "b", 0, 0, u64::MAX), 8);
            assert_eq!(s.u64_in(w, "c", 0, 0, u64::MAX), 2);
            assert_eq!(s.u64_in(w, "d", 0, 0, u64::MAX), 1000);
        });
        assert!(diags.is_empty(), "{diags}");
    }

    #[test]
    fn out_of_range_and_mistyped_values_fall_back_with_an_error_each() {
        let diags = with_doc("a = -1\nb = 5000000000\nc = \"x\"\nd = 1.5", |w, t| {
            let s = Section::new(t, 0..0, "[t]".to_string());
            assert_eq!(s.u64_in(w, "a", 7, 0, u64::MAX), 7);
            assert_eq!(s.u32_or(w, "b", 7, 0), 7);
            assert_eq!(s.u32_or(w, "c", 7, 0), 7);
            assert!(s.bool_or(w, "d", true));
        });
        let lines: Vec<String> =
            diags.items.iter().map(|d| format!("{} {}", d.loc, d.message)).collect();
        assert_eq!(
            lines,
            [
                "1:5 \"a\" in [t] must be at least 0, found -1",
                "2:5 \"b\" in [t] must be at most 4294967295, found 5000000000",
                "3:5 \"c\" in [t] must be an integer, found a string",
                "4:5 \"d\" in [t] must be true or false, found a float",
            ]
        );
    }

    #[test]
    fn entries_come_back_in_file_order() {
        with_doc("zeta = 1\nalpha = 2\nmid = 3", |_, t| {
            let names: Vec<&str> = entries(t).iter().map(|(k, _)| k.get_ref().as_ref()).collect();
            assert_eq!(names, ["zeta", "alpha", "mid"]);
        });
    }

    #[test]
    fn unknown_keys_without_a_close_match_list_the_known_keys() {
        let diags = with_doc("zzz = 1", |w, t| w.check_keys(t, &["from", "stream"], "input 1"));
        assert_eq!(diags.items[0].help.as_deref(), Some("expected \"from\" or \"stream\""));
    }

    #[test]
    fn quoted_list_reads_as_a_sentence() {
        assert_eq!(quoted_list(&["a"]), "\"a\"");
        assert_eq!(quoted_list(&["a", "b", "c"]), "\"a\", \"b\" or \"c\"");
    }
}
