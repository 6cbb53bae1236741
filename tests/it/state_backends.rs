//! The disk state backend end to end: state larger than its cache is exact, incremental
//! checkpoints upload only what changed, and a damaged file of a chain fails the restore
//! with the file named.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use spate::dataflow::StateBackend;
use spate::prelude::*;

/// Keys that each get one record first, then a few keys that keep changing.
const WIDE: u64 = 20_000;
const EVENTS: u64 = 60_000;
const HOT: u64 = 8;

fn key_of(v: u64) -> u64 {
    if v < WIDE {
        v
    } else {
        v % HOT
    }
}

/// A job's metrics.
type Metrics = BTreeMap<String, u64>;
/// The final (count, sum) per key.
type Counts = BTreeMap<u64, (u64, u64)>;

fn disk(cache_keys: usize, full_every: u32) -> StateBackend {
    StateBackend::Disk {
        dir: None,
        cache_keys,
        full_every,
    }
}

/// A running count and sum per key; returns the job's metrics and the final value per key.
fn counting(
    backend: StateBackend,
    workers: usize,
    checkpoints: Option<(&Path, Option<String>)>,
) -> SpateResult<(Metrics, Counts)> {
    counting_from(
        SequenceSource::new(0, Some(EVENTS)).rate(40_000.0),
        backend,
        workers,
        checkpoints,
    )
}

/// The id of the newest complete checkpoint under `dir` (0 for none). (Not their number: old
/// ones are discarded.)
fn completed(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("_manifest.json").exists())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("chk-")?.parse().ok())
        .max()
        .unwrap_or(0)
}

/// `0..EVENTS` on one worker in two phases: the wide keys, then the hot keys, then the end;
/// after each phase it waits until `after` checkpoints whose cut lies after the phase are
/// complete, so that however loaded the machine, complete checkpoints separate the phases.
/// (The engine asks a source for its positions once per checkpoint boundary it crosses, in
/// id order from 1, so the number of asks so far is the id of the newest cut.)
struct Phased {
    dir: std::path::PathBuf,
    after: usize,
}

struct PhasedReader {
    dir: std::path::PathBuf,
    after: usize,
    next: u64,
    wait_for: Option<usize>,
    /// Checkpoint boundaries crossed so far.
    cuts: std::cell::Cell<usize>,
}

impl spate::types::Source<u64> for Phased {
    fn name(&self) -> String {
        "phased".into()
    }
    fn is_bounded(&self) -> bool {
        true
    }
    fn create_reader(
        &self,
        _ctx: &spate::types::SourceContext,
    ) -> SpateResult<Box<dyn spate::types::SourceReader<u64>>> {
        Ok(Box::new(PhasedReader {
            dir: self.dir.clone(),
            after: self.after,
            next: 0,
            wait_for: None,
            cuts: std::cell::Cell::new(0),
        }))
    }
}

impl spate::types::SourceReader<u64> for PhasedReader {
    fn poll(
        &mut self,
        out: &mut spate::types::SourceOutput<'_, u64>,
        max: usize,
    ) -> SpateResult<spate::types::SourceStatus> {
        use spate::types::SourceStatus;
        if let Some(n) = self.wait_for {
            if completed(&self.dir) < n {
                std::thread::sleep(Duration::from_millis(5));
                return Ok(SourceStatus::Idle);
            }
            self.wait_for = None;
            if self.next == EVENTS {
                return Ok(SourceStatus::Finished);
            }
        }
        let end = if self.next < WIDE { WIDE } else { EVENTS };
        let n = (max as u64).min(end - self.next);
        for v in self.next..self.next + n {
            out.push(v);
        }
        self.next += n;
        if self.next == end {
            self.wait_for = Some(self.cuts.get() + self.after);
        }
        Ok(SourceStatus::More)
    }

    fn snapshot(&self) -> Option<Vec<spate::types::SplitPosition>> {
        self.cuts.set(self.cuts.get() + 1);
        None
    }
}

/// [`counting`] reading `source`.
fn counting_from(
    source: impl spate::types::Source<u64>,
    backend: StateBackend,
    workers: usize,
    checkpoints: Option<(&Path, Option<String>)>,
) -> SpateResult<(Metrics, Counts)> {
    let mut config = JobConfig::local(workers);
    config.state_backend = backend;
    if let Some((dir, restore)) = checkpoints {
        config.checkpoint_interval = Some(Duration::from_millis(100));
        config.checkpoint_dir = Some(dir.display().to_string());
        config.restore = restore;
        config.restart_strategy = spate::dataflow::RestartStrategy::None;
    }
    let env = StreamEnv::new(config);
    let out = env
        .from_source(source)
        .key_by(|v: &u64| key_of(*v))
        .process_with_state(
            |k: &u64, state: &mut Option<(u64, u64)>, v: u64, out: &mut Vec<(u64, u64, u64)>| {
                let (n, sum) = state.get_or_insert((0, 0));
                *n += 1;
                *sum += v;
                out.push((*k, *n, *sum));
            },
        )
        .collect();
    let result = env.execute("counting")?;
    let mut last = BTreeMap::new();
    for (k, n, sum) in out.take() {
        let e = last.entry(k).or_insert((0, 0));
        if n > e.0 {
            *e = (n, sum);
        }
    }
    Ok((result.metrics, last))
}

fn oracle() -> BTreeMap<u64, (u64, u64)> {
    let mut m = BTreeMap::new();
    for v in 0..EVENTS {
        let e = m.entry(key_of(v)).or_insert((0, 0));
        e.0 += 1;
        e.1 += v;
    }
    m
}

#[test]
fn state_larger_than_the_cache_is_exact() {
    // 20 008 keys over two workers through a cache of 500 keys each.
    let (_, got) = counting(disk(500, 4), 2, None).unwrap();
    assert_eq!(got, oracle());
}

#[test]
fn incremental_checkpoints_upload_only_what_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let metric = |m: &BTreeMap<String, u64>, name: &str| {
        m.get(&format!("checkpoints.{name}")).copied().unwrap_or(0)
    };
    // Two complete checkpoints cut after each phase.
    let phased = |dir: &Path| Phased {
        dir: dir.to_owned(),
        after: 2,
    };
    let (full_dir, incr_dir) = (tmp.path().join("full"), tmp.path().join("incr"));
    let (full, got) = counting_from(
        phased(&full_dir),
        disk(1_000, 0),
        1,
        Some((&full_dir, None)),
    )
    .unwrap();
    assert_eq!(got, oracle());
    let (incr, got) = counting_from(
        phased(&incr_dir),
        disk(1_000, 1_000),
        1,
        Some((&incr_dir, None)),
    )
    .unwrap();
    assert_eq!(got, oracle());
    for m in [&full, &incr] {
        assert!(metric(m, "numberOfCompletedCheckpoints") >= 2, "{m:?}");
    }
    // The last checkpoint holds every key either way; the full one uploads all of it, the
    // incremental one the few keys that changed since the one before (and refers to the rest).
    let (full_size, full_up) = (
        metric(&full, "lastCheckpointSize"),
        metric(&full, "lastCheckpointUploadedBytes"),
    );
    let (incr_size, incr_up) = (
        metric(&incr, "lastCheckpointSize"),
        metric(&incr, "lastCheckpointUploadedBytes"),
    );
    // For BENCHMARKS.md ("State backends"): `cargo test --test it upload_only -- --nocapture`.
    println!(
        "full: last {full_size} B (uploaded {full_up} B), all uploads {} B, {} ms; \
         incremental: last {incr_size} B (uploaded {incr_up} B), all uploads {} B, {} ms",
        metric(&full, "totalUploadedBytes"),
        metric(&full, "lastCheckpointDuration"),
        metric(&incr, "totalUploadedBytes"),
        metric(&incr, "lastCheckpointDuration"),
    );
    assert!(full_size > WIDE * 10, "{full:?}");
    assert_eq!(full_up, full_size, "a full checkpoint uploads everything");
    assert!(incr_size >= full_size, "{incr:?}");
    assert!(
        incr_up * 10 < full_up,
        "incremental {incr_up} bytes uploaded, full {full_up}"
    );
}

#[test]
fn a_restore_reads_the_chain_and_refuses_a_damaged_file() {
    let tmp = tempfile::tempdir().unwrap();
    let ckpt = tmp.path().join("c");
    counting(disk(1_000, 1_000), 2, Some((&ckpt, None))).unwrap();
    // The newest complete checkpoint refers to files of earlier ones: its chains' bases at
    // least. (A later directory may be a checkpoint given up when the job ended.)
    let newest = std::fs::read_dir(&ckpt)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("_manifest.json").exists())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix("chk-")?.parse::<u64>().ok()
        })
        .max()
        .unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(ckpt.join(format!("chk-{newest}/_manifest.json"))).unwrap(),
    )
    .unwrap();
    let shared: Vec<(String, u64)> = manifest["manifest"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_owned(),
                f["checkpoint_id"].as_u64().unwrap(),
            )
        })
        .filter(|(_, owner)| *owner != newest)
        .collect();
    let (name, owner) = shared
        .iter()
        .find(|(n, _)| n.ends_with(".base"))
        .unwrap_or_else(|| panic!("no shared base in {manifest}"))
        .clone();

    // A copy to damage: the restore below takes checkpoints of its own, and retention then
    // deletes the old chains.
    let damaged = tmp.path().join("d");
    copy_dir(&ckpt, &damaged);

    // Restored as it is (on 3 workers), the state goes on from where it was.
    let restore = Some(ckpt.join(format!("chk-{newest}")).display().to_string());
    let (m, got) = counting(disk(1_000, 1_000), 3, Some((&ckpt, restore))).unwrap();
    assert!(m.contains_key("checkpoints.numberOfCompletedCheckpoints"));
    // The sequence source restarts after its end: no record, the state is what it was.
    assert!(got.is_empty(), "nothing new to count: {}", got.len());

    // One flipped byte in a shared base: the restore fails and names the file.
    let path = damaged.join(format!("chk-{owner}")).join(&name);
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();
    let restore = Some(damaged.join(format!("chk-{newest}")).display().to_string());
    let err = counting(disk(1_000, 1_000), 2, Some((&damaged, restore)))
        .expect_err("a damaged chain fails the restore")
        .to_string();
    // Storage verifies checksums before the restore reads anything.
    assert!(
        (err.contains("corrupt") || err.contains("checksum")) && err.contains(&name),
        "{err}"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}
