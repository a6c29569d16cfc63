//! An embedded Kubernetes API server for kubewasm: the cluster behind
//! `kubewasm dev`, the integration tests and the benchmarks.
//!
//! Built bottom-up. [`store`] is the versioned object store every resource
//! type shares: one global resourceVersion counter, a bounded event
//! history, gap-free watches and consistent list snapshots. The HTTP layer
//! (discovery, OpenAPI, REST verbs, patch flavours, server-side apply) sits
//! on top of it.

pub mod api;
pub mod apply;
pub mod auth;
pub mod bounds;
pub mod connection;
pub mod decode;
pub mod error;
pub mod gc;
mod index;
pub mod namespace;
pub mod objects;
pub mod openapi;
pub mod patch;
pub mod persist;
pub mod protobuf;
pub mod schema;
pub mod seed;
pub mod server;
pub mod simulator;
pub mod store;
pub mod strategic;
pub mod tls;
