//! Sharding across replicas: three real `kubewasm run --sharding` processes
//! against the embedded API server split the MyApps between them, each
//! caching its share only, a replica SIGKILLed or SIGSTOPped loses its slots
//! to the others, and no key is ever reconciled by two replicas at
//! overlapping times (checked from every replica's log of each reconcile's
//! start and end). Once with the server's shard selectors, once with them
//! off (the server ignores them, the replicas filter their shares
//! themselves). `RING_LOGS=DIR` keeps the replicas' logs there.

use std::path::PathBuf;
use std::time::Duration;

use kubewasm_tests::host::{Host, apply, create_all, get_json, wait_for};
use kubewasm_tests::spans::{Log, assert_no_overlap};
use kubewasm_tests::{Apiserver, example_file, example_plugin, scale};

/// Every slot of a ring.
const ALL_SLOTS: f64 = kubewasm_engine::ring::SLOTS as f64;

const FLAGS: [&str; 7] = [
    "--sharding",
    "--leader-election-id",
    "ring",
    "--leader-election-namespace",
    "default",
    "--lease-duration-seconds",
    "6",
];

fn start(server: &Apiserver) -> Host {
    let plugins: Vec<(&str, PathBuf)> = vec![("myapp", example_plugin("myapp"))];
    Host::start(server, &plugins, &[], &FLAGS)
}

/// Creates MyApps `prefix-0` .. `prefix-{count-1}`.
fn myapps(server: &Apiserver, prefix: &str, count: usize) {
    let items: Vec<serde_json::Value> = (0..count)
        .map(|i| {
            serde_json::json!({"apiVersion": "example.com/v1", "kind": "MyApp",
                "metadata": {"name": format!("{prefix}-{i}"), "namespace": "default"},
                "spec": {"replicas": 1, "image": "nginx:1.27", "port": 8080}})
        })
        .collect();
    create_all(server, items);
}

fn deployments(server: &Apiserver) -> usize {
    get_json(server, &["deployments"])
        .and_then(|d| d["items"].as_array().map(Vec::len))
        .unwrap_or(0)
}

/// What each replica shows of its work: slots, share, queue, reconciles.
fn replicas(hosts: &[Host]) -> String {
    let series = |host: &Host, name: &str| host.metric(name).unwrap_or(-1.0);
    hosts
        .iter()
        .enumerate()
        .map(|(i, host)| {
            format!(
                "replica {i}: {} slots, {} MyApps cached, queue {}, {} reconciles",
                series(host, "kubewasm_shard_slots_held"),
                share_held(host),
                series(host, r#"workqueue_depth{name="myapp",controller="myapp"}"#),
                series(
                    host,
                    r#"controller_runtime_reconcile_total{controller="myapp",result="success"}"#
                ),
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Slots each replica holds now.
fn slots_held(hosts: &[Host]) -> Vec<f64> {
    hosts
        .iter()
        .map(|h| h.metric("kubewasm_shard_slots_held").unwrap_or(0.0))
        .collect()
}

/// MyApps in a replica's primary store: its share.
fn share_held(host: &Host) -> f64 {
    host.metric(
        r#"kubewasm_informer_objects{resource="example.com/v1 MyApp",namespace="",selector="",shard="uid"}"#,
    )
    .unwrap_or(0.0)
}

#[test]
fn a_ring_should_grow_split_the_work_without_overlap_and_outlive_a_kill_a_stop_and_a_leave() {
    // 3,000 MyApps, or 1,000 in CI (`CI=true`).
    ring(
        &[],
        scale(3_000, 1_000),
        "the server filters by shardSelector",
    );
}

#[test]
fn a_ring_should_do_the_same_filtering_its_shares_itself_when_the_server_ignores_selectors() {
    // Fewer MyApps: the same story, in less of CI's time.
    ring(
        &["--shard-selectors", "false"],
        scale(1_000, 500),
        "the server ignores shardSelector; filtered in the host",
    );
}

/// The whole story over `count` MyApps (and half as many three times
/// more) against a server started with `server_flags`; each replica logs
/// `filtering` of its primary's informer.
fn ring(server_flags: &[&str], count: usize, filtering: &str) {
    let server = Apiserver::start_with(server_flags);
    apply(&server, &example_file("myapp", "crd.yaml"));
    // One replica takes every slot; two more join while it works (the ring
    // grows 1 → 3 under load).
    let mut hosts = vec![start(&server)];
    hosts[0].wait_ready();
    myapps(&server, "first", count);
    hosts.push(start(&server));
    hosts.push(start(&server));
    for host in &hosts {
        host.wait_ready();
    }
    wait_for(
        "three replicas converge the MyApps",
        &hosts[0],
        Duration::from_secs(300),
        || format!("{} deployments; {}", deployments(&server), replicas(&hosts)),
        || deployments(&server) == count,
    );
    // The slots are split, each held by exactly one replica, and each
    // replica caches the MyApps of its slots only.
    let held = slots_held(&hosts);
    assert_eq!(held.iter().sum::<f64>(), ALL_SLOTS, "{held:?}");
    assert!(held.iter().all(|n| *n > 0.0), "{held:?}");
    wait_for(
        "each replica's primary store holds its share",
        &hosts[0],
        Duration::from_secs(30),
        || format!("{:?}", hosts.iter().map(share_held).collect::<Vec<_>>()),
        || {
            let shares: Vec<f64> = hosts.iter().map(share_held).collect();
            shares.iter().sum::<f64>() == count as f64
                && shares.iter().all(|n| *n > 0.0 && *n < count as f64)
        },
    );
    for host in &hosts {
        assert!(host.log().contains(filtering), "{}", host.log());
    }
    let logs: Vec<Log> = hosts.iter().map(Log::of).collect();
    let counts = assert_no_overlap(&logs);
    assert!(
        counts.iter().all(|n| *n > 0),
        "every replica worked: {counts:?}"
    );

    // SIGKILL one while the ring works (3 → 2 under load): its slots move
    // to the others once its Lease expires.
    myapps(&server, "second", count / 2);
    let killed = hosts.remove(0);
    let killed_log = {
        let mut killed = killed;
        // A step in flight at the kill ends with it.
        let until = jiff::Timestamp::now().as_microsecond();
        killed.kill();
        Log {
            text: killed.log(),
            until,
        }
    };
    // Within the Lease's duration (6 s) and the margin of a few rounds.
    wait_for(
        "the survivors hold every slot",
        &hosts[0],
        Duration::from_secs(12),
        || format!("{:?}", slots_held(&hosts)),
        || slots_held(&hosts).iter().sum::<f64>() == ALL_SLOTS,
    );
    wait_for(
        "two replicas converge the MyApps created before the kill",
        &hosts[0],
        Duration::from_secs(180),
        || format!("{} deployments; {}", deployments(&server), replicas(&hosts)),
        || deployments(&server) == count + count / 2,
    );

    // SIGSTOP one past its Lease, then resume it: it starts nothing before
    // it holds slots again, and the ring heals.
    let pid = hosts[1].pid().to_string();
    let signal = |sig: &str| {
        let sent = std::process::Command::new("kill")
            .args([sig, &pid])
            .status();
        assert!(sent.is_ok_and(|s| s.success()), "{sig} sent");
    };
    signal("-STOP");
    std::thread::sleep(Duration::from_secs(9));
    myapps(&server, "third", count / 2);
    signal("-CONT");
    wait_for(
        "the MyApps created while one replica was stopped converge",
        &hosts[0],
        Duration::from_secs(180),
        || format!("{} deployments; {}", deployments(&server), replicas(&hosts)),
        || deployments(&server) == 2 * count,
    );
    wait_for(
        "the resumed replica rejoins",
        &hosts[0],
        Duration::from_secs(60),
        || replicas(&hosts),
        || slots_held(&hosts).iter().all(|n| *n > 0.0),
    );
    assert!(
        hosts[1].log().contains("fenced"),
        "the stopped replica fenced itself"
    );

    // SIGTERM one (the ring shrinks 2 → 1): it releases its slots and
    // leaves, so the other takes them at once, well before a Lease expires.
    let mut leaving = hosts.remove(1);
    assert!(leaving.terminate().success(), "{}", leaving.log());
    let left = Log::of(&leaving);
    assert!(left.text.contains("left the ring"), "{}", left.text);
    wait_for(
        "the last replica holds every slot",
        &hosts[0],
        Duration::from_secs(5),
        || replicas(&hosts),
        || slots_held(&hosts).iter().sum::<f64>() == ALL_SLOTS,
    );
    myapps(&server, "fourth", count / 2);
    wait_for(
        "one replica converges the MyApps created after the others left",
        &hosts[0],
        Duration::from_secs(180),
        || format!("{} deployments; {}", deployments(&server), replicas(&hosts)),
        || deployments(&server) == 2 * count + count / 2,
    );
    let mut logs: Vec<Log> = hosts.iter().map(Log::of).collect();
    logs.push(killed_log);
    logs.push(left);
    assert_no_overlap(&logs);
}
