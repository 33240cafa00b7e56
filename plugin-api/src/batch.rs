//! Contract 1.3: a run of input tuples handed to a bolt in one call.
//!
//! The host does not build a [`Tuple`] per input: it hands over one
//! [`RunView`] (the run's values back to back, a header per input, the
//! inputs' anchors, the source's streams), and the plugin builds a tuple
//! only for an input it reads, in registers. A bolt that reads no input
//! (a sink that counts) or forwards values whole ([`Run::values`]) builds
//! none.

use abi_stable::{
    std_types::{RSlice, RStr, RString, RVec},
    StableAbi,
};

use crate::{Anchor, StreamId, Tuple, Value};

/// Where one input of a run ends in the host's batch (contract 1.3).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputHeader {
    /// The input's stream: an index into the run's streams.
    pub stream: u32,
    /// The end of the input's values, counted from the start of the
    /// host's batch ([`RunView::new`]'s `values_base` is where the run's
    /// first value sits in it).
    pub values_end: u32,
    /// The host's own (where the input's ack ids end); plugins ignore it.
    pub ids_end: u32,
}

/// One declared stream of a run's source component: its name and fields.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Default, PartialEq, Eq)]
pub struct InputStream {
    /// The stream's name.
    pub name: RString,
    /// Its declared fields, in order.
    pub fields: RVec<RString>,
}

impl InputStream {
    /// A stream called `name` with `fields`.
    pub fn new(name: &str, fields: &[&str]) -> Self {
        Self { name: name.into(), fields: fields.iter().map(|f| RString::from(*f)).collect() }
    }
}

/// A run of inputs from one source task, as the host hands it to
/// `execute_batch` (contract 1.3). Bolts read it through [`Inputs`] and
/// [`Run`]; plugin tests build one with
/// [`TestRun`](crate::testing::TestRun).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct RunView<'a> {
    values: RSlice<'a, Value>,
    values_base: u32,
    headers: RSlice<'a, InputHeader>,
    anchors: RSlice<'a, Anchor>,
    streams: RSlice<'a, InputStream>,
    source_component: RStr<'a>,
    source_task: u32,
    /// Bit `i` set: output stream `i` goes nowhere for this run (bit 63:
    /// the default stream). See [`Run::wired`].
    unwired: u64,
}

/// The bit of [`RunView`]'s unwired mask that stands for the default stream.
const DEFAULT_BIT: u64 = 1 << 63;

impl<'a> RunView<'a> {
    /// A run: `values` holds the inputs' values back to back, the first
    /// input's first (at `values_base` in the host's batch, which the
    /// headers' ends count from); one header per input; one anchor per
    /// input, or none when no input is tracked; the source's streams, which
    /// the headers index. A view whose parts do not fit together panics
    /// where it is read (inside the plugin's guard, which fails the input).
    pub fn new(
        values: &'a [Value],
        values_base: u32,
        headers: &'a [InputHeader],
        anchors: &'a [Anchor],
        streams: &'a [InputStream],
        source_component: &'a str,
        source_task: u32,
    ) -> Self {
        Self {
            values: values.into(),
            values_base,
            headers: headers.into(),
            anchors: anchors.into(),
            streams: streams.into(),
            source_component: source_component.into(),
            source_task,
            unwired: 0,
        }
    }

    /// The same run, telling the bolt which of its output streams go
    /// nowhere for it (the host's part): the output streams whose index
    /// is in `streams` (indexes up to 62), and the default stream when
    /// `default` is true. A view built by [`new`](Self::new) has every
    /// stream wired.
    #[must_use]
    pub fn with_unwired(mut self, streams: impl IntoIterator<Item = u32>, default: bool) -> Self {
        self.unwired = streams
            .into_iter()
            .filter(|&i| i < 63)
            .fold(if default { DEFAULT_BIT } else { 0 }, |mask, i| mask | 1 << i);
        self
    }

    /// The number of inputs.
    pub fn len(&self) -> usize {
        self.headers.len()
    }

    /// True when the run has no input.
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }

    /// Where input `i`'s values start in `values` (`i` may be `len()`: the
    /// end of the last).
    #[inline(always)]
    fn start(&self, i: usize) -> usize {
        match i.checked_sub(1) {
            Some(p) => (self.headers[p].values_end - self.values_base) as usize,
            None => 0,
        }
    }

    /// Input `i`, whose values start at `start`, and where the next's start.
    #[inline(always)]
    fn tuple_at(&self, i: usize, start: usize) -> (Tuple<'a>, usize) {
        let h = self.headers[i];
        let end = (h.values_end - self.values_base) as usize;
        let stream = &self.streams.as_slice()[h.stream as usize];
        let anchor = self.anchors.as_slice().get(i).copied().unwrap_or(Anchor::NONE);
        let tuple = Tuple::new(
            &self.values.as_slice()[start..end],
            stream.fields.as_slice(),
            self.source_component.as_str(),
            stream.name.as_str(),
            self.source_task,
            anchor,
        );
        (tuple, end)
    }
}

/// Inputs `start..end` of a [`RunView`]: what [`Inputs::take_all`] and
/// [`Inputs::remaining`] return, and what
/// [`BasicBatchCollector::emit_each`](crate::BasicBatchCollector::emit_each)
/// anchors to. It is a copy of a few words; its tuples are built when
/// read.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    view: RunView<'a>,
    start: usize,
    end: usize,
}

impl<'a> Run<'a> {
    /// Every input of `view`.
    pub fn new(view: RunView<'a>) -> Self {
        Self { view, start: 0, end: view.len() }
    }

    /// The number of inputs.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// True when the run has no input.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Input `i` of the run.
    pub fn get(&self, i: usize) -> Option<Tuple<'a>> {
        let at = self.start.checked_add(i).filter(|&at| at < self.end)?;
        Some(self.view.tuple_at(at, self.view.start(at)).0)
    }

    /// The anchor of input `i` (`Anchor::NONE` when it is untracked or out
    /// of the run), without building its tuple.
    pub fn anchor(&self, i: usize) -> Anchor {
        match self.start.checked_add(i).filter(|&at| at < self.end) {
            Some(at) => self.view.anchors.as_slice().get(at).copied().unwrap_or(Anchor::NONE),
            None => Anchor::NONE,
        }
    }

    /// True when some input of the run is tracked (its emits are anchored
    /// and its ack counts).
    pub fn tracks_any(&self) -> bool {
        let anchors = self.view.anchors.as_slice();
        anchors.get(self.start..self.end).is_some_and(|a| a.iter().any(|&a| a != Anchor::NONE))
    }

    /// The values of every input of the run, back to back, borrowed from
    /// the host's batch: a bolt that re-emits its inputs whole passes them
    /// to `emit_each` without a copy of its own.
    pub fn values(&self) -> &'a [Value] {
        &self.view.values.as_slice()[self.view.start(self.start)..self.view.start(self.end)]
    }

    /// False when a tuple emitted on `stream` now would go nowhere: no
    /// component subscribes to the stream and no tap is attached to the
    /// task (inputs or outputs: the host says nothing while one is). A bolt may then skip building what it would emit there
    /// (what it does not emit is not counted as emitted); it is asked per
    /// run, so a subscriber added by a live reload, or a tap attached, is
    /// seen from the next run on. True for a stream the host does not
    /// say, and for any stream of a view built without the host's word.
    pub fn wired(&self, stream: StreamId) -> bool {
        let bit = match stream {
            StreamId::DEFAULT => DEFAULT_BIT,
            StreamId(i) if i < 63 => 1 << i,
            StreamId(_) => 0,
        };
        self.view.unwired & bit == 0
    }

    /// The number of values of each input, when every input has as many
    /// (`None` when they differ or the run is empty).
    pub fn arity(&self) -> Option<usize> {
        let mut start = self.view.start(self.start);
        let mut arity = None;
        for h in &self.view.headers.as_slice()[self.start..self.end] {
            let end = (h.values_end - self.view.values_base) as usize;
            let n = end.checked_sub(start)?;
            if *arity.get_or_insert(n) != n {
                return None;
            }
            start = end;
        }
        arity
    }

    /// Inputs `range` of this run (relative to it), as a run.
    ///
    /// # Panics
    /// When `range` is not within the run.
    pub fn range(&self, range: std::ops::Range<usize>) -> Run<'a> {
        assert!(range.start <= range.end && range.end <= self.len(), "range out of the run");
        Run { view: self.view, start: self.start + range.start, end: self.start + range.end }
    }

    /// The inputs, in order.
    pub fn iter(&self) -> RunIter<'a> {
        RunIter {
            view: self.view,
            at: self.start,
            end: self.end,
            next: self.view.start(self.start),
        }
    }
}

impl<'a> IntoIterator for Run<'a> {
    type Item = Tuple<'a>;
    type IntoIter = RunIter<'a>;

    fn into_iter(self) -> RunIter<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &Run<'a> {
    type Item = Tuple<'a>;
    type IntoIter = RunIter<'a>;

    fn into_iter(self) -> RunIter<'a> {
        self.iter()
    }
}

/// The inputs of a [`Run`], in order, each built as it is reached.
#[derive(Debug, Clone)]
pub struct RunIter<'a> {
    view: RunView<'a>,
    at: usize,
    end: usize,
    /// Where input `at`'s values start.
    next: usize,
}

impl<'a> Iterator for RunIter<'a> {
    type Item = Tuple<'a>;

    #[inline]
    fn next(&mut self) -> Option<Tuple<'a>> {
        if self.at >= self.end {
            return None;
        }
        let (tuple, next) = self.view.tuple_at(self.at, self.next);
        (self.at, self.next) = (self.at + 1, next);
        Some(tuple)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.end - self.at;
        (left, Some(left))
    }
}

impl ExactSizeIterator for RunIter<'_> {}

/// The inputs of one [`Bolt::execute_batch`](crate::Bolt::execute_batch)
/// call, taken one at a time.
///
/// The cursor records how far the bolt got: when `execute_batch` returns
/// an error (or panics), the input taken last fails, and the inputs never
/// taken are handed to the next call, so that each input is executed once,
/// exactly as one `execute` call per tuple would.
#[derive(Debug)]
pub struct Inputs<'t, 'a> {
    view: RunView<'a>,
    taken: &'t mut u32,
    /// Where input `taken`'s values start.
    next: usize,
}

impl<'t, 'a> Inputs<'t, 'a> {
    /// A cursor over `view` that counts what it hands out in `taken` (the
    /// host's counter; plugin tests can pass their own, or use
    /// [`TestRun::inputs`](crate::testing::TestRun::inputs)).
    pub fn new(view: RunView<'a>, taken: &'t mut u32) -> Self {
        *taken = 0;
        Self { view, taken, next: 0 }
    }

    /// The number of inputs in the batch, taken or not.
    pub fn len(&self) -> usize {
        self.view.len()
    }

    /// True when the batch has no inputs.
    pub fn is_empty(&self) -> bool {
        self.view.is_empty()
    }

    /// How many inputs were taken so far.
    pub fn taken(&self) -> usize {
        *self.taken as usize
    }

    /// The inputs not taken yet, without taking them.
    pub fn remaining(&self) -> Run<'a> {
        Run { view: self.view, start: self.taken(), end: self.view.len() }
    }

    /// Takes every input not taken yet at once: an error returned after
    /// this fails the last of them.
    pub fn take_all(&mut self) -> Run<'a> {
        let rest = self.remaining();
        *self.taken = self.view.len() as u32;
        self.next = self.view.start(self.view.len());
        rest
    }
}

impl<'a> Iterator for Inputs<'_, 'a> {
    type Item = Tuple<'a>;

    #[inline]
    fn next(&mut self) -> Option<Tuple<'a>> {
        let at = *self.taken as usize;
        if at >= self.view.len() {
            return None;
        }
        let (tuple, next) = self.view.tuple_at(at, self.next);
        self.next = next;
        *self.taken += 1;
        Some(tuple)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.view.len() - self.taken();
        (left, Some(left))
    }
}

impl ExactSizeIterator for Inputs<'_, '_> {}

#[cfg(test)]
mod tests {
    use crate::testing::TestRun;
    use crate::{Anchor, StreamId, Value};

    #[test]
    fn a_run_says_which_output_streams_go_nowhere() {
        let mut run = TestRun::new("c");
        run.push(&[Value::U64(1)], Anchor::NONE);
        let all = run.run();
        assert!(all.wired(StreamId::DEFAULT) && all.wired(StreamId(0)), "wired unless told");
        run.unwire(StreamId(2)).unwire(StreamId(70));
        let some = run.run();
        assert!(!some.wired(StreamId(2)));
        assert!(some.wired(StreamId(1)) && some.wired(StreamId::DEFAULT));
        assert!(some.wired(StreamId(70)), "streams past 62 are always wired");
        run.unwire(StreamId::DEFAULT);
        let run = run.run();
        assert!(!run.wired(StreamId::DEFAULT) && !run.wired(StreamId(2)));
        assert!(run.range(0..0).wired(StreamId(1)), "a part of a run keeps its view's word");
        assert!(!run.range(0..0).wired(StreamId(2)));
    }

    fn numbers(n: &[i64]) -> Vec<Value> {
        n.iter().map(|&n| Value::from(n)).collect()
    }

    #[test]
    fn the_cursor_counts_what_it_hands_out() {
        let mut run = TestRun::new("c");
        for n in 1..=3 {
            run.push(&numbers(&[n]), Anchor::NONE);
        }
        let mut taken = 7;
        let mut inputs = run.inputs(&mut taken);
        assert_eq!(inputs.taken(), 0);
        assert_eq!(inputs.next().and_then(|t| t.get(0).and_then(Value::as_i64)), Some(1));
        assert_eq!(inputs.remaining().len(), 2);
        let rest = inputs.take_all();
        assert_eq!(rest.values(), numbers(&[2, 3]));
        assert!(inputs.next().is_none());
        assert_eq!(taken, 3);
    }

    #[test]
    fn each_input_is_built_with_its_own_values_stream_and_anchor() {
        let mut run = TestRun::new("up");
        run.push(&numbers(&[1, 2]), Anchor(5))
            .push_on("odd", &["n"], &numbers(&[3]), Anchor::NONE)
            .push(&numbers(&[]), Anchor(7))
            .push(&numbers(&[4, 5]), Anchor::NONE);
        let all = run.run();
        let got: Vec<_> = all
            .iter()
            .map(|t| (t.values().to_vec(), t.source_stream().to_owned(), t.anchor().0))
            .collect();
        assert_eq!(
            got,
            [
                (numbers(&[1, 2]), "default".into(), 5),
                (numbers(&[3]), "odd".into(), 0),
                (numbers(&[]), "default".into(), 7),
                (numbers(&[4, 5]), "default".into(), 0),
            ]
        );
        let odd = all.get(1).unwrap();
        assert_eq!((odd.source_component(), odd.source_task()), ("up", 1));
        assert_eq!(odd.field("n").and_then(Value::as_i64), Some(3));
        assert_eq!(all.values(), numbers(&[1, 2, 3, 4, 5]));
        assert_eq!(all.arity(), None);
        assert!(all.tracks_any());
        let tail = all.range(3..4);
        assert_eq!(
            (tail.values(), tail.arity(), tail.tracks_any()),
            (&numbers(&[4, 5])[..], Some(2), false)
        );
        assert_eq!(all.range(1..3).values(), numbers(&[3]));
        assert_eq!((all.anchor(2), all.anchor(9)), (Anchor(7), Anchor::NONE));
        assert!(all.get(4).is_none());
    }

    #[test]
    fn the_cursor_after_some_inputs_goes_on_from_the_right_values() {
        let mut run = TestRun::new("c");
        run.push(&numbers(&[1]), Anchor::NONE)
            .push(&numbers(&[2, 3]), Anchor::NONE)
            .push(&numbers(&[4]), Anchor::NONE);
        let mut taken = 0;
        let mut inputs = run.inputs(&mut taken);
        inputs.next();
        let rest = inputs.remaining();
        assert_eq!(rest.values(), numbers(&[2, 3, 4]));
        assert_eq!(inputs.next().map(|t| t.values().to_vec()), Some(numbers(&[2, 3])));
        assert_eq!(inputs.next().map(|t| t.values().to_vec()), Some(numbers(&[4])));
    }
}
