//! The guard in front of every route, and the checks of client-supplied strings.
//!
//! In order: an oversized body is refused (413) before anything reads it; with a token, a
//! request to a non-public route without the right `Authorization: Bearer` is refused (401,
//! `WWW-Authenticate: Bearer`); without a token, a request whose `Host` is not loopback is
//! refused (403), which defeats DNS rebinding. Every response, refusals included, carries the
//! Content-Security-Policy, `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`
//! and `Cache-Control: no-store`, and never a CORS header.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use subtle::ConstantTimeEq;

use crate::routes::{error, App};

/// The largest request body accepted, in bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The dashboard's Content-Security-Policy: its own scripts, styles and API only.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                       img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
                       frame-ancestors 'none'; form-action 'none'";

/// A configured bearer token, kept for comparison in constant time: the presented token and
/// the configured one are both zero-padded to the same fixed length (at least 512 bytes, the
/// longest token [`crate::ServerConfig::validate`] accepts) and compared whole with
/// `subtle`, lengths included, so the time taken depends on neither the token's content nor
/// its length.
#[derive(Clone)]
pub struct TokenCheck {
    padded: Vec<u8>,
    len: usize,
}

impl std::fmt::Debug for TokenCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenCheck(..)")
    }
}

impl TokenCheck {
    /// Keeps `token` for comparisons.
    pub fn new(token: &str) -> TokenCheck {
        let mut padded = token.as_bytes().to_vec();
        padded.resize(token.len().max(512), 0);
        TokenCheck {
            padded,
            len: token.len(),
        }
    }

    /// Whether `presented` is the token.
    pub fn matches(&self, presented: &[u8]) -> bool {
        if presented.len() > self.padded.len() {
            return false;
        }
        let mut p = vec![0u8; self.padded.len()];
        p[..presented.len()].copy_from_slice(presented);
        let same_bytes = p.as_slice().ct_eq(self.padded.as_slice());
        let same_len = (presented.len() as u64).ct_eq(&(self.len as u64));
        bool::from(same_bytes & same_len)
    }
}

/// Whether the `Authorization` header carries the token.
pub fn authorized(headers: &HeaderMap, want: &TokenCheck) -> bool {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return false;
    };
    let bytes = value.as_bytes();
    let presented = match bytes.get(..7) {
        Some(scheme) if scheme.eq_ignore_ascii_case(b"bearer ") => &bytes[7..],
        _ => return false,
    };
    want.matches(presented)
}

/// Whether a `Host` header names this machine's loopback: `localhost`, `127.0.0.1` or
/// `[::1]`, with an optional port.
pub fn loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix("[::1]") {
        if rest.is_empty() {
            return true;
        }
        return rest
            .strip_prefix(':')
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    } else {
        match host.split_once(':') {
            Some((name, port)) => {
                if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
                    return false;
                }
                name
            }
            None => host,
        }
    };
    name.eq_ignore_ascii_case("localhost") || name == "127.0.0.1"
}

/// A rough first check of a savepoint target from a client, before the engine's own
/// ([`spate_metrics::savepoint_target`]): no percent signs, backslashes or control
/// characters, no `.` or `..` component, at most 512 bytes.
pub fn precheck_target(target: &str) -> Result<(), String> {
    if target.len() > 512 {
        return Err("target directory is longer than 512 bytes".into());
    }
    if target
        .chars()
        .any(|c| c == '%' || c == '\\' || c.is_control())
    {
        return Err("target directory may not contain '%', '\\' or control characters".into());
    }
    if target.split('/').any(|p| p == "." || p == "..") {
        return Err("target directory may not contain '.' or '..' components".into());
    }
    Ok(())
}

fn is_public(path: &str) -> bool {
    crate::routes::ROUTES
        .iter()
        .any(|r| r.public && r.path == path)
}

/// The middleware: refusals first, then the security headers on whatever comes back.
pub(crate) async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let mut resp = match check(&app, &req) {
        Some(refusal) => refusal,
        None => next.run(req).await,
    };
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    resp
}

/// The refusal for a request, if any.
fn check(app: &App, req: &Request) -> Option<Response> {
    let too_big = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim()
                .parse::<u64>()
                .map_or(true, |n| n > MAX_BODY_BYTES as u64)
        });
    if too_big {
        return Some(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request bodies are limited to {MAX_BODY_BYTES} bytes"),
        ));
    }
    match &app.token {
        Some(want) => {
            if !is_public(req.uri().path()) && !authorized(req.headers(), want) {
                let mut r = error(
                    StatusCode::UNAUTHORIZED,
                    "missing or wrong bearer token (Authorization: Bearer <token>)".into(),
                );
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"spate\""),
                );
                return Some(r);
            }
        }
        None => {
            let host = req
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .or_else(|| req.uri().authority().map(|a| a.as_str()));
            if !host.is_some_and(loopback_host) {
                return Some(error(
                    StatusCode::FORBIDDEN,
                    "this server only answers requests for localhost; configure a token \
                     to serve other host names"
                        .into(),
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for ok in [
            "localhost",
            "LOCALHOST:8081",
            "127.0.0.1",
            "127.0.0.1:1",
            "[::1]",
            "[::1]:9",
        ] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "127.0.0.2",
            "[::1]x",
            "localhost:",
            "localhost:80:80",
            "localhost:x",
            "",
            "0.0.0.0",
            "[::ffff:127.0.0.1]",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn tokens_compare_whole_and_by_length() {
        let want = TokenCheck::new("0123456789abcdef");
        assert!(
            !want.matches(b"0123456789abcdef\0"),
            "zero padding is not a match"
        );
        assert!(!want.matches(b""));
        assert!(!want.matches(&[b'a'; 600]));
        let long = "x".repeat(700);
        assert!(TokenCheck::new(&long).matches(long.as_bytes()));
        assert!(!TokenCheck::new(&long).matches(&long.as_bytes()[..699]));
        let mut h = HeaderMap::new();
        assert!(!authorized(&h, &want));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer 0123456789abcdef"),
        );
        assert!(authorized(&h, &want));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer 0123456789abcdef"),
        );
        assert!(authorized(&h, &want));
        for bad in [
            "Bearer 0123456789abcdeF",
            "Bearer 0123456789abcde",
            "Bearer  0123456789abcdef",
            "Basic 0123456789abcdef",
            "0123456789abcdef",
            "Bearer",
        ] {
            h.insert(header::AUTHORIZATION, HeaderValue::from_static(bad));
            assert!(!authorized(&h, &want), "{bad}");
        }
    }

    #[test]
    fn targets_are_prechecked() {
        assert!(precheck_target("mine").is_ok());
        assert!(precheck_target("/sp/a-1").is_ok());
        assert!(precheck_target("s3://bucket/sp/x").is_ok());
        for bad in ["..", "a/../b", "./a", "..%2f", "a\\b", "a\0", "a\nb"] {
            assert!(precheck_target(bad).is_err(), "{bad:?}");
        }
        assert!(precheck_target(&"a".repeat(513)).is_err());
    }
}
