//! The loads in flight ([`Loads`]): the latest of each plugin counting,
//! each tenant's turns, the compile slots every tenant shares, and the
//! cancellation of a load where it waits ([`Slot`], [`Interrupter`]). The
//! guarantees are the [module above](super)'s.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tokio::task::JoinSet;

use super::outcome::{Loaded, Prepared, Refused};
use kubewasm_runtime::Plugin;

/// How many loads of one tenant run at once (pulling or compiling); its
/// others wait behind them. The operator's plugins have as many as the
/// compile slots if that is more.
pub const TENANT_LOADS: usize = 2;

/// The tenant a plugin's loads are queued under: a tenant plugin's
/// namespace (`NAMESPACE.NAME`), or the operator's (empty) for the rest.
fn tenant_of(plugin: &str) -> &str {
    plugin
        .split_once('.')
        .map_or("", |(namespace, _)| namespace)
}

/// What one load runs under, on its blocking thread: the host's compile
/// slots, and its own cancellation.
pub struct Slot {
    compiling: Arc<tokio::sync::Semaphore>,
    cancelled: tokio::sync::watch::Receiver<bool>,
}

impl Slot {
    /// A slot of its own, never cancelled: one load run outside [`Loads`].
    pub fn alone() -> Self {
        Self {
            compiling: Arc::new(tokio::sync::Semaphore::new(1)),
            cancelled: tokio::sync::watch::channel(false).1,
        }
    }

    /// Waits for `future` (a pull, a review) within the tokio runtime this
    /// blocking thread belongs to, unless the load is cancelled meanwhile.
    ///
    /// # Errors
    /// [`Refused::Cancelled`] once the plugin changed again or went.
    pub fn wait<F: std::future::Future>(&self, future: F) -> Result<F::Output, Refused> {
        let mut cancelled = self.cancelled.clone();
        let told = async move {
            if cancelled.wait_for(|c| *c).await.is_err() {
                // No one left to tell it (a slot alone): never.
                std::future::pending::<()>().await;
            }
        };
        tokio::runtime::Handle::current().block_on(async move {
            tokio::select! {
                // Told first: a cancelled load does no more work, even when
                // what it waits for is ready too.
                biased;
                () = told => Err(Refused::Cancelled),
                output = future => Ok(output),
            }
        })
    }

    /// Runs `compile` holding one of the host's compile slots (one per core).
    ///
    /// # Errors
    /// [`Refused::Cancelled`] when cancelled while waiting for a slot.
    pub fn compile<T>(&self, compile: impl FnOnce() -> T) -> Result<T, Refused> {
        let _permit = self.wait(Arc::clone(&self.compiling).acquire_owned())?;
        Ok(compile())
    }
}

/// A finished load task: its number, what it loaded, what it gave.
type LoadDone<O> = (u64, O, Result<Prepared, Refused>);

/// The latest load of a plugin: its number, and what cancels it.
struct Latest {
    id: u64,
    cancel: tokio::sync::watch::Sender<bool>,
}

/// The latest load of each plugin (a later one makes earlier ones void).
#[derive(Default)]
struct Latests(std::sync::Mutex<HashMap<String, Latest>>);

impl Latests {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Latest>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether load `id` is still the latest of `name`.
    fn is_latest(&self, name: &str, id: u64) -> bool {
        self.lock().get(name).is_some_and(|l| l.id == id)
    }

    /// Makes `latest` the latest of `name`, cancelling the one before.
    fn replace(&self, name: &str, latest: Latest) {
        if let Some(before) = self.lock().insert(name.to_owned(), latest) {
            before.cancel.send_replace(true);
        }
    }

    /// Cancels the latest of `name`, leaving none.
    fn cancel(&self, name: &str) {
        if let Some(before) = self.lock().remove(name) {
            before.cancel.send_replace(true);
        }
    }
}

/// Stops a plugin's load in flight where it waits, from outside the loop
/// that owns the [`Loads`] (a watch that saw the plugin's resource change or
/// go while its key is processing): the load ends at once as
/// [`Refused::Cancelled`], handed back by [`Loads::next`] as any result, so
/// that its owner finishes with the key and looks at it again.
#[derive(Clone)]
pub struct Interrupter(Arc<Latests>);

impl Interrupter {
    /// Stops the latest load of `name`, if one is in flight.
    pub fn interrupt(&self, name: &str) {
        if let Some(latest) = self.0.lock().get(name) {
            latest.cancel.send_replace(true);
        }
    }
}

/// Loads in flight, each on a blocking thread, the latest of each plugin
/// counting, fair between tenants (see the module documentation). `O` says
/// where a load came from (a plugin's files, a `Plugin` resource), handed
/// back with it.
pub struct Loads<O> {
    latest: Arc<Latests>,
    /// One per load allowed to compile at once.
    compiling: Arc<tokio::sync::Semaphore>,
    /// How many: one per core.
    compiling_slots: usize,
    /// Each tenant's turns ([`TENANT_LOADS`]), while it has loads.
    tenants: HashMap<String, Arc<tokio::sync::Semaphore>>,
    next_load: u64,
    /// Loads in flight; `None` for one superseded before it ran.
    loads: JoinSet<Option<(String, LoadDone<O>)>>,
    /// The loads in flight of new code: tier-ups aside, which only make
    /// code that already runs faster.
    awaited: HashSet<tokio::task::Id>,
}

impl<O: Send + 'static> Default for Loads<O> {
    fn default() -> Self {
        let compiling_slots =
            std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        Self {
            latest: Arc::default(),
            compiling: Arc::new(tokio::sync::Semaphore::new(compiling_slots)),
            compiling_slots,
            tenants: HashMap::new(),
            next_load: 0,
            loads: JoinSet::new(),
            awaited: HashSet::new(),
        }
    }
}

impl<O: Send + 'static> Loads<O> {
    /// Starts loading the plugin `name` with `load`, making any earlier
    /// load of it void (and stopping it where it waits).
    pub fn spawn(
        &mut self,
        name: &str,
        origin: O,
        load: impl FnOnce(&Slot) -> Result<Prepared, Refused> + Send + 'static,
    ) {
        let task = self.start(name, origin, load);
        self.awaited.insert(task);
    }

    /// Starts `load` as the latest load of `name`; its task's id.
    fn start(
        &mut self,
        name: &str,
        origin: O,
        load: impl FnOnce(&Slot) -> Result<Prepared, Refused> + Send + 'static,
    ) -> tokio::task::Id {
        self.next_load += 1;
        let id = self.next_load;
        let (cancel, cancelled) = tokio::sync::watch::channel(false);
        self.latest.replace(name, Latest { id, cancel });
        // Tenants with no load left give their entry up.
        self.tenants.retain(|_, turns| Arc::strong_count(turns) > 1);
        let tenant = tenant_of(name);
        let count = if tenant.is_empty() {
            TENANT_LOADS.max(self.compiling_slots)
        } else {
            TENANT_LOADS
        };
        let turns = Arc::clone(
            self.tenants
                .entry(tenant.to_owned())
                .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(count))),
        );
        let slot = Slot {
            compiling: Arc::clone(&self.compiling),
            cancelled,
        };
        let (name, latest) = (name.to_owned(), Arc::clone(&self.latest));
        let task = self.loads.spawn(async move {
            // Closed never: the semaphore lives as long as the task.
            let _turn = turns.acquire_owned().await.ok();
            if !latest.is_latest(&name, id) {
                return None;
            }
            match tokio::task::spawn_blocking(move || (id, origin, load(&slot))).await {
                Ok(done) => Some((name, done)),
                Err(error) => {
                    tracing::error!(%error, "a plugin load task failed");
                    None
                }
            }
        });
        task.id()
    }

    /// When `plugin` (just started as `name`) runs baseline code, starts
    /// compiling its optimized code: the load gives it back, with the same
    /// configuration, as a [`Prepared::tier_up`] to swap in. A newer load of
    /// the plugin makes it void, as any other.
    pub fn tier_up(
        &mut self,
        name: &str,
        origin: O,
        plugin: &Arc<Plugin>,
        config: &str,
        artifact: Option<String>,
    ) {
        if !plugin.is_baseline() {
            return;
        }
        let (plugin, config) = (Arc::clone(plugin), config.to_owned());
        self.start(name, origin, move |slot| {
            Ok(Prepared {
                plugin: slot.compile(|| plugin.optimized())??,
                config,
                artifact,
                tier_up: true,
            })
        });
    }

    /// What stops a load in flight from elsewhere.
    pub fn interrupter(&self) -> Interrupter {
        Interrupter(Arc::clone(&self.latest))
    }

    /// Makes every load of `name` in flight void (the plugin went), and
    /// stops it where it waits.
    pub fn cancel(&mut self, name: &str) {
        self.latest.cancel(name);
    }

    /// Loads of new code not finished yet (a plugin's first version, a
    /// change): what a host waits for before it says it is ready. A tier-up
    /// does not count: the plugin it speeds up already runs.
    pub fn pending(&self) -> usize {
        self.awaited.len()
    }

    /// The next load to finish that is still the latest of its plugin,
    /// with the plugin's name; `None` when none is in flight.
    pub async fn next(&mut self) -> Option<(String, Loaded<O>)> {
        loop {
            let (name, (id, origin, loaded)) = match self.loads.join_next_with_id().await? {
                Ok((task, Some(done))) => {
                    self.awaited.remove(&task);
                    done
                }
                Ok((task, None)) => {
                    self.awaited.remove(&task);
                    continue;
                }
                Err(error) => {
                    self.awaited.remove(&error.id());
                    tracing::error!(%error, "a plugin load task failed");
                    continue;
                }
            };
            if !self.latest.is_latest(&name, id) {
                tracing::debug!(plugin = %name, "a newer load superseded this one");
                continue;
            }
            self.latest.lock().remove(&name);
            let loaded = match loaded {
                Ok(prepared) => Loaded::Ready { origin, prepared },
                Err(error) => Loaded::Refused { origin, error },
            };
            return Some((name, loaded));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bounds each wait of the tests below: a load that never ends fails
    /// them rather than hanging.
    const WAIT: std::time::Duration = std::time::Duration::from_secs(10);

    async fn next_of<O: Send + 'static>(loads: &mut Loads<O>) -> Option<(String, Loaded<O>)> {
        tokio::time::timeout(WAIT, loads.next())
            .await
            .expect("a load ends, or none is left, within 10 s")
    }

    fn refused(_: &Slot) -> Result<Prepared, Refused> {
        Err(Refused::NameTaken {
            name: "taken".to_owned(),
            holder: crate::lifecycle::owner::Owner::Directory,
        })
    }

    #[tokio::test]
    async fn only_the_latest_load_of_a_plugin_should_count() {
        let mut loads = Loads::<u32>::default();
        let (release, held) = std::sync::mpsc::channel::<()>();
        // a's first load runs while a second one starts; b is cancelled.
        loads.spawn("a", 1, move |slot| {
            let _ = held.recv();
            refused(slot)
        });
        loads.spawn("a", 2, refused);
        loads.spawn("b", 1, refused);
        loads.cancel("b");
        release.send(()).expect("the first load waits");
        let (name, loaded) = loads.next().await.expect("a");
        assert_eq!(name, "a");
        assert!(
            matches!(loaded, Loaded::Refused { origin: 2, .. }),
            "{loaded:?}"
        );
        assert!(loads.next().await.is_none(), "one result for a, none for b");
        assert_eq!(loads.pending(), 0);
    }

    #[tokio::test]
    async fn only_loads_of_new_code_should_be_pending() {
        let mut loads = Loads::<()>::default();
        let (release, held) = std::sync::mpsc::channel::<()>();
        // A tier-up of `a` (started as `tier_up` does) and a new `b`.
        loads.start("a", (), move |slot| {
            let _ = held.recv();
            refused(slot)
        });
        loads.spawn("b", (), refused);
        assert_eq!(loads.pending(), 1, "b only: a's code already runs");
        let (first, _) = loads.next().await.expect("b");
        assert_eq!(first, "b");
        assert_eq!(loads.pending(), 0);
        release.send(()).expect("a waits");
        let (second, _) = loads.next().await.expect("a");
        assert_eq!(second, "a");
    }

    /// A load that waits on a registry which never answers, until it is
    /// cancelled; it says when it starts.
    fn stalled(
        started: std::sync::mpsc::Sender<&'static str>,
        name: &'static str,
    ) -> impl FnOnce(&Slot) -> Result<Prepared, Refused> + Send + 'static {
        move |slot| {
            let _ = started.send(name);
            slot.wait(std::future::pending::<()>())?;
            refused(slot)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tenants_stalled_loads_should_wait_behind_its_own_and_delay_no_other() {
        let mut loads = Loads::<()>::default();
        let (started, starts) = std::sync::mpsc::channel();
        for name in ["team-a.one", "team-a.two", "team-a.three"] {
            loads.spawn(name, (), stalled(started.clone(), name));
        }
        // Two of team-a's take its turns (whichever task ran first); the
        // third waits behind them.
        let first = [
            starts.recv_timeout(WAIT).expect("a first starts"),
            starts.recv_timeout(WAIT).expect("a second starts"),
        ];
        let team_a = ["team-a.one", "team-a.two", "team-a.three"];
        let third = team_a
            .iter()
            .find(|n| !first.contains(n))
            .expect("one waits");
        // Another tenant's load, and the operator's, run meanwhile.
        loads.spawn("team-b.mover", (), refused);
        loads.spawn("replicator", (), refused);
        let mut done = Vec::new();
        for _ in 0..2 {
            let (name, loaded) = next_of(&mut loads).await.expect("a load ends");
            assert!(matches!(
                loaded,
                Loaded::Refused {
                    error: Refused::NameTaken { .. },
                    ..
                }
            ));
            done.push(name);
        }
        done.sort_unstable();
        assert_eq!(done, ["replicator", "team-b.mover"]);
        assert!(
            starts.try_recv().is_err(),
            "team-a's third still waits its turn"
        );
        // Deleting a stalled plugin stops its pull at once: the third starts.
        loads.cancel(first[0]);
        assert_eq!(starts.recv_timeout(WAIT).expect("the third starts"), *third);
        for name in team_a {
            loads.cancel(name);
        }
        assert!(
            next_of(&mut loads).await.is_none(),
            "a cancelled load gives nothing"
        );
        assert_eq!(loads.pending(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_load_superseded_while_it_pulls_should_stop_pulling() {
        let mut loads = Loads::<u32>::default();
        let (started, starts) = std::sync::mpsc::channel();
        loads.spawn("team-a.one", 1, stalled(started, "first"));
        assert_eq!(
            starts.recv_timeout(WAIT).expect("the first starts"),
            "first"
        );
        loads.spawn("team-a.one", 2, refused);
        let (name, loaded) = next_of(&mut loads).await.expect("the second ends");
        assert_eq!(name, "team-a.one");
        assert!(
            matches!(loaded, Loaded::Refused { origin: 2, .. }),
            "{loaded:?}"
        );
        assert!(
            next_of(&mut loads).await.is_none(),
            "the first stopped, and gave nothing"
        );
    }

    #[test]
    fn a_tenant_should_be_its_plugins_namespace() {
        assert_eq!(tenant_of("team-a.mover"), "team-a");
        assert_eq!(tenant_of("replicator"), "");
    }
}
