//! The rolling file sink, after Flink's `FileSink` with row formats.
//!
//! Each worker writes its own part files into one directory, named
//! `part-<worker>-<counter>.<ext>`. The open part is written under a hidden in-progress name,
//! `.part-<worker>-<counter>.<ext>.inprogress`, and renamed to its final name when it rolls or
//! when the sink closes, so a reader of the directory (including Spate's own file sources, which
//! skip `.`-files) only ever sees finished files. A part is opened only for a record, so parts
//! are never empty.
//!
//! When to roll is decided by a [`RollingPolicy`], Flink's `DefaultRollingPolicy`.
//!
//! A writer's counter starts after the highest part number that worker already has in the
//! directory, so a second run adds parts instead of overwriting the first run's (Flink uses a
//! fresh prefix per run for the same reason).
//!
//! A writer dropped without `close` (a failed job) leaves its in-progress part behind, hidden.
//!
//! Without checkpoints, parts are finished at once. Under checkpoints they commit in two
//! phases: a part closed before a checkpoint's cut stays pending (hidden) until that checkpoint
//! completes, and a restore publishes what its checkpoint had pending, so output is exactly
//! once.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use spate_types::{Sink, SinkContext, SinkWriter, SpateError, SpateResult};

use super::encode::{
    csv_rows, custom_rows, json_rows, CsvOptions, EncoderFactory, LineEncoder, RowEncoder,
};
use super::part::{ensure_dir, InProgressPart, PendingPart};

/// The default write buffer of a part file: 1 MiB.
pub const DEFAULT_WRITE_BUFFER: usize = 1 << 20;

/// When a part file is finished and a new one started: Flink's `DefaultRollingPolicy`.
///
/// A part rolls before a record is written to it if it already holds `max_part_size_bytes` or
/// more; and, checked at every [`SinkWriter::tick`], when it has been open for
/// `rollover_interval` or more, or when no record was written to it for `inactivity_interval`
/// or more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RollingPolicy {
    /// The size at which a part is finished (default 128 MiB).
    pub max_part_size_bytes: u64,
    /// The longest time a part stays open (default 60 s).
    pub rollover_interval: Duration,
    /// The longest time a part stays open without a record (default 60 s).
    pub inactivity_interval: Duration,
}

impl Default for RollingPolicy {
    fn default() -> Self {
        RollingPolicy {
            max_part_size_bytes: 128 << 20,
            rollover_interval: Duration::from_secs(60),
            inactivity_interval: Duration::from_secs(60),
        }
    }
}

impl RollingPolicy {
    /// Sets the size at which a part is finished.
    pub fn with_max_part_size(mut self, bytes: u64) -> Self {
        self.max_part_size_bytes = bytes;
        self
    }

    /// Sets the longest time a part stays open.
    pub fn with_rollover_interval(mut self, interval: Duration) -> Self {
        self.rollover_interval = interval;
        self
    }

    /// Sets the longest time a part stays open without a record.
    pub fn with_inactivity_interval(mut self, interval: Duration) -> Self {
        self.inactivity_interval = interval;
        self
    }

    /// Whether a part of `size` bytes must roll before the next record is written to it.
    pub fn should_roll_on_event(&self, size: u64) -> bool {
        size >= self.max_part_size_bytes
    }

    /// Whether a part opened at `created` and last written at `last_write` must roll at `now`.
    pub fn should_roll_on_processing_time(
        &self,
        created: Instant,
        last_write: Instant,
        now: Instant,
    ) -> bool {
        now.saturating_duration_since(created) >= self.rollover_interval
            || now.saturating_duration_since(last_write) >= self.inactivity_interval
    }
}

/// A sink that writes rolling part files into a directory: JSON lines, CSV, or lines from a
/// custom encoder. See the [module docs](self).
///
/// ```no_run
/// # use spate_connectors::files::{FileSink, RollingPolicy};
/// #[derive(serde::Serialize)]
/// struct Alert { sensor: u32, delta: f64 }
/// let sink = FileSink::<Alert>::json_lines("/out/alerts")
///     .rolling_policy(RollingPolicy::default().with_max_part_size(16 << 20));
/// ```
pub struct FileSink<T> {
    dir: PathBuf,
    extension: String,
    format: &'static str,
    encoder: EncoderFactory<T>,
    csv: Option<CsvOptions>,
    policy: RollingPolicy,
    buffer: usize,
}

impl<T: Serialize + Send + 'static> FileSink<T> {
    /// Writes JSON lines (with `serde_json`) into part files `part-<worker>-<n>.jsonl` of `dir`.
    pub fn json_lines(dir: impl Into<PathBuf>) -> Self {
        Self::build(dir.into(), "jsonl", "JSON lines", json_rows(), None)
    }

    /// Writes CSV rows (with the `csv` crate's serde support) into part files
    /// `part-<worker>-<n>.csv` of `dir`; by default each part starts with a header row and the
    /// delimiter is `,`. `T` must be a flat struct or tuple.
    pub fn csv(dir: impl Into<PathBuf>) -> Self {
        let options = CsvOptions::default();
        Self::build(dir.into(), "csv", "CSV", csv_rows(options), Some(options))
    }

    /// Sets whether every CSV part starts with a header row (default `true`). Ignored by the
    /// other formats.
    pub fn csv_header(mut self, yes: bool) -> Self {
        if let Some(options) = &mut self.csv {
            options.header = yes;
            self.encoder = csv_rows(*options);
        }
        self
    }

    /// Sets the CSV field delimiter (default `b','`). Ignored by the other formats.
    pub fn csv_delimiter(mut self, delimiter: u8) -> Self {
        if let Some(options) = &mut self.csv {
            options.delimiter = delimiter;
            self.encoder = csv_rows(*options);
        }
        self
    }
}

impl<T: Send + 'static> FileSink<T> {
    /// Writes one line per record, produced by `encoder` (which appends the line, with or
    /// without its `\n`; see [`LineEncoder`]), into part files `part-<worker>-<n>.<extension>` of `dir` (no extension if empty).
    pub fn with_encoder(
        dir: impl Into<PathBuf>,
        extension: impl Into<String>,
        encoder: LineEncoder<T>,
    ) -> Self {
        Self::build(
            dir.into(),
            &extension.into(),
            "lines",
            custom_rows(encoder),
            None,
        )
    }

    fn build(
        dir: PathBuf,
        extension: &str,
        format: &'static str,
        encoder: EncoderFactory<T>,
        csv: Option<CsvOptions>,
    ) -> Self {
        FileSink {
            dir,
            extension: extension.trim_start_matches('.').to_owned(),
            format,
            encoder,
            csv,
            policy: RollingPolicy::default(),
            buffer: DEFAULT_WRITE_BUFFER,
        }
    }

    /// Sets when part files roll (default: [`RollingPolicy::default`]).
    pub fn rolling_policy(mut self, policy: RollingPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Sets the extension of the part files (without the dot; empty for none).
    pub fn extension(mut self, extension: impl Into<String>) -> Self {
        self.extension = extension.into().trim_start_matches('.').to_owned();
        self
    }

    /// Sets the write buffer of each part file (default 1 MiB).
    pub fn write_buffer(mut self, bytes: usize) -> Self {
        self.buffer = bytes.max(1);
        self
    }

    /// The directory this sink writes into.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl<T: Send + 'static> Sink<T> for FileSink<T> {
    fn name(&self) -> String {
        format!("files:{}", self.dir.display())
    }

    fn create_writer(&self, ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<T>>> {
        ensure_dir(&self.dir)?;
        let suffix = if self.extension.is_empty() {
            String::new()
        } else {
            format!(".{}", self.extension)
        };
        let worker = ctx.worker_index;
        let counter = next_part_counter(&self.dir, worker, &suffix)?;
        Ok(Box::new(FileSinkWriter {
            dir: self.dir.clone(),
            suffix,
            format: self.format,
            worker,
            counter,
            encoder: (self.encoder)(),
            policy: self.policy,
            buffer: self.buffer,
            part: None,
            row: Vec::new(),
            finished: Vec::new(),
            transactional: false,
            uncheckpointed: Vec::new(),
            prepared: BTreeMap::new(),
        }))
    }
}

/// The final name of part `counter` of `worker`.
fn part_name(worker: usize, counter: u64, suffix: &str) -> String {
    format!("part-{worker}-{counter}{suffix}")
}

/// One past the highest part number of `worker` already in `dir` (0 if none).
fn next_part_counter(dir: &Path, worker: usize, suffix: &str) -> SpateResult<u64> {
    let prefix = format!("part-{worker}-");
    let entries = fs::read_dir(dir).map_err(|e| {
        super::discover::io_error(
            dir,
            "cannot list the output directory (check its permissions)",
            e,
        )
    })?;
    let mut next = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let number = name
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(suffix))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(n) = number {
            next = next.max(n.saturating_add(1));
        }
    }
    Ok(next)
}

/// One worker's writer of a [`FileSink`].
struct FileSinkWriter<T> {
    dir: PathBuf,
    suffix: String,
    format: &'static str,
    worker: usize,
    counter: u64,
    encoder: Box<dyn RowEncoder<T>>,
    policy: RollingPolicy,
    buffer: usize,
    part: Option<InProgressPart>,
    /// The encoded row of the current record.
    row: Vec<u8>,
    /// The final paths of the parts this writer finished (for tests and logs).
    finished: Vec<PathBuf>,
    /// Under checkpoints, parts are published only when a checkpoint covering them completes.
    transactional: bool,
    /// Closed parts not yet covered by a checkpoint.
    uncheckpointed: Vec<PendingPart>,
    /// Closed parts per checkpoint that covers them, waiting for it to complete.
    prepared: BTreeMap<u64, Vec<PendingPart>>,
}

impl<T> FileSinkWriter<T> {
    fn open_part(&mut self, now: Instant) -> SpateResult<InProgressPart> {
        let name = part_name(self.worker, self.counter, &self.suffix);
        self.counter += 1;
        let part = InProgressPart::create(
            self.dir.join(format!(".{name}.inprogress")),
            self.dir.join(name),
            self.buffer,
            now,
        )?;
        self.encoder.begin_file();
        Ok(part)
    }

    /// Finishes the open part, if any: in progress → finished (later: in progress → pending,
    /// and pending → finished when the checkpoint completes).
    fn finish_part(&mut self) -> SpateResult<()> {
        if let Some(part) = self.part.take() {
            let pending = part.close()?;
            if self.transactional {
                self.uncheckpointed.push(pending);
            } else {
                let path = pending.commit()?;
                tracing::debug!(path = %path.display(), "finished a part file");
                self.finished.push(path);
            }
        }
        Ok(())
    }

    fn publish(&mut self, parts: Vec<PendingPart>) -> SpateResult<()> {
        for pending in parts {
            let path = pending.commit()?;
            tracing::debug!(path = %path.display(), "published a part file");
            self.finished.push(path);
        }
        Ok(())
    }
}

impl<T> SinkWriter<T> for FileSinkWriter<T> {
    fn write_batch(&mut self, records: &mut Vec<T>) -> SpateResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        let now = Instant::now();
        for record in records.drain(..) {
            if self
                .part
                .as_ref()
                .is_some_and(|part| self.policy.should_roll_on_event(part.size))
            {
                self.finish_part()?;
            }
            self.row.clear();
            self.encoder
                .encode(&record, &mut self.row)
                .map_err(|reason| {
                    SpateError::Job(format!(
                        "file sink {}: cannot encode a record as {}: {reason}",
                        self.dir.display(),
                        self.format
                    ))
                })?;
            let mut part = match self.part.take() {
                Some(part) => part,
                None => self.open_part(now)?,
            };
            let written = part.write(&self.row, now);
            self.part = Some(part);
            written?;
        }
        Ok(())
    }

    fn tick(&mut self, now: Instant) -> SpateResult<()> {
        let roll = self.part.as_ref().is_some_and(|part| {
            self.policy
                .should_roll_on_processing_time(part.created, part.last_write, now)
        });
        if roll {
            self.finish_part()?;
        }
        Ok(())
    }

    fn close(&mut self) -> SpateResult<()> {
        self.finish_part()?;
        // The end of the input is the last cut: publish everything (the engine closes sinks
        // only once the final checkpoint, if any, has completed).
        let prepared = std::mem::take(&mut self.prepared);
        for (_, parts) in prepared {
            self.publish(parts)?;
        }
        let rest = std::mem::take(&mut self.uncheckpointed);
        self.publish(rest)
    }

    fn pre_commit(&mut self, checkpoint: u64) -> SpateResult<Vec<u8>> {
        self.transactional = true;
        self.finish_part()?;
        let parts = std::mem::take(&mut self.uncheckpointed);
        self.prepared.entry(checkpoint).or_default().extend(parts);
        // Everything prepared and not yet published: a restore of this checkpoint publishes
        // it (earlier checkpoints may not have completed either).
        let state: Vec<&PendingPart> = self.prepared.values().flatten().collect();
        serde_json::to_vec(&state)
            .map_err(|e| SpateError::Internal(format!("file sink state: {e}")))
    }

    fn commit(&mut self, checkpoint: u64) -> SpateResult<()> {
        let rest = self.prepared.split_off(&(checkpoint + 1));
        let done = std::mem::replace(&mut self.prepared, rest);
        for (_, parts) in done {
            self.publish(parts)?;
        }
        Ok(())
    }

    fn restore(&mut self, states: &[Vec<u8>]) -> SpateResult<()> {
        self.transactional = true;
        for state in states {
            let parts: Vec<PendingPart> = serde_json::from_slice(state).map_err(|e| {
                SpateError::Job(format!(
                    "file sink {}: a checkpoint's sink state is unreadable: {e}",
                    self.dir.display()
                ))
            })?;
            for part in parts {
                part.recommit()?;
            }
        }
        // Continue numbering after what the restore published.
        self.counter = self
            .counter
            .max(next_part_counter(&self.dir, self.worker, &self.suffix)?);
        Ok(())
    }

    fn exactly_once(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rolling_policy_is_flinks_default() {
        let policy = RollingPolicy::default();
        assert_eq!(policy.max_part_size_bytes, 128 * 1024 * 1024);
        assert!(!policy.should_roll_on_event(128 * 1024 * 1024 - 1));
        assert!(policy.should_roll_on_event(128 * 1024 * 1024));
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert!(!policy.should_roll_on_processing_time(t0, t0 + s(30), t0 + s(59)));
        assert!(policy.should_roll_on_processing_time(t0, t0 + s(30), t0 + s(60)));
        let policy = policy.with_rollover_interval(s(1000));
        assert!(!policy.should_roll_on_processing_time(t0, t0 + s(30), t0 + s(89)));
        assert!(policy.should_roll_on_processing_time(t0, t0 + s(30), t0 + s(90)));
        // A clock that goes backwards never rolls.
        assert!(!policy.should_roll_on_processing_time(t0 + s(5), t0 + s(5), t0));
    }

    #[test]
    fn counter_continues_after_existing_parts() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "part-0-0.jsonl",
            "part-0-7.jsonl",
            "part-1-9.jsonl",
            "part-0-x.jsonl",
            ".part-0-20.jsonl.inprogress",
        ] {
            fs::write(dir.path().join(name), "").unwrap();
        }
        assert_eq!(next_part_counter(dir.path(), 0, ".jsonl").unwrap(), 8);
        assert_eq!(next_part_counter(dir.path(), 1, ".jsonl").unwrap(), 10);
        assert_eq!(next_part_counter(dir.path(), 2, ".jsonl").unwrap(), 0);
        assert_eq!(next_part_counter(dir.path(), 0, ".csv").unwrap(), 0);
    }

    fn visible(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        names
    }

    fn read_visible(dir: &Path) -> Vec<u32> {
        let mut rows: Vec<u32> = visible(dir)
            .iter()
            .flat_map(|n| {
                fs::read_to_string(dir.join(n))
                    .unwrap()
                    .lines()
                    .map(|l| l.parse().unwrap())
                    .collect::<Vec<u32>>()
            })
            .collect();
        rows.sort();
        rows
    }

    #[test]
    fn two_phase_commit_publishes_only_completed_checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        let sink = FileSink::<u32>::json_lines(dir.path());
        let ctx = SinkContext {
            worker_index: 0,
            workers: 1,
        };
        let mut w = sink.create_writer(&ctx).unwrap();
        w.write_batch(&mut vec![1, 2]).unwrap();
        let _ = w.pre_commit(1).unwrap();
        assert!(visible(dir.path()).is_empty(), "pre-committed is hidden");
        w.write_batch(&mut vec![3]).unwrap();
        let state2 = w.pre_commit(2).unwrap();
        w.commit(1).unwrap();
        assert_eq!(read_visible(dir.path()), [1, 2]);
        // Records after checkpoint 2, then a crash: a new writer restores checkpoint 2.
        w.write_batch(&mut vec![4, 5]).unwrap();
        drop(w);
        let mut again = sink.create_writer(&ctx).unwrap();
        again.restore(&[state2.clone(), state2]).unwrap();
        assert_eq!(
            read_visible(dir.path()),
            [1, 2, 3],
            "4 and 5 are replayed, not kept"
        );
        again.write_batch(&mut vec![4, 5]).unwrap();
        again.close().unwrap();
        assert_eq!(read_visible(dir.path()), [1, 2, 3, 4, 5]);
    }

    #[test]
    fn writer_remembers_finished_parts() {
        let dir = tempfile::tempdir().unwrap();
        let sink = FileSink::<u32>::json_lines(dir.path())
            .rolling_policy(RollingPolicy::default().with_max_part_size(1));
        let ctx = SinkContext {
            worker_index: 3,
            workers: 4,
        };
        let mut writer = FileSinkWriter {
            dir: sink.dir.clone(),
            suffix: ".jsonl".into(),
            format: sink.format,
            worker: ctx.worker_index,
            counter: 0,
            encoder: (sink.encoder)(),
            policy: sink.policy,
            buffer: 16,
            part: None,
            row: Vec::new(),
            finished: Vec::new(),
            transactional: false,
            uncheckpointed: Vec::new(),
            prepared: BTreeMap::new(),
        };
        writer.write_batch(&mut vec![1, 2]).unwrap();
        writer.close().unwrap();
        let names: Vec<_> = writer
            .finished
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["part-3-0.jsonl", "part-3-1.jsonl"]);
    }
}
