//! `/metrics` through Python's real Prometheus text parser (`prometheus_client`), in the
//! virtual environment that `scripts/test-deps` makes (`SPATE_TEST_PYTHON`).

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use axum::http::StatusCode;
use serde_json::Value;

use crate::fake::{self, metric, op_id, JOB_ID, WORKERS, XSS_NAME};
use crate::{get, setup};

const PARSE: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for f in text_string_to_metric_families(sys.stdin.read()):
    out.append({"name": f.name, "type": f.type,
                "samples": [[s.name, s.labels, s.value] for s in f.samples]})
print(json.dumps(out))
"#;

/// The families of a scrape as the Python parser reads them.
fn parse(text: &str) -> Vec<Value> {
    let python = std::env::var("SPATE_TEST_PYTHON").unwrap_or_else(|_| {
        panic!(
            "SPATE_TEST_PYTHON is not set: run `eval \"$(scripts/test-deps)\"` first \
             (it makes a venv with prometheus_client and prints the variable)"
        )
    });
    let mut child = Command::new(&python)
        .args(["-c", PARSE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the Prometheus parser refused the scrape: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

type Sample = (String, BTreeMap<String, String>, f64);

fn samples(families: &[Value]) -> Vec<Sample> {
    families
        .iter()
        .flat_map(|f| f["samples"].as_array().unwrap().iter())
        .map(|s| {
            let labels = s[1]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect();
            (
                s[0].as_str().unwrap().to_string(),
                labels,
                s[2].as_f64().unwrap_or(f64::NAN),
            )
        })
        .collect()
}

fn find<'a>(all: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    all.iter()
        .filter(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

#[test]
fn the_scrape_parses_with_flinks_names_and_exact_values() {
    let (_, r, _d) = setup(None);
    let resp = get(&r, "/metrics");
    assert_eq!(resp.status, StatusCode::OK);
    assert!(resp.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    let text = resp.body;
    // One TYPE line per family.
    let types: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE ")).collect();
    let mut unique = types.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(types.len(), unique.len());

    let families = parse(&text);
    assert_eq!(families.len(), types.len());
    let all = samples(&families);

    // Operator scope, with every label Flink's reporter sets; the XSS name is escaped, exact.
    let sink_out = find(
        &all,
        "spate_taskmanager_job_task_operator_numRecordsOut",
        &[("operator_name", XSS_NAME), ("subtask_index", "1")],
    );
    assert_eq!(sink_out.len(), 1);
    let (_, labels, value) = sink_out[0];
    assert_eq!(*value, metric(5, 1, "numRecordsOut"));
    let keys: Vec<&str> = labels.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "host",
            "job_id",
            "job_name",
            "operator_id",
            "operator_name",
            "subtask_index",
            "task_id",
            "task_name",
            "tm_id"
        ]
    );
    assert_eq!(labels["job_id"], JOB_ID);
    assert_eq!(labels["job_name"], "nexmark-q5 \"hot items\"");
    assert_eq!(labels["operator_id"], op_id(5));
    assert_eq!(labels["host"], "worker-host-1");
    // A user metric with a space and quotes in its name: sanitized family name.
    assert_eq!(
        find(
            &all,
            "spate_taskmanager_job_task_operator_user_joins__matched_",
            &[]
        )
        .len(),
        WORKERS
    );

    // Task scope: the chain's numbers (busy summed over its members).
    let busy = find(
        &all,
        "spate_taskmanager_job_task_busyTimeMsPerSecond",
        &[("task_id", &op_id(3)), ("subtask_index", "0")],
    );
    assert_eq!(busy.len(), 1);
    assert_eq!(
        busy[0].2,
        metric(3, 0, "busyTimeMsPerSecond") + metric(4, 0, "busyTimeMsPerSecond")
    );
    assert_eq!(
        busy[0].1["task_name"],
        "Join: auction = bid -> Window: max price"
    );

    // Histograms are summaries with Flink's quantiles.
    let lat = families
        .iter()
        .find(|f| f["name"] == "spate_taskmanager_job_task_operator_latency")
        .unwrap();
    assert_eq!(lat["type"], "summary");
    let p99 = find(
        &all,
        "spate_taskmanager_job_task_operator_latency",
        &[("quantile", "0.99"), ("subtask_index", "1")],
    );
    assert_eq!(p99[0].2, fake::latency(1).p99);
    let count = find(
        &all,
        "spate_taskmanager_job_task_operator_latency_count",
        &[("subtask_index", "0")],
    );
    assert_eq!(count[0].2, 1000.0);

    // Job, process and worker scopes.
    assert_eq!(
        find(
            &all,
            "spate_jobmanager_job_numRestarts",
            &[("job_id", JOB_ID)]
        )[0]
        .2,
        1.0
    );
    assert_eq!(
        find(&all, "spate_jobmanager_job_lastCheckpointDuration", &[])[0].2,
        205.0
    );
    assert_eq!(
        find(
            &all,
            "spate_taskmanager_Status_Memory_RSS",
            &[("tm_id", "process-0")]
        )[0]
        .2,
        123_456_789.0
    );
    assert_eq!(
        find(
            &all,
            "spate_taskmanager_worker_busyTimeMsPerSecond",
            &[("worker_index", "1")]
        )[0]
        .2,
        501.0
    );
    // Every operator instance reports every metric once.
    for m in fake::METRICS {
        assert_eq!(
            find(
                &all,
                &format!("spate_taskmanager_job_task_operator_{m}"),
                &[]
            )
            .len(),
            6 * WORKERS,
            "{m}"
        );
    }
}

#[test]
fn the_flink_prefix_makes_flink_dashboards_work() {
    let dir = tempfile::tempdir().unwrap();
    let job = std::sync::Arc::new(fake::FakeJob::new(dir.path()));
    let r = spate_web::router(
        job,
        spate_web::RouterOptions {
            token: None,
            metrics_prefix: "flink".into(),
        },
    );
    let text = get(&r, "/metrics").body;
    let all = samples(&parse(&text));
    assert!(!find(
        &all,
        "flink_taskmanager_job_task_operator_numRecordsIn",
        &[]
    )
    .is_empty());
    assert!(!find(&all, "flink_jobmanager_job_numRestarts", &[]).is_empty());
    assert!(all.iter().all(|(n, _, _)| n.starts_with("flink_")));
}
