//! How the host writes keys and spout positions as a backend's opaque bytes.
//!
//! A record's key is one of:
//! - `k` then the key's values ([`encode_values`]): an entry of a keyed
//!   store, which a restore gives to the task the fields grouping routes
//!   the key to;
//! - `t` then a task index (4 bytes, big endian): a per-task value (a
//!   [`ValueState`](squall_plugin_api::ValueState), or a spout's position).
//!
//! Values are tagged: strings in any of [`Value`]'s string forms encode
//! alike (they compare and hash alike), and so do byte buffers.

use abi_stable::std_types::RVec;
use squall_plugin_api::{State, StateEntry, Value};

/// Why bytes do not read as a record this host wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The bytes end inside a field.
    #[error("a record is truncated")]
    Truncated,
    /// Bytes follow the record's last field.
    #[error("a record has trailing bytes")]
    TrailingBytes,
    /// A key starts with neither `k` nor `t`.
    #[error("a record key this host did not write")]
    UnknownKey,
    /// A per-task key whose index is not 4 bytes.
    #[error("a task key is not 4 bytes")]
    TaskKeyLength,
    /// Text that is not UTF-8: "a format", "a name", "a string".
    #[error("{0} is not UTF-8")]
    NotUtf8(&'static str),
    /// A value's tag is none of the codec's.
    #[error("unknown value tag {0:#04x}")]
    UnknownTag(u8),
    /// A window trigger state whose optional field has a bad marker.
    #[error("a window record is not this host's")]
    WindowMeta,
    /// A window entry whose key is not `[task index, sequence number]`
    /// (the key's debug form).
    #[error("a window entry keyed {0}")]
    WindowKey(String),
    /// A window entry's task index over `u32::MAX`.
    #[error("a task index over u32")]
    TaskIndex,
    /// A spout position keyed by values instead of a task index.
    #[error("a position keyed by values")]
    PositionKey,
}

/// What a record's key says.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordKey {
    /// A keyed store's key: the grouping fields' values.
    Keyed(Vec<Value>),
    /// A per-task record of old task index `index`.
    Task(u32),
}

/// The bytes of a keyed record's key.
pub fn keyed(values: &[Value]) -> Vec<u8> {
    let mut out = vec![b'k'];
    encode_values(values, &mut out);
    out
}

/// The bytes of a per-task record's key.
pub fn task(index: u32) -> Vec<u8> {
    let mut out = vec![b't'];
    out.extend_from_slice(&index.to_be_bytes());
    out
}

/// Reads a record's key.
///
/// # Errors
/// Bytes this host did not write.
pub fn record_key(bytes: &[u8]) -> Result<RecordKey, RecordError> {
    match bytes.split_first() {
        Some((b'k', rest)) => {
            let mut r = Reader(rest);
            let values = r.values()?;
            r.end()?;
            Ok(RecordKey::Keyed(values))
        }
        Some((b't', rest)) => {
            let index: [u8; 4] = rest.try_into().map_err(|_| RecordError::TaskKeyLength)?;
            Ok(RecordKey::Task(u32::from_be_bytes(index)))
        }
        _ => Err(RecordError::UnknownKey),
    }
}

/// Appends `values` (a count, then each value).
pub fn encode_values(values: &[Value], out: &mut Vec<u8>) {
    out.extend_from_slice(&(values.len() as u32).to_be_bytes());
    for v in values {
        encode_value(v, out);
    }
}

fn encode_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.push(b'n'),
        Value::Bool(b) => out.extend_from_slice(&[b'b', u8::from(*b)]),
        Value::I64(n) => {
            out.push(b'i');
            out.extend_from_slice(&n.to_be_bytes());
        }
        Value::U64(n) => {
            out.push(b'u');
            out.extend_from_slice(&n.to_be_bytes());
        }
        Value::F64(n) => {
            out.push(b'f');
            out.extend_from_slice(&n.to_bits().to_be_bytes());
        }
        Value::List(items) => {
            out.push(b'l');
            encode_values(items, out);
        }
        other => {
            let (tag, bytes) = match (other.as_str(), other.as_bytes()) {
                (Some(s), _) => (b's', s.as_bytes()),
                (None, Some(b)) => (b'y', b),
                (None, None) => (b'n', &[][..]),
            };
            out.push(tag);
            if tag != b'n' {
                out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
                out.extend_from_slice(bytes);
            }
        }
    }
}

/// A spout's position as bytes: its format, then its entries.
pub fn encode_state(state: &State) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes(state.format.as_bytes(), &mut out);
    out.extend_from_slice(&(state.entries.len() as u32).to_be_bytes());
    for e in state.entries.iter() {
        encode_values(&e.key, &mut out);
        put_bytes(&e.bytes, &mut out);
    }
    out
}

/// Reads [`encode_state`]'s bytes.
///
/// # Errors
/// Bytes this host did not write.
pub fn decode_state(bytes: &[u8]) -> Result<State, RecordError> {
    let mut r = Reader(bytes);
    let format = r.text("a format")?;
    let mut state = State::new(&format);
    for _ in 0..r.u32()? {
        let key = r.values()?;
        let bytes = r.bytes()?.to_vec();
        state.entries.push(StateEntry { key: key.into(), bytes: bytes.into() });
    }
    r.end()?;
    Ok(state)
}

/// One tuple of a windowed bolt's buffer, as a checkpoint holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowEntry {
    /// The time that places it in windows (ms).
    pub time: u64,
    /// Where it came from: component, stream and task id.
    pub component: String,
    /// The stream.
    pub stream: String,
    /// The sending task.
    pub task: u32,
    /// Its values.
    pub values: Vec<Value>,
}

/// A window entry's bytes.
pub fn encode_window_entry(
    time: u64,
    (component, stream, task): (&str, &str, u32),
    values: &[Value],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + 16 * values.len());
    out.extend_from_slice(&time.to_be_bytes());
    put_bytes(component.as_bytes(), &mut out);
    put_bytes(stream.as_bytes(), &mut out);
    out.extend_from_slice(&task.to_be_bytes());
    encode_values(values, &mut out);
    out
}

/// Reads [`encode_window_entry`]'s bytes.
///
/// # Errors
/// Bytes this host did not write.
pub fn decode_window_entry(bytes: &[u8]) -> Result<WindowEntry, RecordError> {
    let mut r = Reader(bytes);
    let time = r.u64()?;
    let component = r.text("a name")?;
    let stream = r.text("a name")?;
    let task = r.u32()?;
    let values = r.values()?;
    r.end()?;
    Ok(WindowEntry { time, component, stream, task, values })
}

/// A windowed task's trigger state in a checkpoint: tuples since the last
/// firing, the next window's end, the largest event time seen, and the
/// sequence numbers of the entries that are the next window's `expired`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WindowMeta {
    /// Count windows: tuples since the last firing.
    pub since_fire: u64,
    /// Time windows: the end of the next window.
    pub next_end: Option<u64>,
    /// Event time: the largest timestamp seen.
    pub max_seen: Option<u64>,
    /// The entries (by sequence number) that left every window at the last
    /// firing.
    pub expired: Vec<u64>,
}

/// [`WindowMeta`]'s bytes.
pub fn encode_window_meta(meta: &WindowMeta) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + 8 * meta.expired.len());
    out.extend_from_slice(&meta.since_fire.to_be_bytes());
    for v in [meta.next_end, meta.max_seen] {
        match v {
            Some(v) => {
                out.push(1);
                out.extend_from_slice(&v.to_be_bytes());
            }
            None => out.push(0),
        }
    }
    out.extend_from_slice(&(meta.expired.len() as u32).to_be_bytes());
    for seq in &meta.expired {
        out.extend_from_slice(&seq.to_be_bytes());
    }
    out
}

/// Reads [`encode_window_meta`]'s bytes.
///
/// # Errors
/// Bytes this host did not write.
pub fn decode_window_meta(bytes: &[u8]) -> Result<WindowMeta, RecordError> {
    let mut r = Reader(bytes);
    let since_fire = r.u64()?;
    let opt = |r: &mut Reader<'_>| -> Result<Option<u64>, RecordError> {
        match r.take(1)?[0] {
            0 => Ok(None),
            1 => Ok(Some(r.u64()?)),
            _ => Err(RecordError::WindowMeta),
        }
    };
    let next_end = opt(&mut r)?;
    let max_seen = opt(&mut r)?;
    let expired = (0..r.u32()?).map(|_| r.u64()).collect::<Result<_, _>>()?;
    r.end()?;
    Ok(WindowMeta { since_fire, next_end, max_seen, expired })
}

fn put_bytes(b: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if self.0.len() < n {
            return Err(RecordError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, RecordError> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Result<u64, RecordError> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn bytes(&mut self) -> Result<&'a [u8], RecordError> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    /// Length-prefixed UTF-8; `what` names it in the error.
    fn text(&mut self, what: &'static str) -> Result<String, RecordError> {
        let bytes = self.bytes()?;
        std::str::from_utf8(bytes).map(str::to_owned).map_err(|_| RecordError::NotUtf8(what))
    }

    fn values(&mut self) -> Result<Vec<Value>, RecordError> {
        let n = self.u32()? as usize;
        let mut out = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            out.push(self.value()?);
        }
        Ok(out)
    }

    fn value(&mut self) -> Result<Value, RecordError> {
        let tag = self.take(1)?[0];
        Ok(match tag {
            b'n' => Value::Null,
            b'b' => Value::Bool(self.take(1)?[0] != 0),
            b'i' => Value::I64(self.u64()? as i64),
            b'u' => Value::U64(self.u64()?),
            b'f' => Value::F64(f64::from_bits(self.u64()?)),
            b'l' => Value::List(RVec::from(self.values()?)),
            b's' => {
                let s = std::str::from_utf8(self.bytes()?)
                    .map_err(|_| RecordError::NotUtf8("a string"))?;
                Value::from(s)
            }
            b'y' => Value::Bytes(self.bytes()?.to_vec().into()),
            _ => return Err(RecordError::UnknownTag(tag)),
        })
    }

    fn end(&self) -> Result<(), RecordError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(RecordError::TrailingBytes)
        }
    }
}

/// A record's value as text for `squall state show`: UTF-8 without control
/// characters (the stores' JSON) as it is, anything else as `0x` and hex.
pub fn show_value(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        // JSON (the stores' values): printable as it is.
        Ok(s) if !s.chars().any(char::is_control) => s.to_owned(),
        // Anything else (a spout's position, binary keys): hex, whichever
        // bytes it holds, never raw control bytes on a terminal.
        _ => format!("0x{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

/// A record's key as text for `squall state show`.
pub fn show_key(bytes: &[u8]) -> String {
    match record_key(bytes) {
        Ok(RecordKey::Keyed(values)) => {
            let shown: Vec<String> = values.iter().map(show).collect();
            shown.join(", ")
        }
        Ok(RecordKey::Task(i)) => format!("task {i}"),
        Err(_) => show_value(bytes),
    }
}

/// One value as `squall state show` prints it: strings quoted, numbers as
/// they are, bytes in hex, lists in brackets.
fn show(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::I64(n) => n.to_string(),
        Value::U64(n) => n.to_string(),
        Value::F64(n) => n.to_string(),
        Value::List(items) => {
            format!("[{}]", items.iter().map(show).collect::<Vec<_>>().join(", "))
        }
        other => match (other.as_str(), other.as_bytes()) {
            (Some(s), _) => format!("{s:?}"),
            (None, Some(b)) => {
                format!("0x{}", b.iter().map(|x| format!("{x:02x}")).collect::<String>())
            }
            (None, None) => "null".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_shows_in_hex_every_time_never_as_raw_control_bytes() {
        // A position whose bytes all happen to be valid UTF-8 (its format's
        // length is 0, 0, 0, 14), and one whose bytes are not.
        let mut ascii = State::new("squall-test/1");
        ascii
            .entries
            .push(StateEntry { key: vec![Value::U64(7)].into(), bytes: b"x".to_vec().into() });
        let mut binary = State::new("squall-test/1");
        binary.entries.push(StateEntry { key: RVec::new(), bytes: vec![0xff, 0xfe].into() });
        for state in [ascii, binary] {
            let shown = show_value(&encode_state(&state));
            assert!(shown.starts_with("0x"), "{shown:?}");
            assert!(!shown.chars().any(char::is_control), "{shown:?}");
        }
        assert_eq!(show_value(br#"{"a":1}"#), r#"{"a":1}"#, "JSON as it is");
    }

    #[test]
    fn keys_round_trip_and_string_forms_encode_alike() {
        let values = vec![
            Value::from("short"),
            Value::Str("a heap string longer than the inline capacity".into()),
            Value::I64(-3),
            Value::U64(7),
            Value::F64(1.5),
            Value::Bool(true),
            Value::Null,
            Value::Bytes(vec![0, 255].into()),
            Value::List(vec![Value::from("x"), Value::I64(1)].into()),
        ];
        let bytes = keyed(&values);
        assert_eq!(record_key(&bytes).unwrap(), RecordKey::Keyed(values));
        let shared = Value::SharedStr(abi_stable::std_types::RArc::new("same".into()));
        assert_eq!(keyed(&[Value::from("same")]), keyed(&[shared]));
        assert_eq!(record_key(&task(42)).unwrap(), RecordKey::Task(42));
        assert_eq!(show_key(&keyed(&[Value::from("cow"), Value::I64(-2)])), "\"cow\", -2");
        assert_eq!(show_key(&task(3)), "task 3");
    }

    #[test]
    fn positions_round_trip_and_bad_bytes_are_errors() {
        let mut state = State::new("file/1");
        state.push(&[Value::from("a.txt")], vec![1, 2, 3]);
        state.push(&[], vec![]);
        assert_eq!(decode_state(&encode_state(&state)).unwrap(), state);
        let bytes = encode_state(&state);
        assert!(decode_state(&bytes[..bytes.len() - 1]).is_err(), "truncated");
        assert!(record_key(b"zzz").is_err());
        assert!(record_key(b"t12").is_err());
    }

    #[test]
    fn window_records_round_trip_and_bad_bytes_are_errors() {
        let values = [Value::from("the cow"), Value::U64(9)];
        let bytes = encode_window_entry(1_700, ("sentences", "default", 4), &values);
        let entry = decode_window_entry(&bytes).unwrap();
        assert_eq!(
            entry,
            WindowEntry {
                time: 1_700,
                component: "sentences".into(),
                stream: "default".into(),
                task: 4,
                values: values.to_vec(),
            }
        );
        assert!(decode_window_entry(&bytes[..bytes.len() - 1]).is_err(), "truncated");
        let meta = WindowMeta {
            since_fire: 3,
            next_end: Some(2_000),
            max_seen: None,
            expired: vec![4, 5, 9],
        };
        assert_eq!(decode_window_meta(&encode_window_meta(&meta)).unwrap(), meta);
        let mut bad = encode_window_meta(&meta);
        bad[8] = 7;
        assert!(decode_window_meta(&bad).is_err());
    }
}
