//! The flags of a job's REST API and dashboard (`--rest-port`, `--rest-bind`, …), shared by
//! every command that runs a job.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;

/// Where a running job serves its REST API, `/metrics` and dashboard.
#[derive(Debug, Clone, Args)]
pub struct RestArgs {
    /// The port of the job's REST API and dashboard (0: a free port, printed at start).
    #[arg(long, default_value_t = 0)]
    pub rest_port: u16,
    /// The address to listen on. Off loopback it needs --rest-token-file (or
    /// SPATE_REST_TOKEN) and --rest-tls-cert/--rest-tls-key (or --insecure).
    #[arg(long, default_value = "127.0.0.1")]
    pub rest_bind: IpAddr,
    /// A file whose first line is the bearer token every request must carry (at least 16
    /// characters); also read from SPATE_REST_TOKEN.
    #[arg(long)]
    pub rest_token_file: Option<PathBuf>,
    /// The PEM certificate chain of the REST API, to serve it over TLS.
    #[arg(long, requires = "rest_tls_key")]
    pub rest_tls_cert: Option<PathBuf>,
    /// The PEM private key for --rest-tls-cert.
    #[arg(long, requires = "rest_tls_cert")]
    pub rest_tls_key: Option<PathBuf>,
    /// Serve off loopback without TLS (behind a TLS proxy, say); a token is still required.
    #[arg(long)]
    pub insecure: bool,
    /// The first part of every Prometheus metric name on `/metrics`: `flink` makes dashboards
    /// made for Flink's Prometheus reporter work unchanged.
    #[arg(long, default_value = "spate")]
    pub metrics_prefix: String,
    /// Serve no REST API, dashboard or `/metrics`.
    #[arg(long, conflicts_with_all = ["rest_port", "rest_token_file", "rest_tls_cert", "insecure"])]
    pub no_rest: bool,
}

impl RestArgs {
    /// The server configuration these flags ask for (`None` with --no-rest), checked.
    pub fn server_config(&self) -> Result<Option<spate_web::ServerConfig>> {
        if self.no_rest {
            return Ok(None);
        }
        let token =
            spate_web::token_from(self.rest_token_file.as_deref()).map_err(|e| anyhow!(e))?;
        let tls = match (&self.rest_tls_cert, &self.rest_tls_key) {
            (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
            _ => None,
        };
        let config = spate_web::ServerConfig {
            bind: self.rest_bind,
            port: self.rest_port,
            token,
            tls,
            insecure: self.insecure,
            metrics_prefix: self.metrics_prefix.clone(),
        };
        config.validate().map_err(|e| anyhow!(e))?;
        Ok(Some(config))
    }
}
