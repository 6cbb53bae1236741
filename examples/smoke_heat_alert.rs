//! Smoke and heat in a forest area, over sliding event-time windows.
//!
//! ```text
//! cargo run --release --example smoke_heat_alert
//! cargo run --release --example smoke_heat_alert -- --rounds 8640 --workers 2 --output fires.jsonl
//! cargo run --release --example smoke_heat_alert -- --window-secs 300 --slide-secs 60 --max-temp 25
//! ```
//!
//! Reads the forest-sensor generator (1000 sensors, one reading each every 5 s of event time,
//! sensor `id` in area `id / 50`, so 20 areas) for `--rounds` readings per sensor (default 720:
//! one hour of event time). Per area, over 1-minute windows that start every 10 s
//! (`--window-secs`, `--slide-secs`), an incremental aggregate keeps one accumulator per area
//! and window (readings, smoke readings, temperature sum, hottest reading and its sensor). A
//! window alerts when it saw smoke and a reading above `--max-temp` °C (default 26); each
//! alert is a JSON line:
//!
//! ```text
//! {"area":16,"window_start_ms":1704067360000,"window_end_ms":1704067420000,"readings":600,
//!  "smoke_readings":1,"max_temperature":26.2,"hottest_sensor":816,"avg_temperature":19.91}
//! ```
//!
//! Event time comes from each reading's timestamp, with watermarks `--out-of-orderness-secs`
//! (default 5) behind the latest reading. The input is bounded, so its end fires the last
//! windows, as in Flink. `--output PATH` writes the alerts into one JSON-lines file instead of
//! stdout; `--seed`, `--sensors` and `--rate` (readings per second of wall-clock time) shape
//! the input; `--workers` and `--processes` the job. The alerts do not depend on the number of
//! workers or processes. The pipeline is [`sensors::smoke_heat_alerts`].

use std::time::Duration;

use spate::prelude::*;
#[allow(dead_code)] // each example uses part of the shared pipelines
mod sensors;

use sensors::{smoke_heat_alerts, SmokeHeatConfig};

const USAGE: &str = "usage: smoke_heat_alert [--rounds N] [--max-temp DEGREES] [--window-secs N] \
                     [--slide-secs N] [--out-of-orderness-secs N] [--seed N] [--sensors N] \
                     [--rate READINGS_PER_SEC] [--output PATH] [--workers N] [--processes N]";

fn main() {
    let mut args = std::env::args().skip(1);
    let mut config = JobConfig::local(1);
    let mut alert = SmokeHeatConfig::default();
    let (mut rounds, mut seed, mut sensors) = (720u64, 1u64, 1000u32);
    let (mut rate, mut output) = (None::<f64>, None::<String>);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next().unwrap_or_else(|| {
                eprintln!("error: {arg} needs a value\n{USAGE}");
                std::process::exit(2);
            })
        };
        match arg.as_str() {
            "--rounds" => rounds = parse(&arg, &value()),
            "--max-temp" => alert.max_temperature = parse(&arg, &value()),
            "--window-secs" => alert.window = Duration::from_secs(parse(&arg, &value())),
            "--slide-secs" => alert.slide = Duration::from_secs(parse(&arg, &value())),
            "--out-of-orderness-secs" => {
                alert.out_of_orderness = Duration::from_secs(parse(&arg, &value()))
            }
            "--seed" => seed = parse(&arg, &value()),
            "--sensors" => sensors = parse(&arg, &value()),
            "--rate" => rate = Some(parse(&arg, &value())),
            "--output" => output = Some(value()),
            "--workers" => config.workers = parse(&arg, &value()),
            "--processes" => config.processes = parse(&arg, &value()),
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            _ => {
                eprintln!("error: unexpected argument {arg}\n{USAGE}");
                std::process::exit(2);
            }
        }
    }
    if alert.window.is_zero() || alert.slide.is_zero() {
        eprintln!("error: --window-secs and --slide-secs must be positive\n{USAGE}");
        std::process::exit(2);
    }

    let env = StreamEnv::new(config);
    let mut source = SensorSource::new(seed).sensors(sensors).rounds(rounds);
    if let Some(rate) = rate {
        source = source.rate(rate);
    }
    let readings = env.from_source(source);
    let alerts = smoke_heat_alerts(&readings, &alert);
    match output {
        Some(path) => alerts.sink_to_single(SingleFileSink::new(path)),
        None => alerts.print(),
    };
    match env.execute("smoke and heat alert") {
        Ok(result) if result.is_reporter() => eprintln!(
            "smoke_heat_alert: {} readings in {:.2} s",
            result.total_of(".numRecordsOut"),
            result.elapsed.as_secs_f64()
        ),
        Ok(_) => {}
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

fn parse<T: std::str::FromStr>(flag: &str, value: &str) -> T {
    value.parse().unwrap_or_else(|_| {
        eprintln!("error: {flag}: invalid value {value:?}\n{USAGE}");
        std::process::exit(2);
    })
}
