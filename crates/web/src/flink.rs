//! The JSON of Flink's REST API, built from a [`JobSnapshot`].
//!
//! Flink's vertices are tasks: chains of operators. A Spate operator names the head of its
//! chain in [`OperatorInfo::chain`]; a [`Vertex`] gathers the operators of one chain. Its id
//! is the head's id, its name the members' names joined by `" -> "` (as Flink's UI shows a
//! chain), and its task-level numbers come from its members: records read are the head's
//! `numRecordsIn`, records written the tail's `numRecordsOut`, busy time the sum of the
//! members' (they share a worker thread), backpressure the largest of theirs.
//!
//! Field names are Flink's (`read-records`, `backpressureLevel`, `end_to_end_duration`, …),
//! including its mixture of kebab, camel and snake case.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};
use spate_metrics::{
    CheckpointRecord, CheckpointStatus, JobSnapshot, JobState, OperatorInfo, ShipStrategy,
    SubtaskSnapshot,
};

/// A task in Flink's sense: the operators of one chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Vertex {
    /// The head operator's id (32 hex digits).
    pub id: String,
    /// The members' names joined by `" -> "`.
    pub name: String,
    /// The members' indices in plan order; the first is the head, the last the tail.
    pub members: Vec<usize>,
    /// The vertices this one reads, with the ship strategy of each edge.
    pub inputs: Vec<(usize, ShipStrategy)>,
    /// Its number of subtasks.
    pub parallelism: usize,
    /// `source`, `operator`, `sink` or `side`: the head's, or `sink` when the tail is one.
    pub kind: String,
}

/// The vertices of a job in plan order of their heads.
pub fn vertices(snap: &JobSnapshot) -> Vec<Vertex> {
    let ops = &snap.operators;
    let head_of = |i: usize| ops.get(i).map(|o| o.chain).unwrap_or(i);
    let mut heads: Vec<usize> = ops
        .iter()
        .filter(|o| o.chain == o.index || ops.get(o.chain).is_none())
        .map(|o| o.index)
        .collect();
    heads.sort_unstable();
    let vertex_of_head: BTreeMap<usize, usize> =
        heads.iter().enumerate().map(|(v, &h)| (h, v)).collect();
    heads
        .iter()
        .map(|&h| {
            let members: Vec<usize> = ops
                .iter()
                .filter(|o| head_of(o.index) == h)
                .map(|o| o.index)
                .collect();
            let mut inputs = Vec::new();
            for &m in &members {
                for e in &ops[m].inputs {
                    let from_head = head_of(e.from);
                    if from_head == h {
                        continue;
                    }
                    if let Some(&v) = vertex_of_head.get(&from_head) {
                        if !inputs.iter().any(|(x, _)| *x == v) {
                            inputs.push((v, e.ship_strategy));
                        }
                    }
                }
            }
            let head = &ops[h];
            let tail = &ops[*members.last().expect("a chain has its head")];
            let kind = if tail.kind == "sink" && head.kind != "source" {
                "sink".to_string()
            } else {
                head.kind.clone()
            };
            Vertex {
                id: head.id.clone(),
                name: members
                    .iter()
                    .map(|&m| ops[m].name.as_str())
                    .collect::<Vec<_>>()
                    .join(" -> "),
                members,
                inputs,
                parallelism: head.parallelism,
                kind,
            }
        })
        .collect()
}

/// Flink's name of a ship strategy.
pub fn strategy_name(s: ShipStrategy) -> &'static str {
    match s {
        ShipStrategy::Forward => "FORWARD",
        ShipStrategy::Hash => "HASH",
        ShipStrategy::Rebalance => "REBALANCE",
        ShipStrategy::Broadcast => "BROADCAST",
        ShipStrategy::Global => "GLOBAL",
    }
}

/// Flink's execution state of a subtask of a job in state `s`.
fn execution_state(s: JobState) -> &'static str {
    match s {
        JobState::Initializing => "INITIALIZING",
        JobState::Created => "CREATED",
        JobState::Running => "RUNNING",
        JobState::Failing | JobState::Failed => "FAILED",
        JobState::Cancelling => "CANCELING",
        JobState::Canceled => "CANCELED",
        JobState::Finished => "FINISHED",
        JobState::Restarting => "DEPLOYING",
        JobState::Suspended => "CANCELED",
        JobState::Reconciling => "RECONCILING",
    }
}

const EXECUTION_STATES: [&str; 10] = [
    "CREATED",
    "SCHEDULED",
    "DEPLOYING",
    "RUNNING",
    "FINISHED",
    "CANCELING",
    "CANCELED",
    "FAILED",
    "RECONCILING",
    "INITIALIZING",
];

/// The instance of operator `op` on worker `subtask`: by binary search when the subtasks are
/// sorted by (operator, subtask), as [`JobSnapshot::merge`] and the routes leave them, else
/// (or when it is absent) by a scan.
pub fn instance(snap: &JobSnapshot, op: usize, subtask: usize) -> Option<&SubtaskSnapshot> {
    let all = &snap.subtasks;
    if let Ok(i) = all.binary_search_by_key(&(op, subtask), |s| (s.operator, s.subtask)) {
        return Some(&all[i]);
    }
    all.iter()
        .find(|s| s.operator == op && s.subtask == subtask)
}

/// A metric of a member operator at one subtask (worker), NaN treated as absent.
fn op_metric(snap: &JobSnapshot, op: usize, subtask: usize, name: &str) -> Option<f64> {
    instance(snap, op, subtask)
        .and_then(|s| s.metrics.get(name).copied())
        .filter(|v| !v.is_nan())
}

/// The subtask (worker) indices of a vertex: those that report for its head, or
/// `0..parallelism` when none has reported yet.
pub fn subtask_indices(snap: &JobSnapshot, v: &Vertex) -> Vec<usize> {
    let mut idx: Vec<usize> = snap.subtasks_of(v.members[0]).map(|s| s.subtask).collect();
    idx.sort_unstable();
    idx.dedup();
    if idx.is_empty() {
        idx = (0..v.parallelism).collect();
    }
    idx
}

/// The process a vertex subtask runs in.
fn process_of(snap: &JobSnapshot, v: &Vertex, subtask: usize) -> usize {
    instance(snap, v.members[0], subtask)
        .map(|s| s.process)
        .or_else(|| {
            snap.workers
                .iter()
                .find(|w| w.index == subtask)
                .map(|w| w.process)
        })
        .unwrap_or(0)
}

/// The task-level metrics of a vertex subtask, with Flink's names, followed by every
/// member's own metrics as `<operator name>.<metric>` (Flink's operator metrics in a task).
pub fn task_metrics(snap: &JobSnapshot, v: &Vertex, subtask: usize) -> BTreeMap<String, f64> {
    let head = v.members[0];
    let tail = *v.members.last().expect("a chain has its head");
    let m = |op: usize, name: &str| op_metric(snap, op, subtask, name);
    let mut out = BTreeMap::new();
    let mut put = |name: &str, value: Option<f64>| {
        if let Some(value) = value {
            out.insert(name.to_string(), value);
        }
    };
    put("numRecordsIn", m(head, "numRecordsIn"));
    put("numRecordsInPerSecond", m(head, "numRecordsInPerSecond"));
    put("numRecordsOut", m(tail, "numRecordsOut"));
    put("numRecordsOutPerSecond", m(tail, "numRecordsOutPerSecond"));
    put("currentInputWatermark", m(head, "currentInputWatermark"));
    put("currentOutputWatermark", m(tail, "currentOutputWatermark"));
    let over = |name: &str| -> Vec<f64> { v.members.iter().filter_map(|&o| m(o, name)).collect() };
    let sum = |xs: Vec<f64>| (!xs.is_empty()).then(|| xs.iter().sum::<f64>());
    let max = |xs: Vec<f64>| xs.into_iter().reduce(f64::max);
    let busy = sum(over("busyTimeMsPerSecond"));
    let bp = max(over("backPressuredTimeMsPerSecond"));
    put("busyTimeMsPerSecond", busy);
    put("backPressuredTimeMsPerSecond", bp);
    put("isBackPressured", max(over("isBackPressured")));
    let idle = over("idleTimeMsPerSecond")
        .into_iter()
        .reduce(f64::min)
        .or_else(|| busy.map(|b| (1000.0 - b - bp.unwrap_or(0.0)).max(0.0)));
    put("idleTimeMsPerSecond", idle);
    put("numLateRecordsDropped", sum(over("numLateRecordsDropped")));
    put("accumulatedBusyTimeMs", sum(over("accumulatedBusyTimeMs")));
    put("accumulatedIdleTimeMs", sum(over("accumulatedIdleTimeMs")));
    put(
        "accumulatedBackPressuredTimeMs",
        max(over("accumulatedBackPressuredTimeMs")),
    );
    for &o in &v.members {
        let name = &snap.operators[o].name;
        if let Some(s) = instance(snap, o, subtask) {
            for (k, val) in &s.metrics {
                out.insert(format!("{name}.{k}"), *val);
            }
        }
    }
    out
}

/// The `metrics` object of a vertex (or vertex subtask) in job details: bytes are unknown
/// (0, complete).
fn io_metrics(records_in: f64, records_out: f64, busy: f64, idle: f64, bp: f64) -> Value {
    json!({
        "read-bytes": 0,
        "read-bytes-complete": true,
        "write-bytes": 0,
        "write-bytes-complete": true,
        "read-records": records_in as u64,
        "read-records-complete": true,
        "write-records": records_out as u64,
        "write-records-complete": true,
        "accumulated-backpressured-time": bp as u64,
        "accumulated-idle-time": idle as u64,
        "accumulated-busy-time": busy as u64,
    })
}

fn sum_task_metric(snap: &JobSnapshot, v: &Vertex, name: &str) -> f64 {
    subtask_indices(snap, v)
        .into_iter()
        .filter_map(|s| task_metrics(snap, v, s).get(name).copied())
        .filter(|x| x.is_finite())
        .sum()
}

fn duration(snap: &JobSnapshot) -> i64 {
    let end = if snap.end_time >= 0 {
        snap.end_time
    } else {
        snap.now
    };
    (end - snap.start_time).max(0)
}

fn status_counts(v: &Vertex, snap: &JobSnapshot) -> Map<String, Value> {
    let mut m = Map::new();
    for s in EXECUTION_STATES {
        m.insert(s.to_string(), json!(0));
    }
    m.insert(
        execution_state(snap.state).to_string(),
        json!(subtask_indices(snap, v).len()),
    );
    m
}

/// `GET /jobs/{jid}/plan`'s `plan` object (Flink's JobGraph plan).
pub fn plan(snap: &JobSnapshot) -> Value {
    let vs = vertices(snap);
    let nodes: Vec<Value> = vs
        .iter()
        .map(|v| {
            let inputs: Vec<Value> = v
                .inputs
                .iter()
                .enumerate()
                .map(|(num, (from, s))| {
                    json!({
                        "num": num,
                        "id": vs[*from].id,
                        "ship_strategy": strategy_name(*s),
                        "exchange": "pipelined_bounded",
                    })
                })
                .collect();
            let ops: Vec<&OperatorInfo> = v.members.iter().map(|&m| &snap.operators[m]).collect();
            json!({
                "id": v.id,
                "parallelism": v.parallelism,
                "operator": ops.iter().map(|o| o.kind.as_str()).collect::<Vec<_>>().join(" -> "),
                "operator_strategy": "",
                "description": v.name,
                "optimizer_properties": {},
                "inputs": inputs,
            })
        })
        .collect();
    json!({"jid": snap.job_id, "name": snap.name, "type": "STREAMING", "nodes": nodes})
}

/// `GET /jobs/{jid}` (Flink's JobDetailsInfo).
pub fn job_details(snap: &JobSnapshot) -> Value {
    let vs = vertices(snap);
    let mut counts = BTreeMap::<&str, usize>::new();
    let vertices: Vec<Value> = vs
        .iter()
        .map(|v| {
            *counts.entry(execution_state(snap.state)).or_default() += 1;
            json!({
                "id": v.id,
                "name": v.name,
                "maxParallelism": snap.max_parallelism,
                "parallelism": v.parallelism,
                "status": execution_state(snap.state),
                "start-time": snap.start_time,
                "end-time": snap.end_time,
                "duration": duration(snap),
                "tasks": status_counts(v, snap),
                "metrics": io_metrics(
                    sum_task_metric(snap, v, "numRecordsIn"),
                    sum_task_metric(snap, v, "numRecordsOut"),
                    sum_task_metric(snap, v, "accumulatedBusyTimeMs"),
                    sum_task_metric(snap, v, "accumulatedIdleTimeMs"),
                    sum_task_metric(snap, v, "accumulatedBackPressuredTimeMs"),
                ),
            })
        })
        .collect();
    let mut status_counts = Map::new();
    for s in EXECUTION_STATES {
        status_counts.insert(
            s.to_string(),
            json!(counts.get(s).copied().unwrap_or_default()),
        );
    }
    let mut timestamps = Map::new();
    for s in [
        JobState::Initializing,
        JobState::Created,
        JobState::Running,
        JobState::Failing,
        JobState::Failed,
        JobState::Cancelling,
        JobState::Canceled,
        JobState::Finished,
        JobState::Restarting,
        JobState::Suspended,
        JobState::Reconciling,
    ] {
        timestamps.insert(
            s.as_str().to_string(),
            json!(snap.timestamps.get(&s).copied().unwrap_or(0)),
        );
    }
    json!({
        "jid": snap.job_id,
        "name": snap.name,
        "isStoppable": snap.state == JobState::Running,
        "state": snap.state.as_str(),
        "job-type": "STREAMING",
        "start-time": snap.start_time,
        "end-time": snap.end_time,
        "duration": duration(snap),
        "maxParallelism": snap.max_parallelism,
        "now": snap.now,
        "timestamps": timestamps,
        "vertices": vertices,
        "status-counts": status_counts,
        "plan": plan(snap),
    })
}

/// One row of `GET /jobs` and `GET /jobs/overview`.
pub fn job_overview(snap: &JobSnapshot) -> Value {
    let vs = vertices(snap);
    let mut tasks = Map::new();
    tasks.insert("total".into(), json!(0));
    for s in EXECUTION_STATES {
        tasks.insert(s.to_lowercase(), json!(0));
    }
    let total: usize = vs.iter().map(|v| subtask_indices(snap, v).len()).sum();
    tasks.insert("total".into(), json!(total));
    tasks.insert(execution_state(snap.state).to_lowercase(), json!(total));
    json!({
        "jid": snap.job_id,
        "name": snap.name,
        "state": snap.state.as_str(),
        "job-type": "STREAMING",
        "start-time": snap.start_time,
        "end-time": snap.end_time,
        "duration": duration(snap),
        "last-modification": snap.timestamps.values().copied().max().unwrap_or(snap.start_time),
        "tasks": tasks,
    })
}

/// `GET /jobs/{jid}/vertices/{vid}`.
pub fn vertex_details(snap: &JobSnapshot, v: &Vertex) -> Value {
    let subtasks: Vec<Value> = subtask_indices(snap, v)
        .into_iter()
        .map(|i| {
            let m = task_metrics(snap, v, i);
            let g = |k: &str| m.get(k).copied().unwrap_or(0.0);
            let process = process_of(snap, v, i);
            let host = snap
                .processes
                .iter()
                .find(|p| p.index == process)
                .map(|p| p.host.clone())
                .unwrap_or_else(|| "localhost".to_string());
            json!({
                "subtask": i,
                "status": execution_state(snap.state),
                "attempt": 0,
                "host": host,
                "endpoint": host,
                "start-time": snap.start_time,
                "end-time": snap.end_time,
                "duration": duration(snap),
                "metrics": io_metrics(g("numRecordsIn"), g("numRecordsOut"),
                    g("accumulatedBusyTimeMs"), g("accumulatedIdleTimeMs"),
                    g("accumulatedBackPressuredTimeMs")),
                "taskmanager-id": taskmanager_id(process),
                "status-duration": {},
            })
        })
        .collect();
    json!({
        "id": v.id,
        "name": v.name,
        "parallelism": v.parallelism,
        "maxParallelism": snap.max_parallelism,
        "now": snap.now,
        "subtasks": subtasks,
    })
}

/// The id of a process in `/taskmanagers`.
pub fn taskmanager_id(process: usize) -> String {
    format!("process-{process}")
}

/// Flink's backpressure level of a ratio: OK ≤ 0.10 < LOW ≤ 0.5 < HIGH.
pub fn backpressure_level(ratio: f64) -> &'static str {
    if ratio.is_nan() || ratio <= 0.10 {
        "ok"
    } else if ratio <= 0.5 {
        "low"
    } else {
        "high"
    }
}

/// `GET /jobs/{jid}/vertices/{vid}/backpressure`.
pub fn backpressure(snap: &JobSnapshot, v: &Vertex) -> Value {
    let mut worst = 0.0f64;
    let subtasks: Vec<Value> = subtask_indices(snap, v)
        .into_iter()
        .map(|i| {
            let m = task_metrics(snap, v, i);
            let ratio_of = |k: &str| {
                let x = m.get(k).copied().unwrap_or(0.0) / 1000.0;
                if x.is_finite() {
                    x.clamp(0.0, 1.0)
                } else {
                    0.0
                }
            };
            let ratio = ratio_of("backPressuredTimeMsPerSecond");
            worst = worst.max(ratio);
            json!({
                "subtask": i,
                "attempt-number": 0,
                "backpressureLevel": backpressure_level(ratio),
                "ratio": ratio,
                "idleRatio": ratio_of("idleTimeMsPerSecond"),
                "busyRatio": ratio_of("busyTimeMsPerSecond"),
                "other-concurrent-attempts": [],
            })
        })
        .collect();
    json!({
        "status": "ok",
        "backpressureLevel": backpressure_level(worst),
        "end-timestamp": snap.now,
        "subtasks": subtasks,
    })
}

/// A metric value as Flink's metric routes print it: a string, integers without a fraction.
pub fn metric_string(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e17 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// `GET /jobs/{jid}/vertices/{vid}/watermarks`.
pub fn watermarks(snap: &JobSnapshot, v: &Vertex) -> Value {
    let rows: Vec<Value> = subtask_indices(snap, v)
        .into_iter()
        .filter_map(|i| {
            task_metrics(snap, v, i).get("currentInputWatermark").map(
                |w| json!({"id": format!("{i}.currentInputWatermark"), "value": metric_string(*w)}),
            )
        })
        .collect();
    Value::Array(rows)
}

/// The metrics of a vertex by Flink's vertex-scope ids: `<subtask>.<metric>`.
pub fn vertex_metrics(snap: &JobSnapshot, v: &Vertex) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for i in subtask_indices(snap, v) {
        for (k, x) in task_metrics(snap, v, i) {
            out.insert(format!("{i}.{k}"), x);
        }
    }
    out
}

/// A metrics query answer: the list of ids without `get`, else `[{"id","value"}]` for the
/// requested ids that exist.
pub fn metric_query(metrics: &BTreeMap<String, f64>, get: Option<&[String]>) -> Value {
    match get {
        None => Value::Array(metrics.keys().map(|k| json!({"id": k})).collect()),
        Some(ids) => Value::Array(
            ids.iter()
                .filter_map(|id| {
                    metrics
                        .get(id)
                        .map(|v| json!({"id": id, "value": metric_string(*v)}))
                })
                .collect(),
        ),
    }
}

/// The aggregations of Flink's `…/subtasks/metrics?agg=`.
pub const AGGREGATIONS: [&str; 5] = ["min", "max", "avg", "sum", "skew"];

/// `GET …/subtasks/metrics?get=&agg=&subtasks=`: per metric the aggregates over the chosen
/// subtasks; without `get`, the list of metric ids.
pub fn subtask_metric_query(
    snap: &JobSnapshot,
    v: &Vertex,
    get: Option<&[String]>,
    aggs: &[&str],
    subtasks: Option<&[usize]>,
) -> Value {
    let per: Vec<BTreeMap<String, f64>> = subtask_indices(snap, v)
        .into_iter()
        .filter(|i| subtasks.is_none_or(|s| s.contains(i)))
        .map(|i| task_metrics(snap, v, i))
        .collect();
    let Some(ids) = get else {
        let mut names: Vec<&String> = per.iter().flat_map(|m| m.keys()).collect();
        names.sort();
        names.dedup();
        return Value::Array(names.into_iter().map(|k| json!({"id": k})).collect());
    };
    let rows = ids
        .iter()
        .filter_map(|id| {
            let xs: Vec<f64> = per.iter().filter_map(|m| m.get(id).copied()).collect();
            if xs.is_empty() {
                return None;
            }
            let sum: f64 = xs.iter().sum();
            let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
            let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let avg = sum / xs.len() as f64;
            let mut row = Map::new();
            row.insert("id".into(), json!(id));
            for &a in aggs {
                let value = match a {
                    "min" => min,
                    "max" => max,
                    "avg" => avg,
                    "sum" => sum,
                    // Flink's skew: how far the max lies above the mean, in percent of it.
                    _ => {
                        if avg == 0.0 {
                            0.0
                        } else {
                            (max - avg) / avg * 100.0
                        }
                    }
                };
                row.insert(a.into(), json_number(value));
            }
            Some(Value::Object(row))
        })
        .collect();
    Value::Array(rows)
}

/// A JSON number, or `null` for NaN and infinities (which JSON cannot carry).
pub fn json_number(v: f64) -> Value {
    serde_json::Number::from_f64(v)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// Flink's statistics object of checkpoint sizes and durations.
fn stats(mut xs: Vec<f64>) -> Value {
    if xs.is_empty() {
        return json!({"min":0,"max":0,"avg":0,"p50":0.0,"p90":0.0,"p95":0.0,"p99":0.0,"p999":0.0});
    }
    xs.sort_by(f64::total_cmp);
    let q = |p: f64| xs[(((p * xs.len() as f64).ceil() as usize).max(1) - 1).min(xs.len() - 1)];
    let avg = xs.iter().sum::<f64>() / xs.len() as f64;
    json!({
        "min": xs[0] as u64, "max": xs[xs.len() - 1] as u64, "avg": avg.round() as u64,
        "p50": q(0.5), "p90": q(0.9), "p95": q(0.95), "p99": q(0.99), "p999": q(0.999),
    })
}

fn status_name(s: CheckpointStatus) -> &'static str {
    match s {
        CheckpointStatus::InProgress => "IN_PROGRESS",
        CheckpointStatus::Completed => "COMPLETED",
        CheckpointStatus::Failed => "FAILED",
    }
}

/// One checkpoint in Flink's shape (completed, failed or pending statistics).
pub fn checkpoint(c: &CheckpointRecord, tasks: Value) -> Value {
    let mut v = json!({
        "className": match c.status {
            CheckpointStatus::Completed => "completed",
            CheckpointStatus::Failed => "failed",
            CheckpointStatus::InProgress => "in_progress",
        },
        "id": c.id,
        "status": status_name(c.status),
        "is_savepoint": c.is_savepoint,
        "savepointFormat": if c.is_savepoint { json!("CANONICAL") } else { Value::Null },
        "trigger_timestamp": c.trigger_timestamp,
        "latest_ack_timestamp": c.latest_ack_timestamp,
        "checkpointed_size": c.checkpointed_size,
        "state_size": c.state_size,
        "end_to_end_duration": c.end_to_end_duration,
        "alignment_buffered": 0,
        "processed_data": 0,
        "persisted_data": 0,
        "num_subtasks": c.num_subtasks,
        "num_acknowledged_subtasks": c.num_acknowledged_subtasks,
        "checkpoint_type": if c.is_savepoint { "SAVEPOINT" } else { "CHECKPOINT" },
        "tasks": tasks,
    });
    let o = v.as_object_mut().expect("an object");
    if c.status == CheckpointStatus::Completed {
        o.insert("external_path".into(), json!(c.external_path));
        o.insert("discarded".into(), json!(false));
    }
    if c.status == CheckpointStatus::Failed {
        o.insert("failure_timestamp".into(), json!(c.failure_timestamp));
        o.insert("failure_message".into(), json!(c.failure_message));
    }
    v
}

/// `GET /jobs/{jid}/checkpoints` (Flink's CheckpointingStatistics).
pub fn checkpoints(snap: &JobSnapshot) -> Value {
    let cp = &snap.checkpoints;
    let completed: Vec<&CheckpointRecord> = cp
        .history
        .iter()
        .filter(|c| c.status == CheckpointStatus::Completed)
        .collect();
    let of = |f: fn(&CheckpointRecord) -> u64| completed.iter().map(|c| f(c) as f64).collect();
    let latest = |pred: &dyn Fn(&CheckpointRecord) -> bool| {
        cp.history
            .iter()
            .rev()
            .find(|c| pred(c))
            .map(|c| checkpoint(c, json!({})))
            .unwrap_or(Value::Null)
    };
    let restored = cp
        .latest_restored
        .as_ref()
        .map(|r| {
            json!({"id": r.id, "restore_timestamp": r.restore_timestamp,
                   "is_savepoint": r.is_savepoint, "external_path": r.external_path})
        })
        .unwrap_or(Value::Null);
    json!({
        "counts": {
            "restored": cp.restored,
            "total": cp.completed + cp.failed + cp.in_progress,
            "in_progress": cp.in_progress,
            "completed": cp.completed,
            "failed": cp.failed,
        },
        "summary": {
            "checkpointed_size": stats(of(|c| c.checkpointed_size)),
            "state_size": stats(of(|c| c.state_size)),
            "end_to_end_duration": stats(of(|c| c.end_to_end_duration)),
            "alignment_buffered": stats(vec![]),
            "processed_data": stats(vec![]),
            "persisted_data": stats(vec![]),
        },
        "latest": {
            "completed": latest(&|c| c.status == CheckpointStatus::Completed && !c.is_savepoint),
            "savepoint": latest(&|c| c.status == CheckpointStatus::Completed && c.is_savepoint),
            "failed": latest(&|c| c.status == CheckpointStatus::Failed),
            "restored": restored,
        },
        "history": cp.history.iter().rev().map(|c| checkpoint(c, json!({}))).collect::<Vec<_>>(),
    })
}

/// `GET /jobs/{jid}/checkpoints/details/{cid}`, or `None` for an id not in the history.
/// Spate keeps no per-vertex checkpoint statistics, so `tasks` lists each vertex with the
/// checkpoint's own figures.
pub fn checkpoint_details(snap: &JobSnapshot, id: u64) -> Option<Value> {
    let c = snap.checkpoints.history.iter().find(|c| c.id == id)?;
    let mut tasks = Map::new();
    for v in vertices(snap) {
        tasks.insert(
            v.id.clone(),
            json!({
                "id": v.id,
                "status": status_name(c.status),
                "latest_ack_timestamp": c.latest_ack_timestamp,
                "num_subtasks": v.parallelism,
                "num_acknowledged_subtasks":
                    if c.status == CheckpointStatus::Completed { v.parallelism } else { 0 },
            }),
        );
    }
    Some(checkpoint(c, Value::Object(tasks)))
}

/// `GET /jobs/{jid}/exceptions` (Flink's JobExceptionsInfoWithHistory), newest first.
pub fn exceptions(snap: &JobSnapshot) -> Value {
    let entries: Vec<Value> = snap
        .exceptions
        .iter()
        .rev()
        .map(|e| {
            json!({
                "exceptionName": if e.restarted { "JobRestart" } else { "JobFailure" },
                "stacktrace": e.message,
                "timestamp": e.timestamp,
                "taskName": e.operator,
                "location": null,
                "endpoint": null,
                "taskManagerId": null,
                "failureLabels": {},
                "concurrentExceptions": [],
            })
        })
        .collect();
    let root = snap.exceptions.last();
    json!({
        "root-exception": root.map(|e| e.message.clone()),
        "timestamp": root.map(|e| e.timestamp),
        "all-exceptions": [],
        "truncated": false,
        "exceptionHistory": {"entries": entries, "truncated": false},
    })
}

/// One row of `GET /taskmanagers` per process.
pub fn taskmanagers(snap: &JobSnapshot) -> Value {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let (total, free) = meminfo();
    let rows: Vec<Value> = snap
        .processes
        .iter()
        .map(|p| {
            let slots = snap.workers.iter().filter(|w| w.process == p.index).count();
            let metrics: Map<String, Value> = p
                .metrics
                .iter()
                .map(|(k, v)| (k.clone(), json_number(*v)))
                .collect();
            json!({
                "id": taskmanager_id(p.index),
                "path": format!("spate://{}/{}", p.host, p.pid),
                "dataPort": p.metrics.get("dataPort").map(|x| *x as i64).unwrap_or(-1),
                "jmxPort": -1,
                "timeSinceLastHeartbeat": 0,
                "slotsNumber": slots,
                "freeSlots": 0,
                "hardware": {
                    "cpuCores": cores,
                    "physicalMemory": total,
                    "freeMemory": free,
                    "managedMemory": 0,
                },
                "metrics": metrics,
            })
        })
        .collect();
    json!({ "taskmanagers": rows })
}

/// Total and available memory of this host in bytes, from `/proc/meminfo` (0 elsewhere).
fn meminfo() -> (u64, u64) {
    let Ok(text) = std::fs::read_to_string("/proc/meminfo") else {
        return (0, 0);
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .unwrap_or(0)
    };
    (field("MemTotal:"), field("MemAvailable:"))
}
