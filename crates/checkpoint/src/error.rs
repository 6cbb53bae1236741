//! Storage failures as one-line [`SpateError`]s that name the location and the operation.

use std::io;

use spate_types::SpateError;

/// A storage failure that can be cloned, so that every poll of a writer can report it.
///
/// It becomes a [`SpateError::Io`] whose path is the full location (URL or directory) and whose
/// message says what was being done, for example
/// `/data/ckpt/chk-7/worker-3/op-window-7/kg-0012.bin: cannot write checkpoint file: No space left on device (os error 28)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The location involved, as the user would write it.
    pub(crate) location: String,
    /// The kind of I/O failure, kept so that callers can tell a full disk from a missing file.
    pub(crate) kind: io::ErrorKind,
    /// What was being done and why it failed, on one line.
    pub(crate) message: String,
}

impl Failure {
    /// A failure of an `object_store` operation `what` (for example "cannot write checkpoint
    /// file") on `location`.
    pub(crate) fn store(
        what: &str,
        location: impl Into<String>,
        err: &object_store::Error,
    ) -> Self {
        Failure {
            location: location.into(),
            kind: kind_of(err),
            message: format!("{what}: {}", detail_of(err)),
        }
    }

    /// A failure that is not an I/O error of the store: a corrupt file, a missing file.
    pub(crate) fn new(
        location: impl Into<String>,
        kind: io::ErrorKind,
        message: impl Into<String>,
    ) -> Self {
        Failure {
            location: location.into(),
            kind,
            message: one_line(&message.into()),
        }
    }

    /// The error callers see.
    pub(crate) fn to_error(&self) -> SpateError {
        SpateError::io(
            self.location.clone(),
            io::Error::new(self.kind, self.message.clone()),
        )
    }
}

impl From<Failure> for SpateError {
    fn from(f: Failure) -> Self {
        f.to_error()
    }
}

/// The I/O kind of an `object_store` error: its own variant where it says, otherwise the kind of
/// the first `std::io::Error` in its chain of sources (a full disk on a local directory).
fn kind_of(err: &object_store::Error) -> io::ErrorKind {
    match err {
        object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => io::ErrorKind::PermissionDenied,
        object_store::Error::AlreadyExists { .. } => io::ErrorKind::AlreadyExists,
        object_store::Error::NotSupported { .. } | object_store::Error::NotImplemented { .. } => {
            io::ErrorKind::Unsupported
        }
        _ => first_io_error(err)
            .map(io::Error::kind)
            .unwrap_or(io::ErrorKind::Other),
    }
}

/// The most specific text of an `object_store` error: the innermost `std::io::Error` when there is
/// one ("No space left on device (os error 28)"), the whole error otherwise.
fn detail_of(err: &object_store::Error) -> String {
    match first_io_error(err) {
        Some(io) => one_line(&io.to_string()),
        None => one_line(&err.to_string()),
    }
}

fn first_io_error<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a io::Error> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            // An io::Error may itself wrap a more specific error; its own text is what users know.
            return Some(io);
        }
        current = e.source();
    }
    None
}

/// Error messages are one line: collapse the line breaks some backends put in their errors.
pub(crate) fn one_line(text: &str) -> String {
    if !text.contains(['\n', '\r']) {
        return text.to_owned();
    }
    text.split(['\n', '\r'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_disk_keeps_its_kind_and_text() {
        let err = object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(io::Error::new(io::ErrorKind::StorageFull, "disk full")),
        };
        let f = Failure::store("cannot write checkpoint file", "/ckpt/chk-1/a.bin", &err);
        assert_eq!(f.kind, io::ErrorKind::StorageFull);
        assert_eq!(
            f.to_error().to_string(),
            "/ckpt/chk-1/a.bin: cannot write checkpoint file: disk full"
        );
    }

    #[test]
    fn messages_are_one_line() {
        assert_eq!(one_line("a\nb\r\n  c"), "a; b; c");
        assert_eq!(one_line("plain"), "plain");
    }
}
