//! What runs beside the server on the store, as the real cluster's
//! controllers do: [`gc`] (garbage collection: background, foreground,
//! orphan; namespace termination), [`namespace`] (each namespace's
//! `default` ServiceAccount and `kube-root-ca.crt`) and [`simulator`] (the
//! opt-in workload simulation). Each watches the store and writes back to
//! it; none is reached through HTTP.

pub mod gc;
pub mod namespace;
pub mod simulator;
