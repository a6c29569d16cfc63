//! Connection bounds over real sockets: clients that connect and say
//! nothing, stall a TLS handshake or an HTTP header, or open watch after
//! watch cannot starve an ordinary client.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, WatchParams};
use kube::{Api, Client, Config};
use kubewasm_apiserver::http::api::{Api as RestApi, ApiConfig};
use kubewasm_apiserver::http::connection::ConnectionLimits;
use kubewasm_apiserver::http::server::ApiServer;
use kubewasm_apiserver::http::tls::Credentials;
use kubewasm_apiserver::store::Store;
use kubewasm_apiserver::store::seed::seed;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const IDLE: Duration = Duration::from_millis(400);

fn limits() -> ConnectionLimits {
    ConnectionLimits {
        max_connections: 8,
        handshake_timeout: IDLE,
        header_read_timeout: IDLE,
        idle_timeout: IDLE,
        max_streams: 16,
    }
}

async fn start(
    tls: Option<Credentials>,
    config: ApiConfig,
) -> anyhow::Result<(ApiServer, SocketAddr)> {
    let store = Store::default();
    seed(&store)?;
    let server = ApiServer::start_with(
        "127.0.0.1:0".parse()?,
        RestApi::new(store, config),
        tls,
        limits(),
    )
    .await?;
    let addr = server.addr();
    Ok((server, addr))
}

/// Reads until the server closes the connection; how long it took.
async fn closed_after(mut stream: TcpStream) -> Duration {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) | Err(_) => return started.elapsed(),
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_slow_clients_should_be_closed_and_not_starve_others() -> anyhow::Result<()> {
    let (_server, addr) = start(None, ApiConfig::default()).await?;
    // Fill every slot: four say nothing, four send half a header, slowly.
    let mut hogs = Vec::new();
    for i in 0..8 {
        let mut stream = TcpStream::connect(addr).await?;
        if i % 2 == 1 {
            stream
                .write_all(b"GET /api/v1/configmaps HTTP/1.1\r\nHost: x\r\n")
                .await?;
        }
        hogs.push(stream);
    }
    // An ordinary client gets through once the hogs are dropped.
    let client = Client::try_from(Config::new(format!("http://{addr}").parse()?))?;
    let cms: Api<ConfigMap> = Api::all(client);
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), cms.list(&ListParams::default())).await??;
    assert!(
        started.elapsed() < 10 * IDLE,
        "served after {:?}",
        started.elapsed()
    );
    for hog in hogs {
        let closed = closed_after(hog).await;
        assert!(closed < 5 * IDLE, "a hog stayed {closed:?}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_tls_handshake_should_be_closed() -> anyhow::Result<()> {
    let credentials = Credentials::generate("127.0.0.1".parse()?)?;
    let (_server, addr) = start(Some(credentials), ApiConfig::default()).await?;
    let mut stream = TcpStream::connect(addr).await?;
    // The first bytes of a ClientHello, then nothing.
    stream.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).await?;
    let closed = closed_after(stream).await;
    assert!(closed < 5 * IDLE, "stayed {closed:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_should_keep_its_connection_past_the_idle_timeout() -> anyhow::Result<()> {
    let (_server, addr) = start(None, ApiConfig::default()).await?;
    let client = Client::try_from(Config::new(format!("http://{addr}").parse()?))?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut events = Box::pin(cms.watch(&WatchParams::default().timeout(30), "0").await?);
    tokio::time::sleep(3 * IDLE).await;
    let writer: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({"metadata": {"name": "late"}}))?;
    writer.create(&Default::default(), &cm).await?;
    let event = tokio::time::timeout(
        Duration::from_secs(5),
        futures_util::StreamExt::next(&mut events),
    )
    .await?;
    assert!(matches!(event, Some(Ok(_))), "{event:?}");
    Ok(())
}

/// Opens a watch over a raw connection: the stream and the status line.
async fn open_watch(addr: SocketAddr) -> anyhow::Result<(TcpStream, [u8; 12])> {
    let mut stream = TcpStream::connect(addr).await?;
    stream
        .write_all(b"GET /api/v1/configmaps?watch=true HTTP/1.1\r\nHost: x\r\n\r\n")
        .await?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await?;
    Ok((stream, head))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_past_the_cap_should_get_429() -> anyhow::Result<()> {
    let config = ApiConfig {
        max_watches: 3,
        ..ApiConfig::default()
    };
    let (_server, addr) = start(None, config).await?;
    let mut open = Vec::new();
    for _ in 0..3 {
        let (stream, head) = open_watch(addr).await?;
        assert_eq!(&head, b"HTTP/1.1 200");
        open.push(stream);
    }
    let (_, head) = open_watch(addr).await?;
    assert_eq!(&head, b"HTTP/1.1 429");
    // Closing one frees its slot.
    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    while open_watch(addr).await?.1 != *b"HTTP/1.1 200" {
        assert!(Instant::now() < deadline, "the slot was never freed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}
