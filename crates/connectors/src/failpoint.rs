//! Fail points: named places where a test makes the process abort.

/// Aborts the process at a named point, for the tests that kill a job inside a commit window
/// (the Kafka sink's `kafka.*` and JetStream's `nats.*`, between pre-commit and commit; the
/// MQTT source's `mqtt.before_ack`, between a checkpoint's completion and its acks).
///
/// `SPATE_FAILPOINTS` lists `NAME` or `NAME:N` (the `N`th time it is reached, default the
/// first), comma-separated. With `SPATE_FAILPOINT_DIR` set, each point fires once over all
/// runs: it leaves a file of its name there before aborting, and does not fire while that
/// file exists.
pub(crate) fn failpoint(name: &str) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static HITS: std::sync::Mutex<Vec<(String, AtomicU64)>> = std::sync::Mutex::new(Vec::new());
    let Ok(points) = std::env::var("SPATE_FAILPOINTS") else {
        return;
    };
    for point in points.split(',') {
        let (point, nth) = match point.trim().split_once(':') {
            Some((p, n)) => (p, n.parse::<u64>().unwrap_or(1)),
            None => (point.trim(), 1),
        };
        if point != name {
            continue;
        }
        let hits = {
            let mut all = HITS.lock().unwrap_or_else(|p| p.into_inner());
            if !all.iter().any(|(n, _)| n == name) {
                all.push((name.to_owned(), AtomicU64::new(0)));
            }
            let (_, c) = all.iter().find(|(n, _)| n == name).expect("pushed above");
            c.fetch_add(1, Ordering::Relaxed) + 1
        };
        if hits != nth {
            continue;
        }
        if let Ok(dir) = std::env::var("SPATE_FAILPOINT_DIR") {
            let marker = std::path::Path::new(&dir).join(name);
            if marker.exists() || std::fs::write(&marker, b"fired").is_err() {
                continue;
            }
        }
        eprintln!("failpoint {name}: aborting the process");
        std::process::abort();
    }
}
