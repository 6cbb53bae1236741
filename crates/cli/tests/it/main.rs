//! End-to-end tests of the `spate` binary, as a user runs it: Nexmark results against Flink's
//! golden files, equality across workers and processes, bad input and bad flags.

mod chaos;
mod cli;
mod elastic;
mod kafka;
mod nats;
mod nexmark;
mod operations;
mod savepoints;
mod sql;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `spate` binary built for these tests.
pub fn spate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_spate"))
}

/// `shared/` beside the project root.
pub fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared")
}

/// Runs a command and returns its output, failing the test with its stderr if it failed.
pub fn ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("command starts");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// Held by the CPU-heavy chaos tests (3 processes and a broker each), so that two of them never
/// share a 2-core machine. The rate and latency measurements are the `measured` test binary,
/// which runs alone.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// The lines of the file at `path`, sorted.
pub fn sorted_lines(path: &Path) -> Vec<String> {
    let mut rows: Vec<String> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    rows.sort();
    rows
}

/// The rows of every visible (published) part file in `dir`, sorted.
pub fn rows_of_dir(dir: &Path) -> Vec<String> {
    let mut rows: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .flat_map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort();
    rows
}
