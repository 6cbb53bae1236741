//! `assign_timestamps_and_watermarks`: where event time starts.
//!
//! On a source, the strategy goes into the source's readers, which run one watermark
//! generator per split (Flink's `fromSource(source, strategy)`). On any other stream, a
//! forward operator assigns timestamps and runs one generator per worker; it drops the
//! upstream watermarks except the final one, as Flink's `TimestampsAndWatermarksOperator`.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spate_types::Data;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::{Capability, Operator};

use crate::plan::{Epoch, NodeKind};
use crate::process::{split_out, Out};
use crate::stream::DataStream;
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
        self.unary_node("timestamps", "forward", move |ctx, input, name| {
            let strategy = Arc::clone(&strategy);
            let shared = Arc::clone(ctx.shared());
            let operator = name.to_owned();
            let interval = ctx.config().auto_watermark_interval;
            let scope = ctx.scope;
            let both = input
                .data
                .binary_frontier::<_, CapacityContainerBuilder<Vec<(Timestamp, Out<T>)>>, _, _, _, _>(
                    input.wm,
                    Pipeline,
                    Pipeline,
                    name,
                    move |initial, info| {
                        let activator = scope.activator_for(Rc::clone(&info.address));
                        let mut cap: Option<Capability<Epoch>> = Some(initial);
                        let mut generator = (strategy.generator)();
                        let mut max_epoch: Epoch = 0;
                        let mut emitted = NO_TIMESTAMP;
                        let mut idle = false;
                        let mut last_emit = Instant::now();
                        let mut last_record = Instant::now();
                        let mut upstream_ended = false;
                        move |(data, data_frontier), (wms, wm_frontier), output| {
                            data.for_each(|c, one_batch| {
 let batches = std::iter::once(one_batch);
                                let Some(&epoch) = c.least() else { return };
                                max_epoch = max_epoch.max(epoch);
                                let mut session = output.session(&c);
                                for batch in batches {
                                    crate::function::guard(&shared, &operator, || {
                                        for (prev, x) in batch.drain(..) {
                                            let ts = strategy.timestamp(&x, prev);
                                            generator.on_event(&x, ts);
                                            session.give((ts, Out::Record(x)));
                                        }
                                    });
                                    batch.clear();
                                }
                                last_record = Instant::now();
                            });
                            wms.for_each(|_c, one_batch| {
 let batches = std::iter::once(one_batch);
                                for batch in batches {
                                    upstream_ended |= batch.iter().any(|m| !m.idle && m.wm == MAX_WATERMARK);
                                    batch.clear();
                                }
                            });
                            let ended = data_frontier.is_empty() && wm_frontier.is_empty();
                            let Some(held) = cap.as_mut() else { return };
                            let now = Instant::now();
                            let mut send = None;
                            if ended {
                                if upstream_ended {
                                    send = Some(WmMsg { slot: 0, wm: MAX_WATERMARK, idle: false });
                                }
                            } else if now.duration_since(last_emit) >= interval {
                                last_emit = now;
                                let is_idle = strategy
                                    .idleness
                                    .is_some_and(|t| now.duration_since(last_record) >= t);
                                if is_idle {
                                    if !idle {
                                        idle = true;
                                        send = Some(WmMsg { slot: 0, wm: emitted, idle: true });
                                    }
                                } else if let Some(wm) = generator.on_periodic_emit() {
                                    if wm > emitted || idle {
                                        emitted = emitted.max(wm);
                                        idle = false;
                                        send = Some(WmMsg { slot: 0, wm: emitted, idle: false });
                                    }
                                }
                            }
                            if let Some(msg) = send {
                                // After every record sent so far (see `crate::time`).
                                let at = held.delayed(&max_epoch.max(*held.time()));
                                output.session(&at).give((NO_TIMESTAMP, Out::Watermark(msg)));
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
                    },
                );
            split_out(both)
        })
    }
}
