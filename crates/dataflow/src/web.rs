//! Where a job's REST server starts: `spate-web` (the REST API, `/metrics` and the
//! dashboard) serving the job's [`spate_metrics::JobView`].
//!
//! `execute` calls [`serve`] once per job, before the first run (on the supervisor for a
//! multi-process job; its processes report to it and serve nothing). The server runs on a
//! thread of its own; the job registers in this machine's jobs directory
//! (`spate_metrics::registry`) so that `spate list` and the other CLI verbs find it, and
//! prints its URL. Dropping the guard when `execute` returns stops the server and removes
//! the registration.

use std::sync::Arc;

use spate_metrics::registry;
use spate_types::{SpateError, SpateResult};

use crate::config::JobConfig;

/// How long a job that a client stopped or saved through the API keeps serving after it
/// ends, so that the client can read the operation's result (its savepoint's location).
const LINGER: std::time::Duration = std::time::Duration::from_secs(2);

/// What keeps a job's server running; dropping it (when `execute` returns) stops the server.
pub(crate) struct ServerGuard {
    registration: Option<registry::Registration>,
    server: Option<spate_web::Server>,
    /// Whether a client asked for an operation (then the server lingers).
    operated: Box<dyn Fn() -> bool>,
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        // The job is no longer listed as running, but a client polling for the result of a
        // stop with savepoint gets its answer.
        self.registration = None;
        if (self.operated)() {
            std::thread::sleep(LINGER);
        }
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
    }
}

/// Starts the server of a job that begins; `None` when the job serves nothing (no REST
/// configuration, or a process that a supervisor started).
pub(crate) fn serve(
    config: &JobConfig,
    name: &str,
    view: Arc<dyn spate_metrics::JobView>,
    operated: impl Fn() -> bool + 'static,
) -> SpateResult<Option<ServerGuard>> {
    let Some(rest) = &config.rest else {
        return Ok(None);
    };
    if config.supervised {
        return Ok(None);
    }
    rest.validate().map_err(SpateError::Config)?;
    if !rest.bind.is_loopback() && rest.tls.is_none() {
        tracing::warn!(
            bind = %rest.bind,
            "the REST API is served off loopback without TLS (--insecure): its token crosses the network in clear text"
        );
    }
    let server = spate_web::serve(rest, Arc::clone(&view))
        .map_err(|e| SpateError::Config(format!("cannot serve the REST API: {e}")))?;
    let snapshot = view.snapshot();
    let url = server.url();
    let entry = registry::JobEntry {
        jid: snapshot.job_id.clone(),
        name: name.to_owned(),
        url: url.trim_end_matches('/').to_owned(),
        pid: std::process::id(),
        start_time: snapshot.start_time,
        token_required: rest.token.is_some(),
    };
    let registration = match registry::register(&registry::jobs_dir(), &entry) {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(error = %e, dir = %registry::jobs_dir().display(), "cannot register the job for `spate list`");
            None
        }
    };
    eprintln!(
        "Job \"{name}\" ({}): dashboard and REST API at {url}",
        snapshot.job_id
    );
    Ok(Some(ServerGuard {
        registration,
        server: Some(server),
        operated: Box::new(operated),
    }))
}
