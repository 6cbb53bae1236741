//! `/metrics`: the Prometheus text format (0.0.4), named as Flink's Prometheus reporter names
//! its metrics.
//!
//! A family is `<prefix>_<scope>_<metric>`, the metric's dots replaced by underscores and its
//! camelCase kept, as Flink does:
//!
//! | scope | family | labels |
//! |---|---|---|
//! | operator instance | `<prefix>_taskmanager_job_task_operator_<metric>` | job_id, job_name, task_id, task_name, subtask_index, operator_id, operator_name, tm_id, host |
//! | task (vertex) instance | `<prefix>_taskmanager_job_task_<metric>`: records in/out and their rates, busy, idle and backpressured time | the same without operator_* |
//! | worker | `<prefix>_taskmanager_worker_<metric>` (Spate's own) | worker_index, tm_id, host |
//! | process | `<prefix>_taskmanager_<metric>` (`Status_CPU_Load`, …) | tm_id, host |
//! | job | `<prefix>_jobmanager_job_<metric>` | job_id, job_name, host |
//!
//! Counters and gauges are gauges (Flink's reporter does the same: its counters may
//! decrease); histograms are summaries with Flink's quantiles plus `_count` and `_sum`.
//!
//! Label values are escaped (`\\`, `\"`, `\n`), not filtered: Flink's reporter by default
//! replaces every character outside `[a-zA-Z0-9:_]` with `_`, which loses operator names;
//! escaping keeps them exact and is what the text format defines. Families are written in
//! name order with one `# TYPE` line each, so the output is stable.

use std::collections::BTreeMap;
use std::fmt::Write;

use spate_metrics::{HistogramSnapshot, JobSnapshot};

use crate::flink::{self, taskmanager_id};

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Default)]
struct Family {
    summary: bool,
    lines: Vec<String>,
}

/// The families of one scrape, by name.
#[derive(Default)]
struct Encoder {
    families: BTreeMap<String, Family>,
}

/// `name` with every character outside `[a-zA-Z0-9_:]` replaced by `_` (Flink's rule).
pub fn sanitize_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A label value escaped for the text format.
pub fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A sample value in the text format (`NaN`, `+Inf`, `-Inf` spelled as Prometheus wants).
fn value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

fn labels(pairs: &[(&str, String)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let mut s = String::from("{");
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{k}=\"{}\"", escape_label(v));
    }
    s.push('}');
    s
}

impl Encoder {
    /// A gauge sample; `labels` is already rendered (see [`labels`]), since an instance's
    /// labels are the same for all its metrics.
    fn gauge(&mut self, family: String, labels: &str, v: f64) {
        let line = format!("{family}{labels} {}", value(v));
        self.families.entry(family).or_default().lines.push(line);
    }

    fn summary(&mut self, family: String, labels_: &[(&str, String)], h: &HistogramSnapshot) {
        let mut lines = Vec::new();
        for (q, v) in [
            ("0.5", h.p50),
            ("0.75", h.p75),
            ("0.95", h.p95),
            ("0.98", h.p98),
            ("0.99", h.p99),
            ("0.999", h.p999),
        ] {
            let mut with_q = labels_.to_vec();
            with_q.push(("quantile", q.to_string()));
            lines.push(format!("{family}{} {}", labels(&with_q), value(v)));
        }
        let l = labels(labels_);
        lines.push(format!("{family}_count{l} {}", h.count));
        lines.push(format!(
            "{family}_sum{l} {}",
            value(h.mean * h.count as f64)
        ));
        let f = self.families.entry(family).or_default();
        f.summary = true;
        f.lines.extend(lines);
    }

    fn finish(self) -> String {
        let mut out = String::new();
        for (name, f) in self.families {
            let kind = if f.summary { "summary" } else { "gauge" };
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for l in f.lines {
                out.push_str(&l);
                out.push('\n');
            }
        }
        out
    }
}

/// The metrics reported at task scope too (`<prefix>_taskmanager_job_task_<metric>`).
const TASK_SCOPE: &[&str] = &[
    "numRecordsIn",
    "numRecordsOut",
    "numRecordsInPerSecond",
    "numRecordsOutPerSecond",
    "busyTimeMsPerSecond",
    "idleTimeMsPerSecond",
    "backPressuredTimeMsPerSecond",
    "isBackPressured",
    "accumulatedBusyTimeMs",
    "accumulatedIdleTimeMs",
    "accumulatedBackPressuredTimeMs",
];

/// The scrape of one job: every metric of the snapshot, Flink-named under `prefix`.
pub fn encode(snap: &JobSnapshot, prefix: &str) -> String {
    let mut enc = Encoder::default();
    let host_of = |process: usize| {
        snap.processes
            .iter()
            .find(|p| p.index == process)
            .map(|p| p.host.clone())
            .unwrap_or_else(|| "localhost".into())
    };
    let vertices = flink::vertices(snap);
    for v in &vertices {
        for subtask in flink::subtask_indices(snap, v) {
            let process = flink::instance(snap, v.members[0], subtask)
                .map(|s| s.process)
                .unwrap_or(0);
            let task_labels = vec![
                ("job_id", snap.job_id.clone()),
                ("job_name", snap.name.clone()),
                ("task_id", v.id.clone()),
                ("task_name", v.name.clone()),
                ("subtask_index", subtask.to_string()),
                ("tm_id", taskmanager_id(process)),
                ("host", host_of(process)),
            ];
            // Task scope: Flink's task I/O and time metrics of the chain (watermarks and
            // the rest stay at operator scope, which keeps the series count down).
            let task_rendered = labels(&task_labels);
            for (k, x) in flink::task_metrics(snap, v, subtask) {
                if TASK_SCOPE.contains(&k.as_str()) {
                    enc.gauge(
                        format!("{prefix}_taskmanager_job_task_{}", sanitize_name(&k)),
                        &task_rendered,
                        x,
                    );
                }
            }
            for &m in &v.members {
                let op = &snap.operators[m];
                let Some(s) = flink::instance(snap, m, subtask) else {
                    continue;
                };
                let mut op_labels = task_labels.clone();
                op_labels.insert(5, ("operator_id", op.id.clone()));
                op_labels.insert(6, ("operator_name", op.name.clone()));
                let op_rendered = labels(&op_labels);
                for (k, x) in &s.metrics {
                    enc.gauge(
                        format!(
                            "{prefix}_taskmanager_job_task_operator_{}",
                            sanitize_name(k)
                        ),
                        &op_rendered,
                        *x,
                    );
                }
                for (k, h) in &s.histograms {
                    enc.summary(
                        format!(
                            "{prefix}_taskmanager_job_task_operator_{}",
                            sanitize_name(k)
                        ),
                        &op_labels,
                        h,
                    );
                }
            }
        }
    }
    for w in &snap.workers {
        let l = labels(&[
            ("worker_index", w.index.to_string()),
            ("tm_id", taskmanager_id(w.process)),
            ("host", host_of(w.process)),
        ]);
        for (k, x) in &w.metrics {
            enc.gauge(
                format!("{prefix}_taskmanager_worker_{}", sanitize_name(k)),
                &l,
                *x,
            );
        }
    }
    for p in &snap.processes {
        let l = labels(&[("tm_id", taskmanager_id(p.index)), ("host", p.host.clone())]);
        for (k, x) in &p.metrics {
            enc.gauge(format!("{prefix}_taskmanager_{}", sanitize_name(k)), &l, *x);
        }
    }
    let l = labels(&[
        ("job_id", snap.job_id.clone()),
        ("job_name", snap.name.clone()),
        ("host", host_of(0)),
    ]);
    for (k, x) in &snap.metrics {
        enc.gauge(
            format!("{prefix}_jobmanager_job_{}", sanitize_name(k)),
            &l,
            *x,
        );
    }
    enc.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized_and_labels_escaped() {
        assert_eq!(sanitize_name("Status.CPU.Load"), "Status_CPU_Load");
        assert_eq!(sanitize_name("my-metric é"), "my_metric__");
        assert_eq!(escape_label("a\\b\"c\nd é"), "a\\\\b\\\"c\\nd é");
        assert_eq!(value(f64::NAN), "NaN");
        assert_eq!(value(f64::NEG_INFINITY), "-Inf");
        // The shortest decimal that reads back as the same f64 (i64::MIN, Flink's "no watermark").
        assert_eq!(
            value(i64::MIN as f64).parse::<f64>().unwrap(),
            i64::MIN as f64
        );
        assert_eq!(value(0.25), "0.25");
    }

    #[test]
    fn one_type_line_per_family_in_name_order() {
        let mut e = Encoder::default();
        e.gauge("b_x".into(), &labels(&[("k", "1".into())]), 1.0);
        e.gauge("a_x".into(), &labels(&[("k", "1".into())]), 2.0);
        e.gauge("b_x".into(), &labels(&[("k", "2".into())]), 3.0);
        let h = HistogramSnapshot {
            count: 2,
            mean: 1.5,
            p50: 1.0,
            ..Default::default()
        };
        e.summary("c_lat".into(), &[], &h);
        let out = e.finish();
        assert_eq!(
            out.lines().filter(|l| l.starts_with("# TYPE")).count(),
            3,
            "{out}"
        );
        assert!(out.starts_with("# TYPE a_x gauge\na_x{k=\"1\"} 2\n# TYPE b_x gauge\n"));
        assert!(out.contains("c_lat{quantile=\"0.5\"} 1\n"));
        assert!(out.contains("c_lat_count 2\nc_lat_sum 3\n"));
    }
}
