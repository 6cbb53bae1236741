//! The accept loops: plain HTTP and HTTPS (rustls with the ring provider), one task per
//! connection, at most [`MAX_CONNECTIONS`] at a time, and a deadline for a request's headers
//! so that a client that opens connections and sends nothing cannot hold them.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Connections served at once; more wait in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 64;
/// A request's headers must arrive within this time.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A TLS handshake must finish within this time.
#[cfg(feature = "tls")]
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves one connection with HTTP/1.1.
async fn connection<S>(io: S, app: axum::Router)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper_util::service::TowerToHyperService::new(app);
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// Accepts connections forever; `tls` wraps each in a TLS session first.
pub(crate) async fn serve(listener: TcpListener, app: axum::Router, tls: Option<Acceptor>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            Err(_) => {
                // Out of file descriptors and the like: wait instead of spinning.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let app = app.clone();
        #[allow(clippy::clone_on_copy)] // Copy only without the `tls` feature.
        let tls = tls.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tls {
                None => connection(tcp, app).await,
                #[cfg(feature = "tls")]
                Some(acceptor) => {
                    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp));
                    if let Ok(Ok(stream)) = handshake.await {
                        connection(stream, app).await;
                    }
                }
                #[cfg(not(feature = "tls"))]
                Some(never) => match never {},
            }
        });
    }
}

/// What wraps a connection in TLS.
#[cfg(feature = "tls")]
pub(crate) type Acceptor = tokio_rustls::TlsAcceptor;
/// Without the `tls` feature there is nothing to wrap with.
#[cfg(not(feature = "tls"))]
pub(crate) type Acceptor = std::convert::Infallible;

/// The acceptor for a PEM certificate chain and private key.
#[cfg(feature = "tls")]
pub(crate) fn acceptor(cert: &std::path::Path, key: &std::path::Path) -> Result<Acceptor, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| format!("cannot read TLS certificate {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "TLS certificate {} holds no certificate",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("cannot read TLS key {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("TLS certificate and key do not fit: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Without the `tls` feature, a certificate cannot be used.
#[cfg(not(feature = "tls"))]
pub(crate) fn acceptor(_: &std::path::Path, _: &std::path::Path) -> Result<Acceptor, String> {
    Err(
        "this build of Spate has no TLS (the spate-web feature `tls`); \
         use --insecure behind a TLS proxy"
            .to_string(),
    )
}
