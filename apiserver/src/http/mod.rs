//! The HTTP layer: [`server`] (hyper over TCP or TLS) within the
//! [`connection`] bounds, [`tls`] credentials and the kubeconfig, [`auth`]
//! (tokens and RBAC), [`api`] (routing, every resource request authorized
//! first, then the verbs), [`decode`] and [`bounds`] for bodies, and
//! [`error`], the Status object every refusal is.

pub mod api;
pub mod auth;
pub mod bounds;
pub mod connection;
pub mod decode;
pub mod error;
pub mod faults;
pub mod server;
pub mod tls;
