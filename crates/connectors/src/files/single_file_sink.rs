//! The single-file sink: one output file written by one worker, for small streams that the
//! engine routes to worker 0 (dead letters, the merged output of a query).
//!
//! Worker 0's writer writes into a hidden in-progress file next to the target,
//! `.<name>.inprogress`, and renames it to the target at close, so a reader never sees a half
//! file; a file of the same name is replaced. The file is created when the writer is created,
//! so an empty stream still leaves an (empty) file, and a path that cannot be written fails the
//! job before it starts. The writers of the other workers create nothing; they accept empty
//! batches, and fail with an internal error if they get a record (the stream was not routed to
//! worker 0).
//!
//! # Exactly once under checkpoints (two-phase commit)
//!
//! With checkpoints, the hidden file is the staging area of a two-phase commit, as the rolling
//! [`FileSink`](super::FileSink)'s parts are:
//!
//! * **in progress**: records are appended to `.<name>.inprogress`;
//! * **pending**, at the snapshot of checkpoint `c`: the staging file is flushed and synced,
//!   and its length `L(c)` is the sink's state in the checkpoint;
//! * **finished**, when checkpoint `c` completes: the target file is made to hold exactly the
//!   first `L(c)` staged bytes (the new bytes are appended and synced). At the end of the
//!   input everything is published and the staging file removed.
//!
//! A restore from checkpoint `c` cuts the staging file back to `L(c)` (dropping what the failed
//! run wrote after the cut, which the sources replay) and rewrites the target as those bytes
//! (a copy and an atomic rename), whatever the failed run had published. So the file holds every
//! record of the failure-free run exactly once. This is the path of the dead-letter output, so
//! dead-letter counts stay exact across failures. A reader of the target while the job runs
//! sees whole checkpoints, except that a line being appended at a checkpoint completion may be
//! seen half written (as with any growing log file); the file is complete at the end.
//!
//! Without checkpoints, the target appears whole at close.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use spate_types::{Sink, SinkContext, SinkWriter, SpateError, SpateResult};

use super::discover::io_error;
use super::encode::{custom_rows, json_rows, EncoderFactory, LineEncoder, RowEncoder};
use super::file_sink::DEFAULT_WRITE_BUFFER;
use super::part::ensure_dir;

/// A sink that writes every record into one file, from worker 0. See the [module docs](self).
pub struct SingleFileSink<T> {
    path: PathBuf,
    encoder: EncoderFactory<T>,
    buffer: usize,
}

impl<T: Serialize + Send + 'static> SingleFileSink<T> {
    /// Writes JSON lines (with `serde_json`) into `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::with_factory(path.into(), json_rows())
    }
}

impl<T: Send + 'static> SingleFileSink<T> {
    /// Writes one line per record into `path`, produced by `encoder` (which appends the line,
    /// with or without its `\n`; see [`LineEncoder`]).
    pub fn with_encoder(path: impl Into<PathBuf>, encoder: LineEncoder<T>) -> Self {
        Self::with_factory(path.into(), custom_rows(encoder))
    }

    fn with_factory(path: PathBuf, encoder: EncoderFactory<T>) -> Self {
        SingleFileSink {
            path,
            encoder,
            buffer: DEFAULT_WRITE_BUFFER,
        }
    }

    /// Sets the write buffer (default 1 MiB).
    pub fn write_buffer(mut self, bytes: usize) -> Self {
        self.buffer = bytes.max(1);
        self
    }

    /// The file this sink writes.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl<T: Send + 'static> Sink<T> for SingleFileSink<T> {
    fn name(&self) -> String {
        format!("file:{}", self.path.display())
    }

    fn create_writer(&self, ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<T>>> {
        let staging = if ctx.worker_index == 0 {
            let name = self.path.file_name().ok_or_else(|| {
                SpateError::Config(format!(
                    "{}: the output path of a single-file sink must name a file",
                    self.path.display()
                ))
            })?;
            let dir = self.path.parent().unwrap_or(Path::new(""));
            ensure_dir(dir)?;
            let hidden = dir.join(format!(".{}.inprogress", name.to_string_lossy()));
            // Not truncated yet: a restore that follows keeps its checkpointed prefix.
            let file = OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(false)
                .open(&hidden)
                .map_err(|e| {
                    io_error(
                        &hidden,
                        "cannot create an output file (check the directory's permissions and free space)",
                        e,
                    )
                })?;
            Some(Staging {
                path: hidden,
                writer: BufWriter::with_capacity(self.buffer, file),
                len: 0,
                fresh: true,
            })
        } else {
            None
        };
        let mut encoder = (self.encoder)();
        encoder.begin_file();
        Ok(Box::new(SingleFileWriter {
            path: self.path.clone(),
            worker: ctx.worker_index,
            encoder,
            staging,
            rows: Vec::new(),
            transactional: false,
            prepared: BTreeMap::new(),
            published: None,
        }))
    }
}

/// The hidden file worker 0 writes.
struct Staging {
    path: PathBuf,
    writer: BufWriter<File>,
    /// Bytes written to it (including those still buffered).
    len: u64,
    /// Not yet cut to its start (a fresh run) or to a checkpoint's length (a restore).
    fresh: bool,
}

impl Staging {
    fn error(&self, what: &str, e: io::Error) -> SpateError {
        io_error(&self.path, what, e)
    }

    /// Empties the file of an earlier run, unless a restore already cut it.
    fn ready(&mut self) -> SpateResult<()> {
        if self.fresh {
            self.fresh = false;
            let file = self.writer.get_mut();
            file.set_len(0)
                .and_then(|()| file.seek(SeekFrom::Start(0)).map(drop))
                .map_err(|e| io_error(&self.path, "cannot truncate an output file", e))?;
            self.len = 0;
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> SpateResult<()> {
        self.ready()?;
        self.writer
            .write_all(bytes)
            .map_err(|e| self.error("cannot write an output file (is the disk full?)", e))?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Flushes and syncs: the staged bytes are durable.
    fn sync(&mut self) -> SpateResult<()> {
        self.ready()?;
        self.writer
            .flush()
            .and_then(|()| self.writer.get_ref().sync_data())
            .map_err(|e| self.error("cannot write an output file (is the disk full?)", e))
    }
}

/// What a checkpoint keeps of worker 0's writer: the staged bytes it covers.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Prepared {
    /// The length of the staging file at the cut.
    len: u64,
}

/// One worker's writer of a [`SingleFileSink`].
struct SingleFileWriter<T> {
    path: PathBuf,
    worker: usize,
    encoder: Box<dyn RowEncoder<T>>,
    /// The staging file, on worker 0 until closed.
    staging: Option<Staging>,
    rows: Vec<u8>,
    /// Under checkpoints: the target grows only by what completed checkpoints cover.
    transactional: bool,
    /// Staged lengths per checkpoint, waiting for it to complete.
    prepared: BTreeMap<u64, u64>,
    /// The staged bytes the target holds (`None`: this job has not written it yet).
    published: Option<u64>,
}

impl<T> SingleFileWriter<T> {
    /// Makes the target hold the first `len` staged bytes: appends what it lacks.
    fn publish(&mut self, len: u64) -> SpateResult<()> {
        let Some(staging) = self.staging.as_mut() else {
            return Ok(());
        };
        if self.published.is_some_and(|p| p >= len) {
            return Ok(());
        }
        staging.sync()?;
        let from = self.published.unwrap_or(0);
        let target_err = |e| io_error(&self.path, "cannot write the output file", e);
        let mut target = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(self.published.is_none())
            .open(&self.path)
            .map_err(target_err)?;
        target.seek(SeekFrom::Start(from)).map_err(target_err)?;
        copy_range(&staging.path, from, len, &mut target).map_err(target_err)?;
        target.sync_data().map_err(target_err)?;
        self.published = Some(len);
        Ok(())
    }
}

/// Copies bytes `[from, to)` of the file at `path` into `out`.
fn copy_range(path: &Path, from: u64, to: u64, out: &mut impl Write) -> io::Result<()> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(from))?;
    let copied = io::copy(&mut file.take(to.saturating_sub(from)), out)?;
    if copied < to.saturating_sub(from) {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("{} is shorter than a checkpoint says", path.display()),
        ));
    }
    Ok(())
}

impl<T> SinkWriter<T> for SingleFileWriter<T> {
    fn write_batch(&mut self, records: &mut Vec<T>) -> SpateResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        let Some(staging) = self.staging.as_mut() else {
            records.clear();
            return Err(SpateError::Internal(format!(
                "single-file sink {}: worker {} got records, but only worker 0 writes this file (the stream must be routed to worker 0)",
                self.path.display(),
                self.worker
            )));
        };
        self.rows.clear();
        for record in records.drain(..) {
            self.encoder
                .encode(&record, &mut self.rows)
                .map_err(|reason| {
                    SpateError::Job(format!(
                        "single-file sink {}: cannot encode a record: {reason}",
                        self.path.display()
                    ))
                })?;
        }
        staging.write(&self.rows)
    }

    fn close(&mut self) -> SpateResult<()> {
        let Some(mut staging) = self.staging.take() else {
            return Ok(());
        };
        staging.sync()?;
        if self.transactional {
            // The end of the input is the last cut: publish everything.
            let len = staging.len;
            let path = staging.path.clone();
            self.staging = Some(staging);
            self.publish(len)?;
            self.staging = None;
            fs::remove_file(&path)
                .map_err(|e| io_error(&path, "cannot remove a staging file", e))?;
        } else {
            drop(staging.writer);
            fs::rename(&staging.path, &self.path).map_err(|e| {
                io_error(
                    &self.path,
                    "cannot move a finished output file to its final name",
                    e,
                )
            })?;
        }
        Ok(())
    }

    fn pre_commit(&mut self, checkpoint: u64) -> SpateResult<Vec<u8>> {
        self.transactional = true;
        let Some(staging) = self.staging.as_mut() else {
            return Ok(Vec::new());
        };
        staging.sync()?;
        self.prepared.insert(checkpoint, staging.len);
        serde_json::to_vec(&Prepared { len: staging.len })
            .map_err(|e| SpateError::Internal(format!("single-file sink state: {e}")))
    }

    fn commit(&mut self, checkpoint: u64) -> SpateResult<()> {
        let rest = self.prepared.split_off(&(checkpoint + 1));
        let done = std::mem::replace(&mut self.prepared, rest);
        match done.values().max() {
            Some(&len) => self.publish(len),
            None => Ok(()),
        }
    }

    fn restore(&mut self, states: &[Vec<u8>]) -> SpateResult<()> {
        self.transactional = true;
        let Some(staging) = self.staging.as_mut() else {
            return Ok(());
        };
        // Old worker 0's state; the other old writers had none.
        let mut len = None;
        for state in states.iter().filter(|s| !s.is_empty()) {
            let prepared: Prepared = serde_json::from_slice(state).map_err(|e| {
                SpateError::Job(format!(
                    "single-file sink {}: a checkpoint's sink state is unreadable: {e}",
                    self.path.display()
                ))
            })?;
            len = Some(len.unwrap_or(0).max(prepared.len));
        }
        let len = len.unwrap_or(0);
        staging.fresh = false;
        let staged = staging
            .writer
            .get_ref()
            .metadata()
            .map_err(|e| staging.error("cannot read an output file", e))?
            .len();
        // The staged prefix lives on in the staging file, or (when the failed run had ended and
        // published everything) in the target.
        let source = if staged >= len {
            staging.path.clone()
        } else if fs::metadata(&self.path).is_ok_and(|m| m.len() >= len) {
            self.path.clone()
        } else {
            return Err(SpateError::Job(format!(
                "single-file sink {}: the checkpoint covers {len} bytes, but neither {} nor the output holds them (was the output directory changed?)",
                self.path.display(),
                staging.path.display()
            )));
        };
        if source != staging.path {
            let mut file = File::create(&staging.path)
                .map_err(|e| staging.error("cannot write an output file", e))?;
            copy_range(&source, 0, len, &mut file)
                .map_err(|e| staging.error("cannot write an output file", e))?;
            staging.writer = BufWriter::with_capacity(staging.writer.capacity(), file);
        }
        let file = staging.writer.get_mut();
        file.set_len(len)
            .and_then(|()| file.seek(SeekFrom::Start(len)).map(drop))
            .and_then(|()| file.sync_data())
            .map_err(|e| io_error(&staging.path, "cannot truncate an output file", e))?;
        staging.len = len;
        // The target becomes exactly the checkpoint's bytes, atomically.
        let dir = self.path.parent().unwrap_or(Path::new(""));
        let name = self.path.file_name().unwrap_or_default().to_string_lossy();
        let tmp = dir.join(format!(".{name}.restore"));
        let target_err = |e| io_error(&self.path, "cannot write the output file", e);
        let mut out = File::create(&tmp).map_err(target_err)?;
        copy_range(&staging.path, 0, len, &mut out).map_err(target_err)?;
        out.sync_data().map_err(target_err)?;
        fs::rename(&tmp, &self.path).map_err(target_err)?;
        self.published = Some(len);
        Ok(())
    }

    fn exactly_once(&self) -> bool {
        true
    }
}
