//! `kafka://` URLs: how the command line names a Kafka source or sink.
//!
//! `kafka://HOST:PORT[,HOST:PORT...]/TOPIC[,TOPIC...]?OPTIONS`, with the options
//!
//! * source: `group=ID`, `start=earliest|latest|committed|committed-latest|timestamp:MS`,
//!   `stop=latest` (bounded), `discovery=DURATION` (such as `10s`);
//! * sink: `delivery=none|at-least-once|exactly-once`, `prefix=ID` (the transactional ids'
//!   prefix; default `spate-TOPIC`);
//! * both: `property.NAME=VALUE`, a librdkafka property (such as
//!   `property.transaction.timeout.ms=60000`).
//!
//! An unknown option is an error that names it.

use std::time::Duration;

use spate_types::{SpateError, SpateResult};

use super::{Delivery, KafkaSink, KafkaSource, StartOffsets};

/// A parsed `kafka://` URL.
#[derive(Debug, Clone, PartialEq)]
pub struct KafkaUrl {
    /// The bootstrap servers, comma-separated.
    pub bootstrap: String,
    /// The topics (a sink takes exactly one).
    pub topics: Vec<String>,
    /// `group=`.
    pub group: Option<String>,
    /// `start=`.
    pub start: Option<StartOffsets>,
    /// `stop=latest`.
    pub bounded: bool,
    /// `discovery=`.
    pub discovery: Option<Duration>,
    /// `delivery=`.
    pub delivery: Option<Delivery>,
    /// `prefix=`.
    pub prefix: Option<String>,
    /// `property.NAME=VALUE`.
    pub properties: Vec<(String, String)>,
}

impl std::str::FromStr for KafkaUrl {
    type Err = SpateError;

    fn from_str(url: &str) -> SpateResult<Self> {
        let bad = |why: &str| SpateError::Config(format!("Kafka URL `{url}`: {why}"));
        let rest = url
            .strip_prefix("kafka://")
            .ok_or_else(|| bad("it must start with kafka://"))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (bootstrap, topics) = path
            .split_once('/')
            .ok_or_else(|| bad("no topic: use kafka://HOST:PORT/TOPIC"))?;
        if bootstrap.is_empty() {
            return Err(bad("no broker address"));
        }
        let topics: Vec<String> = topics
            .split(',')
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect();
        if topics.is_empty() {
            return Err(bad("no topic: use kafka://HOST:PORT/TOPIC"));
        }
        let mut parsed = KafkaUrl {
            bootstrap: bootstrap.to_owned(),
            topics,
            group: None,
            start: None,
            bounded: false,
            discovery: None,
            delivery: None,
            prefix: None,
            properties: Vec::new(),
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| bad(&format!("option `{pair}` has no value")))?;
            match k {
                "group" => parsed.group = Some(v.to_owned()),
                "start" => parsed.start = Some(v.parse()?),
                "stop" if v == "latest" => parsed.bounded = true,
                "stop" => return Err(bad(&format!("stop={v}: only stop=latest is supported"))),
                "discovery" => {
                    parsed.discovery = Some(parse_duration(v).ok_or_else(|| {
                        bad(&format!(
                            "discovery={v} is not a duration such as 10s or 500ms"
                        ))
                    })?)
                }
                "delivery" => parsed.delivery = Some(v.parse()?),
                "prefix" => parsed.prefix = Some(v.to_owned()),
                _ => match k.strip_prefix("property.") {
                    Some(name) if !name.is_empty() => {
                        parsed.properties.push((name.to_owned(), v.to_owned()))
                    }
                    _ => {
                        return Err(bad(&format!(
                            "unknown option `{k}` (known: group, start, stop, discovery, \
                             delivery, prefix, property.NAME)"
                        )))
                    }
                },
            }
        }
        Ok(parsed)
    }
}

fn parse_duration(s: &str) -> Option<Duration> {
    let (n, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, "ms"), |i| s.split_at(i));
    let n: u64 = n.parse().ok()?;
    Some(match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" | "min" => Duration::from_secs(n * 60),
        _ => return None,
    })
}

impl KafkaUrl {
    /// Applies the source options to `source`.
    pub fn source<T>(&self, mut source: KafkaSource<T>) -> KafkaSource<T> {
        if let Some(g) = &self.group {
            source = source.group(g.clone());
        }
        if let Some(s) = &self.start {
            source = source.start(s.clone());
        }
        if self.bounded {
            source = source.bounded();
        }
        if let Some(d) = self.discovery {
            source = source.discovery_interval(d);
        }
        for (k, v) in &self.properties {
            source = source.property(k.clone(), v.clone());
        }
        source
    }

    /// The one topic of a sink URL.
    pub fn sink_topic(&self) -> SpateResult<&str> {
        match self.topics.as_slice() {
            [t] => Ok(t),
            _ => Err(SpateError::Config(format!(
                "a Kafka sink writes one topic, not {}",
                self.topics.join(",")
            ))),
        }
    }

    /// Applies the sink options to `sink`.
    pub fn sink<T>(&self, mut sink: KafkaSink<T>) -> KafkaSink<T> {
        let delivery = match (&self.delivery, &self.prefix) {
            (Some(Delivery::ExactlyOnce { .. }), Some(p)) => {
                Delivery::ExactlyOnce { prefix: p.clone() }
            }
            (Some(Delivery::ExactlyOnce { .. }), None) => Delivery::ExactlyOnce {
                prefix: format!("spate-{}", self.topics.join("-")),
            },
            (Some(d), _) => d.clone(),
            (None, _) => Delivery::AtLeastOnce,
        };
        sink = sink.delivery(delivery);
        for (k, v) in &self.properties {
            sink = sink.property(k.clone(), v.clone());
        }
        sink
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_source_url() {
        let u: KafkaUrl = "kafka://127.0.0.1:9092,h2:9093/bids,asks?group=g&start=latest&stop=latest&discovery=2s&property.fetch.min.bytes=1"
            .parse()
            .unwrap();
        assert_eq!(u.bootstrap, "127.0.0.1:9092,h2:9093");
        assert_eq!(u.topics, vec!["bids", "asks"]);
        assert_eq!(u.group.as_deref(), Some("g"));
        assert_eq!(u.start, Some(StartOffsets::Latest));
        assert!(u.bounded);
        assert_eq!(u.discovery, Some(Duration::from_secs(2)));
        assert_eq!(u.properties, vec![("fetch.min.bytes".into(), "1".into())]);
    }

    #[test]
    fn bad_urls_name_their_problem() {
        for (url, says) in [
            ("http://x/t", "kafka://"),
            ("kafka://x", "no topic"),
            ("kafka://x/t?colour=red", "colour"),
            ("kafka://x/t?start=soon", "soon"),
            ("kafka://x/t?stop=never", "stop=never"),
            ("kafka://x/t?delivery=twice", "twice"),
        ] {
            let e = url.parse::<KafkaUrl>().unwrap_err().to_string();
            assert!(e.contains(says), "{url}: {e}");
        }
    }
}
