//! Typed errors, tagged with a domain so that recovery can decide what to retry.

use std::path::PathBuf;

/// Who is at fault for an error, which decides whether a restart can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorDomain {
    /// Bad input, bad configuration or a bad job: restarting will not help.
    User,
    /// An outside system failed (disk, network, storage): a restart may help.
    External,
    /// A bug in Spate: an invariant broke.
    Internal,
    /// A user function returned an error or panicked. As Flink does with an exception thrown
    /// by user code, a restart may help (the function may depend on the outside world), so the
    /// restart strategy applies.
    Function,
}

/// The error type of Spate's library crates.
///
/// Each `Display` message is one line that says what went wrong and, where it can, what the
/// user can do about it.
#[derive(Debug, thiserror::Error)]
pub enum SpateError {
    /// A malformed input record under the `fail` policy.
    #[error("bad record in {origin} line {line}: {reason}")]
    BadRecord {
        /// The file (or socket, or `stdin`) the record came from.
        origin: String,
        /// The 1-based line number within `origin`.
        line: u64,
        /// Why the record was rejected.
        reason: String,
    },
    /// A configuration value or flag that cannot be used.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An I/O failure on a named path.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An I/O failure that is not tied to one path (sockets, pipes).
    #[error("{context}: {source}")]
    IoContext {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The job was built wrongly (for example a stream used after the job was executed).
    #[error("invalid job: {0}")]
    Job(String),
    /// A worker or process of the job failed.
    #[error("job failed: {0}")]
    Execution(String),
    /// A broken invariant: a bug in Spate.
    #[error("internal error: {0}")]
    Internal(String),
    /// An outside system a connector talks to (a message broker) failed or refused.
    #[error("{system}: {message}")]
    Connector {
        /// The system and where it is, such as `kafka 127.0.0.1:9092`.
        system: String,
        /// What went wrong, in one line.
        message: String,
    },
    /// A user function of an operator returned an error or panicked.
    #[error("operator {operator} {}: {message}", outcome(.panicked))]
    Function {
        /// The name of the operator whose function failed.
        operator: String,
        /// Whether the function panicked (rather than returning an error).
        panicked: bool,
        /// The error's message, or the panic's payload.
        message: String,
    },
}

fn outcome(panicked: &bool) -> &'static str {
    if *panicked {
        "panicked"
    } else {
        "failed"
    }
}

impl SpateError {
    /// The domain of this error: whose fault it is.
    pub fn domain(&self) -> ErrorDomain {
        match self {
            SpateError::BadRecord { .. } | SpateError::Config(_) | SpateError::Job(_) => {
                ErrorDomain::User
            }
            SpateError::Io { .. }
            | SpateError::IoContext { .. }
            | SpateError::Execution(_)
            | SpateError::Connector { .. } => ErrorDomain::External,
            SpateError::Internal(_) => ErrorDomain::Internal,
            SpateError::Function { .. } => ErrorDomain::Function,
        }
    }

    /// The error of a user function of `operator` that returned `error`.
    pub fn function(operator: impl Into<String>, error: impl std::fmt::Display) -> Self {
        SpateError::Function {
            operator: operator.into(),
            panicked: false,
            message: error.to_string(),
        }
    }

    /// A failure of the outside system `system` (a broker and its address).
    pub fn connector(system: impl Into<String>, message: impl std::fmt::Display) -> Self {
        SpateError::Connector {
            system: system.into(),
            message: message.to_string(),
        }
    }

    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SpateError::Io {
            path: path.into(),
            source,
        }
    }

    /// An I/O error with a short description of what was being done.
    pub fn io_context(context: impl Into<String>, source: std::io::Error) -> Self {
        SpateError::IoContext {
            context: context.into(),
            source,
        }
    }
}

/// `Result` with [`SpateError`].
pub type SpateResult<T> = Result<T, SpateError>;
