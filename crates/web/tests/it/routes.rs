//! The REST routes on the fake job: Flink's field names (key sets) and values computed from
//! the fake's own formulas, and control calls with the right arguments.

use axum::body::Body;
use axum::http::StatusCode;
use serde_json::{json, Value};
use spate_metrics::{JobState, Operation};

use crate::fake::{self, metric, op_id, Call, JOB_ID, VERTICES, WORKERS, XSS_NAME};
use crate::{get, keys, send, setup, sorted};

fn job_url(rest: &str) -> String {
    format!("/v1/jobs/{JOB_ID}{rest}")
}

fn vertex_url(head: usize, rest: &str) -> String {
    format!("/v1/jobs/{JOB_ID}/vertices/{}{rest}", op_id(head))
}

/// Sum over workers of a metric of one operator.
fn sum(op: usize, name: &str) -> f64 {
    (0..WORKERS).map(|w| metric(op, w, name)).sum()
}

#[test]
fn cluster_routes_have_flinks_fields() {
    let (_, r, _d) = setup(None);
    let c = get(&r, "/v1/config");
    assert_eq!(c.status, StatusCode::OK);
    assert_eq!(c.headers["content-type"], "application/json");
    assert_eq!(c.headers["cache-control"], "no-store");
    let c = c.json();
    for k in [
        "refresh-interval",
        "timezone-name",
        "timezone-offset",
        "flink-version",
        "features",
    ] {
        assert!(c.get(k).is_some(), "config lacks {k}");
    }
    assert_eq!(c["features"]["web-submit"], false);

    let o = get(&r, "/v1/overview").json();
    for k in [
        "taskmanagers",
        "slots-total",
        "slots-available",
        "jobs-running",
        "jobs-finished",
        "jobs-cancelled",
        "jobs-failed",
        "flink-version",
        "flink-commit",
    ] {
        assert!(o.get(k).is_some(), "overview lacks {k}");
    }
    assert_eq!(
        (o["taskmanagers"].as_u64(), o["slots-total"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(o["jobs-running"], 1);

    let jobs = get(&r, "/v1/jobs").json();
    assert_eq!(jobs, json!({"jobs": [{"id": JOB_ID, "status": "RUNNING"}]}));
    let ov = get(&r, "/v1/jobs/overview").json();
    let row = &ov["jobs"][0];
    assert_eq!(
        keys(row),
        sorted(&[
            "jid",
            "name",
            "state",
            "job-type",
            "start-time",
            "end-time",
            "duration",
            "last-modification",
            "tasks"
        ])
    );
    assert_eq!(row["tasks"]["total"], 8);
    assert_eq!(row["tasks"]["running"], 8);
    // Unversioned aliases.
    assert_eq!(get(&r, "/jobs").json(), jobs);
    assert_eq!(get(&r, "/overview").status, StatusCode::OK);
}

#[test]
fn job_details_group_chains_into_vertices() {
    let (_, r, _d) = setup(None);
    let d = get(&r, &job_url("")).json();
    assert_eq!(
        keys(&d),
        sorted(&[
            "jid",
            "name",
            "isStoppable",
            "state",
            "job-type",
            "start-time",
            "end-time",
            "duration",
            "maxParallelism",
            "now",
            "timestamps",
            "vertices",
            "status-counts",
            "plan"
        ])
    );
    assert_eq!(d["jid"], JOB_ID);
    assert_eq!(d["state"], "RUNNING");
    assert_eq!(d["duration"], 120_500);
    assert_eq!(d["timestamps"]["RUNNING"], fake::NOW - 120_000);
    let vs = d["vertices"].as_array().unwrap();
    assert_eq!(vs.len(), VERTICES.len());
    for (v, (head, members)) in vs.iter().zip(VERTICES) {
        assert_eq!(
            keys(v),
            sorted(&[
                "id",
                "name",
                "maxParallelism",
                "parallelism",
                "status",
                "start-time",
                "end-time",
                "duration",
                "tasks",
                "metrics"
            ])
        );
        assert_eq!(v["id"], op_id(*head));
        let snap = fake::snapshot();
        let name: Vec<&str> = members
            .iter()
            .map(|&m| snap.operators[m].name.as_str())
            .collect();
        assert_eq!(v["name"], name.join(" -> "));
        assert_eq!(v["parallelism"], 2);
        assert_eq!(v["tasks"]["RUNNING"], 2);
        let m = &v["metrics"];
        assert_eq!(
            keys(m),
            sorted(&[
                "read-bytes",
                "read-bytes-complete",
                "write-bytes",
                "write-bytes-complete",
                "read-records",
                "read-records-complete",
                "write-records",
                "write-records-complete",
                "accumulated-backpressured-time",
                "accumulated-idle-time",
                "accumulated-busy-time"
            ])
        );
        // Read = the head's numRecordsIn, written = the tail's numRecordsOut.
        let tail = *members.last().unwrap();
        assert_eq!(m["read-records"].as_f64(), Some(sum(*head, "numRecordsIn")));
        assert_eq!(
            m["write-records"].as_f64(),
            Some(sum(tail, "numRecordsOut"))
        );
    }
    assert_eq!(vs[3]["name"], XSS_NAME);
}

#[test]
fn the_plan_has_flinks_node_shape_and_edges() {
    let (_, r, _d) = setup(None);
    let p = get(&r, &job_url("/plan")).json();
    let plan = &p["plan"];
    assert_eq!(keys(plan), sorted(&["jid", "name", "type", "nodes"]));
    assert_eq!(plan["type"], "STREAMING");
    let nodes = plan["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 4);
    for n in nodes {
        for k in ["id", "parallelism", "operator", "description", "inputs"] {
            assert!(n.get(k).is_some(), "node lacks {k}");
        }
    }
    let inputs = |i: usize| -> Vec<(String, String)> {
        nodes[i]["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["id"].as_str().unwrap().to_string(),
                    e["ship_strategy"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(inputs(0), vec![]);
    assert_eq!(
        inputs(2),
        vec![(op_id(0), "HASH".into()), (op_id(2), "HASH".into())]
    );
    assert_eq!(inputs(3), vec![(op_id(3), "REBALANCE".into())]);
}

#[test]
fn vertex_routes_report_subtasks_backpressure_and_watermarks() {
    let (_, r, _d) = setup(None);
    let v = get(&r, &vertex_url(3, "")).json();
    assert_eq!(
        keys(&v),
        sorted(&[
            "id",
            "name",
            "parallelism",
            "maxParallelism",
            "now",
            "subtasks"
        ])
    );
    let subs = v["subtasks"].as_array().unwrap();
    assert_eq!(subs.len(), 2);
    for (w, s) in subs.iter().enumerate() {
        for k in [
            "subtask",
            "status",
            "attempt",
            "host",
            "start-time",
            "duration",
            "metrics",
            "taskmanager-id",
        ] {
            assert!(s.get(k).is_some(), "subtask lacks {k}");
        }
        assert_eq!(
            s["metrics"]["read-records"].as_f64(),
            Some(metric(3, w, "numRecordsIn"))
        );
        assert_eq!(
            s["metrics"]["write-records"].as_f64(),
            Some(metric(4, w, "numRecordsOut"))
        );
        assert_eq!(s["host"], "worker-host-1");
    }

    // Levels: OK ≤ 0.10 < LOW ≤ 0.5 < HIGH, from the largest member ratio.
    let bp = get(&r, &vertex_url(0, "/backpressure")).json();
    assert_eq!(
        keys(&bp),
        sorted(&["status", "backpressureLevel", "end-timestamp", "subtasks"])
    );
    assert_eq!(bp["backpressureLevel"], "high");
    let s1 = &bp["subtasks"][1];
    assert_eq!(
        keys(s1),
        sorted(&[
            "subtask",
            "attempt-number",
            "backpressureLevel",
            "ratio",
            "idleRatio",
            "busyRatio",
            "other-concurrent-attempts"
        ])
    );
    assert_eq!(s1["ratio"].as_f64(), Some(0.61));
    let busy = (metric(0, 1, "busyTimeMsPerSecond") + metric(1, 1, "busyTimeMsPerSecond")) / 1000.0;
    assert_eq!(s1["busyRatio"].as_f64(), Some(busy));
    assert_eq!(s1["idleRatio"].as_f64(), Some(0.1));
    assert_eq!(
        get(&r, &vertex_url(2, "/backpressure")).json()["backpressureLevel"],
        "low"
    );
    assert_eq!(
        get(&r, &vertex_url(5, "/backpressure")).json()["backpressureLevel"],
        "ok"
    );

    let wm = get(&r, &vertex_url(3, "/watermarks")).json();
    let want: Vec<Value> = (0..WORKERS)
        .map(|w| {
            json!({"id": format!("{w}.currentInputWatermark"),
                   "value": format!("{}", metric(3, w, "currentInputWatermark") as i64)})
        })
        .collect();
    assert_eq!(wm, Value::Array(want));
}

#[test]
fn metric_queries_follow_flinks_semantics() {
    let (_, r, _d) = setup(None);
    let list = get(&r, &vertex_url(3, "/metrics")).json();
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"0.numRecordsIn") && ids.contains(&"1.busyTimeMsPerSecond"),
        "{ids:?}"
    );
    assert!(
        ids.contains(&"1.Window: max price.numRecordsOut"),
        "{ids:?}"
    );
    let got = get(
        &r,
        &vertex_url(3, "/metrics?get=0.numRecordsIn,1.busyTimeMsPerSecond,nope"),
    )
    .json();
    let busy = metric(3, 1, "busyTimeMsPerSecond") + metric(4, 1, "busyTimeMsPerSecond");
    assert_eq!(
        got,
        json!([
            {"id": "0.numRecordsIn", "value": format!("{}", metric(3, 0, "numRecordsIn"))},
            {"id": "1.busyTimeMsPerSecond", "value": format!("{busy}")},
        ])
    );

    let agg = get(
        &r,
        &vertex_url(
            5,
            "/subtasks/metrics?get=busyTimeMsPerSecond&agg=min,max,sum,avg",
        ),
    )
    .json();
    assert_eq!(
        agg,
        json!([{"id": "busyTimeMsPerSecond", "min": 850.0, "max": 900.0, "sum": 1750.0, "avg": 875.0}])
    );
    let one = get(
        &r,
        &vertex_url(
            5,
            "/subtasks/metrics?get=busyTimeMsPerSecond&agg=sum&subtasks=1",
        ),
    )
    .json();
    assert_eq!(one, json!([{"id": "busyTimeMsPerSecond", "sum": 900.0}]));
    let range = get(
        &r,
        &vertex_url(5, "/subtasks/metrics?get=numRecordsIn&agg=sum&subtasks=0-1"),
    )
    .json();
    assert_eq!(range[0]["sum"].as_f64(), Some(sum(5, "numRecordsIn")));
    for bad in ["agg=median", "subtasks=x", "subtasks=3-1"] {
        let resp = get(
            &r,
            &vertex_url(5, &format!("/subtasks/metrics?get=numRecordsIn&{bad}")),
        );
        assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(resp.json()["errors"][0].is_string());
    }

    let jm = get(
        &r,
        &job_url("/metrics?get=numRestarts,lastCheckpointDuration"),
    )
    .json();
    assert_eq!(
        jm,
        json!([{"id": "numRestarts", "value": "1"}, {"id": "lastCheckpointDuration", "value": "205"}])
    );
    assert!(
        get(&r, &job_url("/metrics"))
            .json()
            .as_array()
            .unwrap()
            .len()
            >= 10
    );
}

#[test]
fn checkpoints_have_counts_summary_latest_and_history() {
    let (_, r, _d) = setup(None);
    let c = get(&r, &job_url("/checkpoints")).json();
    assert_eq!(
        keys(&c),
        sorted(&["counts", "summary", "latest", "history"])
    );
    assert_eq!(
        c["counts"],
        json!({"restored": 1, "total": 6, "in_progress": 1, "completed": 4, "failed": 1})
    );
    let ids: Vec<u64> = c["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, vec![6, 5, 4, 3, 2, 1], "newest first");
    let done = &c["latest"]["completed"];
    assert_eq!(done["id"], 5);
    for k in [
        "id",
        "status",
        "is_savepoint",
        "trigger_timestamp",
        "latest_ack_timestamp",
        "state_size",
        "checkpointed_size",
        "end_to_end_duration",
        "alignment_buffered",
        "processed_data",
        "persisted_data",
        "num_subtasks",
        "num_acknowledged_subtasks",
        "checkpoint_type",
        "tasks",
        "external_path",
        "discarded",
    ] {
        assert!(done.get(k).is_some(), "completed checkpoint lacks {k}");
    }
    assert_eq!(c["latest"]["savepoint"]["id"], 4);
    assert_eq!(c["latest"]["savepoint"]["checkpoint_type"], "SAVEPOINT");
    assert_eq!(
        c["latest"]["failed"]["failure_message"],
        "upload timed out after 10 s"
    );
    assert_eq!(
        c["latest"]["restored"]["external_path"],
        "file:///ckpt/chk-0"
    );
    let ss = &c["summary"]["state_size"];
    assert_eq!(
        keys(ss),
        sorted(&["min", "max", "avg", "p50", "p90", "p95", "p99", "p999"])
    );
    // Completed: 1, 2, 4, 5 (MB).
    assert_eq!(
        (ss["min"].as_u64(), ss["max"].as_u64(), ss["avg"].as_u64()),
        (Some(1_000_000), Some(5_000_000), Some(3_000_000))
    );
    assert_eq!(ss["p50"].as_f64(), Some(2_000_000.0));

    let cfg = get(&r, &job_url("/checkpoints/config")).json();
    assert_eq!(
        (cfg["mode"].as_str(), cfg["interval"].as_u64()),
        (Some("exactly_once"), Some(10_000))
    );
    let d = get(&r, &job_url("/checkpoints/details/3")).json();
    assert_eq!(d["status"], "FAILED");
    assert_eq!(d["tasks"].as_object().unwrap().len(), 4);
    assert_eq!(
        get(&r, &job_url("/checkpoints/details/99")).status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get(&r, &job_url("/checkpoints/details/abc")).status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        get(&r, &job_url("/checkpoints/details/-1")).status,
        StatusCode::BAD_REQUEST
    );
}

#[test]
fn exceptions_and_taskmanagers() {
    let (_, r, _d) = setup(None);
    let e = get(&r, &job_url("/exceptions")).json();
    let entries = e["exceptionHistory"]["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    for k in [
        "exceptionName",
        "stacktrace",
        "timestamp",
        "taskName",
        "location",
    ] {
        assert!(entries[0].get(k).is_some(), "exception lacks {k}");
    }
    assert_eq!(entries[0]["taskName"], "Window: max price");
    assert_eq!(e["exceptionHistory"]["truncated"], false);

    let t = get(&r, "/v1/taskmanagers").json();
    let tms = t["taskmanagers"].as_array().unwrap();
    assert_eq!(tms.len(), 1);
    for k in [
        "id",
        "path",
        "dataPort",
        "slotsNumber",
        "freeSlots",
        "hardware",
        "metrics",
        "timeSinceLastHeartbeat",
    ] {
        assert!(tms[0].get(k).is_some(), "taskmanager lacks {k}");
    }
    assert_eq!(tms[0]["slotsNumber"], 2);
    assert_eq!(
        tms[0]["metrics"]["Status.Memory.RSS"].as_f64(),
        Some(123_456_789.0)
    );
    let hw = &tms[0]["hardware"];
    for k in ["cpuCores", "physicalMemory", "freeMemory"] {
        assert!(hw[k].as_u64().is_some(), "hardware lacks {k}");
    }
    assert!(hw["cpuCores"].as_u64().unwrap() >= 1);
}

#[test]
fn unknown_ids_are_404_and_malformed_ones_400() {
    let (_, r, _d) = setup(None);
    let other = "0123456789abcdef0123456789abcdef";
    for uri in [
        format!("/v1/jobs/{other}"),
        format!("/v1/jobs/{other}/plan"),
        format!("/v1/jobs/{JOB_ID}/vertices/{other}"),
        format!("/v1/jobs/{JOB_ID}/vertices/{other}/backpressure"),
        format!("/v1/jobs/{JOB_ID}/savepoints/{other}"),
        "/v1/nothing".to_string(),
    ] {
        let resp = get(&r, &uri);
        assert_eq!(resp.status, StatusCode::NOT_FOUND, "{uri}");
        assert!(resp.json()["errors"][0].is_string(), "{uri}");
    }
    for uri in [
        "/v1/jobs/xyz".to_string(),
        format!("/v1/jobs/{}", JOB_ID.to_uppercase()),
        format!("/v1/jobs/{JOB_ID}0"),
        format!("/v1/jobs/{JOB_ID}/vertices/1"),
        format!("/v1/jobs/{JOB_ID}/savepoints/abc"),
    ] {
        let resp = get(&r, &uri);
        assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{uri}");
        assert!(resp.json()["errors"][0].is_string(), "{uri}");
    }
}

#[test]
fn cancel_calls_the_job_and_answers_202() {
    let (job, r, _d) = setup(None);
    let bad = send(&r, "PATCH", &job_url("?mode=stop"), &[], Body::empty());
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(job.calls(), vec![]);
    // As `spate cancel` sends it: a JSON `null` body.
    let resp = send(
        &r,
        "PATCH",
        &job_url("?mode=cancel"),
        &[("content-type", "application/json")],
        Body::from("null"),
    );
    assert_eq!(resp.status, StatusCode::ACCEPTED);
    assert_eq!(resp.json(), json!({}));
    assert_eq!(job.calls(), vec![Call::Cancel]);
    job.snap.lock().unwrap().state = JobState::Canceled;
    let resp = send(&r, "PATCH", &job_url("?mode=cancel"), &[], Body::empty());
    assert_eq!(resp.status, StatusCode::CONFLICT);
    assert_eq!(resp.json(), json!({"errors": ["the job has ended"]}));
}

#[test]
fn stop_and_savepoint_trigger_operations_that_can_be_polled() {
    let (job, r, _d) = setup(None);
    let post = |uri: &str, body: &str| {
        send(
            &r,
            "POST",
            uri,
            &[("content-type", "application/json")],
            Body::from(body.to_string()),
        )
    };
    let resp = post(
        &job_url("/stop"),
        r#"{"targetDirectory":"final-1","drain":true}"#,
    );
    assert_eq!(resp.status, StatusCode::ACCEPTED, "{}", resp.body);
    let id = resp.json()["request-id"].as_str().unwrap().to_string();
    assert_eq!(
        job.calls(),
        vec![Call::Trigger(Operation::Stop {
            target: Some("final-1".into()),
            drain: true
        })]
    );
    let poll = get(&r, &job_url(&format!("/savepoints/{id}"))).json();
    assert_eq!(poll["status"]["id"], "IN_PROGRESS");
    let poll = get(&r, &job_url(&format!("/stop/{id}"))).json();
    assert_eq!(poll["status"]["id"], "COMPLETED");
    let location = job.savepoint_root.join("final-1");
    assert_eq!(poll["operation"]["location"], location.to_str().unwrap());
    assert!(location.join("_metadata").is_file());

    let resp = post(
        &job_url("/savepoints"),
        r#"{"target-directory":null,"cancel-job":true}"#,
    );
    assert_eq!(resp.status, StatusCode::ACCEPTED);
    let resp = post(&job_url("/savepoints"), "");
    assert_eq!(resp.status, StatusCode::ACCEPTED);
    let resp = post(&job_url("/savepoints"), " null ");
    assert_eq!(resp.status, StatusCode::ACCEPTED);
    assert_eq!(
        job.calls()[1..],
        [
            Call::Trigger(Operation::Savepoint {
                target: None,
                cancel_job: true
            }),
            Call::Trigger(Operation::Savepoint {
                target: None,
                cancel_job: false
            }),
            Call::Trigger(Operation::Savepoint {
                target: None,
                cancel_job: false
            }),
        ]
    );
    // The engine's refusal of a target outside its root is a 400 with Flink's body.
    let resp = post(
        &job_url("/savepoints"),
        r#"{"target-directory":"/etc/cron.d"}"#,
    );
    assert_eq!(resp.status, StatusCode::BAD_REQUEST);
    assert!(resp.json()["errors"][0]
        .as_str()
        .unwrap()
        .contains("target-directory"));
    // A job that has ended cannot take one: 409.
    job.snap.lock().unwrap().state = JobState::Finished;
    let resp = post(&job_url("/stop"), "{}");
    assert_eq!(resp.status, StatusCode::CONFLICT);
    assert_eq!(job.calls().len(), 4);
}

#[test]
fn the_dashboard_route_has_the_graph_laid_out_and_the_numbers() {
    let (_, r, _d) = setup(None);
    let d = get(&r, &job_url("/dashboard")).json();
    let nodes = d["graph"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 4);
    assert_eq!(d["graph"]["edges"].as_array().unwrap().len(), 3);
    // Layers by longest path: sources at x = 16, the join next, the sink last.
    let x: Vec<f64> = nodes.iter().map(|n| n["x"].as_f64().unwrap()).collect();
    assert_eq!(x[0], x[1]);
    assert!(x[0] < x[2] && x[2] < x[3]);
    let sink = &nodes[3];
    assert_eq!(sink["busyMax"].as_f64(), Some(90.0));
    assert_eq!(sink["busyAvg"].as_f64(), Some(87.5));
    assert_eq!(
        sink["inPerSecond"].as_f64(),
        Some(sum(5, "numRecordsInPerSecond"))
    );
    assert_eq!(sink["latency"]["p99"].as_f64(), Some(22.0));
    assert_eq!(nodes[0]["backpressureLevel"], "high");
    assert_eq!(
        nodes[0]["outPerSecond"].as_f64(),
        Some(sum(1, "numRecordsOutPerSecond"))
    );
    let wm = metric(1, 1, "currentOutputWatermark");
    assert_eq!(nodes[0]["watermark"].as_f64(), Some(wm));
    assert_eq!(
        nodes[0]["watermarkLagMs"].as_f64(),
        Some(fake::NOW as f64 - wm)
    );
    assert_eq!(d["checkpoints"]["history"].as_array().unwrap().len(), 6);
    assert_eq!(d["exceptions"].as_array().unwrap().len(), 1);
    assert_eq!(d["processes"][0]["rss"].as_f64(), Some(123_456_789.0));
}

/// A large plan: `n` single-operator vertices in a line, on `workers` workers.
pub fn big_snapshot(n: usize, workers: usize) -> spate_metrics::JobSnapshot {
    let mut snap = fake::snapshot();
    snap.operators = (0..n)
        .map(|i| spate_metrics::OperatorInfo {
            index: i,
            uid: format!("op-{i}"),
            id: op_id(i),
            name: format!("op {i}"),
            kind: if i == 0 { "source" } else { "operator" }.into(),
            chain: i,
            inputs: if i == 0 {
                vec![]
            } else {
                vec![spate_metrics::EdgeInfo {
                    from: i - 1,
                    ship_strategy: spate_metrics::ShipStrategy::Hash,
                }]
            },
            parallelism: workers,
        })
        .collect();
    snap.subtasks = (0..n)
        .flat_map(|op| {
            (0..workers).map(move |w| spate_metrics::SubtaskSnapshot {
                operator: op,
                subtask: w,
                process: 0,
                metrics: fake::METRICS
                    .iter()
                    .map(|m| (m.to_string(), metric(op % 6, w, m)))
                    .collect(),
                histograms: [("latency".to_string(), fake::latency(w))].into(),
            })
        })
        .collect();
    snap
}

#[test]
fn a_scrape_and_a_dashboard_poll_of_50_vertices_on_16_workers_are_fast() {
    let snap = big_snapshot(50, 16);
    let t = std::time::Instant::now();
    let text = spate_web::prom::encode(&snap, "spate");
    let scrape = t.elapsed();
    let t = std::time::Instant::now();
    let d = spate_web::dashboard::dashboard(&snap);
    let poll = t.elapsed();
    assert_eq!(d["graph"]["nodes"].as_array().unwrap().len(), 50);
    let series = text.lines().filter(|l| !l.starts_with('#')).count();
    // Design A13: at most 25 series per vertex instance + 50.
    assert!(series <= 25 * 50 * 16 + 50, "{series} series");
    eprintln!("scrape {scrape:?} ({series} series), dashboard {poll:?}");
    // Unoptimized test builds on a loaded machine: generous bounds that still catch a
    // quadratic blow-up.
    assert!(
        scrape.as_millis() < 2000 && poll.as_millis() < 2000,
        "scrape {scrape:?}, poll {poll:?}"
    );
}

#[test]
fn the_autoscaler_and_shedding_routes_show_decisions_and_loads() {
    let (_, r, _d) = setup(None);
    let a = get(&r, &job_url("/autoscaler"));
    assert_eq!(a.status, StatusCode::OK);
    let a = a.json();
    assert_eq!(a["enabled"], true);
    assert_eq!(a["policy"], "ds2");
    assert_eq!(
        (a["workers"].as_u64(), a["estimate_workers"].as_u64()),
        (Some(2), Some(3))
    );
    assert_eq!(a["decisions"][0]["to_workers"], 2);
    assert_eq!(a["estimate"][0]["parallelism"], 3);
    let s = get(&r, &job_url("/shedding")).json();
    assert_eq!(s["enabled"], true);
    assert_eq!(s["shed"], 1234);
    assert_eq!(s["fractions"]["0"], 0.39);
    let d = get(&r, &job_url("/dashboard")).json();
    assert_eq!(d["autoscaler"]["numDecisions"], 1);
    assert_eq!(d["autoscaler"]["decisions"][0]["to"], 2);
    assert_eq!(d["shedding"]["shed"], 1234);
    let other = format!("/v1/jobs/{}/autoscaler", "0".repeat(32));
    assert_eq!(get(&r, &other).status, StatusCode::NOT_FOUND);
}
