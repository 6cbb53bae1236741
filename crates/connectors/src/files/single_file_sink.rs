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

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use spate_types::{Sink, SinkContext, SinkWriter, SpateError, SpateResult};

use super::encode::{custom_rows, json_rows, EncoderFactory, LineEncoder, RowEncoder};
use super::file_sink::DEFAULT_WRITE_BUFFER;
use super::part::{ensure_dir, InProgressPart};

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
        let part = if ctx.worker_index == 0 {
            let name = self.path.file_name().ok_or_else(|| {
                SpateError::Config(format!(
                    "{}: the output path of a single-file sink must name a file",
                    self.path.display()
                ))
            })?;
            let dir = self.path.parent().unwrap_or(Path::new(""));
            ensure_dir(dir)?;
            let hidden = dir.join(format!(".{}.inprogress", name.to_string_lossy()));
            Some(InProgressPart::create(
                hidden,
                self.path.clone(),
                self.buffer,
                Instant::now(),
            )?)
        } else {
            None
        };
        let mut encoder = (self.encoder)();
        encoder.begin_file();
        Ok(Box::new(SingleFileWriter {
            path: self.path.clone(),
            worker: ctx.worker_index,
            encoder,
            part,
            rows: Vec::new(),
        }))
    }
}

/// One worker's writer of a [`SingleFileSink`].
struct SingleFileWriter<T> {
    path: PathBuf,
    worker: usize,
    encoder: Box<dyn RowEncoder<T>>,
    /// The open file, on worker 0 until closed.
    part: Option<InProgressPart>,
    rows: Vec<u8>,
}

impl<T> SinkWriter<T> for SingleFileWriter<T> {
    fn write_batch(&mut self, records: &mut Vec<T>) -> SpateResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        let Some(part) = self.part.as_mut() else {
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
        part.write(&self.rows, Instant::now())
    }

    fn close(&mut self) -> SpateResult<()> {
        if let Some(part) = self.part.take() {
            part.close()?.commit()?;
        }
        Ok(())
    }
}
