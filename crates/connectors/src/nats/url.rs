//! `nats://` URLs: how the command line names a NATS or JetStream source or sink.
//!
//! `nats://HOST[:PORT]/SUBJECT[,SUBJECT...]?OPTIONS` (port 4222 by default). Without
//! `stream=` it is NATS core (at most once); with it, JetStream. The subjects are a source's
//! filters (`*` and `>` allowed; in JetStream one split each) or a sink's one subject. Options:
//!
//! * `stream=S`: the JetStream stream;
//! * source: `start=earliest|all|latest|new|seq:N|timestamp:MILLIS` (JetStream; default
//!   `earliest`), `stop=latest` (JetStream: bounded, ends at the last message of when it
//!   starts), `queue=GROUP` (core: every worker subscribes in the queue group);
//! * sink: `delivery=exactly-once|at-least-once` (JetStream; default `at-least-once`),
//!   `prefix=P` (the `Nats-Msg-Id` prefix), `dedup_window=DURATION` (the shortest duplicate
//!   window of the stream that exactly-once accepts, such as `2m` or `600s`; default `2m`).
//!
//! An unknown or misplaced option is a one-line error that names it.

use std::sync::Arc;
use std::time::Duration;

use spate_types::{SpateError, SpateResult};

use super::{
    Delivery, JetStreamDecoder, JetStreamMessage, JetStreamSink, JetStreamSource, NatsDecoder,
    NatsMessage, NatsSink, NatsSource, StartPosition,
};

/// A parsed `nats://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsUrl {
    /// `nats://HOST:PORT`.
    pub server: String,
    /// The subjects.
    pub subjects: Vec<String>,
    /// `stream=`.
    pub stream: Option<String>,
    /// `start=`.
    pub start: Option<StartPosition>,
    /// `stop=latest`.
    pub bounded: bool,
    /// `queue=`.
    pub queue: Option<String>,
    /// `delivery=`.
    pub delivery: Option<Delivery>,
    /// `prefix=`.
    pub prefix: Option<String>,
    /// `dedup_window=`.
    pub dedup_window: Option<Duration>,
}

fn parse_duration(s: &str) -> Option<Duration> {
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = n.parse().ok()?;
    Some(match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.checked_mul(60)?),
        "h" => Duration::from_secs(n.checked_mul(3600)?),
        _ => return None,
    })
}

impl std::str::FromStr for NatsUrl {
    type Err = SpateError;

    fn from_str(url: &str) -> SpateResult<Self> {
        let bad = |why: &str| SpateError::Config(format!("NATS URL `{url}`: {why}"));
        let rest = url
            .strip_prefix("nats://")
            .ok_or_else(|| bad("it must start with nats://"))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (host, subjects) = path
            .split_once('/')
            .ok_or_else(|| bad("no subject: use nats://HOST:PORT/SUBJECT"))?;
        if host.is_empty() {
            return Err(bad("no server address"));
        }
        let server = match host.rsplit_once(':') {
            Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => format!("nats://{host}"),
            Some(_) => return Err(bad(&format!("bad server address `{host}`"))),
            None => format!("nats://{host}:4222"),
        };
        let subjects: Vec<String> = subjects.split(',').map(str::to_owned).collect();
        if subjects.iter().any(|s| s.is_empty()) {
            return Err(bad(
                "an empty subject: use nats://HOST:PORT/SUBJECT[,SUBJECT...]",
            ));
        }
        if let Some(s) = subjects.iter().find(|s| {
            s.contains([' ', '\t']) || s.starts_with('.') || s.ends_with('.') || s.contains("..")
        }) {
            return Err(bad(&format!("bad subject `{s}`")));
        }
        let mut parsed = NatsUrl {
            server,
            subjects,
            stream: None,
            start: None,
            bounded: false,
            queue: None,
            delivery: None,
            prefix: None,
            dedup_window: None,
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| bad(&format!("option `{pair}` has no value")))?;
            if v.is_empty() {
                return Err(bad(&format!("option `{k}` has no value")));
            }
            match k {
                "stream" => parsed.stream = Some(v.to_owned()),
                "start" => {
                    parsed.start = Some(v.parse().map_err(|e: SpateError| {
                        let why = match e {
                            SpateError::Config(m) => m,
                            other => other.to_string(),
                        };
                        bad(&format!("start={v}: {why}"))
                    })?)
                }
                "stop" if v == "latest" => parsed.bounded = true,
                "stop" => return Err(bad(&format!("stop={v}: only stop=latest is known"))),
                "queue" => parsed.queue = Some(v.to_owned()),
                "delivery" => {
                    parsed.delivery = Some(v.parse().map_err(|_| {
                        bad(&format!("delivery={v}: use exactly-once or at-least-once"))
                    })?)
                }
                "prefix" => parsed.prefix = Some(v.to_owned()),
                "dedup_window" => {
                    parsed.dedup_window = Some(parse_duration(v).ok_or_else(|| {
                        bad(&format!(
                            "dedup_window={v}: use a duration such as 2m or 600s"
                        ))
                    })?)
                }
                _ => {
                    return Err(bad(&format!(
                        "unknown option `{k}` (known: stream, start, stop, queue, delivery, \
                         prefix, dedup_window)"
                    )))
                }
            }
        }
        let js = parsed.stream.is_some();
        let misplaced = |what: &str| bad(&format!("{what} needs stream= (JetStream)"));
        if !js {
            if parsed.start.is_some() {
                return Err(misplaced("start="));
            }
            if parsed.bounded {
                return Err(misplaced("stop="));
            }
            if parsed.delivery.is_some() {
                return Err(misplaced("delivery="));
            }
            if parsed.prefix.is_some() || parsed.dedup_window.is_some() {
                return Err(misplaced("prefix= and dedup_window="));
            }
        } else if parsed.queue.is_some() {
            return Err(bad("queue= is for NATS core (without stream=)"));
        }
        Ok(parsed)
    }
}

impl NatsUrl {
    /// Whether it names JetStream (`stream=`).
    pub fn is_jetstream(&self) -> bool {
        self.stream.is_some()
    }

    /// A source's options that a sink does not take, as an error.
    fn sink_checks(&self) -> SpateResult<&str> {
        let bad = |why: &str| SpateError::Config(format!("NATS sink: {why}"));
        if self.start.is_some() || self.bounded || self.queue.is_some() {
            return Err(bad("start=, stop= and queue= are source options"));
        }
        match self.subjects.as_slice() {
            [s] if !s.split('.').any(|t| t == "*" || t == ">") => Ok(s),
            [s] => Err(bad(&format!("subject `{s}` has a wildcard"))),
            _ => Err(bad("one subject only")),
        }
    }

    fn source_checks(&self) -> SpateResult<()> {
        if self.delivery.is_some() || self.prefix.is_some() || self.dedup_window.is_some() {
            return Err(SpateError::Config(
                "NATS source: delivery=, prefix= and dedup_window= are sink options".into(),
            ));
        }
        if !self.is_jetstream() && self.subjects.len() > 1 {
            return Err(SpateError::Config(
                "NATS core source: one subject only (or use stream= for JetStream splits)".into(),
            ));
        }
        Ok(())
    }

    /// The NATS core source this URL describes (no `stream=`), decoding payloads as JSON.
    pub fn core_source<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
    ) -> SpateResult<NatsSource<T>> {
        self.core_source_with_decoder(Arc::new(|m: &NatsMessage<'_>| {
            crate::files::decode_json_line(m.payload)
        }))
    }

    /// The NATS core source this URL describes, turning each message into a record with
    /// `decoder`.
    pub fn core_source_with_decoder<T>(
        &self,
        decoder: NatsDecoder<T>,
    ) -> SpateResult<NatsSource<T>> {
        self.source_checks()?;
        let s = NatsSource::with_decoder(self.server.clone(), self.subjects[0].clone(), decoder);
        Ok(match &self.queue {
            Some(q) => s.queue_group(q.clone()),
            None => s,
        })
    }

    /// The JetStream source this URL describes (`stream=`), decoding payloads as JSON.
    pub fn jetstream_source<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
    ) -> SpateResult<JetStreamSource<T>> {
        self.jetstream_source_with_decoder(Arc::new(|m: &JetStreamMessage<'_>| {
            crate::files::decode_json_line(m.payload)
        }))
    }

    /// The JetStream source this URL describes (`stream=`), turning each message into a
    /// record with `decoder`.
    pub fn jetstream_source_with_decoder<T>(
        &self,
        decoder: JetStreamDecoder<T>,
    ) -> SpateResult<JetStreamSource<T>> {
        self.source_checks()?;
        let stream = self
            .stream
            .as_deref()
            .ok_or_else(|| SpateError::Config("a JetStream source needs stream=".into()))?;
        let filters: Vec<&str> = self.subjects.iter().map(String::as_str).collect();
        let s = JetStreamSource::with_decoder(self.server.clone(), stream, &filters, decoder)
            .start(self.start.unwrap_or(StartPosition::Earliest));
        Ok(if self.bounded { s.bounded() } else { s })
    }

    /// The sink subject, checked (one subject, no wildcard, no source options).
    pub fn sink_subject(&self) -> SpateResult<&str> {
        self.sink_checks()
    }

    /// The NATS core sink of this URL with `encoder`.
    pub fn core_sink<T>(&self, encoder: super::NatsEncoder<T>) -> SpateResult<NatsSink<T>> {
        let subject = self.sink_checks()?;
        Ok(NatsSink::with_encoder(
            self.server.clone(),
            subject,
            encoder,
        ))
    }

    /// The JetStream sink of this URL with `encoder` (delivery at least once unless
    /// `delivery=exactly-once`).
    pub fn jetstream_sink<T>(
        &self,
        encoder: super::NatsEncoder<T>,
    ) -> SpateResult<JetStreamSink<T>> {
        let subject = self.sink_checks()?;
        let stream = self
            .stream
            .as_deref()
            .ok_or_else(|| SpateError::Config("a JetStream sink needs stream=".into()))?;
        let mut s = JetStreamSink::with_encoder(self.server.clone(), stream, subject, encoder)
            .delivery(self.delivery.unwrap_or(Delivery::AtLeastOnce));
        if let Some(p) = &self.prefix {
            s = s.prefix(p.clone());
        }
        if let Some(w) = self.dedup_window {
            s = s.min_duplicate_window(w);
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> SpateResult<NatsUrl> {
        s.parse()
    }

    #[test]
    fn parses_jetstream_and_core_urls() {
        let u =
            parse("nats://127.0.0.1:14222/nexmark.>?stream=S&start=earliest&stop=latest").unwrap();
        assert_eq!(u.server, "nats://127.0.0.1:14222");
        assert_eq!(u.subjects, vec!["nexmark.>"]);
        assert_eq!(u.stream.as_deref(), Some("S"));
        assert_eq!(u.start, Some(StartPosition::Earliest));
        assert!(u.bounded && u.is_jetstream());
        let u = parse("nats://h/a.0,a.1?stream=S&start=seq:5").unwrap();
        assert_eq!(u.server, "nats://h:4222");
        assert_eq!(u.subjects, vec!["a.0", "a.1"]);
        assert_eq!(u.start, Some(StartPosition::Sequence(5)));
        let u = parse("nats://h:1/out?stream=S&delivery=exactly-once&prefix=p&dedup_window=10m")
            .unwrap();
        assert_eq!(u.delivery, Some(Delivery::ExactlyOnce));
        assert_eq!(u.dedup_window, Some(Duration::from_secs(600)));
        assert_eq!(u.sink_subject().unwrap(), "out");
        let u = parse("nats://h:1/in.*?queue=g").unwrap();
        assert!(!u.is_jetstream());
        assert_eq!(u.queue.as_deref(), Some("g"));
        assert!(u.sink_subject().is_err());
        assert_eq!(
            parse("nats://h/x?stream=S&start=timestamp:7")
                .unwrap()
                .start,
            Some(StartPosition::Timestamp(7))
        );
        assert_eq!(
            parse("nats://h/x?stream=S&start=new").unwrap().start,
            Some(StartPosition::Latest)
        );
    }

    #[test]
    fn errors_are_one_line_and_name_the_problem() {
        let e = |s: &str| parse(s).unwrap_err().to_string();
        assert!(e("mqtt://h/t").contains("must start with nats://"));
        assert!(e("nats://h:4222").contains("no subject"));
        assert!(e("nats://h:4222/").contains("empty subject"));
        assert!(e("nats://h/a,,b").contains("empty subject"));
        assert!(e("nats:///t").contains("no server address"));
        assert!(e("nats://h:x/t").contains("bad server address `h:x`"));
        assert!(e("nats://h/a..b").contains("bad subject `a..b`"));
        assert!(e("nats://h/t?stream=S&start=soon").contains("start=soon: unknown JetStream start"));
        assert_eq!(
            e("nats://h/t?stream=S&start=soon")
                .matches("invalid configuration")
                .count(),
            1
        );
        assert!(e("nats://h/t?stream=S&stop=never").contains("stop=never"));
        assert!(e("nats://h/t?stream=S&delivery=twice").contains("delivery=twice"));
        assert!(e("nats://h/t?stream=S&dedup_window=5").contains("dedup_window=5"));
        assert!(e("nats://h/t?group=g").contains("unknown option `group`"));
        assert!(e("nats://h/t?stream").contains("option `stream` has no value"));
        assert!(e("nats://h/t?stream=").contains("option `stream` has no value"));
        assert!(e("nats://h/t?start=earliest").contains("start= needs stream="));
        assert!(e("nats://h/t?delivery=exactly-once").contains("delivery= needs stream="));
        assert!(e("nats://h/t?stream=S&queue=g").contains("queue= is for NATS core"));
        for s in [
            "nats://h/t?bogus=1",
            "nats://h:x/t",
            "nats://h/t?stream=S&start=x",
        ] {
            assert!(!e(s).contains('\n'));
        }
        let u = parse("nats://h/a,b?stream=S").unwrap();
        assert!(u
            .sink_subject()
            .unwrap_err()
            .to_string()
            .contains("one subject"));
        let u = parse("nats://h/a?stream=S&stop=latest").unwrap();
        assert!(u
            .sink_subject()
            .unwrap_err()
            .to_string()
            .contains("source options"));
        let u = parse("nats://h/a?stream=S&delivery=exactly-once").unwrap();
        assert!(u.jetstream_source::<u32>().is_err());
        assert!(parse("nats://h/a,b").unwrap().core_source::<u32>().is_err());
    }
}
