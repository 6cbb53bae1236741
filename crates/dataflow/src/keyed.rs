//! `KeyedStream`: a stream partitioned by key, with per-key state.
//!
//! Records are routed to the worker that owns their key's key group, so that every record of
//! a key meets the same operator instance and its state. The aggregations here are Flink's
//! rolling aggregations: each input record updates its key's state and emits the new value.

use std::hash::Hash;
use std::sync::Arc;

use spate_types::Data;

use crate::connected::ConnectedKeyedStreams;
use crate::stream::DataStream;

/// Extracts a record's key.
pub(crate) type KeyFn<K, T> = Arc<dyn Fn(&T) -> K + Send + Sync>;

/// A stream partitioned by a key of type `K`.
pub struct KeyedStream<K, T> {
    pub(crate) stream: DataStream<T>,
    pub(crate) key: KeyFn<K, T>,
}

impl<K, T> Clone for KeyedStream<K, T> {
    fn clone(&self) -> Self {
        KeyedStream {
            stream: self.stream.clone(),
            key: Arc::clone(&self.key),
        }
    }
}

impl<K: Data + Hash + Eq, T: Data> KeyedStream<K, T> {
    pub(crate) fn new(stream: DataStream<T>, key: KeyFn<K, T>) -> Self {
        KeyedStream { stream, key }
    }

    /// The general keyed operator: `f` sees each record with its key and the key's state
    /// (`None` until first set; setting it to `None` deletes it) and pushes any outputs.
    ///
    /// This is Flink's `KeyedProcessFunction` without timers; state lives per key group, so
    /// it moves with its keys when a job is rescaled.
    pub fn process_with_state<S, R, F>(&self, f: F) -> DataStream<R>
    where
        S: serde::Serialize + serde::de::DeserializeOwned + 'static,
        R: Data,
        F: Fn(&K, &mut Option<S>, T, &mut Vec<R>) + Send + Sync + 'static,
    {
        self.process(crate::process::WithState(f, std::marker::PhantomData))
            .name_default("process")
    }

    /// Rolling reduce: combines each record with its key's previous result and emits the new
    /// result (`f(accumulated, new)`, as Flink's `ReduceFunction`).
    pub fn reduce(&self, f: impl Fn(T, T) -> T + Send + Sync + 'static) -> DataStream<T> {
        self.process_with_state(move |_k, acc: &mut Option<T>, x, out| {
            let next = match acc.take() {
                None => x,
                Some(prev) => f(prev, x),
            };
            out.push(next.clone());
            *acc = Some(next);
        })
        .name_default("reduce")
    }

    /// Rolling sum of `field` per key: emits `(key, sum so far)` for every record.
    pub fn sum<N>(&self, field: impl Fn(&T) -> N + Send + Sync + 'static) -> DataStream<(K, N)>
    where
        N: Data + std::ops::Add<Output = N> + Copy,
    {
        self.fold_field("sum", field, |a, b| a + b)
    }

    /// Rolling minimum of `field` per key: emits `(key, min so far)` for every record.
    pub fn min<N>(&self, field: impl Fn(&T) -> N + Send + Sync + 'static) -> DataStream<(K, N)>
    where
        N: Data + PartialOrd + Copy,
    {
        self.fold_field("min", field, |a, b| if b < a { b } else { a })
    }

    /// Rolling maximum of `field` per key: emits `(key, max so far)` for every record.
    pub fn max<N>(&self, field: impl Fn(&T) -> N + Send + Sync + 'static) -> DataStream<(K, N)>
    where
        N: Data + PartialOrd + Copy,
    {
        self.fold_field("max", field, |a, b| if b > a { b } else { a })
    }

    /// Rolling count per key: emits `(key, count so far)` for every record.
    pub fn count(&self) -> DataStream<(K, u64)> {
        self.fold_field("count", |_| 1u64, |a, b| a + b)
    }

    /// Rolling `minBy`: emits, for every record, the record of its key with the smallest
    /// `field` so far (the earliest one on ties).
    pub fn min_by<N>(&self, field: impl Fn(&T) -> N + Send + Sync + 'static) -> DataStream<T>
    where
        N: PartialOrd + 'static,
    {
        self.reduce(move |acc, x| if field(&x) < field(&acc) { x } else { acc })
            .name_default("min_by")
    }

    /// Rolling `maxBy`: emits, for every record, the record of its key with the largest
    /// `field` so far (the earliest one on ties).
    pub fn max_by<N>(&self, field: impl Fn(&T) -> N + Send + Sync + 'static) -> DataStream<T>
    where
        N: PartialOrd + 'static,
    {
        self.reduce(move |acc, x| if field(&x) > field(&acc) { x } else { acc })
            .name_default("max_by")
    }

    fn fold_field<N: Data + Copy>(
        &self,
        op: &str,
        field: impl Fn(&T) -> N + Send + Sync + 'static,
        combine: impl Fn(N, N) -> N + Send + Sync + 'static,
    ) -> DataStream<(K, N)> {
        self.process_with_state(move |k: &K, acc: &mut Option<N>, x, out| {
            let v = field(&x);
            let next = match *acc {
                None => v,
                Some(prev) => combine(prev, v),
            };
            *acc = Some(next);
            out.push((k.clone(), next));
        })
        .name_default(op)
    }

    /// Pairs this keyed stream with another keyed by the same key type, so that one operator
    /// sees both with shared per-key state (Flink's `KeyedCoProcessFunction`).
    pub fn connect<U: Data>(&self, other: &KeyedStream<K, U>) -> ConnectedKeyedStreams<K, T, U> {
        ConnectedKeyedStreams::new(self.clone(), other.clone())
    }
}

impl<T: Data> DataStream<T> {
    /// Renames the operator behind this stream from its generic default to `op-<id>`, and
    /// makes `op` what it does (part of its derived uid).
    pub(crate) fn name_default(self, op: &str) -> Self {
        {
            let mut plan = self.plan.borrow_mut();
            let o = self.node;
            plan.nodes[o].name = format!("{op}-{o}");
            plan.nodes[o].op = op.to_owned();
        }
        self
    }
}
