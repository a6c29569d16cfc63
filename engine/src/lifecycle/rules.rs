//! The rules of a plugin's lifecycle, the same whichever source asks for
//! the plugin (the directory, a `Plugin` resource), in the same words:
//! - **Run.** What a load gave starts, or is swapped in for the running
//!   version of its name ([`Engine::run_loaded`]: queue and keys kept,
//!   in-flight reconciles finishing on the old version), unless the other
//!   source runs a plugin of that name: then it is refused
//!   ([`Refused::NameTaken`]) and loads once the name is freed.
//! - **Refuse.** A refused load leaves the running version serving; it is
//!   counted (`kubewasm_plugin_loads_total{result="refused"}`, or
//!   `"unserved"` for a type the cluster does not serve) and said once.
//! - **Stop while not served.** A running plugin declaring a type the
//!   cluster no longer serves stops, and loads again once it is.
//! - **Stop.** A source stops only its own plugins; the name is then free
//!   for the other source.

use std::fmt::Display;
use std::sync::Arc;

use kubewasm_runtime::mapper::MapperError;

use super::owner::{LoadResult, Owner};
use crate::Engine;
use crate::controller::Settings;
use crate::loader::{Loads, Prepared, Refused};

/// Runs what a load of `owner` from `origin` gave (see the module
/// documentation) with `settings` and the load's configuration, says so,
/// and starts compiling its optimized code if it runs baseline code (a
/// later load of `name` in `loads`, from `again`).
///
/// # Errors
/// [`Refused::NameTaken`] when the other source runs a plugin of its name:
/// nothing changes; the caller refuses it ([`refused`]).
pub(crate) async fn run<O: Send + 'static>(
    engine: &mut Engine,
    owner: Owner,
    origin: &(dyn Display + Sync),
    prepared: Prepared,
    settings: Settings,
    (loads, again): (&mut Loads<O>, O),
) -> Result<LoadResult, Refused> {
    let Prepared {
        plugin,
        config,
        artifact,
        tier_up,
    } = prepared;
    let plugin = Arc::new(plugin);
    let name = plugin.declaration().name.clone();
    let digest = plugin.digest().to_owned();
    let settings = Settings {
        config: config.clone(),
        ..settings
    };
    let result = engine
        .run_loaded(Arc::clone(&plugin), settings, tier_up, owner)
        .await?;
    tracing::info!(plugin = %name, %origin, %digest, ?artifact, "plugin {}", result.as_str());
    loads.tier_up(&name, again, &plugin, &config, artifact);
    Ok(result)
}

/// Counts and says a refused load of `name` by `owner` from `origin`:
/// waiting for a type to be served, or refused with the owner's running
/// version (if any) serving on.
pub(crate) fn refused(
    engine: &Engine,
    owner: Owner,
    name: &str,
    origin: &(dyn Display + Sync),
    error: &Refused,
) {
    engine.record_load(name, error.result());
    if error.unserved_at().is_some() {
        // Expected while a chart installs its CRDs beside it.
        tracing::warn!(plugin = %name, %origin, %error, "waiting for its types to be served");
    } else if engine.holder(name) == Some(owner) {
        tracing::error!(plugin = %name, %origin, %error,
            "new version refused; the running version keeps serving");
    } else {
        tracing::error!(plugin = %name, %origin, %error, "plugin refused");
    }
}

/// Why the plugin `name` that `owner` runs declares a type the cluster no
/// longer serves, if it does.
pub(crate) fn unserved(
    engine: &Engine,
    owner: Owner,
    name: &str,
    types: &crate::discovery::Snapshot,
) -> Option<Refused> {
    if engine.holder(name) != Some(owner) {
        return None;
    }
    let source: MapperError = engine.unserved(name, &types.mapper)?;
    Some(Refused::Unserved {
        source,
        epoch: types.epoch,
    })
}

/// Stops the plugin `name` of `owner`, which declares a type no longer
/// served (`error`, from [`unserved`]); it loads again once the type is.
pub(crate) async fn stop_unserved(
    engine: &mut Engine,
    owner: Owner,
    name: &str,
    origin: &(dyn Display + Sync),
    error: &Refused,
) {
    if engine.stop_owned(name, owner).await {
        engine.record_load(name, LoadResult::Unserved);
        tracing::warn!(plugin = %name, %origin, %error,
            "a type the plugin declares is no longer served: stopped; it loads again once it is");
    }
}

/// Stops the plugin `name` of `owner` because its source no longer asks
/// for it (`why`: its file removed, its resource deleted or suspended).
pub(crate) async fn stop(
    engine: &mut Engine,
    owner: Owner,
    name: &str,
    origin: &(dyn Display + Sync),
    why: &str,
) {
    if engine.stop_owned(name, owner).await {
        engine.record_load(name, LoadResult::Removed);
        tracing::info!(plugin = %name, %origin, "{why}: stopped");
    }
}
