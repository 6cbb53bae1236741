//! Windows over a whole, non-keyed stream (Flink's `DataStream.windowAll`).
//!
//! [`DataStream::window_all`] is the keyed window operator of [`crate::window`] with one key,
//! `()`: every record meets on the worker that owns that key's group, so the operator runs
//! with parallelism 1, as `windowAll` does in Flink, while the other workers' instances see
//! nothing. It therefore has every feature of keyed windows (assigners, triggers, allowed
//! lateness, the late side output, checkpoints) and their guarantees.

use std::time::Duration;

use spate_types::Data;

use crate::stream::DataStream;
use crate::window::{AggregateFunction, Trigger, WindowAssigner, WindowContext, WindowedStream};
use crate::OutputTag;

/// A non-keyed stream cut into windows, waiting for its window function (Flink's
/// `AllWindowedStream`).
pub struct AllWindowedStream<T, W> {
    windowed: WindowedStream<(), T, W>,
}

impl<T: Data> DataStream<T> {
    /// Cuts the whole stream into windows (Flink's `windowAll`): one operator instance sees
    /// every record, so the windows are global, not per key. Use it after a reduction, or for
    /// small streams: its throughput is that of one worker.
    pub fn window_all<A: WindowAssigner<T>>(&self, assigner: A) -> AllWindowedStream<T, A::W> {
        AllWindowedStream {
            windowed: self.key_by(|_: &T| ()).window(assigner),
        }
    }
}

impl<T: Data, W: crate::window::Window> AllWindowedStream<T, W> {
    /// Replaces the assigner's default trigger.
    pub fn trigger(self, trigger: impl Trigger<T, W>) -> Self {
        AllWindowedStream {
            windowed: self.windowed.trigger(trigger),
        }
    }

    /// Keeps windows open for `lateness` after their end: late elements within it update
    /// the window and fire it again.
    pub fn allowed_lateness(self, lateness: Duration) -> Self {
        AllWindowedStream {
            windowed: self.windowed.allowed_lateness(lateness),
        }
    }

    /// Sends elements too late for any window to the side output `tag` instead of dropping
    /// them (read it with [`DataStream::side_output`] on the result).
    pub fn side_output_late_data(self, tag: &OutputTag<T>) -> Self {
        AllWindowedStream {
            windowed: self.windowed.side_output_late_data(tag),
        }
    }

    /// Whether sliding windows of an incremental function are kept as slices (the default;
    /// see [`WindowedStream::slicing`]).
    pub fn slicing(self, on: bool) -> Self {
        AllWindowedStream {
            windowed: self.windowed.slicing(on),
        }
    }

    /// Local-global aggregation (see [`WindowedStream::local_global`]): every worker
    /// pre-aggregates its records per slice, so the one instance that sees the whole stream
    /// merges a few partial accumulators per slice and worker instead of every record.
    pub fn local_global(self, on: bool) -> Self {
        AllWindowedStream {
            windowed: self.windowed.local_global(on),
        }
    }

    /// Combines the elements of each window with `f`, incrementally (Flink's `reduce`).
    pub fn reduce(&self, f: impl Fn(T, T) -> T + Send + Sync + 'static) -> DataStream<T> {
        self.windowed.reduce(f).name_default("window_all_reduce")
    }

    /// Reduces incrementally, then hands each window's result to `g` with the window
    /// (Flink's `reduce(reduceFunction, processAllWindowFunction)`).
    pub fn reduce_with<R: Data>(
        &self,
        f: impl Fn(T, T) -> T + Send + Sync + 'static,
        g: impl Fn(&WindowContext<'_, W>, T, &mut Vec<R>) + Send + Sync + 'static,
    ) -> DataStream<R> {
        self.windowed
            .reduce_with(f, move |_: &(), w: &WindowContext<'_, W>, v, out| {
                g(w, v, out)
            })
            .name_default("window_all_reduce")
    }

    /// Aggregates incrementally with `agg` (Flink's `aggregate`).
    pub fn aggregate<A: AggregateFunction<T>>(&self, agg: A) -> DataStream<A::Out> {
        self.windowed
            .aggregate(agg)
            .name_default("window_all_aggregate")
    }

    /// Aggregates incrementally, then hands each window's result to `g` with the window
    /// (Flink's `aggregate(aggregateFunction, processAllWindowFunction)`).
    pub fn aggregate_with<A: AggregateFunction<T>, R: Data>(
        &self,
        agg: A,
        g: impl Fn(&WindowContext<'_, W>, A::Out, &mut Vec<R>) + Send + Sync + 'static,
    ) -> DataStream<R> {
        self.windowed
            .aggregate_with(agg, move |_: &(), w: &WindowContext<'_, W>, v, out| {
                g(w, v, out)
            })
            .name_default("window_all_aggregate")
    }

    /// Calls `f` with every element of a fired window (Flink's `process` with a
    /// `ProcessAllWindowFunction`); the window buffers its elements.
    pub fn process<R: Data>(
        &self,
        f: impl Fn(&WindowContext<'_, W>, &[T], &mut Vec<R>) + Send + Sync + 'static,
    ) -> DataStream<R> {
        self.windowed
            .process(
                move |_: &(), w: &WindowContext<'_, W>, xs: &[T], out: &mut Vec<R>| f(w, xs, out),
            )
            .name_default("window_all_process")
    }
}
