//! PostgreSQL's binary COPY format, for the columns this backend moves
//! (`text` and `bytea`, whose binary forms are their bytes).

use std::io::{self, BufRead, Read};

/// The signature, flags and header extension length of a binary COPY.
const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

/// Writes rows of nullable byte fields in the binary COPY format.
#[derive(Debug)]
pub(crate) struct CopyEncoder {
    buf: Vec<u8>,
}

impl CopyEncoder {
    pub(crate) fn new() -> Self {
        let mut buf = Vec::with_capacity(1 << 20);
        buf.extend_from_slice(HEADER);
        CopyEncoder { buf }
    }

    /// Appends one row.
    pub(crate) fn row(&mut self, fields: &[Option<&[u8]>]) {
        let count = i16::try_from(fields.len()).expect("few columns");
        self.buf.extend_from_slice(&count.to_be_bytes());
        for field in fields {
            match field {
                Some(bytes) => {
                    let len = i32::try_from(bytes.len()).expect("a field under 2 GiB");
                    self.buf.extend_from_slice(&len.to_be_bytes());
                    self.buf.extend_from_slice(bytes);
                }
                None => self.buf.extend_from_slice(&(-1_i32).to_be_bytes()),
            }
        }
    }

    /// True when enough is buffered to be sent.
    pub(crate) fn full(&self) -> bool {
        self.buf.len() >= 1 << 20
    }

    /// Takes what is buffered.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// Appends the trailer.
    pub(crate) fn finish(&mut self) {
        self.buf.extend_from_slice(&(-1_i16).to_be_bytes());
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("malformed binary COPY data: {what}"))
}

/// Reads the rows of a binary COPY of two non-null byte columns, calling
/// `row` with each.
pub(crate) fn decode_pairs(
    reader: &mut impl BufRead,
    mut row: impl FnMut(Vec<u8>, Vec<u8>),
) -> io::Result<()> {
    let mut header = [0_u8; 19];
    reader.read_exact(&mut header)?;
    if header[..11] != HEADER[..11] {
        return Err(bad("no PGCOPY signature"));
    }
    let ext = u32::from_be_bytes([header[15], header[16], header[17], header[18]]);
    io::copy(&mut reader.by_ref().take(u64::from(ext)), &mut io::sink())?;
    loop {
        let mut count = [0_u8; 2];
        reader.read_exact(&mut count)?;
        match i16::from_be_bytes(count) {
            -1 => return Ok(()),
            2 => {}
            n => return Err(bad(&format!("a row of {n} columns"))),
        }
        let key = field(reader)?;
        let value = field(reader)?;
        row(key, value);
    }
}

fn field(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut len = [0_u8; 4];
    reader.read_exact(&mut len)?;
    let len = usize::try_from(i32::from_be_bytes(len)).map_err(|_| bad("a null field"))?;
    let mut out = vec![0_u8; len];
    reader.read_exact(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_pairs_decode_back() {
        let mut e = CopyEncoder::new();
        e.row(&[Some(b"k1"), Some(b"")]);
        e.row(&[Some(&[0, 255]), Some(b"v")]);
        e.finish();
        let bytes = e.take();
        let mut got = Vec::new();
        decode_pairs(&mut &bytes[..], |k, v| got.push((k, v))).unwrap();
        assert_eq!(got, vec![(b"k1".to_vec(), b"".to_vec()), (vec![0, 255], b"v".to_vec())]);
        assert!(decode_pairs(&mut &bytes[..10], |_, _| {}).is_err());
    }
}
