//! The joins of persons, auctions and bids: q3, q4, q9 and q20.

use spate_dataflow::{DataStream, KeyedCoProcessFunction, ProcessContext, TimeDomain, Timestamp};

use super::{auctions, bids, persons, with_event_time, Change, Cols, Row};
use crate::model::{Auction, Bid, Event, Person, Text};
use spate_dataflow::changelog::UpdatingAggregate;

/// q3's row: a seller's name, city and state, and the auction id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SellerRow {
    /// The seller's name.
    pub name: Text,
    /// The seller's city.
    pub city: Text,
    /// The seller's state.
    pub state: Text,
    /// The auction id.
    pub id: i64,
}

/// q4's row: a category and the average winning price of its closed auctions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CategoryAverageRow {
    /// The category.
    pub category: i64,
    /// The average winning price, truncated (a BIGINT average).
    pub average: i64,
}

/// q9's row: an auction and its winning bid.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct WinningBidRow {
    /// The auction (its ten columns come first).
    pub auction: Auction,
    /// The winning bid (auction, bidder, price, dateTime, extra).
    pub bid: Bid,
}

/// q20's row: a bid and its auction.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct AuctionBidRow {
    /// The bid (its seven columns come first).
    pub bid: Bid,
    /// The auction (itemName to extra, without its id).
    pub auction: Auction,
}

/// The keyed state of q3's join for one person id.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct SellerState {
    /// The person, once seen: (name, city, state).
    person: Option<(Text, Text, Text)>,
    /// Auctions of this seller seen before the person.
    pending_auctions: Vec<i64>,
}

/// q3: persons in OR, ID or CA who sell in category 10, joined incrementally on
/// `auction.seller = person.id` with keyed state.
pub fn q3(events: &DataStream<Event>) -> DataStream<SellerRow> {
    let sellers = persons(events)
        .filter(|p| matches!(&*p.state, "OR" | "ID" | "CA"))
        .name("q3.sellers")
        .key_by(|p| p.id);
    let category_10 = auctions(events)
        .filter(|a| a.category == 10)
        .name("q3.category_10")
        .key_by(|a| a.seller);
    sellers
        .connect(&category_10)
        .process_with_state(
            |_id, state: &mut Option<SellerState>, p: Person, out: &mut Vec<SellerRow>| {
                let s = state.get_or_insert_with(SellerState::default);
                for id in s.pending_auctions.drain(..) {
                    out.push(SellerRow {
                        name: p.name.clone(),
                        city: p.city.clone(),
                        state: p.state.clone(),
                        id,
                    });
                }
                s.pending_auctions.shrink_to_fit();
                s.person = Some((p.name, p.city, p.state));
            },
            |_seller, state: &mut Option<SellerState>, a: Auction, out: &mut Vec<SellerRow>| {
                let s = state.get_or_insert_with(SellerState::default);
                match &s.person {
                    Some((name, city, st)) => out.push(SellerRow {
                        name: name.clone(),
                        city: city.clone(),
                        state: st.clone(),
                        id: a.id,
                    }),
                    None => s.pending_auctions.push(a.id),
                }
            },
        )
        .name("q3.join")
}

/// Whether bid `b` beats bid `best`: a higher price, then an earlier time (q9's
/// `ORDER BY price DESC, dateTime ASC`), then, only so that the choice never depends on
/// arrival order, the lower bidder and extra.
fn beats(b: &Bid, best: &Bid) -> bool {
    (
        b.price,
        std::cmp::Reverse(b.date_time),
        std::cmp::Reverse(b.bidder),
    )
        .cmp(&(
            best.price,
            std::cmp::Reverse(best.date_time),
            std::cmp::Reverse(best.bidder),
        ))
        .then_with(|| best.extra.cmp(&b.extra))
        .is_gt()
}

/// One auction id's state in the winning-bid join.
#[derive(serde::Serialize, serde::Deserialize)]
struct AuctionBids {
    /// The auction, once it arrived.
    auction: Option<Auction>,
    /// The best bid so far within `[auction.date_time, auction.expires]`.
    best: Option<Bid>,
    /// Bids that arrived before the auction (they may still fall in its range).
    pending: Vec<Bid>,
}

/// The winning bid of each auction: the best bid with a time in `[auction.dateTime,
/// auction.expires]`, emitted (through `emit`) when the watermark passes the expiry.
///
/// Auctions and bids meet by auction id. A bid that arrives before its auction waits, with
/// a timer at its own time: once the watermark passes it, an auction that could contain it
/// would have arrived, so it is dropped. After an auction's result, its state is dropped.
struct WinningBids<F>(F);

impl<O, F> KeyedCoProcessFunction<i64, Auction, Bid, O> for WinningBids<F>
where
    O: 'static,
    F: Fn(Auction, Bid) -> O + Send + Sync + 'static,
{
    type State = AuctionBids;

    fn process_element1(&self, a: Auction, ctx: &mut ProcessContext<'_, i64, AuctionBids, O>) {
        let expires = a.expires;
        let st = ctx.state().get_or_insert_with(|| AuctionBids {
            auction: None,
            best: None,
            pending: Vec::new(),
        });
        for b in std::mem::take(&mut st.pending) {
            if (a.date_time..=a.expires).contains(&b.date_time)
                && st.best.as_ref().is_none_or(|best| beats(&b, best))
            {
                st.best = Some(b);
            }
        }
        st.auction = Some(a);
        ctx.register_event_time_timer(expires);
    }

    fn process_element2(&self, b: Bid, ctx: &mut ProcessContext<'_, i64, AuctionBids, O>) {
        let at = b.date_time;
        let st = ctx.state().get_or_insert_with(|| AuctionBids {
            auction: None,
            best: None,
            pending: Vec::new(),
        });
        match &st.auction {
            Some(a) => {
                if (a.date_time..=a.expires).contains(&b.date_time)
                    && st.best.as_ref().is_none_or(|best| beats(&b, best))
                {
                    st.best = Some(b);
                }
            }
            None => {
                st.pending.push(b);
                ctx.register_event_time_timer(at);
            }
        }
    }

    fn on_timer(
        &self,
        _timestamp: Timestamp,
        _domain: TimeDomain,
        ctx: &mut ProcessContext<'_, i64, AuctionBids, O>,
    ) {
        let watermark = ctx.current_watermark();
        let Some(st) = ctx.state().as_mut() else {
            return;
        };
        let done = match &st.auction {
            // The auction closed: every bid up to its expiry has arrived.
            Some(a) => a.expires <= watermark,
            None => {
                st.pending.retain(|b| b.date_time > watermark);
                st.pending.is_empty()
            }
        };
        if done {
            let st = ctx.state().take().expect("checked above");
            if let (Some(a), Some(b)) = (st.auction, st.best) {
                let row = (self.0)(a, b);
                ctx.collect(row);
            }
        }
    }
}

/// The winning bid of each auction, as `emit(auction, bid)`, at the auction's expiry.
fn winning_bids<O: spate_types::Data>(
    events: &DataStream<Event>,
    name: &str,
    emit: impl Fn(Auction, Bid) -> O + Send + Sync + 'static,
) -> DataStream<O> {
    let events = with_event_time(events);
    let auctions = auctions(&events).key_by(|a| a.id);
    let bids = bids(&events).key_by(|b| b.auction);
    auctions
        .connect(&bids)
        .process(WinningBids(emit))
        .name(name)
}

/// q9: the winning bid of each auction.
pub fn q9(events: &DataStream<Event>) -> DataStream<WinningBidRow> {
    winning_bids(events, "q9.winning_bids", |auction, bid| WinningBidRow {
        auction,
        bid,
    })
}

/// The running average of winning prices of one category.
struct CategoryAverage;

impl UpdatingAggregate<i64, (i64, i64)> for CategoryAverage {
    type Acc = (i64, i64);
    type Out = CategoryAverageRow;

    fn create(&self) -> (i64, i64) {
        (0, 0)
    }

    fn add(&self, acc: &mut (i64, i64), (_category, price): (i64, i64)) {
        acc.0 += price;
        acc.1 += 1;
    }

    fn results(&self, category: &i64, acc: &(i64, i64), out: &mut Vec<CategoryAverageRow>) {
        if acc.1 > 0 {
            out.push(CategoryAverageRow {
                category: *category,
                // Java's long division truncates toward zero, as Rust's.
                average: acc.0 / acc.1,
            });
        }
    }
}

/// q4: per category, the average winning price of the closed auctions (an updating result).
pub fn q4(events: &DataStream<Event>) -> DataStream<Change<CategoryAverageRow>> {
    winning_bids(events, "q4.winning_bids", |a, b| (a.category, b.price))
        .key_by(|(category, _)| *category)
        .updating(CategoryAverage)
        .name("q4.average")
}

/// One auction id's state in q20's join.
#[derive(serde::Serialize, serde::Deserialize)]
enum AuctionMatch {
    /// The auction has not arrived; its bids so far.
    Pending(Vec<Bid>),
    /// A category-10 auction.
    Selected(Box<Auction>),
    /// An auction of another category: its bids are dropped.
    Other,
}

/// q20: bids joined with their auction, for auctions in category 10 (an incremental join on
/// the auction id that keeps every auction, as Flink's regular join does).
pub fn q20(events: &DataStream<Event>) -> DataStream<AuctionBidRow> {
    let auctions = auctions(events).key_by(|a| a.id);
    let bids = bids(events).key_by(|b| b.auction);
    auctions
        .connect(&bids)
        .process_with_state(
            |_id, state: &mut Option<AuctionMatch>, a: Auction, out: &mut Vec<AuctionBidRow>| {
                let pending = match state.take() {
                    Some(AuctionMatch::Pending(bids)) => bids,
                    _ => Vec::new(),
                };
                if a.category == 10 {
                    for bid in pending {
                        out.push(AuctionBidRow {
                            bid,
                            auction: a.clone(),
                        });
                    }
                    *state = Some(AuctionMatch::Selected(Box::new(a)));
                } else {
                    *state = Some(AuctionMatch::Other);
                }
            },
            |_id, state: &mut Option<AuctionMatch>, bid: Bid, out: &mut Vec<AuctionBidRow>| {
                match state.get_or_insert_with(|| AuctionMatch::Pending(Vec::new())) {
                    AuctionMatch::Pending(bids) => bids.push(bid),
                    AuctionMatch::Selected(a) => out.push(AuctionBidRow {
                        bid,
                        auction: (**a).clone(),
                    }),
                    AuctionMatch::Other => {}
                }
            },
        )
        .name("q20.join")
}

impl Row for SellerRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        Cols::new(out)
            .str(&self.name)
            .str(&self.city)
            .str(&self.state)
            .int(self.id)
            .end();
    }
}

impl Row for CategoryAverageRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        Cols::new(out).int(self.category).int(self.average).end();
    }
}

impl Row for WinningBidRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        let (a, b) = (&self.auction, &self.bid);
        Cols::new(out)
            .int(a.id)
            .str(&a.item_name)
            .str(&a.description)
            .int(a.initial_bid)
            .int(a.reserve)
            .ts(a.date_time)
            .ts(a.expires)
            .int(a.seller)
            .int(a.category)
            .str(&a.extra)
            .int(b.auction)
            .int(b.bidder)
            .int(b.price)
            .ts(b.date_time)
            .str(&b.extra)
            .end();
    }
}

impl Row for AuctionBidRow {
    fn write_json(&self, out: &mut Vec<u8>) {
        let (a, b) = (&self.auction, &self.bid);
        Cols::new(out)
            .int(b.auction)
            .int(b.bidder)
            .int(b.price)
            .str(&b.channel)
            .str(&b.url)
            .ts(b.date_time)
            .str(&b.extra)
            .str(&a.item_name)
            .str(&a.description)
            .int(a.initial_bid)
            .int(a.reserve)
            .ts(a.date_time)
            .ts(a.expires)
            .int(a.seller)
            .int(a.category)
            .str(&a.extra)
            .end();
    }
}
