//! The stdin source: lines of text from the process's standard input.
//!
//! It works like the [socket source](crate::socket): worker 0 reads stdin on a background
//! thread (so a poll never blocks), the other workers get a reader that is finished at once,
//! lines are delivered as `String`s without their `\n` or `\r\n`, and the stream finishes at
//! the end of the input. A line that is not valid UTF-8 follows the [`BadRecordPolicy`]
//! (default: fail). In a job of several processes, only the process of worker 0 reads its
//! stdin.
//!
//! A thread blocked on a terminal cannot be interrupted: if the job stops before the input
//! ends, the thread stays blocked until the process exits.

use spate_types::{BadRecordPolicy, Source, SourceContext, SourceReader, SpateError, SpateResult};

use crate::lines::{spawn_line_thread, ChannelLineReader, FinishedReader};

/// A source of text lines from stdin. See the [module docs](self).
#[derive(Debug, Clone, Default)]
pub struct StdinSource {
    policy: BadRecordPolicy,
}

impl StdinSource {
    /// Reads the lines of stdin.
    pub fn new() -> Self {
        StdinSource::default()
    }

    /// Sets what happens to lines that are not valid UTF-8 (default: fail the job).
    pub fn policy(mut self, policy: BadRecordPolicy) -> Self {
        self.policy = policy;
        self
    }
}

impl Source<String> for StdinSource {
    fn name(&self) -> String {
        "stdin".to_owned()
    }

    /// Stdin may be a terminal with no end (the stream still finishes at the end of input).
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
        let rx = spawn_line_thread("spate-stdin-source", std::io::stdin())
            .map_err(|e| SpateError::io_context("cannot start the thread that reads stdin", e))?;
        Ok(Box::new(ChannelLineReader::new(
            "stdin".to_owned(),
            self.policy.clone(),
            rx,
            None,
        )))
    }
}
