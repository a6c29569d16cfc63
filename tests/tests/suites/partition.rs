//! A network partition, through the binary users run: one replica talks to
//! the API server through a loopback proxy that stops forwarding (its
//! requests hang, neither answered nor refused, and are lost when the
//! partition ends), the other talks to the server directly. The
//! partitioned replica must stop writing before its Lease can be taken:
//! every request it sends is seen by the proxy when it is sent, so a write
//! it sends after stepping down is caught even though the partition
//! swallows it. With `--leader-elect` the other replica takes over, and
//! after the partition heals the old leader writes nothing at all; with
//! `--sharding` the other takes every slot, and the healed replica writes
//! only once it holds slots again, never a key another step has at the
//! same time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kubewasm_tests::host::{Host, apply, create_all, get_json};
use kubewasm_tests::proxy::{Proxy, Seen};
use kubewasm_tests::spans::{Log, assert_no_overlap};
use kubewasm_tests::{Apiserver, example_file, example_plugin};
use serde_json::Value;

/// The Lease's duration: a leader steps down 2/3 of it after its last
/// renewal, the Lease can be taken after all of it.
const LEASE_SECONDS: u64 = 6;

/// A write the partitioned replica sent, and when.
struct Sent {
    at: Instant,
    verb: &'static str,
    target: String,
}

/// MyApps `prefix-from` .. of zero replicas.
fn myapps(prefix: &str, from: usize, count: usize) -> Vec<Value> {
    (from..from + count)
        .map(|i| {
            serde_json::json!({"apiVersion": "example.com/v1", "kind": "MyApp",
                "metadata": {"name": format!("{prefix}-{i}"), "namespace": "default"},
                "spec": {"replicas": 0, "image": "nginx:1.27", "port": 8080}})
        })
        .collect()
}

/// The writes seen from the partitioned replica, as it sent them.
struct Partitioned {
    proxy: Proxy,
    writes: Arc<Mutex<Vec<Sent>>>,
    kubeconfig: tempfile::NamedTempFile,
    _runtime: tokio::runtime::Runtime,
}

impl Partitioned {
    fn start(server: &Apiserver) -> Self {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let writes: Arc<Mutex<Vec<Sent>>> = Arc::default();
        let seen = Arc::clone(&writes);
        let proxy = runtime
            .block_on(async {
                let mut config = server.config().await?;
                config.read_timeout = None;
                let upstream = kube::Client::try_from(config)?;
                let proxy = Proxy::observing(upstream, move |request: &Seen| {
                    if request.writes() {
                        seen.lock().expect("writes").push(Sent {
                            at: Instant::now(),
                            verb: request.verb(),
                            target: request.target.clone(),
                        });
                    }
                })
                .await?;
                anyhow::Ok(proxy)
            })
            .expect("the proxy starts");
        let kubeconfig = tempfile::NamedTempFile::new().expect("tempfile");
        std::fs::write(kubeconfig.path(), proxy.kubeconfig()).expect("kubeconfig written");
        Self {
            proxy,
            writes,
            kubeconfig,
            _runtime: runtime,
        }
    }

    /// Its writes sent after `from` (Leases apart when `leases` is false).
    fn sent_after(&self, from: Instant, leases: bool) -> Vec<String> {
        self.writes
            .lock()
            .expect("writes")
            .iter()
            .filter(|w| w.at > from && (leases || !w.target.contains("/leases/")))
            .map(|w| format!("{} {} at +{:?}", w.verb, w.target, w.at - from))
            .collect()
    }
}

fn start(kubeconfig: &std::path::Path, mode: &[&str]) -> Host {
    let lease = LEASE_SECONDS.to_string();
    let mut flags = vec![
        "--leader-election-namespace",
        "default",
        "--leader-election-id",
        "partition",
        "--lease-duration-seconds",
        &lease,
    ];
    flags.extend_from_slice(mode);
    Host::start_as(
        kubeconfig,
        &[("myapp", example_plugin("myapp"))],
        &[],
        &flags,
    )
}

/// Waits until `done`, at most `within`.
fn until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?}: {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn deployments(server: &Apiserver) -> usize {
    get_json(server, &["deployments"])
        .and_then(|list| list["items"].as_array().map(Vec::len))
        .unwrap_or(0)
}

fn leads(host: &Host) -> bool {
    host.metric(r#"leader_election_master_status{name="partition"}"#) == Some(1.0)
}

fn slots(host: &Host) -> f64 {
    host.metric("kubewasm_shard_slots_held").unwrap_or(0.0)
}

/// A partition of `partitioned`, MyApps created throughout, until `taken`
/// (the other replica took over).
struct Cut {
    /// When it began.
    at: Instant,
    /// When `gone` first held (the partitioned replica stopped), from `at`.
    gone: Duration,
    /// When `taken` held, from `at`.
    taken: Duration,
    /// MyApps created meanwhile.
    created: usize,
}

impl Cut {
    fn make(
        server: &Apiserver,
        partitioned: &Partitioned,
        gone: impl Fn() -> bool,
        taken: impl Fn() -> bool,
    ) -> Self {
        partitioned.proxy.hold();
        let at = Instant::now();
        let (mut created, mut stopped) = (0, None);
        let deadline = at + Duration::from_secs(60);
        let taken = loop {
            create_all(server, myapps("during", created, 2));
            created += 2;
            if stopped.is_none() && gone() {
                stopped = Some(at.elapsed());
            }
            if taken() {
                break at.elapsed();
            }
            assert!(
                Instant::now() < deadline,
                "the other replica never took over"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let gone = stopped.expect("the partitioned replica stopped before the other took over");
        assert!(
            gone < Duration::from_secs(LEASE_SECONDS),
            "stopped {gone:?} after the cut: its Lease could be taken by then"
        );
        Self {
            at,
            gone,
            taken,
            created,
        }
    }

    /// Ends the partition, creates more MyApps and waits until every one
    /// converged and `also` holds.
    fn heal(&self, server: &Apiserver, partitioned: &Partitioned, also: impl Fn() -> bool) {
        partitioned.proxy.release();
        create_all(server, myapps("after", 0, 10));
        let all = 20 + self.created + 10;
        until("every MyApp converges", Duration::from_secs(90), || {
            deployments(server) == all && also()
        });
    }
}

/// Two replicas in `mode`, the first behind the partition, and 20 MyApps
/// converged.
fn replicas(
    server: &Apiserver,
    partitioned: &Partitioned,
    mode: &str,
    ready: impl Fn(&Host, &Host) -> bool,
) -> (Host, Host) {
    apply(server, &example_file("myapp", "crd.yaml"));
    let old = start(partitioned.kubeconfig.path(), &[mode]);
    // Started first, it leads (or holds the whole ring) before the other
    // comes.
    until("the first replica runs", Duration::from_secs(60), || {
        old.get("/readyz").0.contains("200") && (mode != "--leader-elect" || leads(&old))
    });
    let new = start(&server.kubeconfig, &[mode]);
    until("the replicas run", Duration::from_secs(60), || {
        ready(&old, &new)
    });
    create_all(server, myapps("before", 0, 20));
    until("the MyApps converge", Duration::from_secs(60), || {
        deployments(server) == 20
    });
    (old, new)
}

#[test]
fn a_partitioned_leader_should_step_down_in_time_and_write_nothing_after() {
    let server = Apiserver::start_with(&["--simulate-workloads"]);
    let partitioned = Partitioned::start(&server);
    let (old, new) = replicas(&server, &partitioned, "--leader-elect", |old, new| {
        leads(old) && new.get("/readyz").0.contains("200")
    });
    let cut = Cut::make(&server, &partitioned, || !leads(&old), || leads(&new));
    let sent = partitioned.sent_after(cut.at + cut.gone, true);
    assert!(sent.is_empty(), "written after stepping down: {sent:?}");

    // Healed: the new leader converges everything, the old one writes
    // nothing.
    cut.heal(&server, &partitioned, || true);
    std::thread::sleep(Duration::from_secs(LEASE_SECONDS));
    assert!(
        !leads(&old) && leads(&new),
        "leadership stayed with the new leader"
    );
    let sent = partitioned.sent_after(cut.at + cut.gone, true);
    assert!(
        sent.is_empty(),
        "the old leader wrote after stepping down (new leader from +{:?}): {sent:?}",
        cut.taken
    );
}

#[test]
fn a_partitioned_ring_member_should_fence_itself_in_time_and_write_only_what_it_holds_again() {
    let server = Apiserver::start_with(&["--simulate-workloads"]);
    let partitioned = Partitioned::start(&server);
    let all_slots = kubewasm_engine::ring::SLOTS as f64;
    let (old, new) = replicas(&server, &partitioned, "--sharding", |old, new| {
        slots(old) > 0.0 && slots(new) > 0.0 && slots(old) + slots(new) == all_slots
    });
    let cut = Cut::make(
        &server,
        &partitioned,
        || slots(&old) == 0.0,
        || slots(&new) == all_slots,
    );
    // Its member Lease it keeps trying to renew; nothing else.
    let sent = partitioned.sent_after(cut.at + cut.gone, false);
    assert!(sent.is_empty(), "written after fencing itself: {sent:?}");

    // Healed: it joins again and takes its share back; no key is ever in
    // two steps at once, and every MyApp converges.
    cut.heal(&server, &partitioned, || slots(&old) > 0.0);
    let logs = [Log::of(&old), Log::of(&new)];
    assert_no_overlap(&logs);
}
