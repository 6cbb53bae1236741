//! Temperature jumps in the forest: Flink's classic `TemperatureAlertFunction(1.7)`.
//!
//! ```text
//! cargo run --release --example temperature_alert
//! cargo run --release --example temperature_alert -- --rounds 8640 --workers 2 --output alerts.jsonl
//! cargo run --release --example temperature_alert -- --rounds 120 --rate 1000   # 1000 readings/s
//! ```
//!
//! Reads the forest-sensor generator (1000 sensors, one reading each every 5 s of event time)
//! for `--rounds` readings per sensor (default 720: one hour of event time), keys it by sensor,
//! keeps each sensor's last temperature in keyed state, and prints an alert, as a JSON line,
//! whenever a reading differs from the sensor's previous one by more than `--threshold` °C
//! (default 1.7):
//!
//! ```text
//! {"sensor_id":652,"timestamp_ms":1704067210000,"last_temperature":19.97,"temperature":24.57}
//! ```
//!
//! `--output PATH` writes the alerts into one JSON-lines file instead of stdout. `--seed`,
//! `--sensors` and `--rate` (readings per second of wall-clock time; default: as fast as
//! possible) shape the input; `--workers` and `--processes` the job. A summary goes to stderr.
//! The pipeline is [`sensors::temperature_alerts`].
//!
//! As in Flink, "previous" is the previous reading to arrive. Each sensor is read by one
//! worker, round by round, so with per-channel order (Flink's guarantee) the alerts do not
//! depend on the number of workers (`tests/it/sensors.rs` checks this with large epochs).

use spate::prelude::*;
#[allow(dead_code)] // each example uses part of the shared pipelines
mod sensors;

use sensors::{temperature_alerts, DEFAULT_JUMP_THRESHOLD};

const USAGE: &str = "usage: temperature_alert [--rounds N] [--threshold DEGREES] [--seed N] \
                     [--sensors N] [--rate READINGS_PER_SEC] [--output PATH] [--workers N] \
                     [--processes N] [--epoch-records N]";

fn main() {
    let mut args = std::env::args().skip(1);
    let mut config = JobConfig::local(1);
    let (mut rounds, mut seed, mut sensors) = (720u64, 1u64, 1000u32);
    let mut threshold = DEFAULT_JUMP_THRESHOLD;
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
            "--threshold" => threshold = parse(&arg, &value()),
            "--seed" => seed = parse(&arg, &value()),
            "--sensors" => sensors = parse(&arg, &value()),
            "--rate" => rate = Some(parse(&arg, &value())),
            "--output" => output = Some(value()),
            "--workers" => config.workers = parse(&arg, &value()),
            "--processes" => config.processes = parse(&arg, &value()),
            "--epoch-records" => config.epoch_max_records = parse(&arg, &value()),
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

    let env = StreamEnv::new(config);
    let mut source = SensorSource::new(seed).sensors(sensors).rounds(rounds);
    if let Some(rate) = rate {
        source = source.rate(rate);
    }
    let readings = env.from_source(source);
    let alerts = temperature_alerts(&readings, threshold);
    match output {
        Some(path) => alerts.sink_to_single(SingleFileSink::new(path)),
        None => alerts.print(),
    };
    match env.execute("temperature alert") {
        Ok(result) if result.is_reporter() => eprintln!(
            "temperature_alert: {} readings in {:.2} s",
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
