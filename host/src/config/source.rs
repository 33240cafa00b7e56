//! The texts a topology is read from, laid end to end in one offset space.
//!
//! A composed topology is read from several texts: the topology file, the
//! files it includes and the `--set` arguments. Each is parsed on its own,
//! then its spans are shifted by the text's *base* (where it starts in the
//! shared offset space) before the trees are merged. A span in the merged
//! tree therefore still says which text it came from, and [`SourceMap::loc`]
//! turns it into a [`Loc`] in the right file. Bases are handed out in merge
//! order (included files before the file that includes them), so sorting
//! keys by span start gives the merged file order.

use std::path::{Path, PathBuf};

use super::diagnostic::{locate, Lines, Loc, Sources};

/// One text: a file or a `--set` argument.
#[derive(Debug)]
struct Source {
    /// The file name, or `--set KEY=VALUE`.
    name: PathBuf,
    /// The folder relative paths written in it are resolved against.
    dir: PathBuf,
    /// Where it starts in the shared offset space.
    base: usize,
    text: String,
    /// Line starts for a file; `None` for an argument (no positions).
    lines: Option<Lines>,
}

/// Every text of a topology, with its place in the shared offset space.
#[derive(Debug, Default)]
pub(crate) struct SourceMap {
    sources: Vec<Source>,
}

impl SourceMap {
    /// An empty map.
    pub(crate) fn new() -> Self {
        SourceMap::default()
    }

    /// A map of one file, for tests of the readers.
    #[cfg(test)]
    pub(crate) fn single(file: &Path, text: &str) -> Self {
        let mut map = SourceMap::new();
        map.add_file(file, text.to_string());
        map
    }

    fn next_base(&self) -> usize {
        // One offset of gap, so that the end of one text (where an error at
        // end of file is reported) is not the start of the next.
        self.sources.iter().map(|s| s.base + s.text.len() + 1).max().unwrap_or(0)
    }

    /// Lays the sources `order` lists out one after the other from offset 0,
    /// in that order (sources added later go after them all).
    pub(crate) fn lay_out(&mut self, order: &[u32]) {
        let mut base = 0;
        for &id in order {
            if let Some(source) = usize::try_from(id).ok().and_then(|i| self.sources.get_mut(i)) {
                source.base = base;
                base += source.text.len() + 1;
            }
        }
    }

    /// Adds the file `path` with its `text`; returns its index.
    pub(crate) fn add_file(&mut self, path: &Path, text: String) -> u32 {
        let dir = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let lines = Some(Lines::new(&text));
        self.push(Source { name: path.to_path_buf(), dir, base: self.next_base(), text, lines })
    }

    /// Adds the `--set` argument `arg` (`KEY=VALUE`); returns its index.
    /// Relative paths in it are relative to the working directory.
    pub(crate) fn add_argument(&mut self, arg: &str) -> u32 {
        let name = PathBuf::from(format!("--set {arg}"));
        let base = self.next_base();
        self.push(Source {
            name,
            dir: PathBuf::from("."),
            base,
            text: arg.to_string(),
            lines: None,
        })
    }

    fn push(&mut self, source: Source) -> u32 {
        self.sources.push(source);
        u32::try_from(self.sources.len() - 1).unwrap_or(u32::MAX)
    }

    /// The text of source `id`.
    pub(crate) fn text(&self, id: u32) -> &str {
        self.get(id).map_or("", |s| s.text.as_str())
    }

    /// Where source `id` starts in the shared offset space.
    pub(crate) fn base(&self, id: u32) -> usize {
        self.get(id).map_or(0, |s| s.base)
    }

    fn get(&self, id: u32) -> Option<&Source> {
        self.sources.get(usize::try_from(id).ok()?)
    }

    /// The source that shared offset `offset` lies in: the one that starts
    /// last at or before it.
    fn index_of(&self, offset: usize) -> usize {
        let starts = self.sources.iter().enumerate().filter(|(_, s)| s.base <= offset);
        starts.max_by_key(|(_, s)| s.base).map_or(0, |(i, _)| i)
    }

    /// The location of shared offset `offset`.
    pub(crate) fn loc(&self, offset: usize) -> Loc {
        let index = self.index_of(offset);
        let Some(source) = self.sources.get(index) else { return Loc::START };
        let id = u32::try_from(index).unwrap_or(u32::MAX);
        match &source.lines {
            Some(lines) => {
                locate(&source.text, lines, offset.saturating_sub(source.base)).in_source(id)
            }
            None => Loc { line: 0, col: 0, source: id },
        }
    }

    /// The folder relative paths at shared offset `offset` are resolved against.
    pub(crate) fn dir_at(&self, offset: usize) -> &Path {
        self.sources.get(self.index_of(offset)).map_or(Path::new("."), |s| s.dir.as_path())
    }

    /// The name of every source, in index order.
    pub(crate) fn names(&self) -> Sources {
        Sources::new(self.sources.iter().map(|s| s.name.clone()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_map_to_the_right_source_line_and_column() {
        let mut map = SourceMap::new();
        let base = map.add_file(Path::new("conf/base.toml"), "a = 1\nb = 2\n".to_string());
        let main = map.add_file(Path::new("main.toml"), "c = 3\n".to_string());
        let arg = map.add_argument("topology.name=x");
        assert_eq!(map.loc(map.base(base) + 6), Loc::new(2, 1));
        assert_eq!(map.loc(map.base(main) + 4), Loc::new(1, 5).in_source(main));
        let in_arg = map.loc(map.base(arg) + 3);
        assert_eq!((in_arg.source, in_arg.has_position()), (arg, false));
        assert_eq!(map.dir_at(map.base(base)), Path::new("conf"));
        assert_eq!(map.dir_at(map.base(main)), Path::new("."));
        let names = map.names();
        assert_eq!(names.name(Loc::new(1, 1).in_source(arg)), Path::new("--set topology.name=x"));
    }

    #[test]
    fn a_layout_puts_sources_in_the_order_given() {
        let mut map = SourceMap::new();
        let main = map.add_file(Path::new("main.toml"), "m".to_string());
        let base = map.add_file(Path::new("base.toml"), "b".to_string());
        map.lay_out(&[base, main]);
        assert!(map.base(base) < map.base(main));
        assert_eq!(map.loc(map.base(main)).source, main);
        assert_eq!(map.loc(map.base(base)).source, base);
        let arg = map.add_argument("k=v");
        assert!(map.base(arg) > map.base(main));
    }

    #[test]
    fn the_end_of_one_text_is_not_the_start_of_the_next() {
        let mut map = SourceMap::new();
        map.add_file(Path::new("a.toml"), "x".to_string());
        let b = map.add_file(Path::new("b.toml"), "y".to_string());
        assert_eq!(map.loc(1).source, 0, "end of a.toml");
        assert_eq!(map.loc(map.base(b)).source, b);
    }
}
