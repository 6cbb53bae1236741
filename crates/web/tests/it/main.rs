//! spate-web's integration tests, one binary: routes and Flink field names on a fake job,
//! the security suite over the whole route table, Prometheus output through Python's real
//! parser, real sockets (plain and TLS), and the dashboard in a headless Chromium.

#![allow(missing_docs)]

mod dashboard;
mod fake;
mod prometheus;
mod routes;
mod security;
mod socket;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::Router;
use serde_json::Value;
use spate_web::{router, RouterOptions};
use tower::ServiceExt;

use fake::FakeJob;

pub const TOKEN: &str = "test-token-0123456789abcdef";

/// A response, read whole.
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// A fake job, its router (no token unless given) and the temp dir that is its savepoint
/// root.
pub fn setup(token: Option<&str>) -> (Arc<FakeJob>, Router, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let job = Arc::new(FakeJob::new(&dir.path().join("savepoints")));
    std::fs::create_dir_all(&job.savepoint_root).unwrap();
    let r = router(
        job.clone(),
        RouterOptions {
            token: token.map(String::from),
            metrics_prefix: "spate".into(),
        },
    );
    (job, r, dir)
}

/// Sends one request through the router, with `Host: localhost` unless `headers` has one.
pub fn send(r: &Router, method: &str, uri: &str, headers: &[(&str, &str)], body: Body) -> Resp {
    let mut b = Request::builder().method(method).uri(uri);
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        b = b.header("host", "localhost");
    }
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let req = b
        .body(body)
        .unwrap_or_else(|e| panic!("bad request {uri}: {e}"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let resp = r.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        Resp {
            status,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    })
}

pub fn get(r: &Router, uri: &str) -> Resp {
    send(r, "GET", uri, &[], Body::empty())
}

/// The set of keys of a JSON object, sorted.
pub fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect();
    k.sort();
    k
}

pub fn sorted(k: &[&str]) -> Vec<String> {
    let mut k: Vec<String> = k.iter().map(|s| s.to_string()).collect();
    k.sort();
    k
}
