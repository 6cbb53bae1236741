//! Differential tests of [`TopicTrie`] against the real brokers: filters are subscribed on
//! Mosquitto (through rumqttc) and nats-server (through async-nats), topics are published,
//! and the set of `(subscription, topic)` deliveries must equal the trie's matches, each
//! delivered exactly once.
//!
//! The brokers come from `scripts/brokers start mqtt nats`; `scripts/brokers env` prints
//! `SPATE_MQTT` (`HOST:PORT`) and `SPATE_NATS` (a `nats://` URL). A test fails, never skips,
//! when they are unset.
//!
//! Not flaky by construction: every subscription is acknowledged (MQTT SUBACK, NATS flush)
//! before the first publish; MQTT publishes are QoS 1 and their PUBACKs awaited; after the
//! topics, a sentinel message goes to every subscriber over the same connection, so that its
//! arrival means everything published before it has arrived too (both brokers keep the order
//! of one publisher's messages to one subscriber); then a quiet period catches duplicates.
//! The brokers are shared with other tests, so every level of a generated topic carries a
//! tag unique to the run, and only messages whose payload carries the tag are counted
//! (subscribers of `#` or `>` see everyone's traffic).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS, SubscribeFilter, SubscribeReasonCode};
use spate_pubsub::{validate_topic, Dialect, TopicFilter, TopicTrie};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// How long to wait for acknowledgements and the sentinels before failing.
const PATIENCE: Duration = Duration::from_secs(20);
/// How long no tagged message may arrive, after the sentinels, before the deliveries count
/// as complete.
const QUIET: Duration = Duration::from_millis(300);

fn mqtt_broker() -> (String, u16) {
    let addr = std::env::var("SPATE_MQTT").expect(
        "SPATE_MQTT is not set: start the brokers with `scripts/brokers start mqtt nats` and \
         export what `scripts/brokers env` prints (SPATE_MQTT=127.0.0.1:18830)",
    );
    let (host, port) = addr
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("SPATE_MQTT={addr} is not HOST:PORT"));
    let port = port
        .parse()
        .unwrap_or_else(|_| panic!("SPATE_MQTT={addr}: the port is not a number"));
    (host.to_owned(), port)
}

fn nats_server() -> String {
    std::env::var("SPATE_NATS").expect(
        "SPATE_NATS is not set: start the brokers with `scripts/brokers start mqtt nats` and \
         export what `scripts/brokers env` prints (SPATE_NATS=nats://127.0.0.1:14222)",
    )
}

/// A tag unique to this run and test, for topics and payloads.
fn run_tag(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let h = splitmix(&mut (nanos as u64 ^ u64::from(std::process::id()) << 32));
    format!("{test}{:08x}", h as u32)
}

/// SplitMix64: a small deterministic generator, so that a failing seed can be replayed.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        (splitmix(&mut self.0) % n as u64) as usize
    }
}

/// The seed: `SPATE_DIFF_SEED` to replay one, else from the clock (printed either way).
fn seed() -> u64 {
    let seed = match std::env::var("SPATE_DIFF_SEED") {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("SPATE_DIFF_SEED={s} is not a u64")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    };
    eprintln!("seed {seed} (replay with SPATE_DIFF_SEED={seed})");
    seed
}

/// The words of generated levels: few, so that filters often match; an empty MQTT level and
/// a `$` word (reserved in MQTT at the first level, ordinary in NATS) among them.
fn words(dialect: Dialect, tag: &str) -> Vec<String> {
    let mut w = vec![format!("a{tag}"), format!("b{tag}"), format!("$s{tag}")];
    if dialect == Dialect::Mqtt {
        w.push(String::new());
    }
    w
}

/// A random valid filter: up to three levels of words or single-level wildcards, and a
/// multi-level wildcard at the end half of the time.
fn random_filter(dialect: Dialect, words: &[String], rng: &mut Rng) -> String {
    let sep = dialect.separator().to_string();
    let mut levels: Vec<String> = (0..rng.below(4))
        .map(|_| {
            if rng.below(4) == 0 {
                dialect.single_wildcard().to_string()
            } else {
                words[rng.below(words.len())].clone()
            }
        })
        .collect();
    // A filter of one empty level would be the empty string, which is invalid.
    if levels.is_empty() || levels == [""] || rng.below(2) == 0 {
        levels.push(dialect.multi_wildcard().to_string());
    }
    let text = levels.join(&sep);
    TopicFilter::parse(dialect, &text).unwrap_or_else(|e| panic!("generated `{text}`: {e}"));
    text
}

/// A random valid topic of one to four levels (not the empty string, which a topic of one
/// empty MQTT level would be).
fn random_topic(dialect: Dialect, words: &[String], rng: &mut Rng) -> String {
    let sep = dialect.separator().to_string();
    loop {
        let n = 1 + rng.below(4);
        let text = (0..n)
            .map(|_| words[rng.below(words.len())].clone())
            .collect::<Vec<_>>()
            .join(&sep);
        if text.is_empty() {
            continue;
        }
        validate_topic(dialect, &text).unwrap_or_else(|e| panic!("generated `{text}`: {e}"));
        return text;
    }
}

/// Distinct random filters and topics.
fn random_case(dialect: Dialect, tag: &str, seed: u64) -> (Vec<String>, Vec<String>) {
    let words = words(dialect, tag);
    let mut rng = Rng(seed);
    let mut filters = BTreeSet::new();
    for _ in 0..200 {
        filters.insert(random_filter(dialect, &words, &mut rng));
        if filters.len() == 40 {
            break;
        }
    }
    let mut topics = BTreeSet::new();
    for _ in 0..1000 {
        topics.insert(random_topic(dialect, &words, &mut rng));
        if topics.len() == 150 {
            break;
        }
    }
    (filters.into_iter().collect(), topics.into_iter().collect())
}

/// The oracle: `(subscription index, topic)` for every match the trie reports.
fn trie_matches(
    dialect: Dialect,
    filters: &[String],
    topics: &[String],
) -> BTreeSet<(usize, String)> {
    let mut trie = TopicTrie::new(dialect);
    for (i, f) in filters.iter().enumerate() {
        trie.insert(i, TopicFilter::parse(dialect, f).unwrap())
            .unwrap();
    }
    let mut out = BTreeSet::new();
    for t in topics {
        for i in trie.matches(t) {
            out.insert((i, t.clone()));
        }
    }
    out
}

/// What a subscriber task reports.
enum Seen {
    /// A message on `topic` with `payload`, for subscription `sub`.
    Message {
        sub: usize,
        topic: String,
        payload: Vec<u8>,
    },
    /// Subscription `sub` got the sentinel.
    Sentinel(usize),
}

/// Counts the tagged deliveries until every one of `subscribers` reported its sentinel and
/// then nothing arrived for [`QUIET`].
fn drain(
    rt: &tokio::runtime::Runtime,
    rx: &mut UnboundedReceiver<Seen>,
    subscribers: usize,
    tag: &str,
) -> BTreeMap<(usize, String), usize> {
    let mut counts = BTreeMap::new();
    let mut sentinels = BTreeSet::new();
    let deadline = Instant::now() + PATIENCE;
    let tag = tag.as_bytes();
    rt.block_on(async {
        loop {
            let wait = if sentinels.len() == subscribers {
                QUIET
            } else {
                deadline.saturating_duration_since(Instant::now())
            };
            match tokio::time::timeout(wait, rx.recv()).await {
                Ok(Some(Seen::Message {
                    sub,
                    topic,
                    payload,
                })) => {
                    if payload.starts_with(tag) {
                        *counts.entry((sub, topic)).or_insert(0) += 1;
                    }
                }
                Ok(Some(Seen::Sentinel(sub))) => {
                    sentinels.insert(sub);
                }
                Ok(None) => panic!("every subscriber task ended before the sentinels"),
                Err(_) if sentinels.len() == subscribers => return,
                Err(_) => panic!(
                    "only {} of {subscribers} subscribers got the sentinel within {PATIENCE:?}",
                    sentinels.len()
                ),
            }
        }
    });
    counts
}

/// Compares the deliveries with the trie and explains the difference.
fn assert_same(
    broker: &str,
    filters: &[String],
    expected: &BTreeSet<(usize, String)>,
    delivered: &BTreeMap<(usize, String), usize>,
) {
    let got: BTreeSet<(usize, String)> = delivered.keys().cloned().collect();
    let show = |pairs: Vec<&(usize, String)>| {
        pairs
            .iter()
            .take(20)
            .map(|(i, t)| format!("  `{}` ~ `{t}`", filters[*i]))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let missing: Vec<_> = expected.difference(&got).collect();
    let extra: Vec<_> = got.difference(expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{broker} and TopicTrie disagree:\nthe trie matches, {broker} did not deliver ({}):\n{}\n\
         {broker} delivered, the trie does not match ({}):\n{}",
        missing.len(),
        show(missing.clone()),
        extra.len(),
        show(extra.clone()),
    );
    let twice: Vec<_> = delivered.iter().filter(|(_, &n)| n != 1).collect();
    assert!(
        twice.is_empty(),
        "{broker} delivered some messages more than once: {twice:?}"
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Subscribes every filter on Mosquitto (one client each, as MQTT delivers a message once
/// per client however many of its subscriptions match), publishes every topic, and returns
/// how often each `(filter index, topic)` was delivered.
fn mqtt_deliveries(
    tag: &str,
    filters: &[String],
    topics: &[String],
) -> BTreeMap<(usize, String), usize> {
    let (host, port) = mqtt_broker();
    let rt = runtime();
    let sentinel = format!("end{tag}");
    let (tx, mut rx) = unbounded_channel::<Seen>();
    let (ack_tx, mut ack_rx) = unbounded_channel::<Result<usize, String>>();
    let mut clients = Vec::new();
    let connect = |id: String| {
        let mut options = MqttOptions::new(id, host.clone(), port);
        options
            .set_clean_session(true)
            .set_keep_alive(Duration::from_secs(30))
            .set_inflight(1000);
        AsyncClient::new(options, 1024)
    };
    rt.block_on(async {
        for (i, filter) in filters.iter().enumerate() {
            let (client, mut eventloop) = connect(format!("{tag}-s{i}"));
            let subs = vec![
                SubscribeFilter::new(filter.clone(), QoS::AtLeastOnce),
                SubscribeFilter::new(sentinel.clone(), QoS::AtLeastOnce),
            ];
            client.subscribe_many(subs).await.unwrap();
            let (tx, ack_tx, sentinel) = (tx.clone(), ack_tx.clone(), sentinel.clone());
            tokio::spawn(async move {
                loop {
                    match eventloop.poll().await {
                        Ok(Event::Incoming(Packet::SubAck(ack))) => {
                            let ok = ack
                                .return_codes
                                .iter()
                                .all(|c| matches!(c, SubscribeReasonCode::Success(_)));
                            let _ = ack_tx.send(if ok {
                                Ok(i)
                            } else {
                                Err(format!("subscription {i} refused: {:?}", ack.return_codes))
                            });
                        }
                        Ok(Event::Incoming(Packet::Publish(p))) => {
                            let seen = if p.topic == sentinel {
                                Seen::Sentinel(i)
                            } else {
                                Seen::Message {
                                    sub: i,
                                    topic: p.topic,
                                    payload: p.payload.to_vec(),
                                }
                            };
                            if tx.send(seen).is_err() {
                                return;
                            }
                        }
                        Ok(_) => {}
                        Err(e) => {
                            let _ = ack_tx.send(Err(format!("subscriber {i}: {e}")));
                            return;
                        }
                    }
                }
            });
            clients.push(client);
        }
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut acked = BTreeSet::new();
        while acked.len() < filters.len() {
            match tokio::time::timeout_at(deadline, ack_rx.recv()).await {
                Ok(Some(Ok(i))) => {
                    acked.insert(i);
                }
                Ok(Some(Err(e))) => panic!("Mosquitto: {e}"),
                Ok(None) | Err(_) => panic!(
                    "Mosquitto acknowledged {} of {} subscriptions within {PATIENCE:?}",
                    acked.len(),
                    filters.len()
                ),
            }
        }

        // The publisher: QoS 1, every PUBACK awaited before the sentinel.
        let (publisher, mut eventloop) = connect(format!("{tag}-pub"));
        let (puback_tx, mut puback_rx) = unbounded_channel::<Result<(), String>>();
        tokio::spawn(async move {
            loop {
                match eventloop.poll().await {
                    Ok(Event::Incoming(Packet::PubAck(_))) => {
                        if puback_tx.send(Ok(())).is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let _ = puback_tx.send(Err(format!("publisher: {e}")));
                        return;
                    }
                }
            }
        });
        for (k, topic) in topics.iter().enumerate() {
            let payload = format!("{tag}:{k}");
            publisher
                .publish(topic.clone(), QoS::AtLeastOnce, false, payload)
                .await
                .unwrap();
        }
        for n in 0..topics.len() {
            match tokio::time::timeout_at(deadline, puback_rx.recv()).await {
                Ok(Some(Ok(()))) => {}
                Ok(Some(Err(e))) => panic!("Mosquitto: {e}"),
                Ok(None) | Err(_) => panic!(
                    "Mosquitto acknowledged {n} of {} publishes within {PATIENCE:?}",
                    topics.len()
                ),
            }
        }
        publisher
            .publish(sentinel.clone(), QoS::AtLeastOnce, false, tag.to_owned())
            .await
            .unwrap();
        clients.push(publisher);
    });
    let counts = drain(&rt, &mut rx, filters.len(), tag);
    rt.block_on(async {
        for c in &clients {
            let _ = c.disconnect().await;
        }
    });
    counts
}

/// Subscribes every filter on nats-server (one connection, one subscription each), publishes
/// every topic from another connection, and returns how often each `(filter index, topic)`
/// was delivered.
fn nats_deliveries(
    tag: &str,
    filters: &[String],
    topics: &[String],
) -> BTreeMap<(usize, String), usize> {
    let url = nats_server();
    let rt = runtime();
    let sentinel = format!("end{tag}");
    let (tx, mut rx) = unbounded_channel::<Seen>();
    let (subscriber, publisher) = rt.block_on(async {
        let connect = || async {
            async_nats::connect(url.as_str())
                .await
                .unwrap_or_else(|e| panic!("nats-server at SPATE_NATS={url}: {e}"))
        };
        let subscriber = connect().await;
        let forward = |i: usize, mut sub: async_nats::Subscriber, tx: UnboundedSender<Seen>| {
            let sentinel = sentinel.clone();
            tokio::spawn(async move {
                while let Some(m) = sub.next().await {
                    let seen = if m.subject.as_str() == sentinel {
                        // `>` and `*` see the sentinel too; only its own subscription counts.
                        if i != usize::MAX {
                            continue;
                        }
                        Seen::Sentinel(0)
                    } else {
                        Seen::Message {
                            sub: i,
                            topic: m.subject.to_string(),
                            payload: m.payload.to_vec(),
                        }
                    };
                    if tx.send(seen).is_err() {
                        return;
                    }
                }
            });
        };
        for (i, filter) in filters.iter().enumerate() {
            let sub = subscriber
                .subscribe(filter.clone())
                .await
                .unwrap_or_else(|e| panic!("nats-server refused `{filter}`: {e}"));
            forward(i, sub, tx.clone());
        }
        // Subscribed last, so that the sentinel comes after every other message.
        let sub = subscriber.subscribe(sentinel.clone()).await.unwrap();
        forward(usize::MAX, sub, tx.clone());
        // A PING/PONG round trip: the server has processed every SUB before it.
        subscriber.flush().await.unwrap();

        let publisher = connect().await;
        for (k, topic) in topics.iter().enumerate() {
            publisher
                .publish(topic.clone(), format!("{tag}:{k}").into())
                .await
                .unwrap();
        }
        publisher
            .publish(sentinel.clone(), tag.to_owned().into())
            .await
            .unwrap();
        publisher.flush().await.unwrap();
        (subscriber, publisher)
    });
    let counts = drain(&rt, &mut rx, 1, tag);
    drop((subscriber, publisher));
    counts
}

/// Hand-picked cases: `(filter, topic, matches)` with `{t}` replaced by the run's tag. Each
/// row is checked against the trie, then the whole table against the broker.
fn table(
    tag: &str,
    rows: &[(&str, &str, bool)],
) -> (Vec<String>, Vec<String>, BTreeSet<(usize, String)>) {
    let filters: Vec<String> = rows
        .iter()
        .map(|r| r.0.replace("{t}", tag))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let topics: Vec<String> = rows
        .iter()
        .map(|r| r.1.replace("{t}", tag))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let stated = rows
        .iter()
        .filter(|r| r.2)
        .map(|(f, t, _)| {
            let f = f.replace("{t}", tag);
            let i = filters.iter().position(|x| *x == f).unwrap();
            (i, t.replace("{t}", tag))
        })
        .collect();
    (filters, topics, stated)
}

fn check_table(dialect: Dialect, name: &str, rows: &[(&str, &str, bool)]) {
    let tag = run_tag(name);
    let (filters, topics, stated) = table(&tag, rows);
    let trie = trie_matches(dialect, &filters, &topics);
    // The trie agrees with every row (a row stated `false` must not be matched).
    for (f, t, m) in rows {
        let f = f.replace("{t}", &tag);
        let t = t.replace("{t}", &tag);
        let i = filters.iter().position(|x| *x == f).unwrap();
        assert_eq!(
            trie.contains(&(i, t.clone())),
            *m,
            "TopicTrie: `{f}` ~ `{t}` should be {m}"
        );
    }
    assert!(stated.is_subset(&trie));
    let (broker, delivered) = match dialect {
        Dialect::Mqtt => ("Mosquitto", mqtt_deliveries(&tag, &filters, &topics)),
        Dialect::Nats => ("nats-server", nats_deliveries(&tag, &filters, &topics)),
    };
    assert_same(broker, &filters, &trie, &delivered);
}

/// How many random cases each broker sees (each a new tag, seed and set of subscribers).
const ROUNDS: u64 = 5;

fn check_random(dialect: Dialect, name: &str) {
    let seed = seed();
    let (mut pairs, mut matched) = (0, 0);
    for round in 0..ROUNDS {
        let tag = run_tag(name);
        let seed = seed.wrapping_add(round);
        let (filters, topics) = random_case(dialect, &tag, seed);
        let expected = trie_matches(dialect, &filters, &topics);
        let (broker, delivered) = match dialect {
            Dialect::Mqtt => ("Mosquitto", mqtt_deliveries(&tag, &filters, &topics)),
            Dialect::Nats => ("nats-server", nats_deliveries(&tag, &filters, &topics)),
        };
        eprintln!(
            "{broker}, seed {seed}: {} filters x {} topics, {} deliveries, as the trie says",
            filters.len(),
            topics.len(),
            expected.len()
        );
        assert_same(broker, &filters, &expected, &delivered);
        pairs += filters.len() * topics.len();
        matched += expected.len();
    }
    // The cases were not degenerate: matches and non-matches both abounded.
    assert!(
        matched * 50 > pairs && matched * 2 < pairs,
        "seed {seed}: {matched} matches of {pairs} pairs is a poor test"
    );
}

#[test]
fn mosquitto_delivers_what_the_trie_matches_on_random_filters() {
    check_random(Dialect::Mqtt, "dm");
}

#[test]
fn nats_server_delivers_what_the_trie_matches_on_random_filters() {
    check_random(Dialect::Nats, "dn");
}

#[test]
fn mosquitto_agrees_on_the_edge_cases() {
    check_table(
        Dialect::Mqtt,
        "em",
        &[
            // `+` is exactly one level, which may be empty.
            ("sport{t}/+", "sport{t}/", true),
            ("sport{t}/+", "sport{t}", false),
            ("sport{t}/+", "sport{t}/x", true),
            ("sport{t}/+", "sport{t}/x/y", false),
            // `#` matches the parent level, and any depth below it.
            ("sport{t}/#", "sport{t}", true),
            ("sport{t}/#", "sport{t}/", true),
            ("sport{t}/#", "sport{t}/x/y", true),
            ("sport{t}/#", "sportx{t}", false),
            ("sport{t}/+/#", "sport{t}", false),
            ("sport{t}/+/#", "sport{t}/x", true),
            // Empty levels are levels: `/x` has two.
            ("+/x{t}", "/x{t}", true),
            ("/+", "/x{t}", true),
            ("+/+", "/x{t}", true),
            ("+", "/x{t}", false),
            ("sport{t}//+", "sport{t}//x", true),
            ("sport{t}/+/x", "sport{t}//x", true),
            // `$` topics are not matched by a filter that starts with a wildcard...
            ("#", "$s{t}", false),
            ("#", "$s{t}/x", false),
            ("+", "$s{t}", false),
            ("+/x", "$s{t}/x", false),
            ("+/#", "$s{t}/x", false),
            // ...but by one that names their first level.
            ("$s{t}/#", "$s{t}/x", true),
            ("$s{t}/#", "$s{t}", true),
            ("$s{t}/+", "$s{t}/x", true),
            // and a `$` below the first level is ordinary.
            ("#", "x{t}/$s", true),
            ("+/+", "x{t}/$s", true),
            // Case-sensitive.
            ("Sport{t}/#", "sport{t}", false),
        ],
    );
}

#[test]
fn nats_server_agrees_on_the_edge_cases() {
    check_table(
        Dialect::Nats,
        "en",
        &[
            // `*` is exactly one token.
            ("foo{t}.*", "foo{t}.x", true),
            ("foo{t}.*", "foo{t}", false),
            ("foo{t}.*", "foo{t}.x.y", false),
            ("*.x{t}", "foo.x{t}", true),
            // `>` needs at least one token: `foo.>` does not match `foo`.
            ("foo{t}.>", "foo{t}", false),
            ("foo{t}.>", "foo{t}.x", true),
            ("foo{t}.>", "foo{t}.x.y", true),
            ("foo{t}.*.>", "foo{t}.x", false),
            ("foo{t}.*.>", "foo{t}.x.y", true),
            ("*", "foo{t}", true),
            ("*", "foo{t}.x", false),
            // `$` is ordinary in NATS.
            (">", "$s{t}", true),
            ("*.x", "$s{t}.x", true),
            ("$s{t}.>", "$s{t}.x", true),
            // Case-sensitive.
            ("Foo{t}.>", "foo{t}.x", false),
        ],
    );
}
