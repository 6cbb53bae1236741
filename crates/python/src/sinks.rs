//! The `print()` sink of Python jobs: one line per record, as Python's `print` shows it, on
//! the engine's stdout line writer (whole buffers under stdout's lock, so lines of different
//! workers never mix; a closed pipe ends the output quietly). At least once under
//! checkpoints (printed lines cannot be taken back).

use std::io::Write;
use std::sync::Arc;

use spate_types::{Sink, SinkContext, SinkWriter, SpateResult};

use crate::record::Rec;

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
        Ok(spate_connectors::sinks::stdout::stdout_line_writer(
            Arc::new(move |r: &Rec, out: &mut Vec<u8>| {
                out.extend_from_slice(prefix.as_bytes());
                let _ = write!(out, "{r}");
            }),
        ))
    }
}
