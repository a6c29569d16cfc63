//! One plugin lifecycle for the host, fed by two sources that each say what
//! they want run: the plugin directory ([`directory`]: `NAME.wasm` or
//! `NAME.oci` with its grants and configuration) and the `Plugin` and
//! `ClusterPlugin` resources ([`crate::plugin_resource`], watched once the
//! cluster serves them). Both are controllers on a
//! [`WorkQueue`](crate::queue::WorkQueue) of their own keys, and follow one
//! set of rules ([`rules`]): load, swap in with the last good version kept,
//! refuse with a typed reason ([`crate::loader::Refused`]), stop while a
//! type is not served, resume.
//!
//! # Names
//! A plugin's name is one source's at a time ([`Owner`]), whichever asked
//! first: the engine refuses the other's load under it
//! ([`crate::Engine::run_loaded`], `NameTaken`), and stops a plugin only for
//! its owner ([`crate::Engine::stop_owned`]). When a name is freed (its
//! owner's file removed, resource deleted or suspended, type gone), the
//! other source's plugin refused under it loads.
//!
//! # Expected flow
//! ```text
//! directory changed ─▶ Directory ─┐                       ┌─▶ Engine::run_loaded
//! Plugin changed ───▶ PluginResources ─┼─ next_event ─▶ handle ─┤
//! types changed ────▶ both look again ─┘                       └─▶ Engine::stop_owned ─▶ names freed
//! ```
//! [`Lifecycle::next_event`] waits for whichever comes first;
//! [`Lifecycle::handle`] acts on it and then tells both sources which names
//! were freed. [`Lifecycle::settled`] is true once both have acted on
//! everything they listed: the host is ready then.

pub mod directory;
pub mod owner;
pub(crate) mod rules;

pub use directory::Directory;
pub use owner::{LoadResult, Owner};

use crate::Engine;
use crate::discovery::Discovered;
use crate::loader::Sources;
use crate::plugin_dir::ScanError;
use crate::plugin_resource::{self, PluginResources, ResourceOptions};

/// What [`Lifecycle::next_event`] gives, for [`Lifecycle::handle`].
#[derive(Debug)]
pub struct Event(Next);

#[derive(Debug)]
enum Next {
    Directory(directory::Event),
    Resource(plugin_resource::Event),
    TypesChanged,
}

/// Where the plugins come from, and how those of the resources run.
pub struct Setup {
    /// What plugins are loaded with.
    pub sources: Sources,
    /// The plugin directory.
    pub directory: std::path::PathBuf,
    /// The shares of the host's workers of the directory's plugins, by
    /// name (default [`crate::fair::DEFAULT_SHARE`]).
    pub shares: std::collections::BTreeMap<String, u32>,
    /// How `Plugin` and `ClusterPlugin` resources run.
    pub resources: ResourceOptions,
    /// Whether this replica writes the resources' statuses now.
    pub writes_statuses: tokio::sync::watch::Receiver<bool>,
}

/// The plugins the host runs, from both sources (see the module
/// documentation).
pub struct Lifecycle {
    client: kube::Client,
    setup: Setup,
    directory: Directory,
    resources: Option<PluginResources>,
    types: Discovered,
}

impl Lifecycle {
    /// Looks at the plugin directory, and watches the plugin resources if
    /// the cluster serves them (once it does, otherwise). Must be called
    /// within a tokio runtime.
    ///
    /// # Errors
    /// [`ScanError`] if the plugin directory cannot be read.
    pub fn start(client: kube::Client, setup: Setup) -> Result<Self, ScanError> {
        let mut directory = Directory::new(
            setup.directory.clone(),
            setup.sources.clone(),
            setup.shares.clone(),
        );
        directory.scan()?;
        let types = setup.sources.discovered.clone();
        let mut lifecycle = Self {
            client,
            setup,
            directory,
            resources: None,
            types,
        };
        lifecycle.watch_resources();
        if lifecycle.resources.is_none() {
            tracing::info!(
                "Plugin resources are not installed (kubewasm crds): watched once they are served"
            );
        }
        Ok(lifecycle)
    }

    /// Starts watching the plugin resources if the cluster serves them
    /// and they are not watched yet.
    fn watch_resources(&mut self) {
        let mapper = self.types.mapper();
        let served = ["Plugin", "ClusterPlugin"]
            .iter()
            .all(|kind| mapper.serves("kubewasm.dev", "v1alpha1", kind));
        if self.resources.is_some() || !served {
            return;
        }
        tracing::info!("watching Plugin and ClusterPlugin resources");
        self.resources = Some(PluginResources::start(
            self.client.clone(),
            self.setup.sources.clone(),
            self.setup.resources.clone(),
            self.setup.writes_statuses.clone(),
        ));
    }

    /// The next thing to do, from either source. Cancel-safe.
    pub async fn next_event(&mut self) -> Event {
        let resources = &mut self.resources;
        let resource = async move {
            match resources.as_mut() {
                Some(resources) => resources.next_event().await,
                None => std::future::pending().await,
            }
        };
        Event(tokio::select! {
            event = self.directory.next_event() => Next::Directory(event),
            event = resource => Next::Resource(event),
            () = self.types.changed() => Next::TypesChanged,
        })
    }

    /// Acts on what [`Self::next_event`] gave, then tells both sources the
    /// names it freed.
    pub async fn handle(&mut self, engine: &mut Engine, Event(next): Event) {
        match next {
            Next::Directory(event) => self.directory.handle(engine, event).await,
            Next::Resource(event) => {
                if let Some(resources) = self.resources.as_mut() {
                    resources.handle(engine, event).await;
                }
            }
            Next::TypesChanged => {
                // Each plugin looks again: one refused for a type not
                // served loads, one running a type gone stops.
                self.directory.look_again();
                if let Some(resources) = &self.resources {
                    resources.look_again();
                }
                self.watch_resources();
            }
        }
        for name in engine.take_freed() {
            self.directory.name_freed(&name);
            if let Some(resources) = &self.resources {
                resources.name_freed(&name);
            }
        }
    }

    /// Whether both sources acted on everything they listed (the
    /// resources' kinds listed once, if served).
    pub fn settled(&self) -> bool {
        self.directory.settled() && self.resources.as_ref().is_none_or(PluginResources::settled)
    }
}
