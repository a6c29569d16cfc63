//! A client whose every request passes through a function first: what the
//! host puts around the client it is given (a ring's shard selector added
//! to an informer's requests, client-go's count of each answer). The
//! function gets the request and the client beneath, and sends it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use kube::client::Body;

/// `client`, each request handed to `send` with the client beneath.
pub(crate) fn around<F, Fut>(client: kube::Client, send: F) -> kube::Client
where
    F: Fn(kube::Client, Request<Body>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Response<Body>, kube::Error>> + Send + 'static,
{
    let namespace = client.default_namespace().to_owned();
    kube::Client::new(Around { client, send }, namespace)
}

/// The service of [`around`].
#[derive(Clone)]
struct Around<F> {
    client: kube::Client,
    send: F,
}

impl<F, Fut> tower_service::Service<Request<Body>> for Around<F>
where
    F: Fn(kube::Client, Request<Body>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Response<Body>, kube::Error>> + Send + 'static,
{
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, kube::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), kube::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        Box::pin((self.send)(self.client.clone(), request))
    }
}
