//! The Bytewax anchor workloads W1–W3 of `../shared/anchors` in the Rust DataStream API: the
//! yardstick for the same jobs written with the Python API's native specs
//! (`python/bench/anchors.py`), which must reach half of this.
//!
//! ```text
//! cargo run --release --example anchors -- W3 --input nx1m.jsonl --out rust_W3.tsv
//! python3 ../shared/anchors/py_compare.py plain_W3.tsv rust_W3.tsv
//! ```
//!
//! It takes `anchors.py`'s arguments (`W1|W2|W3 --input FILE_OR_DIR --out FILE [--workers N]
//! [--sep a] [--wait-ms 10000]`), builds the same operators in the same order, writes the same
//! rows (tab-separated, any order) and prints one JSON line with the same keys: `events`,
//! `wall_s`, `events_per_s`, `cpu_s`, `events_per_cpu_s`, `peak_rss_mb`, `rows`.
//!
//! - **W1**: each bid as q1's row, `auction bidder price*908/1000 (3 decimals) dateTime extra`.
//! - **W2**: bids per auction in sliding windows of 10 s every 2 s (event time from
//!   `dateTime`, watermark max − `--wait-ms`); per window, the auctions with the most bids
//!   (ties kept): `start end auction count`.
//! - **W3**: a word count over the bids' `extra`, split on `--sep`, empty words dropped, each
//!   word's count emitted once at the end of the input (`full_window_partition`).

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use spate::connectors::files::json::parse_timestamp_ms;
use spate::dataflow::{Count, SlidingEventTimeWindows, TumblingEventTimeWindows};
use spate::prelude::*;

/// The allocator of the CLI and the Python extension, so that the two fronts compare alike.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// One line of the Nexmark JSON: only its bid is read (persons and auctions are skipped
/// unbuilt, as unknown fields are).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Line {
    bid: Option<Bid>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Bid {
    auction: i64,
    bidder: i64,
    price: i64,
    #[serde(rename = "dateTime")]
    date_time: String,
    extra: String,
}

/// A sliding window's count of one auction.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct AuctionCount {
    start: i64,
    auction: i64,
    count: i64,
}

/// The greatest count of a window and every `(auction, count)` of it, as W2's
/// `agg.max("count")` and `agg.collect_list((auction, count))`.
struct TopAndPairs;

impl AggregateFunction<AuctionCount> for TopAndPairs {
    type Acc = (i64, Vec<(i64, i64)>);
    type Out = (i64, Vec<(i64, i64)>);
    fn create_accumulator(&self) -> Self::Acc {
        (i64::MIN, Vec::new())
    }
    fn add(&self, c: &AuctionCount, acc: &mut Self::Acc) {
        acc.0 = acc.0.max(c.count);
        acc.1.push((c.auction, c.count));
    }
    fn get_result(&self, acc: &Self::Acc) -> Self::Out {
        acc.clone()
    }
    fn merge(&self, mut a: Self::Acc, b: Self::Acc) -> Self::Acc {
        a.0 = a.0.max(b.0);
        a.1.extend(b.1);
        a
    }
}

const SIZE_MS: i64 = 10_000;
const SLIDE_MS: i64 = 2_000;

struct Args {
    workload: String,
    input: String,
    out: String,
    workers: usize,
    sep: String,
    wait_ms: u64,
}

fn args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        workload: it
            .next()
            .ok_or("usage: anchors W1|W2|W3 --input FILE --out FILE")?,
        input: String::new(),
        out: String::new(),
        workers: 1,
        sep: "a".into(),
        wait_ms: 10_000,
    };
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let number = |v: &str| v.parse().map_err(|_| format!("{flag}: not a number: {v}"));
        match flag.as_str() {
            "--input" => a.input = value,
            "--out" => a.out = value,
            "--workers" => a.workers = number(&value)? as usize,
            "--sep" => a.sep = value,
            "--wait-ms" => a.wait_ms = number(&value)?,
            "--engine" if value == "spate" => {}
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if !["W1", "W2", "W3"].contains(&a.workload.as_str()) || a.input.is_empty() || a.out.is_empty()
    {
        return Err("usage: anchors W1|W2|W3 --input FILE --out FILE".into());
    }
    Ok(a)
}

/// Builds the workload's job on `env`.
fn build(a: &Args, env: &StreamEnv) {
    let bids = env
        .read_jsonl::<Line>(a.input.as_str())
        .flat_map(|l: Line| l.bid)
        .name("bids");
    let rows: DataStream<String> =
        match a.workload.as_str() {
            "W1" => bids.map(|b: Bid| {
                let v = b.price * 908;
                let sign = if v < 0 { "-" } else { "" };
                let (whole, frac) = (v.abs() / 1000, v.abs() % 1000);
                let (auction, bidder) = (b.auction, b.bidder);
                format!(
                    "{auction}\t{bidder}\t{sign}{whole}.{frac:03}\t{}\t{}",
                    b.date_time, b.extra
                )
            }),
            "W2" => {
                let strategy = WatermarkStrategy::for_bounded_out_of_orderness(
                    Duration::from_millis(a.wait_ms),
                )
                .with_timestamp_assigner(|b: &Bid, _| {
                    parse_timestamp_ms(&b.date_time).expect("a bid's dateTime")
                });
                bids.assign_timestamps_and_watermarks(strategy)
                    .key_by(|b: &Bid| b.auction)
                    .window(SlidingEventTimeWindows::of(
                        Duration::from_millis(SIZE_MS as u64),
                        Duration::from_millis(SLIDE_MS as u64),
                    ))
                    .aggregate_with(Count, |&auction, w, count, out| {
                        out.push(AuctionCount {
                            start: w.window.start,
                            auction,
                            count,
                        })
                    })
                    .name("bids per auction and window")
                    .key_by(|c: &AuctionCount| c.start)
                    .window(TumblingEventTimeWindows::of(Duration::from_millis(
                        SLIDE_MS as u64,
                    )))
                    .aggregate_with(TopAndPairs, |&start, _, (top, pairs), out| {
                        out.extend(pairs.into_iter().filter(|&(_, n)| n == top).map(
                            |(auction, n)| format!("{start}\t{}\t{auction}\t{n}", start + SIZE_MS),
                        ))
                    })
                    .name("per window")
            }
            _ => {
                let sep = a.sep.clone();
                bids.flat_map(move |b: Bid| {
                    b.extra
                        .split(sep.as_str())
                        .filter(|w| !w.is_empty())
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .key_by(|w: &String| w.clone())
                .full_window_partition()
                .aggregate_with(Count, |w: &String, n, out: &mut Vec<String>| {
                    out.push(format!("{w}\t{n}"))
                })
            }
        };
    let encoder = Arc::new(|row: &String, out: &mut Vec<u8>| {
        out.extend_from_slice(row.as_bytes());
        out.push(b'\n');
    });
    rows.sink_to(FileSink::with_encoder(
        format!("{}.parts", a.out),
        "",
        encoder,
    ));
}

/// This process's CPU time (user and system) in seconds, from `/proc/self/stat` (in the
/// kernel's fixed `USER_HZ` of 100 ticks a second).
fn cpu_s() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // The fields after the command's closing parenthesis: state is the first,
            // utime the 12th and stime the 13th.
            let fields: Vec<&str> = s.rsplit_once(')')?.1.split_whitespace().collect();
            Some(fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?)
        })
        .map_or(0.0, |ticks| ticks / 100.0)
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The lines of a file, read in 1 MiB chunks.
fn count_lines(path: &str) -> std::io::Result<usize> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut chunk = vec![0u8; 1 << 20];
    let mut n = 0;
    loop {
        match file.read(&mut chunk)? {
            0 => return Ok(n),
            k => n += chunk[..k].iter().filter(|&&b| b == b'\n').count(),
        }
    }
}

/// Concatenates the part files into `out` (as the Python script and `py_workloads.py` do);
/// returns the number of rows.
fn gather(out: &str) -> std::io::Result<usize> {
    let parts = format!("{out}.parts");
    let mut names: Vec<_> = std::fs::read_dir(&parts)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    names.sort();
    let mut file = std::io::BufWriter::new(std::fs::File::create(out)?);
    let mut rows = 0;
    for name in names {
        let bytes = std::fs::read(name)?;
        rows += bytes.iter().filter(|&&b| b == b'\n').count();
        file.write_all(&bytes)?;
    }
    file.flush()?;
    std::fs::remove_dir_all(&parts)?;
    Ok(rows)
}

fn main() {
    let a = args().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    // Outside the timed run, as `anchors.py` does (which also warms the page cache).
    let events = count_lines(&a.input).unwrap_or_else(|e| {
        eprintln!("error: {}: {e}", a.input);
        std::process::exit(2)
    });
    let _ = std::fs::remove_dir_all(format!("{}.parts", a.out));
    let mut config = JobConfig::local(a.workers);
    config.rest = None; // as `env.set_rest(False)` in `anchors.py`
    let env = StreamEnv::new(config);
    let (t0, c0) = (Instant::now(), cpu_s());
    build(&a, &env);
    if let Err(e) = env.execute(&format!("anchors {}", a.workload)) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    let (wall, cpu) = (t0.elapsed().as_secs_f64(), cpu_s() - c0);
    let rows = gather(&a.out).unwrap_or_else(|e| {
        eprintln!("error: {}: {e}", a.out);
        std::process::exit(1)
    });
    println!(
        "{}",
        serde_json::json!({
            "workload": a.workload, "engine": "spate-rust", "workers": a.workers,
            "input": a.input, "events": events, "wall_s": (wall * 1000.0).round() / 1000.0,
            "events_per_s": (events as f64 / wall).round(),
            "cpu_s": (cpu * 100.0).round() / 100.0,
            "events_per_cpu_s": (events as f64 / cpu).round(),
            "peak_rss_mb": (peak_rss_mb() * 10.0).round() / 10.0, "rows": rows,
        })
    );
}
