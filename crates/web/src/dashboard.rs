//! `GET /v1/jobs/{jid}/dashboard`: everything the dashboard shows, in one poll.
//!
//! The graph arrives laid out ([`crate::layout`]); each node carries the numbers its box
//! prints: records/s in and out, busy % (max and mean over subtasks), backpressure (the
//! largest ratio and Flink's level), the output watermark and its lag behind the snapshot's
//! clock, and the latency percentiles of its tail operator's `latency` histogram (the worst
//! subtask's, since bucketed percentiles of different subtasks cannot be merged exactly).

use serde_json::{json, Value};
use spate_metrics::{CheckpointStatus, JobSnapshot};

use crate::flink::{self, json_number};
use crate::layout::{layout, NODE_H, NODE_W};

/// A watermark at or below this is Flink's "none yet" (`i64::MIN`) or close to it.
const NO_WATERMARK: f64 = -4.0e18;

fn max_of(xs: &[f64]) -> Option<f64> {
    xs.iter()
        .copied()
        .filter(|x| x.is_finite())
        .reduce(f64::max)
}

/// The dashboard's data for one job.
pub fn dashboard(snap: &JobSnapshot) -> Value {
    let vs = flink::vertices(snap);
    let edges: Vec<(usize, usize)> = vs
        .iter()
        .enumerate()
        .flat_map(|(to, v)| v.inputs.iter().map(move |(from, _)| (*from, to)))
        .collect();
    let (placed, width, height) = layout(vs.len(), &edges);
    let nodes: Vec<Value> = vs
        .iter()
        .zip(&placed)
        .map(|(v, p)| {
            let subtasks = flink::subtask_indices(snap, v);
            let per: Vec<_> = subtasks
                .iter()
                .map(|&i| (i, flink::task_metrics(snap, v, i)))
                .collect();
            let col = |k: &str| -> Vec<f64> {
                per.iter().filter_map(|(_, m)| m.get(k).copied()).collect()
            };
            let sum = |k: &str| col(k).iter().filter(|x| x.is_finite()).sum::<f64>();
            let busy = col("busyTimeMsPerSecond");
            let busy_max = max_of(&busy).map(|b| b / 10.0);
            let finite_busy: Vec<f64> = busy.iter().copied().filter(|x| x.is_finite()).collect();
            let busy_avg = (!finite_busy.is_empty())
                .then(|| finite_busy.iter().sum::<f64>() / finite_busy.len() as f64 / 10.0);
            let bp = max_of(&col("backPressuredTimeMsPerSecond")).unwrap_or(0.0) / 1000.0;
            let wm = col("currentOutputWatermark")
                .into_iter()
                .filter(|w| *w > NO_WATERMARK)
                .reduce(f64::min);
            let tail = *v.members.last().expect("a chain has its head");
            let lat: Vec<_> = snap
                .subtasks_of(tail)
                .filter_map(|s| s.histograms.get("latency"))
                .filter(|h| h.count > 0)
                .collect();
            let latency = (!lat.is_empty()).then(|| {
                let m = |f: fn(&spate_metrics::HistogramSnapshot) -> f64| {
                    lat.iter().map(|h| f(h)).fold(0.0, f64::max)
                };
                json!({
                    "p50": m(|h| h.p50), "p95": m(|h| h.p95), "p99": m(|h| h.p99),
                    "max": m(|h| h.max), "count": lat.iter().map(|h| h.count).sum::<u64>(),
                })
            });
            let rows: Vec<Value> = per
                .iter()
                .map(|(i, m)| {
                    let g = |k: &str| m.get(k).copied().map(json_number).unwrap_or(Value::Null);
                    json!({
                        "subtask": i,
                        "numRecordsIn": g("numRecordsIn"),
                        "numRecordsOut": g("numRecordsOut"),
                        "numRecordsInPerSecond": g("numRecordsInPerSecond"),
                        "numRecordsOutPerSecond": g("numRecordsOutPerSecond"),
                        "busyTimeMsPerSecond": g("busyTimeMsPerSecond"),
                        "backPressuredTimeMsPerSecond": g("backPressuredTimeMsPerSecond"),
                        "currentOutputWatermark": m.get("currentOutputWatermark")
                            .copied().filter(|w| *w > NO_WATERMARK).map(json_number),
                    })
                })
                .collect();
            json!({
                "id": v.id,
                "name": v.name,
                "operators": v.members.iter().map(|&m| &snap.operators[m].name).collect::<Vec<_>>(),
                "kind": v.kind,
                "parallelism": v.parallelism,
                "x": p.x, "y": p.y, "w": NODE_W, "h": NODE_H,
                "recordsIn": sum("numRecordsIn"),
                "recordsOut": sum("numRecordsOut"),
                "inPerSecond": sum("numRecordsInPerSecond"),
                "outPerSecond": sum("numRecordsOutPerSecond"),
                "busyMax": busy_max.map(json_number),
                "busyAvg": busy_avg.map(json_number),
                "backpressure": json_number(bp),
                "backpressureLevel": flink::backpressure_level(bp),
                "watermark": wm.map(json_number),
                "watermarkLagMs": wm.map(|w| json_number((snap.now as f64 - w).max(0.0))),
                "lateDropped": sum("numLateRecordsDropped"),
                "latency": latency,
                "subtasks": rows,
            })
        })
        .collect();
    let edges: Vec<Value> = vs
        .iter()
        .enumerate()
        .flat_map(|(to, v)| {
            let vs = &vs;
            v.inputs.iter().map(move |(from, s)| {
                json!({"from": vs[*from].id, "to": vs[to].id,
                       "ship_strategy": flink::strategy_name(*s)})
            })
        })
        .collect();
    let cp = &snap.checkpoints;
    let history: Vec<Value> = cp
        .history
        .iter()
        .rev()
        .take(12)
        .map(|c| flink::checkpoint(c, json!({})))
        .collect();
    let last_completed = cp
        .history
        .iter()
        .rev()
        .find(|c| c.status == CheckpointStatus::Completed);
    let exceptions: Vec<Value> = snap
        .exceptions
        .iter()
        .rev()
        .take(10)
        .map(|e| {
            json!({"timestamp": e.timestamp, "message": e.message,
                   "operator": e.operator, "restarted": e.restarted})
        })
        .collect();
    let processes: Vec<Value> = snap
        .processes
        .iter()
        .map(|p| {
            let g = |k: &str| p.metrics.get(k).copied().map(json_number);
            json!({
                "index": p.index, "pid": p.pid, "host": p.host,
                "workers": snap.workers.iter().filter(|w| w.process == p.index).count(),
                "cpuLoad": g("Status.CPU.Load"), "cpuTime": g("Status.CPU.Time"),
                "rss": g("Status.Memory.RSS"), "peakRss": g("Status.Memory.PeakRSS"),
                "threads": g("Status.Threads.Count"),
            })
        })
        .collect();
    let workers: Vec<Value> = snap
        .workers
        .iter()
        .map(|w| {
            let g = |k: &str| w.metrics.get(k).copied().map(json_number);
            json!({"index": w.index, "process": w.process,
                   "busyTimeMsPerSecond": g("busyTimeMsPerSecond"),
                   "idleTimeMsPerSecond": g("idleTimeMsPerSecond")})
        })
        .collect();
    let jm = |k: &str| snap.metrics.get(k).copied().map(json_number);
    let duration = if snap.end_time >= 0 {
        snap.end_time - snap.start_time
    } else {
        snap.now - snap.start_time
    };
    json!({
        "now": snap.now,
        "job": {
            "jid": snap.job_id,
            "name": snap.name,
            "state": snap.state.as_str(),
            "terminal": snap.state.is_terminal(),
            "start-time": snap.start_time,
            "duration": duration.max(0),
            "parallelism": snap.parallelism,
            "numRestarts": jm("numRestarts").unwrap_or(json!(0)),
            "savepointsEnabled": snap.savepoints_enabled,
        },
        "graph": {"width": width, "height": height, "nodes": nodes, "edges": edges},
        "checkpoints": {
            "interval": cp.interval_ms,
            "completed": cp.completed,
            "failed": cp.failed,
            "in_progress": cp.in_progress,
            "restored": cp.restored,
            "lastAgeMs": last_completed.map(|c| snap.now - c.latest_ack_timestamp.max(c.trigger_timestamp)),
            "lastDuration": jm("lastCheckpointDuration"),
            "lastSize": jm("lastCheckpointSize"),
            "lastFullSize": jm("lastCheckpointFullSize"),
            "history": history,
        },
        "exceptions": exceptions,
        "autoscaler": snap.autoscaler.as_ref().map(|a| json!({
            "policy": a.policy,
            "workers": a.workers,
            "processes": a.processes,
            "minWorkers": a.min_workers,
            "maxWorkers": a.max_workers,
            "windows": a.windows,
            "estimateWorkers": a.estimate_workers,
            "numDecisions": a.num_decisions,
            "estimate": a.estimate.iter().map(|o| json!({
                "name": o.name, "target": json_number(o.target_input_rate),
                "trueRate": json_number(o.true_processing_rate),
                "optimal": json_number(o.optimal), "parallelism": o.parallelism,
            })).collect::<Vec<_>>(),
            "decisions": a.decisions.iter().rev().take(10).map(|d| json!({
                "timestamp": d.timestamp, "window": d.window, "from": d.from_workers,
                "to": d.to_workers, "fromProcesses": d.from_processes,
                "toProcesses": d.to_processes, "reason": d.reason,
            })).collect::<Vec<_>>(),
        })),
        "shedding": snap.shedding.as_ref().map(|s| json!({
            "headroom": json_number(s.headroom),
            "capacity": json_number(s.capacity),
            "totalLoad": json_number(s.total_load),
            "overloaded": s.overloaded,
            "fraction": json_number(s.fractions.values().copied().fold(0.0, f64::max)),
            "shed": s.shed,
        })),
        "processes": processes,
        "workers": workers,
    })
}
