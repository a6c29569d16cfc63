//! Why the runtime, a load or a call failed: one enum per outcome, each
//! variant saying what happened in words an operator can act on.

use std::path::PathBuf;
use std::time::Duration;

use crate::action::ActionError;
use crate::declaration::DeclarationError;
use crate::grants::Excess;

use crate::compiled::CacheDirError;
use crate::contract::{Contract, accepted_exports};
use crate::limits::LimitExceeded;
use crate::pool::Exhausted;

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// wasmtime refused the configuration.
    #[error("failed to configure the wasm engine: {0}")]
    Engine(#[source] wasmtime::Error),
    /// The precompiled cache directory cannot be used safely.
    #[error(transparent)]
    CacheDir(#[from] CacheDirError),
}

/// Why a plugin was refused at load.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("failed to read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a regular file of at most
    /// [`MAX_COMPONENT_BYTES`](crate::MAX_COMPONENT_BYTES) (a device, a
    /// pipe, a directory, or too large): refused unread.
    #[error("{path} is not a component file: {why}")]
    NotAFile {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        why: String,
    },
    /// The bytes are not WebAssembly at all.
    #[error("not a WebAssembly file (no `\\0asm` header)")]
    NotWasm,
    /// A core module, not a component.
    #[error(
        "a core WebAssembly module, not a component: build for wasm32-wasip2 or wrap it with `wasm-tools component new`"
    )]
    CoreModule,
    /// Compilation failed.
    #[error("failed to compile the component: {0:#}")]
    Compile(#[source] wasmtime::Error),
    /// The component targets another world.
    #[error("the component targets another world: it exports [{}], not {}", exports.join(", "), accepted_exports())]
    WrongWorld {
        /// What it exports.
        exports: Vec<String>,
    },
    /// The component imports an interface the host does not provide.
    #[error("the component imports `{import}`, which kubewasm does not provide to plugins")]
    UnsupportedImport {
        /// The import.
        import: String,
    },
    /// Linking failed for another reason (e.g. a type mismatch).
    #[error("failed to link the component: {0:#}")]
    Link(#[source] wasmtime::Error),
    /// The component links but does not match the world the host speaks
    /// (built against another revision of the WIT package).
    #[error("the component does not match the `{contract}` world this host speaks: {source:#}")]
    Incompatible {
        /// The version it claims.
        contract: Contract,
        /// Where its types differ.
        #[source]
        source: wasmtime::Error,
    },
    /// The `declare` call failed.
    #[error("the plugin's declare call failed: {0}")]
    Declare(#[source] CallError),
    /// The declaration is invalid.
    #[error("invalid declaration: {0}")]
    Declaration(#[source] DeclarationError),
    /// The declaration asks for more than the operator grants.
    #[error(transparent)]
    NotGranted(#[from] Excess),
}

/// Why one call into a plugin failed. The instance is dropped in every case.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Instantiation failed.
    #[error("failed to instantiate: {0:#}")]
    Instantiate(#[source] wasmtime::Error),
    /// It instantiated, but an export's type is not the contract's.
    #[error("its exports do not type-check: {0:#}")]
    Exports(#[source] wasmtime::Error),
    /// Every instance slot stayed in a call for as long as the call could
    /// wait: nothing ran (the engine queues the key again, without backoff).
    #[error(transparent)]
    NoInstance(#[from] Exhausted),
    /// The call ran past its CPU deadline and was interrupted.
    #[error("deadline of {deadline:?} exceeded")]
    DeadlineExceeded {
        /// The deadline.
        deadline: Duration,
    },
    /// The plugin grew its memory past the limit.
    #[error("memory limit exceeded: {detail}")]
    MemoryExhausted {
        /// What was asked for.
        detail: String,
    },
    /// The plugin panicked or aborted: it reached an `unreachable`
    /// instruction, what a Rust panic compiles to.
    #[error("plugin panicked: {message}")]
    Panicked {
        /// What the plugin wrote to stderr during the call (its panic
        /// message), or the trap when it wrote nothing.
        message: String,
    },
    /// The plugin went past an output limit.
    #[error(transparent)]
    LimitExceeded(#[from] LimitExceeded),
    /// Any other trap (including an uncaught exception in an interpreter).
    #[error("plugin trapped: {trap}{}", if stderr.is_empty() { String::new() } else { format!("\nplugin stderr:\n{stderr}") })]
    Trapped {
        /// The trap.
        trap: String,
        /// What the plugin wrote to stderr during the call.
        stderr: String,
    },
}

/// Why a reconcile or finalize failed; the host retries the key with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The call itself failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The plugin returned a failure.
    #[error("plugin reported failure: {message}")]
    Failed {
        /// The plugin's message.
        message: String,
    },
    /// An action was denied or malformed; nothing was performed.
    #[error(transparent)]
    Action(#[from] ActionError),
    /// The configuration does not match the plugin's `config-schema`.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// A configuration the plugin's `config-schema` refuses.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not JSON.
    #[error("the configuration is not JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// Not valid against the schema.
    #[error("the configuration does not match the plugin's config-schema: {message} (at `{path}`)")]
    Schema {
        /// The validator's message.
        message: String,
        /// Where in the configuration (a JSON pointer).
        path: String,
    },
}

/// Why a `map-keys` call failed.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    /// The call failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The plugin returned a key no object can have.
    #[error("map-keys returned an invalid key: {0}")]
    InvalidKey(#[source] kubewasm_core::validation::Invalid),
    /// The plugin reported a failure (contract 0.2.0 on).
    #[error("the plugin failed: {message}")]
    Failed {
        /// Its message, truncated.
        message: String,
    },
}
