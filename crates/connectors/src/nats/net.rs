//! The tokio runtime thread and the connection that every NATS reader and writer owns.

use std::future::Future;
use std::time::Duration;

use spate_types::{SpateError, SpateResult};

/// A NATS connection driven by a current-thread tokio runtime on a thread of its own. The
/// worker hands it futures with [`Net::run`] (and waits for them) or [`Net::spawn`]; dropping
/// it ends the thread and every task on it.
pub(crate) struct Net {
    handle: tokio::runtime::Handle,
    /// Dropped with the `Net`: the runtime thread then returns and drops its tasks.
    _stop: tokio::sync::oneshot::Sender<()>,
    pub client: async_nats::Client,
    /// `nats SERVER`, for messages.
    pub name: String,
}

impl Net {
    /// Connects to `server` (`nats://HOST:PORT` or `HOST:PORT`).
    pub fn connect(server: &str) -> SpateResult<Net> {
        let name = format!("nats {server}");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| SpateError::connector(name.clone(), e))?;
        let handle = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("spate-nats".into())
            .spawn(move || {
                rt.block_on(async move {
                    let _ = stopped.await;
                });
            })
            .map_err(|e| SpateError::connector(name.clone(), e))?;
        let address = server.to_owned();
        let connect = async move {
            async_nats::ConnectOptions::new()
                .name("spate")
                .connection_timeout(Duration::from_secs(10))
                .subscription_capacity(65_536)
                .client_capacity(65_536)
                .connect(address)
                .await
        };
        let client = run_on(&handle, connect, &name)?.map_err(|e| {
            SpateError::connector(
                name.clone(),
                format!("cannot connect (is a nats-server listening there?): {e}"),
            )
        })?;
        Ok(Net {
            handle,
            _stop: stop,
            client,
            name,
        })
    }

    /// Runs `fut` on the connection's runtime and waits for its output.
    pub fn run<F>(&self, fut: F) -> SpateResult<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        run_on(&self.handle, fut, &self.name)
    }

    /// Starts `fut` on the connection's runtime.
    pub fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.handle.spawn(fut);
    }

    /// A JetStream context of this connection (built on its runtime, which its acker task
    /// needs).
    pub fn jetstream(&self) -> SpateResult<async_nats::jetstream::Context> {
        let client = self.client.clone();
        self.run(async move { async_nats::jetstream::new(client) })
    }

    /// The configuration and state of JetStream stream `stream`, looked up through `js` (the
    /// outer error is this connection's, the inner one the server's answer).
    pub fn stream_info(
        &self,
        js: &async_nats::jetstream::Context,
        stream: &str,
    ) -> SpateResult<Result<async_nats::jetstream::stream::Info, async_nats::Error>> {
        let (js, stream) = (js.clone(), stream.to_owned());
        self.run(async move {
            let mut st = js.get_stream(&stream).await?;
            Ok(st.info().await?.clone())
        })
    }

    /// An error of this connection.
    pub fn err(&self, what: impl std::fmt::Display) -> SpateError {
        SpateError::connector(self.name.clone(), what)
    }
}

fn run_on<F>(handle: &tokio::runtime::Handle, fut: F, name: &str) -> SpateResult<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv()
        .map_err(|_| SpateError::connector(name.to_owned(), "the connection's runtime ended"))
}

/// `HOST:PORT` as a `nats://` server address.
pub(crate) fn server_url(server: &str) -> String {
    if server.contains("://") {
        server.to_owned()
    } else {
        format!("nats://{server}")
    }
}

/// A split id stable over worker counts: FNV-1a of `stream`, a zero byte and `filter`.
pub(crate) fn split_id(stream: &str, filter: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in stream.bytes().chain([0]).chain(filter.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
