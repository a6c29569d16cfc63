//! The host side of the plugin's imports: `cache` and `log`, of every
//! contract version (the older versions' delegate to the current ones: same
//! calls, same rules). Only `Host` impls and `add_to_linker` live here.
//!
//! Every import is charged against the call's hostcall fuel and log budget
//! ([`crate::limits`]); reads follow the rules of [`crate::reads`].

use std::time::Instant;

use tracing::{Level, event};
use wasmtime::component::{HasSelf, Linker};

use kubewasm_core::resource::{ObjectKey, ResourceType};

use super::generated::v0_1::kubewasm::controller as v0_1_imports;
use super::generated::v0_2::kubewasm::controller as v0_2_imports;
use super::generated::{cache, log, types};
use crate::reads::{self, ReadError};
use crate::state::PluginState;

/// Links `kubewasm:controller/{types,cache,log}` of every contract version
/// into `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    types::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    cache::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    log::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    // The older `types` interfaces hold types only (shared with the
    // current one's).
    linker.instance("kubewasm:controller/types@0.2.0")?;
    v0_2_imports::cache::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v0_2_imports::log::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    linker.instance("kubewasm:controller/types@0.1.0")?;
    v0_1_imports::cache::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v0_1_imports::log::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}

impl types::Host for PluginState {}

impl From<ReadError> for cache::CacheError {
    fn from(error: ReadError) -> Self {
        match error {
            ReadError::Denied(denied) => Self::Denied(denied.to_string()),
            ReadError::InvalidSelector(error) => Self::InvalidSelector(error.to_string()),
        }
    }
}

impl PluginState {
    /// Counts a read the grants refused.
    fn counted<T>(&self, read: Result<T, ReadError>) -> Result<T, ReadError> {
        if matches!(read, Err(ReadError::Denied(_))) {
            self.reads_denied
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        read
    }
}

impl cache::Host for PluginState {
    #[tracing::instrument(name = "kubewasm.cache.get", level = "debug", skip_all, fields(kubewasm.plugin = %self.plugin))]
    fn get(
        &mut self,
        resource: types::ResourceType,
        key: types::ObjectKey,
    ) -> wasmtime::Result<Result<Option<String>, cache::CacheError>> {
        self.usage.hostcall(&self.limits)?;
        let started = Instant::now();
        let (resource, key) = (ResourceType::from(resource), ObjectKey::from(key));
        let found = self.counted(reads::get(&*self.cache, &self.grants, &resource, &key));
        let answer = found.map(|found| {
            let text = found.as_ref().map(|o| o.json().to_owned());
            if let Some(set) = self.reads.as_mut() {
                set.get(resource, key, found);
            }
            text
        });
        self.imports += started.elapsed();
        Ok(answer.map_err(Into::into))
    }

    #[tracing::instrument(name = "kubewasm.cache.list", level = "debug", skip_all, fields(kubewasm.plugin = %self.plugin))]
    fn list(
        &mut self,
        resource: types::ResourceType,
        namespace: Option<String>,
        label_selector: String,
    ) -> wasmtime::Result<Result<Vec<String>, cache::CacheError>> {
        self.usage.hostcall(&self.limits)?;
        let started = Instant::now();
        let resource = ResourceType::from(resource);
        let found = self.counted(reads::list(
            &*self.cache,
            &self.grants,
            &resource,
            namespace.as_deref(),
            &label_selector,
        ));
        let answer = found.map(|found| {
            let texts = found.iter().map(|o| o.json().to_owned()).collect();
            if let Some(set) = self.reads.as_mut() {
                set.list(resource, namespace, label_selector, found);
            }
            texts
        });
        self.imports += started.elapsed();
        Ok(answer.map_err(Into::into))
    }
}

impl log::Host for PluginState {
    fn log(
        &mut self,
        level: log::Level,
        message: String,
        fields: Vec<(String, String)>,
    ) -> wasmtime::Result<()> {
        let bytes = message.len() + fields.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
        self.usage.log(&self.limits, bytes)?;
        let key = self
            .key
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        let fields = FieldList(&fields);
        macro_rules! emit {
            ($level:expr) => {
                event!(target: "kubewasm::plugin", $level, plugin = %self.plugin, key = %key, fields = %fields, "{message}")
            };
        }
        match level {
            log::Level::Trace => emit!(Level::TRACE),
            log::Level::Debug => emit!(Level::DEBUG),
            log::Level::Info => emit!(Level::INFO),
            log::Level::Warn => emit!(Level::WARN),
            log::Level::Error => emit!(Level::ERROR),
        }
        Ok(())
    }
}

/// Displays key-value pairs as `k=v k2=v2`.
struct FieldList<'a>(&'a [(String, String)]);

impl std::fmt::Display for FieldList<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{k}={v:?}")?;
        }
        Ok(())
    }
}

/// An older version's `cache` and `log`, the same calls as the current
/// ones under other names: delegated.
macro_rules! delegate_imports {
    ($old:ident) => {
        impl From<cache::CacheError> for $old::cache::CacheError {
            fn from(error: cache::CacheError) -> Self {
                match error {
                    cache::CacheError::Denied(why) => Self::Denied(why),
                    cache::CacheError::InvalidSelector(why) => Self::InvalidSelector(why),
                }
            }
        }

        impl $old::cache::Host for PluginState {
            fn get(
                &mut self,
                resource: types::ResourceType,
                key: types::ObjectKey,
            ) -> wasmtime::Result<Result<Option<String>, $old::cache::CacheError>> {
                Ok(cache::Host::get(self, resource, key)?.map_err(Into::into))
            }

            fn list(
                &mut self,
                resource: types::ResourceType,
                namespace: Option<String>,
                label_selector: String,
            ) -> wasmtime::Result<Result<Vec<String>, $old::cache::CacheError>> {
                Ok(
                    cache::Host::list(self, resource, namespace, label_selector)?
                        .map_err(Into::into),
                )
            }
        }

        impl $old::log::Host for PluginState {
            fn log(
                &mut self,
                level: $old::log::Level,
                message: String,
                fields: Vec<(String, String)>,
            ) -> wasmtime::Result<()> {
                use $old::log::Level as Old;
                let level = match level {
                    Old::Trace => log::Level::Trace,
                    Old::Debug => log::Level::Debug,
                    Old::Info => log::Level::Info,
                    Old::Warn => log::Level::Warn,
                    Old::Error => log::Level::Error,
                };
                log::Host::log(self, level, message, fields)
            }
        }
    };
}

delegate_imports!(v0_1_imports);
delegate_imports!(v0_2_imports);
