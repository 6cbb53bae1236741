//! `serve()` on real sockets: plain HTTP on a free port, TLS with a certificate made by the
//! `openssl` CLI, tokens over the wire, refusals of bad configurations, and shutdown.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use spate_web::{serve, ServerConfig};

use crate::fake::{FakeJob, JOB_ID};
use crate::TOKEN;

/// One HTTP/1.1 request over `stream`; the whole response as text.
fn http<S: Read + Write>(stream: &mut S, path: &str, host: &str, extra: &str) -> String {
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{extra}\r\n");
    // A server that refuses the connection (plain HTTP to the TLS port) may close it while the
    // request is written: it then answered nothing.
    if stream.write_all(request.as_bytes()).is_err() {
        return String::new();
    }
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn connect(addr: std::net::SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

#[test]
fn serve_answers_on_a_free_loopback_port_and_shuts_down() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&ServerConfig::default(), Arc::new(FakeJob::new(dir.path()))).unwrap();
    let addr = server.addr();
    assert!(addr.ip().is_loopback());
    assert_ne!(addr.port(), 0);
    assert_eq!(server.url(), format!("http://127.0.0.1:{}/", addr.port()));
    let resp = http(
        &mut connect(addr),
        "/v1/overview",
        &format!("127.0.0.1:{}", addr.port()),
        "",
    );
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains("\"slots-total\":2"), "{resp}");
    let resp = http(&mut connect(addr), "/v1/jobs", "evil.example", "");
    assert!(resp.starts_with("HTTP/1.1 403"), "{resp}");
    // A second server cannot take the same port; the error is one line.
    let busy = ServerConfig {
        port: addr.port(),
        ..ServerConfig::default()
    };
    let e = serve(&busy, Arc::new(FakeJob::new(dir.path()))).unwrap_err();
    assert!(
        e.starts_with("cannot listen on 127.0.0.1:") && !e.contains('\n'),
        "{e}"
    );
    server.shutdown();
    assert!(
        TcpStream::connect(addr).is_err(),
        "still listening after shutdown"
    );
}

#[test]
fn a_token_is_checked_over_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        token: Some(TOKEN.into()),
        ..ServerConfig::default()
    };
    let server = serve(&config, Arc::new(FakeJob::new(dir.path()))).unwrap();
    let host = format!("localhost:{}", server.addr().port());
    let resp = http(&mut connect(server.addr()), "/v1/jobs", &host, "");
    assert!(resp.starts_with("HTTP/1.1 401"), "{resp}");
    assert!(
        resp.to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{resp}"
    );
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let resp = http(&mut connect(server.addr()), "/v1/jobs", &host, &auth);
    assert!(
        resp.starts_with("HTTP/1.1 200") && resp.contains(JOB_ID),
        "{resp}"
    );
    drop(server);
}

#[test]
fn bad_configurations_are_refused_before_binding() {
    let dir = tempfile::tempdir().unwrap();
    let job = Arc::new(FakeJob::new(dir.path()));
    let open = ServerConfig {
        bind: "0.0.0.0".parse().unwrap(),
        ..ServerConfig::default()
    };
    let e = serve(&open, job.clone()).unwrap_err();
    assert!(e.starts_with("--rest-bind 0.0.0.0 needs a token"), "{e}");
    let no_tls = ServerConfig {
        token: Some(TOKEN.into()),
        ..open.clone()
    };
    assert!(serve(&no_tls, job.clone())
        .unwrap_err()
        .contains("needs TLS"));
    let missing = ServerConfig {
        tls: Some((
            dir.path().join("no-cert.pem"),
            dir.path().join("no-key.pem"),
        )),
        ..ServerConfig::default()
    };
    let e = serve(&missing, job).unwrap_err();
    if cfg!(feature = "tls") {
        assert!(e.starts_with("cannot read TLS certificate"), "{e}");
    } else {
        assert!(e.contains("no TLS"), "{e}");
    }
}

#[cfg(feature = "tls")]
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl CLI (Debian's openssl package) runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[cfg(feature = "tls")]
#[test]
fn tls_serves_https_and_refuses_plain_http() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=spate test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
    ]);
    openssl(d, &ca);
    let mut csr = vec!["req"];
    csr.extend(ec);
    csr.extend([
        "-keyout",
        "key.pem",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=localhost",
    ]);
    openssl(d, &csr);
    std::fs::write(
        d.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "cert.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
    let config = ServerConfig {
        tls: Some((d.join("cert.pem"), d.join("key.pem"))),
        ..ServerConfig::default()
    };
    let server = serve(&config, Arc::new(FakeJob::new(d))).unwrap();
    assert!(server.url().starts_with("https://127.0.0.1:"));

    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(d.join("ca.pem")).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let client = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let conn =
        rustls::ClientConnection::new(Arc::new(client), "localhost".try_into().unwrap()).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, connect(server.addr()));
    let host = format!("localhost:{}", server.addr().port());
    let resp = http(&mut tls, "/v1/jobs", &host, "");
    assert!(
        resp.starts_with("HTTP/1.1 200") && resp.contains(JOB_ID),
        "{resp}"
    );

    // Plain HTTP to the TLS port gets no HTTP answer.
    let resp = http(&mut connect(server.addr()), "/v1/jobs", &host, "");
    assert!(
        !resp.contains("HTTP/1.1 200") && !resp.contains(JOB_ID),
        "{resp}"
    );
    server.shutdown();
}
