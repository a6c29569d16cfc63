//! Watches: the initial state or a resume point, then every change in
//! order, with selector transitions, bookmarks and a timeout.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Api;
use super::filter::Filter;
use super::query::parse_rv;
use super::representation::{self, As};
use super::request::Reply;
use super::route::Target;
use super::slots::WatchSlot;
use crate::http::error::ApiError;
use crate::http::faults::Faults;
use crate::objects::metadata_mut;
use crate::store::{Event, EventType, ListAt, StoreError};
use kubewasm_types::info::ResourceInfo;

impl Api {
    pub(super) fn watch(
        &self,
        target: &Target,
        query: &HashMap<String, String>,
        representation: As,
        user: &str,
    ) -> Result<Reply, ApiError> {
        let filter = Filter::from_query(query, &target.info, self.config.shard_selectors)?;
        let bookmarks = query
            .get("allowWatchBookmarks")
            .is_some_and(|b| b == "true");
        let initial_events = query.get("sendInitialEvents").is_some_and(|b| b == "true");
        let timeout = super::query::timeout(query, self.config.default_watch_timeout)?;
        let rv = query
            .get("resourceVersion")
            .filter(|v| !v.is_empty())
            .cloned();
        let permit = self.watches.acquire(user)?;
        let (tx, rx) = mpsc::channel(256);
        let job = WatchJob {
            _permit: permit,
            api: self.clone(),
            info: target.info.clone(),
            namespace: target.namespace.clone(),
            filter,
            bookmarks,
            initial_events,
            timeout,
            rv,
            tx,
            representation,
            columns_sent: AtomicBool::new(false),
        };
        tokio::spawn(job.run());
        Ok(Reply::Watch(rx))
    }
}

/// One watch connection's work.
struct WatchJob {
    /// Held while the watch runs.
    _permit: WatchSlot,
    api: Api,
    info: ResourceInfo,
    namespace: Option<String>,
    filter: Filter,
    bookmarks: bool,
    initial_events: bool,
    timeout: Duration,
    rv: Option<String>,
    tx: mpsc::Sender<Bytes>,
    representation: As,
    /// Whether a table's column definitions went out.
    columns_sent: AtomicBool,
}

impl WatchJob {
    pub(super) async fn send(&self, kind: &str, object: Value) -> bool {
        let mut line = json!({"type": kind, "object": object}).to_string();
        line.push('\n');
        self.tx.send(Bytes::from(line)).await.is_ok()
    }

    pub(super) fn bookmark(&self, rv: u64, initial_events_end: bool) -> Value {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        json!({"kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": metadata})
    }

    pub(super) fn in_scope(&self, object: &Value) -> bool {
        self.namespace.as_deref().is_none_or(|ns| {
            object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                == Some(ns)
        }) && self.filter.matches(object)
    }

    /// Sends an object event in the representation asked for (a table
    /// carries its column definitions in the first event only).
    async fn send_object(&self, kind: &str, object: &Value) -> bool {
        let columns = !self.columns_sent.swap(true, Ordering::Relaxed);
        let object = representation::object(self.representation, &self.info, object, columns);
        self.send(kind, object).await
    }

    /// The event a client of this watch sees, with selector transitions:
    /// an object leaving the selection is DELETED, one entering is ADDED.
    pub(super) fn translate(&self, event: &Event) -> Option<(&'static str, Value)> {
        let now = self.in_scope(&event.object);
        let before = event.previous.as_deref().is_some_and(|p| self.in_scope(p));
        let stamped = |object: &Value| {
            let mut object = object.clone();
            if let Some(m) = metadata_mut(&mut object) {
                m.insert("resourceVersion".into(), event.rv.to_string().into());
            }
            object
        };
        let current = || (*event.object).clone();
        match event.kind {
            EventType::Added if now => Some(("ADDED", current())),
            EventType::Modified if now && before => Some(("MODIFIED", current())),
            EventType::Modified if now => Some(("ADDED", current())),
            EventType::Modified if before => {
                event.previous.as_deref().map(|p| ("DELETED", stamped(p)))
            }
            EventType::Deleted if before => Some(("DELETED", current())),
            _ => None,
        }
    }

    pub(super) async fn fail(&self, error: ApiError) {
        self.send("ERROR", error.status()).await;
    }

    pub(super) async fn run(self) {
        let store = self.api.store.clone();
        let key = self.info.storage_key();
        let deadline = tokio::time::Instant::now() + self.timeout;
        let from_version =
            matches!(self.rv.as_deref(), Some(rv) if rv != "0" && !self.initial_events);
        let start = match self.rv.as_deref() {
            // From a given version: only what happened after it.
            Some(rv) if from_version => match parse_rv(rv) {
                Ok(rv) => rv,
                Err(e) => return self.fail(e).await,
            },
            // From "now" or "any": the current state as ADDED events first.
            _ => {
                let snapshot = match store.list(&key, self.namespace.as_deref(), ListAt::Latest) {
                    Ok(s) => s,
                    Err(e) => return self.fail(e.into()).await,
                };
                for object in snapshot.items.iter().filter(|o| self.filter.matches(o)) {
                    if !self.send_object("ADDED", object).await {
                        return;
                    }
                }
                if self.initial_events
                    && !self
                        .send("BOOKMARK", self.bookmark(snapshot.rv, true))
                        .await
                {
                    return;
                }
                snapshot.rv
            }
        };
        let faults = self.api.config.faults.as_deref();
        if from_version && faults.is_some_and(Faults::expires) {
            tracing::debug!(fault = "expire", rv = start, "fault injected");
            return self
                .fail(ApiError::expired(format!(
                    "too old resource version: {start} (injected fault)"
                )))
                .await;
        }
        let since = self.api.served_since(&key);
        if from_version && start < since {
            return self
                .fail(ApiError::expired(format!(
                    "too old resource version: {start} ({since})"
                )))
                .await;
        }
        let mut watcher = match store.watch(Some(key), start) {
            Ok(w) => w,
            Err(e @ StoreError::Expired { .. }) => {
                return self.fail(ApiError::expired(e.to_string())).await;
            }
            Err(e) => return self.fail(e.into()).await,
        };
        let mut ticker = tokio::time::interval(self.api.config.bookmark_interval);
        ticker.tick().await;
        loop {
            tokio::select! {
                event = watcher.next() => match event {
                    Ok(event) => {
                        if let Some((kind, object)) = self.translate(&event)
                            && !self.send_object(kind, &object).await {
                                return;
                            }
                        if faults.is_some_and(Faults::cuts) {
                            tracing::debug!(fault = "cut", "fault injected");
                            return;
                        }
                    }
                    Err(e) => return self.fail(ApiError::expired(e.to_string())).await,
                },
                _ = ticker.tick(), if self.bookmarks => {
                    if !self.send("BOOKMARK", self.bookmark(watcher.position(), false)).await {
                        return;
                    }
                }
                () = tokio::time::sleep_until(deadline) => {
                    if self.bookmarks {
                        self.send("BOOKMARK", self.bookmark(watcher.position(), false)).await;
                    }
                    return;
                }
                () = self.tx.closed() => return,
            }
        }
    }
}
