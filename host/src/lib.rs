//! kubewasm: a Kubernetes controller host whose reconcile logic runs in
//! sandboxed WebAssembly components.
//!
//! The host owns everything that touches the cluster; plugins read cached
//! state through host imports and return desired actions. This crate holds:
//!
//! - [`runtime`]: the wasmtime engine, plugin loading, sandboxed calls;
//! - [`declaration`] and [`grants`]: what a plugin declares and may do;
//! - [`cache`] and [`selector`]: the read side plugins see;
//! - [`action`]: from desired actions to API requests;
//! - [`replay`]: one reconcile against fixtures, with no cluster;
//! - [`cli`]: the `kubewasm` command line.
//!
//! ```no_run
//! use std::sync::Arc;
//! use kubewasm::cache::MemoryCache;
//! use kubewasm::resource::ObjectKey;
//! use kubewasm::runtime::{Request, Runtime, RuntimeConfig};
//!
//! let runtime = Runtime::new(RuntimeConfig::default())?;
//! let plugin = runtime.load_file("target/plugins/myapp.wasm")?;
//! let cache = Arc::new(MemoryCache::from_objects(Vec::new())?);
//! let outcome = plugin.reconcile(cache, &Request::new(ObjectKey::namespaced("default", "demo")))?;
//! println!("{} actions", outcome.actions.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod action;
pub mod cache;
pub mod cli;
pub mod declaration;
pub mod grants;
pub mod replay;
pub mod runtime;
pub use kubewasm_core::{resource, selector};
