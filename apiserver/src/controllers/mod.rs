//! What runs beside the server on the store, as the real cluster's
//! controllers do: [`gc`] (garbage collection: background, foreground,
//! orphan; namespace termination) and [`namespace`] (each namespace's
//! `default` ServiceAccount and `kube-root-ca.crt`). Each watches the store
//! and writes back to it; none is reached through HTTP. (The opt-in
//! workload simulation, which writes through the API, is
//! [`crate::simulation`].)

pub mod gc;
pub mod namespace;
