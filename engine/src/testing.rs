//! What the engine's tests share: the embedded API server in process, a
//! partition to put between it and a client, and a server that answers
//! whatever it is asked with what a test chooses.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

/// The embedded API server in process, without authentication, and a
/// client of it.
pub(crate) async fn cluster() -> (kubewasm_apiserver::http::server::ApiServer, kube::Client) {
    use kubewasm_apiserver::http::api::{Api as Rest, ApiConfig};
    let store = kubewasm_apiserver::store::Store::default();
    kubewasm_apiserver::store::seed::seed(&store).expect("seeded");
    let server = kubewasm_apiserver::http::server::ApiServer::start(
        "127.0.0.1:0".parse().expect("address"),
        Rest::new(store, ApiConfig::default()),
        None,
    )
    .await
    .expect("server starts");
    let client = client_of(server.addr());
    (server, client)
}

/// Waits until `done`, for at most 20 s (then fails, saying `what`).
pub(crate) async fn until(what: &str, done: impl Fn() -> bool) {
    until_showing(what, || (), |_| done()).await;
}

/// Waits until `done` holds of the state `state` reads, for at most 20 s;
/// then fails, saying `what` and the state as it stood then.
pub(crate) async fn until_showing<S: std::fmt::Debug>(
    what: &str,
    state: impl Fn() -> S,
    done: impl Fn(&S) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let now = state();
        if done(&now) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after 20 s: {what}; the state then: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A client of the server at `addr`.
fn client_of(addr: SocketAddr) -> kube::Client {
    let url = format!("http://{addr}");
    kube::Client::try_from(kube::Config::new(url.parse().expect("url"))).expect("client")
}

/// A loopback server handing each connection to its own task: what
/// [`Partition`] and [`Answering`] are built on. Dropped, it stops
/// accepting.
struct Loopback {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Loopback {
    /// Accepts on a free loopback port, each connection served by `serve`.
    async fn start<F>(serve: impl Fn(TcpStream) -> F + Send + 'static) -> Self
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bound");
        let addr = listener.local_addr().expect("address");
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream));
            }
        });
        Self { addr, task }
    }

    /// A client of this server.
    fn client(&self) -> kube::Client {
        client_of(self.addr)
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A loopback proxy to a server that can stop forwarding: what is sent
/// through it while held is neither answered nor refused, as across a
/// network partition. Released, the connections that carried anything
/// while held are reset and what they carried is lost, never delivered
/// late (as `tests/src/proxy.rs`'s partition); the others go on.
pub(crate) struct Partition {
    server: Loopback,
    held: Arc<AtomicBool>,
}

impl Partition {
    /// A proxy to `upstream`, forwarding.
    pub(crate) async fn start(upstream: SocketAddr) -> Self {
        let held = Arc::new(AtomicBool::new(false));
        let server = Loopback::start({
            let held = Arc::clone(&held);
            move |inbound| {
                let held = Arc::clone(&held);
                async move {
                    let Ok(outbound) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (from_client, to_client) = inbound.into_split();
                    let (from_server, to_server) = outbound.into_split();
                    // Either way reset, both are: the connection is dropped.
                    tokio::select! {
                        () = pipe(from_client, to_server, Arc::clone(&held)) => {}
                        () = pipe(from_server, to_client, held) => {}
                    }
                }
            }
        })
        .await;
        Self { server, held }
    }

    /// A client of the server through this proxy.
    pub(crate) fn client(&self) -> kube::Client {
        self.server.client()
    }

    /// Stops forwarding.
    pub(crate) fn hold(&self) {
        self.held.store(true, Ordering::SeqCst);
    }

    /// Forwards again; what was held is lost with its connection.
    pub(crate) fn release(&self) {
        self.held.store(false, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` until either ends, or until a hold is released
/// after bytes were read during it (the connection reset, those bytes
/// lost).
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, held: Arc<AtomicBool>) {
    let mut buffer = vec![0; 16 * 1024];
    while let Ok(read) = from.read(&mut buffer).await {
        if read == 0 {
            return;
        }
        if held.load(Ordering::SeqCst) {
            while held.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            return;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

/// What an [`Answering`] server's answers carry.
#[derive(Clone, Copy)]
pub(crate) enum Reply {
    /// These bytes, with their length.
    Fixed(&'static [u8]),
    /// 1 GiB announced, sent as fast as the client reads it.
    Endless,
}

/// A loopback HTTP server answering every request with one status line
/// and [`Reply`], whatever was asked: a hostile or broken server.
pub(crate) struct Answering {
    server: Loopback,
    sent: Arc<AtomicU64>,
}

impl Answering {
    /// A server answering `HTTP/1.1 {line}` (`200 OK`) and `reply`.
    pub(crate) async fn start(line: &'static str, reply: Reply) -> Self {
        let sent = Arc::new(AtomicU64::new(0));
        let server = Loopback::start({
            let sent = Arc::clone(&sent);
            move |stream| answer(stream, line, reply, Arc::clone(&sent))
        })
        .await;
        Self { server, sent }
    }

    /// A client of this server.
    pub(crate) fn client(&self) -> kube::Client {
        self.server.client()
    }

    /// The bytes of answers' bodies written so far.
    pub(crate) fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }
}

/// Reads one request from `stream` (its head and `Content-Length` bytes),
/// then writes the answer, counting the body's bytes in `sent`.
async fn answer(mut stream: TcpStream, line: &str, reply: Reply, sent: Arc<AtomicU64>) {
    let mut request = Vec::new();
    let mut buffer = vec![0; 16 * 1024];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => request.extend_from_slice(&buffer[..read]),
        }
        let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        if request.len() >= end + 4 + length {
            break;
        }
    }
    let length = match reply {
        Reply::Fixed(body) => body.len(),
        Reply::Endless => 1 << 30,
    };
    let head = format!(
        "HTTP/1.1 {line}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\
         Connection: close\r\n\r\n"
    );
    if stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let chunk = vec![b' '; 64 * 1024];
    let mut left = length;
    while left > 0 {
        let part = match reply {
            Reply::Fixed(body) => &body[length - left..],
            Reply::Endless => &chunk[..left.min(chunk.len())],
        };
        if stream.write_all(part).await.is_err() {
            return;
        }
        sent.fetch_add(part.len() as u64, Ordering::SeqCst);
        left -= part.len();
    }
}
