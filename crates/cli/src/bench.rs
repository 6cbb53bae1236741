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
    /// End-to-end latency at a fixed input rate, from event creation to sink output, with and
    /// without checkpoints.
    Latency(LatencyArgs),
    /// Kafka: a topic read into a discarding sink, or generated records written to a topic
    /// (at least once, or exactly once with checkpoints); `scripts/bench-kafka` runs Kafka's
    /// own producer and consumer tools beside it.
    Kafka(KafkaBenchArgs),
    /// Autoscaling: a rate stepped up and down under DS2 and under a threshold controller
    /// (decisions per step, time to a stable rate, oscillations, latency, exactness).
    Autoscale(crate::bench_elastic::AutoscaleBenchArgs),
    /// Load shedding: a fixed worker count at loads below and above its capacity, shedding
    /// or backpressured (latency, shed fraction against the minimum, backlog, utility kept).
    Shedding(crate::bench_elastic::SheddingBenchArgs),
}

/// `spate bench kafka`.
#[derive(Debug, Args)]
pub struct KafkaBenchArgs {
    /// `source` (read --topic to its end), `sink` (write --records to --topic), or `e2e`
    /// (records written at --rate for --seconds to `TOPIC-in`, copied by a job to `TOPIC-out`
    /// with --delivery, read back by a `read_committed` consumer: latency from each record's
    /// creation to its visibility in the output).
    #[arg(long)]
    pub mode: String,
    /// The bootstrap servers.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// The topic.
    #[arg(long)]
    pub topic: String,
    /// Records to write (sink).
    #[arg(long, default_value_t = 5_000_000)]
    pub records: u64,
    /// Bytes per record value (sink).
    #[arg(long, default_value_t = 100)]
    pub record_size: usize,
    /// `none`, `at-least-once` or `exactly-once` (sink).
    #[arg(long, default_value = "at-least-once")]
    pub delivery: String,
    /// Checkpoint interval (exactly once needs checkpoints; at least once runs without).
    #[arg(long, default_value = "1s")]
    pub checkpoint_interval: String,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Records per second written to the input topic (e2e).
    #[arg(long, default_value_t = 50_000)]
    pub rate: u64,
    /// How long records are written (e2e); the first 5 s are a warm-up outside the figures.
    #[arg(long, default_value_t = 30)]
    pub seconds: u64,
    /// Partitions of the topics the benchmark creates (e2e).
    #[arg(long, default_value_t = 4)]
    pub partitions: i32,
    /// A librdkafka property for the source's consumer or the sink's producer, `NAME=VALUE`
    /// (repeatable).
    #[arg(long = "property")]
    pub properties: Vec<String>,
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
    /// Which front runs each query: `rust` (the DataStream pipelines of `spate nexmark
    /// run`), `sql` (the Nexmark suite's Flink SQL texts through `spate sql`, over --input),
    /// or `both`, one after the other in the same run.
    #[arg(long, default_value = "rust", value_parser = ["rust", "sql", "both"])]
    pub front: String,
    /// With `--front sql`: the folder of the suite's SQL texts (`qN.sql`, `ddl_views.sql`).
    #[arg(long, default_value = "../shared/nexmark/flink-sql")]
    pub sql_dir: PathBuf,
    /// With `--front sql` and --input: the script that defines the `datagen` table over
    /// `${INPUT}`.
    #[arg(long, default_value = "examples/sql/nexmark_file.sql")]
    pub sql_source: PathBuf,
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

/// `spate bench latency`.
#[derive(Debug, Args)]
pub struct LatencyArgs {
    /// Input rate, events per second for the whole job (default: half of the maximum,
    /// measured first for --probe-seconds).
    #[arg(long)]
    pub rate: Option<f64>,
    /// The fraction of the measured maximum to run at, without --rate.
    #[arg(long, default_value_t = 0.5)]
    pub load: f64,
    /// How long to measure the maximum rate, without --rate.
    #[arg(long, default_value_t = 5.0)]
    pub probe_seconds: f64,
    /// How long each paced run measures (after one second of warm-up).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Distinct keys of the keyed aggregation.
    #[arg(long, default_value_t = 10_000)]
    pub keys: u64,
    /// The checkpoint interval of the run with checkpoints (`none` to skip that run).
    #[arg(long, default_value = "1s")]
    pub checkpoint_interval: String,
    #[command(flatten)]
    pub rest: crate::rest::RestArgs,
}

/// Runs a `spate bench` command.
pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Nexmark(args) => nexmark(&args),
        BenchCommand::Backpressure(args) => backpressure(&args),
        BenchCommand::Latency(args) => latency::run(&args),
        BenchCommand::Kafka(args) => kafka(&args),
        BenchCommand::Autoscale(args) => crate::bench_elastic::autoscale(&args),
        BenchCommand::Shedding(args) => crate::bench_elastic::shedding(&args),
    }
}

fn kafka(args: &KafkaBenchArgs) -> Result<()> {
    use spate_connectors::kafka::{Delivery, Encoded, KafkaSink, KafkaSource};
    let mut config = JobConfig::local(args.workers);
    let delivery: Delivery = args.delivery.parse()?;
    let exactly_once = matches!(delivery, Delivery::ExactlyOnce { .. });
    let ckpt = tempfile_dir("spate-bench-kafka")?;
    if exactly_once {
        config.checkpoint_dir = Some(ckpt.display().to_string());
        config.checkpoint_interval = Some(
            crate::util::parse_duration(&args.checkpoint_interval).map_err(anyhow::Error::msg)?,
        );
    }
    let properties: Vec<(String, String)> = args
        .properties
        .iter()
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .with_context(|| format!("--property {p}: expected NAME=VALUE"))
        })
        .collect::<Result<_>>()?;
    if args.mode == "e2e" {
        let result = kafka_e2e::run(args, config, &properties);
        let _ = std::fs::remove_dir_all(&ckpt);
        return result;
    }
    let env = StreamEnv::new(config);
    match args.mode.as_str() {
        "source" => {
            let mut source =
                KafkaSource::<Vec<u8>>::bytes(&args.bootstrap, &[&args.topic]).bounded();
            for (k, v) in &properties {
                source = source.property(k.clone(), v.clone());
            }
            env.from_source(source)
                .name("kafka")
                .sink_to(spate_connectors::DiscardSink::new())
                .name("discard");
        }
        "sink" => {
            let size = args.record_size;
            let encoder = Arc::new(move |n: &u64, out: &mut Encoded| {
                // A payload of `size` bytes that differs per record, like the producer tool's.
                let digits = n.to_string();
                out.value.extend(digits.bytes().cycle().take(size));
                Ok(())
            });
            let mut sink = KafkaSink::with_encoder(&args.bootstrap, args.topic.clone(), encoder)
                .delivery(match delivery {
                    Delivery::ExactlyOnce { .. } => Delivery::ExactlyOnce {
                        prefix: format!("bench-{}-{}", args.topic, std::process::id()),
                    },
                    d => d,
                });
            for (k, v) in &properties {
                sink = sink.property(k.clone(), v.clone());
            }
            env.from_source(SequenceSource::new(0, Some(args.records)))
                .name("records")
                .sink_to(sink)
                .name("kafka");
        }
        other => bail!("--mode {other}: use source, sink or e2e"),
    }
    let started = Instant::now();
    let result = env.execute("bench-kafka")?;
    let secs = started.elapsed().as_secs_f64();
    let records = match args.mode.as_str() {
        "source" => result
            .metrics
            .get("kafka.numRecordsOut")
            .copied()
            .unwrap_or(0),
        _ => result
            .metrics
            .get("kafka.numRecordsIn")
            .copied()
            .unwrap_or(0),
    };
    let _ = std::fs::remove_dir_all(&ckpt);
    println!(
        "{}",
        serde_json::json!({
            "bench": "kafka",
            "mode": args.mode,
            "delivery": args.delivery,
            "records": records,
            "wall_s": (secs * 1000.0).round() / 1000.0,
            "records_per_s": (records as f64 / secs.max(1e-9)).round(),
            "workers": args.workers,
            "peak_rss_mb": peak_rss_mb().map(|r| (r * 10.0).round() / 10.0),
        })
    );
    Ok(())
}

mod kafka_e2e {
    //! `spate bench kafka --mode e2e`: end-to-end latency of a Kafka → job → Kafka copy. A
    //! producer thread writes records stamped with their creation time at a fixed rate; the
    //! job copies them with the chosen delivery; a `read_committed` consumer sees each output
    //! only once its transaction commits (exactly once: when the checkpoint that covers it
    //! completes), so the latency includes the checkpoint interval, as a reader's would.

    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    use anyhow::{Context, Result};
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
    use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
    use spate_connectors::kafka::admin::KafkaAdmin;
    use spate_connectors::kafka::{Delivery, Encoded, KafkaSink, KafkaSource};
    use spate_dataflow::{JobConfig, StreamEnv};
    use spate_metrics::Histogram;

    use super::KafkaBenchArgs;
    use crate::util::peak_rss_mb;

    const WARM_UP: Duration = Duration::from_secs(5);

    fn now_ns() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    }

    pub(super) fn run(
        args: &KafkaBenchArgs,
        config: JobConfig,
        properties: &[(String, String)],
    ) -> Result<()> {
        let delivery: Delivery = args.delivery.parse()?;
        let input = format!("{}-in", args.topic);
        let output = format!("{}-out", args.topic);
        let mut admin = KafkaAdmin::new(&args.bootstrap);
        admin.create_topic(&input, args.partitions, false)?;
        admin.create_topic(&output, args.partitions, false)?;

        let env = StreamEnv::new(config);
        let mut source = KafkaSource::<Vec<u8>>::bytes(&args.bootstrap, &[&input]);
        for (k, v) in properties {
            source = source.property(k.clone(), v.clone());
        }
        let encoder = Arc::new(|v: &Vec<u8>, out: &mut Encoded| {
            out.value.extend_from_slice(v);
            Ok(())
        });
        let sink = KafkaSink::with_encoder(&args.bootstrap, output.clone(), encoder).delivery(
            match delivery {
                Delivery::ExactlyOnce { .. } => Delivery::ExactlyOnce {
                    prefix: format!("bench-{}-{}", args.topic, std::process::id()),
                },
                d => d,
            },
        );
        env.from_source(source)
            .name("kafka-in")
            .sink_to(sink)
            .name("kafka-out");
        let stop = env.stop_handle();

        let total = args.rate * args.seconds;
        let produced = Arc::new(AtomicU64::new(0));
        let producing = Arc::new(AtomicBool::new(true));
        let producer = {
            let (bootstrap, topic, rate, size) = (
                args.bootstrap.clone(),
                input.clone(),
                args.rate,
                args.record_size,
            );
            let (produced, producing) = (Arc::clone(&produced), Arc::clone(&producing));
            std::thread::spawn(move || -> Result<()> {
                let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
                    .set("bootstrap.servers", &bootstrap)
                    .set("linger.ms", "5")
                    .set("acks", "all")
                    .create()
                    .context("creating the input producer")?;
                let start = Instant::now();
                let mut value = vec![b'x'; size.max(8)];
                for i in 0..total {
                    let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                    value[..8].copy_from_slice(&now_ns().to_le_bytes());
                    let mut record = BaseRecord::<(), [u8]>::to(&topic).payload(&value[..]);
                    loop {
                        match p.send(record) {
                            Ok(()) => break,
                            Err((_, r)) => {
                                record = r;
                                std::thread::sleep(Duration::from_millis(1));
                            }
                        }
                    }
                    produced.fetch_add(1, Ordering::Relaxed);
                }
                p.flush(Duration::from_secs(30))
                    .context("flushing the input producer")?;
                producing.store(false, Ordering::SeqCst);
                Ok(())
            })
        };
        let reader = {
            let (bootstrap, topic, partitions) =
                (args.bootstrap.clone(), output.clone(), args.partitions);
            let (produced, producing) = (Arc::clone(&produced), Arc::clone(&producing));
            let started = now_ns();
            std::thread::spawn(move || -> Result<(Histogram, u64)> {
                let c: BaseConsumer = ClientConfig::new()
                    .set("bootstrap.servers", &bootstrap)
                    .set("group.id", "spate-bench-e2e")
                    .set("isolation.level", "read_committed")
                    .set("enable.auto.commit", "false")
                    .create()
                    .context("creating the output reader")?;
                let mut tpl = TopicPartitionList::new();
                for p in 0..partitions {
                    tpl.add_partition_offset(&topic, p, Offset::Beginning)?;
                }
                c.assign(&tpl)?;
                let mut hist = Histogram::new();
                let mut seen = 0u64;
                let mut quiet_since = Instant::now();
                let warm_up = started + WARM_UP.as_nanos() as u64;
                loop {
                    match c.poll(Duration::from_millis(100)) {
                        Some(Ok(m)) => {
                            quiet_since = Instant::now();
                            seen += 1;
                            let Some(v) = m.payload().filter(|v| v.len() >= 8) else {
                                continue;
                            };
                            let created = u64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8]));
                            if created >= warm_up {
                                hist.record(now_ns().saturating_sub(created) / 1_000);
                            }
                        }
                        Some(Err(e)) => return Err(e).context("reading the output"),
                        None => {}
                    }
                    let done = !producing.load(Ordering::SeqCst);
                    if done && seen >= produced.load(Ordering::Relaxed) {
                        break;
                    }
                    // Nothing new for 60 s after the producer finished: report what arrived.
                    if done && quiet_since.elapsed() > Duration::from_secs(60) {
                        break;
                    }
                }
                Ok((hist, seen))
            })
        };
        // The job runs on this thread (its environment is not `Send`); a watcher stops it once
        // the reader has seen everything the producer wrote.
        let watcher = std::thread::spawn(move || {
            let produced = producer.join();
            let read = reader.join();
            stop.stop();
            (produced, read)
        });
        env.execute("bench-kafka-e2e")?;
        let (produced_result, read) = watcher
            .join()
            .map_err(|_| anyhow::anyhow!("the watcher panicked"))?;
        produced_result.map_err(|_| anyhow::anyhow!("the producer panicked"))??;
        let (hist, seen) = read.map_err(|_| anyhow::anyhow!("the reader panicked"))??;
        let s = hist.snapshot();
        let ms = |us: f64| (us / 10.0).round() / 100.0;
        println!(
            "{}",
            serde_json::json!({
                "bench": "kafka",
                "mode": "e2e",
                "delivery": args.delivery,
                "checkpoint_interval": args.checkpoint_interval,
                "rate": args.rate,
                "produced": produced.load(Ordering::Relaxed),
                "read": seen,
                "measured": s.count,
                "p50_ms": ms(s.p50),
                "p95_ms": ms(s.p95),
                "p99_ms": ms(s.p99),
                "max_ms": ms(s.max),
                "workers": args.workers,
                "peak_rss_mb": peak_rss_mb().map(|r| (r * 10.0).round() / 10.0),
            })
        );
        Ok(())
    }
}

fn tempfile_dir(prefix: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
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
    let fronts: &[&str] = match args.front.as_str() {
        "sql" => &["sql"],
        "both" => &["rust", "sql"],
        _ => &["rust"],
    };
    let mut runs = 0;
    for query in queries {
        let query = query.name();
        for _ in 0..args.repeat {
            if fronts.contains(&"sql") {
                run_sql_query(&exe, args, query)?;
                if !fronts.contains(&"rust") {
                    continue;
                }
            }
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
                    Some(line) if args.front == "rust" => println!("{line}"),
                    Some(line) => {
                        let mut value: serde_json::Value = serde_json::from_str(line)?;
                        value["front"] = serde_json::Value::from("rust");
                        println!("{value}");
                    }
                    None => bail!("{query}: no result line"),
                }
            }
        }
    }
    Ok(())
}

/// Runs the suite's SQL text of `query` over `--input` (or the suite's generator table)
/// with `spate sql --json` and prints its result line.
fn run_sql_query(exe: &std::path::Path, args: &NexmarkBenchArgs, query: &str) -> Result<()> {
    let scratch = tempfile::tempdir().context("cannot make a scratch directory")?;
    // q13's side input, `${FLINK_HOME}/data/side_input.txt`: rows (i, "i") for i < 10000.
    let side = scratch.path().join("data/side_input.txt");
    std::fs::create_dir_all(scratch.path().join("data"))?;
    let rows: String = (0..10_000).map(|i| format!("{i},{i}\n")).collect();
    std::fs::write(&side, rows)?;
    let mut cmd = Command::new(exe);
    cmd.arg("sql").arg("--json").arg("-i");
    match &args.input {
        Some(input) => cmd
            .arg(&args.sql_source)
            .arg("-D")
            .arg(format!("INPUT={}", input.display())),
        // The suite's proportions, at the generator's default event-time rate (as `spate
        // nexmark run --events N`).
        None => cmd
            .arg(args.sql_dir.join("ddl_gen.sql"))
            .args(["-D", "TPS=10000", "-D"])
            .arg(format!("EVENTS_NUM={}", args.events))
            .args(["-D", "PERSON_PROPORTION=1", "-D", "AUCTION_PROPORTION=3"])
            .args(["-D", "BID_PROPORTION=46"]),
    };
    cmd.arg("-i")
        .arg(args.sql_dir.join("ddl_views.sql"))
        .arg("-f")
        .arg(args.sql_dir.join(format!("{query}.sql")))
        .args(["-D", "NEXMARK_TABLE=datagen", "-D", "SUBMIT_TIME=bench"])
        .arg("-D")
        .arg(format!("NEXMARK_DIR={}", scratch.path().display()))
        .arg("-D")
        .arg(format!("FLINK_HOME={}", scratch.path().display()))
        // Rows are discarded, as `spate nexmark run` does without --output.
        .arg("--discard")
        .arg(format!("nexmark_{query}"))
        .args(["--workers", &args.workers.to_string()])
        .args(["--processes", &args.processes.to_string()]);
    let out = cmd.output().context("cannot run spate sql")?;
    if !out.status.success() {
        bail!(
            "{query} (sql): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(line) = stdout.lines().rev().find(|l| l.starts_with('{')) else {
        bail!("{query} (sql): no result line");
    };
    let mut value: serde_json::Value = serde_json::from_str(line)?;
    value["query"] = serde_json::Value::from(query);
    println!("{value}");
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

mod latency {
    //! `spate bench latency`: a keyed job at a fixed input rate; each output's latency is the
    //! time from its event's creation (its slot in the source's wall-clock schedule, so a
    //! source that falls behind counts too) to the sink's write.

    use std::sync::{Arc, Mutex};
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use anyhow::{bail, Result};
    use serde::{Deserialize, Serialize};
    use spate_dataflow::{JobConfig, StreamEnv};
    use spate_metrics::Histogram;
    use spate_types::{
        Sink, SinkContext, SinkWriter, Source, SourceContext, SourceOutput, SourceReader,
        SourceStatus, SpateResult,
    };

    use super::LatencyArgs;
    use crate::util::peak_rss_mb;

    /// An event and when it was created, in ns since the Unix epoch.
    #[derive(Debug, Clone, Copy, Serialize, Deserialize)]
    struct Stamped {
        key: u64,
        count: u64,
        created_ns: u64,
    }

    fn now_ns() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    }

    /// Unbounded; `rate` events per second for the job (none: as fast as possible).
    struct Paced {
        rate: Option<f64>,
        keys: u64,
    }

    struct PacedReader {
        /// Events per second of this worker.
        rate: Option<f64>,
        start_ns: Option<u64>,
        emitted: u64,
        next_key: u64,
        step: u64,
        keys: u64,
    }

    impl Source<Stamped> for Paced {
        fn name(&self) -> String {
            "paced".into()
        }
        fn is_bounded(&self) -> bool {
            false
        }
        fn create_reader(
            &self,
            ctx: &SourceContext,
        ) -> SpateResult<Box<dyn SourceReader<Stamped>>> {
            let workers = ctx.workers.max(1) as u64;
            Ok(Box::new(PacedReader {
                rate: self.rate.map(|r| r / workers as f64),
                start_ns: None,
                emitted: 0,
                next_key: ctx.worker_index as u64,
                step: workers,
                keys: self.keys.max(1),
            }))
        }
    }

    impl SourceReader<Stamped> for PacedReader {
        fn poll(
            &mut self,
            out: &mut SourceOutput<'_, Stamped>,
            max: usize,
        ) -> SpateResult<SourceStatus> {
            let now = now_ns();
            let start = *self.start_ns.get_or_insert(now);
            let (n, interval) = match self.rate {
                None => (max.max(1) as u64, 0.0),
                Some(rate) => {
                    let due = ((now - start) as f64 * rate / 1e9) as u64 + 1;
                    (
                        due.saturating_sub(self.emitted).min(max.max(1) as u64),
                        1e9 / rate,
                    )
                }
            };
            if n == 0 {
                return Ok(SourceStatus::Idle);
            }
            for _ in 0..n {
                // The event's slot in the schedule; unpaced, the time it is made.
                let created_ns = if self.rate.is_some() {
                    start + (self.emitted as f64 * interval) as u64
                } else {
                    now
                };
                out.push(Stamped {
                    key: self.next_key % self.keys,
                    count: 1,
                    created_ns,
                });
                self.next_key += self.step;
                self.emitted += 1;
            }
            Ok(SourceStatus::More)
        }
    }

    /// Records the latency of what it writes, from `measure_from_ns` on.
    struct LatencySink {
        measure_from_ns: u64,
        histogram: Arc<Mutex<Histogram>>,
    }

    struct LatencyWriter {
        measure_from_ns: u64,
        local: Histogram,
        shared: Arc<Mutex<Histogram>>,
    }

    impl Sink<Stamped> for LatencySink {
        fn name(&self) -> String {
            "latency".into()
        }
        fn create_writer(&self, _ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<Stamped>>> {
            Ok(Box::new(LatencyWriter {
                measure_from_ns: self.measure_from_ns,
                local: Histogram::new(),
                shared: Arc::clone(&self.histogram),
            }))
        }
    }

    impl SinkWriter<Stamped> for LatencyWriter {
        fn write_batch(&mut self, records: &mut Vec<Stamped>) -> SpateResult<()> {
            // One clock read per batch: the batch is written now.
            let now = now_ns();
            for r in records.drain(..) {
                if r.created_ns >= self.measure_from_ns {
                    self.local.record(now.saturating_sub(r.created_ns) / 1000);
                }
            }
            Ok(())
        }
        fn close(&mut self) -> SpateResult<()> {
            self.shared
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .merge(&self.local);
            self.local = Histogram::new();
            Ok(())
        }
    }

    struct Run {
        histogram: Histogram,
        seconds: f64,
    }

    /// Runs the job for `warmup + seconds`; latencies of events created after the warm-up.
    fn run_job(
        args: &LatencyArgs,
        rate: Option<f64>,
        checkpoint: Option<(Duration, &std::path::Path)>,
        warmup: f64,
        seconds: f64,
    ) -> Result<Run> {
        let mut config = JobConfig::local(args.workers);
        config.rest = args.rest.server_config()?;
        if let Some((interval, dir)) = checkpoint {
            config.checkpoint_interval = Some(interval);
            config.checkpoint_dir = Some(dir.display().to_string());
        }
        let env = StreamEnv::new(config);
        let histogram = Arc::new(Mutex::new(Histogram::new()));
        env.from_source(Paced {
            rate,
            keys: args.keys,
        })
        .name("paced")
        .uid("paced")
        .key_by(|e: &Stamped| e.key)
        .reduce(|a, b| Stamped {
            key: a.key,
            count: a.count + b.count,
            created_ns: b.created_ns,
        })
        .uid("count")
        .sink_to(LatencySink {
            measure_from_ns: now_ns() + (warmup * 1e9) as u64,
            histogram: Arc::clone(&histogram),
        })
        .name("latency");
        let stop = env.stop_handle();
        let total = warmup + seconds;
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(total));
            stop.stop();
        });
        let result = env.execute("latency")?;
        let histogram = std::mem::take(&mut *histogram.lock().unwrap_or_else(|p| p.into_inner()));
        Ok(Run {
            histogram,
            seconds: (result.elapsed.as_secs_f64() - warmup).max(1e-3),
        })
    }

    pub(super) fn run(args: &LatencyArgs) -> Result<()> {
        if args.workers == 0 || args.seconds <= 0.0 || !(args.load > 0.0 && args.load <= 1.0) {
            bail!("--workers and --seconds must be positive and --load in (0, 1]");
        }
        let rate = match args.rate {
            Some(r) if r.is_finite() && r > 0.0 => r,
            Some(r) => bail!("--rate must be a positive number of events per second, not {r}"),
            None => {
                let probe = run_job(args, None, None, 1.0, args.probe_seconds)?;
                let max = probe.histogram.count() as f64 / probe.seconds;
                println!(
                    "{}",
                    serde_json::json!({
                        "bench": "latency-probe",
                        "workers": args.workers,
                        "max_events_per_s": max.round(),
                    })
                );
                max * args.load
            }
        };
        let interval = match args.checkpoint_interval.as_str() {
            "none" => None,
            s => Some(crate::util::parse_duration(s).map_err(anyhow::Error::msg)?),
        };
        let dir = tempfile_dir()?;
        let mut runs = vec![None];
        if let Some(i) = interval {
            runs.push(Some(i));
        }
        for checkpoints in runs {
            let cp_dir = dir.join(format!("cp-{}", checkpoints.is_some()));
            let run = run_job(
                args,
                Some(rate),
                checkpoints.map(|i| (i, cp_dir.as_path())),
                1.0,
                args.seconds,
            )?;
            let s = run.histogram.snapshot();
            let ms = |us: f64| (us / 10.0).round() / 100.0;
            println!(
                "{}",
                serde_json::json!({
                    "bench": "latency",
                    "workers": args.workers,
                    "checkpoint_interval_ms": checkpoints.map(|i| i.as_millis() as u64),
                    "rate": rate.round(),
                    "events_per_s": (s.count as f64 / run.seconds).round(),
                    "outputs": s.count,
                    "p50_ms": ms(s.p50),
                    "p95_ms": ms(s.p95),
                    "p99_ms": ms(s.p99),
                    "max_ms": ms(s.max),
                    "peak_rss_mb": peak_rss_mb().map(|r| (r * 10.0).round() / 10.0),
                })
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }

    fn tempfile_dir() -> Result<std::path::PathBuf> {
        let dir = std::env::temp_dir().join(format!("spate-bench-latency-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }
}
