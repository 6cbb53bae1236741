//! Small helpers of the CLI: logging, memory readings, progress bars.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spate_dataflow::Progress;

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings only); in colour only on a
/// terminal, so that a log redirected to a file or read by a supervisor is plain text.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// Whether an error is a closed stdout pipe (`spate ... | head`), which is not a failure.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.to_string().contains("Broken pipe")
    })
}

/// This process's peak resident memory (VmHWM) in MiB, where the platform tells it.
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// A progress bar on stderr while a bounded job runs, when stderr is a terminal.
pub struct ProgressBar {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProgressBar {
    /// Starts drawing `progress` (units of `unit`) if stderr is a terminal and `enabled`.
    pub fn start(progress: Arc<Progress>, unit: &'static str, enabled: bool) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        if !enabled || !std::io::stderr().is_terminal() {
            return ProgressBar { done, thread: None };
        }
        let flag = Arc::clone(&done);
        let thread = std::thread::spawn(move || {
            let bar = indicatif::ProgressBar::new(0);
            let style = indicatif::ProgressStyle::with_template(&format!(
                "{{bar:40}} {{pos}}/{{len}} {unit} ({{per_sec}}, eta {{eta}})"
            ))
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
            bar.set_style(style);
            while !flag.load(Ordering::Relaxed) {
                bar.set_length(progress.total.load(Ordering::Relaxed));
                bar.set_position(progress.done.load(Ordering::Relaxed));
                std::thread::sleep(Duration::from_millis(100));
            }
            bar.finish_and_clear();
        });
        ProgressBar {
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for ProgressBar {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Parses `1s`, `500ms`, `2m` or a plain number of milliseconds.
pub fn parse_duration(s: &str) -> std::result::Result<std::time::Duration, String> {
    let (number, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s, "ms"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{s}` is not a duration such as 1s or 500ms"))?;
    let ms = match unit {
        "ms" => value,
        "s" => value * 1000.0,
        "m" => value * 60_000.0,
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (use ms, s or m)")),
    };
    if !(ms.is_finite() && ms >= 1.0) {
        return Err(format!("`{s}` must be at least 1ms"));
    }
    Ok(std::time::Duration::from_millis(ms as u64))
}

/// `850ms`, `12s`, `3m 20s`, `2h 5m`: a duration for people.
pub fn format_duration(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        _ => format!("{}h {}m", s / 3600, s % 3600 / 60),
    }
}
