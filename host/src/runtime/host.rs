//! The host side of the plugin's imports: `cache` and `log`. Only `Host`
//! impls and `add_to_linker` live here.

use std::time::Instant;

use tracing::{Level, event};
use wasmtime::component::{HasSelf, Linker};

use super::bindings::{cache, log, types};
use super::state::PluginState;
use crate::declaration::Verb;
use crate::resource::{ObjectKey, ResourceType};
use crate::selector::Selector;

/// Links `kubewasm:controller/{types,cache,log}` into `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    types::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    cache::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    log::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}

impl types::Host for PluginState {}

impl PluginState {
    /// The declared form of a type the plugin names, after a grant check.
    fn granted(
        &self,
        verb: Verb,
        resource: types::ResourceType,
    ) -> Result<ResourceType, cache::CacheError> {
        let resource = ResourceType::from(resource);
        self.grants
            .check(verb, &resource)
            .map_err(|denied| cache::CacheError::Denied(denied.to_string()))?;
        Ok(resource)
    }
}

impl cache::Host for PluginState {
    #[tracing::instrument(name = "kubewasm.cache.get", level = "trace", skip_all, fields(plugin = %self.plugin))]
    fn get(
        &mut self,
        resource: types::ResourceType,
        key: types::ObjectKey,
    ) -> Result<Option<String>, cache::CacheError> {
        let started = Instant::now();
        let resource = self.granted(Verb::Get, resource)?;
        let key = ObjectKey::from(key);
        let found = self.cache.get(&resource, &key).map(|o| o.json().to_owned());
        self.imports += started.elapsed();
        Ok(found)
    }

    #[tracing::instrument(name = "kubewasm.cache.list", level = "trace", skip_all, fields(plugin = %self.plugin))]
    fn list(
        &mut self,
        resource: types::ResourceType,
        namespace: Option<String>,
        label_selector: String,
    ) -> Result<Vec<String>, cache::CacheError> {
        let started = Instant::now();
        let resource = self.granted(Verb::List, resource)?;
        let selector = Selector::parse(&label_selector)
            .map_err(|e| cache::CacheError::InvalidSelector(e.to_string()))?;
        let found = self
            .cache
            .list(&resource, namespace.as_deref(), &selector)
            .iter()
            .map(|o| o.json().to_owned())
            .collect();
        self.imports += started.elapsed();
        Ok(found)
    }
}

impl log::Host for PluginState {
    fn log(&mut self, level: log::Level, message: String, fields: Vec<(String, String)>) {
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
