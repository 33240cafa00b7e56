//! Typed configuration errors: [`Diagnostic`], the [`Diagnostics`] collection every
//! check pushes into, and the byte-offset → line:column conversion.
//!
//! Rendering is one line per error, in the shape compilers use so that editors can
//! jump to it:
//!
//! ```text
//! topologies/wc.toml:12:1: error: unknown key "paralelism" in bolt "split" (help: did you mean "parallelism"?)
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use crate::plugin::escape_controls;

/// A position in one of a topology's sources: the topology file itself, a
/// file it includes, or a `--set` argument ([`Sources`] names them). `line`
/// and `col` are 1-based; `col` counts characters, not bytes, so it matches
/// what an editor shows. A `--set` argument has no lines: its locations are
/// 0:0, and diagnostics there print no position.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Loc {
    /// Line number, starting at 1 (0 in a `--set` argument).
    pub line: u32,
    /// Column in characters, starting at 1 (0 in a `--set` argument).
    pub col: u32,
    /// Which source: an index into [`Sources`]; 0 is the topology file.
    pub source: u32,
}

impl Loc {
    /// The start of the topology file, used for errors that belong to no
    /// particular value.
    pub const START: Loc = Loc { line: 1, col: 1, source: 0 };

    /// A location in the topology file from a 1-based line and column.
    pub fn new(line: u32, col: u32) -> Self {
        Loc { line, col, source: 0 }
    }

    /// The same line and column in source `source`.
    pub fn in_source(self, source: u32) -> Self {
        Loc { source, ..self }
    }

    /// `false` for a location in a `--set` argument, which has no lines.
    pub fn has_position(&self) -> bool {
        self.line > 0
    }
}

/// The names of the sources a topology was read from, in the order of
/// [`Loc::source`]: the topology file first, then every file it includes
/// (directly or not), then one `--set KEY=VALUE` per override.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sources {
    names: Vec<PathBuf>,
}

impl Sources {
    /// Sources named `names`, in [`Loc::source`] order.
    pub fn new(names: Vec<PathBuf>) -> Self {
        Sources { names }
    }

    /// One source: the topology file `file`.
    pub fn single(file: &Path) -> Self {
        Sources { names: vec![file.to_path_buf()] }
    }

    /// The name of the source `loc` is in (the first source if `loc`'s is
    /// unknown).
    pub fn name(&self, loc: Loc) -> &Path {
        let index = usize::try_from(loc.source).unwrap_or(usize::MAX);
        self.names.get(index).or(self.names.first()).map_or(Path::new(""), PathBuf::as_path)
    }

    /// Every name, in [`Loc::source`] order.
    pub fn names(&self) -> &[PathBuf] {
        &self.names
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// One error in a topology file: where it is, what is wrong and, when we can tell,
/// how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file the error is in, as the user named it (or included it), or
    /// `--set KEY=VALUE` for an error in a command-line override.
    pub file: PathBuf,
    /// Where in the file.
    pub loc: Loc,
    /// Lowercase, no trailing period, naming what the user wrote.
    pub message: String,
    /// A suggested fix, such as `did you mean "parallelism"?`.
    pub help: Option<String>,
}

/// Control characters (newline, carriage return, ESC, NUL, ...) in a message
/// are written escaped (`\n`, `\u{1b}`), so that a name in a topology file
/// can neither break the one-line shape nor forge a log line or a terminal
/// escape, whatever message echoes it.
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = escape_controls(&self.file.to_string_lossy());
        if self.loc.has_position() {
            write!(f, "{file}:{}: error: {}", self.loc, escape_controls(&self.message))?;
        } else {
            write!(f, "{file}: error: {}", escape_controls(&self.message))?;
        }
        if let Some(help) = &self.help {
            write!(f, " (help: {})", escape_controls(help))?;
        }
        Ok(())
    }
}

/// Every error found in a topology file. Checks push into it and carry on, so the
/// user sees all problems in one run.
///
/// `Display` renders one line per diagnostic (see the module doc).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics {
    /// The errors, in the order they were found (sorted by position once a whole
    /// file has been checked).
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// An empty collection.
    pub fn new() -> Self {
        Diagnostics { items: Vec::new() }
    }

    /// Records one error.
    pub fn push(
        &mut self,
        file: &Path,
        loc: Loc,
        message: impl Into<String>,
        help: Option<String>,
    ) {
        self.items.push(Diagnostic {
            file: file.to_path_buf(),
            loc,
            message: message.into(),
            help,
        });
    }

    /// Records one error at `loc`, in the source `sources` names for it.
    pub fn push_at(
        &mut self,
        sources: &Sources,
        loc: Loc,
        message: impl Into<String>,
        help: Option<String>,
    ) {
        self.push(sources.name(loc), loc, message, help);
    }

    /// Moves every diagnostic of `other` into this collection.
    pub fn append(&mut self, other: Diagnostics) {
        self.items.extend(other.items);
    }

    /// `true` when no error was recorded.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Number of errors recorded.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// `Ok(value)` when no error was recorded, otherwise `Err(self)`.
    ///
    /// # Errors
    ///
    /// Returns `self` when it holds at least one diagnostic.
    pub fn into_result<T>(self, value: T) -> Result<T, Diagnostics> {
        if self.is_empty() {
            Ok(value)
        } else {
            Err(self)
        }
    }

    /// Sorts by file, then position. The sort is stable, so errors at the same
    /// place keep the order in which they were found.
    pub fn sort(&mut self) {
        self.items.sort_by(|a, b| (&a.file, a.loc).cmp(&(&b.file, b.loc)));
    }
}

/// How many errors of one kind are shown (see [`Diagnostics::listed`]): a
/// screenful.
pub const LISTED_PER_KIND: usize = 20;

impl Diagnostics {
    /// The errors as they are shown: at most [`LISTED_PER_KIND`] of each
    /// kind, in order, and in the place of the first one left out, one
    /// line that says how many more of that kind there are. Errors are of
    /// one kind when their messages differ only inside quotes, in numbers
    /// and after a colon (`unknown spout or bolt "…" in inputs of bolt
    /// "…"`). Linear in the length of the messages: 300,000 duplicate
    /// inputs printed 35.6 MB.
    pub fn listed(&self) -> Diagnostics {
        let mut shown: std::collections::HashMap<String, (usize, Option<usize>)> =
            std::collections::HashMap::new();
        let mut items = Vec::new();
        for item in &self.items {
            let kind = kind_of(&item.message);
            let (count, summary) = shown.entry(kind).or_insert((0, None));
            *count += 1;
            if *count <= LISTED_PER_KIND {
                items.push(item.clone());
            } else if summary.is_none() {
                *summary = Some(items.len());
                items.push(Diagnostic { help: None, ..item.clone() });
            }
        }
        for (kind, (count, summary)) in shown {
            let Some(at) = summary else { continue };
            let left_out = count - LISTED_PER_KIND;
            items[at].message = format!(
                "and {left_out} more error{} like '{kind}' (not listed; the first \
                 {LISTED_PER_KIND} are)",
                if left_out == 1 { "" } else { "s" }
            );
        }
        Diagnostics { items }
    }
}

/// What an error is, without what it names: its message with every quoted
/// part shown as `"…"`, every number as `N`, and nothing after the first
/// colon outside quotes.
fn kind_of(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(120));
    let mut chars = message.chars();
    let mut digits = false;
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push_str("\"…\"");
                // To the closing quote; a backslash escapes the next character.
                while let Some(q) = chars.next() {
                    match q {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            ':' => break,
            '0'..='9' => {
                if !digits {
                    out.push('N');
                }
            }
            _ => out.push(c),
        }
        digits = c.is_ascii_digit();
    }
    out
}

/// At most [`LISTED_PER_KIND`] errors of each kind, one line each (see
/// [`Diagnostics::listed`]); every error stays in `items`.
impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let listed = self.listed();
        for (i, item) in listed.items.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{item}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

impl From<Diagnostic> for Diagnostics {
    fn from(item: Diagnostic) -> Self {
        Diagnostics { items: vec![item] }
    }
}

/// Converts byte offsets (what the TOML parser reports) into [`Loc`]s.
#[derive(Debug)]
pub(crate) struct LineIndex<'t> {
    text: &'t str,
    lines: Lines,
}

impl<'t> LineIndex<'t> {
    pub(crate) fn new(text: &'t str) -> Self {
        LineIndex { text, lines: Lines::new(text) }
    }

    /// The location of byte `offset`. Offsets past the end map to just after the
    /// last character; offsets inside a multi-byte character map to that character.
    pub(crate) fn loc(&self, offset: usize) -> Loc {
        locate(self.text, &self.lines, offset)
    }
}

/// Bytes per block of [`Lines::chars_before`].
const BLOCK: usize = 64;

/// What finds a position in a text in constant time: where each line
/// starts, and how many characters start before each 64-byte block. A
/// column is then a difference of two character counts, each at most 63
/// bytes from a block boundary, instead of a count from the start of the
/// line, which made a file with many positions on one long line (100,000
/// inputs in one array: 1.6 MB) quadratic.
#[derive(Debug, Clone, Default)]
pub(crate) struct Lines {
    /// Byte offset at which each line starts; `starts[0] == 0`.
    starts: Vec<usize>,
    /// Characters that start before byte `i * BLOCK`, for each block `i`.
    chars_before: Vec<usize>,
}

impl Lines {
    /// Indexes `text`: one pass.
    pub(crate) fn new(text: &str) -> Self {
        let newlines = text.match_indices('\n').map(|(i, _)| i + 1);
        let starts = std::iter::once(0).chain(newlines).collect();
        let mut chars_before = Vec::with_capacity(text.len() / BLOCK + 1);
        let mut n = 0;
        for block in text.as_bytes().chunks(BLOCK) {
            chars_before.push(n);
            n += block.iter().filter(|&&b| !is_continuation(b)).count();
        }
        chars_before.push(n);
        Lines { starts, chars_before }
    }

    /// Characters that start before byte `offset` of `text` (indexed by `self`).
    fn chars_to(&self, text: &str, offset: usize) -> usize {
        let block = offset / BLOCK;
        let from = block * BLOCK;
        let tail = &text.as_bytes()[from..offset];
        #[cfg(test)]
        SCANNED.with(|n| n.set(n.get() + tail.len() as u64));
        self.chars_before.get(block).copied().unwrap_or(0)
            + tail.iter().filter(|&&b| !is_continuation(b)).count()
    }
}

/// True for the second to fourth bytes of a UTF-8 character.
fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// The location (in source 0) of byte `offset` of `text`, indexed by
/// `lines`; see [`LineIndex::loc`]. Constant time.
pub(crate) fn locate(text: &str, lines: &Lines, offset: usize) -> Loc {
    let offset = offset.min(text.len());
    // `starts[0] == 0 <= offset`, so the partition point is at least 1.
    let line = lines.starts.partition_point(|&start| start <= offset).max(1) - 1;
    let mut start = lines.starts.get(line).copied().unwrap_or(0);
    // A byte-order mark is not a column an editor shows.
    if start == 0 && text.starts_with('\u{feff}') && offset >= 3 {
        start = 3;
    }
    // The characters that end at or before `offset`: those that start
    // before it, less one whose middle `offset` is in.
    let inside = text.as_bytes().get(offset).is_some_and(|&b| is_continuation(b));
    let col = lines.chars_to(text, offset) - lines.chars_to(text, start) - usize::from(inside);
    Loc::new(saturating_u32(line + 1), saturating_u32(col + 1))
}

#[cfg(test)]
thread_local! {
    /// Bytes of text [`locate`] has examined on this thread: the work a
    /// test can bound.
    pub(crate) static SCANNED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_index_counts_lines_and_characters_from_one() {
        let index = LineIndex::new("ab\nc\u{e9}d\n\nx");
        assert_eq!(index.loc(0), Loc::new(1, 1));
        assert_eq!(index.loc(1), Loc::new(1, 2));
        assert_eq!(index.loc(3), Loc::new(2, 1));
        // 'é' is two bytes; 'd' is the third character of line 2.
        assert_eq!(index.loc(6), Loc::new(2, 3));
        assert_eq!(index.loc(8), Loc::new(3, 1));
        assert_eq!(index.loc(9), Loc::new(4, 1));
    }

    #[test]
    fn line_index_agrees_with_counting_characters_at_every_offset() {
        // Long lines of one- to four-byte characters across block boundaries.
        let line: String =
            (0..300).map(|i| ['a', '\u{e9}', '\u{20ac}', '\u{1f600}'][i % 4]).collect();
        let text = format!("\u{feff}{line}\n{line}\nx\n\n{line}");
        let index = LineIndex::new(&text);
        for offset in 0..=text.len() + 1 {
            let clamped = offset.min(text.len());
            let boundary = (0..=clamped).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
            let before = &text[..boundary];
            let line = before.matches('\n').count() + 1;
            let start = before.rfind('\n').map_or(0, |i| i + 1);
            let start = if start == 0 && clamped >= 3 { 3 } else { start };
            let col = text[start.min(before.len())..before.len()].chars().count();
            // A character whose end is past the offset is not counted.
            assert_eq!(index.loc(offset), Loc::new(line as u32, col as u32 + 1), "offset {offset}");
        }
    }

    #[test]
    fn line_index_clamps_offsets_past_the_end() {
        let index = LineIndex::new("ab\ncd");
        assert_eq!(index.loc(100), Loc::new(2, 3));
        assert_eq!(LineIndex::new("").loc(5), Loc::new(1, 1));
    }

    #[test]
    fn line_index_maps_the_middle_of_a_character_to_that_character() {
        let index = LineIndex::new("\u{e9}x");
        assert_eq!(index.loc(1), Loc::new(1, 1));
        assert_eq!(index.loc(2), Loc::new(1, 2));
    }

    #[test]
    fn a_byte_order_mark_does_not_shift_columns() {
        let index = LineIndex::new("\u{feff}ab\ncd");
        assert_eq!(index.loc(3), Loc::new(1, 1));
        assert_eq!(index.loc(4), Loc::new(1, 2));
        assert_eq!(index.loc(0), Loc::new(1, 1));
    }

    #[test]
    fn diagnostic_renders_file_line_col_message_and_help() {
        let mut diags = Diagnostics::new();
        diags.push(
            Path::new("topo.toml"),
            Loc::new(3, 7),
            "unknown key \"paralelism\" in bolt \"split\"",
            Some("did you mean \"parallelism\"?".to_string()),
        );
        diags.push(Path::new("topo.toml"), Loc::new(9, 1), "topology has no spouts", None);
        assert_eq!(
            diags.to_string(),
            "topo.toml:3:7: error: unknown key \"paralelism\" in bolt \"split\" \
             (help: did you mean \"parallelism\"?)\n\
             topo.toml:9:1: error: topology has no spouts"
        );
    }

    #[test]
    fn control_characters_are_escaped_when_rendered() {
        let mut diags = Diagnostics::new();
        let message = "bad name \"a\nt.toml:1:1: error: forged\u{1b}[2J\r\0\"";
        diags.push(Path::new("t\n.toml"), Loc::new(2, 3), message, Some("x\ny".to_string()));
        let text = diags.to_string();
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert_eq!(
            text,
            "t\\n.toml:2:3: error: bad name \"a\\nt.toml:1:1: error: forged\\u{1b}[2J\\r\\0\" (help: x\\ny)"
        );
    }

    #[test]
    fn into_result_is_ok_only_without_diagnostics() {
        assert_eq!(Diagnostics::new().into_result(5), Ok(5));
        let mut diags = Diagnostics::new();
        diags.push(Path::new("t.toml"), Loc::START, "bad", None);
        assert_eq!(diags.clone().into_result(5), Err(diags));
    }

    #[test]
    fn sort_orders_by_position_and_keeps_ties_in_order() {
        let mut diags = Diagnostics::new();
        let file = Path::new("t.toml");
        diags.push(file, Loc::new(5, 1), "b", None);
        diags.push(file, Loc::new(2, 4), "a", None);
        diags.push(file, Loc::new(5, 1), "c", None);
        diags.sort();
        let messages: Vec<_> = diags.items.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(messages, ["a", "b", "c"]);
    }
}
