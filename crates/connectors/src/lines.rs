//! Text lines read on a background thread: the shared engine of the socket and stdin sources.
//!
//! A blocking input (a socket, stdin) cannot be read from the worker's loop, which must never
//! block. A background thread reads it in chunks, cuts complete lines out of them, and sends
//! each chunk's lines as one batch into a bounded channel (so a slow job holds back the
//! reader instead of buffering without limit). The reader on the worker thread only takes
//! what is already in the channel: [`SourceStatus::Idle`] when nothing is, and
//! [`SourceStatus::Finished`] once the input ended and every line was delivered.
//!
//! A socket or stdin cannot be read again, so these readers have no split positions
//! ([`SourceReader::snapshot`] is `None`): after a restore they go on with whatever the input
//! gives next (at most once). The file sources replay exactly.

use std::io::{self, Read};
use std::net::{Shutdown, TcpStream};

use crossbeam_channel::{Receiver, TryRecvError};
use spate_types::{
    BadRecordPolicy, SourceOutput, SourceReader, SourceStatus, SpateError, SpateResult,
};

use crate::bad::handle_bad_record;

/// The number of batches the channel holds before the background thread waits.
pub(crate) const CHANNEL_BATCHES: usize = 1024;

/// The size of each read of the background thread.
const CHUNK: usize = 64 * 1024;

/// What the background thread sends.
pub(crate) enum Message {
    /// Complete lines (without their `\n`), the first of which has the 1-based number
    /// `first_line`.
    Lines {
        first_line: u64,
        lines: Vec<Vec<u8>>,
    },
    /// The input failed; nothing follows.
    Failed(io::Error),
}

/// Starts a thread that reads `input` to its end and sends its lines. The channel closes
/// when the input ends, fails, or the receiver is dropped.
pub(crate) fn spawn_line_thread<R: Read + Send + 'static>(
    thread_name: &str,
    mut input: R,
) -> io::Result<Receiver<Message>> {
    let (tx, rx) = crossbeam_channel::bounded(CHANNEL_BATCHES);
    std::thread::Builder::new()
        .name(thread_name.to_owned())
        .spawn(move || {
            let mut chunk = vec![0u8; CHUNK];
            let mut partial: Vec<u8> = Vec::new();
            let mut next_line = 1u64;
            loop {
                let n = match input.read(&mut chunk) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        let _ = tx.send(Message::Failed(e));
                        return;
                    }
                };
                if n == 0 {
                    if !partial.is_empty() {
                        let lines = vec![std::mem::take(&mut partial)];
                        let _ = tx.send(Message::Lines {
                            first_line: next_line,
                            lines,
                        });
                    }
                    return;
                }
                let mut lines = Vec::new();
                let mut start = 0;
                for nl in memchr::memchr_iter(b'\n', &chunk[..n]) {
                    let mut line = std::mem::take(&mut partial);
                    line.extend_from_slice(&chunk[start..nl]);
                    lines.push(line);
                    start = nl + 1;
                }
                partial.extend_from_slice(&chunk[start..n]);
                if !lines.is_empty() {
                    let first_line = next_line;
                    next_line += lines.len() as u64;
                    if tx.send(Message::Lines { first_line, lines }).is_err() {
                        return; // The reader is gone.
                    }
                }
            }
        })?;
    Ok(rx)
}

/// A reader of the lines that a background thread sends, as `String`s.
pub(crate) struct ChannelLineReader {
    origin: String,
    policy: BadRecordPolicy,
    rx: Receiver<Message>,
    batch: std::vec::IntoIter<Vec<u8>>,
    next_line: u64,
    /// A socket to shut down when the reader is dropped, to stop its thread.
    socket: Option<TcpStream>,
}

impl ChannelLineReader {
    /// A reader of `rx`; `origin` names the input in errors and dead letters.
    pub fn new(
        origin: String,
        policy: BadRecordPolicy,
        rx: Receiver<Message>,
        socket: Option<TcpStream>,
    ) -> Self {
        ChannelLineReader {
            origin,
            policy,
            rx,
            batch: Vec::new().into_iter(),
            next_line: 1,
            socket,
        }
    }
}

impl Drop for ChannelLineReader {
    fn drop(&mut self) {
        if let Some(socket) = &self.socket {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

impl SourceReader<String> for ChannelLineReader {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, String>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        let budget = max_records.max(1);
        let mut lines = 0usize;
        loop {
            if lines >= budget {
                return Ok(SourceStatus::More);
            }
            if let Some(mut raw) = self.batch.next() {
                let number = self.next_line;
                self.next_line += 1;
                lines += 1;
                if raw.last() == Some(&b'\r') {
                    raw.pop();
                }
                match String::from_utf8(raw) {
                    Ok(line) => out.push(line),
                    Err(e) => {
                        let reason = format!("invalid UTF-8: {}", e.utf8_error());
                        handle_bad_record(
                            &self.policy,
                            out,
                            &self.origin,
                            number,
                            &reason,
                            e.as_bytes(),
                        )?;
                    }
                }
                continue;
            }
            let idle = if lines > 0 {
                SourceStatus::More
            } else {
                SourceStatus::Idle
            };
            match self.rx.try_recv() {
                Ok(Message::Lines { first_line, lines }) => {
                    self.next_line = first_line;
                    self.batch = lines.into_iter();
                }
                Ok(Message::Failed(e)) => {
                    return Err(SpateError::io_context(
                        format!("cannot read from {}", self.origin),
                        e,
                    ));
                }
                Err(TryRecvError::Empty) => return Ok(idle),
                Err(TryRecvError::Disconnected) => {
                    return Ok(if lines > 0 {
                        SourceStatus::More
                    } else {
                        SourceStatus::Finished
                    });
                }
            }
        }
    }
}

/// A reader with nothing to read: the reader of the workers that do not read a
/// single-connection input.
pub(crate) struct FinishedReader;

impl<T> SourceReader<T> for FinishedReader {
    fn poll(
        &mut self,
        _out: &mut SourceOutput<'_, T>,
        _max_records: usize,
    ) -> SpateResult<SourceStatus> {
        Ok(SourceStatus::Finished)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Polls until finished (or an error), with a deadline.
    fn drain(
        reader: &mut ChannelLineReader,
        max: usize,
    ) -> (Vec<String>, Vec<spate_types::DeadLetter>, SpateResult<()>) {
        let (mut recs, mut letters, mut dropped) = (Vec::new(), Vec::new(), 0);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut out = SourceOutput::new(&mut recs, &mut letters, &mut dropped);
            match reader.poll(&mut out, max) {
                Ok(SourceStatus::Finished) => return (recs, letters, Ok(())),
                Ok(SourceStatus::Idle) => std::thread::sleep(Duration::from_millis(1)),
                Ok(SourceStatus::More) => {}
                Err(e) => return (recs, letters, Err(e)),
            }
            assert!(Instant::now() < deadline, "the reader did not finish");
        }
    }

    #[test]
    fn lines_across_chunks_with_numbers() {
        let mut text = Vec::new();
        for i in 0..20_000 {
            text.extend_from_slice(format!("line {i}\r\n").as_bytes());
        }
        text.extend_from_slice(b"\n\xffbad\nlast");
        let rx = spawn_line_thread("test-lines", std::io::Cursor::new(text)).unwrap();
        let mut reader = ChannelLineReader::new(
            "test".into(),
            BadRecordPolicy::DeadLetter("/x".into()),
            rx,
            None,
        );
        let (lines, letters, result) = drain(&mut reader, 7);
        result.unwrap();
        assert_eq!(lines.len(), 20_002);
        assert_eq!(lines[19_999], "line 19999");
        assert_eq!(lines[20_000], "");
        assert_eq!(lines[20_001], "last");
        assert_eq!(letters.len(), 1);
        assert_eq!(
            (letters[0].line, letters[0].raw.as_str()),
            (20_002, "\u{fffd}bad")
        );
    }

    #[test]
    fn fail_policy_names_origin_and_line() {
        let rx =
            spawn_line_thread("test-lines", std::io::Cursor::new(b"ok\n\xff\n".to_vec())).unwrap();
        let mut reader = ChannelLineReader::new("stdin".into(), BadRecordPolicy::Fail, rx, None);
        let (lines, _, result) = drain(&mut reader, 100);
        assert_eq!(lines, ["ok"]);
        let msg = result.unwrap_err().to_string();
        assert!(
            msg.starts_with("bad record in stdin line 2: invalid UTF-8"),
            "{msg}"
        );
    }

    #[test]
    fn read_errors_are_reported() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("boom"))
            }
        }
        let rx = spawn_line_thread("test-lines", Broken).unwrap();
        let mut reader = ChannelLineReader::new("stdin".into(), BadRecordPolicy::Fail, rx, None);
        let msg = drain(&mut reader, 100).2.unwrap_err().to_string();
        assert_eq!(msg, "cannot read from stdin: boom");
    }
}
