//! Subject templates: `counts.{word}`, `words.{partition(word, 4)}`.
//!
//! A template is literal text with placeholders in braces. `{field}` is the
//! value of the input's field `field`; `{partition(field, N)}` is a stable
//! partition number in `0..N` of that value, the same on every host and in
//! every run: FNV-1a 64 ([`fnv1a64`]) of the value's text (its UTF-8 bytes)
//! modulo `N`. The text of a value is the string itself for strings, and its
//! `Display` form otherwise (a number `42` is `"42"`); bytes must be UTF-8.
//!
//! A rendered value must be non-empty and may not contain whitespace or the
//! wildcards `*` and `>`, so that it cannot change the shape of the subject
//! in ways the template's author did not see; a `.` inside a value adds
//! tokens, as it would in any NATS subject.

use std::fmt::{self, Write as _};

use squall_plugin_api::prelude::*;

/// FNV-1a 64-bit of `bytes` (offset basis 0xcbf29ce484222325, prime
/// 0x100000001b3), the hash behind `{partition(field, N)}`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The partition of `text` among `partitions`: `fnv1a64(text) % partitions`.
///
/// # Panics
/// If `partitions` is 0 (templates refuse it when parsed).
pub fn partition(text: &str, partitions: u64) -> u64 {
    fnv1a64(text.as_bytes()) % partitions
}

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Field(String),
    Partition { field: String, partitions: u64 },
}

/// A parsed subject template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectTemplate {
    parts: Vec<Part>,
}

/// Why a template could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError(String);

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TemplateError {}

/// A placeholder `{inner}` that is not a field or a `partition(..)` call.
#[derive(Debug)]
struct BadPlaceholder {
    inner: String,
    problem: Problem,
}

/// What is wrong with a placeholder.
#[derive(Debug)]
enum Problem {
    /// `partition(` without `field, N)`.
    Partition,
    /// A field name with characters a field cannot have.
    FieldName(String),
    /// `N` is not a whole number of at least 1.
    Count,
    /// Neither a field name nor a `partition(..)` call.
    Neither,
}

impl std::fmt::Display for BadPlaceholder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = &self.inner;
        match &self.problem {
            Problem::Partition => write!(f, "{{{inner}}}: expected partition(field, N)"),
            Problem::FieldName(field) => write!(f, "{{{inner}}}: {field:?} is not a field name"),
            Problem::Count => write!(f, "{{{inner}}}: N must be a whole number of at least 1"),
            Problem::Neither => {
                write!(f, "{{{inner}}} is neither a field name nor partition(field, N)")
            }
        }
    }
}

fn is_field_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl SubjectTemplate {
    /// Parses `template`.
    ///
    /// # Errors
    /// An unclosed or empty placeholder, a bad field name, a bad
    /// `partition(..)` call, or whitespace or a wildcard in the literal text.
    pub fn parse(template: &str) -> std::result::Result<Self, TemplateError> {
        let err = |m: String| TemplateError(format!("subject template {template:?}: {m}"));
        if template.is_empty() {
            return Err(err("is empty".into()));
        }
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find(['{', '}']) {
            if rest.as_bytes()[open] == b'}' {
                return Err(err("has a '}' without its '{'".into()));
            }
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            }
            let after = &rest[open + 1..];
            let close = after.find('}').ok_or_else(|| err("has a '{' without its '}'".into()))?;
            let inner = after[..close].trim();
            parts.push(Self::placeholder(inner).map_err(|e| err(e.to_string()))?);
            rest = &after[close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        for part in &parts {
            if let Part::Literal(text) = part {
                if text.chars().any(|c| c.is_whitespace() || c == '*' || c == '>' || c == '{') {
                    return Err(err(format!(
                        "literal text {text:?} may not contain whitespace, '*', '>' or '{{'"
                    )));
                }
            }
        }
        Ok(Self { parts })
    }

    fn placeholder(inner: &str) -> std::result::Result<Part, BadPlaceholder> {
        let bad = |problem| BadPlaceholder { inner: inner.to_owned(), problem };
        if let Some(args) = inner.strip_prefix("partition(") {
            let args = args.strip_suffix(')').ok_or_else(|| bad(Problem::Partition))?;
            let (field, n) = args.split_once(',').ok_or_else(|| bad(Problem::Partition))?;
            let field = field.trim();
            if !is_field_name(field) {
                return Err(bad(Problem::FieldName(field.to_owned())));
            }
            let partitions: u64 =
                n.trim().parse().ok().filter(|&n| n > 0).ok_or_else(|| bad(Problem::Count))?;
            return Ok(Part::Partition { field: field.to_owned(), partitions });
        }
        if !is_field_name(inner) {
            return Err(bad(Problem::Neither));
        }
        Ok(Part::Field(inner.to_owned()))
    }

    /// The field names the template reads, in order.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Literal(_) => None,
            Part::Field(f) | Part::Partition { field: f, .. } => Some(f.as_str()),
        })
    }

    /// The subject for `input`, written into `out` (cleared first).
    ///
    /// # Errors
    /// A field the input does not have, bytes that are not UTF-8, or a value
    /// that is empty or holds whitespace, `*` or `>`.
    pub fn render_into(&self, input: &Tuple<'_>, out: &mut String) -> Result<()> {
        out.clear();
        let mut scratch = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(text) => out.push_str(text),
                Part::Field(field) => {
                    let text = value_text(input, field, &mut scratch)?;
                    check_token(field, text)?;
                    out.push_str(text);
                }
                Part::Partition { field, partitions } => {
                    let text = value_text(input, field, &mut scratch)?;
                    // Writing to a String cannot fail.
                    let _ = write!(out, "{}", partition(text, *partitions));
                }
            }
        }
        Ok(())
    }
}

/// The text of field `field` of `input`: the string itself, UTF-8 bytes, or
/// the value's `Display` form, written into `scratch` when it must be built.
fn value_text<'a>(input: &'a Tuple<'_>, field: &str, scratch: &'a mut String) -> Result<&'a str> {
    let value = input.field(field).ok_or_else(|| {
        let fields: Vec<&str> = input.fields().iter().map(|f| f.as_str()).collect();
        format!("subject template: the input has no field {field:?} (it has {fields:?})")
    })?;
    if let Some(s) = value.as_str() {
        return Ok(s);
    }
    if let Some(bytes) = value.as_bytes() {
        return std::str::from_utf8(bytes).map_err(|_| {
            format!("subject template: field {field:?} holds bytes that are not UTF-8").into()
        });
    }
    scratch.clear();
    let _ = write!(scratch, "{value}");
    Ok(scratch.as_str())
}

fn check_token(field: &str, text: &str) -> Result<()> {
    if text.is_empty() {
        return Err(format!("subject template: field {field:?} is empty").into());
    }
    if text.chars().any(|c| c.is_whitespace() || c == '*' || c == '>') {
        return Err(format!(
            "subject template: field {field:?} = {text:?} holds whitespace, '*' or '>'"
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(template: &str, fields: &[&str], values: &[Value]) -> Result<String> {
        let t = SubjectTemplate::parse(template).unwrap();
        let names: Vec<abi_stable::std_types::RString> =
            fields.iter().map(|f| (*f).into()).collect();
        let tuple = Tuple::new(values, &names, "c", "default", 0, Anchor(1));
        let mut out = String::new();
        t.render_into(&tuple, &mut out)?;
        Ok(out)
    }

    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn fields_and_partitions_fill_the_template() {
        let out = render("counts.{word}", &["word"], &[Value::from("apple")]).unwrap();
        assert_eq!(out, "counts.apple");
        let p = partition("apple", 4);
        let out =
            render("words.{partition(word, 4)}.x", &["word"], &[Value::from("apple")]).unwrap();
        assert_eq!(out, format!("words.{p}.x"));
        let out = render("n.{n}", &["n"], &[Value::U64(42)]).unwrap();
        assert_eq!(out, "n.42");
    }

    #[test]
    fn partitions_spread_and_stay_in_range() {
        let mut seen = [0u32; 4];
        for i in 0..1000 {
            seen[partition(&format!("key{i}"), 4) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 150), "{seen:?}");
    }

    #[test]
    fn bad_templates_are_refused_with_the_reason() {
        for (t, want) in [
            ("", "is empty"),
            ("a.{word", "without its '}'"),
            ("a.}", "without its '{'"),
            ("a.{}", "neither a field name"),
            ("a.{partition(w, 0)}", "at least 1"),
            ("a.{partition(w)}", "partition(field, N)"),
            ("a b.{w}", "whitespace"),
            ("a.*", "whitespace"),
        ] {
            let e = SubjectTemplate::parse(t).unwrap_err().to_string();
            assert!(e.contains(want), "{t:?}: {e}");
        }
    }

    #[test]
    fn a_missing_field_or_a_bad_value_fails_the_render() {
        let e = render("a.{word}", &["other"], &[Value::from("x")]).unwrap_err().to_string();
        assert!(e.contains("no field \"word\""), "{e}");
        let e = render("a.{word}", &["word"], &[Value::from("x y")]).unwrap_err().to_string();
        assert!(e.contains("whitespace"), "{e}");
        let e = render("a.{word}", &["word"], &[Value::from("")]).unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
    }
}
