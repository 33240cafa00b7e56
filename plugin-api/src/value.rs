//! [`Value`]: the type of one tuple field.
//!
//! The variant set is part of the ABI and frozen for contract 1.x (adding a
//! variant to an exhaustive `#[repr(u8)]` enum breaks every built plugin), so it
//! was chosen up front with the hot path in mind:
//! - scalars are stored inline;
//! - strings of up to [`SmallStr::CAPACITY`] bytes are stored inline too
//!   ([`Value::SmallStr`]), so a word or a key never allocates;
//! - [`Value::SharedStr`] and [`Value::SharedBytes`] share one immutable buffer
//!   between every copy, for large values emitted again and again.
//!
//! Equality and hashing look at the content only: `Value::from("a")` (inline),
//! a heap `Str` and a `SharedStr` holding `"a"` are equal and hash the same, so
//! a fields grouping routes them to the same task.

use std::hash::{Hash, Hasher};

use abi_stable::{
    std_types::{RArc, RString, RVec},
    StableAbi,
};

/// One field of a tuple.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone)]
pub enum Value {
    /// No value.
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    I64(i64),
    /// An unsigned integer.
    U64(u64),
    /// A float.
    F64(f64),
    /// A string of at most [`SmallStr::CAPACITY`] bytes, stored inline.
    SmallStr(SmallStr),
    /// A heap string.
    Str(RString),
    /// A string shared by reference count between copies.
    SharedStr(RArc<RString>),
    /// A byte buffer.
    Bytes(RVec<u8>),
    /// A byte buffer shared by reference count between copies.
    SharedBytes(RArc<RVec<u8>>),
    /// A list of values.
    List(RVec<Value>),
}

/// A string stored inline in a [`Value`], without allocation.
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct SmallStr {
    len: u8,
    bytes: [u8; SmallStr::CAPACITY],
}

impl SmallStr {
    /// The longest string, in bytes, that fits inline.
    pub const CAPACITY: usize = 31;

    /// The empty string.
    pub const EMPTY: Self = Self { len: 0, bytes: [0; Self::CAPACITY] };

    /// Stores `s` inline, or returns `None` when it is longer than [`Self::CAPACITY`].
    #[inline]
    pub fn new(s: &str) -> Option<Self> {
        let len = s.len();
        if len > Self::CAPACITY {
            return None;
        }
        // The bytes are gathered in two registers and stored whole. A
        // `copy_from_slice` of a variable length leaves narrow stores that
        // the copy of the whole value right after it has to wait for (a
        // store-forwarding stall on every inline string built).
        let (lo, hi) = gather(s.as_bytes());
        let mut bytes = [0u8; Self::CAPACITY];
        bytes[..16].copy_from_slice(&lo.to_le_bytes());
        bytes[16..].copy_from_slice(&hi.to_le_bytes()[..Self::CAPACITY - 16]);
        Some(Self { len: len as u8, bytes })
    }

    /// Replaces the string in place with `s`; returns false, leaving it
    /// unchanged, when `s` is longer than [`Self::CAPACITY`].
    #[inline]
    pub fn set(&mut self, s: &str) -> bool {
        if s.len() > Self::CAPACITY {
            return false;
        }
        let (lo, hi) = gather(s.as_bytes());
        self.len = s.len() as u8;
        self.bytes[..16].copy_from_slice(&lo.to_le_bytes());
        self.bytes[16..].copy_from_slice(&hi.to_le_bytes()[..Self::CAPACITY - 16]);
        true
    }

    /// The string.
    pub fn as_str(&self) -> &str {
        let bytes = &self.bytes[..usize::from(self.len)];
        // `new` only ever copies a whole `&str`, so the bytes are UTF-8; fall back
        // to "" rather than trusting memory written by a foreign plugin.
        std::str::from_utf8(bytes).unwrap_or("")
    }
}

/// The bytes of `src` (at most 31) as two little-endian 128-bit words,
/// zero past its end: `lo` holds bytes 0..16, `hi` bytes 16..32. Each part
/// is read with two overlapping loads of a fixed size, so there is no copy
/// of a variable length.
#[inline]
fn gather(src: &[u8]) -> (u128, u128) {
    fn le<const N: usize>(b: &[u8]) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&b[..N]);
        out
    }
    let len = src.len();
    let u32_at = |i: usize| u128::from(u32::from_le_bytes(le(&src[i..])));
    let u64_at = |i: usize| u128::from(u64::from_le_bytes(le(&src[i..])));
    let u128_at = |i: usize| u128::from_le_bytes(le(&src[i..]));
    match len {
        0 => (0, 0),
        1..=3 => {
            let v = src.iter().enumerate().fold(0u128, |v, (i, &b)| v | u128::from(b) << (8 * i));
            (v, 0)
        }
        // The second load ends at the last byte; where the two overlap
        // they hold the same bytes, so OR joins them.
        4..=7 => (u32_at(0) | u32_at(len - 4) << (8 * (len - 4)), 0),
        8..=15 => (u64_at(0) | u64_at(len - 8) << (8 * (len - 8)), 0),
        16 => (u128_at(0), 0),
        _ => (u128_at(0), u128_at(len - 16) >> (8 * (32 - len))),
    }
}

impl std::fmt::Debug for SmallStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl Value {
    /// Appends `Value::from(s)` to `out`, built in place: the same value
    /// as `out.push(Value::from(s))`, which builds it on the stack first
    /// and copies it, and the copy waits for the narrow stores that built
    /// it (a store-forwarding stall, measurable in a loop that makes many
    /// values, such as a word splitter).
    #[inline]
    pub fn push_str(out: &mut Vec<Value>, s: &str) {
        // Copied from memory, not built from immediates: a constant is
        // written to the stack in narrow stores, which the push waits for.
        static EMPTY: Value = Value::SmallStr(SmallStr::EMPTY);
        out.push(EMPTY.clone());
        let set = match out.last_mut() {
            Some(Value::SmallStr(small)) => small.set(s),
            _ => false,
        };
        if !set {
            if let Some(last) = out.last_mut() {
                *last = Value::Str(RString::from(s));
            }
        }
    }

    /// Appends `Value::U64(n)` to `out`, built in place (see
    /// [`push_str`](Self::push_str)).
    #[inline]
    pub fn push_u64(out: &mut Vec<Value>, n: u64) {
        static ZERO: Value = Value::U64(0);
        out.push(ZERO.clone());
        if let Some(Value::U64(last)) = out.last_mut() {
            *last = n;
        }
    }

    /// A string value: inline when short, on the heap otherwise.
    #[inline]
    pub fn str(s: &str) -> Self {
        match SmallStr::new(s) {
            Some(small) => Value::SmallStr(small),
            None => Value::Str(RString::from(s)),
        }
    }

    /// A string value whose buffer is shared between all copies.
    pub fn shared_str(s: &str) -> Self {
        Value::SharedStr(RArc::new(RString::from(s)))
    }

    /// A byte value whose buffer is shared between all copies.
    pub fn shared_bytes(bytes: &[u8]) -> Self {
        Value::SharedBytes(RArc::new(RVec::from(bytes)))
    }

    /// The string, for any of the string variants.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::SmallStr(s) => Some(s.as_str()),
            Value::Str(s) => Some(s.as_str()),
            Value::SharedStr(s) => Some(s.as_str()),
            _ => None,
        }
    }

    /// The bytes, for either byte variant.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(b) => Some(b.as_slice()),
            Value::SharedBytes(b) => Some(b.as_slice()),
            _ => None,
        }
    }

    /// The value as an `i64`, converting from `U64` when it fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::I64(v) => Some(v),
            Value::U64(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a `u64`, converting from a non-negative `I64`.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U64(v) => Some(v),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as an `f64`.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a `bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// The list's items.
    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(items) => Some(items.as_slice()),
            _ => None,
        }
    }

    /// The size of the value's encoding in bytes: what a byte-rate throttle counts.
    ///
    /// Scalars count 8 bytes (a bool 1, null 0); strings and byte buffers count
    /// their length; a list counts the sum of its items.
    #[inline]
    pub fn encoded_len(&self) -> usize {
        // Lengths only: no UTF-8 check of an inline string (the host calls
        // this on every tuple under a byte budget).
        match self {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::I64(_) | Value::U64(_) | Value::F64(_) => 8,
            Value::SmallStr(s) => usize::from(s.len).min(SmallStr::CAPACITY),
            Value::Str(s) => s.len(),
            Value::SharedStr(s) => s.len(),
            Value::Bytes(b) => b.len(),
            Value::SharedBytes(b) => b.len(),
            Value::List(items) => list_encoded_len(items),
        }
    }
}

/// A list's [`Value::encoded_len`]: out of line, so that the scalar and
/// string cases, which a byte budget counts on every tuple, inline into the
/// host's emit path (a recursive function does not inline).
#[inline(never)]
fn list_encoded_len(items: &[Value]) -> usize {
    items.iter().map(Value::encoded_len).sum()
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::I64(a), Value::I64(b)) => a == b,
            (Value::U64(a), Value::U64(b)) => a == b,
            (Value::F64(a), Value::F64(b)) => a.to_bits() == b.to_bits(),
            (Value::List(a), Value::List(b)) => a == b,
            (a, b) => match (a.as_str(), b.as_str()) {
                (Some(x), Some(y)) => x == y,
                _ => matches!((a.as_bytes(), b.as_bytes()), (Some(x), Some(y)) if x == y),
            },
        }
    }
}

impl Eq for Value {}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Value::Null => state.write_u8(0),
            Value::Bool(v) => state.write_u8(2 + u8::from(*v)),
            Value::I64(v) => state.write_i64(*v),
            Value::U64(v) => state.write_u64(*v),
            Value::F64(v) => state.write_u64(v.to_bits()),
            Value::List(items) => items.iter().for_each(|v| v.hash(state)),
            other => {
                if let Some(s) = other.as_str() {
                    state.write(s.as_bytes());
                    state.write_u8(0xff);
                } else if let Some(b) = other.as_bytes() {
                    state.write(b);
                    state.write_u8(0xfe);
                }
            }
        }
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::U64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::List(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            other => match (other.as_str(), other.as_bytes()) {
                (Some(s), _) => f.write_str(s),
                (_, Some(b)) => write!(f, "<{} bytes>", b.len()),
                _ => Ok(()),
            },
        }
    }
}

impl From<&str> for Value {
    #[inline]
    fn from(s: &str) -> Self {
        Value::str(s)
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        match SmallStr::new(&s) {
            Some(small) => Value::SmallStr(small),
            None => Value::Str(RString::from(s)),
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::I64(v)
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::U64(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::F64(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Bytes(RVec::from(v))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_small_string_holds_exactly_its_bytes_at_every_length() {
        // Every length 0..=31, with no zero byte in the text, so a byte that
        // leaked from a load past the end, or one that was lost, shows.
        let text: String = ('a'..='z').chain('A'..='Z').collect();
        for len in 0..=SmallStr::CAPACITY {
            let s = &text[..len];
            let small = SmallStr::new(s).expect("fits");
            assert_eq!(small.as_str(), s, "length {len}");
            assert_eq!(usize::from(small.len), len);
            assert!(small.bytes[len..].iter().all(|&b| b == 0), "zero past the end at {len}");
        }
        // Multi-byte characters, at the lengths where the loads overlap.
        for s in
            ["é", "aé", "日本", "aaaé", "日本語テキ", "ascii and ünïcödé!", "ünïcödé ünïcödé ünïc"]
        {
            assert!(s.len() <= SmallStr::CAPACITY, "{s}");
            assert_eq!(SmallStr::new(s).expect("fits").as_str(), s);
        }
        assert!(SmallStr::new(&text[..32]).is_none());
    }

    use super::*;
    use std::collections::hash_map::DefaultHasher;

    fn hash_of(v: &Value) -> u64 {
        let mut h = DefaultHasher::new();
        v.hash(&mut h);
        h.finish()
    }

    #[test]
    fn values_pushed_in_place_are_the_values_from_builds() {
        let text: String = ('a'..='z').chain('A'..='Z').collect();
        let mut out = Vec::new();
        for len in 0..=SmallStr::CAPACITY + 1 {
            Value::push_str(&mut out, &text[..len]);
        }
        Value::push_str(&mut out, "ünïcödé");
        Value::push_u64(&mut out, u64::MAX);
        Value::push_u64(&mut out, 7);
        assert_eq!(out.len(), SmallStr::CAPACITY + 5);
        for (len, v) in out[..=SmallStr::CAPACITY].iter().enumerate() {
            let Value::SmallStr(small) = v else { panic!("length {len} not inline: {v:?}") };
            let built = SmallStr::new(&text[..len]).expect("fits");
            assert_eq!((small.len, small.bytes), (built.len, built.bytes), "length {len}");
        }
        assert!(matches!(&out[32], Value::Str(s) if s.as_str() == &text[..32]), "{:?}", out[32]);
        assert_eq!(out[33].as_str(), Some("ünïcödé"));
        assert!(matches!(out[34], Value::U64(u64::MAX)) && matches!(out[35], Value::U64(7)));
    }

    #[test]
    fn a_small_string_set_in_place_leaves_no_byte_of_the_longer_one_before() {
        let mut small = SmallStr::new("a string thirty-one bytes long!").expect("fits");
        assert!(small.set("short"));
        assert_eq!(small.as_str(), "short");
        assert_eq!((small.len, small.bytes), (5, SmallStr::new("short").expect("fits").bytes));
        let long = "x".repeat(SmallStr::CAPACITY + 1);
        assert!(!small.set(&long), "too long");
        assert_eq!(small.as_str(), "short", "unchanged");
    }

    #[test]
    fn short_strings_are_stored_inline() {
        assert!(matches!(Value::from("hello"), Value::SmallStr(_)));
        let long = "x".repeat(SmallStr::CAPACITY + 1);
        assert!(matches!(Value::from(long.as_str()), Value::Str(_)));
        assert_eq!(Value::from("hello").as_str(), Some("hello"));
    }

    #[test]
    fn string_variants_with_equal_content_are_equal_and_hash_alike() {
        let inline = Value::from("word");
        let heap = Value::Str(RString::from("word"));
        let shared = Value::shared_str("word");
        assert_eq!(inline, heap);
        assert_eq!(heap, shared);
        assert_eq!(hash_of(&inline), hash_of(&heap));
        assert_eq!(hash_of(&heap), hash_of(&shared));
        assert_ne!(Value::from("word"), Value::from("other"));
    }

    #[test]
    fn encoded_len_counts_content_bytes() {
        assert_eq!(Value::from("abc").encoded_len(), 3);
        assert_eq!(Value::I64(1).encoded_len(), 8);
        assert_eq!(Value::List(vec![Value::from("ab"), Value::Bool(true)].into()).encoded_len(), 3);
    }

    #[test]
    fn value_stays_forty_bytes() {
        assert_eq!(std::mem::size_of::<Value>(), 40);
    }
}
