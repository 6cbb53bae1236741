//! `assign_timestamps_and_watermarks`: where event time starts.
//!
//! On a source, the strategy goes into the source's readers, which run one watermark
//! generator per split (Flink's `fromSource(source, strategy)`). On any other stream, a
//! forward operator assigns timestamps and runs one generator per worker; it drops the
//! upstream watermarks except the final one, as Flink's `TimestampsAndWatermarksOperator`.
//! It runs the chain of forward operators before it, if any (see [`crate::chain`]), and has
//! two outputs: the records and their watermarks.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spate_types::Data;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use timely::dataflow::operators::Capability;

use crate::chain::{chain_input, Chain};
use crate::execute::BuildCtx;
use crate::plan::{Epoch, ErasedStream, Flow, NodeKind};
use crate::stream::{add_node, DataStream};
use crate::time::{Timestamp, WatermarkStrategy, WmMsg, MAX_WATERMARK, NO_TIMESTAMP};

impl<T: Data> DataStream<T> {
    /// Gives the records event timestamps and the stream watermarks (Flink's
    /// `assignTimestampsAndWatermarks`).
    ///
    /// Called right on a source, the source's readers apply `strategy` per split (file range,
    /// generator partition), as Flink's `fromSource(source, strategy, name)`; elsewhere it
    /// runs on each worker.
    pub fn assign_timestamps_and_watermarks(
        &self,
        strategy: WatermarkStrategy<T>,
    ) -> DataStream<T> {
        {
            let plan = self.plan.borrow();
            let node = &plan.nodes[self.node];
            if node.kind == NodeKind::Source {
                if let Some(slot) = &node.source_strategy {
                    let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
                    if slot.is_none() {
                        *slot = Some(Arc::new(strategy));
                        return self.clone();
                    }
                }
            }
        }
        let strategy = Arc::new(strategy);
        let builder: crate::plan::Builder = Arc::new(move |ctx, inputs, name| {
            let input = chain_input::<T>(ctx, inputs[0]);
            Some(ErasedStream::new(assign(
                ctx,
                input,
                Arc::clone(&strategy),
                name,
            )))
        });
        let node = add_node(
            &self.plan,
            "timestamps",
            NodeKind::Operator,
            vec![self.node],
            "forward",
            builder,
        );
        self.plan.borrow_mut().nodes[node].chain_in = true;
        DataStream::from_node(Rc::clone(&self.plan), node)
    }
}

/// Builds the timestamp assigner on one worker: one operator that runs `input`'s chain (if
/// any) and then assigns timestamps, with two outputs, the records and the watermarks.
fn assign<'s, T: Data>(
    ctx: &mut BuildCtx<'s>,
    input: Chain<'s, T>,
    strategy: Arc<WatermarkStrategy<T>>,
    name: &str,
) -> Flow<'s, T> {
    let shared = Arc::clone(ctx.shared());
    let operator = name.to_owned();
    let interval = ctx.config().auto_watermark_interval;
    let scope = ctx.scope;
    let cells = ctx.cells();
    let mut latency = ctx.latency_probe();
    let mut builder = OperatorBuilder::new(input.name_with(name), scope);
    let info = builder.operator_info();
    let wm_in = input.wm.clone();
    let mut pull = input.attach(&mut builder);
    let mut wms = builder.new_input(wm_in, Pipeline);
    let (data_out, data) = builder.new_output::<Vec<(Timestamp, T)>>();
    let (wm_out, wm) = builder.new_output::<Vec<WmMsg>>();
    let mut data_out =
        OutputBuilder::<_, CapacityContainerBuilder<Vec<(Timestamp, T)>>>::from(data_out);
    let mut wm_out = OutputBuilder::<_, CapacityContainerBuilder<Vec<WmMsg>>>::from(wm_out);
    builder.build(move |mut capabilities| {
        let activator = scope.activator_for(Rc::clone(&info.address));
        // The watermark output's; records go out under their input's capability.
        let mut cap: Option<Capability<Epoch>> = capabilities.pop();
        drop(capabilities);
        let mut generator = (strategy.generator)();
        let mut max_epoch: Epoch = 0;
        let mut emitted = NO_TIMESTAMP;
        let mut idle = false;
        let mut last_emit = Instant::now();
        let mut last_record = Instant::now();
        let mut upstream_ended = false;
        move |frontiers| {
            let (data_frontier, wm_frontier) = (&frontiers[0], &frontiers[1]);
            latency.observe(&data_frontier.frontier());
            let mut records = data_out.activate();
            let mut saw_records = false;
            pull(&data_frontier.frontier(), &mut |c, batch| {
                let Some(&epoch) = c.least() else { return };
                let _busy = cells.busy();
                cells.count_in(batch.len());
                cells.count_out(batch.len());
                max_epoch = max_epoch.max(epoch);
                let mut session = records.session(c);
                crate::function::guard(&shared, &operator, || {
                    for (prev, x) in batch.drain(..) {
                        let ts = strategy.timestamp(&x, prev);
                        generator.on_event(&x, ts);
                        session.give((ts, x));
                    }
                });
                batch.clear();
                saw_records = true;
            });
            if saw_records {
                last_record = Instant::now();
            }
            wms.for_each(|c, batch| {
                if batch.iter().any(|m| !m.idle && m.wm == MAX_WATERMARK) {
                    upstream_ended = true;
                    if let Some(&epoch) = c.least() {
                        max_epoch = max_epoch.max(epoch);
                    }
                }
                batch.clear();
            });
            let ended = data_frontier.is_empty() && wm_frontier.is_empty();
            let Some(held) = cap.as_mut() else { return };
            let now = Instant::now();
            let mut send = None;
            if upstream_ended {
                // The input's end: event time ends here too, at once, not when the inputs
                // close (with checkpoints they stay open until the final checkpoint, which
                // must come after everything the final watermark fires downstream).
                if emitted != MAX_WATERMARK {
                    emitted = MAX_WATERMARK;
                    send = Some(WmMsg {
                        slot: 0,
                        wm: MAX_WATERMARK,
                        idle: false,
                    });
                }
            } else if !ended && now.duration_since(last_emit) >= interval {
                last_emit = now;
                let is_idle = strategy
                    .idleness
                    .is_some_and(|t| now.duration_since(last_record) >= t);
                if is_idle {
                    if !idle {
                        idle = true;
                        send = Some(WmMsg {
                            slot: 0,
                            wm: emitted,
                            idle: true,
                        });
                    }
                } else if let Some(wm) = generator.on_periodic_emit() {
                    if wm > emitted || idle {
                        emitted = emitted.max(wm);
                        idle = false;
                        send = Some(WmMsg {
                            slot: 0,
                            wm: emitted,
                            idle: false,
                        });
                    }
                }
            }
            if let Some(msg) = send {
                if !msg.idle {
                    cells
                        .output_wm
                        .store(msg.wm, std::sync::atomic::Ordering::Relaxed);
                }
                // At the epoch of every record sent so far (see `crate::time`).
                let at = held.delayed(&max_epoch.max(*held.time()));
                wm_out.activate().session(&at).give(msg);
            }
            if ended {
                cap = None;
                return;
            }
            let least = [data_frontier.frontier(), wm_frontier.frontier()]
                .iter()
                .filter_map(|f| f.first().copied())
                .min();
            if let Some(t) = least {
                if t > *held.time() {
                    held.downgrade(&t);
                }
            }
            let wait = interval.saturating_sub(now.duration_since(last_emit));
            activator.activate_after(wait.max(Duration::from_millis(1)));
        }
    });
    Flow { data, wm }
}
