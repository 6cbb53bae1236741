//! The `nexmark` connector: Spate's built-in Nexmark generator as a table, with the options
//! of nexmark-flink's table source, so that the suite's `ddl_gen.sql` runs as written.
//!
//! ```sql
//! CREATE TABLE datagen (event_type INT, person ROW<...>, auction ROW<...>, bid ROW<...>,
//!     `dateTime` AS ..., WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND)
//! WITH ('connector' = 'nexmark', 'first-event.rate' = '10000', 'events.num' = '1000000');
//! ```
//!
//! * The table must have Nexmark's physical schema (as nexmark-flink checks); computed
//!   columns and the watermark are the table's own.
//! * `first-event.rate` is the event-time rate (events per second of event time);
//!   `events.num` the number of events (0: unbounded); `max-emit-speed` = `false` (or
//!   `rate.limited` = `true`) paces the source to that rate in wall-clock time too;
//!   `keep-alive` = `true` keeps the source running, idle, after its events; `stop-at` (≥ 0)
//!   ends it after that many events.
//! * Spate's own options: `seed` (default 42) and `partitions`, the generator's partitions
//!   (default: the job's workers). What is generated depends on the seed, the rate, the
//!   number of events and the partitions, never on the workers.
//! * The generator has the suite's fixed shape: the proportions 1:3:46, the hot ratios and
//!   the average sizes of nexmark-flink's defaults. Those options are accepted at their
//!   default values only, and `next-event.rate` only equal to `first-event.rate` (one rate,
//!   so `rate.shape` and `rate.period` change nothing); any other value is refused with a
//!   line naming the option.
//! * Only the columns and nested fields the query reads are built (the others are `NULL`).

use spate_dataflow::{DataStream, StreamEnv};
use spate_nexmark::generator::GeneratorConfig;
use spate_nexmark::model::{Auction, Bid, Event, Person};
use spate_nexmark::source::NexmarkSource;

use crate::catalog::Table;
use crate::prune::{self, Read};
use crate::types::{Datum, SqlRow, SqlType};
use crate::SqlError;

/// Nexmark's physical schema, as nexmark-flink's `NEXMARK_SCHEMA`.
fn schema() -> Vec<(String, SqlType)> {
    use SqlType::{BigInt, String as Str, Timestamp};
    let row = |fields: &[(&str, SqlType)]| {
        SqlType::Row(
            fields
                .iter()
                .map(|(n, t)| ((*n).to_owned(), t.clone()))
                .collect(),
        )
    };
    vec![
        ("event_type".into(), SqlType::Int),
        (
            "person".into(),
            row(&[
                ("id", BigInt),
                ("name", Str),
                ("emailAddress", Str),
                ("creditCard", Str),
                ("city", Str),
                ("state", Str),
                ("dateTime", Timestamp),
                ("extra", Str),
            ]),
        ),
        (
            "auction".into(),
            row(&[
                ("id", BigInt),
                ("itemName", Str),
                ("description", Str),
                ("initialBid", BigInt),
                ("reserve", BigInt),
                ("dateTime", Timestamp),
                ("expires", Timestamp),
                ("seller", BigInt),
                ("category", BigInt),
                ("extra", Str),
            ]),
        ),
        (
            "bid".into(),
            row(&[
                ("auction", BigInt),
                ("bidder", BigInt),
                ("price", BigInt),
                ("channel", Str),
                ("url", Str),
                ("dateTime", Timestamp),
                ("extra", Str),
            ]),
        ),
    ]
}

/// The options of nexmark-flink's source that only take their default here, with it.
const FIXED: &[(&str, &str)] = &[
    ("person.proportion", "1"),
    ("auction.proportion", "3"),
    ("bid.proportion", "46"),
    ("bid.hot-ratio.auctions", "2"),
    ("bid.hot-ratio.bidders", "4"),
    ("auction.hot-ratio.sellers", "4"),
    ("person.avg-size", "200b"),
    ("auction.avg-size", "500b"),
    ("bid.avg-size", "100b"),
];

/// Options accepted with any valid value.
const FREE: &[&str] = &[
    "connector",
    "first-event.rate",
    "next-event.rate",
    "events.num",
    "keep-alive",
    "stop-at",
    "max-emit-speed",
    "rate.limited",
    "rate.shape",
    "rate.period",
    "seed",
    "partitions",
];

/// What a `nexmark` table's options ask for.
#[derive(Debug, Clone, PartialEq)]
pub struct NexmarkOptions {
    /// The generator's configuration (`partitions` as given, or 0 for the job's workers).
    pub config: GeneratorConfig,
    /// A wall-clock limit on the events per second of the whole source.
    pub max_events_per_s: Option<f64>,
    /// Stay idle after the last event instead of finishing.
    pub keep_alive: bool,
}

impl NexmarkOptions {
    /// Reads and checks `table`'s options and schema.
    pub fn of(table: &Table) -> Result<Self, SqlError> {
        let bad = |msg: String| SqlError::plan(format!("the table `{}`: {msg}", table.name));
        check_schema(table).map_err(bad)?;
        let mut unknown: Vec<&str> = table
            .options
            .keys()
            .map(String::as_str)
            .filter(|k| !FREE.contains(k) && !FIXED.iter().any(|(f, _)| f == k))
            .collect();
        if !unknown.is_empty() {
            unknown.sort_unstable();
            return Err(bad(format!(
                "unsupported option(s) of the 'nexmark' connector: {}",
                unknown.join(", ")
            )));
        }
        for (key, default) in FIXED {
            if let Some(value) = table.option(key) {
                let same = match default.strip_suffix('b') {
                    Some(bytes) => {
                        memory_bytes(value).map(|b| b.to_string()).as_deref() == Some(bytes)
                    }
                    None => value.trim() == *default,
                };
                if !same {
                    return Err(bad(format!(
                        "'{key}' = '{value}': Spate's generator has nexmark-flink's default ('{default}') only"
                    )));
                }
            }
        }
        let int = |key: &str, default: i64| -> Result<i64, SqlError> {
            match table.option(key) {
                None => Ok(default),
                Some(v) => v
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| bad(format!("'{key}' = '{v}': expected a whole number"))),
            }
        };
        let boolean = |key: &str, default: bool| -> Result<bool, SqlError> {
            match table.option(key).map(|v| v.trim().to_ascii_lowercase()) {
                None => Ok(default),
                Some(v) if v == "true" => Ok(true),
                Some(v) if v == "false" => Ok(false),
                Some(v) => Err(bad(format!("'{key}' = '{v}': expected 'true' or 'false'"))),
            }
        };
        let rate = int("first-event.rate", 10_000)?;
        if rate <= 0 {
            return Err(bad(format!(
                "'first-event.rate' = '{rate}': expected a positive number of events per second"
            )));
        }
        let next = int("next-event.rate", rate)?;
        if next != rate {
            return Err(bad(format!(
                "'next-event.rate' = '{next}': Spate's generator has one rate, so it must equal 'first-event.rate' ('{rate}')"
            )));
        }
        if let Some(shape) = table.option("rate.shape") {
            if !matches!(
                shape.trim().to_ascii_uppercase().as_str(),
                "SQUARE" | "SINE"
            ) {
                return Err(bad(format!(
                    "'rate.shape' = '{shape}': expected 'SQUARE' or 'SINE'"
                )));
            }
        }
        let events = int("events.num", 0)?;
        let stop_at = int("stop-at", -1)?;
        if events < 0 || stop_at < -1 {
            return Err(bad(
                "'events.num' must be 0 (unbounded) or more, and 'stop-at' -1 (never) or more"
                    .into(),
            ));
        }
        let mut limit = (events > 0).then_some(events as u64);
        if stop_at >= 0 {
            limit = Some(limit.map_or(stop_at as u64, |n| n.min(stop_at as u64)));
        }
        let seed = match table.option("seed") {
            None => spate_nexmark::generator::DEFAULT_SEED,
            Some(v) => v
                .trim()
                .parse::<u64>()
                .map_err(|_| bad(format!("'seed' = '{v}': expected a whole number ≥ 0")))?,
        };
        let partitions = int("partitions", 0)?;
        if table.option("partitions").is_some() && partitions <= 0 {
            return Err(bad(format!(
                "'partitions' = '{partitions}': expected at least one generator partition"
            )));
        }
        let paced = !boolean("max-emit-speed", true)? || boolean("rate.limited", false)?;
        Ok(NexmarkOptions {
            config: GeneratorConfig {
                seed,
                rate: rate as f64,
                events: limit,
                partitions: partitions as usize,
                ..Default::default()
            },
            max_events_per_s: paced.then_some(rate as f64),
            keep_alive: boolean("keep-alive", false)?,
        })
    }
}

/// Flink's `MemorySize` text in bytes (`100b`, `100 bytes`, `1kb`, `1 k`, ...).
fn memory_bytes(text: &str) -> Option<u64> {
    let text = text.trim().to_ascii_lowercase();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let n: u64 = text[..digits].parse().ok()?;
    let unit = match text[digits..].trim() {
        "" | "b" | "bytes" => 1,
        "k" | "kb" | "kibibytes" => 1 << 10,
        "m" | "mb" | "mebibytes" => 1 << 20,
        _ => return None,
    };
    n.checked_mul(unit)
}

fn check_schema(table: &Table) -> Result<(), String> {
    let want = schema();
    let have: Vec<(String, SqlType)> = table
        .physical()
        .map(|c| (c.name.clone(), c.ty.clone()))
        .collect();
    if have == want {
        return Ok(());
    }
    let show = |cols: &[(String, SqlType)]| {
        cols.iter()
            .map(|(n, t)| format!("`{n}` {t}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(format!(
        "a 'nexmark' table has Nexmark's physical columns ({}), not ({})",
        show(&want),
        show(&have)
    ))
}

/// Which fields of each nested row the plan reads (`None`: the column is not read).
struct Reads {
    event_type: bool,
    person: Option<Vec<bool>>,
    auction: Option<Vec<bool>>,
    bid: Option<Vec<bool>>,
}

impl Reads {
    fn of(physical: &[Read]) -> Self {
        let nested = |at: usize, width: usize| {
            let read = physical.get(at).unwrap_or(&Read::All);
            read.any()
                .then(|| (0..width).map(|i| read.field(i)).collect())
        };
        Reads {
            event_type: physical.first().is_none_or(Read::any),
            person: nested(1, 8),
            auction: nested(2, 10),
            bid: nested(3, 7),
        }
    }

    /// The physical row of `event`: what is not read is `NULL`.
    fn row(&self, event: Event) -> Vec<Datum> {
        let mut row = vec![Datum::Null; 4];
        let (kind, at) = match &event {
            Event::Person(_) => (0, 1),
            Event::Auction(_) => (1, 2),
            Event::Bid(_) => (2, 3),
        };
        if self.event_type {
            row[0] = Datum::Int(kind);
        }
        row[at] = match &event {
            Event::Person(p) => self.person.as_deref().map(|m| person(p, m)),
            Event::Auction(a) => self.auction.as_deref().map(|m| auction(a, m)),
            Event::Bid(b) => self.bid.as_deref().map(|m| bid(b, m)),
        }
        .unwrap_or_default();
        row
    }
}

/// A nested row of the values whose field is read, `NULL` for the others.
fn nested<const N: usize>(read: &[bool], values: [&dyn Fn() -> Datum; N]) -> Datum {
    Datum::Row(
        values
            .iter()
            .zip(read)
            .map(|(value, &read)| if read { value() } else { Datum::Null })
            .collect(),
    )
}

fn person(p: &Person, read: &[bool]) -> Datum {
    nested(
        read,
        [
            &|| Datum::Int(p.id),
            &|| Datum::str(&p.name),
            &|| Datum::str(&p.email_address),
            &|| Datum::str(&p.credit_card),
            &|| Datum::str(&p.city),
            &|| Datum::str(&p.state),
            &|| Datum::Timestamp(p.date_time),
            &|| Datum::str(&p.extra),
        ],
    )
}

fn auction(a: &Auction, read: &[bool]) -> Datum {
    nested(
        read,
        [
            &|| Datum::Int(a.id),
            &|| Datum::str(&a.item_name),
            &|| Datum::str(&a.description),
            &|| Datum::Int(a.initial_bid),
            &|| Datum::Int(a.reserve),
            &|| Datum::Timestamp(a.date_time),
            &|| Datum::Timestamp(a.expires),
            &|| Datum::Int(a.seller),
            &|| Datum::Int(a.category),
            &|| Datum::str(&a.extra),
        ],
    )
}

fn bid(b: &Bid, read: &[bool]) -> Datum {
    nested(
        read,
        [
            &|| Datum::Int(b.auction),
            &|| Datum::Int(b.bidder),
            &|| Datum::Int(b.price),
            &|| Datum::str(&b.channel),
            &|| Datum::str(&b.url),
            &|| Datum::Timestamp(b.date_time),
            &|| Datum::str(&b.extra),
        ],
    )
}

/// The source of a `nexmark` table, named `scan.TABLE`: generated events as physical rows,
/// then `make` (the computed columns). The table's watermark is the caller's.
pub(crate) fn scan(
    env: &StreamEnv,
    table: &Table,
    reads: Option<&Vec<Read>>,
    make: impl Fn(Vec<Datum>) -> SqlRow + Send + Sync + 'static,
) -> Result<DataStream<SqlRow>, SqlError> {
    let NexmarkOptions {
        mut config,
        max_events_per_s,
        keep_alive,
    } = NexmarkOptions::of(table)?;
    if config.partitions == 0 {
        config.partitions = env.config().total_workers().max(1);
    }
    let source = NexmarkSource::new(config, max_events_per_s)
        .map_err(|e| SqlError::plan(format!("the table `{}`: {e}", table.name)))?
        .keep_alive(keep_alive);
    let reads = Reads::of(&prune::physical_reads(table, reads));
    // The source carries the scan's name (its records are the events read).
    Ok(env
        .from_source(source)
        .name(&format!("scan.{}", table.name))
        .map(move |event: Event| make(reads.row(event)))
        .name(&format!("rows.{}", table.name)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Session;

    /// The suite's `ddl_gen.sql` columns, with `options` in its `WITH`.
    fn table(columns: &str, options: &str) -> Result<NexmarkOptions, SqlError> {
        let mut session = Session::new(Default::default());
        session.execute_script(&format!(
            "CREATE TABLE datagen ({columns}) WITH ('connector' = 'nexmark'{options});"
        ))?;
        let table = session.catalog.table("datagen").expect("created");
        NexmarkOptions::of(table)
    }

    const COLUMNS: &str = "event_type int,
        person ROW<id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR,
            city VARCHAR, state VARCHAR, `dateTime` TIMESTAMP(3), extra VARCHAR>,
        auction ROW<id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT,
            reserve BIGINT, `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT,
            category BIGINT, extra VARCHAR>,
        bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
            `dateTime` TIMESTAMP(3), extra VARCHAR>,
        `dateTime` AS CASE WHEN event_type = 0 THEN person.`dateTime`
            WHEN event_type = 1 THEN auction.`dateTime` ELSE bid.`dateTime` END,
        WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND";

    #[test]
    fn the_suites_options_configure_the_generator() {
        let o = table(
            COLUMNS,
            ", 'first-event.rate' = '200', 'next-event.rate' = '200', 'events.num' = '20000',
             'person.proportion' = '1', 'auction.proportion' = '3', 'bid.proportion' = '46',
             'keep-alive' = 'false', 'stop-at' = '-1', 'max-emit-speed' = 'true',
             'bid.avg-size' = '100 bytes'",
        )
        .unwrap();
        assert_eq!(o.config.rate, 200.0);
        assert_eq!(o.config.events, Some(20_000));
        assert_eq!(o.config.seed, spate_nexmark::generator::DEFAULT_SEED);
        assert_eq!(o.config.partitions, 0, "the job's workers");
        assert_eq!((o.max_events_per_s, o.keep_alive), (None, false));

        let o = table(
            COLUMNS,
            ", 'events.num' = '0', 'max-emit-speed' = 'false', 'keep-alive' = 'true',
             'seed' = '7', 'partitions' = '3'",
        )
        .unwrap();
        assert_eq!(o.config.events, None, "0 is unbounded");
        assert_eq!(o.config.rate, 10_000.0, "nexmark-flink's default rate");
        assert_eq!((o.config.seed, o.config.partitions), (7, 3));
        assert_eq!((o.max_events_per_s, o.keep_alive), (Some(10_000.0), true));

        let o = table(COLUMNS, ", 'events.num' = '500', 'stop-at' = '100'").unwrap();
        assert_eq!(o.config.events, Some(100));
    }

    #[test]
    fn what_the_generator_cannot_do_is_refused_with_one_line() {
        let err = |options: &str| table(COLUMNS, options).unwrap_err().to_string();
        for (options, needle) in [
            (", 'bid.proportion' = '92'", "'bid.proportion' = '92'"),
            (", 'next-event.rate' = '5'", "'next-event.rate' = '5'"),
            (", 'first-event.rate' = 'fast'", "expected a whole number"),
            (", 'first-event.rate' = '0'", "positive"),
            (", 'keep-alive' = 'yes'", "expected 'true' or 'false'"),
            (", 'partitions' = '0'", "at least one"),
            (
                ", 'topic' = 'x'",
                "unsupported option(s) of the 'nexmark' connector: topic",
            ),
            (", 'bid.avg-size' = '1kb'", "'bid.avg-size' = '1kb'"),
        ] {
            let e = err(options);
            assert!(e.contains(needle), "{options}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let e = table("event_type INT, bid ROW<auction BIGINT>", "")
            .unwrap_err()
            .to_string();
        assert!(e.contains("Nexmark's physical columns"), "{e}");
    }

    #[test]
    fn only_the_fields_read_are_built() {
        let physical = [
            Read::All,
            Read::None,
            Read::None,
            Read::Fields([0, 5].into_iter().collect()),
        ];
        let reads = Reads::of(&physical);
        let mut generator = spate_nexmark::generator::NexmarkGenerator::new(
            &GeneratorConfig {
                events: Some(50),
                ..Default::default()
            },
            0,
        )
        .unwrap();
        let (mut people, mut bids) = (0, 0);
        for event in &mut generator {
            match &event {
                Event::Bid(b) => {
                    let (auction, ts) = (b.auction, b.date_time);
                    let row = reads.row(event);
                    let fields = vec![
                        Datum::Int(auction),
                        Datum::Null,
                        Datum::Null,
                        Datum::Null,
                        Datum::Null,
                        Datum::Timestamp(ts),
                        Datum::Null,
                    ];
                    assert_eq!(
                        row,
                        vec![
                            Datum::Int(2),
                            Datum::Null,
                            Datum::Null,
                            Datum::Row(fields.into())
                        ]
                    );
                    bids += 1;
                }
                Event::Person(_) => {
                    assert_eq!(
                        reads.row(event),
                        vec![Datum::Int(0), Datum::Null, Datum::Null, Datum::Null]
                    );
                    people += 1;
                }
                Event::Auction(_) => {}
            }
        }
        assert!(people > 0 && bids > 0);
    }
}
