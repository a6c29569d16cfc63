//! Sequences of requests to the embedded API server, answered in process
//! by the same `Api::handle` its connections call, on a fresh store each
//! time: any method and path, query parameters (label, field and shard
//! selectors, resource versions, limits, apply options) and a body in any
//! content type (JSON, YAML, protobuf, the four patch types). Every request
//! is answered with a status, never a panic; a 500 with a reason
//! (`InternalError`: an error the server did not foresee) is a finding. A
//! 500 without one is a refusal a real server words that way (a shard
//! selector it cannot read, an apply it cannot make a typed object of:
//! [`ApiError::unreasoned`](kubewasm_apiserver::http::error::ApiError)).
//!
//! The input is text, so that seeds read as requests: requests separated
//! by a line `---`, each `METHOD PATH?QUERY`, then a line with the content
//! type, then the body.
#![no_main]

use std::collections::HashMap;

use bytes::Bytes;
use kubewasm_apiserver::http::api::{Api, ApiConfig, Reply, Request};
use kubewasm_apiserver::http::auth::{Impersonation, User};
use kubewasm_apiserver::store::Store;
use libfuzzer_sys::fuzz_target;

/// One request as the input writes it.
struct Sent<'a> {
    method: &'a str,
    path: &'a str,
    query: HashMap<String, String>,
    content_type: &'a str,
    body: &'a [u8],
}

fn parse(text: &[u8]) -> Option<Sent<'_>> {
    let mut lines = text.splitn(3, |b| *b == b'\n');
    let first = std::str::from_utf8(lines.next()?).ok()?;
    let content_type = std::str::from_utf8(lines.next().unwrap_or_default()).ok()?;
    let body = lines.next().unwrap_or_default();
    let (method, target) = first.split_once(' ')?;
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_owned(), v.to_owned())
        })
        .collect();
    Some(Sent {
        method,
        path,
        query,
        content_type: content_type.trim(),
        body,
    })
}

fn requests(input: &[u8]) -> Vec<Sent<'_>> {
    let mut sent = Vec::new();
    let mut rest = input;
    while sent.len() < 8 {
        let (one, next) = match rest.windows(5).position(|w| w == b"\n---\n") {
            Some(at) => (&rest[..at], Some(&rest[at + 5..])),
            None => (rest, None),
        };
        if let Some(request) = parse(one) {
            sent.push(request);
        }
        match next {
            Some(next) => rest = next,
            None => break,
        }
    }
    sent
}

fuzz_target!(|input: &[u8]| {
    let sent = requests(input);
    if sent.is_empty() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    else {
        return;
    };
    runtime.block_on(async {
        let api = Api::new(Store::new(64), ApiConfig::default());
        for s in &sent {
            let request = Request {
                method: s.method,
                path: s.path,
                query: s.query.clone(),
                content_type: s.content_type,
                accept: "application/json",
                user_agent: "fuzz/1",
                body: Bytes::copy_from_slice(s.body),
                user: User::admin(),
                impersonate: Impersonation::default(),
            };
            if let (_, Reply::Json(code, status)) = api.handle(request).await.warnings() {
                let foreseen = code != 500 || status.get("reason").is_none();
                assert!(
                    (200..600).contains(&code) && foreseen,
                    "{} {} {:?} ({}): {code} {status}",
                    s.method,
                    s.path,
                    s.query,
                    s.content_type
                );
            }
        }
    });
});
