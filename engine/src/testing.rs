//! What the engine's tests share: the embedded API server in process.

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
    let url = format!("http://{}", server.addr());
    let client =
        kube::Client::try_from(kube::Config::new(url.parse().expect("url"))).expect("client");
    (server, client)
}
