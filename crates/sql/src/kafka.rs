//! The `kafka` connector: a table over Kafka topics, read and written with the options of
//! Flink's Kafka SQL connector and its `json` format, so that the Nexmark suite's
//! `ddl_kafka.sql` and `insert_kafka.sql` run as written.
//!
//! * Both ways: `topic`, `properties.bootstrap.servers`, `format` (or `value.format`) =
//!   `json`, and any `properties.*` passed to librdkafka (Flink passes them to the Java
//!   client; the common ones have the same names).
//! * Reading: `properties.group.id`; `scan.startup.mode` (`earliest-offset`,
//!   `latest-offset`, `group-offsets` (then `properties.auto.offset.reset`, default
//!   `latest`), `timestamp` with `scan.startup.timestamp-millis`, `specific-offsets` with
//!   `scan.startup.specific-offsets` = `partition:0,offset:42;partition:1,offset:300`);
//!   `scan.bounded.mode` = `latest-offset` (stop at the end offsets of the start; default
//!   `unbounded`); `scan.topic-partition-discovery.interval`; `json.ignore-parse-errors`. The
//!   table's watermark runs per partition, as Flink's. Offsets are checkpointed: a restored
//!   job reads on from its checkpoint.
//! * Writing: one JSON object per row, named by the columns (Flink's `json` format: a
//!   `ROW` is an object, a `DECIMAL` a number, a `TIMESTAMP(3)` `"2024-01-01 00:00:00.000"`);
//!   `sink.delivery-guarantee` (`none`, `at-least-once`, the default, or `exactly-once` with
//!   `sink.transactional-id-prefix`: Kafka transactions committed with checkpoints);
//!   `sink.partitioner` `default` or `round-robin`; `key.fields` (`a;b`, with `key.format` =
//!   `json`) gives each message the JSON object of those columns as its key, and
//!   `value.fields-include` = `EXCEPT_KEY` leaves them out of the value. As Flink's
//!   connector, it takes inserts only.
//!
//! Not supported (refused by name): `topic-pattern`, other formats, a bounded mode other
//! than `latest-offset`, the `fixed` partitioner, metadata columns.

use std::sync::Arc;

use spate_connectors::kafka::{Delivery, Encoded, KafkaSink, KafkaSource, StartOffsets};
use spate_dataflow::{DataStream, StreamEnv};
use spate_types::BadRecordPolicy;

use crate::catalog::Table;
use crate::format::write_flink_json;
use crate::types::{SqlRow, SqlType};
use crate::SqlError;

/// Options either way; `properties.*` are checked apart.
const COMMON: &[&str] = &["connector", "topic", "format", "value.format"];
/// Reading options.
const SCAN: &[&str] = &[
    "scan.startup.mode",
    "scan.startup.timestamp-millis",
    "scan.startup.specific-offsets",
    "scan.bounded.mode",
    "scan.topic-partition-discovery.interval",
    "json.ignore-parse-errors",
    "json.fail-on-missing-field",
    "json.timestamp-format.standard",
];
/// Writing options.
const SINK: &[&str] = &[
    "sink.delivery-guarantee",
    "sink.transactional-id-prefix",
    "sink.partitioner",
    "key.fields",
    "key.format",
    "value.fields-include",
];

fn bad(table: &Table, msg: impl std::fmt::Display) -> SqlError {
    SqlError::plan(format!("the table `{}`: {msg}", table.name))
}

/// What both ways share: the cluster, the topics and the librdkafka properties.
struct Common {
    bootstrap: String,
    topics: Vec<String>,
    properties: Vec<(String, String)>,
}

fn common(table: &Table) -> Result<Common, SqlError> {
    let unknown: Vec<&str> = table
        .options
        .keys()
        .map(String::as_str)
        .filter(|k| {
            !COMMON.contains(k)
                && !SCAN.contains(k)
                && !SINK.contains(k)
                && !k.starts_with("properties.")
        })
        .collect();
    if !unknown.is_empty() {
        let hint = if unknown.contains(&"topic-pattern") {
            " (`topic-pattern` is not supported: name the topics in 'topic', separated by ';')"
        } else {
            ""
        };
        return Err(bad(
            table,
            format!(
                "unsupported option(s) of the 'kafka' connector: {}{hint}",
                unknown.join(", ")
            ),
        ));
    }
    let format = table
        .option("value.format")
        .or_else(|| table.option("format"))
        .ok_or_else(|| bad(table, "a 'kafka' table needs 'format' = 'json'"))?;
    if format != "json" {
        return Err(bad(
            table,
            format!("the 'kafka' connector reads and writes 'json', not '{format}'"),
        ));
    }
    let bootstrap = table
        .option("properties.bootstrap.servers")
        .ok_or_else(|| {
            bad(
                table,
                "a 'kafka' table needs 'properties.bootstrap.servers'",
            )
        })?
        .to_owned();
    let topics: Vec<String> = table
        .option("topic")
        .unwrap_or_default()
        .split(';')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    if topics.is_empty() {
        return Err(bad(table, "a 'kafka' table needs a 'topic'"));
    }
    let properties = table
        .options
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("properties.")?, v)))
        .filter(|(k, _)| !["bootstrap.servers", "group.id", "auto.offset.reset"].contains(k))
        .map(|(k, v)| (k.to_owned(), v.clone()))
        .collect();
    Ok(Common {
        bootstrap,
        topics,
        properties,
    })
}

/// Where a table's reading starts, from `scan.startup.*`.
fn start(table: &Table, topic: &str) -> Result<StartOffsets, SqlError> {
    let mode = table.option("scan.startup.mode").unwrap_or("group-offsets");
    Ok(match mode {
        "earliest-offset" => StartOffsets::Earliest,
        "latest-offset" => StartOffsets::Latest,
        "group-offsets" => {
            let reset = match table.option("properties.auto.offset.reset") {
                Some("earliest") => StartOffsets::Earliest,
                None | Some("latest") => StartOffsets::Latest,
                Some(other) => {
                    return Err(bad(
                        table,
                        format!("'properties.auto.offset.reset' = '{other}': expected 'earliest' or 'latest'"),
                    ))
                }
            };
            StartOffsets::Committed {
                reset: Box::new(reset),
            }
        }
        "timestamp" => {
            let ms = table
                .option("scan.startup.timestamp-millis")
                .and_then(|v| v.trim().parse::<i64>().ok())
                .ok_or_else(|| {
                    bad(table, "'scan.startup.mode' = 'timestamp' needs 'scan.startup.timestamp-millis' (milliseconds)")
                })?;
            StartOffsets::Timestamp(ms)
        }
        "specific-offsets" => {
            let text = table.option("scan.startup.specific-offsets").ok_or_else(|| {
                bad(table, "'scan.startup.mode' = 'specific-offsets' needs 'scan.startup.specific-offsets'")
            })?;
            let mut offsets = std::collections::HashMap::new();
            for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
                let parsed = part.split_once(',').and_then(|(p, o)| {
                    let p = p.trim().strip_prefix("partition:")?.trim().parse::<i32>().ok()?;
                    let o = o.trim().strip_prefix("offset:")?.trim().parse::<i64>().ok()?;
                    Some((p, o))
                });
                let Some((partition, offset)) = parsed else {
                    return Err(bad(
                        table,
                        format!("'scan.startup.specific-offsets': `{part}` is not `partition:P,offset:O`"),
                    ));
                };
                offsets.insert((topic.to_owned(), partition), offset);
            }
            StartOffsets::Specific(offsets)
        }
        other => {
            return Err(bad(
                table,
                format!("'scan.startup.mode' = '{other}': expected earliest-offset, latest-offset, group-offsets, timestamp or specific-offsets"),
            ))
        }
    })
}

/// The source of a `kafka` table: each message's value decoded by `decode` (JSON into the
/// table's row). The table's watermark is the caller's.
pub(crate) fn scan(
    env: &StreamEnv,
    table: &Table,
    decode: crate::exec::JsonRows,
    policy: BadRecordPolicy,
) -> Result<DataStream<SqlRow>, SqlError> {
    let common = common(table)?;
    if common.topics.len() > 1 && table.option("scan.startup.mode") == Some("specific-offsets") {
        return Err(bad(
            table,
            "'specific-offsets' reads one topic: name one in 'topic'",
        ));
    }
    let topics: Vec<&str> = common.topics.iter().map(String::as_str).collect();
    let mut source = KafkaSource::with_decoder(
        common.bootstrap.clone(),
        &topics,
        Arc::new(move |m| match m.value {
            Some(value) => decode(value),
            None => Err("a message without a value (a tombstone)".into()),
        }),
    )
    .start(start(table, topics[0])?)
    .policy(policy);
    if let Some(group) = table.option("properties.group.id") {
        source = source.group(group);
    }
    match table.option("scan.bounded.mode").unwrap_or("unbounded") {
        "unbounded" => {}
        "latest-offset" => source = source.bounded(),
        other => {
            return Err(bad(
                table,
                format!("'scan.bounded.mode' = '{other}': Spate reads 'unbounded' or to the 'latest-offset' of the start"),
            ))
        }
    }
    if let Some(every) = table.option("scan.topic-partition-discovery.interval") {
        let every = crate::session::parse_duration(every).ok_or_else(|| {
            bad(
                table,
                format!("'scan.topic-partition-discovery.interval' = '{every}': expected a duration such as '10 s'"),
            )
        })?;
        source = source.discovery_interval(every);
    }
    for (k, v) in &common.properties {
        source = source.property(k.clone(), v.clone());
    }
    Ok(env
        .from_source(source)
        .name(&format!("scan.{}", table.name)))
}

/// The sink of a `kafka` table, for rows of `columns` (the table's, in order).
pub(crate) fn sink(
    table: &Table,
    columns: Vec<(String, SqlType)>,
) -> Result<KafkaSink<SqlRow>, SqlError> {
    let common = common(table)?;
    let [topic] = common.topics.as_slice() else {
        return Err(bad(table, "a 'kafka' table written to names one 'topic'"));
    };
    let delivery = match table.option("sink.delivery-guarantee").unwrap_or("at-least-once") {
        "none" => Delivery::None,
        "at-least-once" => Delivery::AtLeastOnce,
        "exactly-once" => Delivery::ExactlyOnce {
            prefix: table
                .option("sink.transactional-id-prefix")
                .ok_or_else(|| {
                    bad(table, "'sink.delivery-guarantee' = 'exactly-once' needs 'sink.transactional-id-prefix'")
                })?
                .to_owned(),
        },
        other => {
            return Err(bad(
                table,
                format!("'sink.delivery-guarantee' = '{other}': expected none, at-least-once or exactly-once"),
            ))
        }
    };
    match table.option("sink.partitioner").unwrap_or("default") {
        "default" | "round-robin" => {}
        other => {
            return Err(bad(
                table,
                format!("'sink.partitioner' = '{other}': Spate's Kafka sink has 'default' and 'round-robin'"),
            ))
        }
    }
    let key: Vec<usize> = match table.option("key.fields") {
        None => Vec::new(),
        Some(fields) => {
            if let Some(f) = table.option("key.format").filter(|f| *f != "json") {
                return Err(bad(table, format!("'key.format' = '{f}': expected 'json'")));
            }
            fields
                .split(';')
                .map(str::trim)
                .map(|name| {
                    columns.iter().position(|(c, _)| c == name).ok_or_else(|| {
                        bad(
                            table,
                            format!("'key.fields' names `{name}`, which is not a column"),
                        )
                    })
                })
                .collect::<Result<_, _>>()?
        }
    };
    let except_key = match table.option("value.fields-include").unwrap_or("ALL") {
        "ALL" => false,
        "EXCEPT_KEY" => true,
        other => {
            return Err(bad(
                table,
                format!("'value.fields-include' = '{other}': expected ALL or EXCEPT_KEY"),
            ))
        }
    };
    let value_columns: Vec<usize> = (0..columns.len())
        .filter(|c| !(except_key && key.contains(c)))
        .collect();
    let encoder = Arc::new(move |row: &SqlRow, out: &mut Encoded| {
        write_flink_json(row, &columns, &value_columns, &mut out.value);
        if !key.is_empty() {
            let mut k = Vec::new();
            write_flink_json(row, &columns, &key, &mut k);
            out.key = Some(k);
        }
        Ok(())
    });
    let mut sink =
        KafkaSink::with_encoder(common.bootstrap, topic.clone(), encoder).delivery(delivery);
    for (k, v) in common.properties {
        sink = sink.property(k, v);
    }
    Ok(sink)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Session;

    fn table(options: &str) -> Table {
        let mut session = Session::new(Default::default());
        session
            .execute_script(&format!(
                "CREATE TABLE k (a BIGINT, s STRING) WITH ('connector' = 'kafka', \
                 'properties.bootstrap.servers' = 'localhost:1', 'format' = 'json'{options});"
            ))
            .unwrap();
        (**session.catalog.table("k").unwrap()).clone()
    }

    fn columns() -> Vec<(String, SqlType)> {
        vec![("a".into(), SqlType::BigInt), ("s".into(), SqlType::String)]
    }

    #[test]
    fn startup_modes_are_flinks() {
        let start_of = |o: &str| start(&table(o), "t");
        assert_eq!(
            start_of(", 'scan.startup.mode' = 'earliest-offset'").unwrap(),
            StartOffsets::Earliest
        );
        assert_eq!(
            start_of(", 'scan.startup.mode' = 'latest-offset'").unwrap(),
            StartOffsets::Latest
        );
        assert_eq!(
            start_of("").unwrap(),
            StartOffsets::Committed {
                reset: Box::new(StartOffsets::Latest)
            },
            "group-offsets by default"
        );
        assert_eq!(
            start_of(", 'properties.auto.offset.reset' = 'earliest'").unwrap(),
            StartOffsets::Committed {
                reset: Box::new(StartOffsets::Earliest)
            }
        );
        assert_eq!(
            start_of(
                ", 'scan.startup.mode' = 'timestamp', 'scan.startup.timestamp-millis' = '1700'"
            )
            .unwrap(),
            StartOffsets::Timestamp(1700)
        );
        let specific = start_of(
            ", 'scan.startup.mode' = 'specific-offsets', \
             'scan.startup.specific-offsets' = 'partition:0,offset:42;partition:1,offset:300'",
        )
        .unwrap();
        let StartOffsets::Specific(offsets) = specific else {
            panic!("{specific:?}")
        };
        assert_eq!(offsets.get(&("t".to_owned(), 1)), Some(&300));
        assert_eq!(offsets.len(), 2);
    }

    #[test]
    fn what_is_not_supported_is_refused_with_one_line_naming_it() {
        for (options, needle) in [
            (", 'topic-pattern' = 'x.*'", "`topic-pattern` is not supported"),
            (", 'topic' = 't', 'scan.startup.mode' = 'sometime'", "'scan.startup.mode' = 'sometime'"),
            (", 'topic' = 't', 'scan.startup.mode' = 'timestamp'", "scan.startup.timestamp-millis"),
            (
                ", 'topic' = 't', 'scan.startup.mode' = 'specific-offsets', 'scan.startup.specific-offsets' = 'p0:1'",
                "`p0:1` is not `partition:P,offset:O`",
            ),
            ("", "needs a 'topic'"),
        ] {
            let t = table(options);
            let e = common(&t)
                .and_then(|c| start(&t, &c.topics[0]))
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle), "{options}: {e}");
            assert!(!e.contains('\n'));
        }
        for (options, needle) in [
            (
                ", 'topic' = 't', 'sink.delivery-guarantee' = 'exactly-once'",
                "needs 'sink.transactional-id-prefix'",
            ),
            (
                ", 'topic' = 't', 'sink.partitioner' = 'fixed'",
                "'sink.partitioner' = 'fixed'",
            ),
            (
                ", 'topic' = 't', 'key.fields' = 'a;nope'",
                "`nope`, which is not a column",
            ),
            (", 'topic' = 'a;b'", "names one 'topic'"),
        ] {
            let e = sink(&table(options), columns()).err().unwrap().to_string();
            assert!(e.contains(needle), "{options}: {e}");
        }
        let mut session = Session::new(Default::default());
        session
            .execute_script(
                "CREATE TABLE c (a BIGINT) WITH ('connector' = 'kafka', 'topic' = 't', \
                 'properties.bootstrap.servers' = 'localhost:1', 'format' = 'csv');",
            )
            .unwrap();
        let e = common(session.catalog.table("c").unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("'json', not 'csv'"), "{e}");
    }
}
