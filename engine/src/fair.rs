//! Fair shares of the host's workers: weighted fair queueing of steps,
//! over tenants, then over each tenant's plugins.
//!
//! The host runs at most `workers` steps at once ([`Workers`]). A step
//! waits for a [`Permit`]; when one is free and several plugins wait, the
//! permit goes by start-time fair queueing on worker time, in two levels:
//! 1. **Tenants.** Each has a virtual tag; the tenant with the lowest tag
//!    among those waiting is served. When a step of it ends, its tag grows
//!    by the step's worker time over the tenant's weight: the largest
//!    share of its busy plugins. So two saturated tenants of shares 1 and 3
//!    get worker time 1:3, and a tenant running ten plugins gets no more
//!    than one running one plugin of the same share.
//! 2. **Plugins** of the served tenant, the same way, each weighted by its
//!    own share.
//!
//! A step is charged when it starts, by its plugin's running average of
//! worker time, and settled when it ends (the difference added or taken
//! back): so a plugin with a step running is behind the plugins with none,
//! and with more plugins busy than workers each runs one step at a time
//! (its other workers wait while another plugin waits), keeping one warm
//! instance busy rather than two. Charged only at its end, a step left its
//! plugin's tag where it was, and the plugin's next waiter was served at
//! once beside it.
//!
//! A plugin's tenant is its `Plugin`'s namespace; a `ClusterPlugin` or a
//! directory plugin is a tenant of its own ([`Flow`]).
//!
//! # Guarantees
//! - **Work conserving.** A permit is never idle while a step waits: an
//!   idle plugin's share goes to the busy ones.
//! - **No credit for idleness.** A tenant or plugin that becomes busy
//!   again starts at the virtual time of those busy now, never behind it:
//!   it cannot bank its idle time to starve the others later; a newcomer is
//!   served at the next free permit.
//! - **Within limits.** A plugin never runs more steps at once than its
//!   workers (its concurrency): it waits with one waiter per worker.
//! - **Closed.** Once [`Workers::close`]d, waiters and new steps get
//!   [`Closed`]; steps in flight finish.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// The share a plugin gets when nothing says otherwise.
pub const DEFAULT_SHARE: u32 = 1;

/// The workers are closed: the host shuts down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the host's workers are closed (shutting down)")]
pub struct Closed;

/// Whose steps these are: a plugin, its tenant and its share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flow {
    /// The tenant (a `Plugin`'s namespace), or `None`: a tenant of its
    /// own.
    pub tenant: Option<String>,
    /// The plugin.
    pub plugin: String,
    /// Its weight among its tenant's plugins, and its tenant's among the
    /// tenants (at least 1).
    pub share: u32,
}

impl Flow {
    /// A plugin that is a tenant of its own, with the default share.
    pub fn own(plugin: &str) -> Self {
        Self {
            tenant: None,
            plugin: plugin.to_owned(),
            share: DEFAULT_SHARE,
        }
    }

    fn tenant_key(&self) -> String {
        match &self.tenant {
            // A namespace cannot contain `/`; a plugin name neither.
            Some(namespace) => format!("{namespace}/"),
            None => self.plugin.clone(),
        }
    }
}

/// One queue of waiters with its virtual tag.
#[derive(Debug, Default)]
struct Lane {
    tag: f64,
    running: usize,
    waiting: usize,
    /// When it last became busy (a sequence number): among equal tags, the
    /// latest comer goes first (it starts at the lowest tag).
    since: u64,
}

impl Lane {
    fn busy(&self) -> bool {
        self.running + self.waiting > 0
    }
}

#[derive(Debug, Default)]
struct PluginLane {
    lane: Lane,
    share: u32,
    waiters: VecDeque<oneshot::Sender<Permit>>,
    /// Its steps' worker time, a running average (seconds): what a step is
    /// charged when it starts.
    estimate: f64,
}

/// The weight of the last step in a plugin's running average of worker time.
const RECENT: f64 = 0.2;

#[derive(Debug, Default)]
struct TenantLane {
    lane: Lane,
    /// Virtual time among its plugins: the tag of the one served last.
    clock: f64,
    plugins: BTreeMap<String, PluginLane>,
}

impl TenantLane {
    /// Its weight: the largest share of its busy plugins.
    fn weight(&self) -> f64 {
        self.plugins
            .values()
            .filter(|p| p.lane.busy())
            .map(|p| f64::from(p.share.max(1)))
            .fold(1.0, f64::max)
    }
}

#[derive(Debug, Default)]
struct State {
    free: usize,
    closed: bool,
    /// Virtual time among tenants: the tag of the one served last.
    clock: f64,
    tenants: BTreeMap<String, TenantLane>,
    /// Lanes that became busy so far.
    activations: u64,
}

impl State {
    /// The lowest tag among busy lanes, or `clock` if none is busy: where
    /// a lane that becomes busy starts.
    fn start_of<'a>(clock: f64, busy: impl Iterator<Item = &'a Lane>) -> f64 {
        busy.filter(|l| l.busy())
            .map(|l| l.tag)
            .reduce(f64::min)
            .unwrap_or(clock)
            .max(clock)
    }

    fn enqueue(&mut self, flow: &Flow, waiter: oneshot::Sender<Permit>) {
        self.activations += 1;
        let activation = self.activations;
        let start = Self::start_of(self.clock, self.tenants.values().map(|t| &t.lane));
        let tenant = self.tenants.entry(flow.tenant_key()).or_default();
        if !tenant.lane.busy() {
            tenant.lane.tag = tenant.lane.tag.max(start);
            tenant.lane.since = activation;
        }
        let start = Self::start_of(tenant.clock, tenant.plugins.values().map(|p| &p.lane));
        let plugin = tenant.plugins.entry(flow.plugin.clone()).or_default();
        plugin.share = flow.share;
        if !plugin.lane.busy() {
            plugin.lane.tag = plugin.lane.tag.max(start);
            plugin.lane.since = activation;
        }
        plugin.waiters.push_back(waiter);
        plugin.lane.waiting += 1;
        tenant.lane.waiting += 1;
    }

    /// The tenant and plugin to serve next: lowest tags, then the latest
    /// to become busy (a newcomer, starting at the lowest tag, goes first).
    fn pick(&self) -> Option<(String, String)> {
        let first = |a: &Lane, b: &Lane| a.tag.total_cmp(&b.tag).then(b.since.cmp(&a.since));
        let (tenant_key, tenant) = self
            .tenants
            .iter()
            .filter(|(_, t)| t.lane.waiting > 0)
            .min_by(|a, b| first(&a.1.lane, &b.1.lane))?;
        let (plugin_key, _) = tenant
            .plugins
            .iter()
            .filter(|(_, p)| p.lane.waiting > 0)
            .min_by(|a, b| first(&a.1.lane, &b.1.lane))?;
        Some((tenant_key.clone(), plugin_key.clone()))
    }

    /// Hands free permits to waiters.
    fn dispatch(&mut self, workers: &Arc<Workers>) {
        while self.free > 0 && !self.closed {
            let Some((tenant_key, plugin_key)) = self.pick() else {
                break;
            };
            let Some(tenant) = self.tenants.get_mut(&tenant_key) else {
                break;
            };
            let tenant_weight = tenant.weight();
            let Some(plugin) = tenant.plugins.get_mut(&plugin_key) else {
                break;
            };
            let Some(waiter) = plugin.waiters.pop_front() else {
                break;
            };
            plugin.lane.waiting -= 1;
            tenant.lane.waiting -= 1;
            self.clock = self.clock.max(tenant.lane.tag);
            tenant.clock = tenant.clock.max(plugin.lane.tag);
            plugin.lane.running += 1;
            tenant.lane.running += 1;
            // Charged now by its estimate; settled when it ends.
            let charged = (
                plugin.estimate / f64::from(plugin.share.max(1)),
                plugin.estimate / tenant_weight,
            );
            plugin.lane.tag += charged.0;
            tenant.lane.tag += charged.1;
            self.free -= 1;
            let permit = Permit {
                workers: Some(Arc::clone(workers)),
                tenant: tenant_key,
                plugin: plugin_key,
                started: Instant::now(),
                charged,
            };
            if let Err(mut permit) = waiter.send(permit) {
                // The waiter went (its step was cancelled): the permit
                // returns at once, its charge taken back.
                permit.workers = None;
                self.finish(&permit.tenant, &permit.plugin, None, permit.charged);
            }
        }
    }

    /// A step of `tenant`'s `plugin` that was `charged` when it started
    /// ended after `worked` (`None`: it never ran): settled, its permit
    /// free again.
    fn finish(
        &mut self,
        tenant_key: &str,
        plugin_key: &str,
        worked: Option<Duration>,
        charged: (f64, f64),
    ) {
        self.free += 1;
        let Some(tenant) = self.tenants.get_mut(tenant_key) else {
            return;
        };
        let tenant_weight = tenant.weight();
        let Some(plugin) = tenant.plugins.get_mut(plugin_key) else {
            return;
        };
        let seconds = worked.map_or(0.0, |w| w.as_secs_f64());
        if worked.is_some() {
            plugin.estimate += RECENT * (seconds - plugin.estimate);
        }
        plugin.lane.running = plugin.lane.running.saturating_sub(1);
        plugin.lane.tag += seconds / f64::from(plugin.share.max(1)) - charged.0;
        tenant.lane.running = tenant.lane.running.saturating_sub(1);
        tenant.lane.tag += seconds / tenant_weight - charged.1;
        // Idle lanes that owe nothing are forgotten (bounded memory).
        if !plugin.lane.busy() && plugin.lane.tag <= tenant.clock {
            tenant.plugins.remove(plugin_key);
        }
        if !tenant.lane.busy() && tenant.plugins.is_empty() && tenant.lane.tag <= self.clock {
            self.tenants.remove(tenant_key);
        }
    }
}

/// The host's workers, shared fairly (see the module documentation).
#[derive(Debug)]
pub struct Workers {
    state: Mutex<State>,
}

impl Workers {
    /// `workers` workers (at least one).
    pub fn new(workers: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                free: workers.max(1),
                ..State::default()
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for a permit to run one step of `flow`.
    ///
    /// # Errors
    /// [`Closed`] once the workers are closed.
    pub async fn acquire(self: &Arc<Self>, flow: &Flow) -> Result<Permit, Closed> {
        let (sender, receiver) = oneshot::channel();
        {
            let mut state = self.lock();
            if state.closed {
                return Err(Closed);
            }
            state.enqueue(flow, sender);
            state.dispatch(self);
        }
        receiver.await.map_err(|_| Closed)
    }

    /// Closes the workers: every waiter gets [`Closed`].
    pub fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        for tenant in state.tenants.values_mut() {
            for plugin in tenant.plugins.values_mut() {
                plugin.waiters.clear();
                plugin.lane.waiting = 0;
            }
            tenant.lane.waiting = 0;
        }
    }

    /// Permits free now.
    pub fn available(&self) -> usize {
        self.lock().free
    }
}

/// The right to run one step; dropping it ends the step, charging its
/// worker time to its plugin and tenant.
#[derive(Debug)]
pub struct Permit {
    /// `None` once returned (never charged twice).
    workers: Option<Arc<Workers>>,
    tenant: String,
    plugin: String,
    started: Instant,
    /// What the plugin and its tenant were charged when it started.
    charged: (f64, f64),
}

impl Permit {
    /// Ends this step and waits for the next one of `flow` (the same
    /// plugin, with more work ready), competing with the waiters at this
    /// very moment: the permit stays if `flow` is due before them, else
    /// goes to the one due first. (Dropping it and then calling
    /// [`Workers::acquire`] would hand it to whoever waits, whatever their
    /// shares.)
    ///
    /// # Errors
    /// [`Closed`] once the workers are closed.
    pub async fn next_turn(mut self, flow: &Flow) -> Result<Permit, Closed> {
        let Some(workers) = self.workers.take() else {
            return Err(Closed);
        };
        let (sender, receiver) = oneshot::channel();
        {
            let mut state = workers.lock();
            state.finish(
                &self.tenant,
                &self.plugin,
                Some(self.started.elapsed()),
                self.charged,
            );
            if state.closed {
                return Err(Closed);
            }
            state.enqueue(flow, sender);
            state.dispatch(&workers);
        }
        receiver.await.map_err(|_| Closed)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let Some(workers) = self.workers.take() else {
            return;
        };
        let mut state = workers.lock();
        state.finish(
            &self.tenant,
            &self.plugin,
            Some(self.started.elapsed()),
            self.charged,
        );
        state.dispatch(&workers);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(tenant: &str, plugin: &str, share: u32) -> Flow {
        Flow {
            tenant: Some(tenant.to_owned()),
            plugin: plugin.to_owned(),
            share,
        }
    }

    /// Runs `flows` saturated (each with `concurrency` steps waiting at all
    /// times, each step `step` long) on `workers` workers for `total`:
    /// the steps each ran.
    async fn saturate(
        workers: usize,
        flows: &[(Flow, usize)],
        step: Duration,
        total: Duration,
    ) -> Vec<usize> {
        let pool = Workers::new(workers);
        let deadline = tokio::time::Instant::now() + total;
        let mut tasks = Vec::new();
        for (flow, concurrency) in flows {
            for _ in 0..*concurrency {
                let (pool, flow) = (Arc::clone(&pool), flow.clone());
                tasks.push(tokio::spawn(async move {
                    let mut ran = 0;
                    // Always more work: each step's end is the next turn's
                    // request, as a worker with keys ready makes it.
                    let mut permit = pool.acquire(&flow).await.expect("open");
                    while tokio::time::Instant::now() < deadline {
                        tokio::time::sleep(step).await;
                        ran += 1;
                        permit = permit.next_turn(&flow).await.expect("open");
                    }
                    ran
                }));
            }
        }
        let mut per_flow = vec![0; flows.len()];
        let mut tasks = tasks.into_iter();
        for (i, (_, concurrency)) in flows.iter().enumerate() {
            for task in tasks.by_ref().take(*concurrency) {
                per_flow[i] += task.await.expect("task");
            }
        }
        per_flow
    }

    // Worker time is measured with std's clock, which paused tokio time
    // does not move: these run in real time, briefly.
    #[tokio::test]
    async fn saturated_tenants_should_get_worker_time_by_their_shares() {
        let ran = saturate(
            2,
            &[(flow("a", "p", 1), 2), (flow("b", "q", 3), 2)],
            Duration::from_millis(2),
            Duration::from_millis(800),
        )
        .await;
        let ratio = ran[1] as f64 / ran[0] as f64;
        assert!((2.4..=3.6).contains(&ratio), "1:3 shares ran {ran:?}");
    }

    #[tokio::test]
    async fn a_tenant_with_many_plugins_should_get_no_more_than_one_with_one() {
        let ran = saturate(
            2,
            &[
                (flow("many", "p1", 1), 2),
                (flow("many", "p2", 1), 2),
                (flow("many", "p3", 1), 2),
                (flow("one", "q", 1), 2),
            ],
            Duration::from_millis(2),
            Duration::from_millis(800),
        )
        .await;
        let many: usize = ran[..3].iter().sum();
        let ratio = many as f64 / ran[3] as f64;
        assert!((0.75..=1.33).contains(&ratio), "tenants ran {ran:?}");
    }

    #[tokio::test]
    async fn with_more_plugins_busy_than_workers_each_should_run_one_step_at_a_time() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let pool = Workers::new(2);
        let deadline = tokio::time::Instant::now() + Duration::from_millis(600);
        let warm = tokio::time::Instant::now() + Duration::from_millis(100);
        // Per plugin: steps running now; steps begun beside another of its own.
        let plugins: Vec<_> = (0..4)
            .map(|p| {
                (
                    flow(&format!("t{p}"), "p", 1),
                    Arc::new((AtomicUsize::new(0), AtomicUsize::new(0))),
                )
            })
            .collect();
        let (steps, beside) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let mut tasks = Vec::new();
        for (flow, running) in &plugins {
            for _ in 0..2 {
                let (pool, flow, running) = (Arc::clone(&pool), flow.clone(), Arc::clone(running));
                let (steps, beside) = (Arc::clone(&steps), Arc::clone(&beside));
                tasks.push(tokio::spawn(async move {
                    let mut permit = pool.acquire(&flow).await.expect("open");
                    while tokio::time::Instant::now() < deadline {
                        let others = running.0.fetch_add(1, Ordering::SeqCst);
                        if tokio::time::Instant::now() > warm {
                            steps.fetch_add(1, Ordering::SeqCst);
                            if others > 0 {
                                beside.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        running.0.fetch_sub(1, Ordering::SeqCst);
                        permit = permit.next_turn(&flow).await.expect("open");
                    }
                }));
            }
        }
        for task in tasks {
            task.await.expect("task");
        }
        let (steps, beside) = (steps.load(Ordering::SeqCst), beside.load(Ordering::SeqCst));
        assert!(steps > 100, "{steps} steps");
        assert!(
            beside * 20 < steps,
            "{beside} of {steps} steps began beside another of their plugin's"
        );
    }

    #[tokio::test]
    async fn a_plugin_should_never_hold_more_permits_than_its_waiters() {
        // One plugin with one worker, alone on four workers: it runs one
        // step at a time, and three permits stay free.
        let pool = Workers::new(4);
        let permit = pool.acquire(&Flow::own("solo")).await.expect("open");
        assert_eq!(pool.available(), 3);
        drop(permit);
        assert_eq!(pool.available(), 4);
    }

    #[tokio::test]
    async fn a_newcomer_should_be_served_at_the_next_free_permit() {
        let pool = Workers::new(1);
        let busy = flow("busy", "p", 1);
        let held = pool.acquire(&busy).await.expect("open");
        // The busy tenant queues ten more steps, then the newcomer one.
        let mut queued = Vec::new();
        for _ in 0..10 {
            let (pool, busy) = (Arc::clone(&pool), busy.clone());
            queued.push(tokio::spawn(async move {
                pool.acquire(&busy).await.map(|_| Instant::now())
            }));
        }
        tokio::task::yield_now().await;
        let newcomer = tokio::spawn({
            let pool = Arc::clone(&pool);
            async move {
                pool.acquire(&flow("new", "q", 1))
                    .await
                    .map(|_| Instant::now())
            }
        });
        tokio::task::yield_now().await;
        std::thread::sleep(Duration::from_millis(5));
        drop(held);
        let newcomer_at = newcomer.await.expect("task").expect("served");
        let mut later = 0;
        for task in queued {
            if task.await.expect("task").expect("served") > newcomer_at {
                later += 1;
            }
        }
        assert!(
            later >= 9,
            "the newcomer waited behind {} steps",
            10 - later
        );
    }

    #[tokio::test]
    async fn closing_should_refuse_waiters_and_newcomers() {
        let pool = Workers::new(1);
        let held = pool.acquire(&Flow::own("a")).await.expect("open");
        let waiter = tokio::spawn({
            let pool = Arc::clone(&pool);
            async move { pool.acquire(&Flow::own("b")).await.map(|_| ()) }
        });
        tokio::task::yield_now().await;
        pool.close();
        assert_eq!(waiter.await.expect("task"), Err(Closed));
        assert_eq!(pool.acquire(&Flow::own("c")).await.map(|_| ()), Err(Closed));
        drop(held);
    }

    #[tokio::test]
    async fn a_waiter_that_went_should_not_keep_its_permit() {
        let pool = Workers::new(1);
        let held = pool.acquire(&Flow::own("a")).await.expect("open");
        let gone = tokio::spawn({
            let pool = Arc::clone(&pool);
            async move { pool.acquire(&Flow::own("b")).await.map(|_| ()) }
        });
        tokio::task::yield_now().await;
        gone.abort();
        let _ = gone.await;
        drop(held);
        assert_eq!(pool.available(), 1, "the permit came back");
        let again = pool.acquire(&Flow::own("c")).await.expect("open");
        drop(again);
    }
}
