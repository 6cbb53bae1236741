//! What a server may ask of a running job: a snapshot, and the control actions.
//!
//! The engine implements [`JobView`] for each running job (the supervisor for a multi-process
//! job); `spate-web` serves it. Control follows Flink's REST API: cancel; stop with a savepoint
//! (with or without `drain`); trigger a savepoint, answered with an operation id that the
//! client polls.
//!
//! Savepoint targets never come straight from a client: [`savepoint_target`] accepts only a
//! location inside the job's configured savepoint directory, checked before anything is read
//! or written.

use serde::{Deserialize, Serialize};

use crate::snapshot::JobSnapshot;

/// The id of an asynchronous operation (Flink's trigger id): 32 lowercase hex digits.
pub type OperationId = String;

/// An asynchronous control action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operation {
    /// Take a savepoint; with `cancel_job`, cancel the job once it is written.
    Savepoint {
        /// Where, as the client asked (checked with [`savepoint_target`]); `None` for the
        /// configured directory.
        target: Option<String>,
        /// Cancel the job after the savepoint.
        cancel_job: bool,
    },
    /// Stop the job with a final savepoint (Flink's stop-with-savepoint).
    Stop {
        /// Where, as the client asked; `None` for the configured directory.
        target: Option<String>,
        /// Advance event time to the end first, firing every window and timer (Flink's
        /// `--drain`); without it, pending windows stay in the savepoint.
        drain: bool,
    },
}

/// Where an operation stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OperationStatus {
    /// Not done yet.
    InProgress,
    /// Done; the savepoint's location.
    Completed {
        /// The savepoint's location.
        location: String,
    },
    /// Failed, and why.
    Failed {
        /// One line.
        cause: String,
    },
}

/// Why a control request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlError {
    /// The request is malformed or names a target outside the allowed directory (HTTP 400).
    BadRequest(String),
    /// The job cannot do it now: it is not running, or it has no checkpoint or savepoint
    /// directory (HTTP 409).
    Conflict(String),
    /// No such job or operation (HTTP 404).
    NotFound(String),
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlError::BadRequest(m) | ControlError::Conflict(m) | ControlError::NotFound(m) => {
                f.write_str(m)
            }
        }
    }
}

impl std::error::Error for ControlError {}

/// A running job, as a server sees it.
pub trait JobView: Send + Sync + 'static {
    /// The job now: plan, metrics of every operator instance, checkpoints, exceptions.
    fn snapshot(&self) -> JobSnapshot;

    /// Cancels the job: sources stop, no final savepoint, the job ends `CANCELED`.
    fn cancel(&self) -> Result<(), ControlError>;

    /// Starts a savepoint or a stop with savepoint; poll [`JobView::operation`] for the result.
    fn trigger(&self, operation: Operation) -> Result<OperationId, ControlError>;

    /// Where the operation `id` stands, or `None` when no such operation exists.
    fn operation(&self, id: &str) -> Option<OperationStatus>;
}

/// The location of a savepoint that a client asked for, checked against `root`, the job's
/// configured savepoint directory (a path or an object-store URL).
///
/// - `None` → `root/savepoint-<unique>`.
/// - A relative name of plain components (`[A-Za-z0-9._-]`, none `.` or `..`) → under `root`.
/// - An absolute path or URL → accepted only when it lies under `root` (compared
///   component-wise), with the same rule for what follows.
///
/// Percent signs, backslashes, control characters and anything over 512 bytes are refused:
/// nothing is decoded, so a double-encoded traversal (`..%252f`) never becomes one.
pub fn savepoint_target(
    root: &str,
    requested: Option<&str>,
    unique: &str,
) -> Result<String, ControlError> {
    let root = root.trim_end_matches('/');
    let bad = |why: &str| ControlError::BadRequest(format!("target-directory {why}"));
    let Some(requested) = requested else {
        return Ok(format!("{root}/savepoint-{unique}"));
    };
    if requested.is_empty() {
        return Ok(format!("{root}/savepoint-{unique}"));
    }
    if requested.len() > 512 {
        return Err(bad("is longer than 512 bytes"));
    }
    if requested
        .chars()
        .any(|c| c == '%' || c == '\\' || c.is_control())
    {
        return Err(bad("may not contain '%', '\\' or control characters"));
    }
    let relative = if let Some(rest) = requested.strip_prefix(root) {
        match rest.strip_prefix('/') {
            Some(rest) => rest,
            None if rest.is_empty() => return Err(bad(
                "must name a directory inside the savepoint directory, not the directory itself",
            )),
            None => {
                return Err(bad(&format!(
                    "must be inside the job's savepoint directory {root}"
                )))
            }
        }
    } else if requested.starts_with('/') || requested.contains("://") {
        return Err(bad(&format!(
            "must be inside the job's savepoint directory {root}"
        )));
    } else {
        requested
    };
    let relative = relative.trim_end_matches('/');
    if relative.is_empty() {
        return Err(bad("must name a directory inside the savepoint directory"));
    }
    for part in relative.split('/') {
        let plain = !part.is_empty()
            && part != "."
            && part != ".."
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !plain {
            return Err(bad(&format!(
                "has a component {part:?} that is not a plain name ([A-Za-z0-9._-], not . or ..)"
            )));
        }
    }
    Ok(format!("{root}/{relative}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_stay_inside_the_root() {
        let ok = |r: Option<&str>| savepoint_target("/sp", r, "u1").unwrap();
        assert_eq!(ok(None), "/sp/savepoint-u1");
        assert_eq!(ok(Some("")), "/sp/savepoint-u1");
        assert_eq!(ok(Some("mine")), "/sp/mine");
        assert_eq!(ok(Some("a/b-1.x")), "/sp/a/b-1.x");
        assert_eq!(ok(Some("/sp/a/")), "/sp/a");
        assert_eq!(
            savepoint_target("s3://b/sp/", Some("s3://b/sp/x"), "u").unwrap(),
            "s3://b/sp/x"
        );
        for bad in [
            "..",
            "../etc",
            "a/../../etc",
            "/etc/passwd",
            "/sp",
            "/spx/a",
            "/sp/../etc",
            "..%2fetc",
            "..%252f..%252fetc%252fpasswd",
            "a\\..\\b",
            "a\0b",
            "./a",
            "a//b",
            "file:///etc",
            "s3://other/x",
            "a b",
            "\u{2215}etc",
        ] {
            assert!(
                matches!(
                    savepoint_target("/sp", Some(bad), "u"),
                    Err(ControlError::BadRequest(_))
                ),
                "{bad:?} was accepted"
            );
        }
        assert!(savepoint_target("/sp", Some(&"a".repeat(600)), "u").is_err());
    }
}
