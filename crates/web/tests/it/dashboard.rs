//! The dashboard in a real headless Chromium (`SPATE_TEST_CHROMIUM`, Debian's `chromium`):
//! the page is served by `serve()` on the fake job, the browser runs its script with a
//! virtual time budget (several one-second polls), and the test reads the DOM it dumps: one
//! vertex element per vertex, the fake's numbers, and the XSS-named operator as text. A
//! screenshot goes to `$SPATE_ARTIFACTS/dashboard.png` (default `target/dashboard.png`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spate_web::{serve, ServerConfig};

use crate::fake::{self, op_id, FakeJob, VERTICES, WORKERS};
use crate::TOKEN;

fn chromium() -> String {
    std::env::var("SPATE_TEST_CHROMIUM").unwrap_or_else(|_| {
        panic!(
            "SPATE_TEST_CHROMIUM is not set: run `eval \"$(scripts/test-deps)\"` first \
             (it installs Debian's chromium and prints the variable)"
        )
    })
}

/// Runs the browser headless on `url` with `extra` flags; its stdout.
fn run_chromium(url: &str, extra: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--virtual-time-budget=5000",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .args(extra)
    .arg(url)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", chromium()));
    let pid = child.id();
    // A watchdog: a hung browser fails the test instead of hanging it.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    let watchdog = std::thread::spawn(move || {
        let start = Instant::now();
        while !flag.load(std::sync::atomic::Ordering::SeqCst) {
            if start.elapsed() > Duration::from_secs(120) {
                let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    watchdog.join().unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The attributes of every start tag that has attribute `name`.
fn tags_with(dom: &str, name: &str) -> Vec<BTreeMap<String, String>> {
    let needle = format!(" {name}=\"");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = dom[from..].find(&needle) {
        let at = from + i;
        let start = dom[..at].rfind('<').unwrap();
        let end = at + dom[at..].find('>').unwrap();
        out.push(attributes(&dom[start..end]));
        from = end;
    }
    out
}

fn attributes(tag: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let mut rest = tag.split_once(' ').map(|x| x.1).unwrap_or("");
    while let Some((k, v)) = rest.split_once("=\"") {
        let Some((value, tail)) = v.split_once('"') else {
            break;
        };
        m.insert(k.trim().to_string(), value.to_string());
        rest = tail;
    }
    m
}

fn artifacts() -> PathBuf {
    match std::env::var_os("SPATE_ARTIFACTS") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .unwrap()
            .to_path_buf(),
    }
}

#[test]
fn the_dashboard_shows_the_graph_and_numbers_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        token: Some(TOKEN.into()),
        ..ServerConfig::default()
    };
    let server = serve(&config, Arc::new(FakeJob::new(dir.path()))).unwrap();
    let url = format!("{}#token={TOKEN}", server.url());
    let dom = run_chromium(&url, &["--dump-dom"]);

    assert!(
        !dom.contains("Cannot reach the job"),
        "the page could not poll:\n{dom}"
    );
    assert!(
        dom.contains("nexmark-q5 \"hot items\"")
            || dom.contains("nexmark-q5 &quot;hot items&quot;"),
        "{dom}"
    );
    assert!(dom.contains(">RUNNING<"), "the state is shown");
    // The autoscaler's decisions and load shedding's figures have their panels.
    assert!(
        dom.contains("operators need 1.6 workers of busy time"),
        "the scaling decision is listed"
    );
    assert!(dom.contains("ds2 · 2 workers (1–8) · estimate 3"), "{dom}");
    assert!(dom.contains("1 decisions · 1 process<"), "{dom}");
    assert!(dom.contains("\"shed-count\">1234<"), "records shed");
    assert!(
        dom.contains("\"shed-fraction\">39.0%<"),
        "the drop fraction"
    );
    // The page polled every second of its 5 s of virtual time, with no script error and no
    // Content-Security-Policy violation.
    let body = &tags_with(&dom, "data-polls")[0];
    let polls: u32 = body["data-polls"].parse().unwrap();
    assert!(polls >= 3, "only {polls} polls");
    assert_eq!(body["data-js-errors"], "0", "script errors");
    assert_eq!(body["data-csp-violations"], "0", "CSP violations");

    // One vertex element per vertex, each with the fake's numbers.
    let vertices = tags_with(&dom, "data-vertex-id");
    assert_eq!(vertices.len(), VERTICES.len(), "{vertices:?}");
    let sum = |op: usize, m: &str| (0..WORKERS).map(|w| fake::metric(op, w, m)).sum::<f64>();
    for (head, members) in VERTICES {
        let tail = *members.last().unwrap();
        let v = vertices
            .iter()
            .find(|v| v["data-vertex-id"] == op_id(*head))
            .expect("vertex drawn");
        let num = |k: &str| {
            v[k].parse::<f64>()
                .unwrap_or_else(|_| panic!("{k} = {:?}", v[k]))
        };
        assert_eq!(num("data-in-rate"), sum(*head, "numRecordsInPerSecond"));
        assert_eq!(num("data-out-rate"), sum(tail, "numRecordsOutPerSecond"));
        assert_eq!(num("data-records-in"), sum(*head, "numRecordsIn"));
        let busy_max = (0..WORKERS)
            .map(|w| {
                members
                    .iter()
                    .map(|&m| fake::metric(m, w, "busyTimeMsPerSecond"))
                    .sum::<f64>()
            })
            .fold(0.0, f64::max)
            / 10.0;
        assert_eq!(num("data-busy-max"), busy_max);
    }
    let sink = vertices
        .iter()
        .find(|v| v["data-vertex-id"] == op_id(5))
        .unwrap();
    assert!(sink["class"].contains("busy-high"), "{sink:?}");
    let source = vertices
        .iter()
        .find(|v| v["data-vertex-id"] == op_id(0))
        .unwrap();
    assert_eq!(source["data-bp-level"], "high");
    assert!(dom.contains("busy 90%"), "the busy number is printed");
    assert!(dom.contains("BP 61%"), "the backpressure badge is printed");
    assert!(dom.contains("p99 22 ms"), "the sink's latency is printed");
    // Below 10 ms the latency table keeps two decimals (the fake p50 is 4 + worker).
    let p50 = dom
        .split("lat-p50\">")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .expect("a p50 cell");
    assert!(
        p50.ends_with(" ms")
            && p50
                .split(' ')
                .next()
                .unwrap()
                .split('.')
                .nth(1)
                .map(str::len)
                == Some(2),
        "p50 cell {p50:?}"
    );

    // Checkpoints, exceptions, processes.
    assert_eq!(tags_with(&dom, "data-checkpoint-id").len(), 6);
    assert_eq!(tags_with(&dom, "data-process").len(), 1);
    assert!(dom.contains("upload timed out after 10 s"));

    // XSS: the names are text, never markup.
    assert!(
        dom.contains("Sink: &lt;img src=x onerror=alert(1)&gt;"),
        "the sink's name is shown as text"
    );
    assert!(!dom.contains("<img"), "an element was made from a name");
    assert!(dom.contains("&lt;script&gt;alert(2)&lt;/script&gt;"));
    assert!(!dom.contains("<script>alert"));

    // Screenshots for people (and CI artifacts): the first screen, and the whole page.
    let dir = artifacts();
    std::fs::create_dir_all(&dir).unwrap();
    for (name, size) in [
        ("dashboard.png", "1280,900"),
        ("dashboard-full.png", "1280,1700"),
    ] {
        let png = dir.join(name);
        let _ = std::fs::remove_file(&png);
        run_chromium(
            &url,
            &[
                &format!("--screenshot={}", png.display()),
                &format!("--window-size={size}"),
            ],
        );
        let bytes = std::fs::read(&png).expect("chromium wrote the screenshot");
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 20_000,
            "{} bytes",
            bytes.len()
        );
        eprintln!("dashboard screenshot: {}", png.display());
    }
    server.shutdown();
}
