//! Spate's web server: a Flink-shaped REST API, a Prometheus endpoint and a dashboard, all
//! read from a running job's [`JobView`].
//!
//! The engine hands [`serve`] its `JobView`; the server runs on a thread of its own with a
//! current-thread tokio runtime, so it never takes time from the workers, and it reads only
//! snapshots. Nothing here names timely.
//!
//! - [`config`]: where it listens, the token, TLS, and the checks of [`ServerConfig::validate`].
//! - [`routes`]: the route table ([`ROUTES`], one `const` list that the security tests walk)
//!   and the handlers.
//! - [`flink`]: Flink's JSON shapes built from a [`JobSnapshot`](spate_metrics::JobSnapshot);
//!   a Flink vertex is a chain of Spate operators.
//! - [`prom`]: the Prometheus text format with the names of Flink's Prometheus reporter.
//! - [`dashboard`] and [`layout`]: the data of the dashboard's single poll, with the job
//!   graph laid out on the server; the page itself is `assets/` compiled in.
//! - [`security`]: the guard every request passes (Host check, bearer token, body limit,
//!   headers).
//! - `net`: the accept loop (plain or TLS with rustls and ring), at most 64 connections at
//!   once, 10 s for a request's headers and for a TLS handshake.
//!
//! # Security model
//! Loopback by default. With no token, only requests whose `Host` is `localhost`,
//! `127.0.0.1` or `[::1]` are served (a DNS-rebinding page cannot reach the API). With a
//! token, every route but the static page, its two assets and `/healthz` needs
//! `Authorization: Bearer <token>`, compared in constant time (`subtle`, over a fixed
//! padded length); the page reads the token from its URL fragment (`#token=`, never sent to the
//! server) and keeps it in `sessionStorage`. Binding off loopback needs a token and TLS, or
//! an explicit `insecure`. No route takes a file path or an upload; path parameters are ids
//! (`[0-9a-f]{32}` or a number); bodies are at most 64 KiB; there are no CORS headers; every
//! response carries a strict Content-Security-Policy, `nosniff` and `no-store`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use spate_metrics::JobView;

pub mod config;
pub mod dashboard;
pub mod flink;
pub mod layout;
mod net;
pub mod prom;
pub mod routes;
pub mod security;

pub use config::{token_from, token_from_env, token_from_file, ServerConfig, TOKEN_ENV};
pub use routes::{router, RouterOptions, ROUTES};

/// A running server; it stops on [`Server::shutdown`] or when dropped.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    tls: bool,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// The address it listens on (with the port chosen when 0 was asked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The dashboard's URL, e.g. `http://127.0.0.1:43125/` (a wildcard bind shows as
    /// loopback, which reaches it from the same machine).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        let ip = self.addr.ip();
        let host = match ip {
            ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_string(),
            ip if ip.is_unspecified() => "[::1]".to_string(),
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
            std::net::IpAddr::V4(v4) => v4.to_string(),
        };
        format!("{scheme}://{host}:{}/", self.addr.port())
    }

    /// Stops serving and waits for the server's thread to end.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Starts serving `view` as `config` says, on a thread of its own; returns once the port is
/// bound. Errors are one line (bad configuration, port in use, unreadable certificate).
///
/// Every request calls [`JobView::snapshot`] on the server's one thread, so it should
/// return the sampler's latest snapshot rather than gather one.
pub fn serve(config: &ServerConfig, view: Arc<dyn JobView>) -> Result<Server, String> {
    config.validate()?;
    let acceptor = match &config.tls {
        Some((cert, key)) => Some(net::acceptor(cert, key)?),
        None => None,
    };
    let listener = std::net::TcpListener::bind((config.bind, config.port))
        .map_err(|e| format!("cannot listen on {}:{}: {e}", config.bind, config.port))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot listen on {}:{}: {e}", config.bind, config.port))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("cannot read the listening address: {e}"))?;
    let app = router(
        view,
        RouterOptions {
            token: config.token.clone(),
            metrics_prefix: config.metrics_prefix.clone(),
        },
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let tls = acceptor.is_some();
    let thread = std::thread::Builder::new()
        .name("spate-web".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("cannot start the web runtime: {e}")));
                    return;
                }
            };
            rt.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("cannot listen: {e}")));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                tokio::select! {
                    _ = net::serve(listener, app, acceptor) => {}
                    _ = stopped => {}
                }
            });
            // Dropping the runtime here ends every connection still open.
        })
        .map_err(|e| format!("cannot start the web server's thread: {e}"))?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(Server {
            addr,
            tls,
            stop: Some(stop),
            thread: Some(thread),
        }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => {
            let _ = thread.join();
            Err("the web server's thread ended before it listened".to_string())
        }
    }
}
