//! Structured logging through the host's `tracing` subscriber, with the
//! plugin name and the reconcile key attached by the host.
//!
//! ```no_run
//! kubewasm_guest::log::info("deployment applied", &[("replicas", "3")]);
//! ```

use crate::backend;
pub use crate::types::Level;

/// Emits a record with key-value fields.
pub fn log(level: Level, message: &str, fields: &[(&str, &str)]) {
    backend::log(level, message, fields);
}

/// Emits a debug record.
pub fn debug(message: &str, fields: &[(&str, &str)]) {
    log(Level::Debug, message, fields);
}

/// Emits an info record.
pub fn info(message: &str, fields: &[(&str, &str)]) {
    log(Level::Info, message, fields);
}

/// Emits a warning.
pub fn warn(message: &str, fields: &[(&str, &str)]) {
    log(Level::Warn, message, fields);
}

/// Emits an error record.
pub fn error(message: &str, fields: &[(&str, &str)]) {
    log(Level::Error, message, fields);
}
