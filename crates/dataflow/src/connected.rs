//! Two-input streams: `connect` with `co_map` / `co_flat_map`, and keyed co-processing.

use std::hash::Hash;
use std::rc::Rc;
use std::sync::Arc;

use spate_types::Data;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::Operator;

use crate::execute::BuildCtx;
use crate::function::guard;
use crate::keyed::KeyedStream;
use crate::plan::{ErasedStream, Flow, NodeKind};
use crate::stream::{add_node, DataStream};
use crate::time::Timestamp;

/// Two streams of possibly different types, processed by one operator.
pub struct ConnectedStreams<A, B> {
    first: DataStream<A>,
    second: DataStream<B>,
}

/// Adds a two-input node reading `a` and `b`.
fn binary_node<A: Data, B: Data, R: Data, F>(
    a: &DataStream<A>,
    b: &DataStream<B>,
    op: &str,
    edge: &'static str,
    build: F,
) -> DataStream<R>
where
    F: for<'s> Fn(&mut BuildCtx<'s>, Flow<'s, A>, Flow<'s, B>, &str) -> Flow<'s, R>
        + Send
        + Sync
        + 'static,
{
    let builder: crate::plan::Builder = Arc::new(move |ctx, inputs, name| {
        let x = inputs[0].get::<A>(ctx.scope);
        let y = inputs[1].get::<B>(ctx.scope);
        Some(ErasedStream::new(build(ctx, x, y, name)))
    });
    let node = add_node(
        &a.plan,
        op,
        NodeKind::Operator,
        vec![a.node, b.node],
        edge,
        builder,
    );
    DataStream::from_node(Rc::clone(&a.plan), node)
}

impl<A: Data, B: Data> ConnectedStreams<A, B> {
    pub(crate) fn new(first: DataStream<A>, second: DataStream<B>) -> Self {
        ConnectedStreams { first, second }
    }

    /// Maps records of the first stream with `f1` and of the second with `f2` into one stream.
    pub fn co_map<R: Data>(
        &self,
        f1: impl Fn(A) -> R + Send + Sync + 'static,
        f2: impl Fn(B) -> R + Send + Sync + 'static,
    ) -> DataStream<R> {
        self.co_flat_map(move |a| Some(f1(a)), move |b| Some(f2(b)))
            .name_default("co_map")
    }

    /// Like `co_map`, but each record may produce any number of outputs.
    pub fn co_flat_map<R: Data, I1, I2>(
        &self,
        f1: impl Fn(A) -> I1 + Send + Sync + 'static,
        f2: impl Fn(B) -> I2 + Send + Sync + 'static,
    ) -> DataStream<R>
    where
        I1: IntoIterator<Item = R>,
        I2: IntoIterator<Item = R>,
    {
        let (f1, f2) = (Arc::new(f1), Arc::new(f2));
        binary_node(
            &self.first,
            &self.second,
            "co_flat_map",
            "forward",
            move |ctx, x, y, name| {
                let (f1, f2) = (Arc::clone(&f1), Arc::clone(&f2));
                let shared = Arc::clone(ctx.shared());
                let operator = name.to_owned();
                let wm = ctx.merge_wms(vec![x.wm, y.wm], name);
                let cells = ctx.cells();
                let data = x
                    .data
                    .binary::<_, CapacityContainerBuilder<Vec<(Timestamp, R)>>, _, _, _, _>(
                        y.data,
                        Pipeline,
                        Pipeline,
                        name,
                        move |_, _| {
                            move |in1, in2, output| {
                                let _busy = cells.busy();
                                in1.for_each(|cap, one_batch| {
                                    let data = std::iter::once(one_batch);
                                    let mut session = output.session(&cap);
                                    for batch in data {
                                        cells.count_in(batch.len());
                                        let mut n = 0usize;
                                        guard(&shared, &operator, || {
                                            for (ts, a) in batch.drain(..) {
                                                session.give_iterator(f1(a).into_iter().map(|r| {
                                                    n += 1;
                                                    (ts, r)
                                                }));
                                            }
                                        });
                                        cells.count_out(n);
                                        batch.clear();
                                    }
                                });
                                in2.for_each(|cap, one_batch| {
                                    let data = std::iter::once(one_batch);
                                    let mut session = output.session(&cap);
                                    for batch in data {
                                        cells.count_in(batch.len());
                                        let mut n = 0usize;
                                        guard(&shared, &operator, || {
                                            for (ts, b) in batch.drain(..) {
                                                session.give_iterator(f2(b).into_iter().map(|r| {
                                                    n += 1;
                                                    (ts, r)
                                                }));
                                            }
                                        });
                                        cells.count_out(n);
                                        batch.clear();
                                    }
                                });
                            }
                        },
                    );
                Flow { data, wm }
            },
        )
    }
}

/// Two keyed streams with the same key type, processed with shared per-key state.
pub struct ConnectedKeyedStreams<K, A, B> {
    first: KeyedStream<K, A>,
    second: KeyedStream<K, B>,
}

impl<K: Data + Hash + Eq, A: Data, B: Data> ConnectedKeyedStreams<K, A, B> {
    pub(crate) fn new(first: KeyedStream<K, A>, second: KeyedStream<K, B>) -> Self {
        ConnectedKeyedStreams { first, second }
    }

    pub(crate) fn parts(&self) -> (&KeyedStream<K, A>, &KeyedStream<K, B>) {
        (&self.first, &self.second)
    }

    /// Processes both inputs with one per-key state `S` (`None` until set; set to `None` to
    /// delete): `f1` for records of the first stream, `f2` for the second.
    pub fn process_with_state<S, R, F1, F2>(&self, f1: F1, f2: F2) -> DataStream<R>
    where
        S: serde::Serialize + serde::de::DeserializeOwned + 'static,
        R: Data,
        F1: Fn(&K, &mut Option<S>, A, &mut Vec<R>) + Send + Sync + 'static,
        F2: Fn(&K, &mut Option<S>, B, &mut Vec<R>) + Send + Sync + 'static,
    {
        self.process(crate::process::WithState2(f1, f2, std::marker::PhantomData))
            .name_default("co_process")
    }
}
