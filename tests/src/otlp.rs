//! An OTLP receiver on loopback, as an OpenTelemetry Collector's `otlp`
//! receiver takes traces over HTTP: `POST /v1/traces` with an
//! `ExportTraceServiceRequest` in protobuf (`application/x-protobuf`),
//! answered with an empty `ExportTraceServiceResponse`. Every span received
//! is kept, with its resource's attributes, for a test to read.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

/// A span as received, its attributes (and its resource's) made strings.
#[derive(Clone, Debug)]
pub struct Received {
    /// The span's name.
    pub name: String,
    /// Its trace.
    pub trace_id: Vec<u8>,
    /// Its id.
    pub span_id: Vec<u8>,
    /// Its parent's id; empty for a root.
    pub parent_span_id: Vec<u8>,
    /// Its kind (OTLP's numbering: 1 internal, 3 client).
    pub kind: i32,
    /// Its status code (0 unset, 1 ok, 2 error).
    pub status: i32,
    /// Its attributes.
    pub attributes: BTreeMap<String, String>,
    /// Its events' names (a log's message).
    pub events: Vec<String>,
    /// Its resource's attributes.
    pub resource: BTreeMap<String, String>,
}

impl Received {
    /// An attribute, or `""`.
    pub fn attribute(&self, name: &str) -> &str {
        self.attributes.get(name).map_or("", String::as_str)
    }

    /// Whether `parent` is this span's parent.
    pub fn is_child_of(&self, parent: &Received) -> bool {
        self.trace_id == parent.trace_id && self.parent_span_id == parent.span_id
    }
}

/// What the receiver saw: the spans, and the requests it refused.
#[derive(Debug, Default)]
struct Seen {
    spans: Vec<Received>,
    refused: Vec<String>,
}

/// The receiver, serving until dropped.
pub struct Receiver {
    address: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    _runtime: tokio::runtime::Runtime,
}

impl Receiver {
    /// Starts one on a free loopback port.
    pub fn start() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let address = listener.local_addr()?;
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = Arc::clone(&seen);
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let seen = Arc::clone(&shared);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let seen = Arc::clone(&seen);
                        async move { Ok::<_, hyper::Error>(receive(&seen, request).await) }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    // The exporter's connection ending is not the receiver's error.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
        Ok(Self {
            address,
            seen,
            _runtime: runtime,
        })
    }

    /// The base URL an exporter is given (`--otlp-endpoint`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Received> {
        self.seen
            .lock()
            .map(|s| s.spans.clone())
            .unwrap_or_default()
    }

    /// What was refused (not a trace export), each said in a line.
    pub fn refused(&self) -> Vec<String> {
        self.seen
            .lock()
            .map(|s| s.refused.clone())
            .unwrap_or_default()
    }
}

/// Answers one request: a trace export is decoded and kept.
async fn receive(
    seen: &Mutex<Seen>,
    request: hyper::Request<Incoming>,
) -> hyper::Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let refuse = |why: String, code: u16| {
        if let Ok(mut seen) = seen.lock() {
            seen.refused.push(why.clone());
        }
        hyper::Response::builder()
            .status(code)
            .body(Full::new(Bytes::from(why)))
            .unwrap_or_default()
    };
    let content_type = parts
        .headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if parts.method != hyper::Method::POST
        || parts.uri.path() != "/v1/traces"
        || content_type != "application/x-protobuf"
    {
        return refuse(
            format!("{} {} ({content_type})", parts.method, parts.uri),
            404,
        );
    }
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => return refuse(format!("body: {error}"), 400),
    };
    let export = match ExportTraceServiceRequest::decode(bytes) {
        Ok(export) => export,
        Err(error) => return refuse(format!("not an ExportTraceServiceRequest: {error}"), 400),
    };
    let mut received = Vec::new();
    for resource_spans in export.resource_spans {
        let resource = attributes(
            &resource_spans
                .resource
                .map(|r| r.attributes)
                .unwrap_or_default(),
        );
        for scope in resource_spans.scope_spans {
            received.extend(scope.spans.into_iter().map(|span| read(span, &resource)));
        }
    }
    if let Ok(mut seen) = seen.lock() {
        seen.spans.extend(received);
    }
    let answer = ExportTraceServiceResponse::default().encode_to_vec();
    hyper::Response::builder()
        .header(hyper::header::CONTENT_TYPE, "application/x-protobuf")
        .body(Full::new(Bytes::from(answer)))
        .unwrap_or_default()
}

fn read(span: Span, resource: &BTreeMap<String, String>) -> Received {
    Received {
        attributes: attributes(&span.attributes),
        events: span.events.into_iter().map(|e| e.name).collect(),
        status: span.status.map_or(0, |s| s.code),
        name: span.name,
        trace_id: span.trace_id,
        span_id: span.span_id,
        parent_span_id: span.parent_span_id,
        kind: span.kind,
        resource: resource.clone(),
    }
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter()
        .map(|kv| {
            (
                kv.key.clone(),
                kv.value.as_ref().map(text).unwrap_or_default(),
            )
        })
        .collect()
}

fn text(value: &AnyValue) -> String {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}
