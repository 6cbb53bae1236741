//! Watching and steering a running job, as a user does: the URL it prints, `spate list`,
//! `info`, `metrics`, `savepoint`, `stop` and `cancel`, the REST API, and the dashboard in
//! a real headless Chromium.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{ok, rows_of_dir, sorted_lines, spate};

/// A job started in the background, with the URL it printed.
struct Running {
    child: Child,
    url: String,
    jid: String,
    stderr: mpsc::Receiver<String>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `spate <args>` with its jobs directory `jobs`, and waits for the line that names
/// its dashboard. (The child is waited for by `Running`'s drop.)
#[allow(clippy::zombie_processes)]
fn start(args: &[&str], jobs: &Path) -> Running {
    let mut child = spate()
        .args(args)
        .env("SPATE_JOBS_DIR", jobs)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("no dashboard line within 60 s; stderr: {seen:#?}"));
        if let Some(at) = line.find("http://") {
            let url = line[at..]
                .split_whitespace()
                .next()
                .unwrap()
                .trim_end_matches('/');
            let jid = get_json(url, "/v1/jobs")["jobs"][0]["id"]
                .as_str()
                .unwrap()
                .to_owned();
            return Running {
                child,
                url: url.to_owned(),
                jid,
                stderr: rx,
            };
        }
        seen.push(line);
    }
}

/// `GET url+path` over plain HTTP/1.1; the status and body.
fn get(url: &str, path: &str) -> (u16, String) {
    let host = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(head, body)| {
            if head
                .to_ascii_lowercase()
                .contains("transfer-encoding: chunked")
            {
                dechunk(body)
            } else {
                body.to_owned()
            }
        })
        .unwrap_or_default();
    (status, body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

fn get_json(url: &str, path: &str) -> Value {
    let (status, body) = get(url, path);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

/// Polls `f` every 100 ms until it gives `Some`, for at most `secs` seconds.
fn eventually<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn cli(jobs: &Path, args: &[&str]) -> String {
    let out = ok(spate().args(args).env("SPATE_JOBS_DIR", jobs));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_running_job_is_watched_saved_and_stopped_from_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let jobs = tmp.path().join("jobs");
    let query = ["nexmark", "run", "--query", "q11", "--partitions", "3"];
    const EVENTS: &str = "200000";
    let reference = tmp.path().join("reference.jsonl");
    ok(spate()
        .args(query)
        .args(["--events", EVENTS, "--no-progress", "--no-rest", "--output"])
        .arg(&reference));
    let expected = sorted_lines(&reference);

    let (ckpt, out) = (tmp.path().join("ckpt"), tmp.path().join("out"));
    let (ckpt_s, out_s) = (ckpt.display().to_string(), out.display().to_string());
    let mut args: Vec<&str> = query.to_vec();
    args.extend([
        "--events",
        EVENTS,
        "--rate",
        "20000",
        "--workers",
        "2",
        "--checkpoint-interval",
        "300ms",
        "--no-progress",
        "--checkpoint-dir",
        &ckpt_s,
        "--output",
        &out_s,
    ]);
    let mut job = start(&args, &jobs);

    // The REST API counts its records once it runs; `spate list` finds it; `info` shows its
    // vertices.
    eventually(30, "records read", || {
        let j = get_json(&job.url, &format!("/v1/jobs/{}", job.jid));
        let read: u64 = j["vertices"]
            .as_array()?
            .iter()
            .filter_map(|v| v["metrics"]["write-records"].as_u64())
            .sum();
        (j["state"] == "RUNNING" && read > 0).then_some(())
    });
    let list = cli(&jobs, &["list"]);
    assert!(
        list.contains(&job.jid) && list.contains("(RUNNING)"),
        "{list}"
    );
    let info = cli(&jobs, &["info", &job.jid[..8]]);
    assert!(
        info.contains("RUNNING") && info.contains("q11.sessions"),
        "{info}"
    );
    let plan = get_json(&job.url, &format!("/v1/jobs/{}/plan", job.jid));
    let vertices = plan["plan"]["nodes"].as_array().unwrap().len();
    assert_eq!(vertices, 4, "{plan}");
    let metrics = cli(&jobs, &["metrics", &job.jid, "numRecordsOut"]);
    assert!(metrics.contains("numRecordsOut = "), "{metrics}");

    // The dashboard in Chromium: one element per vertex of the plan.
    let dom = chromium_dom(&job.url, tmp.path());
    assert_eq!(
        dom.matches("data-vertex-id=").count(),
        vertices,
        "one vertex element per plan node"
    );

    // A savepoint while it runs, then a stop with a savepoint.
    let saved = cli(&jobs, &["savepoint", &job.jid]);
    let path = saved
        .lines()
        .find_map(|l| l.strip_prefix("Savepoint completed. Path: "))
        .unwrap_or_else(|| panic!("{saved}"));
    assert!(Path::new(path).join("_manifest.json").exists(), "{saved}");
    let stopped = cli(&jobs, &["stop", &job.jid]);
    let final_sp = stopped
        .lines()
        .find_map(|l| l.strip_prefix("Savepoint completed. Path: "))
        .unwrap_or_else(|| panic!("{stopped}"))
        .to_owned();
    let status = job.child.wait().unwrap();
    assert!(status.success(), "a stopped job exits 0");
    while job.stderr.try_recv().is_ok() {}
    assert!(
        rows_of_dir(&out).len() < expected.len(),
        "stopped before the end"
    );
    assert_eq!(cli(&jobs, &["list"]).trim(), "No running jobs.");

    // Resumed from the final savepoint, the two runs wrote exactly one run's output.
    ok(spate()
        .args(query)
        .args([
            "--events",
            EVENTS,
            "--workers",
            "3",
            "--no-progress",
            "--no-rest",
        ])
        .arg("--checkpoint-dir")
        .arg(tmp.path().join("ckpt-2"))
        .arg("--restore")
        .arg(&final_sp)
        .arg("--output")
        .arg(&out));
    assert_eq!(rows_of_dir(&out), expected, "nothing lost, nothing twice");
}

#[test]
fn a_canceled_job_ends_at_once_without_a_savepoint() {
    let tmp = tempfile::tempdir().unwrap();
    let jobs = tmp.path().join("jobs");
    let mut job = start(
        &[
            "nexmark",
            "run",
            "--query",
            "q1",
            "--unbounded",
            "--rate",
            "50000",
            "--no-progress",
        ],
        &jobs,
    );
    let started = Instant::now();
    let said = cli(&jobs, &["cancel", &job.jid]);
    assert!(said.contains("Cancelled job"), "{said}");
    let status = job.child.wait().unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(status.code().is_some(), "ended by itself, not by a signal");
    assert_eq!(cli(&jobs, &["list"]).trim(), "No running jobs.");
}

/// Headless Chromium on a closed network, as the dashboard tests run it.
const CHROMIUM: [&str; 9] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=5000",
];

/// The dashboard's DOM after a few polls, from `$SPATE_TEST_CHROMIUM` headless.
fn chromium_dom(url: &str, tmp: &Path) -> String {
    let chromium = std::env::var("SPATE_TEST_CHROMIUM").unwrap_or_else(|_| {
        panic!("SPATE_TEST_CHROMIUM is not set: run the tests with scripts/test (scripts/test-deps installs Chromium)")
    });
    let profile = tmp.join("chromium-profile");
    let out = Command::new(&chromium)
        .args(CHROMIUM)
        .arg("--dump-dom")
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("{url}/"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {chromium}: {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A screenshot of the running job's dashboard, kept as an artifact of the run.
    let artifacts = std::env::var_os("SPATE_ARTIFACTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).to_owned());
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("dashboard-q11.png");
    // Headless Chromium now and then exits without writing a screenshot on a loaded machine:
    // up to three tries, each with a fresh profile.
    let mut tries = Vec::new();
    for attempt in 0..3 {
        let _ = std::fs::remove_file(&shot);
        let status = Command::new(&chromium)
            .args(CHROMIUM)
            .arg("--window-size=1280,900")
            .arg(format!(
                "--user-data-dir={}",
                tmp.join(format!("chromium-shot-{attempt}")).display()
            ))
            .arg(format!("--screenshot={}", shot.display()))
            .arg(format!("{url}/"))
            .output()
            .unwrap();
        if status.status.success() && shot.exists() {
            break;
        }
        tries.push(format!(
            "{}: {}",
            status.status,
            String::from_utf8_lossy(&status.stderr)
                .lines()
                .filter(|l| !l.contains("dbus"))
                .collect::<Vec<_>>()
                .join(" | ")
        ));
    }
    assert!(shot.exists(), "no screenshot: {tries:?}");
    eprintln!("dashboard screenshot: {}", shot.display());
    String::from_utf8(out.stdout).unwrap()
}
