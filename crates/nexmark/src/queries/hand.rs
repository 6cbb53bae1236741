//! The hand-tuned q5 that the plain [`super::q5`] replaced: kept (not run by [`super::build`])
//! so that the plain version can be measured against it until the engine slices sliding
//! windows (on 2 workers the plain q5 ran at 0.29 of its speed). A test checks that both give
//! the same rows.
//!
//! Its first stage is a keyed process function that keeps one small accumulator per key
//! bucket and time slice, with timers at window ends (Flink SQL's sliced window aggregation
//! written by hand), after a combiner that counts each batch's bids per auction and slice.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use spate_dataflow::{
    DataStream, KeyedProcessFunction, ProcessContext, TimeDomain, Timestamp,
    TumblingEventTimeWindows,
};

use super::windowed::{AuctionCount, HotItemRow, MostBids, HOT_SIZE, HOT_SLIDE};
use super::{ms, with_event_time};
use crate::model::Event;

/// q5's first stage spreads auctions over this many keys.
const HOT_BUCKETS: i64 = 256;

/// Bids per auction.
type Counts = FxHashMap<i64, i64>;

/// Counts the bids per auction and sliding window, for the auctions of one key (a bucket).
/// Each `(auction, bids)` record (from [`combine_bids`]) adds its bids to its auction in its
/// `slide`-long slice; at a window's end, the counts
/// of its `size / slide` slices are summed. Elements whose windows have all fired are late
/// and dropped, as Flink's window aggregation does.
struct SlicedCount {
    size: i64,
    slide: i64,
}

/// q5's combiner, before the shuffle: the bids of one batch as `(auction, bids)` per
/// `slide`-long slice, each with the latest timestamp of its bids. [`SlicedCount`] only looks
/// at the slice of a timestamp (to place the bids and to judge them late), so it counts the
/// same as with one record per bid, for any split of the stream into batches; the shuffle and
/// the keyed state see one record per auction and slice instead of one per bid.
fn combine_bids(
    slide: i64,
    batch: &mut Vec<(Timestamp, Event)>,
    out: &mut Vec<(Timestamp, (i64, i64))>,
) {
    // Bids come in time order (or nearly): one map for the current slice, emptied into `out`
    // when the slice changes.
    let mut slice = i64::MIN;
    let mut counts: FxHashMap<i64, (Timestamp, i64)> = FxHashMap::default();
    let flush = |counts: &mut FxHashMap<i64, (Timestamp, i64)>,
                 out: &mut Vec<(Timestamp, (i64, i64))>| {
        out.extend(counts.drain().map(|(auction, (ts, n))| (ts, (auction, n))));
    };
    for (ts, event) in batch.drain(..) {
        let Event::Bid(bid) = event else { continue };
        let s = ts - ts.rem_euclid(slide);
        if s != slice {
            flush(&mut counts, out);
            slice = s;
        }
        let entry = counts.entry(bid.auction).or_insert((ts, 0));
        entry.0 = entry.0.max(ts);
        entry.1 += 1;
    }
    flush(&mut counts, out);
}

impl KeyedProcessFunction<i64, (i64, i64), AuctionCount> for SlicedCount {
    /// The bucket's slices: (start, bids per auction), in time order.
    type State = VecDeque<(i64, Counts)>;

    fn process_element(
        &self,
        (auction, bids): (i64, i64),
        ctx: &mut ProcessContext<'_, i64, Self::State, AuctionCount>,
    ) {
        let ts = ctx.timestamp();
        let watermark = ctx.current_watermark();
        let slice = ts - ts.rem_euclid(self.slide);
        if slice + self.size - 1 <= watermark {
            for _ in 0..bids {
                ctx.count_late_record_dropped();
            }
            return;
        }
        let slices = ctx.state().get_or_insert_with(VecDeque::new);
        let (i, new) = match slices.back() {
            Some((start, _)) if *start == slice => (slices.len() - 1, false),
            Some((start, _)) if *start > slice => {
                match slices.binary_search_by_key(&slice, |s| s.0) {
                    Ok(i) => (i, false),
                    Err(i) => {
                        slices.insert(i, (slice, Counts::default()));
                        (i, true)
                    }
                }
            }
            _ => {
                slices.push_back((slice, Counts::default()));
                (slices.len() - 1, true)
            }
        };
        *slices[i].1.entry(auction).or_insert(0) += bids;
        if new {
            // The windows that contain the slice end at slice + slide, ..., slice + size.
            let mut end = slice + self.slide;
            while end <= slice + self.size {
                if end - 1 > watermark {
                    ctx.register_event_time_timer(end - 1);
                }
                end += self.slide;
            }
        }
    }

    fn on_timer(
        &self,
        timestamp: Timestamp,
        _domain: TimeDomain,
        ctx: &mut ProcessContext<'_, i64, Self::State, AuctionCount>,
    ) {
        let end = timestamp + 1;
        let start = end - self.size;
        let Some(slices) = ctx.state().as_mut() else {
            return;
        };
        let mut sums = Counts::default();
        for (_, counts) in slices.iter().filter(|(s, _)| (start..end).contains(s)) {
            for (&auction, &n) in counts {
                *sums.entry(auction).or_insert(0) += n;
            }
        }
        // Slices before the next window's start are in no later window.
        while slices.front().is_some_and(|(s, _)| *s < start + self.slide) {
            slices.pop_front();
        }
        if slices.is_empty() {
            *ctx.state() = None;
        }
        // Only the bucket's most bid auctions (ties all kept) can be the window's: the second
        // stage takes the maximum over the buckets' maxima.
        let max = sums.values().copied().max().unwrap_or(0);
        for (auction, count) in sums {
            if count == max {
                ctx.collect(AuctionCount {
                    window_end: end,
                    auction,
                    count,
                });
            }
        }
    }
}

/// q5 as it was tuned by hand: [`super::q5`]'s results, with bids combined per auction and
/// slice before the shuffle ([`combine_bids`]), spread over [`HOT_BUCKETS`] keys, and counted
/// per slice by a process function ([`SlicedCount`]).
///
/// Kept to measure the plain [`super::q5`] against until the engine slices sliding windows
/// itself; not run by [`super::build`].
pub fn q5_hand(events: &DataStream<Event>) -> DataStream<HotItemRow> {
    let (size, slide) = (ms(HOT_SIZE), ms(HOT_SLIDE));
    with_event_time(events)
        .flat_map_batches(move |batch, out| combine_bids(slide, batch, out))
        .name("q5_hand.combine")
        .key_by(|&(auction, _)| auction.rem_euclid(HOT_BUCKETS))
        .process(SlicedCount { size, slide })
        .name("q5_hand.count")
        // Counts carry their window's max timestamp, so each lands in the 2 s tumbling window
        // that ends with its sliding window.
        .key_by(|c| c.window_end)
        .window(TumblingEventTimeWindows::of(HOT_SLIDE))
        .aggregate_with(MostBids, |_end, _w, rows, out| out.extend(rows))
        .name("q5_hand.max")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::{Bid, Text};

    fn bid(auction: i64) -> Event {
        Event::Bid(Bid {
            auction,
            bidder: 1,
            price: 1,
            channel: Text::EMPTY,
            url: Text::EMPTY,
            date_time: 0,
            extra: Text::EMPTY,
        })
    }

    fn person() -> Event {
        Event::from(crate::model::Person {
            id: 1000,
            name: Text::EMPTY,
            email_address: Text::EMPTY,
            credit_card: Text::EMPTY,
            city: Text::EMPTY,
            state: Text::EMPTY,
            date_time: 0,
            extra: Text::EMPTY,
        })
    }

    /// The combiner's records count the same bids per (slice, auction) as one record per bid,
    /// each with a timestamp of one of its bids, for any split of the stream into batches.
    #[test]
    fn combiner_keeps_the_counts_per_slice_and_auction() {
        let slide = 2000;
        // Out of order, across slices, with a non-bid in between.
        let mut events: Vec<(Timestamp, Event)> = Vec::new();
        for k in 0..500i64 {
            let ts = (k * 37) % 9000 + if k % 7 == 0 { 5000 } else { 0 };
            events.push((ts, bid(1000 + k % 13)));
            if k % 50 == 0 {
                events.push((ts, person()));
            }
        }
        let mut want: BTreeMap<(i64, i64), i64> = BTreeMap::new();
        for (ts, e) in &events {
            if let Event::Bid(b) = e {
                *want
                    .entry((ts - ts.rem_euclid(slide), b.auction))
                    .or_default() += 1;
            }
        }
        for batch_len in [1, 7, 100, events.len()] {
            let mut got: BTreeMap<(i64, i64), i64> = BTreeMap::new();
            for chunk in events.chunks(batch_len) {
                let mut batch = chunk.to_vec();
                let mut out = Vec::new();
                combine_bids(slide, &mut batch, &mut out);
                assert!(batch.is_empty());
                for (ts, (auction, n)) in out {
                    let slice = ts - ts.rem_euclid(slide);
                    assert!(
                        chunk
                            .iter()
                            .any(|(t, e)| *t == ts
                                && e.as_bid().is_some_and(|b| b.auction == auction))
                    );
                    *got.entry((slice, auction)).or_default() += n;
                }
            }
            assert_eq!(got, want, "batches of {batch_len}");
        }
    }
}
