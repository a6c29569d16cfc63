//! The plugin directory as a source of plugins: what its files ask to run,
//! compared with what runs, one plugin name at a time, on a [`WorkQueue`]
//! as a controller's keys are.
//!
//! # Expected flow
//! The directory is looked at ([`plugin_dir::scan`]) when the kernel says
//! it changed (after [`SETTLE`], so the events of one write-and-rename
//! come together) and every [`RESCAN`] regardless. Each plugin added,
//! changed (its component, grants or configuration) or removed since the
//! last look has its name queued; so has every plugin when the cluster's
//! types change, and a name another source freed. A name due is compared,
//! level-triggered, with what runs:
//! - its files gone: the directory's plugin of that name stops;
//! - its files not loaded yet, changed since their last load, or refused
//!   for a reason that may have passed (a registry not reached: after the
//!   queue's backoff, from [`RETRY_FIRST`] to [`RETRY_MAX`]; a type not
//!   served: once the types changed; the name taken: once it is freed):
//!   loaded ([`loader::load`], on a blocking thread), the key processing
//!   until what the load gave is run or refused ([`super::rules`]);
//! - its plugin running but declaring a type no longer served: stopped,
//!   loaded again once the type is served.
//!
//! A key is never processed twice at once, so a plugin has one load of new
//! code in flight at most; a change meanwhile runs its key once more after.
//! A load whose files changed before it ended is not run: the next one is.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use kubewasm_runtime::resource::ObjectKey;

use super::owner::Owner;
use super::rules;
use crate::Engine;
use crate::controller::Settings;
use crate::fair::DEFAULT_SHARE;
use crate::loader::{self, Loaded, Loads, Prepared, Refused, Sources};
use crate::plugin_dir::{self, Fingerprint, Listing, PluginFiles, ScanError};
use crate::queue::{Backoff, Done, Priority, WorkQueue};

/// How often the plugin directory is looked at, notified of a change or
/// not.
pub const RESCAN: Duration = Duration::from_millis(500);

/// How long after a change notification the directory is looked at.
pub const SETTLE: Duration = Duration::from_millis(5);

/// First wait before a load refused for a reason that may pass is tried
/// again.
pub const RETRY_FIRST: Duration = Duration::from_secs(2);

/// Longest wait between tries.
pub const RETRY_MAX: Duration = Duration::from_secs(300);

/// What [`Directory::next_event`] gives.
#[derive(Debug)]
pub enum Event {
    /// Time to look at the directory.
    Rescan,
    /// A plugin's name is due.
    Due(String),
    /// A load finished: the plugin's name and what it gave.
    Loaded(String, Box<Loaded<PluginFiles>>),
}

/// What the directory source does of one plugin name.
#[derive(Debug, Default)]
struct Tracked {
    /// The files' fingerprint last loaded (or loading).
    loaded: Option<Fingerprint>,
    /// Whether a load of new code is in flight (its key processing).
    loading: bool,
    /// Why the last load was refused, if it was.
    refused: Option<Refused>,
}

impl Tracked {
    /// Whether the same files, refused last time, may load now.
    fn may_load_again(&self, epoch: u64, name_free: bool) -> bool {
        self.refused.as_ref().is_some_and(|refused| {
            refused.may_pass()
                || refused.unserved_at().is_some_and(|at| at != epoch)
                || (matches!(refused, Refused::NameTaken { .. }) && name_free)
        })
    }
}

/// The plugins of one directory (see the module documentation).
pub struct Directory {
    dir: PathBuf,
    sources: Sources,
    /// Each plugin's share of the host's workers, by name.
    shares: BTreeMap<String, u32>,
    listing: Listing,
    /// Whether the directory has been looked at once.
    listed: bool,
    watch: Option<plugin_dir::Watch>,
    tick: tokio::time::Interval,
    queue: WorkQueue,
    loads: Loads<PluginFiles>,
    tracked: BTreeMap<String, Tracked>,
}

impl Directory {
    /// The plugins of `dir`, not looked at yet; each runs with its share
    /// in `shares` ([`DEFAULT_SHARE`] if none). Must be called within a
    /// tokio runtime.
    pub fn new(dir: PathBuf, sources: Sources, shares: BTreeMap<String, u32>) -> Self {
        let watch = plugin_dir::watch(&dir)
            .inspect_err(|error| {
                tracing::warn!(%error, dir = %dir.display(),
                    "no change notifications for the plugin directory; looking every 500 ms");
            })
            .ok();
        let mut tick = tokio::time::interval(RESCAN);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            dir,
            sources,
            shares,
            listing: Listing::default(),
            listed: false,
            watch,
            tick,
            queue: WorkQueue::new(Backoff {
                base: RETRY_FIRST,
                max: RETRY_MAX,
                ..Backoff::default()
            }),
            loads: Loads::default(),
            tracked: BTreeMap::new(),
        }
    }

    /// The next thing to do. Cancel-safe.
    pub async fn next_event(&mut self) -> Event {
        let watch = &self.watch;
        let changed = async move {
            match watch {
                Some(watch) => {
                    watch.changed().await;
                    tokio::time::sleep(SETTLE).await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            Some((name, loaded)) = self.loads.next() => Event::Loaded(name, Box::new(loaded)),
            Some((key, _)) = self.queue.next() => Event::Due(key.name.clone()),
            () = changed => Event::Rescan,
            _ = self.tick.tick() => Event::Rescan,
        }
    }

    /// Acts on what [`Self::next_event`] gave.
    pub async fn handle(&mut self, engine: &mut Engine, event: Event) {
        match event {
            Event::Rescan => self.rescan(),
            Event::Due(name) => self.reconcile(engine, &name).await,
            Event::Loaded(name, loaded) => self.finish(engine, &name, *loaded).await,
        }
    }

    /// Looks at the directory now: the names of what was added, changed or
    /// removed are queued.
    ///
    /// # Errors
    /// [`ScanError`] if it cannot be read: nothing changes, the plugins
    /// running keep running.
    pub fn scan(&mut self) -> Result<(), ScanError> {
        let now = plugin_dir::scan(&self.dir)?;
        for change in self.listing.changes(&now) {
            self.queue
                .add(ObjectKey::cluster(change.name()), Priority::Event);
        }
        self.listing = now;
        self.listed = true;
        Ok(())
    }

    fn rescan(&mut self) {
        if let Err(error) = self.scan() {
            tracing::warn!(%error, "plugin directory unreadable; plugins keep running");
        }
    }

    /// Every plugin looks again (the cluster's types changed): one waiting
    /// for a type loads, one running a type gone stops.
    pub fn look_again(&self) {
        for files in self.listing.plugins() {
            self.queue
                .add(ObjectKey::cluster(files.name.clone()), Priority::Event);
        }
    }

    /// The name `name` was freed by its owner: a plugin of the directory
    /// refused under it loads.
    pub fn name_freed(&self, name: &str) {
        let taken = self
            .tracked
            .get(name)
            .is_some_and(|t| matches!(t.refused, Some(Refused::NameTaken { .. })));
        if taken {
            self.queue.add(ObjectKey::cluster(name), Priority::Event);
        }
    }

    /// Whether the directory was looked at and every plugin in it acted on
    /// (its load of new code run or refused).
    pub fn settled(&self) -> bool {
        self.listed && self.queue.is_idle()
    }

    /// Compares what the files of `name` ask for with what runs, and acts
    /// (see the module documentation).
    async fn reconcile(&mut self, engine: &mut Engine, name: &str) {
        let key = ObjectKey::cluster(name);
        let Some((files, print)) = self.listing.get(name) else {
            self.loads.cancel(name);
            self.tracked.remove(name);
            rules::stop(
                engine,
                Owner::Directory,
                name,
                &self.dir.display(),
                "plugin removed",
            )
            .await;
            self.queue.done(&key, Done::Forget);
            return;
        };
        let types = self.sources.discovered.now();
        let tracked = self.tracked.entry(name.to_owned()).or_default();
        let name_free = engine.holder(name).is_none();
        if tracked.loaded.as_ref() == Some(print) && !tracked.may_load_again(types.epoch, name_free)
        {
            if let Some(error) = rules::unserved(engine, Owner::Directory, name, &types) {
                let origin = files.component.display();
                rules::stop_unserved(engine, Owner::Directory, name, &origin, &error).await;
                tracked.refused = Some(error);
            }
            self.queue.done(&key, Done::Forget);
            return;
        }
        tracked.loaded = Some(print.clone());
        tracked.loading = true;
        tracing::info!(plugin = %name, path = %files.component.display(),
            "loading plugin (compiled on first load, cached after)");
        let (files, sources) = (files.clone(), self.sources.clone());
        self.loads.spawn(name, files.clone(), move |slot| {
            loader::load(&sources, &files, slot)
        });
        // The key stays processing until the load is run or refused.
    }

    /// Runs or refuses what a load gave (see the module documentation).
    async fn finish(&mut self, engine: &mut Engine, name: &str, loaded: Loaded<PluginFiles>) {
        let Some(tracked) = self.tracked.get_mut(name) else {
            return; // removed: its key already ended
        };
        let loaded = loaded.under(&self.sources.discovered);
        let files = match &loaded {
            Loaded::Ready { origin, .. } | Loaded::Refused { origin, .. } => origin.clone(),
        };
        let origin = files.component.display();
        if !std::mem::take(&mut tracked.loading) {
            // The optimized code of the version running: no key waits on it.
            match loaded {
                Loaded::Ready { prepared, .. } => {
                    if let Err(error) = self.run(engine, &files, prepared).await {
                        tracing::warn!(plugin = %name, %origin, %error, "optimized code refused");
                    }
                }
                Loaded::Refused { error, .. } => tracing::warn!(plugin = %name, %origin, %error,
                    "optimized code refused; the baseline code keeps serving"),
            }
            return;
        }
        let key = ObjectKey::cluster(name);
        let current = self
            .listing
            .get(name)
            .is_some_and(|(_, print)| tracked.loaded.as_ref() == Some(print));
        if !current {
            // Changed or removed while it loaded: its key runs again.
            tracked.loaded = None;
            self.queue.done(&key, Done::Forget);
            return;
        }
        let refused = match loaded {
            Loaded::Ready { prepared, .. } => self.run(engine, &files, prepared).await.err(),
            Loaded::Refused { error, .. } => Some(error),
        };
        if let Some(error) = &refused {
            rules::refused(engine, Owner::Directory, name, &origin, error);
        }
        let done = match &refused {
            Some(error) if error.may_pass() => Done::Retry(error.to_string()),
            _ => Done::Forget,
        };
        if let Some(tracked) = self.tracked.get_mut(name) {
            tracked.refused = refused;
        }
        self.queue.done(&key, done);
    }

    /// Runs a loaded version of the plugin of `files`, its optimized code
    /// then loaded in the background.
    async fn run(
        &mut self,
        engine: &mut Engine,
        files: &PluginFiles,
        prepared: Prepared,
    ) -> Result<(), Refused> {
        let settings = Settings {
            share: self
                .shares
                .get(&files.name)
                .copied()
                .unwrap_or(DEFAULT_SHARE),
            ..Settings::default()
        };
        let origin = files.component.display();
        rules::run(
            engine,
            Owner::Directory,
            &origin,
            prepared,
            settings,
            (&mut self.loads, files.clone()),
        )
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::Discovered;
    use crate::oci::{self, Artifacts};
    use crate::signature::PublicKeys;
    use kubewasm_runtime::private_dir::PrivateDir;
    use kubewasm_runtime::{Runtime, RuntimeConfig};

    fn sources(dir: &std::path::Path, trust: bool) -> Sources {
        let runtime = Runtime::new(RuntimeConfig::default().pooling(false)).expect("engine");
        Sources {
            runtime,
            discovered: Discovered::fixed(kubewasm_runtime::mapper::RestMapper::builtin()),
            trust,
            artifacts: Artifacts::new(
                PrivateDir::open(dir).expect("private directory"),
                oci::Access::default(),
            ),
            required_signatures: PublicKeys::default(),
        }
    }

    fn files(dir: &std::path::Path, name: &str) -> PluginFiles {
        plugin_dir::scan(dir)
            .expect("scanned")
            .get(name)
            .map(|(files, _)| files.clone())
            .expect("listed")
    }

    #[tokio::test]
    async fn a_refusal_should_say_why() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("a.wasm"), "not wasm").expect("written");
        let refused = loader::load(
            &sources(dir.path(), false),
            &files(dir.path(), "a"),
            &loader::Slot::alone(),
        );
        match refused {
            Err(Refused::NoGrants { grants }) => {
                assert_eq!(grants, dir.path().join("a.grants.yaml"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reference_that_cannot_be_fetched_should_be_refused_with_the_registry_named() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("bad.oci"), "oci://Not A Reference\n").expect("written");
        std::fs::write(dir.path().join("gone.oci"), "127.0.0.1:1/plugins/gone:1\n")
            .expect("written");
        let sources = sources(dir.path(), true);
        let mut errors = Vec::new();
        for name in ["bad", "gone"] {
            let (sources, files) = (sources.clone(), files(dir.path(), name));
            let loaded = tokio::task::spawn_blocking(move || {
                loader::load(&sources, &files, &loader::Slot::alone())
            })
            .await
            .expect("joined");
            match loaded {
                Err(error) => errors.push((name, error.may_pass(), error.to_string())),
                Ok(_) => panic!("{name} loaded"),
            }
        }
        assert!(errors[0].2.contains("invalid OCI reference"), "{errors:?}");
        assert!(!errors[0].1, "a bad reference stays bad");
        assert!(errors[1].2.contains("registry 127.0.0.1:1"), "{errors:?}");
        assert!(errors[1].1, "a registry not reached may be reached later");
    }

    #[test]
    fn only_a_refusal_that_may_pass_should_load_the_same_files_again() {
        let tracked = |refused| Tracked {
            loaded: None,
            loading: false,
            refused: Some(refused),
        };
        let taken = tracked(Refused::NameTaken {
            name: "a".to_owned(),
            holder: Owner::Resource,
        });
        assert!(!taken.may_load_again(1, false), "the name still taken");
        assert!(taken.may_load_again(1, true), "the name freed");
        let grants = tracked(Refused::NoGrants {
            grants: PathBuf::from("a.grants.yaml"),
        });
        assert!(
            !grants.may_load_again(2, true),
            "only a change of its files"
        );
        assert!(!Tracked::default().may_load_again(2, true));
    }
}
