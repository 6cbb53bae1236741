//! The security suite, over every route of `ROUTES`: tokens, Host checks, Flink's two CVE
//! requests, a traversal corpus in every path parameter and as savepoint targets, oversized
//! and malformed bodies. Every refusal is checked for what it must not do: write a file
//! (the temp dir is compared before and after) or read one (no `root:x:` in any body).

use std::collections::BTreeSet;
use std::path::Path;

use axum::body::Body;
use axum::http::StatusCode;
use axum::Router;
use spate_web::ROUTES;

use crate::fake::{op_id, JOB_ID};
use crate::{send, setup, Resp, TOKEN};

const TRIGGER: &str = "00000000000000000000000000000001";

/// A route's path with its parameters filled in.
fn concrete(path: &str) -> String {
    path.replace("{jid}", JOB_ID)
        .replace("{vid}", &op_id(0))
        .replace("{cid}", "5")
        .replace("{triggerid}", TRIGGER)
}

/// Every file under `dir`, recursively.
fn tree(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            out.insert(p.display().to_string());
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    out
}

fn body_for(method: &str) -> Body {
    if method == "POST" {
        Body::from("{}")
    } else {
        Body::empty()
    }
}

fn assert_safe(resp: &Resp, what: &str) {
    assert!(!resp.body.contains("root:x:"), "{what} read /etc/passwd");
    assert!(
        resp.headers.get("access-control-allow-origin").is_none(),
        "{what} has a CORS header"
    );
}

#[test]
fn the_route_table_is_what_the_router_serves() {
    let (_, r, _d) = setup(None);
    for route in ROUTES {
        let uri = concrete(route.path);
        let resp = send(&r, route.method, &uri, &[], body_for(route.method));
        assert!(
            resp.status.is_success(),
            "{route:?}: {} {}",
            resp.status,
            resp.body
        );
        if let Some(bare) = uri.strip_prefix("/v1") {
            let alias = send(&r, route.method, bare, &[], body_for(route.method));
            assert!(
                alias.status.is_success(),
                "alias of {route:?}: {}",
                alias.status
            );
        }
        for h in [
            "content-security-policy",
            "x-content-type-options",
            "cache-control",
        ] {
            assert!(resp.headers.get(h).is_some(), "{route:?} lacks {h}");
        }
        assert_eq!(resp.headers["cache-control"], "no-store");
        assert_safe(&resp, &uri);
    }
    let public: Vec<&str> = ROUTES.iter().filter(|r| r.public).map(|r| r.path).collect();
    assert_eq!(public, vec!["/", "/app.js", "/app.css", "/healthz"]);
}

#[test]
fn with_a_token_every_private_route_needs_it() {
    let (job, r, _d) = setup(Some(TOKEN));
    let wrong = format!("Bearer {TOKEN}x");
    let short = format!("Bearer {}", &TOKEN[..TOKEN.len() - 1]);
    let good = format!("Bearer {TOKEN}");
    for route in ROUTES {
        let uri = concrete(route.path);
        let mut uris = vec![uri.clone()];
        if let Some(bare) = uri.strip_prefix("/v1") {
            uris.push(bare.to_string());
        }
        for uri in &uris {
            for auth in [
                None,
                Some(wrong.as_str()),
                Some(short.as_str()),
                Some("Basic dGVzdA=="),
                Some(TOKEN),
            ] {
                let mut h = vec![("host", "evil.example")];
                if let Some(a) = auth {
                    h.push(("authorization", a));
                }
                let resp = send(&r, route.method, uri, &h, body_for(route.method));
                assert_safe(&resp, uri);
                if route.public {
                    assert_eq!(resp.status, StatusCode::OK, "{route:?} is public");
                    assert!(!resp.body.contains(JOB_ID), "a public route shows job data");
                } else {
                    assert_eq!(resp.status, StatusCode::UNAUTHORIZED, "{uri} with {auth:?}");
                    assert!(
                        resp.headers["www-authenticate"]
                            .to_str()
                            .unwrap()
                            .starts_with("Bearer"),
                        "{uri}"
                    );
                    assert!(!resp.body.contains(JOB_ID));
                }
            }
        }
    }
    // Nothing was cancelled or triggered by the refused requests.
    assert_eq!(job.calls(), vec![]);
    // With the token, any Host is fine (the token is the defence).
    let uri = concrete("/v1/jobs/{jid}/stop");
    let resp = send(
        &r,
        "POST",
        &uri,
        &[("authorization", &good), ("host", "spate.example")],
        Body::from("{}"),
    );
    assert_eq!(resp.status, StatusCode::ACCEPTED);
    for route in ROUTES.iter().filter(|r| r.method == "GET") {
        let uri = concrete(route.path);
        let resp = send(
            &r,
            "GET",
            &uri,
            &[("authorization", &good), ("host", "spate.example:443")],
            Body::empty(),
        );
        assert!(resp.status.is_success(), "{uri}: {}", resp.status);
    }
}

#[test]
fn without_a_token_only_loopback_hosts_are_served() {
    let (job, r, _d) = setup(None);
    for route in ROUTES {
        let uri = concrete(route.path);
        for host in [
            "evil.example",
            "localhost.evil.example",
            "127.0.0.1.nip.io:8081",
            "10.0.0.1",
            "[::1].evil",
        ] {
            let resp = send(
                &r,
                route.method,
                &uri,
                &[("host", host)],
                body_for(route.method),
            );
            assert_eq!(resp.status, StatusCode::FORBIDDEN, "{uri} for Host {host}");
            assert_safe(&resp, &uri);
        }
        for host in ["localhost:8081", "127.0.0.1:1", "[::1]:9999"] {
            let resp = send(
                &r,
                route.method,
                &uri,
                &[("host", host), ("origin", "http://evil.example")],
                body_for(route.method),
            );
            assert!(
                resp.status.is_success(),
                "{uri} for Host {host}: {}",
                resp.status
            );
            assert_safe(&resp, &uri);
        }
    }
    // Refused requests reached nothing: only the accepted POSTs and the PATCH did.
    assert_eq!(job.calls().len(), 3 * 3);
}

/// Path-parameter variants: encoded and double-encoded traversal, absolute paths, NUL,
/// overlong UTF-8, Windows separators, over-long ids.
fn path_corpus() -> Vec<String> {
    let mut c: Vec<String> = [
        "..",
        "../..",
        "..%2f..%2fetc%2fpasswd",
        "..%252f..%252f..%252fetc%252fpasswd",
        "%2e%2e",
        "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "%252e%252e%252f",
        "..%5c..%5cwindows%5cwin.ini",
        "..%255c..%255c",
        "%c0%ae%c0%ae%c0%af",
        "%c0%ae%c0%ae/etc/passwd",
        "%e0%80%ae%e0%80%ae%e0%80%af",
        "..%c0%af..%c0%afetc%c0%afpasswd",
        "%00",
        "a%00b",
        "..%00",
        "%2fetc%2fpasswd",
        "%252fetc%252fpasswd",
        "file:%2f%2f%2fetc%2fpasswd",
        "....%2f%2f....%2f%2fetc%2fpasswd",
        "..;%2f..;%2fetc%2fpasswd",
        ".%2e%2f.%2e%2fetc%2fpasswd",
        "%u002e%u002e%u2215etc%u2215passwd",
        "%e2%88%95etc%e2%88%95passwd",
        "0123456789abcdef0123456789abcdef%2f..",
        &"a".repeat(4096),
        &format!("{JOB_ID}%00"),
        &format!("{JOB_ID}%2f..%2f..%2fetc%2fpasswd"),
        "5f3c1b2a9d8e7f6a5b4c3d2e1f0a9b8C",
        "-1",
        "18446744073709551616",
        "%20",
        "~root",
        "$HOME",
        "%24%7bjndi:ldap:%2f%2fevil%2fa%7d",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    c.extend((2..=12).map(|n| "..%252f".repeat(n) + "etc%252fpasswd"));
    c
}

#[test]
fn cve_2020_17518_upload_with_a_traversal_filename_is_refused() {
    for token in [None, Some(TOKEN)] {
        let (job, r, d) = setup(token);
        let before = tree(d.path());
        let success_before = Path::new("/tmp/success").exists();
        let body = "------WebKitFormBoundaryoZ8meKnrrso89R6Y\r\n\
            Content-Disposition: form-data; name=\"jarfile\"; filename=\"../../../../../../tmp/success\"\r\n\r\n\
            success\r\n------WebKitFormBoundaryoZ8meKnrrso89R6Y--\r\n";
        let bearer = format!("Bearer {TOKEN}");
        let mut h = vec![(
            "content-type",
            "multipart/form-data; boundary=----WebKitFormBoundaryoZ8meKnrrso89R6Y",
        )];
        if token.is_some() {
            h.push(("authorization", &bearer));
        }
        for path in ["/jars/upload", "/v1/jars/upload"] {
            let resp = send(&r, "POST", path, &h, Body::from(body));
            assert_eq!(resp.status, StatusCode::NOT_FOUND, "{path}");
            assert_safe(&resp, path);
        }
        assert_eq!(tree(d.path()), before);
        assert_eq!(Path::new("/tmp/success").exists(), success_before);
        assert_eq!(job.calls(), vec![]);
    }
}

#[test]
fn cve_2020_17519_log_traversal_reads_nothing() {
    let (_, r, _d) = setup(None);
    let (_, rt, _dt) = setup(Some(TOKEN));
    let bearer = format!("Bearer {TOKEN}");
    let path = format!("/jobmanager/logs/{}etc%252fpasswd", "..%252f".repeat(11));
    for (router, h) in [
        (&r, vec![]),
        (&rt, vec![("authorization", bearer.as_str())]),
    ] {
        for p in [
            path.clone(),
            format!("/v1{path}"),
            "/jobmanager/logs".into(),
            "/taskmanagers/x/logs".into(),
        ] {
            let resp = send(router, "GET", &p, &h, Body::empty());
            assert_eq!(resp.status, StatusCode::NOT_FOUND, "{p}");
            assert_safe(&resp, &p);
        }
    }
}

fn check_corpus(r: &Router, headers: &[(&str, &str)], dir: &Path) {
    let before = tree(dir);
    let corpus = path_corpus();
    assert!(corpus.len() >= 30);
    let mut tried = 0;
    for route in ROUTES {
        let params: Vec<&str> = ["{jid}", "{vid}", "{cid}", "{triggerid}"]
            .into_iter()
            .filter(|p| route.path.contains(p))
            .collect();
        for bad in &corpus {
            let mut uris: Vec<String> = params
                .iter()
                .map(|p| concrete(&route.path.replace(p, bad)))
                .collect();
            // And the variant appended, as a path suffix and as a query.
            uris.push(format!(
                "{}/{bad}",
                concrete(route.path).trim_end_matches('/')
            ));
            if route.method == "GET" {
                uris.push(format!(
                    "{}?get={bad}&subtasks={bad}&mode={bad}",
                    concrete(route.path)
                ));
            }
            for uri in uris {
                let resp = send(r, route.method, &uri, headers, body_for(route.method));
                tried += 1;
                assert_safe(&resp, &uri);
                let appended_query = uri.contains('?');
                if appended_query {
                    // Unknown metric names are simply absent; bad lists are 400.
                    assert!(resp.status.as_u16() < 500, "{uri}: {}", resp.status);
                } else {
                    assert!(
                        resp.status.is_client_error(),
                        "{} {uri}: {}",
                        route.method,
                        resp.status
                    );
                }
            }
        }
    }
    assert!(tried > 1000, "{tried}");
    assert_eq!(tree(dir), before, "a request wrote a file");
}

#[test]
fn the_traversal_corpus_is_refused_in_every_path_parameter() {
    let (job, r, d) = setup(None);
    check_corpus(&r, &[], d.path());
    let (_, rt, dt) = setup(Some(TOKEN));
    let bearer = format!("Bearer {TOKEN}");
    check_corpus(&rt, &[("authorization", &bearer)], dt.path());
    assert_eq!(job.calls(), vec![], "a refused request reached the job");
}

/// Savepoint-target variants, raw (they go in a JSON body).
fn target_corpus() -> Vec<String> {
    let mut c: Vec<String> = [
        "..",
        "../..",
        "../../../../../../tmp/success",
        "/tmp/success",
        "/etc",
        "/etc/passwd",
        "a/../../b",
        "./x",
        "x/./y",
        "..%2f..%2ftmp",
        "..%252f..%252ftmp%252fsuccess",
        "%2e%2e/%2e%2e/tmp",
        "..\\..\\tmp",
        "C:\\Windows\\Temp",
        "a\u{0}b",
        "\u{0}",
        "a\nb",
        "x\r\ny",
        "file:///tmp/success",
        "file:/tmp/success",
        "s3://other-bucket/x",
        "hdfs://namenode/tmp",
        "\u{2215}tmp\u{2215}success",
        "\u{ff0e}\u{ff0e}/tmp",
        "//tmp/success",
        "~/x",
        "a//b",
        "a b",
        "$HOME/x",
        "`touch /tmp/success`",
        "$(touch /tmp/success)",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    c.push("a".repeat(600));
    c.push(format!("{}tmp/success", "../".repeat(40)));
    c
}

#[test]
fn the_traversal_corpus_is_refused_as_a_savepoint_target() {
    let (job, r, d) = setup(None);
    let before = tree(d.path());
    let success_before = Path::new("/tmp/success").exists();
    let corpus = target_corpus();
    assert!(corpus.len() >= 30);
    for t in &corpus {
        for (route, field) in [
            ("stop", "targetDirectory"),
            ("savepoints", "target-directory"),
        ] {
            let body = serde_json::json!({ field: t }).to_string();
            let uri = format!("/v1/jobs/{JOB_ID}/{route}");
            let resp = send(
                &r,
                "POST",
                &uri,
                &[("content-type", "application/json")],
                Body::from(body),
            );
            assert_eq!(
                resp.status,
                StatusCode::BAD_REQUEST,
                "{route} to {t:?}: {}",
                resp.body
            );
            assert!(resp.json()["errors"][0].is_string());
            assert_safe(&resp, &uri);
        }
    }
    assert_eq!(tree(d.path()), before, "a savepoint was written");
    assert_eq!(Path::new("/tmp/success").exists(), success_before);
    assert_eq!(job.calls(), vec![]);
}

#[test]
fn oversized_and_malformed_bodies_are_refused() {
    let (job, r, d) = setup(None);
    let before = tree(d.path());
    let big = format!("{{\"targetDirectory\":\"{}\"}}", "a".repeat(70 * 1024));
    for route in ROUTES {
        let uri = concrete(route.path);
        // Announced by Content-Length: refused before anything is read, on any route.
        let len = big.len().to_string();
        let resp = send(
            &r,
            route.method,
            &uri,
            &[("content-length", &len)],
            Body::from(big.clone()),
        );
        assert_eq!(resp.status, StatusCode::PAYLOAD_TOO_LARGE, "{uri}");
    }
    for route in ["stop", "savepoints"] {
        let uri = format!("/v1/jobs/{JOB_ID}/{route}");
        // Not announced (chunked): the body limit stops reading.
        let stream = futures_like_body(big.clone());
        let resp = send(&r, "POST", &uri, &[], stream);
        assert_eq!(resp.status, StatusCode::PAYLOAD_TOO_LARGE, "{uri} chunked");
        let deep = "[".repeat(60_000);
        for bad in [
            "{",
            "[1,2]",
            "\"x\"",
            "{\"drain\":\"yes\"}",
            "{\"targetDirectory\":5}",
            "{\"cancel-job\":1}",
            "\u{feff}{}",
            "{}{}",
            deep.as_str(),
        ] {
            let resp = send(
                &r,
                "POST",
                &uri,
                &[("content-type", "application/json")],
                Body::from(bad.to_string()),
            );
            assert_eq!(
                resp.status,
                StatusCode::BAD_REQUEST,
                "{uri} with {:.40}",
                bad
            );
            assert!(resp.json()["errors"][0].is_string());
        }
        let resp = send(&r, "POST", &uri, &[], Body::from(vec![0xff, 0xfe, b'{']));
        assert_eq!(resp.status, StatusCode::BAD_REQUEST);
    }
    assert_eq!(job.calls(), vec![]);
    assert_eq!(tree(d.path()), before);
}

/// A body without a known length (sent chunked).
fn futures_like_body(s: String) -> Body {
    let chunks: Vec<Result<axum::body::Bytes, std::io::Error>> = s
        .into_bytes()
        .chunks(8192)
        .map(|c| Ok(axum::body::Bytes::copy_from_slice(c)))
        .collect();
    Body::from_stream(futures::stream::iter(chunks))
}
