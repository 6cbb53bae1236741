//! The verbs that talk to a running job over its REST API, as Flink's CLI does:
//! `spate list`, `info`, `savepoint`, `stop`, `cancel` and `metrics`.
//!
//! Every running job serves its own API (the supervisor does, for a multi-process job) and
//! registers itself in the jobs directory of this machine (`spate_metrics::registry`), so a
//! job is named by its id, a unique prefix of it, or its name. A URL (`http://host:port`)
//! reaches a job that runs elsewhere. A job that requires a token gets it from
//! `--token-file` or `SPATE_REST_TOKEN`; a job served over TLS with its own certificate needs
//! `--ca-cert`.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde_json::{json, Value};
use spate_metrics::registry;

/// How to reach a job.
#[derive(Debug, Args)]
pub struct JobArg {
    /// The job: its id, a unique prefix of it, its name, or its REST URL (`http://HOST:PORT`).
    pub job: String,
    #[command(flatten)]
    pub access: Access,
}

/// Credentials and trust for a job's API.
#[derive(Debug, Args)]
pub struct Access {
    /// A file holding the job's REST token (also: the `SPATE_REST_TOKEN` environment variable).
    #[arg(long)]
    pub token_file: Option<std::path::PathBuf>,
    /// A PEM certificate to trust for a job served over TLS with its own certificate.
    #[arg(long)]
    pub ca_cert: Option<std::path::PathBuf>,
}

/// `spate savepoint`.
#[derive(Debug, Args)]
pub struct SavepointArgs {
    #[command(flatten)]
    pub target: JobArg,
    /// Where to write it: a directory inside the job's savepoint directory (default: a new
    /// one there).
    pub dir: Option<String>,
    /// Give up waiting after this long (e.g. `90s`, `10m`).
    #[arg(long, default_value = "10m", value_parser = crate::util::parse_duration)]
    pub timeout: Duration,
}

/// `spate stop`.
#[derive(Debug, Args)]
pub struct StopArgs {
    #[command(flatten)]
    pub target: JobArg,
    /// Where to write the final savepoint: a directory inside the job's savepoint directory
    /// (default: a new one there).
    #[arg(long)]
    pub savepoint_dir: Option<String>,
    /// Advance event time to the end first, so every window and timer fires (Flink's
    /// `--drain`): for a job that will not be resumed.
    #[arg(long)]
    pub drain: bool,
    /// Give up waiting after this long.
    #[arg(long, default_value = "10m", value_parser = crate::util::parse_duration)]
    pub timeout: Duration,
}

/// `spate metrics`.
#[derive(Debug, Args)]
pub struct MetricsArgs {
    #[command(flatten)]
    pub target: JobArg,
    /// Metric names (Flink's: `numRecordsInPerSecond`, `busyTimeMsPerSecond`,
    /// `lastCheckpointDuration`, …); none for the job's metrics and every vertex's main ones.
    pub names: Vec<String>,
}

/// A job's API: its base URL, job id and an HTTP agent with its credentials.
struct Remote {
    agent: ureq::Agent,
    base: String,
    jid: String,
    token: Option<String>,
}

fn token(access: &Access) -> Result<Option<String>> {
    if let Some(path) = &access.token_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the token file {}", path.display()))?;
        let token = text.trim().to_owned();
        if token.is_empty() {
            bail!("the token file {} is empty", path.display());
        }
        return Ok(Some(token));
    }
    Ok(std::env::var("SPATE_REST_TOKEN")
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty()))
}

fn agent(access: &Access) -> Result<ureq::Agent> {
    let mut config = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        .http_status_as_error(false);
    if let Some(path) = &access.ca_cert {
        use ureq::tls::{Certificate, RootCerts, TlsConfig};
        let pem = std::fs::read(path)
            .with_context(|| format!("cannot read the certificate {}", path.display()))?;
        let cert = Certificate::from_pem(&pem)
            .map_err(|e| anyhow!("{} is not a PEM certificate: {e}", path.display()))?
            .to_owned();
        config = config.tls_config(
            TlsConfig::builder()
                .root_certs(RootCerts::Specific(std::sync::Arc::new(vec![cert])))
                .build(),
        );
    }
    Ok(config.build().new_agent())
}

impl Remote {
    /// Finds the job `arg` names and checks that its API answers.
    fn connect(arg: &JobArg) -> Result<Remote> {
        let agent = agent(&arg.access)?;
        let token = token(&arg.access)?;
        if arg.job.starts_with("http://") || arg.job.starts_with("https://") {
            let base = arg.job.trim_end_matches('/').to_owned();
            let mut remote = Remote {
                agent,
                base,
                jid: String::new(),
                token,
            };
            let jobs = remote.get("/v1/jobs")?;
            remote.jid = jobs["jobs"]
                .as_array()
                .and_then(|jobs| jobs.first())
                .and_then(|j| j["id"].as_str())
                .ok_or_else(|| anyhow!("{} serves no job", remote.base))?
                .to_owned();
            return Ok(remote);
        }
        let entries = registry::list(&registry::jobs_dir());
        let entry = registry::find(&entries, &arg.job).map_err(|e| anyhow!(e))?;
        if entry.token_required && token.is_none() {
            bail!(
                "job {} requires a token: pass --token-file or set SPATE_REST_TOKEN",
                entry.jid
            );
        }
        Ok(Remote {
            agent,
            base: entry.url.trim_end_matches('/').to_owned(),
            jid: entry.jid.clone(),
            token,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn send(&self, method: &str, path: &str, body: Option<Value>) -> Result<(u16, Value)> {
        let url = self.url(path);
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let response = match (method, body) {
            ("GET", _) => {
                let mut r = self.agent.get(&url);
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.call()
            }
            (m, body) => {
                let mut r = match m {
                    "POST" => self.agent.post(&url),
                    "PATCH" => self.agent.patch(&url),
                    other => bail!("unsupported method {other}"),
                };
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                let body = body.unwrap_or(Value::Null);
                r.header("Content-Type", "application/json")
                    .send(serde_json::to_vec(&body)?)
            }
        };
        let mut response = response.map_err(|e| anyhow!("cannot reach {url}: {e}"))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| anyhow!("cannot read the answer of {url}: {e}"))?;
        let value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok((status, value))
    }

    /// A request whose answer must be a success.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        let (status, value) = self.send(method, path, body)?;
        if (200..300).contains(&status) {
            return Ok(value);
        }
        let why = value["errors"]
            .as_array()
            .map(|e| {
                e.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| match &value {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                v => v.to_string(),
            });
        match status {
            401 => bail!("the job refused the request: it needs a valid token (--token-file or SPATE_REST_TOKEN)"),
            _ => bail!("{method} {path} failed with HTTP {status}: {why}"),
        }
    }

    fn get(&self, path: &str) -> Result<Value> {
        self.call("GET", path, None)
    }

    fn job_path(&self, rest: &str) -> String {
        format!("/v1/jobs/{}{rest}", self.jid)
    }

    /// Polls a savepoint operation until it completes; its location.
    fn wait_for_savepoint(&self, request: &Value, timeout: Duration) -> Result<String> {
        let id = request["request-id"]
            .as_str()
            .ok_or_else(|| anyhow!("the job answered without a request id: {request}"))?;
        let path = self.job_path(&format!("/savepoints/{id}"));
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.get(&path)?;
            match status["status"]["id"].as_str() {
                Some("COMPLETED") => {
                    let operation = &status["operation"];
                    if let Some(location) = operation["location"].as_str() {
                        return Ok(location.to_owned());
                    }
                    let cause = operation["failure-cause"]
                        .as_str()
                        .map(str::to_owned)
                        .or_else(|| {
                            operation["failure-cause"]["stack-trace"]
                                .as_str()
                                .map(str::to_owned)
                        })
                        .unwrap_or_else(|| operation.to_string());
                    bail!("the savepoint failed: {cause}");
                }
                Some("IN_PROGRESS") => {}
                _ => bail!("unexpected savepoint status: {status}"),
            }
            if Instant::now() >= deadline {
                bail!(
                    "the savepoint is still in progress after {}; it goes on in the job",
                    crate::util::format_duration(timeout)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// `spate list`: the running jobs of this machine.
pub fn list(access: &Access) -> Result<()> {
    let entries = registry::list(&registry::jobs_dir());
    let agent = agent(access)?;
    let token = token(access)?;
    let mut rows = Vec::new();
    for entry in &entries {
        let remote = Remote {
            agent: agent.clone(),
            base: entry.url.trim_end_matches('/').to_owned(),
            jid: entry.jid.clone(),
            token: token.clone(),
        };
        let state = match remote.get(&remote.job_path("")) {
            Ok(job) => job["state"].as_str().unwrap_or("UNKNOWN").to_owned(),
            Err(_) if entry.token_required && token.is_none() => "(needs a token)".to_owned(),
            Err(_) => "(not answering)".to_owned(),
        };
        rows.push((entry, state));
    }
    if rows.is_empty() {
        println!("No running jobs.");
        return Ok(());
    }
    println!("------------------ Running/Restarting Jobs -------------------");
    for (entry, state) in rows {
        println!(
            "{} : {} : {} ({state}) {}",
            format_time(entry.start_time),
            entry.jid,
            entry.name,
            entry.url
        );
    }
    println!("--------------------------------------------------------------");
    Ok(())
}

/// `spate info`: a job's state, vertices and checkpoints.
pub fn info(arg: &JobArg) -> Result<()> {
    let remote = Remote::connect(arg)?;
    let job = remote.get(&remote.job_path(""))?;
    let duration = job["duration"].as_i64().unwrap_or(0).max(0) as u64;
    println!(
        "Job {} \"{}\": {} for {}",
        remote.jid,
        job["name"].as_str().unwrap_or(""),
        job["state"].as_str().unwrap_or("UNKNOWN"),
        crate::util::format_duration(Duration::from_millis(duration))
    );
    println!("REST API and dashboard: {}", remote.base);
    println!(
        "{:<44} {:>5} {:>14} {:>14} {:>10} {:>10}",
        "VERTEX", "PAR", "RECORDS IN", "RECORDS OUT", "IN/S", "BUSY ms/s"
    );
    for vertex in job["vertices"].as_array().into_iter().flatten() {
        let vid = vertex["id"].as_str().unwrap_or("");
        let metrics = &vertex["metrics"];
        let rates = remote
            .get(&remote.job_path(&format!(
                "/vertices/{vid}/subtasks/metrics?get=numRecordsInPerSecond,busyTimeMsPerSecond&agg=sum,max"
            )))
            .unwrap_or(Value::Null);
        let agg = |name: &str, how: &str| {
            rates
                .as_array()
                .into_iter()
                .flatten()
                .find(|m| m["id"] == name)
                .and_then(|m| m[how].as_f64())
        };
        let name = vertex["name"].as_str().unwrap_or("");
        println!(
            "{:<44} {:>5} {:>14} {:>14} {:>10} {:>10}",
            truncate(name, 44),
            vertex["parallelism"].as_u64().unwrap_or(0),
            metrics["read-records"].as_u64().unwrap_or(0),
            metrics["write-records"].as_u64().unwrap_or(0),
            agg("numRecordsInPerSecond", "sum").map_or("-".into(), |v| format!("{v:.0}")),
            agg("busyTimeMsPerSecond", "max").map_or("-".into(), |v| format!("{v:.0}")),
        );
    }
    if let Ok(cp) = remote.get(&remote.job_path("/checkpoints")) {
        let counts = &cp["counts"];
        println!(
            "Checkpoints: {} completed, {} failed, {} in progress, {} restored",
            counts["completed"].as_u64().unwrap_or(0),
            counts["failed"].as_u64().unwrap_or(0),
            counts["in_progress"].as_u64().unwrap_or(0),
            counts["restored"].as_u64().unwrap_or(0)
        );
        if let Some(latest) = cp["latest"]["completed"].as_object() {
            println!(
                "Latest completed: {} at {} ({} bytes)",
                latest.get("id").and_then(Value::as_u64).unwrap_or(0),
                latest
                    .get("external_path")
                    .and_then(Value::as_str)
                    .unwrap_or("-"),
                latest
                    .get("state_size")
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
            );
        }
    }
    Ok(())
}

/// `spate savepoint`: triggers a savepoint and waits for it.
pub fn savepoint(args: &SavepointArgs) -> Result<()> {
    let remote = Remote::connect(&args.target)?;
    println!("Triggering savepoint for job {}.", remote.jid);
    let request = remote.call(
        "POST",
        &remote.job_path("/savepoints"),
        Some(json!({ "target-directory": args.dir, "cancel-job": false })),
    )?;
    let location = remote.wait_for_savepoint(&request, args.timeout)?;
    println!("Savepoint completed. Path: {location}");
    Ok(())
}

/// `spate stop`: stops the job with a final savepoint.
pub fn stop(args: &StopArgs) -> Result<()> {
    let remote = Remote::connect(&args.target)?;
    println!(
        "Suspending job {} with a savepoint{}.",
        remote.jid,
        if args.drain {
            ", draining it first"
        } else {
            ""
        }
    );
    let request = remote.call(
        "POST",
        &remote.job_path("/stop"),
        Some(json!({ "targetDirectory": args.savepoint_dir, "drain": args.drain })),
    )?;
    let location = remote.wait_for_savepoint(&request, args.timeout)?;
    println!("Savepoint completed. Path: {location}");
    Ok(())
}

/// `spate cancel`: cancels the job without a savepoint.
pub fn cancel(arg: &JobArg) -> Result<()> {
    let remote = Remote::connect(arg)?;
    remote.call("PATCH", &remote.job_path("?mode=cancel"), None)?;
    // Cancelling is asynchronous in Flink's API; wait briefly so that the answer is definite.
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        match remote.get(&remote.job_path("")) {
            Ok(job) if job["state"] == "CANCELED" || job["state"] == "FINISHED" => break,
            Ok(_) => std::thread::sleep(Duration::from_millis(100)),
            // The job's process has ended, and its server with it.
            Err(_) => break,
        }
    }
    println!("Cancelled job {}.", remote.jid);
    Ok(())
}

/// `spate metrics`: the job's metrics, or the named ones.
pub fn metrics(args: &MetricsArgs) -> Result<()> {
    let remote = Remote::connect(&args.target)?;
    let job_ids: Vec<String> = remote
        .get(&remote.job_path("/metrics"))?
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["id"].as_str().map(str::to_owned))
        .collect();
    let job = remote.get(&remote.job_path(""))?;
    let vertices: Vec<(String, String)> = job["vertices"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            (
                v["id"].as_str().unwrap_or("").to_owned(),
                v["name"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let (job_names, vertex_names): (Vec<String>, Vec<String>) = if args.names.is_empty() {
        (
            job_ids.clone(),
            [
                "numRecordsIn",
                "numRecordsOut",
                "numRecordsInPerSecond",
                "numRecordsOutPerSecond",
                "busyTimeMsPerSecond",
                "backPressuredTimeMsPerSecond",
                "currentOutputWatermark",
            ]
            .map(str::to_owned)
            .to_vec(),
        )
    } else {
        args.names
            .iter()
            .cloned()
            .partition(|n| job_ids.contains(n))
    };
    if !job_names.is_empty() {
        let query = job_names.iter().map(|n| encode(n)).collect::<Vec<_>>();
        let values = remote.get(&remote.job_path(&format!("/metrics?get={}", query.join(","))))?;
        for m in values.as_array().into_iter().flatten() {
            println!(
                "job.{} = {}",
                m["id"].as_str().unwrap_or(""),
                m["value"].as_str().unwrap_or("")
            );
        }
    }
    if vertex_names.is_empty() {
        return Ok(());
    }
    let query = vertex_names
        .iter()
        .map(|n| encode(n))
        .collect::<Vec<_>>()
        .join(",");
    let mut found = std::collections::BTreeSet::new();
    for (vid, name) in &vertices {
        let values = remote.get(&remote.job_path(&format!(
            "/vertices/{vid}/subtasks/metrics?get={query}&agg=sum,min,max"
        )))?;
        for m in values.as_array().into_iter().flatten() {
            let id = m["id"].as_str().unwrap_or("");
            found.insert(id.to_owned());
            let f = |k: &str| m[k].as_f64().map_or("-".to_owned(), |v| format!("{v}"));
            println!(
                "{name}.{id} = {} (min {}, max {} over subtasks)",
                f("sum"),
                f("min"),
                f("max")
            );
        }
    }
    let missing: Vec<_> = args
        .names
        .iter()
        .filter(|n| !job_ids.contains(n) && !found.contains(*n))
        .collect();
    if !missing.is_empty() {
        bail!(
            "the job has no metric {}",
            missing
                .iter()
                .map(|n| format!("{n:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// Percent-encodes the characters Flink's metric queries need escaped.
fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

/// `dd.MM.yyyy HH:mm:ss` in UTC, as Flink's `list` prints start times.
fn format_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{day:02}.{month:02}.{year} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_as_flink_lists_them() {
        assert_eq!(format_time(0), "01.01.1970 00:00:00");
        assert_eq!(format_time(1_764_660_062_000), "02.12.2025 07:21:02");
        assert_eq!(format_time(951_782_400_000), "29.02.2000 00:00:00");
    }

    #[test]
    fn metric_names_are_escaped_for_queries() {
        assert_eq!(encode("a.b_c"), "a.b_c");
        assert_eq!(encode("x#y&z"), "x%23y%26z");
    }
}
