//! The socket source against a real TCP server on localhost.

use std::io::Write;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use spate_connectors::SocketTextSource;
use spate_types::{BadRecordPolicy, Source, SourceContext, SourceOutput, SourceStatus, SpateError};

use crate::util::drain;

#[test]
fn reads_lines_until_the_peer_closes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        go_rx.recv().unwrap();
        let mut text = String::new();
        for i in 0..5000 {
            text.push_str(&format!("line {i}\n"));
        }
        // Written in pieces, so that lines cross reads.
        for chunk in text.as_bytes().chunks(777) {
            conn.write_all(chunk).unwrap();
        }
        conn.write_all(b"\r\nno newline at the end").unwrap();
        // Dropping `conn` closes the connection.
    });

    let source = SocketTextSource::new("127.0.0.1", port);
    assert!(!source.is_bounded());
    assert_eq!(source.name(), format!("socket:127.0.0.1:{port}"));
    let mut reader = source
        .create_reader(&SourceContext {
            worker_index: 0,
            workers: 3,
        })
        .unwrap();

    // Nothing was sent yet: the reader is idle, and a poll does not block.
    let (mut recs, mut dead, mut dropped) = (Vec::new(), Vec::new(), 0);
    let started = Instant::now();
    for _ in 0..3 {
        let status = reader
            .poll(
                &mut SourceOutput::new(&mut recs, &mut dead, &mut dropped),
                100,
            )
            .unwrap();
        assert_eq!(status, SourceStatus::Idle);
    }
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(recs.is_empty());

    go_tx.send(()).unwrap();
    let drained = drain(reader.as_mut(), 333);
    server.join().unwrap();
    assert!(drained.error.is_none());
    let mut expected: Vec<String> = (0..5000).map(|i| format!("line {i}")).collect();
    expected.push(String::new());
    expected.push("no newline at the end".into());
    assert_eq!(drained.records, expected);

    // The other workers read nothing.
    for worker_index in 1..3 {
        let mut other = source
            .create_reader(&SourceContext {
                worker_index,
                workers: 3,
            })
            .unwrap();
        let drained = drain(other.as_mut(), 10);
        assert!(drained.records.is_empty() && drained.error.is_none());
    }
}

#[test]
fn invalid_utf8_follows_the_policy() {
    for policy in [
        BadRecordPolicy::Fail,
        BadRecordPolicy::Drop,
        BadRecordPolicy::DeadLetter("d".into()),
    ] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            conn.write_all(b"a\nb\xffc\nd\n").unwrap();
        });
        let source = SocketTextSource::new("127.0.0.1", port).policy(policy.clone());
        let mut reader = source
            .create_reader(&SourceContext {
                worker_index: 0,
                workers: 1,
            })
            .unwrap();
        let drained = drain(reader.as_mut(), 100);
        server.join().unwrap();
        match policy {
            BadRecordPolicy::Fail => {
                assert_eq!(drained.records, ["a"]);
                let msg = drained.error.unwrap().to_string();
                assert!(
                    msg.starts_with(&format!(
                        "bad record in socket 127.0.0.1:{port} line 2: invalid UTF-8"
                    )),
                    "{msg}"
                );
            }
            BadRecordPolicy::Drop => {
                assert_eq!(drained.records, ["a", "d"]);
                assert_eq!(drained.dropped, 1);
            }
            BadRecordPolicy::DeadLetter(_) => {
                assert_eq!(drained.records, ["a", "d"]);
                assert_eq!(drained.dead.len(), 1);
                assert_eq!(drained.dead[0].line, 2);
                assert_eq!(drained.dead[0].raw, "b\u{fffd}c");
                assert_eq!(drained.dead[0].source, format!("socket 127.0.0.1:{port}"));
            }
        }
    }
}

#[test]
fn connection_failure_names_host_and_port() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let source = SocketTextSource::new("127.0.0.1", port);
    let err = source
        .create_reader(&SourceContext {
            worker_index: 0,
            workers: 1,
        })
        .err()
        .expect("refused");
    assert!(matches!(err, SpateError::IoContext { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("127.0.0.1:{port}")) && msg.contains("nc -lk"),
        "{msg}"
    );
    // Only worker 0 connects.
    assert!(source
        .create_reader(&SourceContext {
            worker_index: 1,
            workers: 2
        })
        .is_ok());
}

#[test]
fn dropping_the_reader_closes_the_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let source = SocketTextSource::new("127.0.0.1", port);
    let reader = source
        .create_reader(&SourceContext {
            worker_index: 0,
            workers: 1,
        })
        .unwrap();
    let (mut conn, _) = listener.accept().unwrap();
    drop(reader);
    // The server sees the connection closed (read returns 0) instead of waiting forever.
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 8];
    let n = std::io::Read::read(&mut conn, &mut buf).unwrap();
    assert_eq!(n, 0);
}
