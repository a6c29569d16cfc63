//! A sequence's namespace, made on a server before it runs.

/// Creates namespace `ns` and waits for its `default` ServiceAccount
/// (which Pods need), as a controller adds it.
pub(crate) async fn create(client: &kube::Client, ns: &str) -> anyhow::Result<()> {
    let request = |method: &str, path: String, body: Vec<u8>| {
        http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
    };
    let namespace =
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    match client
        .request_text(request(
            "POST",
            "/api/v1/namespaces".into(),
            namespace.to_string().into_bytes(),
        )?)
        .await
    {
        Ok(_) => {}
        // Made already: waited for as a new one.
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(other) => return Err(other.into()),
    }
    let account = format!("/api/v1/namespaces/{ns}/serviceaccounts/default");
    for _ in 0..100 {
        match client
            .request_text(request("GET", account.clone(), Vec::new())?)
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(other) => return Err(other.into()),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    anyhow::bail!("no default ServiceAccount after 10 s")
}
