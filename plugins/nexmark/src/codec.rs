//! A compact encoding of one event as one record value, for events kept
//! in a broker (Kafka) between the generator and the queries.
//!
//! # Format
//! One tag byte, `P` (person), `A` (auction) or `B` (bid), then the
//! event's fields in the order of its stream ([`Kind::fields`]):
//!
//! - an unsigned integer as groups of 6 bits, lowest first, one byte
//!   each; bit 6 (`0x40`) says another group follows (a LEB128 with 6-bit
//!   groups);
//! - a string as its length in bytes (an integer, as above) and its
//!   UTF-8 bytes.
//!
//! Every byte the format adds is below `0x80`, and a string's bytes are
//! UTF-8, so a value is valid UTF-8 as a whole: `KafkaSpout` with
//! `payload_as = "string"` emits it as a string, inline (no allocation)
//! when it is at most 31 bytes, as most bids are (23.3 bytes on average
//! over the first 3,000,000 events: ids, price and event time take 3 to 5
//! bytes each). [`decode`] reads the string and the bytes variants alike.
//!
//! Why not JSON (Flink's Nexmark keeps JSON in Kafka): the same bids
//! would take 87 bytes on average, parsed field name by field name; here
//! the decoder walks a fixed layout per kind and allocates nothing but
//! the strings longer than 31 bytes (none in the model).

use squall_plugin_api::Value;

use crate::model::Kind;

/// The type of one field of a kind's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// An unsigned integer ([`Value::U64`]).
    U64,
    /// A string.
    Str,
}

use Slot::{Str, U64};

const PERSON: [Slot; 7] = [U64, Str, Str, Str, Str, Str, U64];
const AUCTION: [Slot; 9] = [U64, Str, Str, U64, U64, U64, U64, U64, U64];
const BID: [Slot; 5] = [U64, U64, U64, Str, U64];

/// The tag byte of each kind.
fn tag(kind: Kind) -> u8 {
    match kind {
        Kind::Person => b'P',
        Kind::Auction => b'A',
        Kind::Bid => b'B',
    }
}

/// The layout of each kind: one slot per field of its stream.
fn layout(kind: Kind) -> &'static [Slot] {
    match kind {
        Kind::Person => &PERSON,
        Kind::Auction => &AUCTION,
        Kind::Bid => &BID,
    }
}

/// The kind a tuple of `len` values is: the three streams have 7, 9 and
/// 5 fields.
pub fn kind_of_len(len: usize) -> Option<Kind> {
    [Kind::Person, Kind::Auction, Kind::Bid].into_iter().find(|k| k.fields().len() == len)
}

/// Why a value is not an encoded event, or a tuple cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecError(pub String);

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CodecError {}

/// Appends the event of `kind` whose values (in its stream's field order)
/// are `values`, encoded, to `out`.
///
/// # Errors
/// When `values` do not fit the kind's layout (count, or an integer field
/// that is not an unsigned integer, a string field that is not a string).
#[inline]
pub fn encode_values(kind: Kind, values: &[Value], out: &mut Vec<u8>) -> Result<(), CodecError> {
    let slots = layout(kind);
    if values.len() != slots.len() {
        return Err(CodecError(format!(
            "a {} has {} fields, not {}",
            kind.stream(),
            slots.len(),
            values.len()
        )));
    }
    out.push(tag(kind));
    for (i, (slot, value)) in slots.iter().zip(values).enumerate() {
        match (slot, value.as_u64(), value.as_str()) {
            (Slot::U64, Some(v), _) => put_uint(v, out),
            (Slot::Str, _, Some(s)) => {
                put_uint(s.len() as u64, out);
                out.extend_from_slice(s.as_bytes());
            }
            _ => {
                return Err(CodecError(format!(
                    "{} field {} ({}) is not a{}: {value:?}",
                    kind.stream(),
                    i,
                    kind.fields()[i],
                    if *slot == Slot::U64 { "n unsigned integer" } else { " string" }
                )))
            }
        }
    }
    Ok(())
}

/// Decodes one encoded event: appends its values (in its stream's field
/// order, as the generator emits them) to `out` and returns its kind.
/// Nothing is appended when `bytes` are not an encoded event.
///
/// # Errors
/// An unknown tag, a truncated value, a string that is not UTF-8, or
/// bytes left over after the last field.
#[inline]
pub fn decode(bytes: &[u8], out: &mut Vec<Value>) -> Result<Kind, CodecError> {
    let start = out.len();
    let result = decode_into(bytes, out);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

#[inline]
fn decode_into(bytes: &[u8], out: &mut Vec<Value>) -> Result<Kind, CodecError> {
    let kind = match bytes.first() {
        Some(b'P') => Kind::Person,
        Some(b'A') => Kind::Auction,
        Some(b'B') => Kind::Bid,
        Some(other) => return Err(CodecError(format!("unknown event tag byte {other:#04x}"))),
        None => return Err(CodecError("an empty value is not an event".into())),
    };
    let mut at = 1;
    for slot in layout(kind) {
        let v = take_uint(bytes, &mut at)?;
        match slot {
            Slot::U64 => out.push(Value::U64(v)),
            Slot::Str => {
                let end = at.checked_add(v as usize).filter(|&e| e <= bytes.len());
                let end = end.ok_or_else(|| CodecError("a string runs past the value".into()))?;
                let s = std::str::from_utf8(&bytes[at..end])
                    .map_err(|_| CodecError("a string is not UTF-8".into()))?;
                out.push(Value::str(s));
                at = end;
            }
        }
    }
    if at != bytes.len() {
        return Err(CodecError(format!("{} bytes after the last field", bytes.len() - at)));
    }
    Ok(kind)
}

/// Appends `v` in 6-bit groups, lowest first; `0x40` marks "more".
#[inline]
fn put_uint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x40 {
        out.push((v & 0x3f) as u8 | 0x40);
        v >>= 6;
    }
    out.push(v as u8);
}

/// Reads an integer written by [`put_uint`] at `*at`, moving `*at` past it.
#[inline]
fn take_uint(bytes: &[u8], at: &mut usize) -> Result<u64, CodecError> {
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let Some(&b) = bytes.get(*at) else {
            return Err(CodecError("an integer runs past the value".into()));
        };
        *at += 1;
        if b >= 0x80 || shift > 60 || (shift == 60 && b & 0x3f > 0xf) {
            return Err(CodecError(format!("byte {b:#04x} is not part of an integer")));
        }
        v |= u64::from(b & 0x3f) << shift;
        if b & 0x40 == 0 {
            return Ok(v);
        }
        shift += 6;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, Generator, GeneratorConfig};

    /// Appends `event`, encoded, to `out`.
    fn encode(event: &Event, out: &mut Vec<u8>) {
        let mut values = Vec::with_capacity(9);
        event.write_values(&mut values);
        encode_values(event.kind(), &values, out).expect("an event's values fit its layout");
    }

    fn round_trip(event: &Event) -> (Kind, Vec<Value>, usize) {
        let mut bytes = Vec::new();
        encode(event, &mut bytes);
        assert!(std::str::from_utf8(&bytes).is_ok(), "an encoded event is UTF-8: {bytes:?}");
        let mut values = Vec::new();
        let kind = decode(&bytes, &mut values).unwrap();
        (kind, values, bytes.len())
    }

    #[test]
    fn every_kind_decodes_to_the_generators_values() {
        let config =
            GeneratorConfig { first_event_time_ms: 1_700_000_000_000, ..Default::default() };
        for generator in
            [Generator::new(GeneratorConfig::default()).unwrap(), Generator::new(config).unwrap()]
        {
            let mut seen = [0usize; 3];
            let mut inline_bids = 0;
            for id in (0..20_000).chain([u64::MAX / 3, 1 << 40]) {
                let event = generator.event(id);
                let (kind, values, len) = round_trip(&event);
                assert_eq!((kind, &values), (event.kind(), &event.values()), "event {id}");
                seen[kind as usize] += 1;
                inline_bids += usize::from(kind == Kind::Bid && len <= 31);
            }
            assert!(seen.iter().all(|&n| n > 0), "every kind was checked: {seen:?}");
            // Most bids fit a value inline (the reason for the format).
            assert!(inline_bids * 10 > seen[Kind::Bid as usize] * 9, "{inline_bids} of {seen:?}");
        }
    }

    #[test]
    fn integers_round_trip_at_every_width() {
        let mut cases = vec![0, 1, 0x3f, 0x40, 0xfff, 0x1000, u64::MAX, u64::MAX - 1];
        cases.extend((0..64).map(|s| 1u64 << s));
        for v in cases {
            let mut bytes = Vec::new();
            put_uint(v, &mut bytes);
            assert!(bytes.iter().all(|&b| b < 0x80));
            let mut at = 0;
            assert_eq!(take_uint(&bytes, &mut at), Ok(v));
            assert_eq!(at, bytes.len());
        }
    }

    #[test]
    fn malformed_values_are_refused_and_leave_nothing_behind() {
        let generator = Generator::new(GeneratorConfig::default()).unwrap();
        let mut good = Vec::new();
        encode(&generator.event(7), &mut good);
        let mut too_long = good.clone();
        too_long.push(0);
        let mut overflow = vec![b'B'];
        overflow.extend([0x7f; 11]);
        overflow.push(0);
        // A bid whose auction has 64 bits and 2 more in its last group:
        // more than a u64 holds (the other fields are well formed).
        let mut wide = vec![b'B'];
        wide.extend([0x7f; 10]);
        wide.extend([0x3f, 1, 2, 1, b'x', 5]);
        for bad in [
            &b""[..],
            b"X",
            b"B",
            &good[..good.len() - 1],
            &too_long,
            &overflow,
            &wide,
            b"P\x05\x03ab",
        ] {
            let mut out = vec![Value::U64(1)];
            assert!(decode(bad, &mut out).is_err(), "{bad:?}");
            assert_eq!(out, [Value::U64(1)], "{bad:?}");
        }
        let wrong =
            [Value::U64(1), Value::U64(2), Value::from("x"), Value::from("y"), Value::U64(5)];
        assert!(encode_values(Kind::Bid, &wrong, &mut Vec::new()).is_err());
        assert!(encode_values(Kind::Bid, &wrong[..4], &mut Vec::new()).is_err());
    }
}
