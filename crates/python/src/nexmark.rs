//! The Nexmark generator as a source of Python jobs: each event a row shaped as the
//! generator's JSON lines (`event_type`, and `person`, `auction` or `bid`, the others `None`;
//! field names in camelCase), with `dateTime` as epoch milliseconds.

use std::sync::{Arc, OnceLock};

use spate_nexmark::model::Event;

use crate::record::{Names, Rec};

struct Shapes {
    event: Names,
    person: Names,
    auction: Names,
    bid: Names,
}

fn shapes() -> &'static Shapes {
    static SHAPES: OnceLock<Shapes> = OnceLock::new();
    let names = |xs: &[&str]| -> Names { Arc::new(xs.iter().map(|s| s.to_string()).collect()) };
    SHAPES.get_or_init(|| Shapes {
        event: names(&["event_type", "person", "auction", "bid"]),
        person: names(&[
            "id",
            "name",
            "emailAddress",
            "creditCard",
            "city",
            "state",
            "dateTime",
            "extra",
        ]),
        auction: names(&[
            "id",
            "itemName",
            "description",
            "initialBid",
            "reserve",
            "dateTime",
            "expires",
            "seller",
            "category",
            "extra",
        ]),
        bid: names(&[
            "auction", "bidder", "price", "channel", "url", "dateTime", "extra",
        ]),
    })
}

fn s(t: &str) -> Rec {
    Rec::Str(t.to_owned())
}

/// One Nexmark event as a row.
pub fn event_row(e: Event) -> Rec {
    let sh = shapes();
    let row = |names: &Names, values: Vec<Rec>| Rec::Row(Some(Arc::clone(names)), values);
    let (kind, slot, inner) = match e {
        Event::Person(p) => (
            0,
            1,
            row(
                &sh.person,
                vec![
                    Rec::Int(p.id),
                    s(&p.name),
                    s(&p.email_address),
                    s(&p.credit_card),
                    s(&p.city),
                    s(&p.state),
                    Rec::Int(p.date_time),
                    s(&p.extra),
                ],
            ),
        ),
        Event::Auction(a) => (
            1,
            2,
            row(
                &sh.auction,
                vec![
                    Rec::Int(a.id),
                    s(&a.item_name),
                    s(&a.description),
                    Rec::Int(a.initial_bid),
                    Rec::Int(a.reserve),
                    Rec::Int(a.date_time),
                    Rec::Int(a.expires),
                    Rec::Int(a.seller),
                    Rec::Int(a.category),
                    s(&a.extra),
                ],
            ),
        ),
        Event::Bid(b) => (
            2,
            3,
            row(
                &sh.bid,
                vec![
                    Rec::Int(b.auction),
                    Rec::Int(b.bidder),
                    Rec::Int(b.price),
                    s(&b.channel),
                    s(&b.url),
                    Rec::Int(b.date_time),
                    s(&b.extra),
                ],
            ),
        ),
    };
    let mut values = vec![Rec::Int(kind), Rec::None, Rec::None, Rec::None];
    values[slot] = inner;
    row(&sh.event, values)
}
