//! Helpers shared by the integration tests.

use spate_nexmark::generator::{GeneratorConfig, NexmarkGenerator};
use spate_nexmark::json::write_event;
use spate_nexmark::model::Event;

/// The shared folder beside the workspace (`/work/shared` on the development machines).
pub const SHARED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared");

/// All events of all partitions of `cfg`, partition by partition.
pub fn generate_all(cfg: &GeneratorConfig) -> Vec<Event> {
    let mut events = Vec::new();
    for p in 0..cfg.partitions {
        let mut generator = NexmarkGenerator::new(cfg, p).expect("valid generator config");
        while generator.fill(&mut events, 4096) > 0 {}
    }
    events
}

/// The JSON lines of `events`.
pub fn to_jsonl(events: &[Event]) -> Vec<u8> {
    let mut out = Vec::with_capacity(events.len() * 300);
    for e in events {
        write_event(e, &mut out);
    }
    out
}

/// The lines of a JSON-lines buffer, without their `\n`.
pub fn lines(buf: &[u8]) -> Vec<&[u8]> {
    let mut lines: Vec<&[u8]> = buf.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines
}
