//! Where a job's REST server plugs in.
//!
//! `execute` calls [`serve`] once per job, before the first run, with the job's live view.
//! For now it only keeps the view for the job's life; the server itself (`spate-web`: the
//! REST API, Prometheus and the dashboard) is wired here, reading only the
//! [`spate_metrics::JobView`] it is given.

use std::sync::Arc;

use spate_types::SpateResult;

use crate::config::JobConfig;

/// What keeps a job's server running; dropping it (when `execute` returns) stops the server.
pub(crate) struct ServerGuard {
    _view: Arc<dyn spate_metrics::JobView>,
}

/// Starts the server of a job that begins (or, today, keeps its view); `None` when the job
/// serves nothing.
pub(crate) fn serve(
    _config: &JobConfig,
    view: Arc<dyn spate_metrics::JobView>,
) -> SpateResult<Option<ServerGuard>> {
    Ok(Some(ServerGuard { _view: view }))
}
