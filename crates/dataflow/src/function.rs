//! User functions with a lifecycle: failures of user code.
//!
//! A user function that panics, or a fallible one that returns an error, fails the job with
//! the operator's name ([`SpateError::Function`]), as an exception thrown by a Flink user
//! function fails its task. The error's domain is [`spate_types::ErrorDomain::Function`],
//! which a restart may cure, so a checkpointed job goes through its restart strategy.
//!
//! Panics are caught with `catch_unwind` around each call of user code per batch (or per
//! record and timer in keyed operators), which costs nothing unless something panics; the
//! operator then stops calling the function and the worker loop stops the job. A last-resort
//! catch around each worker's whole run turns any other panic into a failure too, so that no
//! panic ends the process without a message. Rust's panic hook still prints the panic to
//! stderr, as it does for any panic.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use spate_types::SpateError;

use crate::execute::JobShared;

/// The message of a panic's payload (a `&str` or a `String`), on one line.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    let text = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic whose payload is not a string".to_owned()
    };
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines.join("; ")
}

/// The job failure for a panic with `payload` in a function of `operator`.
pub(crate) fn panicked(operator: &str, payload: &(dyn Any + Send)) -> SpateError {
    SpateError::Function {
        operator: operator.to_owned(),
        panicked: true,
        message: panic_message(payload),
    }
}

/// Runs `f`, user code of `operator`; a panic fails the job and gives `None`.
pub(crate) fn guard<R>(shared: &JobShared, operator: &str, f: impl FnOnce() -> R) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Some(r),
        Err(payload) => {
            shared.fail(panicked(operator, payload.as_ref()));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_message_is_one_line_from_str_or_string() {
        let p = catch_unwind(|| panic!("index out of bounds")).unwrap_err();
        assert_eq!(panic_message(p.as_ref()), "index out of bounds");
        let n = 3;
        let p = catch_unwind(|| panic!("bad {n}\n  left: 1\n right: 2")).unwrap_err();
        assert_eq!(panic_message(p.as_ref()), "bad 3; left: 1; right: 2");
        let p = catch_unwind(|| std::panic::panic_any(7u8)).unwrap_err();
        assert_eq!(
            panic_message(p.as_ref()),
            "a panic whose payload is not a string"
        );
        let e = panicked("q3.join", p.as_ref());
        assert!(e.to_string().starts_with("operator q3.join panicked: "));
        assert_eq!(e.domain(), spate_types::ErrorDomain::Function);
        let e = SpateError::function("parse", "not a number");
        assert_eq!(e.to_string(), "operator parse failed: not a number");
    }
}
