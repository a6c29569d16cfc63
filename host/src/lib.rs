//! kubewasm: a Kubernetes controller host whose reconcile logic runs in
//! sandboxed WebAssembly components.
//!
//! The host owns everything that touches the cluster; plugins read cached
//! state through host imports and return desired actions. This crate holds:
//!
//! - [`runtime`]: the wasmtime engine, plugin loading, sandboxed calls;
//! - [`declaration`] and [`grants`]: what a plugin declares and may do;
//! - [`mapper`]: how the cluster serves each type (plural, scope);
//! - [`cache`], [`reads`] and [`selector`]: the read side plugins see;
//! - [`action`]: from desired actions to API requests;
//! - [`step`]: one reconcile step, the same for the engine and replay;
//! - [`engine`]: the controller engine (informers, work queues, applier);
//! - [`replay`]: one reconcile against fixtures, with no cluster;
//! - [`scaffold`]: `kubewasm new`, a plugin project in Rust, Python or JS;
//! - [`typegen`]: `kubewasm types`, resource-type constants for Python and JS;
//! - [`oci`]: plugins as OCI artifacts (push, pull, verify);
//! - [`loader`], [`plugin_dir`] and [`plugin_resource`]: where plugins come
//!   from (a directory, `Plugin` and `ClusterPlugin` resources);
//! - [`daemon`]: the host as a process (`kubewasm run`, `kubewasm dev`);
//! - [`cli`]: the `kubewasm` command line.
//!
//! ```no_run
//! use std::sync::Arc;
//! use kubewasm::cache::MemoryCache;
//! use kubewasm::resource::ObjectKey;
//! use kubewasm::mapper::RestMapper;
//! use kubewasm::replay::parse_objects;
//! use kubewasm::runtime::{LoadOptions, Request, Runtime, RuntimeConfig};
//!
//! let runtime = Runtime::new(RuntimeConfig::default())?;
//! // The cluster's types: built-ins plus the plugin's CRD.
//! let crd = parse_objects(&std::fs::read_to_string("plugins/myapp/crd.yaml")?)?;
//! let options = LoadOptions::new(Arc::new(RestMapper::for_fixtures(&crd)?));
//! let plugin = runtime.load_file("target/plugins/myapp.wasm", &options)?;
//! let cache = Arc::new(MemoryCache::from_objects(Vec::new())?);
//! let request = Request::new(ObjectKey::namespaced("default", "demo"));
//! // The plugin's reply, planned into the actions the host would send.
//! let outcome = kubewasm::step::reconcile(&plugin, cache, &request)?;
//! println!("{} actions", outcome.actions.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod action;
pub mod cache;
pub mod cli;
pub mod daemon;
pub mod declaration;
pub mod engine;
pub mod grants;
pub mod loader;
pub mod mapper;
pub mod oci;
pub mod plugin_dir;
pub mod plugin_resource;
pub mod reads;
pub mod replay;
pub mod runtime;
pub mod scaffold;
pub mod step;
pub mod typegen;
pub use kubewasm_core::{resource, selector};
