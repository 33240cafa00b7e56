//! A bounds check of an ELF file before `dlopen` maps it.
//!
//! The dynamic loader maps every `PT_LOAD` segment of a library with `mmap`.
//! A segment whose file range runs past the end of the file maps without
//! complaint, and the first access to a page past the end kills the process
//! with SIGBUS. So before a file reaches `dlopen`, its ELF64 header and
//! program header table are read here and every `PT_LOAD` file range
//! (`p_offset + p_filesz`) is checked against the file's length. Anything
//! this check does not understand (not ELF at all, 32-bit, an odd program
//! header size) is left to `dlopen`, which refuses it with its own message.

use std::io;

/// `PT_LOAD`: a segment the loader maps.
const PT_LOAD: u32 = 1;
/// The size of an ELF64 file header.
const EHDR_SIZE: u64 = 64;
/// The size of one ELF64 program header.
const PHDR_SIZE: u64 = 56;

/// What the check found in a file it could read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// An ELF64 file whose program header table and loadable segments all
    /// lie within the file.
    Sane,
    /// Not an ELF64 file this check reads (no ELF magic, 32-bit, an unknown
    /// byte order or program header size): `dlopen` judges it.
    Unchecked,
    /// Part of what the loader would read or map lies past the end of the
    /// file: what, in one phrase.
    OutOfBounds(String),
}

/// Checks the ELF file of `len` bytes that `read_at(offset, buf)` reads
/// (exactly `buf.len()` bytes at `offset`, within `len`).
///
/// # Errors
/// What `read_at` returns.
pub(super) fn check(
    len: u64,
    read_at: &mut dyn FnMut(u64, &mut [u8]) -> io::Result<()>,
) -> io::Result<Verdict> {
    let Some(field) = byte_order(len, read_at)? else { return Ok(Verdict::Unchecked) };
    if len < EHDR_SIZE {
        return Ok(Verdict::OutOfBounds(format!(
            "the ELF header ({EHDR_SIZE} bytes) is cut off at byte {len}"
        )));
    }
    let mut ehdr = [0u8; EHDR_SIZE as usize];
    read_at(0, &mut ehdr)?;
    let phoff = field.u64(&ehdr, 0x20);
    let phentsize = u64::from(field.u16(&ehdr, 0x36));
    let phnum = u64::from(field.u16(&ehdr, 0x38));
    if phnum == 0 {
        return Ok(Verdict::Sane);
    }
    if phentsize != PHDR_SIZE {
        return Ok(Verdict::Unchecked);
    }
    let table_end = phoff.checked_add(phnum * PHDR_SIZE);
    if table_end.is_none_or(|end| end > len) {
        return Ok(Verdict::OutOfBounds(format!(
            "its program header table ({phnum} entries at byte {phoff}) ends past the end of \
             the file"
        )));
    }
    let mut table = vec![0u8; (phnum * PHDR_SIZE) as usize];
    read_at(phoff, &mut table)?;
    Ok(check_segments(field, &table, len))
}

/// The byte order of an ELF64 file, from its identification bytes; `None`
/// for a file that is not ELF64 or has an unknown byte order.
fn byte_order(
    len: u64,
    read_at: &mut dyn FnMut(u64, &mut [u8]) -> io::Result<()>,
) -> io::Result<Option<Fields>> {
    let mut ident = [0u8; 6];
    if len < ident.len() as u64 {
        return Ok(None);
    }
    read_at(0, &mut ident)?;
    if ident[..4] != *b"\x7fELF" || ident[4] != 2 {
        // Not ELF, or not ELF64 (ELFCLASS64 = 2).
        return Ok(None);
    }
    let big_endian = match ident[5] {
        1 => false,
        2 => true,
        _ => return Ok(None),
    };
    Ok(Some(Fields { big_endian }))
}

/// Checks every `PT_LOAD` entry of the program header `table` against the
/// file's `len`.
fn check_segments(field: Fields, table: &[u8], len: u64) -> Verdict {
    for (i, phdr) in table.chunks_exact(PHDR_SIZE as usize).enumerate() {
        if field.u32(phdr, 0) != PT_LOAD {
            continue;
        }
        let offset = field.u64(phdr, 8);
        let filesz = field.u64(phdr, 32);
        let end = offset.checked_add(filesz);
        if end.is_none_or(|end| end > len) {
            let end = end.map_or_else(|| "beyond 2^64".to_owned(), |e| e.to_string());
            return Verdict::OutOfBounds(format!(
                "its loadable segment {i} (PT_LOAD, file bytes {offset}..{end}) ends past the \
                 end of the file"
            ));
        }
    }
    Verdict::Sane
}

/// Reads fixed-size fields in the file's byte order. Every caller passes an
/// offset that fits its slice (the header and program headers have fixed
/// sizes, checked above).
#[derive(Clone, Copy)]
struct Fields {
    big_endian: bool,
}

impl Fields {
    fn bytes<const N: usize>(self, buf: &[u8], at: usize) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&buf[at..at + N]);
        if self.big_endian {
            out.reverse();
        }
        out
    }

    fn u16(self, buf: &[u8], at: usize) -> u16 {
        u16::from_le_bytes(self.bytes(buf, at))
    }

    fn u32(self, buf: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(self.bytes(buf, at))
    }

    fn u64(self, buf: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(self.bytes(buf, at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic little-endian ELF64 shared object of `len` bytes (more
    /// if its program header table needs them) with that table at `phoff`
    /// and one program header per `(type, offset, filesz)`.
    fn elf(len: usize, phoff: u64, segments: &[(u32, u64, u64)]) -> Vec<u8> {
        let mut bytes = vec![0u8; len.max(EHDR_SIZE as usize)];
        bytes[..4].copy_from_slice(b"\x7fELF");
        bytes[4] = 2; // ELFCLASS64
        bytes[5] = 1; // little endian
        bytes[6] = 1; // EV_CURRENT
        bytes[0x10..0x12].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
        bytes[0x20..0x28].copy_from_slice(&phoff.to_le_bytes());
        bytes[0x34..0x36].copy_from_slice(&(EHDR_SIZE as u16).to_le_bytes());
        bytes[0x36..0x38].copy_from_slice(&(PHDR_SIZE as u16).to_le_bytes());
        bytes[0x38..0x3a].copy_from_slice(&(segments.len() as u16).to_le_bytes());
        for (i, &(kind, offset, filesz)) in segments.iter().enumerate() {
            let at = phoff as usize + i * PHDR_SIZE as usize;
            if bytes.len() < at + PHDR_SIZE as usize {
                bytes.resize(at + PHDR_SIZE as usize, 0);
            }
            bytes[at..at + 4].copy_from_slice(&kind.to_le_bytes());
            bytes[at + 8..at + 16].copy_from_slice(&offset.to_le_bytes());
            bytes[at + 32..at + 40].copy_from_slice(&filesz.to_le_bytes());
        }
        bytes
    }

    fn verdict(bytes: &[u8]) -> Verdict {
        let mut read = |offset: u64, buf: &mut [u8]| -> io::Result<()> {
            let at = usize::try_from(offset).expect("small");
            let src = bytes.get(at..at + buf.len()).ok_or(io::ErrorKind::UnexpectedEof)?;
            buf.copy_from_slice(src);
            Ok(())
        };
        check(bytes.len() as u64, &mut read).expect("reads stay within the file")
    }

    #[test]
    fn segments_within_the_file_are_sane() {
        let bytes = elf(4096, 64, &[(PT_LOAD, 0, 2048), (PT_LOAD, 2048, 2048), (2, 3000, 100)]);
        assert_eq!(verdict(&bytes), Verdict::Sane);
    }

    #[test]
    fn a_load_segment_past_the_end_is_out_of_bounds() {
        let bytes = elf(3000, 64, &[(PT_LOAD, 0, 2048), (PT_LOAD, 2048, 2048)]);
        let Verdict::OutOfBounds(what) = verdict(&bytes) else { panic!("{bytes:?}") };
        assert_eq!(
            what,
            "its loadable segment 1 (PT_LOAD, file bytes 2048..4096) ends past the end of the file"
        );
    }

    #[test]
    fn only_load_segments_are_checked() {
        // A PT_NOTE (4) past the end is not mapped by the loader.
        let bytes = elf(4096, 64, &[(PT_LOAD, 0, 4096), (4, 5000, 100)]);
        assert_eq!(verdict(&bytes), Verdict::Sane);
    }

    #[test]
    fn an_overflowing_segment_is_out_of_bounds() {
        let bytes = elf(4096, 64, &[(PT_LOAD, u64::MAX - 10, 100)]);
        let Verdict::OutOfBounds(what) = verdict(&bytes) else { panic!() };
        assert!(what.contains("beyond 2^64"), "{what}");
    }

    #[test]
    fn a_program_header_table_past_the_end_is_out_of_bounds() {
        let mut bytes = elf(4096, 4000, &[(PT_LOAD, 0, 100), (PT_LOAD, 100, 100)]);
        bytes.truncate(4096);
        let Verdict::OutOfBounds(what) = verdict(&bytes) else { panic!() };
        assert_eq!(
            what,
            "its program header table (2 entries at byte 4000) ends past the end of the file"
        );
        // A table offset so large that its end overflows.
        let mut bytes = elf(200, 64, &[(PT_LOAD, 0, 100)]);
        bytes[0x20..0x28].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
        assert!(matches!(verdict(&bytes), Verdict::OutOfBounds(_)));
    }

    #[test]
    fn a_cut_off_header_is_out_of_bounds() {
        let bytes = elf(64, 64, &[]);
        let Verdict::OutOfBounds(what) = verdict(&bytes[..40]) else { panic!() };
        assert_eq!(what, "the ELF header (64 bytes) is cut off at byte 40");
    }

    #[test]
    fn big_endian_fields_are_read_in_their_order() {
        let mut bytes = vec![0u8; 4096];
        bytes[..6].copy_from_slice(b"\x7fELF\x02\x02");
        bytes[0x20..0x28].copy_from_slice(&64u64.to_be_bytes());
        bytes[0x36..0x38].copy_from_slice(&(PHDR_SIZE as u16).to_be_bytes());
        bytes[0x38..0x3a].copy_from_slice(&1u16.to_be_bytes());
        bytes[64..68].copy_from_slice(&PT_LOAD.to_be_bytes());
        bytes[64 + 32..64 + 40].copy_from_slice(&5000u64.to_be_bytes());
        assert!(matches!(verdict(&bytes), Verdict::OutOfBounds(_)));
        bytes[64 + 32..64 + 40].copy_from_slice(&4096u64.to_be_bytes());
        assert_eq!(verdict(&bytes), Verdict::Sane);
    }

    #[test]
    fn what_is_not_elf64_is_left_to_dlopen() {
        assert_eq!(verdict(b"not an ELF file at all"), Verdict::Unchecked);
        assert_eq!(verdict(b"\x7fEL"), Verdict::Unchecked);
        let mut elf32 = elf(4096, 64, &[(PT_LOAD, 0, 9999)]);
        elf32[4] = 1; // ELFCLASS32
        assert_eq!(verdict(&elf32), Verdict::Unchecked);
        let mut odd = elf(4096, 64, &[(PT_LOAD, 0, 9999)]);
        odd[0x36..0x38].copy_from_slice(&32u16.to_le_bytes());
        assert_eq!(verdict(&odd), Verdict::Unchecked);
    }
}
