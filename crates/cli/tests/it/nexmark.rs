//! Nexmark through the CLI: Flink's expected outputs, and the same rows on any number of
//! workers and processes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::{ok, shared, spate};

/// The seed7-20k input of `shared/nexmark/expected`, written by `spate nexmark gen`.
fn seed7_input(dir: &Path) -> std::path::PathBuf {
    let input = dir.join("in.jsonl");
    ok(spate()
        .args([
            "nexmark",
            "gen",
            "--events",
            "20000",
            "--seed",
            "7",
            "--event-rate",
            "200",
            "--out",
        ])
        .arg(&input));
    input
}

/// `nexmark_canon.py --compare` exit status and report.
fn compare(out: &Path, expected: &Path) -> (bool, String) {
    let result = Command::new("python3")
        .arg(shared().join("anchors/nexmark_canon.py"))
        .arg("--compare")
        .arg(out)
        .arg(expected)
        .output()
        .expect("python3 runs the canonical comparison");
    (
        result.status.success(),
        String::from_utf8_lossy(&result.stdout).into_owned(),
    )
}

fn run_query(query: &str, input: &Path, output: &Path, workers: &str, processes: &str) {
    ok(spate()
        .args([
            "nexmark",
            "run",
            "--no-progress",
            "--query",
            query,
            "--workers",
            workers,
            "--processes",
            processes,
        ])
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(output));
}

#[test]
fn generator_is_byte_identical_to_the_reference_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = seed7_input(dir.path());
    let sha = Command::new("sha256sum")
        .arg(&input)
        .output()
        .expect("sha256sum runs");
    let expected =
        std::fs::read_to_string(shared().join("nexmark/expected/seed7-20k/input.sha256")).unwrap();
    let got = String::from_utf8_lossy(&sha.stdout);
    assert_eq!(
        got.split_whitespace().next(),
        expected.split_whitespace().next()
    );
}

/// The queries with Flink's results in `shared/nexmark/expected/seed7-20k`.
const WITH_FLINK_RESULTS: [&str; 11] = [
    "q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q9", "q11", "q14",
];

#[test]
fn queries_match_flink_on_one_and_several_workers() {
    let dir = tempfile::tempdir().unwrap();
    let input = seed7_input(dir.path());
    for query in WITH_FLINK_RESULTS {
        let expected = shared().join(format!("nexmark/expected/seed7-20k/{query}.canon"));
        for workers in ["1", "3"] {
            let out = dir.path().join(format!("{query}-{workers}.out"));
            run_query(query, &input, &out, workers, "1");
            let (same, report) = compare(&out, &expected);
            assert!(
                same,
                "{query} on {workers} workers differs from Flink: {report}"
            );
        }
    }
}

#[test]
fn multi_process_runs_equal_single_worker_runs() {
    let dir = tempfile::tempdir().unwrap();
    let input = seed7_input(dir.path());
    for query in ["q1", "q3", "q5", "q7"] {
        let single = dir.path().join(format!("{query}-single.out"));
        let multi = dir.path().join(format!("{query}-multi.out"));
        run_query(query, &input, &single, "1", "1");
        run_query(query, &input, &multi, "2", "2");
        let (same, report) = compare(&multi, &single);
        assert!(
            same,
            "{query} on 2 processes differs from 1 worker: {report}"
        );
    }
}

#[test]
fn generated_runs_do_not_depend_on_workers_or_processes() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, workers: &str, processes: &str| {
        let out = dir.path().join(name);
        ok(spate()
            .args([
                "nexmark",
                "run",
                "--no-progress",
                "--query",
                "q3",
                "--events",
                "200000",
            ])
            .args([
                "--partitions",
                "4",
                "--workers",
                workers,
                "--processes",
                processes,
                "--output",
            ])
            .arg(&out));
        out
    };
    let one = run("one.out", "1", "1");
    let four = run("four.out", "4", "1");
    let two_by_two = run("two-by-two.out", "2", "2");
    assert!(std::fs::metadata(&one).unwrap().len() > 0);
    let (same, report) = compare(&four, &one);
    assert!(same, "4 workers differ from 1: {report}");
    let (same, report) = compare(&two_by_two, &one);
    assert!(
        same,
        "2 processes × 2 workers differ from 1 worker: {report}"
    );
}

/// The queries checked against [`oracle`] (Flink's results for them are not in `shared`;
/// they were equal to Flink 2.3's, run with the same SQL, when written).
const WITH_ORACLE: [&str; 10] = [
    "q10", "q13", "q15", "q16", "q17", "q18", "q19", "q20", "q21", "q22",
];

#[test]
fn queries_match_a_naive_oracle_on_one_and_several_workers() {
    let dir = tempfile::tempdir().unwrap();
    let input = seed7_input(dir.path());
    let events = read_events(&input);
    for query in WITH_ORACLE {
        let expected = dir.path().join(format!("{query}.oracle"));
        let rows: Vec<String> = oracle(query, &events)
            .iter()
            .map(|r| format!("{r}\n"))
            .collect();
        assert!(!rows.is_empty(), "{query}: the oracle has no rows");
        std::fs::write(&expected, rows.concat()).unwrap();
        for workers in ["1", "3"] {
            let out = dir.path().join(format!("{query}-{workers}.out"));
            run_query(query, &input, &out, workers, "1");
            let (same, report) = compare(&out, &expected);
            assert!(
                same,
                "{query} on {workers} workers differs from the oracle: {report}"
            );
        }
    }
}

#[test]
fn processing_time_windows_count_every_bid_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = seed7_input(dir.path());
    let mut bids_per_bidder: HashMap<i64, i64> = HashMap::new();
    for (kind, body) in read_events(&input) {
        if kind == 2 {
            *bids_per_bidder.entry(int(&body, "bidder")).or_default() += 1;
        }
    }
    for workers in ["1", "3"] {
        let out = dir.path().join(format!("q12-{workers}.out"));
        run_query("q12", &input, &out, workers, "1");
        let mut counted: HashMap<i64, i64> = HashMap::new();
        let mut windows = BTreeSet::new();
        for line in std::fs::read_to_string(&out).unwrap().lines() {
            let row: Vec<Value> = serde_json::from_str(line).unwrap();
            let (start, end) = (row[2].as_str().unwrap(), row[3].as_str().unwrap());
            // 10 s tumbling windows: `..:.0:00.000` to `..:.0:10.000` and so on.
            assert!(start.ends_with("0.000") && end.ends_with("0.000"), "{line}");
            assert!(
                windows.insert((row[0].as_i64().unwrap(), start.to_owned())),
                "{line}"
            );
            *counted.entry(row[0].as_i64().unwrap()).or_default() += row[1].as_i64().unwrap();
        }
        assert_eq!(counted, bids_per_bidder, "q12 on {workers} workers");
    }
}

/// The events of a JSON-lines file as (event_type, body).
fn read_events(path: &Path) -> Vec<(u64, Value)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let mut v: Value = serde_json::from_str(line).unwrap();
            let kind = v["event_type"].as_u64().unwrap();
            let field = ["person", "auction", "bid"][kind as usize];
            (kind, v[field].take())
        })
        .collect()
}

fn int(v: &Value, field: &str) -> i64 {
    v[field].as_i64().unwrap()
}

fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field].as_str().unwrap()
}

/// Counts per price range (total, < 10,000, < 1,000,000, more) of bids, distinct bidders and
/// distinct auctions.
#[derive(Default)]
struct Stats {
    bids: [i64; 4],
    bidders: [BTreeSet<i64>; 4],
    auctions: [BTreeSet<i64>; 4],
}

impl Stats {
    fn add(&mut self, bid: &Value) {
        let price = int(bid, "price");
        let range = if price < 10_000 {
            1
        } else if price < 1_000_000 {
            2
        } else {
            3
        };
        for i in [0, range] {
            self.bids[i] += 1;
            self.bidders[i].insert(int(bid, "bidder"));
            self.auctions[i].insert(int(bid, "auction"));
        }
    }

    fn columns(&self) -> Vec<Value> {
        let mut c: Vec<Value> = self.bids.iter().map(|&n| json!(n)).collect();
        c.extend(self.bidders.iter().map(|s| json!(s.len())));
        c.extend(self.auctions.iter().map(|s| json!(s.len())));
        c
    }
}

/// The final rows of `query` over `events`, computed naively from the SQL definitions in the
/// Nexmark suite (timestamps stay the input's strings, which order as the times do).
fn oracle(query: &str, events: &[(u64, Value)]) -> Vec<Value> {
    let bids: Vec<&Value> = events
        .iter()
        .filter(|(kind, _)| *kind == 2)
        .map(|(_, b)| b)
        .collect();
    let day = |b: &Value| text(b, "dateTime")[..10].to_owned();
    let mut rows = Vec::new();
    match query {
        "q10" => {
            for b in &bids {
                let t = text(b, "dateTime");
                rows.push(json!([
                    b["auction"],
                    b["bidder"],
                    b["price"],
                    t,
                    b["extra"],
                    &t[..10],
                    &t[11..16]
                ]));
            }
        }
        "q13" => {
            for b in &bids {
                let key = int(b, "auction") % 10_000;
                rows.push(json!([
                    b["auction"],
                    b["bidder"],
                    b["price"],
                    b["dateTime"],
                    key.to_string()
                ]));
            }
        }
        "q15" => {
            let mut per_day: BTreeMap<String, Stats> = BTreeMap::new();
            for b in &bids {
                per_day.entry(day(b)).or_default().add(b);
            }
            for (d, stats) in per_day {
                let mut row = vec![json!(d)];
                row.extend(stats.columns());
                rows.push(Value::Array(row));
            }
        }
        "q16" => {
            let mut groups: BTreeMap<(String, String), (Stats, String)> = BTreeMap::new();
            for b in &bids {
                let key = (text(b, "channel").to_owned(), day(b));
                let (stats, minute) = groups.entry(key).or_default();
                stats.add(b);
                let m = &text(b, "dateTime")[11..16];
                if m > minute.as_str() {
                    *minute = m.to_owned();
                }
            }
            for ((channel, d), (stats, minute)) in groups {
                let mut row = vec![json!(channel), json!(d), json!(minute)];
                row.extend(stats.columns());
                rows.push(Value::Array(row));
            }
        }
        "q17" => {
            let mut groups: BTreeMap<(i64, String), Vec<i64>> = BTreeMap::new();
            for b in &bids {
                groups
                    .entry((int(b, "auction"), day(b)))
                    .or_default()
                    .push(int(b, "price"));
            }
            for ((auction, d), prices) in groups {
                let n = prices.len() as i64;
                let count = |f: &dyn Fn(i64) -> bool| prices.iter().filter(|&&p| f(p)).count();
                let sum: i64 = prices.iter().sum();
                rows.push(json!([
                    auction,
                    d,
                    n,
                    count(&|p| p < 10_000),
                    count(&|p| (10_000..1_000_000).contains(&p)),
                    count(&|p| p >= 1_000_000),
                    prices.iter().min(),
                    prices.iter().max(),
                    sum / n,
                    sum
                ]));
            }
        }
        "q18" => {
            let mut last: HashMap<(i64, i64), &Value> = HashMap::new();
            for b in &bids {
                let key = (int(b, "bidder"), int(b, "auction"));
                match last.get(&key) {
                    Some(l) if text(l, "dateTime") > text(b, "dateTime") => {}
                    _ => {
                        last.insert(key, b);
                    }
                }
            }
            for b in last.values() {
                rows.push(json!([
                    b["auction"],
                    b["bidder"],
                    b["price"],
                    b["channel"],
                    b["url"],
                    b["dateTime"],
                    b["extra"]
                ]));
            }
        }
        "q19" => {
            let mut per_auction: HashMap<i64, Vec<&Value>> = HashMap::new();
            for b in &bids {
                per_auction.entry(int(b, "auction")).or_default().push(b);
            }
            for mut list in per_auction.into_values() {
                // Highest price first; a stable sort keeps equal prices in input order.
                list.sort_by_key(|b| std::cmp::Reverse(int(b, "price")));
                for (rank, b) in list.iter().take(10).enumerate() {
                    rows.push(json!([
                        b["auction"],
                        b["bidder"],
                        b["price"],
                        b["channel"],
                        b["url"],
                        b["dateTime"],
                        b["extra"],
                        rank + 1
                    ]));
                }
            }
        }
        "q20" => {
            let auctions: HashMap<i64, &Value> = events
                .iter()
                .filter(|(kind, a)| *kind == 1 && int(a, "category") == 10)
                .map(|(_, a)| (int(a, "id"), a))
                .collect();
            for b in &bids {
                if let Some(a) = auctions.get(&int(b, "auction")) {
                    rows.push(json!([
                        b["auction"],
                        b["bidder"],
                        b["price"],
                        b["channel"],
                        b["url"],
                        b["dateTime"],
                        b["extra"],
                        a["itemName"],
                        a["description"],
                        a["initialBid"],
                        a["reserve"],
                        a["dateTime"],
                        a["expires"],
                        a["seller"],
                        a["category"],
                        a["extra"]
                    ]));
                }
            }
        }
        "q21" => {
            let names = ["apple", "google", "facebook", "baidu"];
            for b in &bids {
                let channel = text(b, "channel");
                let url = text(b, "url");
                // REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2): the first `&`-separated
                // part (the first one starts the url) that starts with `channel_id=`.
                let from_url = url
                    .split('&')
                    .find_map(|part| part.strip_prefix("channel_id="));
                let id = match names.iter().position(|n| channel.to_lowercase() == *n) {
                    Some(i) => Some(i.to_string()),
                    None => from_url.map(str::to_owned),
                };
                if let Some(id) = id {
                    rows.push(json!([b["auction"], b["bidder"], b["price"], channel, id]));
                }
            }
        }
        "q22" => {
            for b in &bids {
                let parts: Vec<&str> = text(b, "url").split('/').collect();
                let dir = |i: usize| parts.get(i).copied();
                rows.push(json!([
                    b["auction"],
                    b["bidder"],
                    b["price"],
                    b["channel"],
                    dir(3),
                    dir(4),
                    dir(5)
                ]));
            }
        }
        _ => panic!("no oracle for {query}"),
    }
    rows
}

/// A bid event of the Nexmark JSON form at `time` (`HH:MM:SS.mmm` on 2024-01-01).
fn bid_event(auction: i64, bidder: i64, price: i64, time: &str) -> String {
    let bid = json!({
        "auction": auction, "bidder": bidder, "price": price, "channel": "Google",
        "url": "https://www.nexmark.com/a/b/c/item.htm?query=1",
        "dateTime": format!("2024-01-01 {time}"), "extra": format!("bid-{auction}-{price}"),
    });
    json!({"event_type": 2, "person": null, "auction": null, "bid": bid}).to_string()
}

#[test]
fn q7_takes_a_bid_at_a_window_end_into_both_windows() {
    // q7 joins each window's maximum with the bids in [end - 10 s, end], both ends included:
    // a bid at exactly 00:00:10.000 belongs to the second window and may also be the first
    // window's maximum, even when its key had no bid in the first window.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("edges.jsonl");
    let events = [
        bid_event(1000, 2000, 500, "00:00:01.000"),
        bid_event(1001, 2001, 500, "00:00:10.000"),
        bid_event(1002, 2002, 700, "00:00:12.000"),
        bid_event(1003, 2003, 300, "00:00:20.000"),
        bid_event(1004, 2004, 300, "00:00:30.000"),
        bid_event(1005, 2005, 100, "00:00:39.999"),
    ];
    std::fs::write(&input, events.join("\n") + "\n").unwrap();
    let expected = dir.path().join("q7.expected");
    ok(Command::new("python3")
        .arg(shared().join("anchors/nexmark_ref.py"))
        .args(["--query", "q7", "--input"])
        .arg(&input)
        .arg("-o")
        .arg(&expected));
    let rows = std::fs::read_to_string(&expected).unwrap();
    assert_eq!(rows.lines().count(), 6, "the reference's rows: {rows}");
    for workers in ["1", "3"] {
        let out = dir.path().join(format!("q7-{workers}.out"));
        run_query("q7", &input, &out, workers, "1");
        let (same, report) = compare(&out, &expected);
        assert!(
            same,
            "q7 on {workers} workers differs from the reference: {report}"
        );
    }
}
