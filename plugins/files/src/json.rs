//! A tuple as one JSON object: [`encode_tuple`].

use squall_plugin_api::{Tuple, Value};

/// Appends `input` to `out` as one JSON object keyed by field name, without
/// a newline. Values map as follows: null, booleans and numbers as
/// themselves; a non-finite float (NaN, ±inf, which JSON cannot write) as
/// `null`; strings as strings; bytes as a standard base64 string (with
/// padding); lists as arrays. A value without a field name (more values
/// than fields) is keyed by its index, `"_3"`.
pub fn encode_tuple(input: &Tuple<'_>, out: &mut Vec<u8>) {
    let fields = input.fields();
    out.push(b'{');
    for (i, value) in input.values().iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match fields.get(i) {
            Some(name) => encode_str(name.as_str(), out),
            None => encode_str(&format!("_{i}"), out),
        }
        out.push(b':');
        encode_value(value, out);
    }
    out.push(b'}');
}

/// Appends one value as JSON.
pub fn encode_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::I64(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::U64(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::F64(f) if f.is_finite() => {
            // serde_json writes the shortest text that reads back as `f`.
            let _ = serde_json::to_writer(&mut *out, f);
        }
        Value::F64(_) => out.extend_from_slice(b"null"),
        Value::List(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                encode_value(item, out);
            }
            out.push(b']');
        }
        other => match (other.as_str(), other.as_bytes()) {
            (Some(s), _) => encode_str(s, out),
            (None, Some(bytes)) => {
                out.push(b'"');
                base64(bytes, out);
                out.push(b'"');
            }
            (None, None) => out.extend_from_slice(b"null"),
        },
    }
}

/// Appends `s` as a JSON string, escaped.
fn encode_str(s: &str, out: &mut Vec<u8>) {
    // Writing a &str to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Appends the standard base64 encoding (RFC 4648, with `=` padding) of `bytes`.
pub fn base64(bytes: &[u8], out: &mut Vec<u8>) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> shift) & 63) as usize]);
            } else {
                out.push(b'=');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use abi_stable::std_types::RString;
    use squall_plugin_api::Anchor;

    use super::*;

    fn encode(values: &[Value], fields: &[&str]) -> String {
        let fields: Vec<RString> = fields.iter().map(|f| RString::from(*f)).collect();
        let tuple = Tuple::new(values, &fields, "c", "default", 0, Anchor(1));
        let mut out = Vec::new();
        encode_tuple(&tuple, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_value_kind_maps_to_json() {
        let values = [
            Value::Null,
            Value::Bool(true),
            Value::I64(-3),
            Value::U64(u64::MAX),
            Value::F64(1.5),
            Value::F64(f64::NAN),
            Value::from("short"),
            Value::from("a string longer than thirty-one bytes, on the heap"),
            Value::shared_str("shared \"quoted\"\n"),
            Value::from(vec![0_u8, 255, 7]),
            Value::List(vec![Value::I64(1), Value::from("x")].into()),
        ];
        let fields = ["n", "b", "i", "u", "f", "nan", "s", "heap", "shared", "bytes", "list"];
        let text = encode(&values, &fields);
        assert_eq!(
            text,
            r#"{"n":null,"b":true,"i":-3,"u":18446744073709551615,"f":1.5,"nan":null,"s":"short","heap":"a string longer than thirty-one bytes, on the heap","shared":"shared \"quoted\"\n","bytes":"AP8H","list":[1,"x"]}"#
        );
        // And it is JSON that reads back.
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["shared"], "shared \"quoted\"\n");
        assert_eq!(parsed["u"].as_u64(), Some(u64::MAX));
    }

    #[test]
    fn values_without_a_field_name_are_keyed_by_index() {
        assert_eq!(encode(&[Value::I64(1), Value::I64(2)], &["a"]), r#"{"a":1,"_1":2}"#);
        assert_eq!(encode(&[], &[]), "{}");
    }

    #[test]
    fn base64_pads_as_rfc_4648_says() {
        let cases =
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foobar", "Zm9vYmFy")];
        for (input, expected) in cases {
            let mut out = Vec::new();
            base64(input.as_bytes(), &mut out);
            assert_eq!(String::from_utf8(out).unwrap(), expected, "{input:?}");
        }
    }
}
