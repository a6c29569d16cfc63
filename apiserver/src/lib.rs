//! An embedded Kubernetes API server for kubewasm: the cluster behind
//! `kubewasm dev`, the integration tests and the benchmarks.
//!
//! Built bottom-up, one room per concern; data flows one way, from a
//! connection through authentication, routing, authorization and a verb to
//! the store and its database:
//!
//! - [`store`]: the versioned object store every resource type shares (one
//!   global resourceVersion, a bounded event history, gap-free watches,
//!   consistent list snapshots), its indexes, its database and its seed;
//! - [`schema`]: what objects must look like: structural schemas of custom
//!   resources, `/openapi/v3`, protobuf bodies by Kubernetes' own schemas
//!   (the type table itself is `kubewasm-types`');
//! - [`objects`]: metadata rules every room shares (names, uids, times);
//! - [`mutation`]: how a write changes an object: merge and JSON patch,
//!   strategic merge, server-side apply;
//! - [`controllers`]: what runs beside the server on the store: garbage
//!   collection and namespace termination, each namespace's defaults;
//! - [`http`]: the HTTP layer: server and connection bounds, TLS,
//!   authentication and RBAC, routing and the verbs, body decoding and
//!   bounds, the Status errors;
//! - [`simulation`]: the simulated cluster (opt-in): built-in workload
//!   controllers and a kubelet on simulated Nodes, API clients of [`http`].

pub mod controllers;
pub mod http;
pub mod mutation;
pub mod objects;
pub mod schema;
pub mod simulation;
pub mod store;
