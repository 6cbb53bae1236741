//! Full-partition processing: one result per key at the end of the input, after Flink 1.20's
//! `KeyedStream.fullWindowPartition()` (FLIP-380).
//!
//! A word count over a bounded input wants each word's final count, not one update per word
//! (the rolling aggregations of [`KeyedStream`]) nor a window over all time (which keeps
//! window bookkeeping per key). [`KeyedStream::full_window_partition`] gives a
//! [`PartitionWindowedStream`]: every record is added into its key's accumulator in place, and
//! each key's result is emitted once, when the input ends (its watermark reaches
//! [`MAX_WATERMARK`](crate::time::MAX_WATERMARK): a bounded input's end, or a stop with
//! savepoint that drains). An unbounded input never emits, as in Flink.
//!
//! It runs as a keyed process function: the accumulator is the key's state (checkpointed,
//! restored and rescaled by key group like any keyed state, on either state backend), and
//! each key is emitted by a pass over the keys with state when the input ends
//! ([`KeyedProcessFunction::on_end_of_input`]), which hands each key's state over and frees
//! it: no timer per key. Results carry the timestamp `MAX_WATERMARK`.
//!
//! ```
//! use spate_dataflow::{AggregateFunction, DataStream};
//!
//! struct Count;
//!
//! impl AggregateFunction<String> for Count {
//!     type Acc = u64;
//!     type Out = u64;
//!     fn create_accumulator(&self) -> u64 {
//!         0
//!     }
//!     fn add(&self, _: &String, acc: &mut u64) {
//!         *acc += 1
//!     }
//!     fn get_result(&self, acc: &u64) -> u64 {
//!         *acc
//!     }
//!     fn merge(&self, a: u64, b: u64) -> u64 {
//!         a + b
//!     }
//! }
//!
//! /// Each word once, with its count over the whole input.
//! fn word_counts(words: DataStream<String>) -> DataStream<(String, u64)> {
//!     words
//!         .key_by(|w: &String| w.clone())
//!         .full_window_partition()
//!         .aggregate_with(Count, |w: &String, n, out: &mut Vec<(String, u64)>| {
//!             out.push((w.clone(), n))
//!         })
//! }
//! ```

use std::hash::Hash;
use std::marker::PhantomData;

use spate_types::Data;

use crate::keyed::KeyedStream;
use crate::process::{KeyedProcessFunction, ProcessContext};
use crate::stream::DataStream;
use crate::window::AggregateFunction;

/// A keyed stream whose keys are each processed once, whole, at the end of the input
/// (Flink's `PartitionWindowedStream` of a keyed stream).
pub struct PartitionWindowedStream<K, T> {
    keyed: KeyedStream<K, T>,
}

impl<K: Data + Hash + Eq, T: Data> KeyedStream<K, T> {
    /// Processes each key's records as one window that ends with the input (Flink's
    /// `fullWindowPartition()`): see [`PartitionWindowedStream`].
    pub fn full_window_partition(&self) -> PartitionWindowedStream<K, T> {
        PartitionWindowedStream {
            keyed: self.clone(),
        }
    }
}

impl<K: Data + Hash + Eq, T: Data> PartitionWindowedStream<K, T> {
    /// Aggregates each key's records; emits each key's result at the end of the input.
    pub fn aggregate<A: AggregateFunction<T>>(&self, agg: A) -> DataStream<A::Out> {
        self.aggregate_with(agg, |_: &K, out: A::Out, emit: &mut Vec<A::Out>| {
            emit.push(out)
        })
    }

    /// Aggregates each key's records; at the end of the input, `f` turns each key and its
    /// result into outputs.
    pub fn aggregate_with<A, R, F>(&self, agg: A, f: F) -> DataStream<R>
    where
        A: AggregateFunction<T>,
        R: Data,
        F: Fn(&K, A::Out, &mut Vec<R>) + Send + Sync + 'static,
    {
        self.keyed
            .process(FullAggregate {
                agg,
                emit: f,
                _types: PhantomData,
            })
            .name_default("full_window_partition")
    }

    /// Reduces each key's records with `f` (`f(accumulated, new)`); emits each key's result
    /// at the end of the input.
    pub fn reduce(&self, f: impl Fn(T, T) -> T + Send + Sync + 'static) -> DataStream<T>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        self.keyed
            .process(FullReduce {
                f,
                _types: PhantomData,
            })
            .name_default("full_window_partition")
    }
}

/// The accumulator per key, emitted at the end of the input.
struct FullAggregate<A, F, R> {
    agg: A,
    emit: F,
    _types: PhantomData<fn() -> R>,
}

impl<K, T, R, A, F> KeyedProcessFunction<K, T, R> for FullAggregate<A, F, R>
where
    K: Data + Hash + Eq,
    T: Data,
    R: Data,
    A: AggregateFunction<T>,
    F: Fn(&K, A::Out, &mut Vec<R>) + Send + Sync + 'static,
{
    type State = A::Acc;

    fn process_element(&self, value: T, ctx: &mut ProcessContext<'_, K, A::Acc, R>) {
        let state = ctx.state();
        if let Some(acc) = state {
            self.agg.add(&value, acc);
            return;
        }
        let mut acc = self.agg.create_accumulator();
        self.agg.add(&value, &mut acc);
        *state = Some(acc);
    }

    fn keys_at_end_of_input(&self) -> bool {
        true
    }

    fn on_end_of_input(&self, ctx: &mut ProcessContext<'_, K, A::Acc, R>) {
        let Some(acc) = ctx.state().take() else {
            return;
        };
        let mut out = Vec::new();
        (self.emit)(ctx.key(), self.agg.get_result(&acc), &mut out);
        for r in out {
            ctx.collect(r);
        }
    }
}

/// The reduction per key, emitted at the end of the input.
struct FullReduce<F, T> {
    f: F,
    _types: PhantomData<fn() -> T>,
}

impl<K, T, F> KeyedProcessFunction<K, T, T> for FullReduce<F, T>
where
    K: Data + Hash + Eq,
    T: Data + serde::Serialize + serde::de::DeserializeOwned,
    F: Fn(T, T) -> T + Send + Sync + 'static,
{
    type State = T;

    fn process_element(&self, value: T, ctx: &mut ProcessContext<'_, K, T, T>) {
        let state = ctx.state();
        *state = Some(match state.take() {
            Some(prev) => (self.f)(prev, value),
            None => value,
        });
    }

    fn keys_at_end_of_input(&self) -> bool {
        true
    }

    fn on_end_of_input(&self, ctx: &mut ProcessContext<'_, K, T, T>) {
        if let Some(v) = ctx.state().take() {
            ctx.collect(v);
        }
    }
}
