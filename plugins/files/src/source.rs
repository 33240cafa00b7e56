//! Reading lines from the spout's input without blocking: one file or a
//! directory of files, read once or followed like `tail -F`.
//!
//! [`Reader::next_line`] returns the next complete line, or `None` when
//! there is none yet. In follow mode a reader at the end of its file looks
//! for news (growth, rotation, truncation, a new file in the directory) at
//! most once per poll interval, in one place: [`Reader::check_input`].

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use squall_plugin_api::Value;

use crate::checkpoint::Position;
use crate::pattern::Pattern;

/// One file as the spout read it: a rotated file and its successor, or a
/// file before and after a truncation, are different `FileId`s.
#[derive(Debug)]
pub struct FileId {
    /// The path it was opened under (lossy UTF-8), as emitted in `file`.
    pub path: String,
    /// Its inode.
    pub inode: u64,
    /// Bumped each time the file is found truncated and read again from 0.
    pub generation: u32,
    /// `path` as a shared string value, emitted with each of its lines.
    pub value: Value,
}

impl FileId {
    fn new(path: &Path, inode: u64, generation: u32) -> Arc<Self> {
        let path = path.to_string_lossy().into_owned();
        let value = Value::shared_str(path.as_str());
        Arc::new(Self { path, inode, generation, value })
    }
}

/// One line read from the input.
#[derive(Debug)]
pub struct Line {
    /// The file it came from.
    pub file: Arc<FileId>,
    /// The byte offset of its first byte in that file.
    pub offset: u64,
    /// Its text, without the line ending (`\n` or `\r\n`); invalid UTF-8 is
    /// replaced by U+FFFD.
    pub text: String,
}

/// What a follower finds when it compares the file it has open with what
/// the input path names now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The same file, not shorter than what was read: wait for growth.
    Unchanged,
    /// The same file, now shorter than what was read (`copytruncate`, `> file`).
    Truncated,
    /// Another file is at the path (renamed and recreated): finish the old one.
    Replaced,
    /// Nothing is at the path (renamed, not recreated yet): keep reading the old one.
    Missing,
}

/// Classifies the open file (`open_dev`/`open_inode`, its current length
/// `open_len` and the bytes already consumed from it) against the file now
/// at the path (`(dev, inode)`, or `None` if there is none).
pub fn classify(
    open_dev: u64,
    open_inode: u64,
    open_len: u64,
    consumed: u64,
    at_path: Option<(u64, u64)>,
) -> Change {
    match at_path {
        None => Change::Missing,
        Some(id) if id != (open_dev, open_inode) => Change::Replaced,
        Some(_) if open_len < consumed => Change::Truncated,
        Some(_) => Change::Unchanged,
    }
}

/// What the spout reads.
#[derive(Debug, Clone)]
pub enum Input {
    /// One file.
    File(PathBuf),
    /// The regular files of a directory whose names match the pattern, in name order.
    Dir {
        /// The directory.
        dir: PathBuf,
        /// Which names count; `None`: every name.
        pattern: Option<Pattern>,
        /// Names never read (a checkpoint kept in the directory, and its temporary file).
        exclude: Vec<std::ffi::OsString>,
    },
}

/// An open file and the bytes read from it past the last complete line.
#[derive(Debug)]
struct Open {
    id: Arc<FileId>,
    dev: u64,
    path: PathBuf,
    reader: BufReader<File>,
    /// The offset of the first byte of `partial`.
    line_start: u64,
    /// Bytes of a line whose end has not been read yet.
    partial: Vec<u8>,
    /// The last read found no complete line.
    at_end: bool,
}

impl Open {
    /// Opens `path` and seeks to `offset`, or to 0 when the file is shorter.
    fn at(path: &Path, offset: u64, generation: u32) -> io::Result<Self> {
        // Opening a FIFO would block until a writer comes: look first.
        if !fs::metadata(path)?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a regular file", path.display()),
            ));
        }
        let mut file = File::open(path)?;
        let meta = file.metadata()?;
        let start = if meta.len() >= offset {
            offset
        } else {
            squall_plugin_api::warn!(
                "{} is shorter ({} bytes) than the checkpoint's offset {offset}: it was \
                 truncated; reading it from the start",
                path.display(),
                meta.len()
            );
            0
        };
        file.seek(SeekFrom::Start(start))?;
        Ok(Self {
            id: FileId::new(path, meta.ino(), generation),
            dev: meta.dev(),
            path: path.to_path_buf(),
            reader: BufReader::with_capacity(64 * 1024, file),
            line_start: start,
            partial: Vec::new(),
            at_end: false,
        })
    }

    /// Bytes consumed from the file so far.
    fn consumed(&self) -> u64 {
        self.line_start + self.partial.len() as u64
    }

    /// The next complete line (or a `max_line` chunk of an over-long one);
    /// `None` at the end of the file, keeping a partial line.
    fn read_line(&mut self, max_line: usize) -> io::Result<Option<Line>> {
        let room = max_line.saturating_sub(self.partial.len()).max(1) as u64;
        (&mut self.reader).take(room).read_until(b'\n', &mut self.partial)?;
        if self.partial.last() == Some(&b'\n') {
            self.at_end = false;
            return Ok(Some(self.take_line()));
        }
        if self.partial.len() >= max_line {
            squall_plugin_api::warn!(
                "{}: a line at offset {} is longer than max_line_bytes ({max_line}); emitting \
                 it in pieces",
                self.path.display(),
                self.line_start
            );
            self.at_end = false;
            return Ok(Some(self.take_line()));
        }
        self.at_end = true;
        Ok(None)
    }

    /// The partial line, if any, as a last line: the file is finished.
    fn take_rest(&mut self) -> Option<Line> {
        (!self.partial.is_empty()).then(|| self.take_line())
    }

    fn take_line(&mut self) -> Line {
        let len = self.partial.len() as u64;
        let mut bytes = std::mem::take(&mut self.partial);
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        let text = String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        let line = Line { file: Arc::clone(&self.id), offset: self.line_start, text };
        self.line_start += len;
        line
    }

    /// Reads the file again from 0, as a new generation.
    fn restart(&mut self) -> io::Result<()> {
        self.reader.seek(SeekFrom::Start(0))?;
        self.id = FileId::new(&self.path, self.id.inode, self.id.generation + 1);
        self.line_start = 0;
        self.partial.clear();
        self.at_end = false;
        Ok(())
    }
}

/// Reads the input line by line, never blocking for new data.
#[derive(Debug)]
pub struct Reader {
    input: Input,
    follow: bool,
    poll_interval: Duration,
    max_line: usize,
    current: Option<Open>,
    /// File mode: the open file was rotated away; once it is read to its
    /// end, the file at the input path is opened.
    draining: bool,
    /// Directory mode: the name of the last file started.
    last_name: Option<std::ffi::OsString>,
    /// Not before this instant does an idle reader look at the input again.
    next_check: Option<Instant>,
    /// Read once (not following): everything has been read.
    finished: bool,
}

impl Reader {
    /// A reader of `input`; nothing is opened before [`Reader::resume`] or
    /// the first [`Reader::next_line`].
    pub fn new(input: Input, follow: bool, poll_interval: Duration, max_line: usize) -> Self {
        Self {
            input,
            follow,
            poll_interval,
            max_line: max_line.max(1),
            current: None,
            draining: false,
            last_name: None,
            next_check: None,
            finished: false,
        }
    }

    /// Positions the reader at a checkpoint (or at the start for `None`).
    ///
    /// A file checkpoint whose inode is no longer at the path names a
    /// rotated file: it is looked for by inode in the same directory and,
    /// when found, finished first. A directory checkpoint skips the files
    /// before its file in name order.
    ///
    /// # Errors
    /// When the input cannot be read (and, not following, when the file is missing).
    pub fn resume(&mut self, at: Option<&Position>) -> io::Result<()> {
        match self.input.clone() {
            Input::File(path) => match at {
                None => self.open_input_file(&path),
                Some(at) => self.resume_file(&path, at),
            },
            Input::Dir { dir, .. } => match at {
                None => Ok(()),
                Some(at) => self.resume_dir(&dir, at),
            },
        }
    }

    /// Positions a file input at checkpoint `at`: the file at `path` if it
    /// is the checkpoint's inode, else the rotated file of that inode
    /// (finished first), else `path` from the start.
    fn resume_file(&mut self, path: &Path, at: &Position) -> io::Result<()> {
        match fs::metadata(path) {
            Ok(meta) if meta.ino() == at.inode => {
                self.current = Some(Open::at(path, at.offset, 0)?);
                return Ok(());
            }
            Ok(_) | Err(_) => {}
        }
        if let Some(rotated) = find_inode(path, at.inode) {
            squall_plugin_api::info!(
                "{} was rotated since the checkpoint; finishing {} first",
                path.display(),
                rotated.display()
            );
            self.current = Some(Open::at(&rotated, at.offset, 0)?);
            self.draining = true;
            return Ok(());
        }
        squall_plugin_api::warn!(
            "the checkpointed file {} (inode {}) is gone; reading {} from the start",
            at.file,
            at.inode,
            path.display()
        );
        self.open_input_file(path)
    }

    /// Positions a directory input at checkpoint `at`: the files before its
    /// file (in name order) are skipped; its file is read on from the
    /// offset if it is the same inode, from the start if it is new.
    fn resume_dir(&mut self, dir: &Path, at: &Position) -> io::Result<()> {
        let Some(name) = Path::new(&at.file).file_name().map(|n| n.to_os_string()) else {
            return Ok(());
        };
        let path = dir.join(&name);
        self.last_name = Some(name);
        match fs::metadata(&path) {
            Ok(meta) if meta.is_file() && meta.ino() == at.inode => {
                self.current = Some(Open::at(&path, at.offset, 0)?);
            }
            Ok(meta) if meta.is_file() => {
                squall_plugin_api::warn!(
                    "{} is a new file since the checkpoint (inode {}, was {}); reading \
                     it from the start",
                    path.display(),
                    meta.ino(),
                    at.inode
                );
                self.current = Some(Open::at(&path, 0, 0)?);
            }
            _ => {}
        }
        Ok(())
    }

    /// Opens the input file from the start; following, a missing file is awaited.
    fn open_input_file(&mut self, path: &Path) -> io::Result<()> {
        match Open::at(path, 0, 0) {
            Ok(open) => {
                self.current = Some(open);
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.follow => Ok(()),
            Err(e) => Err(io::Error::new(e.kind(), format!("cannot open {}: {e}", path.display()))),
        }
    }

    /// Where reading would go on from: the open file and the start of its
    /// first line not yet returned. `None` before any file was opened.
    pub fn position(&self) -> Option<Position> {
        self.current.as_ref().map(|open| Position {
            file: open.id.path.clone(),
            inode: open.id.inode,
            offset: open.line_start,
        })
    }

    /// The file open now, if any.
    pub fn current_file(&self) -> Option<&Arc<FileId>> {
        self.current.as_ref().map(|open| &open.id)
    }

    /// True when the input was read once to its end (never when following).
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// The next line, or `None` when there is none now. Never blocks:
    /// following, an idle reader looks at the input at most once per poll
    /// interval.
    ///
    /// # Errors
    /// I/O errors reading the input; the reader backs off one poll interval.
    pub fn next_line(&mut self, now: Instant) -> io::Result<Option<Line>> {
        let result = self.advance(now);
        if result.is_err() {
            self.next_check = Some(now + self.poll_interval.max(Duration::from_millis(100)));
        }
        result
    }

    fn advance(&mut self, now: Instant) -> io::Result<Option<Line>> {
        // Bounded: each turn opens a file, or finds it has nothing more.
        for _ in 0..64 {
            if self.finished {
                return Ok(None);
            }
            let idle = !self.draining && self.current.as_ref().is_none_or(|open| open.at_end);
            if idle && self.next_check.is_some_and(|at| now < at) {
                return Ok(None);
            }
            let Some(open) = self.current.as_mut() else {
                self.next_check = Some(now + self.poll_interval);
                if !self.open_next()? {
                    if !self.follow && matches!(self.input, Input::Dir { .. }) {
                        self.finished = true;
                    }
                    return Ok(None);
                }
                continue;
            };
            if let Some(line) = open.read_line(self.max_line)? {
                return Ok(Some(line));
            }
            // At the end of the open file.
            if self.draining || !self.follow {
                if let Some(line) = open.take_rest() {
                    return Ok(Some(line));
                }
                self.end_of_file()?;
                continue;
            }
            self.next_check = Some(now + self.poll_interval);
            match self.check_input()? {
                Change::Unchanged | Change::Missing => return Ok(None),
                Change::Truncated | Change::Replaced => continue,
            }
        }
        Ok(None)
    }

    /// The open file is read to its end and will not grow (or is left behind).
    fn end_of_file(&mut self) -> io::Result<()> {
        let Some(open) = self.current.take() else { return Ok(()) };
        match &self.input {
            Input::File(path) if self.draining => {
                let path = path.clone();
                self.draining = false;
                self.open_input_file(&path)?;
            }
            Input::File(_) => {
                // Read once: keep the file for the position; nothing follows.
                self.current = Some(open);
                self.finished = true;
            }
            Input::Dir { .. } => {
                self.last_name = open.path.file_name().map(|n| n.to_os_string());
                // Until the next file exists, the finished one is the position.
                self.current = Some(open);
                if !self.open_next()? {
                    if self.follow {
                        return Ok(());
                    }
                    self.finished = true;
                }
            }
        }
        Ok(())
    }

    /// Following, at the end of the open file: what changed at the input?
    /// Truncation restarts the file; replacement (rotation) sets the old
    /// file draining; a directory's next file makes the open one finished.
    ///
    /// This is the one place where new data is discovered. With the
    /// contract's wake handle (plugin-api 1.1) this check can move to a
    /// watcher thread that calls `wake()` when it returns anything but
    /// `Unchanged`/`Missing` or the file grew, so an idle spout is not polled.
    fn check_input(&mut self) -> io::Result<Change> {
        let Some(open) = self.current.as_mut() else { return Ok(Change::Missing) };
        match &self.input {
            Input::File(path) => {
                let at_path = fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
                let open_len = open.reader.get_ref().metadata()?.len();
                let change = classify(open.dev, open.id.inode, open_len, open.consumed(), at_path);
                match change {
                    Change::Truncated => {
                        squall_plugin_api::warn!(
                            "{} was truncated ({} bytes, {} read); reading it from the start",
                            path.display(),
                            open_len,
                            open.consumed()
                        );
                        open.restart()?;
                    }
                    Change::Replaced => self.draining = true,
                    Change::Unchanged | Change::Missing => {}
                }
                Ok(change)
            }
            Input::Dir { .. } => {
                let name = open.path.file_name().map(|n| n.to_os_string());
                if self.next_in_dir(name.as_deref())?.is_some() {
                    // A later file exists: this one is complete.
                    self.draining = true;
                    return Ok(Change::Replaced);
                }
                Ok(Change::Unchanged)
            }
        }
    }

    /// Opens the next file: the input file (following, once it exists) or
    /// the directory's next one in name order. False when there is none.
    fn open_next(&mut self) -> io::Result<bool> {
        self.draining = false;
        match self.input.clone() {
            Input::File(path) => {
                if self.current.is_none() {
                    self.open_input_file(&path)?;
                }
                Ok(self.current.is_some() && !self.finished)
            }
            Input::Dir { .. } => {
                let Some(path) = self.next_in_dir(self.last_name.as_deref())? else {
                    return Ok(false);
                };
                self.last_name = path.file_name().map(|n| n.to_os_string());
                match Open::at(&path, 0, 0) {
                    Ok(open) => self.current = Some(open),
                    // Gone between the listing and the open: the next turn lists again.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!("cannot open {}: {e}", path.display()),
                        ))
                    }
                }
                Ok(true)
            }
        }
    }

    /// The first matching file of the directory whose name sorts after `after`.
    fn next_in_dir(&self, after: Option<&std::ffi::OsStr>) -> io::Result<Option<PathBuf>> {
        let Input::Dir { dir, pattern, exclude } = &self.input else { return Ok(None) };
        let entries = fs::read_dir(dir)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot list {}: {e}", dir.display())))?;
        let mut best: Option<(std::ffi::OsString, PathBuf)> = None;
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            if after.is_some_and(|after| name.as_os_str() <= after)
                || best.as_ref().is_some_and(|(b, _)| &name >= b)
                || pattern.as_ref().is_some_and(|p| !p.matches(&name.to_string_lossy()))
            {
                continue;
            }
            let path = entry.path();
            if exclude.contains(&name) || !fs::metadata(&path).is_ok_and(|m| m.is_file()) {
                continue;
            }
            best = Some((name, path));
        }
        Ok(best.map(|(_, path)| path))
    }
}

/// The regular file with inode `inode` in `path`'s directory, other than `path`.
fn find_inode(path: &Path, inode: u64) -> Option<PathBuf> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p != path && fs::metadata(p).is_ok_and(|m| m.is_file() && m.ino() == inode))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("squall-files-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn append(path: &Path, text: &str) {
        let mut file = fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
        file.write_all(text.as_bytes()).unwrap();
    }

    /// Every line available now (the poll interval is zero: always due).
    fn drain(reader: &mut Reader) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some(line) = reader.next_line(Instant::now()).unwrap() {
            lines.push(line.text);
        }
        lines
    }

    fn follower(path: &Path) -> Reader {
        let mut reader = Reader::new(Input::File(path.into()), true, Duration::ZERO, 1 << 20);
        reader.resume(None).unwrap();
        reader
    }

    #[test]
    fn classify_tells_growth_truncation_replacement_and_absence_apart() {
        // dev 1, inode 10, 100 bytes long, 80 read.
        assert_eq!(classify(1, 10, 100, 80, Some((1, 10))), Change::Unchanged);
        assert_eq!(classify(1, 10, 80, 80, Some((1, 10))), Change::Unchanged);
        assert_eq!(classify(1, 10, 50, 80, Some((1, 10))), Change::Truncated);
        assert_eq!(classify(1, 10, 100, 80, Some((1, 11))), Change::Replaced);
        assert_eq!(classify(1, 10, 100, 80, Some((2, 10))), Change::Replaced, "another device");
        assert_eq!(classify(1, 10, 50, 80, Some((1, 11))), Change::Replaced);
        assert_eq!(classify(1, 10, 100, 80, None), Change::Missing);
    }

    #[test]
    fn lines_carry_their_offsets_and_lose_their_endings() {
        let dir = temp_dir("offsets");
        let path = dir.join("in");
        fs::write(&path, "a\r\nbb\n\nccc").unwrap();
        let mut reader = Reader::new(Input::File(path.clone()), false, Duration::ZERO, 1 << 20);
        reader.resume(None).unwrap();
        let mut got = Vec::new();
        while let Some(line) = reader.next_line(Instant::now()).unwrap() {
            got.push((line.offset, line.text));
        }
        let expected = [(0, "a"), (3, "bb"), (6, ""), (7, "ccc")];
        assert_eq!(got, expected.map(|(o, t)| (o, t.to_owned())));
        assert!(reader.finished());
        assert_eq!(reader.position().unwrap().offset, 10, "the final line without newline counts");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn following_waits_for_the_end_of_a_partial_line() {
        let dir = temp_dir("partial");
        let path = dir.join("in");
        fs::write(&path, "one\ntw").unwrap();
        let mut reader = follower(&path);
        assert_eq!(drain(&mut reader), ["one"]);
        assert_eq!(reader.position().unwrap().offset, 4, "the partial line is not consumed");
        append(&path, "o\nthree\n");
        assert_eq!(drain(&mut reader), ["two", "three"]);
        assert!(!reader.finished());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rotation_finishes_the_old_file_then_reads_the_new_one() {
        let dir = temp_dir("rotate");
        let path = dir.join("app.log");
        fs::write(&path, "1\n2\n").unwrap();
        let mut reader = follower(&path);
        assert_eq!(drain(&mut reader), ["1", "2"]);
        // Rotate: rename away; the writer still has the old file open and
        // writes a last line (without newline) before reopening.
        fs::rename(&path, dir.join("app.log.1")).unwrap();
        assert_eq!(drain(&mut reader), Vec::<String>::new(), "missing: keep waiting");
        append(&dir.join("app.log.1"), "3\n4");
        assert_eq!(drain(&mut reader), ["3"], "growth of the renamed file is still read");
        append(&path, "5\n");
        assert_eq!(drain(&mut reader), ["4", "5"], "the old file's rest, then the new file");
        let position = reader.position().unwrap();
        assert_eq!(position.file, path.to_string_lossy());
        assert_eq!(position.offset, 2);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn truncation_reads_the_file_again_from_the_start_as_a_new_generation() {
        let dir = temp_dir("truncate");
        let path = dir.join("app.log");
        fs::write(&path, "first\nsecond\n").unwrap();
        let mut reader = follower(&path);
        assert_eq!(drain(&mut reader), ["first", "second"]);
        let before = Arc::clone(reader.current_file().unwrap());
        fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(0).unwrap();
        append(&path, "x\n");
        assert_eq!(drain(&mut reader), ["x"]);
        let after = reader.current_file().unwrap();
        assert_eq!((after.inode, after.generation), (before.inode, before.generation + 1));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn resuming_after_a_rotation_finishes_the_rotated_file_found_by_inode() {
        let dir = temp_dir("resume-rotated");
        let path = dir.join("app.log");
        fs::write(&path, "a\nb\nc\n").unwrap();
        let inode = fs::metadata(&path).unwrap().ino();
        fs::rename(&path, dir.join("app.log.1")).unwrap();
        fs::write(&path, "d\n").unwrap();
        let mut reader = Reader::new(Input::File(path.clone()), false, Duration::ZERO, 1 << 20);
        let at = Position { file: path.to_string_lossy().into_owned(), inode, offset: 2 };
        reader.resume(Some(&at)).unwrap();
        assert_eq!(drain(&mut reader), ["b", "c", "d"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_is_read_in_name_order_and_resumes_after_its_checkpointed_file() {
        let dir = temp_dir("dir");
        let input = dir.join("in");
        fs::create_dir(&input).unwrap();
        fs::write(input.join("b.log"), "b1\nb2\n").unwrap();
        fs::write(input.join("a.log"), "a1\n").unwrap();
        fs::write(input.join("c.txt"), "ignored\n").unwrap();
        fs::write(input.join("d.log"), "d1").unwrap();
        let pattern = Some(Pattern::new("*.log"));
        let dir_input = Input::Dir { dir: input.clone(), pattern, exclude: Vec::new() };
        let mut reader = Reader::new(dir_input.clone(), false, Duration::ZERO, 1 << 20);
        reader.resume(None).unwrap();
        assert_eq!(drain(&mut reader), ["a1", "b1", "b2", "d1"]);
        assert!(reader.finished());

        let b = input.join("b.log");
        let at = Position {
            file: b.to_string_lossy().into_owned(),
            inode: fs::metadata(&b).unwrap().ino(),
            offset: 3,
        };
        let mut reader = Reader::new(dir_input, false, Duration::ZERO, 1 << 20);
        reader.resume(Some(&at)).unwrap();
        assert_eq!(drain(&mut reader), ["b2", "d1"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_followed_directory_picks_up_new_files() {
        let dir = temp_dir("dir-follow");
        fs::write(dir.join("001"), "x\n").unwrap();
        let input = Input::Dir { dir: dir.clone(), pattern: None, exclude: Vec::new() };
        let mut reader = Reader::new(input, true, Duration::ZERO, 1 << 20);
        reader.resume(None).unwrap();
        assert_eq!(drain(&mut reader), ["x"]);
        append(&dir.join("001"), "y\n");
        fs::write(dir.join("002"), "z\n").unwrap();
        assert_eq!(drain(&mut reader), ["y", "z"]);
        assert!(!reader.finished());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_fifo_that_appears_at_a_followed_path_is_refused_not_opened() {
        let dir = temp_dir("fifo");
        let path = dir.join("in");
        let mut reader = follower(&path);
        let made = std::process::Command::new("mkfifo").arg(&path).status();
        if !made.is_ok_and(|s| s.success()) {
            return; // no mkfifo here
        }
        // Opening it would block this thread until a writer came.
        let err = reader.next_line(Instant::now()).unwrap_err().to_string();
        assert!(err.contains("is not a regular file"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_over_long_line_comes_in_pieces() {
        let dir = temp_dir("long");
        let path = dir.join("in");
        fs::write(&path, "abcdefgh\nij\n").unwrap();
        let mut reader = Reader::new(Input::File(path), false, Duration::ZERO, 3);
        reader.resume(None).unwrap();
        assert_eq!(drain(&mut reader), ["abc", "def", "gh", "ij"]);
        fs::remove_dir_all(&dir).unwrap();
    }
}
