//! kubewasm: a Kubernetes controller host whose reconcile logic runs in
//! sandboxed WebAssembly components. This crate is the `kubewasm` binary
//! and what only it needs:
//!
//! - [`cli`]: the command line, one module per command;
//! - [`daemon`]: the host as a process (`kubewasm run`, `kubewasm dev`):
//!   the engine, the plugin sources, metrics and shutdown wired together;
//! - [`scaffold`]: `kubewasm new`, a plugin project in Rust, Python or JS;
//! - [`typegen`]: `kubewasm types`, resource-type constants for Python and JS.
//!
//! The pipeline lives in the crates below it: `kubewasm-runtime` (the
//! sandbox, declarations, grants, reads, planning, the step: no Kubernetes
//! client), `kubewasm-engine` (informers, queues, controllers, applier,
//! leader election and sharding, plugin sources) and, behind the default
//! `apiserver` feature, `kubewasm-apiserver` (the embedded cluster of
//! `kubewasm dev`). ARCHITECTURE.md maps them.

pub mod cli;
pub mod componentize;
pub mod daemon;
pub mod scaffold;
pub mod typegen;
