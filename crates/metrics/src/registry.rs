//! Where the running jobs of this machine can be found: one small file per job.
//!
//! A job that serves its REST API writes `<jobs dir>/<job id>.json` ([`JobEntry`]) when the
//! server is up and removes it when the job ends; `spate list` and the other CLI verbs read
//! the directory to find a job by id, id prefix or name. An entry whose process is gone (a
//! crash, kill -9) is ignored and cleaned up by the next reader.
//!
//! The directory is `$SPATE_JOBS_DIR`, else `$HOME/.spate/jobs`. An entry holds no secret:
//! a job that requires a token says so, and the client brings the token.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What a running job publishes about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEntry {
    /// The job id (32 hex digits).
    pub jid: String,
    /// The job's name.
    pub name: String,
    /// The base URL of its REST API (`http://127.0.0.1:PORT`).
    pub url: String,
    /// The process that serves it.
    pub pid: u32,
    /// When it started, ms since the Unix epoch.
    pub start_time: i64,
    /// Whether the API needs a bearer token.
    pub token_required: bool,
}

/// The directory of job entries.
pub fn jobs_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SPATE_JOBS_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
    Path::new(&home).join(".spate").join("jobs")
}

/// A published entry; removes its file when dropped.
#[derive(Debug)]
pub struct Registration {
    path: PathBuf,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Publishes `entry` in `dir` (written to a temporary name, then renamed, so readers never
/// see half a file).
pub fn register(dir: &Path, entry: &JobEntry) -> std::io::Result<Registration> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{}.json", entry.jid));
    let tmp = dir.join(format!(".{}.{}.tmp", entry.jid, std::process::id()));
    std::fs::write(
        &tmp,
        serde_json::to_vec(entry).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(&tmp, &path)?;
    Ok(Registration { path })
}

/// The entries of live jobs in `dir`, oldest first; entries of processes that are gone are
/// removed.
pub fn list(dir: &Path) -> Vec<JobEntry> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut entries = Vec::new();
    for file in read.flatten() {
        let path = file.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Ok(entry) = serde_json::from_slice::<JobEntry>(&bytes) else {
            continue;
        };
        if process_alive(entry.pid) {
            entries.push(entry);
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }
    entries.sort_by(|a, b| (a.start_time, &a.jid).cmp(&(b.start_time, &b.jid)));
    entries
}

/// Whether process `pid` exists (Linux: `/proc/<pid>`; elsewhere assumed alive).
fn process_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new(&format!("/proc/{pid}")).exists()
    } else {
        true
    }
}

/// The one entry that `job` names: a job id, a unique id prefix, or a unique name.
pub fn find<'a>(entries: &'a [JobEntry], job: &str) -> Result<&'a JobEntry, String> {
    if let Some(e) = entries.iter().find(|e| e.jid == job) {
        return Ok(e);
    }
    let matching: Vec<_> = entries
        .iter()
        .filter(|e| e.jid.starts_with(job) || e.name == job)
        .collect();
    match matching.as_slice() {
        [one] => Ok(one),
        [] if entries.is_empty() => Err(format!(
            "no running job is registered on this machine (in {}), so none is called {job:?}",
            jobs_dir().display()
        )),
        [] => Err(format!(
            "no running job has the id or name {job:?} (`spate list` shows them)"
        )),
        many => Err(format!(
            "{job:?} names {} jobs ({}); give more of the id",
            many.len(),
            many.iter()
                .map(|e| e.jid.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(jid: &str, name: &str, pid: u32, start: i64) -> JobEntry {
        JobEntry {
            jid: jid.into(),
            name: name.into(),
            url: "http://127.0.0.1:1".into(),
            pid,
            start_time: start,
            token_required: false,
        }
    }

    #[test]
    fn entries_are_found_by_id_prefix_or_name_and_dead_ones_are_dropped() {
        let dir = std::env::temp_dir().join(format!("spate-registry-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let me = std::process::id();
        let a = register(&dir, &entry("aa11", "q1", me, 2)).unwrap();
        let _b = register(&dir, &entry("aa22", "q5", me, 1)).unwrap();
        // A pid that cannot exist: its entry is ignored and removed.
        register(&dir, &entry("dead", "gone", u32::MAX - 1, 0))
            .map(std::mem::forget)
            .unwrap();
        std::fs::write(dir.join("junk.json"), b"{").unwrap();
        let all = list(&dir);
        assert_eq!(
            all.iter().map(|e| e.jid.as_str()).collect::<Vec<_>>(),
            ["aa22", "aa11"]
        );
        assert!(!dir.join("dead.json").exists());
        assert_eq!(find(&all, "aa11").unwrap().name, "q1");
        assert_eq!(find(&all, "q5").unwrap().jid, "aa22");
        assert!(find(&all, "aa").unwrap_err().contains("names 2 jobs"));
        assert!(find(&all, "zz").unwrap_err().contains("no running job"));
        drop(a);
        assert_eq!(list(&dir).len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
