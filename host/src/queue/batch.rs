//! The messages executors exchange: data batches, control messages, acker messages.
//!
//! One channel message carries a whole batch of tuples, so channel
//! operations, counters and wake-ups are paid per batch, not per tuple.

use squall_plugin_api::Value;

use crate::ids::{EdgeId, RootId, TaskId};

/// Tuples from one producer task to one consumer task.
///
/// Values and ack ids of all tuples are stored flat; each [`Header`] marks
/// where its tuple's values and ids end.
#[derive(Debug)]
pub struct Batch {
    /// The producing task.
    pub source_task: TaskId,
    /// One header per tuple.
    pub tuples: Vec<Header>,
    /// The values of every tuple, back to back.
    pub values: Vec<Value>,
    /// The `(root, edge)` ack ids of every tracked tuple, back to back.
    pub ids: Vec<(RootId, EdgeId)>,
    /// Encoded bytes of the values, counted only when the target queue has
    /// a byte budget (`receive_buffer_bytes`).
    pub bytes: u64,
    /// Non-zero for a checkpoint barrier (durable state): the checkpoint's
    /// number. A barrier batch carries no tuple; everything its producer
    /// sent before it belongs to that checkpoint.
    pub barrier: u64,
}

/// The byte budget of one receive queue (`receive_buffer_bytes`): producers
/// admit a batch only while the bytes queued stay within the limit (a batch
/// into an empty queue is always admitted, so an oversized batch cannot
/// deadlock), and the consumer releases a batch's bytes when it takes it.
/// Two atomic operations per batch, none per tuple.
#[derive(Debug)]
pub struct QueueBytes {
    queued: std::sync::atomic::AtomicU64,
    limit: u64,
}

impl QueueBytes {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Self { queued: std::sync::atomic::AtomicU64::new(0), limit }
    }

    /// Reserves `n` bytes; false when the queue holds bytes and `n` more
    /// would pass the limit.
    pub fn admit(&self, n: u64) -> bool {
        use std::sync::atomic::Ordering;
        let mut current = self.queued.load(Ordering::Acquire);
        loop {
            if current > 0 && current.saturating_add(n) > self.limit {
                return false;
            }
            match self.queued.compare_exchange_weak(
                current,
                current + n,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => current = now,
            }
        }
    }

    /// Gives back `n` bytes (a consumer took the batch, or a send failed).
    pub fn release(&self, n: u64) {
        self.queued.fetch_sub(n, std::sync::atomic::Ordering::AcqRel);
    }

    /// Bytes queued now.
    pub fn queued(&self) -> u64 {
        self.queued.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A copy of `value`: inline for the variants without a heap part (the
/// common ones: numbers and short strings), `Clone` for the others. The
/// derived `clone` is a call per value on the emit path.
#[inline(always)]
fn copy(value: &Value) -> Value {
    match value {
        Value::SmallStr(s) => Value::SmallStr(*s),
        Value::I64(n) => Value::I64(*n),
        Value::U64(n) => Value::U64(*n),
        Value::F64(n) => Value::F64(*n),
        Value::Bool(b) => Value::Bool(*b),
        Value::Null => Value::Null,
        other => other.clone(),
    }
}

/// One tuple of a [`Batch`]: its stream, values and ack ids.
pub type TupleRef<'a> = (u32, &'a [Value], &'a [(RootId, EdgeId)]);

/// Where one tuple of a [`Batch`] lives: its stream (an index into the
/// producer's declared outputs), where its values and ack ids end. The
/// plugin API's type, so that a run of a batch's headers goes to a
/// contract 1.3 bolt as they are.
pub use squall_plugin_api::InputHeader as Header;

impl Batch {
    /// An empty batch from `source_task`, with room for `capacity` tuples.
    pub fn with_capacity(source_task: TaskId, capacity: usize) -> Self {
        Self {
            source_task,
            tuples: Vec::with_capacity(capacity),
            values: Vec::with_capacity(capacity),
            ids: Vec::new(),
            bytes: 0,
            barrier: 0,
        }
    }

    /// The barrier of checkpoint `checkpoint` from `source_task`.
    pub fn barrier(source_task: TaskId, checkpoint: u64) -> Self {
        Self { barrier: checkpoint, ..Self::with_capacity(source_task, 0) }
    }

    /// Appends one tuple.
    #[inline(always)]
    pub fn push(&mut self, stream: u32, values: &[Value], ids: &[(RootId, EdgeId)]) {
        // One clone per value in a plain loop: `extend_from_slice` can
        // compile to a generic `Cloned::fold`, much slower per tuple, when
        // unrelated changes move the inlining.
        if let [value] = values {
            self.values.push(copy(value));
        } else {
            self.values.reserve(values.len());
            for v in values {
                self.values.push(copy(v));
            }
        }
        if !ids.is_empty() {
            self.ids.extend_from_slice(ids);
        }
        self.tuples.push(Header {
            stream,
            values_end: self.values.len() as u32,
            ids_end: self.ids.len() as u32,
        });
    }

    /// Appends `count` untracked tuples of `arity` values each, whose values
    /// are back to back in `values` (`count * arity` of them). With
    /// `COUNT_BYTES`, their encoded length is added to
    /// [`bytes`](Self::bytes) in the same pass over the values.
    #[inline]
    pub fn push_many<const COUNT_BYTES: bool>(
        &mut self,
        stream: u32,
        arity: usize,
        count: usize,
        values: &[Value],
    ) {
        debug_assert_eq!(values.len(), count * arity);
        let base = self.values.len() as u32;
        self.values.reserve(values.len());
        let mut bytes = 0u64;
        // A `push` per value: an `extend` of the copies built each on the
        // stack and read it back in unaligned pieces (a median pair ratio
        // of 0.86 on const -> id -> null).
        for v in values {
            if COUNT_BYTES {
                bytes += v.encoded_len() as u64;
            }
            self.values.push(copy(v));
        }
        self.bytes += bytes;
        let (ids_end, arity) = (self.ids.len() as u32, arity as u32);
        // By value: captured by reference, they were loaded again after
        // each header's store.
        self.tuples.extend((1..=count as u32).map(move |i| Header {
            stream,
            values_end: base + i * arity,
            ids_end,
        }));
    }

    /// Empties the batch, keeping its buffers for reuse.
    pub fn clear(&mut self) {
        self.tuples.clear();
        self.values.clear();
        self.ids.clear();
        self.bytes = 0;
        self.barrier = 0;
    }

    /// The number of tuples.
    pub fn len(&self) -> usize {
        self.tuples.len()
    }

    /// True when the batch holds no tuple.
    pub fn is_empty(&self) -> bool {
        self.tuples.is_empty()
    }

    /// The `i`th tuple: its stream, values and ids.
    #[inline]
    pub fn tuple(&self, i: usize) -> TupleRef<'_> {
        self.tuple_at(i, self.starts(i)).0
    }

    /// Where the `i`th tuple's values and ids start: where the one before ends.
    #[inline]
    pub fn starts(&self, i: usize) -> (usize, usize) {
        match i.checked_sub(1) {
            Some(p) => {
                let p = self.tuples[p];
                (p.values_end as usize, p.ids_end as usize)
            }
            None => (0, 0),
        }
    }

    /// The `i`th tuple, whose values and ids start at `starts` (from
    /// [`starts`](Self::starts), or the previous call's last element): its
    /// stream, values and ids, and where the next tuple's start. A loop over
    /// the tuples reads each header once.
    #[inline(always)]
    pub fn tuple_at(&self, i: usize, (v0, i0): (usize, usize)) -> (TupleRef<'_>, (usize, usize)) {
        let h = self.tuples[i];
        let (v1, i1) = (h.values_end as usize, h.ids_end as usize);
        ((h.stream, &self.values[v0..v1], &self.ids[i0..i1]), (v1, i1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_budget_admits_up_to_its_limit_and_always_into_an_empty_queue() {
        let q = QueueBytes::new(100);
        assert!(q.admit(150), "an oversized batch into an empty queue goes through");
        assert!(!q.admit(1), "then nothing more");
        q.release(150);
        assert!(q.admit(60) && q.admit(40), "exactly the limit");
        assert!(!q.admit(1));
        q.release(40);
        assert_eq!(q.queued(), 60);
        assert!(q.admit(40));
    }

    #[test]
    fn batch_returns_each_tuple_with_its_own_values_and_ids() {
        let mut b = Batch::with_capacity(TaskId(3), 4);
        b.push(0, &[Value::I64(1), Value::I64(2)], &[]);
        b.push(1, &[Value::from("x")], &[(RootId(9), EdgeId(8)), (RootId(7), EdgeId(6))]);
        b.push(0, &[], &[(RootId(5), EdgeId(4))]);
        assert_eq!(b.len(), 3);
        assert_eq!(b.tuple(0), (0, &[Value::I64(1), Value::I64(2)][..], &[][..]));
        assert_eq!(b.tuple(1).1, &[Value::from("x")][..]);
        assert_eq!(b.tuple(1).2, &[(RootId(9), EdgeId(8)), (RootId(7), EdgeId(6))][..]);
        assert_eq!(b.tuple(2), (0, &[][..], &[(RootId(5), EdgeId(4))][..]));
        // Walking with `tuple_at` gives the same tuples.
        let mut starts = b.starts(1);
        for i in 1..3 {
            let (tuple, next) = b.tuple_at(i, starts);
            assert_eq!(tuple, b.tuple(i));
            starts = next;
        }
        assert_eq!(starts, (3, 3));
    }
}
