//! The host side of the plugin's imports: `cache` and `log`. Only `Host`
//! impls and `add_to_linker` live here.
//!
//! Every import is charged against the call's hostcall fuel and log budget
//! ([`super::limits`]); a read is checked against the plugin's grants, uses
//! the type as the host resolved it (never the plural or scope the plugin
//! passes), sees only granted namespaces and, for a secondary declared with
//! a label selector, only the objects it matches.

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
    /// The host's form of a type the plugin names, after a grant check.
    fn granted(
        &self,
        verb: Verb,
        resource: types::ResourceType,
    ) -> Result<ResourceType, cache::CacheError> {
        self.grants
            .check(verb, &ResourceType::from(resource))
            .cloned()
            .map_err(|denied| cache::CacheError::Denied(denied.to_string()))
    }

    fn namespace_granted(
        &self,
        verb: Verb,
        resource: &ResourceType,
        namespace: &str,
    ) -> Result<(), cache::CacheError> {
        self.grants
            .check_namespace(verb, resource, namespace)
            .map_err(|denied| cache::CacheError::Denied(denied.to_string()))
    }

    /// Whether an object may be returned to the plugin: in a granted
    /// namespace and matching the type's declared selector.
    fn visible(&self, resource: &ResourceType, object: &serde_json::Value) -> bool {
        let namespace = ObjectKey::of(object).and_then(|k| k.namespace);
        namespace.is_none_or(|ns| self.grants.reads_namespace(&ns))
            && self
                .grants
                .selector(resource)
                .is_none_or(|selector| selector.matches(object))
    }
}

impl cache::Host for PluginState {
    #[tracing::instrument(name = "kubewasm.cache.get", level = "trace", skip_all, fields(plugin = %self.plugin))]
    fn get(
        &mut self,
        resource: types::ResourceType,
        key: types::ObjectKey,
    ) -> wasmtime::Result<Result<Option<String>, cache::CacheError>> {
        self.usage.hostcall(&self.limits)?;
        let started = Instant::now();
        let result = (|| {
            let resource = self.granted(Verb::Get, resource)?;
            let key = ObjectKey::from(key);
            if let Some(namespace) = key.namespace.as_deref().filter(|_| resource.namespaced) {
                self.namespace_granted(Verb::Get, &resource, namespace)?;
            }
            // A key no object can have (`a/b`, `..`) finds nothing.
            if kubewasm_core::validation::name(&resource, &key.name).is_err() {
                return Ok(None);
            }
            Ok(self
                .cache
                .get(&resource, &key)
                .filter(|o| self.visible(&resource, o.value()))
                .map(|o| o.json().to_owned()))
        })();
        self.imports += started.elapsed();
        Ok(result)
    }

    #[tracing::instrument(name = "kubewasm.cache.list", level = "trace", skip_all, fields(plugin = %self.plugin))]
    fn list(
        &mut self,
        resource: types::ResourceType,
        namespace: Option<String>,
        label_selector: String,
    ) -> wasmtime::Result<Result<Vec<String>, cache::CacheError>> {
        self.usage.hostcall(&self.limits)?;
        let started = Instant::now();
        let result = (|| {
            let resource = self.granted(Verb::List, resource)?;
            if let Some(namespace) = namespace.as_deref().filter(|_| resource.namespaced) {
                self.namespace_granted(Verb::List, &resource, namespace)?;
            }
            let selector = Selector::parse(&label_selector)
                .map_err(|e| cache::CacheError::InvalidSelector(e.to_string()))?;
            Ok(self
                .cache
                .list(&resource, namespace.as_deref(), &selector)
                .iter()
                .filter(|o| self.visible(&resource, o.value()))
                .map(|o| o.json().to_owned())
                .collect())
        })();
        self.imports += started.elapsed();
        Ok(result)
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
