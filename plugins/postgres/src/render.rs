//! Tuple values as fields of PostgreSQL's text `COPY` format: the server
//! parses each field as its column's type, so the sink needs no type of its
//! own per column.

use std::fmt::Write as _;

use squall_plugin_api::Value;

/// Why a tuple cannot be a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unwritable {
    /// A string holds a NUL character.
    Nul,
    /// A value of a kind the sink does not know (its debug form).
    Value(String),
    /// The tuple has fewer values than fields.
    Short,
}

impl std::fmt::Display for Unwritable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Nul => {
                f.write_str("a string holds a NUL character, which PostgreSQL text cannot hold")
            }
            Self::Value(value) => write!(f, "a value the sink cannot write: {value}"),
            Self::Short => f.write_str("the tuple is shorter than its fields"),
        }
    }
}

impl std::error::Error for Unwritable {}

/// Appends `value` to `out` as one text-format `COPY` field.
///
/// - `Null` is `\N` (SQL NULL); booleans are `t` and `f`; numbers are
///   decimal (floats as the shortest text that reads back the same, and
///   `NaN`, `Infinity`, `-Infinity`).
/// - Strings are escaped (`\\`, `\t`, `\n`, `\r`); bytes are `bytea` hex
///   (`\\x0aff`); a list is its JSON text (for a `json`/`jsonb` column).
///
/// # Errors
/// A string holding a NUL character, which no PostgreSQL text can hold
/// (`out` may then hold part of the field: the caller cuts it off).
pub(crate) fn field(out: &mut String, value: &Value) -> Result<(), Unwritable> {
    match value {
        Value::Null => out.push_str("\\N"),
        Value::Bool(b) => out.push(if *b { 't' } else { 'f' }),
        Value::I64(n) => {
            let _ = write!(out, "{n}");
        }
        Value::U64(n) => {
            let _ = write!(out, "{n}");
        }
        Value::F64(f) => float(out, *f),
        Value::List(items) => {
            let mut json = String::new();
            list_json(&mut json, items)?;
            escaped(out, &json)?;
        }
        other => match (other.as_str(), other.as_bytes()) {
            (Some(s), _) => escaped(out, s)?,
            (None, Some(bytes)) => {
                out.push_str("\\\\x");
                hex(out, bytes);
            }
            (None, None) => return Err(Unwritable::Value(format!("{other:?}"))),
        },
    }
    Ok(())
}

fn float(out: &mut String, f: f64) {
    if f.is_nan() {
        out.push_str("NaN");
    } else if f.is_infinite() {
        out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        let _ = write!(out, "{f}");
    }
}

fn hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
}

fn escaped(out: &mut String, s: &str) -> Result<(), Unwritable> {
    if !s.bytes().any(|b| matches!(b, b'\\' | b'\t' | b'\n' | b'\r' | 0)) {
        out.push_str(s);
        return Ok(());
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => return Err(Unwritable::Nul),
            c => out.push(c),
        }
    }
    Ok(())
}

/// A list as JSON (bytes as `"\\x..."` hex strings, as `bytea` prints them).
fn list_json(out: &mut String, items: &[Value]) -> Result<(), Unwritable> {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match item {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::I64(n) => {
                let _ = write!(out, "{n}");
            }
            Value::U64(n) => {
                let _ = write!(out, "{n}");
            }
            Value::F64(f) if f.is_finite() => {
                let _ = write!(out, "{f}");
            }
            // JSON has no NaN or infinity.
            Value::F64(_) => out.push_str("null"),
            Value::List(inner) => list_json(out, inner)?,
            other => {
                let text = match (other.as_str(), other.as_bytes()) {
                    (Some(s), _) => s.to_owned(),
                    (None, Some(bytes)) => {
                        let mut h = String::from("\\x");
                        hex(&mut h, bytes);
                        h
                    }
                    (None, None) => return Err(Unwritable::Value(format!("{other:?}"))),
                };
                if text.contains('\0') {
                    return Err(Unwritable::Nul);
                }
                out.push_str(&serde_json::Value::String(text).to_string());
            }
        }
    }
    out.push(']');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(v: Value) -> String {
        let mut s = String::new();
        field(&mut s, &v).unwrap();
        s
    }

    #[test]
    fn values_render_as_copy_text_fields() {
        assert_eq!(one(Value::Null), "\\N");
        assert_eq!(one(Value::Bool(true)), "t");
        assert_eq!(one(Value::I64(-3)), "-3");
        assert_eq!(one(Value::U64(u64::MAX)), "18446744073709551615");
        assert_eq!(one(Value::F64(0.1)), "0.1");
        assert_eq!(one(Value::F64(f64::NEG_INFINITY)), "-Infinity");
        assert_eq!(one(Value::from("a\tb\\c\nd")), "a\\tb\\\\c\\nd");
        assert_eq!(one(Value::Bytes(vec![0, 0xff].into())), "\\\\x00ff");
        let list = Value::List(vec![Value::from("x\"y"), Value::I64(2), Value::Null].into());
        assert_eq!(one(list), "[\"x\\\\\"y\",2,null]");
    }

    #[test]
    fn a_nul_in_a_string_is_refused() {
        let e = field(&mut String::new(), &Value::from("a\0b")).unwrap_err().to_string();
        assert!(e.contains("NUL"), "{e}");
    }
}
