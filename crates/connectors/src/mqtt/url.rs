//! `mqtt://` URLs: how the command line names an MQTT source or sink.
//!
//! `mqtt://HOST[:PORT]/TOPIC?OPTIONS`, where TOPIC is the rest of the path (a source's topic
//! filter, with `+` and `#`; `%23` stands for `#` too, since a URL ends at a bare `#` in most
//! tools), and the options are
//!
//! * `client=ID`: the client id (a source's persistent session; default `spate-TOPIC`);
//! * `qos=0|1|2` (default 1);
//! * source only: `ack=checkpoint|receive` (default `checkpoint`);
//! * source only: `dedup=FIELD`: the payloads are JSON objects with a unique id in the
//!   top-level field FIELD (a string or a number), which [`MqttUrl::json_source_with_id`]
//!   emits beside each record, for the job to drop redeliveries with
//!   `DataStream::dedup_by` on it (exactly once with checkpoints; see the [module
//!   docs](super)).
//!
//! An unknown option is an error that names it.

use spate_types::{SpateError, SpateResult};

use super::{MqttSink, MqttSource};

/// A parsed `mqtt://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttUrl {
    /// `HOST:PORT` (port 1883 when the URL has none).
    pub address: String,
    /// The topic (a source's filter).
    pub topic: String,
    /// `client=`.
    pub client_id: Option<String>,
    /// `qos=`.
    pub qos: u8,
    /// `ack=receive`.
    pub ack_on_receive: bool,
    /// `dedup=FIELD`.
    pub dedup: Option<String>,
}

impl std::str::FromStr for MqttUrl {
    type Err = SpateError;

    fn from_str(url: &str) -> SpateResult<Self> {
        let bad = |why: &str| SpateError::Config(format!("MQTT URL `{url}`: {why}"));
        let rest = url
            .strip_prefix("mqtt://")
            .ok_or_else(|| bad("it must start with mqtt://"))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (host, topic) = path
            .split_once('/')
            .ok_or_else(|| bad("no topic: use mqtt://HOST:PORT/TOPIC"))?;
        if host.is_empty() {
            return Err(bad("no broker address"));
        }
        let address = match host.rsplit_once(':') {
            Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => host.to_owned(),
            Some(_) => return Err(bad(&format!("bad broker address `{host}`"))),
            None => format!("{host}:1883"),
        };
        let topic = topic.replace("%23", "#").replace("%2B", "+");
        if topic.is_empty() {
            return Err(bad("no topic: use mqtt://HOST:PORT/TOPIC"));
        }
        let mut parsed = MqttUrl {
            address,
            topic,
            client_id: None,
            qos: 1,
            ack_on_receive: false,
            dedup: None,
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| bad(&format!("option `{pair}` has no value")))?;
            match k {
                "client" if !v.is_empty() => parsed.client_id = Some(v.to_owned()),
                "client" => return Err(bad("client= needs an id")),
                "qos" => {
                    parsed.qos = match v {
                        "0" => 0,
                        "1" => 1,
                        "2" => 2,
                        _ => return Err(bad(&format!("qos={v}: use 0, 1 or 2"))),
                    }
                }
                "ack" => {
                    parsed.ack_on_receive = match v {
                        "checkpoint" => false,
                        "receive" => true,
                        _ => return Err(bad(&format!("ack={v}: use checkpoint or receive"))),
                    }
                }
                "dedup" if !v.is_empty() => parsed.dedup = Some(v.to_owned()),
                "dedup" => return Err(bad("dedup= needs the name of the payload's id field")),
                _ => {
                    return Err(bad(&format!(
                        "unknown option `{k}` (known: client, qos, ack, dedup)"
                    )))
                }
            }
        }
        Ok(parsed)
    }
}

impl MqttUrl {
    /// The client id: `client=`, or `spate-` and the topic with `/`, `+`, `#` as `_`.
    pub fn client_id(&self) -> String {
        self.client_id
            .clone()
            .unwrap_or_else(|| format!("spate-{}", self.topic.replace(['/', '+', '#'], "_")))
    }

    /// The source this URL describes, decoding payloads as JSON.
    pub fn json_source<T: serde::de::DeserializeOwned + Send + 'static>(&self) -> MqttSource<T> {
        self.configure_source(MqttSource::json(
            self.address.clone(),
            &[self.topic.as_str()],
            self.client_id(),
        ))
    }

    /// The source this URL describes, turning each message into a record with `decoder`.
    pub fn source_with_decoder<T>(&self, decoder: super::PayloadDecoder<T>) -> MqttSource<T> {
        self.configure_source(MqttSource::with_decoder(
            self.address.clone(),
            &[self.topic.as_str()],
            self.client_id(),
            decoder,
        ))
    }

    /// The source this URL describes, decoding payloads as JSON objects into `(id, T)`, where
    /// `id` is the top-level field that `dedup=` names (its JSON text when a number, the
    /// string itself when a string). A payload without the field, or with another kind of
    /// value there, is a bad record (the source's policy applies). Without `dedup=`, an error.
    pub fn json_source_with_id<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
    ) -> SpateResult<MqttSource<(String, T)>> {
        let field = self.dedup.clone().ok_or_else(|| {
            SpateError::Config(format!(
                "MQTT source on `{}`: no dedup= field to read ids from",
                self.topic
            ))
        })?;
        let decoder = std::sync::Arc::new(move |m: &super::MqttMessage<'_>| {
            let id = payload_id(m.payload, &field)?;
            let record: T = crate::files::decode_json_line(m.payload)?;
            Ok((id, record))
        });
        Ok(self.configure_source(MqttSource::with_decoder(
            self.address.clone(),
            &[self.topic.as_str()],
            self.client_id(),
            decoder,
        )))
    }

    /// The source this URL describes, emitting payloads as bytes.
    pub fn bytes_source(&self) -> MqttSource<Vec<u8>> {
        self.configure_source(MqttSource::bytes(
            self.address.clone(),
            &[self.topic.as_str()],
            self.client_id(),
        ))
    }

    fn configure_source<T>(&self, s: MqttSource<T>) -> MqttSource<T> {
        let s = s.qos(self.qos);
        if self.ack_on_receive {
            s.ack_on_receive()
        } else {
            s
        }
    }

    /// The sink this URL describes, publishing records as JSON (`ack=` is an error there).
    pub fn json_sink<T: serde::Serialize>(&self) -> SpateResult<MqttSink<T>> {
        if self.ack_on_receive {
            return Err(SpateError::Config(
                "MQTT sink: ack= is a source option".into(),
            ));
        }
        if self.topic.contains(['+', '#']) {
            return Err(SpateError::Config(format!(
                "MQTT sink: topic `{}` has a wildcard",
                self.topic
            )));
        }
        let mut s = MqttSink::json(self.address.clone(), self.topic.clone()).qos(self.qos);
        if let Some(id) = &self.client_id {
            s = s.client_id(id.clone());
        }
        Ok(s)
    }
}

/// The id in the top-level `field` of a JSON object: a string as it is, a number as its JSON
/// text (so `7` and `"7"` are different ids).
fn payload_id(payload: &[u8], field: &str) -> Result<String, String> {
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(payload)
        .map_err(|e| format!("not a JSON object with an id in `{field}`: {e}"))?;
    match object.get(field) {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(serde_json::Value::Number(n)) => Ok(n.to_string()),
        Some(other) => Err(format!(
            "the id field `{field}` holds {other}, not a string or a number"
        )),
        None => Err(format!("no id field `{field}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> SpateResult<MqttUrl> {
        s.parse()
    }

    #[test]
    fn parses_filters_and_options() {
        let u = parse("mqtt://127.0.0.1:18830/sensors/+/temp/#?client=w0&qos=1").unwrap();
        assert_eq!(u.address, "127.0.0.1:18830");
        assert_eq!(u.topic, "sensors/+/temp/#");
        assert_eq!(u.client_id(), "w0");
        assert_eq!(u.qos, 1);
        assert!(!u.ack_on_receive);
        let u = parse("mqtt://broker/a/%23?ack=receive&qos=0").unwrap();
        assert_eq!(u.address, "broker:1883");
        assert_eq!(u.topic, "a/#");
        assert_eq!(u.client_id(), "spate-a__");
        assert!(u.ack_on_receive);
        assert_eq!(u.qos, 0);
        assert_eq!(u.dedup, None);
        let u = parse("mqtt://broker/a?dedup=id").unwrap();
        assert_eq!(u.dedup.as_deref(), Some("id"));
    }

    #[test]
    fn ids_come_from_the_named_field() {
        assert_eq!(payload_id(br#"{"id":7,"x":1}"#, "id").unwrap(), "7");
        assert_eq!(payload_id(br#"{"x":1,"id":"a7"}"#, "id").unwrap(), "a7");
        assert!(payload_id(br#"{"x":1}"#, "id")
            .unwrap_err()
            .contains("no id field `id`"));
        assert!(payload_id(br#"{"id":[1]}"#, "id")
            .unwrap_err()
            .contains("not a string"));
        assert!(payload_id(b"[1]", "id")
            .unwrap_err()
            .contains("not a JSON object"));
        assert!(parse("mqtt://h/t")
            .unwrap()
            .json_source_with_id::<u32>()
            .is_err());
    }

    #[test]
    fn errors_are_one_line_and_name_the_option() {
        let e = |s: &str| parse(s).unwrap_err().to_string();
        assert!(e("kafka://h/t").contains("must start with mqtt://"));
        assert!(e("mqtt://h:1883").contains("no topic"));
        assert!(e("mqtt://h:1883/").contains("no topic"));
        assert!(e("mqtt:///t").contains("no broker address"));
        assert!(e("mqtt://h:x/t").contains("bad broker address `h:x`"));
        assert!(e("mqtt://h/t?qos=3").contains("qos=3"));
        assert!(e("mqtt://h/t?ack=never").contains("ack=never"));
        assert!(e("mqtt://h/t?group=g").contains("unknown option `group`"));
        assert!(e("mqtt://h/t?qos").contains("option `qos` has no value"));
        assert!(e("mqtt://h/t?dedup=").contains("dedup= needs"));
        for s in ["mqtt://h/t?bogus=1", "mqtt://h:x/t"] {
            assert!(!e(s).contains('\n'));
        }
        assert!(parse("mqtt://h/a/+").unwrap().json_sink::<u32>().is_err());
    }
}
