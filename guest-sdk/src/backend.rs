//! Where cache reads and log records go: the host's imports in a wasm
//! build, the [`testing`](crate::testing) fixtures (`fixtures`) in a native build.

#[cfg(target_arch = "wasm32")]
mod imports {
    use crate::error::{Error, Result};
    use crate::types::Level;
    use crate::types::{ObjectKey, ResourceType};
    use crate::wit::kubewasm::controller::{cache, log};

    fn cache_error(e: cache::CacheError) -> Error {
        match e {
            cache::CacheError::Denied(why) => Error::msg(format!("read denied: {why}")),
            cache::CacheError::InvalidSelector(why) => Error::msg(why),
        }
    }

    pub(crate) fn get(resource: &ResourceType, key: &ObjectKey) -> Result<Option<String>> {
        cache::get(&resource.into(), &key.into()).map_err(cache_error)
    }

    pub(crate) fn list(
        resource: &ResourceType,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<String>> {
        cache::list(&resource.into(), namespace, selector).map_err(cache_error)
    }

    pub(crate) fn log(level: Level, message: &str, fields: &[(&str, &str)]) {
        let level = match level {
            Level::Trace => log::Level::Trace,
            Level::Debug => log::Level::Debug,
            Level::Info => log::Level::Info,
            Level::Warn => log::Level::Warn,
            Level::Error => log::Level::Error,
        };
        let fields: Vec<(String, String)> = fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        log::log(level, message, &fields);
    }
}

#[cfg(target_arch = "wasm32")]
pub(crate) use imports::{get, list, log};

#[cfg(not(target_arch = "wasm32"))]
pub(crate) use crate::fixtures::{get, list, log};
