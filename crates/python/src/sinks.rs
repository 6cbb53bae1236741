//! The `print()` sink of Python jobs: one line per record, as Python's `print` shows it.
//!
//! Each writer buffers its lines and writes whole buffers to stdout under its lock, so lines
//! of different workers never mix. A closed pipe ends the output quietly, as it does for
//! the engine's stdout sink. At least once under checkpoints (printed lines cannot be taken
//! back).

use std::io::Write;

use spate_types::{Sink, SinkContext, SinkWriter, SpateError, SpateResult};

use crate::record::Rec;

/// The buffer size at which a writer writes to stdout.
const FLUSH_AT: usize = 64 * 1024;

/// Prints `str(record)` per line, after an optional prefix (PyFlink's `print(sink_identifier)`,
/// which prints `identifier> record`; with parallelism above one, `identifier:worker> record`).
pub struct PrintSink {
    prefix: Option<String>,
}

impl PrintSink {
    pub fn new(prefix: Option<String>) -> Self {
        PrintSink { prefix }
    }
}

impl Sink<Rec> for PrintSink {
    fn name(&self) -> String {
        "print".to_owned()
    }

    fn create_writer(&self, ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<Rec>>> {
        let prefix = match (&self.prefix, ctx.workers) {
            (None, 1) => String::new(),
            (None, _) => format!("{}> ", ctx.worker_index + 1),
            (Some(p), 1) => format!("{p}> "),
            (Some(p), _) => format!("{p}:{}> ", ctx.worker_index + 1),
        };
        Ok(Box::new(PrintWriter {
            prefix,
            buf: Vec::with_capacity(FLUSH_AT * 2),
            broken: false,
        }))
    }
}

struct PrintWriter {
    prefix: String,
    buf: Vec<u8>,
    broken: bool,
}

impl PrintWriter {
    fn flush(&mut self) -> SpateResult<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if !self.broken {
            let mut out = std::io::stdout().lock();
            match out.write_all(&self.buf).and_then(|()| out.flush()) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => self.broken = true,
                Err(e) => return Err(SpateError::io_context("cannot write to stdout", e)),
            }
        }
        self.buf.clear();
        Ok(())
    }
}

impl SinkWriter<Rec> for PrintWriter {
    fn write_batch(&mut self, records: &mut Vec<Rec>) -> SpateResult<()> {
        for r in records.drain(..) {
            self.buf.extend_from_slice(self.prefix.as_bytes());
            let _ = write!(self.buf, "{r}");
            self.buf.push(b'\n');
        }
        if self.buf.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }

    fn tick(&mut self, _now: std::time::Instant) -> SpateResult<()> {
        self.flush()
    }

    fn close(&mut self) -> SpateResult<()> {
        self.flush()
    }
}
