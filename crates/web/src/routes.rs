//! The route table and its handlers.
//!
//! [`ROUTES`] is the one list of what the server answers: the router is built from it, and
//! the security tests walk it. Every `/v1/…` route is also served without the prefix, as
//! Flink serves unversioned paths as its oldest version.
//!
//! Path parameters are ids only: a job, vertex or trigger id is 32 lowercase hex digits, a
//! checkpoint id a number; anything else is a 400 before the job is asked. An id of the
//! right shape that names nothing is a 404. Errors have Flink's body, `{"errors":["…"]}`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post, MethodRouter};
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};
use spate_metrics::{ControlError, JobSnapshot, JobState, JobView, Operation, OperationStatus};

use crate::flink::{self, Vertex};
use crate::security::{self, MAX_BODY_BYTES};

/// What the router needs besides the job.
#[derive(Debug, Clone, Default)]
pub struct RouterOptions {
    /// The bearer token, or `None` to serve loopback `Host`s only.
    pub token: Option<String>,
    /// The Prometheus family prefix (`spate` or `flink`); empty means `spate`.
    pub metrics_prefix: String,
}

/// The shared state of every handler.
pub(crate) struct App {
    view: Arc<dyn JobView>,
    pub(crate) token: Option<security::TokenCheck>,
    prefix: String,
}

type Shared = Arc<App>;

/// One entry of the route table.
pub struct Route {
    /// `GET`, `POST` or `PATCH`.
    pub method: &'static str,
    /// The path in axum's syntax: `{jid}` a job id, `{vid}` a vertex id, `{cid}` a
    /// checkpoint id, `{triggerid}` an operation id.
    pub path: &'static str,
    /// Served without a token even when one is configured: only the static page, its
    /// assets and `/healthz`, none of which carries job data.
    pub public: bool,
    handler: fn() -> MethodRouter<Shared>,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

macro_rules! route {
    ($m:literal, $p:literal, $public:literal, $f:ident, $h:path) => {
        Route {
            method: $m,
            path: $p,
            public: $public,
            handler: || $f($h),
        }
    };
}

/// Every route the server answers.
pub const ROUTES: &[Route] = &[
    route!("GET", "/", true, get, index),
    route!("GET", "/app.js", true, get, app_js),
    route!("GET", "/app.css", true, get, app_css),
    route!("GET", "/healthz", true, get, healthz),
    route!("GET", "/metrics", false, get, prometheus),
    route!("GET", "/v1/config", false, get, config),
    route!("GET", "/v1/overview", false, get, overview),
    route!("GET", "/v1/jobs", false, get, jobs),
    route!("GET", "/v1/jobs/overview", false, get, jobs_overview),
    route!("GET", "/v1/jobs/{jid}", false, get, job),
    route!("PATCH", "/v1/jobs/{jid}", false, patch, cancel),
    route!("GET", "/v1/jobs/{jid}/plan", false, get, plan),
    route!("GET", "/v1/jobs/{jid}/dashboard", false, get, dashboard),
    route!("GET", "/v1/jobs/{jid}/metrics", false, get, job_metrics),
    route!("GET", "/v1/jobs/{jid}/exceptions", false, get, exceptions),
    route!("GET", "/v1/jobs/{jid}/checkpoints", false, get, checkpoints),
    route!("GET", "/v1/jobs/{jid}/autoscaler", false, get, autoscaler),
    route!("GET", "/v1/jobs/{jid}/shedding", false, get, shedding),
    route!(
        "GET",
        "/v1/jobs/{jid}/checkpoints/config",
        false,
        get,
        checkpoint_config
    ),
    route!(
        "GET",
        "/v1/jobs/{jid}/checkpoints/details/{cid}",
        false,
        get,
        checkpoint_details
    ),
    route!("GET", "/v1/jobs/{jid}/vertices/{vid}", false, get, vertex),
    route!(
        "GET",
        "/v1/jobs/{jid}/vertices/{vid}/backpressure",
        false,
        get,
        backpressure
    ),
    route!(
        "GET",
        "/v1/jobs/{jid}/vertices/{vid}/watermarks",
        false,
        get,
        watermarks
    ),
    route!(
        "GET",
        "/v1/jobs/{jid}/vertices/{vid}/metrics",
        false,
        get,
        vertex_metrics
    ),
    route!(
        "GET",
        "/v1/jobs/{jid}/vertices/{vid}/subtasks/metrics",
        false,
        get,
        subtask_metrics
    ),
    route!("POST", "/v1/jobs/{jid}/stop", false, post, stop),
    route!(
        "GET",
        "/v1/jobs/{jid}/stop/{triggerid}",
        false,
        get,
        operation
    ),
    route!("POST", "/v1/jobs/{jid}/savepoints", false, post, savepoint),
    route!(
        "GET",
        "/v1/jobs/{jid}/savepoints/{triggerid}",
        false,
        get,
        operation
    ),
    route!("GET", "/v1/taskmanagers", false, get, taskmanagers),
];

/// The router of a job: every route of [`ROUTES`] behind the security guard. Use it
/// directly for tests without sockets (`tower::ServiceExt::oneshot`); [`crate::serve`]
/// serves it.
pub fn router(view: Arc<dyn JobView>, options: RouterOptions) -> Router {
    let app = Arc::new(App {
        view,
        token: options.token.as_deref().map(security::TokenCheck::new),
        prefix: if options.metrics_prefix.is_empty() {
            "spate".into()
        } else {
            options.metrics_prefix
        },
    });
    let mut r: Router<Shared> = Router::new();
    for route in ROUTES {
        r = r.route(route.path, (route.handler)());
        if let Some(bare) = route.path.strip_prefix("/v1") {
            r = r.route(bare, (route.handler)());
        }
    }
    r.fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            security::guard,
        ))
        .with_state(app)
}

type Reply = Result<Response, Refusal>;

/// A refused request: a status and one line, answered in Flink's error shape.
pub(crate) struct Refusal(StatusCode, String);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        error(self.0, self.1)
    }
}

fn refuse(status: StatusCode, message: String) -> Refusal {
    Refusal(status, message)
}

/// A JSON response.
fn json_reply(status: StatusCode, v: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn ok(v: Value) -> Reply {
    Ok(json_reply(StatusCode::OK, &v))
}

/// An error in Flink's shape: `{"errors":["message"]}`.
pub(crate) fn error(status: StatusCode, message: String) -> Response {
    json_reply(status, &json!({ "errors": [message] }))
}

fn bad(message: impl Into<String>) -> Refusal {
    refuse(StatusCode::BAD_REQUEST, message.into())
}

fn control_error(e: ControlError) -> Refusal {
    match e {
        ControlError::BadRequest(m) => refuse(StatusCode::BAD_REQUEST, m),
        ControlError::Conflict(m) => refuse(StatusCode::CONFLICT, m),
        ControlError::NotFound(m) => refuse(StatusCode::NOT_FOUND, m),
    }
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "Not found".into())
}

type Params = Result<Path<Vec<(String, String)>>, PathRejection>;
type QueryParams = Result<Query<Vec<(String, String)>>, QueryRejection>;

fn is_hex32(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The path parameter `name`, checked for its shape.
fn param(params: &Params, name: &str) -> Result<String, Refusal> {
    let Ok(Path(list)) = params else {
        return Err(bad("malformed path parameter"));
    };
    let value = list
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .ok_or_else(|| bad(format!("missing path parameter {name}")))?;
    let valid = match name {
        "cid" => {
            !value.is_empty() && value.len() <= 20 && value.bytes().all(|b| b.is_ascii_digit())
        }
        _ => is_hex32(&value),
    };
    if !valid {
        let want = if name == "cid" {
            "a number"
        } else {
            "32 lowercase hex digits"
        };
        return Err(bad(format!("path parameter {name} must be {want}")));
    }
    Ok(value)
}

/// The job now, its subtasks sorted by (operator, subtask) for fast lookups.
fn snapshot(app: &App) -> JobSnapshot {
    let mut snap = app.view.snapshot();
    if !snap.subtasks.is_sorted_by_key(|s| (s.operator, s.subtask)) {
        snap.subtasks.sort_by_key(|s| (s.operator, s.subtask));
    }
    snap
}

/// The job's snapshot, if `{jid}` names it.
fn job_of(app: &App, params: &Params) -> Result<JobSnapshot, Refusal> {
    let jid = param(params, "jid")?;
    let snap = snapshot(app);
    if snap.job_id != jid {
        return Err(refuse(
            StatusCode::NOT_FOUND,
            format!("Job {jid} not found"),
        ));
    }
    Ok(snap)
}

fn vertex_of(app: &App, params: &Params) -> Result<(JobSnapshot, Vertex), Refusal> {
    let snap = job_of(app, params)?;
    let vid = param(params, "vid")?;
    let v = flink::vertices(&snap)
        .into_iter()
        .find(|v| v.id == vid)
        .ok_or_else(|| refuse(StatusCode::NOT_FOUND, format!("Vertex {vid} not found")))?;
    Ok((snap, v))
}

/// The value of query parameter `name` (the last one given).
fn query<'a>(q: &'a QueryParams, name: &str) -> Result<Option<&'a str>, Refusal> {
    match q {
        Ok(Query(list)) => Ok(list
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())),
        Err(_) => Err(bad("malformed query string")),
    }
}

/// A comma-separated list parameter (`get=a,b`), at most 1000 items.
fn list_param(q: &QueryParams, name: &str) -> Result<Option<Vec<String>>, Refusal> {
    let Some(v) = query(q, name)? else {
        return Ok(None);
    };
    let items: Vec<String> = v
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    if items.len() > 1000 {
        return Err(bad(format!("{name} lists more than 1000 items")));
    }
    Ok(Some(items))
}

/// A subtask selection: `0,2,4-6`.
fn subtasks_param(q: &QueryParams) -> Result<Option<Vec<usize>>, Refusal> {
    let Some(items) = list_param(q, "subtasks")? else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for item in items {
        let num = |s: &str| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| bad(format!("subtasks: {item:?} is not a number or a range")))
        };
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a || b - a > 100_000 {
                    return Err(bad(format!("subtasks: bad range {item:?}")));
                }
                out.extend(a..=b);
            }
            None => out.push(num(&item)?),
        }
    }
    Ok(Some(out))
}

// --- Static assets ------------------------------------------------------------------------

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");

async fn index() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        INDEX_HTML,
    )
        .into_response()
}

async fn app_js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        APP_JS,
    )
        .into_response()
}

async fn app_css() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], APP_CSS).into_response()
}

async fn healthz() -> Response {
    ([(header::CONTENT_TYPE, "text/plain")], "ok").into_response()
}

// --- Read routes --------------------------------------------------------------------------

async fn prometheus(State(app): State<Shared>) -> Response {
    let snap = snapshot(&app);
    (
        [(header::CONTENT_TYPE, crate::prom::CONTENT_TYPE)],
        crate::prom::encode(&snap, &app.prefix),
    )
        .into_response()
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

async fn config() -> Reply {
    ok(json!({
        "refresh-interval": 1000,
        "timezone-name": "Coordinated Universal Time",
        "timezone-offset": 0,
        "flink-version": format!("spate-{VERSION}"),
        "flink-revision": "",
        "spate-version": VERSION,
        "features": {"web-submit": false, "web-cancel": true, "web-history": false},
    }))
}

async fn overview(State(app): State<Shared>) -> Reply {
    let snap = snapshot(&app);
    let count = |states: &[JobState]| usize::from(states.contains(&snap.state));
    ok(json!({
        "taskmanagers": snap.processes.len(),
        "slots-total": snap.parallelism,
        "slots-available": 0,
        "jobs-running": usize::from(!snap.state.is_terminal()),
        "jobs-finished": count(&[JobState::Finished]),
        "jobs-cancelled": count(&[JobState::Canceled]),
        "jobs-failed": count(&[JobState::Failed]),
        "flink-version": format!("spate-{VERSION}"),
        "flink-commit": "",
        "spate-version": VERSION,
    }))
}

async fn jobs(State(app): State<Shared>) -> Reply {
    let snap = snapshot(&app);
    ok(json!({"jobs": [{"id": snap.job_id, "status": snap.state.as_str()}]}))
}

async fn jobs_overview(State(app): State<Shared>) -> Reply {
    let snap = snapshot(&app);
    ok(json!({"jobs": [flink::job_overview(&snap)]}))
}

async fn job(State(app): State<Shared>, p: Params) -> Reply {
    ok(flink::job_details(&job_of(&app, &p)?))
}

async fn plan(State(app): State<Shared>, p: Params) -> Reply {
    ok(json!({"plan": flink::plan(&job_of(&app, &p)?)}))
}

async fn dashboard(State(app): State<Shared>, p: Params) -> Reply {
    ok(crate::dashboard::dashboard(&job_of(&app, &p)?))
}

async fn job_metrics(State(app): State<Shared>, p: Params, q: QueryParams) -> Reply {
    let snap = job_of(&app, &p)?;
    let get = list_param(&q, "get")?;
    ok(flink::metric_query(&snap.metrics, get.as_deref()))
}

async fn exceptions(State(app): State<Shared>, p: Params) -> Reply {
    ok(flink::exceptions(&job_of(&app, &p)?))
}

/// The autoscaler's policy, current and estimated worker counts, per-operator estimate and
/// decisions (Spate's own: Flink's REST API has no autoscaler).
async fn autoscaler(State(app): State<Shared>, p: Params) -> Reply {
    let snap = job_of(&app, &p)?;
    ok(match &snap.autoscaler {
        Some(a) => {
            let mut v = serde_json::to_value(a).unwrap_or_else(|_| json!({}));
            v["enabled"] = json!(true);
            v
        }
        None => json!({"enabled": false}),
    })
}

/// Load shedding's model (loads, capacity, headroom), drop fractions and records shed.
async fn shedding(State(app): State<Shared>, p: Params) -> Reply {
    let snap = job_of(&app, &p)?;
    ok(match &snap.shedding {
        Some(s) => {
            let mut v = serde_json::to_value(s).unwrap_or_else(|_| json!({}));
            v["enabled"] = json!(true);
            v
        }
        None => json!({"enabled": false}),
    })
}

async fn checkpoints(State(app): State<Shared>, p: Params) -> Reply {
    ok(flink::checkpoints(&job_of(&app, &p)?))
}

async fn checkpoint_config(State(app): State<Shared>, p: Params) -> Reply {
    let snap = job_of(&app, &p)?;
    let interval = snap.checkpoints.interval_ms;
    ok(json!({
        "mode": if interval > 0 { "exactly_once" } else { "none" },
        "interval": interval,
        "timeout": 0,
        "min_pause": 0,
        "max_concurrent": 1,
        "externalization": {"enabled": interval > 0, "delete_on_cancellation": false},
        "unaligned_checkpoints": false,
        "tolerable_failed_checkpoints": 0,
        "savepoints_enabled": snap.savepoints_enabled,
    }))
}

async fn checkpoint_details(State(app): State<Shared>, p: Params) -> Reply {
    let snap = job_of(&app, &p)?;
    let cid = param(&p, "cid")?;
    let id: u64 = cid
        .parse()
        .map_err(|_| bad("path parameter cid must be a number"))?;
    match flink::checkpoint_details(&snap, id) {
        Some(v) => ok(v),
        None => Err(refuse(
            StatusCode::NOT_FOUND,
            format!("Checkpoint {id} not found (or no longer in the history)"),
        )),
    }
}

async fn vertex(State(app): State<Shared>, p: Params) -> Reply {
    let (snap, v) = vertex_of(&app, &p)?;
    ok(flink::vertex_details(&snap, &v))
}

async fn backpressure(State(app): State<Shared>, p: Params) -> Reply {
    let (snap, v) = vertex_of(&app, &p)?;
    ok(flink::backpressure(&snap, &v))
}

async fn watermarks(State(app): State<Shared>, p: Params) -> Reply {
    let (snap, v) = vertex_of(&app, &p)?;
    ok(flink::watermarks(&snap, &v))
}

async fn vertex_metrics(State(app): State<Shared>, p: Params, q: QueryParams) -> Reply {
    let (snap, v) = vertex_of(&app, &p)?;
    let get = list_param(&q, "get")?;
    ok(flink::metric_query(
        &flink::vertex_metrics(&snap, &v),
        get.as_deref(),
    ))
}

async fn subtask_metrics(State(app): State<Shared>, p: Params, q: QueryParams) -> Reply {
    let (snap, v) = vertex_of(&app, &p)?;
    let get = list_param(&q, "get")?;
    let aggs: Vec<&str> = match query(&q, "agg")? {
        None => flink::AGGREGATIONS.to_vec(),
        Some(list) => {
            let mut out = Vec::new();
            for a in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let known = flink::AGGREGATIONS
                    .iter()
                    .find(|k| **k == a)
                    .ok_or_else(|| {
                        bad(format!(
                            "unknown aggregation {a:?} (min, max, avg, sum, skew)"
                        ))
                    })?;
                out.push(*known);
            }
            out
        }
    };
    let subtasks = subtasks_param(&q)?;
    ok(flink::subtask_metric_query(
        &snap,
        &v,
        get.as_deref(),
        &aggs,
        subtasks.as_deref(),
    ))
}

async fn taskmanagers(State(app): State<Shared>) -> Reply {
    ok(flink::taskmanagers(&snapshot(&app)))
}

// --- Control routes -----------------------------------------------------------------------

async fn cancel(State(app): State<Shared>, p: Params, q: QueryParams) -> Reply {
    job_of(&app, &p)?;
    match query(&q, "mode")? {
        None | Some("cancel") => {}
        Some(other) => return Err(bad(format!("mode {other:?} is not supported; use cancel"))),
    }
    app.view.cancel().map_err(control_error)?;
    Ok(json_reply(StatusCode::ACCEPTED, &json!({})))
}

/// The JSON body of a control request; an empty body (or `null`) is `{}`.
fn body<T: for<'de> Deserialize<'de> + Default>(
    b: Result<Bytes, BytesRejection>,
) -> Result<T, Refusal> {
    let bytes = b.map_err(|r| refuse(r.status(), r.body_text()))?;
    // No body, or JSON `null` (what a client without a body may send), means `{}`.
    let text = bytes.trim_ascii();
    if text.is_empty() || text == b"null" {
        return Ok(T::default());
    }
    serde_json::from_slice(&bytes).map_err(|e| bad(format!("Request body is not valid: {e}")))
}

fn checked_target(t: Option<String>) -> Result<Option<String>, Refusal> {
    if let Some(t) = &t {
        security::precheck_target(t).map_err(bad)?;
    }
    Ok(t.filter(|t| !t.is_empty()))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct StopBody {
    #[serde(rename = "targetDirectory")]
    target_directory: Option<String>,
    drain: Option<bool>,
    #[serde(rename = "triggerId")]
    _trigger_id: Option<String>,
}

async fn stop(State(app): State<Shared>, p: Params, b: Result<Bytes, BytesRejection>) -> Reply {
    job_of(&app, &p)?;
    let req: StopBody = body(b)?;
    let op = Operation::Stop {
        target: checked_target(req.target_directory)?,
        drain: req.drain.unwrap_or(false),
    };
    let id = app.view.trigger(op).map_err(control_error)?;
    Ok(json_reply(StatusCode::ACCEPTED, &json!({"request-id": id})))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SavepointBody {
    #[serde(rename = "target-directory")]
    target_directory: Option<String>,
    #[serde(rename = "cancel-job")]
    cancel_job: Option<bool>,
    #[serde(rename = "triggerId")]
    _trigger_id: Option<String>,
    #[serde(rename = "formatType")]
    _format_type: Option<String>,
}

async fn savepoint(
    State(app): State<Shared>,
    p: Params,
    b: Result<Bytes, BytesRejection>,
) -> Reply {
    job_of(&app, &p)?;
    let req: SavepointBody = body(b)?;
    let op = Operation::Savepoint {
        target: checked_target(req.target_directory)?,
        cancel_job: req.cancel_job.unwrap_or(false),
    };
    let id = app.view.trigger(op).map_err(control_error)?;
    Ok(json_reply(StatusCode::ACCEPTED, &json!({"request-id": id})))
}

async fn operation(State(app): State<Shared>, p: Params) -> Reply {
    job_of(&app, &p)?;
    let id = param(&p, "triggerid")?;
    let status = app
        .view
        .operation(&id)
        .ok_or_else(|| refuse(StatusCode::NOT_FOUND, format!("Operation {id} not found")))?;
    ok(match status {
        OperationStatus::InProgress => json!({"status": {"id": "IN_PROGRESS"}, "operation": null}),
        OperationStatus::Completed { location } => {
            json!({"status": {"id": "COMPLETED"}, "operation": {"location": location}})
        }
        OperationStatus::Failed { cause } => json!({
            "status": {"id": "COMPLETED"},
            "operation": {"failure-cause": {
                "class": "spate.SavepointFailure",
                "stack-trace": cause,
                "serialized-throwable": null,
                "message": cause,
            }},
        }),
    })
}
