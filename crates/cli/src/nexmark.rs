//! `spate nexmark gen` and `spate nexmark run`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use spate_connectors::files::{decode_json_line, decode_json_prefix};
use spate_connectors::kafka::{Encoded, KafkaSink, KafkaSource, KafkaUrl, MessageDecoder};
use spate_connectors::mqtt::{MqttMessage, MqttSink, MqttUrl};
use spate_connectors::nats::{JetStreamMessage, NatsEncoder, NatsMessage, NatsUrl};
use spate_connectors::{DiscardSink, FileSink, JsonLinesSource, SingleFileSink};
use spate_dataflow::{DataStream, JobConfig, StreamEnv};
use spate_nexmark::generator::{GeneratorConfig, NexmarkGenerator};
use spate_nexmark::json::JsonEvent;
use spate_nexmark::model::Event;
use spate_nexmark::queries::{self, Attach, Query, Row};
use spate_nexmark::source::NexmarkSource;
use spate_types::BadRecordPolicy;

use crate::util::{peak_rss_mb, ProgressBar};

/// Nexmark commands.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per run
pub enum NexmarkCommand {
    /// Writes generated events as JSON lines (byte-identical to the reference generator).
    Gen(GenArgs),
    /// Runs one query over the generator or a JSON-lines file.
    Run(RunArgs),
}

/// The generator's settings, shared by `gen` and `run`.
#[derive(Debug, Clone, Args)]
pub struct GeneratorArgs {
    /// Seed of the generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Events per second of event time (spacing of the event timestamps).
    #[arg(long, default_value_t = 10_000.0)]
    pub event_rate: f64,
    /// Event time of the first event, epoch milliseconds (default 2024-01-01T00:00:00Z).
    #[arg(long, default_value_t = 1_704_067_200_000)]
    pub base_time_ms: i64,
    /// Bidder ids offset by 1000 as in Apache Beam, instead of 2000 as in nexmark-flink.
    #[arg(long)]
    pub beam_bidder: bool,
}

impl GeneratorArgs {
    fn config(&self, events: Option<u64>, partitions: usize) -> GeneratorConfig {
        GeneratorConfig {
            seed: self.seed,
            rate: self.event_rate,
            base_time_ms: self.base_time_ms,
            events,
            partitions,
            beam_bidder: self.beam_bidder,
        }
    }
}

/// `spate nexmark gen`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Number of events.
    #[arg(long)]
    pub events: u64,
    /// Output file, or `-` for stdout.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub generator: GeneratorArgs,
}

/// `spate nexmark run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The query: q0 to q22 except q6 (see `spate_nexmark::queries`).
    #[arg(long)]
    pub query: Query,
    /// Generated events (without --input); default 1000000.
    #[arg(long)]
    pub events: Option<u64>,
    /// Generate without end (stop with Ctrl-C or SIGTERM: sinks are flushed, exit code 0).
    #[arg(long, conflicts_with = "events")]
    pub unbounded: bool,
    /// Wall-clock limit on generated events per second, over the whole job.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Read events from this JSON-lines file or directory instead of the generator, or from
    /// Kafka: `kafka://HOST:PORT/TOPIC?group=G&start=earliest&stop=latest` (`stop=latest`
    /// ends at the offsets of the start; see `spate_connectors::kafka::KafkaUrl`), MQTT
    /// (`mqtt://HOST:PORT/TOPIC?client=ID`) or NATS: `nats://HOST:PORT/SUBJECT` (core, at most
    /// once) or `nats://HOST:PORT/SUBJECT[,SUBJECT...]?stream=S&start=earliest&stop=latest`
    /// (JetStream, replayed from checkpoints; see `spate_connectors::nats::NatsUrl`).
    #[arg(long, conflicts_with_all = ["events", "rate", "unbounded"])]
    pub input: Option<PathBuf>,
    /// Worker threads per process.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Processes (started and supervised on this machine).
    #[arg(long, default_value_t = 1)]
    pub processes: usize,
    /// Write result rows to this file, one JSON array per line (with a `+I`/`-U`/`+U`/`-D`
    /// prefix and a tab for updating queries); otherwise they are discarded. Or to a Kafka
    /// topic, one row per message: `kafka://HOST:PORT/TOPIC?delivery=exactly-once`
    /// (transactions committed with checkpoints), `at-least-once` (the default) or `none`;
    /// to MQTT (`mqtt://HOST:PORT/TOPIC`); or to NATS: `nats://HOST:PORT/SUBJECT` (core, at
    /// most once) or `nats://HOST:PORT/SUBJECT?stream=S&delivery=exactly-once&prefix=P`
    /// (JetStream: `at-least-once`, the default, or exactly once through `Nats-Msg-Id`
    /// deduplication within the stream's duplicate window).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Generator partitions; the generated data depends on this, never on workers.
    /// Default: the total number of workers.
    #[arg(long)]
    pub partitions: Option<usize>,
    /// What to do with malformed input lines: fail, drop or dead-letter=PATH.
    #[arg(long, default_value = "fail")]
    pub bad_records: BadRecordPolicy,
    /// Print the summary as one JSON line on stdout.
    #[arg(long)]
    pub json: bool,
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Records per epoch and worker (flow control granularity).
    #[arg(long)]
    pub epoch_records: Option<usize>,
    /// Take exactly-once checkpoints into this directory (or an `s3://`, `gs://`, `az://`
    /// URL with the `cloud` feature). With it, `--output` names a directory of part files
    /// that are published only when a checkpoint covering them completes, and a process that
    /// dies is restarted from the latest checkpoint.
    #[arg(long)]
    pub checkpoint_dir: Option<String>,
    /// How often to checkpoint, such as `1s` or `500ms`.
    #[arg(long, default_value = "1s", value_parser = crate::util::parse_duration)]
    pub checkpoint_interval: std::time::Duration,
    /// Restart strategy after a failure: `exponential-delay` (the default),
    /// `exponential-delay:INITIAL_MS:MAX_MS`, `fixed-delay:ATTEMPTS:DELAY_MS`,
    /// `failure-rate:MAX:INTERVAL_MS:DELAY_MS` or `none`.
    #[arg(long, default_value = "exponential-delay")]
    pub restart_strategy: spate_dataflow::RestartStrategy,
    /// Start from a checkpoint or savepoint: `latest` (in `--checkpoint-dir`) or a location.
    #[arg(long, requires = "checkpoint_dir")]
    pub restore: Option<String>,
    /// Restore even if the snapshot holds state that no operator of this job claims (an
    /// operator was removed or its uid changed); that state is dropped. Without it such a
    /// restore fails and names the uids (Flink's `--allowNonRestoredState`).
    #[arg(long, requires = "restore")]
    pub allow_non_restored_state: bool,
    /// When the job stops (Ctrl-C, SIGTERM, or the end of a bounded input), take a final
    /// checkpoint and write it here as a savepoint: a self-contained snapshot that
    /// `--restore DIR` resumes, on any number of workers and processes.
    #[arg(long, requires = "checkpoint_dir")]
    pub savepoint_dir: Option<String>,
    /// Where keyed state lives: `memory` (the heap; full checkpoints) or `disk[:DIR]` (an
    /// embedded B-tree per worker and operator under DIR or the temporary directory, with a
    /// cache of hot keys and incremental checkpoints).
    #[arg(long, default_value = "memory")]
    pub state_backend: spate_dataflow::StateBackend,
    /// With `--state-backend disk`: keys each operator instance caches in memory.
    #[arg(long, default_value_t = spate_dataflow::StateBackend::DEFAULT_CACHE_KEYS)]
    pub state_cache_keys: usize,
    /// With `--state-backend disk`: incremental checkpoints between two full ones (0: every
    /// checkpoint is full).
    #[arg(long, default_value_t = spate_dataflow::StateBackend::DEFAULT_FULL_EVERY)]
    pub full_checkpoint_every: u32,
    /// With `--query q5`: run the old hand-tuned q5 (`queries::q5_hand`) instead, to measure
    /// the plain one against it.
    #[arg(long, hide = true)]
    pub hand_q5: bool,
    /// Where savepoints asked for while the job runs go (`spate savepoint`, `spate stop`,
    /// the REST API); a request may name only a location inside it. Default:
    /// `<checkpoint-dir>/savepoints`.
    #[arg(long, requires = "checkpoint_dir")]
    pub savepoint_root: Option<String>,
    #[command(flatten)]
    pub rest: crate::rest::RestArgs,
    #[command(flatten)]
    pub elastic: crate::elastic::ElasticArgs,
    #[command(flatten)]
    pub generator: GeneratorArgs,
}

/// Runs a `spate nexmark` command.
pub fn run(cmd: NexmarkCommand) -> Result<()> {
    match cmd {
        NexmarkCommand::Gen(args) => generate(&args),
        NexmarkCommand::Run(args) => run_query(&args),
    }
}

fn generate(args: &GenArgs) -> Result<()> {
    let cfg = args.generator.config(Some(args.events), 1);
    cfg.validate()?;
    let mut generator = NexmarkGenerator::new(&cfg, 0)?;
    let out: Box<dyn Write> = if args.out.as_os_str() == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        let tmp = args.out.with_extension("tmp");
        let file = std::fs::File::create(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        Box::new(file)
    };
    let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
    let mut buf = Vec::with_capacity(1 << 20);
    let mut events = Vec::with_capacity(4096);
    loop {
        events.clear();
        if generator.fill(&mut events, 4096) == 0 {
            break;
        }
        buf.clear();
        for e in &events {
            spate_nexmark::json::write_event(e, &mut buf);
        }
        out.write_all(&buf)?;
    }
    out.flush()?;
    drop(out);
    if args.out.as_os_str() != "-" {
        let tmp = args.out.with_extension("tmp");
        std::fs::rename(&tmp, &args.out)
            .with_context(|| format!("cannot write {}", args.out.display()))?;
    }
    Ok(())
}

/// Attaches the query output: a single JSON-lines file, or a discarding sink.
struct Output {
    path: Option<PathBuf>,
    kafka: Option<KafkaUrl>,
    mqtt: Option<MqttUrl>,
    nats: Option<NatsUrl>,
    /// Part files published by checkpoints instead of one file.
    exactly_once: bool,
}

impl Attach for Output {
    fn attach<R: Row>(&self, rows: DataStream<R>) {
        if let Some(url) = &self.nats {
            let encoder: NatsEncoder<R> = Arc::new(|row: &R| {
                let mut line = Vec::new();
                row.write_line(&mut line);
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                Ok((None, line))
            });
            if url.is_jetstream() {
                rows.sink_to(url.jetstream_sink(encoder).expect("checked when parsed"))
                    .name("output");
            } else {
                rows.sink_to(url.core_sink(encoder).expect("checked when parsed"))
                    .name("output");
            }
            return;
        }
        if let Some(url) = &self.mqtt {
            let encoder = Arc::new(|row: &R| {
                let mut line = Vec::new();
                row.write_line(&mut line);
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                Ok((None, line))
            });
            rows.sink_to(MqttSink::with_encoder(
                url.address.clone(),
                url.topic.clone(),
                encoder,
            ))
            .name("output");
            return;
        }
        if let Some(url) = &self.kafka {
            let topic = url.sink_topic().expect("checked when parsed").to_owned();
            let encoder = Arc::new(|row: &R, out: &mut Encoded| {
                row.write_line(&mut out.value);
                if out.value.last() == Some(&b'\n') {
                    out.value.pop();
                }
                Ok(())
            });
            rows.sink_to(url.sink(KafkaSink::with_encoder(&url.bootstrap, topic, encoder)))
                .name("output");
            return;
        }
        match &self.path {
            Some(path) if self.exactly_once => {
                let encoder = Arc::new(|row: &R, out: &mut Vec<u8>| row.write_line(out));
                rows.sink_to(FileSink::with_encoder(path.clone(), "jsonl", encoder))
                    .name("output");
            }
            Some(path) => {
                let encoder = Arc::new(|row: &R, out: &mut Vec<u8>| row.write_line(out));
                rows.sink_to_single(SingleFileSink::with_encoder(path.clone(), encoder))
                    .name("output");
            }
            None => {
                rows.sink_to(DiscardSink::new()).name("output");
            }
        }
    }
}

/// One event from its JSON form (a message's payload, a line), or why not.
fn json_event(bytes: &[u8]) -> Result<Event, String> {
    decode_json_line::<JsonEvent>(bytes).map(Event::from)
}

/// The `kafka://` URL that `path` is, if it is one.
fn kafka_url(path: &std::path::Path) -> Option<&str> {
    path.to_str().filter(|p| p.starts_with("kafka://"))
}

/// The `nats://` URL that `path` is, if it is one.
fn nats_url(path: &std::path::Path) -> Option<&str> {
    path.to_str().filter(|p| p.starts_with("nats://"))
}

fn run_query(args: &RunArgs) -> Result<()> {
    let mut config = JobConfig::local(args.workers).with_processes(args.processes);
    if let Some(n) = args.epoch_records {
        config.epoch_max_records = n;
    }
    if let Some(dir) = &args.checkpoint_dir {
        config.checkpoint_dir = Some(dir.clone());
        config.checkpoint_interval = Some(args.checkpoint_interval);
        config.restart_strategy = args.restart_strategy.clone();
        config.restore = args.restore.clone();
        config.allow_non_restored_state = args.allow_non_restored_state;
        config.savepoint_dir = args.savepoint_dir.clone();
        config.savepoint_root = args.savepoint_root.clone();
        config.supervise_single_process = true;
    }
    config.rest = args.rest.server_config()?;
    args.elastic.apply(&mut config)?;
    config.state_backend = match args.state_backend.clone() {
        spate_dataflow::StateBackend::Disk { dir, .. } => spate_dataflow::StateBackend::Disk {
            dir,
            cache_keys: args.state_cache_keys,
            full_every: args.full_checkpoint_every,
        },
        memory => memory,
    };
    config.validate()?;
    let env = StreamEnv::new(config);
    let total_workers = args.workers * args.processes;
    let (events, unit): (DataStream<Event>, &str) = match &args.input {
        Some(url) if url.to_str().is_some_and(|u| u.starts_with("mqtt://")) => {
            let url: MqttUrl = url.to_str().expect("checked").parse()?;
            if url.dedup.is_some() {
                anyhow::bail!(
                    "--input: dedup= needs a unique id in every payload, and Nexmark \
                     events have none; it is for jobs that call dedup_by"
                );
            }
            // Every input is decoded into events in its source, so that the queries'
            // watermark strategy runs per split (below, for Kafka).
            let source = url
                .source_with_decoder(Arc::new(|m: &MqttMessage<'_>| json_event(m.payload)))
                .policy(args.bad_records.clone());
            (env.from_source(source).name("events"), "events")
        }
        Some(url) if nats_url(url).is_some() => {
            let url: NatsUrl = nats_url(url).expect("checked").parse()?;
            let events = if url.is_jetstream() {
                let source = url
                    .jetstream_source_with_decoder(Arc::new(|m: &JetStreamMessage<'_>| {
                        json_event(m.payload)
                    }))?
                    .policy(args.bad_records.clone());
                env.from_source(source)
            } else {
                let source = url
                    .core_source_with_decoder(Arc::new(|m: &NatsMessage<'_>| {
                        json_event(m.payload)
                    }))?
                    .policy(args.bad_records.clone());
                env.from_source(source)
            };
            (events.name("events"), "events")
        }
        Some(url) if kafka_url(url).is_some() => {
            let url: KafkaUrl = kafka_url(url).expect("checked").parse()?;
            let topics: Vec<&str> = url.topics.iter().map(String::as_str).collect();
            // Decoded into events in the source, so that the queries' watermark strategy runs
            // per partition (Flink's Kafka-partition-aware watermarks): one generator per
            // worker would see its partitions interleaved as they are fetched, and a partition
            // fetched ahead would make the others' records late.
            let decoder: MessageDecoder<Event> = Arc::new(|m| match m.value {
                Some(v) => json_event(v),
                None => Err("a message without a value (a tombstone)".into()),
            });
            let source = url
                .source(KafkaSource::with_decoder(&url.bootstrap, &topics, decoder))
                .policy(args.bad_records.clone());
            (env.from_source(source).name("events"), "events")
        }
        Some(path) => {
            // Decoded as any user's JSON lines, with a serde type of the wire layout, and
            // straight into the event, in the source (as for Kafka: the watermarks per split).
            let source = JsonLinesSource::<Event>::with_decoder(path.clone(), Arc::new(json_event))
                .prefix_decoder(Arc::new(|text: &[u8]| {
                    // The prefix decoder's length stops before the `\n`.
                    decode_json_prefix::<JsonEvent>(text).map(|(e, n)| (e.0, n - 1))
                }))
                .policy(args.bad_records.clone());
            (env.from_source(source).name("events"), "bytes")
        }
        None => {
            let events = if args.unbounded {
                None
            } else {
                Some(args.events.unwrap_or(1_000_000))
            };
            let partitions = args.partitions.unwrap_or(total_workers);
            let cfg = args.generator.config(events, partitions);
            cfg.validate()?;
            (
                env.from_source(NexmarkSource::new(cfg, args.rate)?)
                    .name("events"),
                "events",
            )
        }
    };
    // Records shed at the source, kept in files instead of only counted.
    let events = match &args.elastic.shed_output {
        Some(dir) => {
            // One line per event, its `\n` included.
            let encoder = Arc::new(spate_nexmark::json::write_event);
            events.shed_to(FileSink::with_encoder(dir.clone(), "jsonl", encoder))
        }
        None => events,
    };
    let kafka = match args.output.as_deref().and_then(kafka_url) {
        Some(url) => {
            let url: KafkaUrl = url.parse()?;
            url.sink_topic()?;
            Some(url)
        }
        None => None,
    };
    let mqtt = match args.output.as_deref().and_then(|p| p.to_str()) {
        Some(u) if u.starts_with("mqtt://") => Some(u.parse::<MqttUrl>()?),
        _ => None,
    };
    let nats = match args.output.as_deref().and_then(nats_url) {
        Some(u) => {
            let url: NatsUrl = u.parse()?;
            url.sink_subject()?;
            Some(url)
        }
        None => None,
    };
    let output = Output {
        path: args
            .output
            .clone()
            .filter(|_| kafka.is_none() && mqtt.is_none() && nats.is_none()),
        kafka,
        mqtt,
        nats,
        exactly_once: args.checkpoint_dir.is_some(),
    };
    if args.hand_q5 && args.query == Query::Q5 {
        output.attach(queries::q5_hand(&events));
    } else {
        queries::build(args.query, &events, &output);
    }

    let bar = ProgressBar::start(env.progress(), unit, !args.no_progress && !args.json);
    let result = env.execute(&format!("nexmark-{}", args.query))?;
    drop(bar);
    if !result.is_reporter() {
        return Ok(());
    }
    let events = result
        .totals
        .get("events.numRecordsOut")
        .copied()
        .unwrap_or(0);
    let dropped = result.total_of(".numRecordsDropped");
    let dead = result.total_of(".numRecordsDeadLettered");
    let shed = result.snapshot.as_ref().map_or(0, |s| {
        s.operators
            .iter()
            .map(|o| s.sum_of(o.index, "numRecordsShed"))
            .sum::<f64>() as u64
    });
    let rows = result
        .metrics
        .get("output.numRecordsIn")
        .copied()
        .unwrap_or(0);
    let secs = result.elapsed.as_secs_f64();
    let eps = events as f64 / secs.max(1e-9);
    let rss = peak_rss_mb();
    // This run's workers: an autoscaled job's last run need not have the flags' count.
    let total_workers = result
        .snapshot
        .as_ref()
        .map_or(total_workers, |s| s.parallelism.max(1));
    if args.json {
        let line = serde_json::json!({
            "bench": "nexmark",
            "query": args.query.to_string(),
            "source": match args.input.as_deref() {
                Some(i) if kafka_url(i).is_some() => "kafka",
                Some(i) if i.to_str().is_some_and(|u| u.starts_with("mqtt://")) => "mqtt",
                Some(i) if nats_url(i).is_some() => "nats",
                Some(_) => "jsonl",
                None => "generator",
            },
            "events": events,
            "workers": args.workers,
            "processes": args.processes,
            "wall_s": (secs * 1000.0).round() / 1000.0,
            "events_per_s": eps.round(),
            "events_per_s_per_worker": (eps / total_workers as f64).round(),
            "rows": rows,
            "dropped": dropped,
            "dead_lettered": dead,
            "shed": shed,
            "peak_rss_mb": rss.map(|r| (r * 10.0).round() / 10.0),
            "checkpoint_interval_ms": args
                .checkpoint_dir
                .as_ref()
                .map(|_| args.checkpoint_interval.as_millis() as u64),
        });
        println!("{line}");
    } else {
        eprintln!(
            "{}: {events} events in {secs:.3} s = {:.2} M events/s ({:.2} M/s per worker), {rows} rows, peak RSS {}",
            args.query,
            eps / 1e6,
            eps / 1e6 / total_workers as f64,
            rss.map_or("n/a".to_string(), |r| format!("{r:.0} MiB")),
        );
        if dropped > 0 {
            eprintln!("dropped {dropped} malformed input records");
        }
        if dead > 0 {
            eprintln!("wrote {dead} malformed input records to the dead-letter file");
        }
        if shed > 0 {
            eprintln!("shed {shed} events under overload");
        }
    }
    Ok(())
}
