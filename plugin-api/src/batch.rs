//! Contract 1.3: a run of input tuples handed to a bolt in one call.

use crate::Tuple;

/// The inputs of one [`Bolt::execute_batch`](crate::Bolt::execute_batch)
/// call, taken one at a time.
///
/// The cursor records how far the bolt got: when `execute_batch` returns
/// an error (or panics), the input taken last fails, and the inputs never
/// taken are handed to the next call, so that each input is executed once,
/// exactly as one `execute` call per tuple would.
#[derive(Debug)]
pub struct Inputs<'t, 'a> {
    tuples: &'t [Tuple<'a>],
    taken: &'t mut u32,
}

impl<'t, 'a> Inputs<'t, 'a> {
    /// A cursor over `tuples` that counts what it hands out in `taken`
    /// (the host's counter; plugin tests can pass their own).
    pub fn new(tuples: &'t [Tuple<'a>], taken: &'t mut u32) -> Self {
        *taken = 0;
        Self { tuples, taken }
    }

    /// The number of inputs in the batch, taken or not.
    pub fn len(&self) -> usize {
        self.tuples.len()
    }

    /// True when the batch has no inputs.
    pub fn is_empty(&self) -> bool {
        self.tuples.is_empty()
    }

    /// How many inputs were taken so far.
    pub fn taken(&self) -> usize {
        *self.taken as usize
    }

    /// The inputs not taken yet, without taking them.
    pub fn remaining(&self) -> &'t [Tuple<'a>] {
        &self.tuples[self.taken()..]
    }

    /// Takes every input not taken yet at once: an error returned after
    /// this fails the last of them.
    pub fn take_all(&mut self) -> &'t [Tuple<'a>] {
        let rest = self.remaining();
        *self.taken = self.tuples.len() as u32;
        rest
    }
}

impl<'t, 'a> Iterator for Inputs<'t, 'a> {
    type Item = &'t Tuple<'a>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let tuple = self.tuples.get(*self.taken as usize)?;
        *self.taken += 1;
        Some(tuple)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.tuples.len() - self.taken();
        (left, Some(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Anchor, Value};

    #[test]
    fn the_cursor_counts_what_it_hands_out() {
        let values = [Value::from(1i64), Value::from(2i64), Value::from(3i64)];
        let tuples: Vec<Tuple<'_>> = values
            .iter()
            .map(|v| Tuple::new(std::slice::from_ref(v), &[], "c", "default", 0, Anchor::NONE))
            .collect();
        let mut taken = 7;
        let mut inputs = Inputs::new(&tuples, &mut taken);
        assert_eq!(inputs.taken(), 0);
        assert_eq!(inputs.next().and_then(|t| t.get(0)).and_then(Value::as_i64), Some(1));
        assert_eq!(inputs.remaining().len(), 2);
        assert_eq!(inputs.take_all().len(), 2);
        assert!(inputs.next().is_none());
        assert_eq!(taken, 3);
    }
}
