//! The socket text source, like Flink's `socketTextStream`: lines of text from one TCP
//! connection.
//!
//! Worker 0 connects when its reader is created (a connection failure fails the job at once,
//! naming `host:port`); the other workers get a reader that is finished at once, since one
//! connection cannot be shared. Lines are read on a background thread (see the crate's
//! `lines` module), so a poll never blocks: it returns `Idle` while nothing has arrived, and
//! `Finished` once the peer closed the connection and every line was delivered. A trailing
//! `\r` is stripped; empty lines are delivered as empty strings, as in Flink. A line that is
//! not valid UTF-8 follows the [`BadRecordPolicy`] (default: fail).
//!
//! Unlike Flink's, this source does not reconnect when the connection drops.
//!
//! For a quick test, serve lines with `nc -lk 9999`.

use std::net::TcpStream;

use spate_types::{BadRecordPolicy, Source, SourceContext, SourceReader, SpateError, SpateResult};

use crate::lines::{spawn_line_thread, ChannelLineReader, FinishedReader};

/// A source of text lines from a TCP server. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct SocketTextSource {
    host: String,
    port: u16,
    policy: BadRecordPolicy,
}

impl SocketTextSource {
    /// Reads the lines that the server at `host:port` sends.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        SocketTextSource {
            host: host.into(),
            port,
            policy: BadRecordPolicy::Fail,
        }
    }

    /// Sets what happens to lines that are not valid UTF-8 (default: fail the job).
    pub fn policy(mut self, policy: BadRecordPolicy) -> Self {
        self.policy = policy;
        self
    }

    fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port) // An IPv6 literal.
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl Source<String> for SocketTextSource {
    fn name(&self) -> String {
        format!("socket:{}", self.address())
    }

    /// A socket has no end of its own (the stream still finishes when the peer closes).
    fn is_bounded(&self) -> bool {
        false
    }

    fn dead_letter_sink(
        &self,
    ) -> Option<std::sync::Arc<dyn spate_types::Sink<spate_types::DeadLetter>>> {
        crate::bad::dead_letter_sink(&self.policy)
    }

    fn create_reader(&self, ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<String>>> {
        if ctx.worker_index != 0 {
            return Ok(Box::new(FinishedReader));
        }
        let address = self.address();
        let stream = TcpStream::connect((self.host.as_str(), self.port)).map_err(|e| {
            SpateError::io_context(
                format!(
                    "cannot connect the socket source to {address} (is a server listening there? for a test, run `nc -lk {}`)",
                    self.port
                ),
                e,
            )
        })?;
        let context =
            |e| SpateError::io_context(format!("cannot read from the socket source {address}"), e);
        let shutdown = stream.try_clone().map_err(context)?;
        let rx = spawn_line_thread("spate-socket-source", stream).map_err(context)?;
        Ok(Box::new(ChannelLineReader::new(
            format!("socket {address}"),
            self.policy.clone(),
            rx,
            Some(shutdown),
        )))
    }
}
