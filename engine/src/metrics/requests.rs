//! client-go's request-result series, as controller-runtime registers it:
//! `rest_client_requests_total{code, host, method}`, each request the
//! host's client sends, counted when its answer's head arrives, by its
//! status code (`<error>` when no answer came: a refused connection, a
//! timeout, as client-go labels it), its HTTP method and the API server's
//! `host:port`. kubernetes-mixin's `KubeClientErrors` alert reads it.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabel {
    code: String,
    host: String,
    method: String,
}

/// The requests' series (see the module documentation).
#[derive(Clone, Default)]
pub(super) struct Requests(Family<RequestLabel, Counter>);

impl Requests {
    /// The series, registered in `registry` under client-go's name.
    pub(super) fn new(registry: &mut Registry) -> Self {
        let requests = Self::default();
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            requests.0.clone(),
        );
        requests
    }

    /// `client`, each of its requests counted with `host` (the API
    /// server's `host:port`).
    pub(super) fn counting(&self, client: kube::Client, host: &str) -> kube::Client {
        let (requests, host) = (self.0.clone(), Arc::<str>::from(host));
        crate::around::around(client, move |client, request| {
            let (requests, host) = (requests.clone(), host.to_string());
            let method = request.method().to_string();
            async move {
                let answer = client.send(request).await;
                let code = match &answer {
                    Ok(response) => response.status().as_u16().to_string(),
                    Err(_) => "<error>".to_owned(),
                };
                requests
                    .get_or_create(&RequestLabel { code, host, method })
                    .inc();
                answer
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::cluster;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;

    #[tokio::test]
    async fn each_request_should_count_by_its_code_method_and_host_and_one_unanswered_as_an_error()
    {
        let (server, client) = cluster().await;
        let mut registry = Registry::default();
        let requests = Requests::new(&mut registry);
        let host = server.addr().to_string();
        let counted = requests.counting(client, &host);
        let maps: Api<ConfigMap> = Api::namespaced(counted, "default");
        maps.list(&Default::default()).await.expect("listed");
        assert!(maps.get_opt("absent").await.expect("asked").is_none());
        let unreachable = kube::Client::try_from(kube::Config::new(
            "http://127.0.0.1:9".parse().expect("a URL"),
        ))
        .expect("a client");
        let gone: Api<ConfigMap> =
            Api::namespaced(requests.counting(unreachable, "127.0.0.1:9"), "default");
        assert!(gone.list(&Default::default()).await.is_err());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encoded");
        for series in [
            format!(r#"rest_client_requests_total{{code="200",host="{host}",method="GET"}} 1"#),
            format!(r#"rest_client_requests_total{{code="404",host="{host}",method="GET"}} 1"#),
            r#"rest_client_requests_total{code="<error>",host="127.0.0.1:9",method="GET"} 1"#
                .to_owned(),
        ] {
            assert!(text.contains(&series), "{series} in\n{text}");
        }
    }
}
