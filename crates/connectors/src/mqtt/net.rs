//! The event-loop thread shared by the source and the sink.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{SendTimeoutError, Sender};
use rumqttc::{AsyncClient, Event, EventLoop, MqttOptions, Outgoing, Packet, Publish};
use spate_types::{SpateError, SpateResult};

/// What the event-loop thread shares with the worker.
#[derive(Default)]
pub(crate) struct Shared {
    /// Set by the worker when it goes away.
    pub stop: AtomicBool,
    /// PUBACKs (QoS 1) and PUBCOMPs (QoS 2) received (the sink's outstanding publishes are `published - acked`).
    pub acked: AtomicU64,
    /// CONNACKs received.
    pub connected: AtomicU64,
    /// SUBACKs received.
    pub subscribed: AtomicU64,
    /// The last connection error, for messages.
    pub last_error: Mutex<Option<String>>,
}

impl Shared {
    /// The last connection error, or `none`.
    pub fn last_error(&self) -> String {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_else(|| "none".into())
    }

    /// Ends the event loop after what was queued (acks) is sent: with a DISCONNECT, or at once
    /// when the request queue is full.
    pub fn close(&self, client: &AsyncClient) {
        if client.try_disconnect().is_err() {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

/// Parses `HOST:PORT` (port 1883 by default).
pub(crate) fn host_port(address: &str) -> SpateResult<(String, u16)> {
    match address.rsplit_once(':') {
        Some((h, p)) => p
            .parse::<u16>()
            .map(|p| (h.to_owned(), p))
            .map_err(|_| SpateError::Config(format!("MQTT address `{address}`: bad port `{p}`"))),
        None => Ok((address.to_owned(), 1883)),
    }
}

/// Starts a client and its event loop on a thread of its own; publishes received go to
/// `incoming` (when given).
pub(crate) fn start(
    options: MqttOptions,
    incoming: Option<Sender<Publish>>,
    name: &str,
) -> SpateResult<(AsyncClient, Arc<Shared>)> {
    let (client, eventloop) = AsyncClient::new(options, 65_536);
    let shared = Arc::new(Shared::default());
    let s = Arc::clone(&shared);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| SpateError::connector(name.to_owned(), e))?;
    std::thread::Builder::new()
        .name(format!("spate-mqtt {name}"))
        .spawn(move || rt.block_on(run(eventloop, incoming, s)))
        .map_err(|e| SpateError::connector(name.to_owned(), e))?;
    Ok((client, shared))
}

async fn run(mut eventloop: EventLoop, incoming: Option<Sender<Publish>>, shared: Arc<Shared>) {
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        match eventloop.poll().await {
            Ok(Event::Incoming(Packet::Publish(p))) => {
                let Some(tx) = incoming.as_ref() else {
                    continue;
                };
                let mut p = p;
                loop {
                    match tx.send_timeout(p, Duration::from_millis(100)) {
                        Ok(()) => break,
                        Err(SendTimeoutError::Timeout(back)) => {
                            if shared.stop.load(Ordering::Relaxed) {
                                return;
                            }
                            p = back;
                        }
                        Err(SendTimeoutError::Disconnected(_)) => return,
                    }
                }
            }
            Ok(Event::Incoming(Packet::PubAck(_) | Packet::PubComp(_))) => {
                shared.acked.fetch_add(1, Ordering::Release);
            }
            Ok(Event::Incoming(Packet::ConnAck(_))) => {
                shared.connected.fetch_add(1, Ordering::Release);
            }
            Ok(Event::Incoming(Packet::SubAck(_))) => {
                shared.subscribed.fetch_add(1, Ordering::Release);
            }
            Ok(Event::Outgoing(Outgoing::Disconnect)) => return,
            Ok(_) => {}
            Err(e) => {
                *shared.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                if shared.stop.load(Ordering::Relaxed) {
                    return;
                }
                // rumqttc reconnects on the next poll.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
