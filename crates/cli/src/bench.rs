//! `spate bench`: whole-job benchmarks that print one JSON line per measurement.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use spate_connectors::SequenceSource;
use spate_dataflow::{JobConfig, StreamEnv};
use spate_nexmark::queries::Query;
use spate_types::{Sink, SinkContext, SinkWriter, SpateResult};

use crate::util::peak_rss_mb;

/// Benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Nexmark queries, each in its own process (so peak memory is per query).
    Nexmark(NexmarkBenchArgs),
    /// Flow control: an unbounded generator into a deliberately slow sink.
    Backpressure(BackpressureArgs),
}

/// `spate bench nexmark`.
#[derive(Debug, Args)]
pub struct NexmarkBenchArgs {
    /// Comma-separated queries (q0 to q22 but q6), or `all`.
    #[arg(long, default_value = "q0,q1,q2,q3", alias = "query")]
    pub queries: String,
    /// Generated events per run (without --input).
    #[arg(long, default_value_t = 10_000_000)]
    pub events: u64,
    /// Read this JSON-lines file instead of generating.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Processes.
    #[arg(long, default_value_t = 1)]
    pub processes: usize,
    /// Runs per query.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Also run each query with checkpoints under this directory (a fresh subdirectory per
    /// run, never deleted), right after the run without: the steady-state cost of
    /// checkpointing.
    #[arg(long)]
    pub checkpoint_dir: Option<PathBuf>,
    /// How often to checkpoint with --checkpoint-dir, such as `1s`.
    #[arg(long, default_value = "1s")]
    pub checkpoint_interval: String,
}

/// `spate bench backpressure`.
#[derive(Debug, Args)]
pub struct BackpressureArgs {
    /// The sink's rate, records per second.
    #[arg(long, default_value_t = 200_000)]
    pub sink_rate: u64,
    /// How long to run.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
}

/// Runs a `spate bench` command.
pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Nexmark(args) => nexmark(&args),
        BenchCommand::Backpressure(args) => backpressure(&args),
    }
}

fn nexmark(args: &NexmarkBenchArgs) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the spate executable")?;
    let queries: Vec<Query> = if args.queries.trim() == "all" {
        Query::ALL.to_vec()
    } else {
        args.queries
            .split(',')
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .map(str::parse)
            .collect::<Result<_, _>>()?
    };
    let mut runs = 0;
    for query in queries {
        let query = query.name();
        for _ in 0..args.repeat {
            let checkpointed = args.checkpoint_dir.iter().map(Some);
            for checkpoint_dir in std::iter::once(None).chain(checkpointed) {
                runs += 1;
                let mut cmd = Command::new(&exe);
                cmd.args([
                    "nexmark",
                    "run",
                    "--json",
                    "--no-progress",
                    "--query",
                    query,
                ])
                .args(["--workers", &args.workers.to_string()])
                .args(["--processes", &args.processes.to_string()]);
                match &args.input {
                    Some(input) => cmd.arg("--input").arg(input),
                    None => cmd.args(["--events", &args.events.to_string()]),
                };
                if let Some(dir) = checkpoint_dir {
                    let run = format!("{query}-{}-{runs}", std::process::id());
                    cmd.arg("--checkpoint-dir")
                        .arg(dir.join(run))
                        .args(["--checkpoint-interval", &args.checkpoint_interval]);
                }
                let out = cmd.output().context("cannot run spate nexmark run")?;
                if !out.status.success() {
                    bail!("{query}: {}", String::from_utf8_lossy(&out.stderr).trim());
                }
                let stdout = String::from_utf8_lossy(&out.stdout);
                match stdout.lines().rev().find(|l| l.starts_with('{')) {
                    Some(line) => println!("{line}"),
                    None => bail!("{query}: no result line"),
                }
            }
        }
    }
    Ok(())
}

/// A sink that accepts `rate` records per second per worker, sleeping to keep that pace.
struct SlowSink {
    rate_per_worker: f64,
    received: Arc<AtomicU64>,
}

struct SlowWriter {
    rate: f64,
    start: Option<Instant>,
    count: u64,
    received: Arc<AtomicU64>,
}

impl Sink<u64> for SlowSink {
    fn name(&self) -> String {
        "slow".into()
    }
    fn create_writer(&self, _ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<u64>>> {
        Ok(Box::new(SlowWriter {
            rate: self.rate_per_worker,
            start: None,
            count: 0,
            received: Arc::clone(&self.received),
        }))
    }
}

impl SinkWriter<u64> for SlowWriter {
    fn write_batch(&mut self, records: &mut Vec<u64>) -> SpateResult<()> {
        let start = *self.start.get_or_insert_with(Instant::now);
        self.count += records.len() as u64;
        self.received
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        records.clear();
        let due = Duration::from_secs_f64(self.count as f64 / self.rate);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        Ok(())
    }
    fn close(&mut self) -> SpateResult<()> {
        Ok(())
    }
}

fn backpressure(args: &BackpressureArgs) -> Result<()> {
    if args.sink_rate == 0 || args.seconds <= 0.0 {
        bail!("--sink-rate and --seconds must be positive");
    }
    let env = StreamEnv::new(JobConfig::local(args.workers));
    let received = Arc::new(AtomicU64::new(0));
    env.from_source(SequenceSource::new(0, None))
        .name("sequence")
        .sink_to(SlowSink {
            rate_per_worker: args.sink_rate as f64 / args.workers as f64,
            received: Arc::clone(&received),
        })
        .name("slow-sink");
    let stop = env.stop_handle();
    let seconds = args.seconds;
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.stop();
    });
    let result = env.execute("backpressure")?;
    let emitted = result
        .totals
        .get("sequence.numRecordsOut")
        .copied()
        .unwrap_or(0);
    let sunk = received.load(Ordering::Relaxed);
    let secs = result.elapsed.as_secs_f64();
    let line = serde_json::json!({
        "bench": "backpressure",
        "workers": args.workers,
        "sink_rate": args.sink_rate,
        "seconds": (secs * 1000.0).round() / 1000.0,
        "source_emitted": emitted,
        "sink_received": sunk,
        "events_per_s": (sunk as f64 / secs).round(),
        "rate_ratio": ((sunk as f64 / secs) / args.sink_rate as f64 * 1000.0).round() / 1000.0,
        "peak_rss_mb": peak_rss_mb().map(|r| (r * 10.0).round() / 10.0),
    });
    println!("{line}");
    Ok(())
}
