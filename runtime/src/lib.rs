#![doc = include_str!("../README.md")]
//!
//! # Expected flow
//! [`Runtime::new`] builds the one [`wasmtime::Engine`] (component model,
//! epoch interruption, pooling allocator) and starts the epoch ticker.
//! [`Runtime::load`] checks that the bytes are a component of the
//! `kubewasm:controller` world, compiles it (or loads the precompiled
//! artifact from the on-disk cache), links it into an `InstancePre`, calls
//! `declare` and validates the declaration. A component loaded again while
//! a plugin of it is loaded (under another name, for another tenant) shares
//! that plugin's compiled code and declaration; each plugin keeps its own
//! instances, grants and configuration. [`Plugin::reconcile`],
//! [`Plugin::finalize`] and [`Plugin::map`] then run calls against it.
//!
//! # Guarantees
//! - A trap, a panic, a deadline overrun or a memory limit hit becomes a
//!   [`CallError`] for that call; the host and every other plugin go on.
//! - An instance that trapped is dropped, never entered again.
//! - A plugin reads only through the [`Cache`] it is handed, only the types
//!   it declared, and its actions pass [`action::plan`] before they leave.
//!
//! # Instances: warm by default, fresh on request, one budget for all
//! Measured side by side (BENCHMARKS.md, "Per language"): a fresh instance
//! per call costs about 1.8 times a warm call for a small Rust plugin, 5 to
//! 6 times for JavaScript (StarlingMonkey initialises lazily on the first
//! call) and 25 to 30 times for Python (half a millisecond to instantiate,
//! a millisecond more on the first call). So [`InstanceReuse::Reuse`] is the
//! default: a plugin's instances stay warm after a call, a call takes one,
//! and it goes back only if the call succeeded. A trapped instance is
//! dropped, and an instance is retired after [`MAX_CALLS_PER_INSTANCE`]
//! calls, which bounds what a leaky plugin accumulates. A plugin with no
//! work left lets its warm instances go ([`Plugin::release_idle`]), so an
//! idle plugin holds no linear memory: what a plugin adds to the host at
//! rest is its queue and declaration, not an instance (the code is shared).
//! Plugins must not rely on state kept between calls (there are several
//! warm instances, and any may be replaced).
//! [`InstanceReuse::Fresh`] gives every call a new instance, for operators
//! who want no state at all to survive a call.
//!
//! Every instance of every plugin, in a call or warm, holds a slot of one
//! host-wide budget ([`RuntimeConfig::max_instances`], by default as many
//! instances at the memory limit as the machine's memory holds): warm
//! instances are a cache, the least recently used idle one of any plugin
//! dropped when another plugin needs its slot, and a call that finds every
//! slot in a call waits its turn, first come first served, for at most
//! [`RuntimeConfig::instance_wait`] ([`CallError::NoInstance`] past it,
//! which the engine retries without backoff). When a call ends, the idle
//! instances are kept while their linear memory fits
//! [`RuntimeConfig::warm_memory`] (a sixteenth of the machine's memory by
//! default; the least recently used idle one goes first): fifty busy plugins
//! each keep their instance warm (an instance of the JavaScript example
//! holds some 3.5 MiB), where a cap counted in instances would make nearly
//! every call of plugins called in turn instantiate afresh. The rules are
//! `pool`'s.

pub mod action;
mod bindings;
mod blocking;
pub mod cache;
mod call;
mod code;
mod compiled;
mod config;
mod contract;
pub mod declaration;
mod error;
pub mod fixture;
pub mod grants;
mod limits;
pub mod mapper;
mod plugin;
mod pool;
pub mod private_dir;
pub mod read_set;
pub mod reads;
pub mod replay;
mod request;
mod runtime;
mod shared;
mod state;
pub mod step;

pub use kubewasm_core::{resource, schedule, selector};

pub use call::MAX_CALLS_PER_INSTANCE;
pub use code::Interfaces;
pub use compiled::CacheDirError;
pub use config::{
    InstanceReuse, LoadOptions, MAX_INSTANCES, MIN_INSTANCES, RuntimeConfig, default_max_instances,
    default_warm_memory, is_plugin_name,
};
pub use contract::Contract;
pub use error::{CallError, ConfigError, LoadError, MapError, ReconcileError, RuntimeError};
pub use limits::{CallLimits, Limit, LimitCounts, LimitExceeded, Limits};
pub use plugin::Plugin;
pub use pool::{Exhausted, PoolCounts};
pub use request::{CallStats, MapChange, Reply, Request, ScheduledRequest};
pub use runtime::{MAX_COMPONENT_BYTES, Runtime};
