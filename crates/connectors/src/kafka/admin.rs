//! The few Kafka requests librdkafka has no call for, spoken directly over the wire protocol.
//!
//! The exactly-once sink must finish, after a restore, transactions that a producer of the
//! failed run prepared: commit those its completed checkpoint covers, abort the later ones.
//! librdkafka can only end the transaction of its own producer, so, as Flink does through
//! reflection on the Java producer, this client asks the transaction coordinator for the
//! transaction's producer id and epoch (`DescribeTransactions`) and ends it with them
//! (`EndTxn`). It also lists the open transactions of a prefix (`ListTransactions`), so that
//! lingering ones of any earlier run are found.
//!
//! Blocking `std::net` I/O with timeouts: it runs when a writer starts, never on the hot path.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{
    ApiVersionsRequest, CreatePartitionsRequest, CreateTopicsRequest, DescribeTransactionsRequest,
    EndTxnRequest, FindCoordinatorRequest, ListTransactionsRequest, ProducerId, RequestHeader,
    ResponseHeader, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use spate_types::{SpateError, SpateResult};

const TIMEOUT: Duration = Duration::from_secs(30);
const CLIENT_ID: &str = "spate-admin";
/// The coordinator key type of transactional ids.
const KEY_TYPE_TRANSACTION: i8 = 1;
/// The broker's error codes this client tells apart.
const NONE: i16 = 0;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const CONCURRENT_TRANSACTIONS: i16 = 51;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

/// What the coordinator knows of one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnDescription {
    /// The id.
    pub transactional_id: String,
    /// `Empty`, `Ongoing`, `PrepareCommit`, `PrepareAbort`, `CompleteCommit`, `CompleteAbort`,
    /// `Dead` or `PrepareEpochFence`; `None` when the coordinator does not know the id.
    pub state: Option<String>,
    /// The producer id of its current producer.
    pub producer_id: i64,
    /// The epoch of its current producer.
    pub producer_epoch: i16,
}

/// One connection to one broker.
struct Conn {
    addr: String,
    stream: TcpStream,
    correlation: i32,
    versions: HashMap<i16, (i16, i16)>,
}

impl Conn {
    fn open(addr: &str) -> SpateResult<Conn> {
        let err = |e: std::io::Error| SpateError::connector(format!("kafka {addr}"), e);
        let sock = addr
            .to_socket_addrs()
            .map_err(err)?
            .next()
            .ok_or_else(|| SpateError::connector(format!("kafka {addr}"), "no address"))?;
        let stream = TcpStream::connect_timeout(&sock, TIMEOUT).map_err(err)?;
        stream.set_read_timeout(Some(TIMEOUT)).map_err(err)?;
        stream.set_write_timeout(Some(TIMEOUT)).map_err(err)?;
        stream.set_nodelay(true).map_err(err)?;
        let mut conn = Conn {
            addr: addr.to_owned(),
            stream,
            correlation: 0,
            versions: HashMap::new(),
        };
        // ApiVersions v0 is understood by every broker; its answer says what else is.
        let resp = conn.send(ApiVersionsRequest::default(), 0)?;
        if resp.error_code != NONE {
            return Err(conn.fail(format!("ApiVersions failed with code {}", resp.error_code)));
        }
        conn.versions = resp
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        Ok(conn)
    }

    fn fail(&self, message: impl std::fmt::Display) -> SpateError {
        SpateError::connector(format!("kafka {}", self.addr), message)
    }

    /// The highest version of `R` that both sides speak, at most `cap`.
    fn version<R: Request>(&self, cap: i16) -> SpateResult<i16> {
        let (min, max) = self
            .versions
            .get(&R::KEY)
            .copied()
            .ok_or_else(|| self.fail(format!("the broker does not support API {}", R::KEY)))?;
        let v = max.min(cap).min(R::VERSIONS.max);
        if v < min || v < R::VERSIONS.min {
            return Err(self.fail(format!(
                "no common version of API {} (broker {min}..={max})",
                R::KEY
            )));
        }
        Ok(v)
    }

    fn send<R: Request>(&mut self, request: R, version: i16) -> SpateResult<R::Response> {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, R::header_version(version))
            .and_then(|()| request.encode(&mut body, version))
            .map_err(|e| SpateError::Internal(format!("encoding a Kafka request: {e}")))?;
        let mut frame = Vec::with_capacity(body.len() + 4);
        frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
        frame.extend_from_slice(&body);
        let io = |e: std::io::Error| SpateError::connector(format!("kafka {}", self.addr), e);
        self.stream.write_all(&frame).map_err(io)?;
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).map_err(io)?;
        let len = i32::from_be_bytes(len);
        if !(0..=64 << 20).contains(&len) {
            return Err(self.fail(format!("a response of {len} bytes")));
        }
        let mut buf = vec![0u8; len as usize];
        self.stream.read_exact(&mut buf).map_err(io)?;
        let mut buf = bytes::Bytes::from(buf);
        let bad =
            |e: &dyn std::fmt::Display| self.fail(format!("a response that does not decode: {e}"));
        let h = ResponseHeader::decode(&mut buf, R::Response::header_version(version))
            .map_err(|e| bad(&e))?;
        if h.correlation_id != self.correlation {
            return Err(bad(&format!(
                "correlation id {}, expected {}",
                h.correlation_id, self.correlation
            )));
        }
        let resp = R::Response::decode(&mut buf, version).map_err(|e| bad(&e))?;
        let _ = buf.remaining();
        Ok(resp)
    }
}

/// A client of a Kafka cluster's transaction coordinators.
pub struct KafkaAdmin {
    bootstrap: Vec<String>,
    conns: HashMap<String, Conn>,
}

impl KafkaAdmin {
    /// A client that finds the cluster through `bootstrap` (comma-separated `host:port`).
    pub fn new(bootstrap: &str) -> KafkaAdmin {
        KafkaAdmin {
            bootstrap: bootstrap
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            conns: HashMap::new(),
        }
    }

    fn conn(&mut self, addr: &str) -> SpateResult<&mut Conn> {
        if !self.conns.contains_key(addr) {
            let c = Conn::open(addr)?;
            self.conns.insert(addr.to_owned(), c);
        }
        Ok(self.conns.get_mut(addr).expect("inserted above"))
    }

    fn any_bootstrap(&mut self) -> SpateResult<String> {
        let mut last = None;
        for addr in self.bootstrap.clone() {
            match self.conn(&addr) {
                Ok(_) => return Ok(addr),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| SpateError::Config("no Kafka bootstrap server given".into())))
    }

    /// Runs `f`, retrying while the coordinator is loading or moving (bounded).
    fn retrying<T>(
        &mut self,
        mut f: impl FnMut(&mut Self) -> SpateResult<Retry<T>>,
    ) -> SpateResult<T> {
        let mut delay = Duration::from_millis(50);
        for _ in 0..40 {
            match f(self)? {
                Retry::Done(t) => return Ok(t),
                Retry::Again(why) => {
                    tracing::debug!(%why, "retrying a transaction request");
                    self.conns.clear();
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(Duration::from_secs(1));
                }
            }
        }
        Err(SpateError::connector(
            "kafka",
            "the transaction coordinator stayed unavailable for 30 s",
        ))
    }

    /// The address of the coordinator of `txn_id`.
    fn coordinator(&mut self, txn_id: &str) -> SpateResult<String> {
        self.retrying(|admin| {
            let addr = admin.any_bootstrap()?;
            let conn = admin.conn(&addr)?;
            let v = conn.version::<FindCoordinatorRequest>(4)?;
            let mut req = FindCoordinatorRequest::default().with_key_type(KEY_TYPE_TRANSACTION);
            let key = StrBytes::from_string(txn_id.to_owned());
            if v >= 4 {
                req.coordinator_keys = vec![key];
            } else {
                req.key = key;
            }
            let resp = conn.send(req, v)?;
            let (code, host, port, message) = match resp.coordinators.first() {
                Some(c) if v >= 4 => (
                    c.error_code,
                    c.host.to_string(),
                    c.port,
                    c.error_message.clone(),
                ),
                _ => (
                    resp.error_code,
                    resp.host.to_string(),
                    resp.port,
                    resp.error_message.clone(),
                ),
            };
            match code {
                NONE => Ok(Retry::Done(format!("{host}:{port}"))),
                COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR => {
                    Ok(Retry::Again(format!("FindCoordinator code {code}")))
                }
                _ => Err(conn.fail(format!(
                    "FindCoordinator for {txn_id} failed with code {code}: {}",
                    message.map(|m| m.to_string()).unwrap_or_default()
                ))),
            }
        })
    }

    /// What the coordinator knows of `txn_id`.
    pub fn describe(&mut self, txn_id: &str) -> SpateResult<TxnDescription> {
        self.retrying(|admin| {
            let addr = admin.coordinator(txn_id)?;
            let conn = admin.conn(&addr)?;
            let v = conn.version::<DescribeTransactionsRequest>(0)?;
            let req = DescribeTransactionsRequest::default().with_transactional_ids(vec![
                TransactionalId(StrBytes::from_string(txn_id.to_owned())),
            ]);
            let resp = conn.send(req, v)?;
            let Some(s) = resp.transaction_states.into_iter().next() else {
                return Err(conn.fail("DescribeTransactions answered nothing"));
            };
            match s.error_code {
                NONE => Ok(Retry::Done(TxnDescription {
                    transactional_id: txn_id.to_owned(),
                    state: Some(s.transaction_state.to_string()),
                    producer_id: s.producer_id.0,
                    producer_epoch: s.producer_epoch,
                })),
                TRANSACTIONAL_ID_NOT_FOUND => Ok(Retry::Done(TxnDescription {
                    transactional_id: txn_id.to_owned(),
                    state: None,
                    producer_id: -1,
                    producer_epoch: -1,
                })),
                COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR => Ok(
                    Retry::Again(format!("DescribeTransactions code {}", s.error_code)),
                ),
                code => Err(conn.fail(format!(
                    "DescribeTransactions for {txn_id} failed with code {code}"
                ))),
            }
        })
    }

    /// Ends the open transaction of `txn`'s producer: commits it, or aborts it.
    ///
    /// Uses at most `EndTxn` version 4, the transaction protocol librdkafka's producers begin
    /// their transactions with (version 5 is that of KIP-890's second part, where the epoch
    /// moves at every end).
    pub fn end(&mut self, txn: &TxnDescription, commit: bool) -> SpateResult<()> {
        let id = txn.transactional_id.clone();
        self.retrying(|admin| {
            let addr = admin.coordinator(&id)?;
            let conn = admin.conn(&addr)?;
            let v = conn.version::<EndTxnRequest>(4)?;
            let req = EndTxnRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(id.clone())))
                .with_producer_id(ProducerId(txn.producer_id))
                .with_producer_epoch(txn.producer_epoch)
                .with_committed(commit);
            let resp = conn.send(req, v)?;
            match resp.error_code {
                NONE => Ok(Retry::Done(())),
                COORDINATOR_LOAD_IN_PROGRESS
                | COORDINATOR_NOT_AVAILABLE
                | NOT_COORDINATOR
                | CONCURRENT_TRANSACTIONS => {
                    Ok(Retry::Again(format!("EndTxn code {}", resp.error_code)))
                }
                code => Err(conn.fail(format!(
                    "ending transaction {id} ({}) failed with code {code}",
                    if commit { "commit" } else { "abort" }
                ))),
            }
        })
    }

    /// The transactional ids of the cluster's open (`Ongoing`) transactions that start with
    /// `prefix`, from every broker in `brokers` (each lists those it coordinates).
    pub fn list_open(&mut self, brokers: &[String], prefix: &str) -> SpateResult<Vec<String>> {
        let mut ids = Vec::new();
        for addr in brokers {
            let listed = self.retrying(|admin| {
                let conn = admin.conn(addr)?;
                let v = conn.version::<ListTransactionsRequest>(1)?;
                let req = ListTransactionsRequest::default()
                    .with_state_filters(vec![StrBytes::from_static_str("Ongoing")])
                    .with_duration_filter(-1);
                let resp = conn.send(req, v)?;
                match resp.error_code {
                    NONE => Ok(Retry::Done(resp.transaction_states)),
                    COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE => Ok(Retry::Again(
                        format!("ListTransactions code {}", resp.error_code),
                    )),
                    code => Err(conn.fail(format!("ListTransactions failed with code {code}"))),
                }
            })?;
            ids.extend(
                listed
                    .into_iter()
                    .map(|t| t.transactional_id.0.to_string())
                    .filter(|id| id.starts_with(prefix)),
            );
        }
        ids.sort();
        ids.dedup();
        Ok(ids)
    }
}

impl KafkaAdmin {
    /// Creates `topic` with `partitions` partitions (replication factor: the broker's
    /// default); an existing topic is an error unless `exists_ok`.
    pub fn create_topic(
        &mut self,
        topic: &str,
        partitions: i32,
        exists_ok: bool,
    ) -> SpateResult<()> {
        let addr = self.any_bootstrap()?;
        let conn = self.conn(&addr)?;
        let v = conn.version::<CreateTopicsRequest>(5)?;
        let req = CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_num_partitions(partitions)
                .with_replication_factor(-1)])
            .with_timeout_ms(30_000);
        let resp = conn.send(req, v)?;
        for t in resp.topics {
            match t.error_code {
                NONE => {}
                TOPIC_ALREADY_EXISTS if exists_ok => {}
                code => {
                    return Err(conn.fail(format!(
                        "creating topic {topic} failed with code {code}: {}",
                        t.error_message.map(|m| m.to_string()).unwrap_or_default()
                    )))
                }
            }
        }
        Ok(())
    }

    /// Grows `topic` to `total` partitions.
    pub fn create_partitions(&mut self, topic: &str, total: i32) -> SpateResult<()> {
        let addr = self.any_bootstrap()?;
        let conn = self.conn(&addr)?;
        let v = conn.version::<CreatePartitionsRequest>(3)?;
        let req = CreatePartitionsRequest::default()
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_count(total)
                .with_assignments(None)])
            .with_timeout_ms(30_000);
        let resp = conn.send(req, v)?;
        for r in resp.results {
            if r.error_code != NONE {
                return Err(conn.fail(format!(
                    "adding partitions to {topic} failed with code {}: {}",
                    r.error_code,
                    r.error_message.map(|m| m.to_string()).unwrap_or_default()
                )));
            }
        }
        Ok(())
    }
}

enum Retry<T> {
    Done(T),
    Again(String),
}
