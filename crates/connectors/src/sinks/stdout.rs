//! The stdout sink: one JSON line per record on standard output.
//!
//! Each writer encodes records into its own buffer and writes whole buffers to stdout under
//! its lock (so lines of different workers never mix), when the buffer passes 64 KiB, at every
//! `tick` and at `close`.
//!
//! A closed pipe (`spate ... | head`) is not an error: like `ripgrep` and other Unix tools, the
//! writer then stops writing quietly (it logs once at debug level and discards the rest), so
//! the job ends normally instead of failing or panicking. Other write errors fail the job.
//!
//! **At least once** under checkpoints: printed lines cannot be taken back, so after a failure
//! and a restore the records between the checkpoint and the failure are printed again. Use the
//! [`FileSink`](crate::files::FileSink) or [`SingleFileSink`](crate::files::SingleFileSink)
//! (two-phase commit) for exactly-once output.

use std::io::{self, Write};
use std::marker::PhantomData;

use serde::Serialize;
use spate_types::{Sink, SinkContext, SinkWriter, SpateError, SpateResult};

/// The buffer size at which a writer writes to stdout.
const FLUSH_AT: usize = 64 * 1024;

/// A sink that prints every record as one JSON line on stdout. See the [module docs](self).
pub struct StdoutSink<T> {
    _records: PhantomData<fn(T)>,
}

impl<T: Serialize + Send + 'static> StdoutSink<T> {
    /// A sink that prints JSON lines on stdout.
    pub fn new() -> Self {
        StdoutSink {
            _records: PhantomData,
        }
    }
}

impl<T: Serialize + Send + 'static> Default for StdoutSink<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Serialize + Send + 'static> Sink<T> for StdoutSink<T> {
    fn name(&self) -> String {
        "stdout".to_owned()
    }

    fn create_writer(&self, _ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<T>>> {
        Ok(Box::new(LineWriter::new(|| io::stdout().lock())))
    }
}

/// Writes JSON lines to a shared output (stdout, or a test's buffer), in whole buffers.
pub(crate) struct LineWriter<W, T> {
    output: fn() -> W,
    buf: Vec<u8>,
    /// Set when the reader of the pipe went away: everything else is discarded.
    broken: bool,
    _records: PhantomData<fn(T)>,
}

impl<W: Write, T> LineWriter<W, T> {
    pub fn new(output: fn() -> W) -> Self {
        LineWriter {
            output,
            buf: Vec::with_capacity(FLUSH_AT * 2),
            broken: false,
            _records: PhantomData,
        }
    }

    fn flush_buf(&mut self) -> SpateResult<()> {
        if self.buf.is_empty() || self.broken {
            self.buf.clear();
            return Ok(());
        }
        let mut out = (self.output)();
        let result = out.write_all(&self.buf).and_then(|()| out.flush());
        self.buf.clear();
        match result {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                tracing::debug!("stdout was closed: discarding the rest of the output");
                self.broken = true;
                Ok(())
            }
            Err(e) => Err(SpateError::io_context("cannot write to stdout", e)),
        }
    }
}

impl<W: Write, T: Serialize> SinkWriter<T> for LineWriter<W, T> {
    fn write_batch(&mut self, records: &mut Vec<T>) -> SpateResult<()> {
        if self.broken {
            records.clear();
            return Ok(());
        }
        for record in records.drain(..) {
            serde_json::to_writer(&mut self.buf, &record).map_err(|e| {
                SpateError::Job(format!("stdout sink: cannot encode a record as JSON: {e}"))
            })?;
            self.buf.push(b'\n');
            if self.buf.len() >= FLUSH_AT {
                self.flush_buf()?;
            }
        }
        Ok(())
    }

    fn tick(&mut self, _now: std::time::Instant) -> SpateResult<()> {
        self.flush_buf()
    }

    fn close(&mut self) -> SpateResult<()> {
        self.flush_buf()
    }
}

/// A writer that prints one line per record on stdout, made by `encode` (which appends the
/// line, with or without its `\n`), with the buffering and closed-pipe handling of
/// [`StdoutSink`]: for sinks that print their own format (the Python front's `print()`).
pub fn stdout_line_writer<T: Send + 'static>(
    encode: crate::files::LineEncoder<T>,
) -> Box<dyn SinkWriter<T>> {
    Box::new(EncodedLines {
        lines: LineWriter::<_, ()>::new(|| io::stdout().lock()),
        encode,
    })
}

struct EncodedLines<W, T> {
    lines: LineWriter<W, ()>,
    encode: crate::files::LineEncoder<T>,
}

impl<W: Write, T> SinkWriter<T> for EncodedLines<W, T> {
    fn write_batch(&mut self, records: &mut Vec<T>) -> SpateResult<()> {
        if self.lines.broken {
            records.clear();
            return Ok(());
        }
        for record in records.drain(..) {
            let start = self.lines.buf.len();
            (self.encode)(&record, &mut self.lines.buf);
            if self.lines.buf.len() == start || self.lines.buf.last() != Some(&b'\n') {
                self.lines.buf.push(b'\n');
            }
            if self.lines.buf.len() >= FLUSH_AT {
                self.lines.flush_buf()?;
            }
        }
        Ok(())
    }

    fn tick(&mut self, _now: std::time::Instant) -> SpateResult<()> {
        self.lines.flush_buf()
    }

    fn close(&mut self) -> SpateResult<()> {
        self.lines.flush_buf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    static OUT: Mutex<Vec<u8>> = Mutex::new(Vec::new());

    struct Shared;
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            OUT.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    struct ClosedPipe;
    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    struct Full;
    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::other("disk full"))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn writes_json_lines_at_tick() {
        let mut writer = LineWriter::<_, (u32, &str)>::new(|| Shared);
        writer.write_batch(&mut vec![(1, "a"), (2, "b")]).unwrap();
        assert!(OUT.lock().unwrap().is_empty(), "buffered until tick");
        writer.tick(std::time::Instant::now()).unwrap();
        assert_eq!(OUT.lock().unwrap().as_slice(), b"[1,\"a\"]\n[2,\"b\"]\n");
    }

    #[test]
    fn broken_pipe_stops_quietly() {
        let mut writer = LineWriter::<_, u32>::new(|| ClosedPipe);
        let mut many: Vec<u32> = (0..100_000).collect();
        writer.write_batch(&mut many).unwrap();
        assert!(many.is_empty());
        writer.write_batch(&mut vec![1]).unwrap();
        writer.close().unwrap();
        assert!(writer.broken);
    }

    #[test]
    fn other_errors_fail() {
        let mut writer = LineWriter::<_, u32>::new(|| Full);
        writer.write_batch(&mut vec![1]).unwrap();
        assert_eq!(
            writer.close().unwrap_err().to_string(),
            "cannot write to stdout: disk full"
        );
    }
}
