//! The integration suites, one module each, in one test binary: one link of
//! wasmtime, kube and the embedded server instead of one per suite, and one
//! pool of test threads across every suite, so that no core waits for the
//! slowest test of a suite before the next suite starts.
//!
//! A suite is its module's path: `cargo test -p kubewasm-tests --test suites
//! -- engine::` runs `engine`, `-- engine::myapp` its tests whose names start
//! so, and `make test-real` names its suites the same way.

mod apiserver_hostile;
mod architecture;
mod chart;
mod cli;
mod conformance;
mod controllers;
mod dashboards;
mod devcluster;
mod discovery;
mod engine;
mod examples;
mod fidelity;
mod fleet;
mod hostile;
mod image;
mod installed;
mod kubectl;
mod oci;
mod partition;
mod plugin_resources;
mod polyglot;
mod rbac;
mod real_node;
mod restart;
mod ring;
mod sandbox;
mod shard_selectors;
mod signatures;
mod soak;
mod tenancy;
mod traces;
mod version;
mod watches;
