//! The embedded API server's KEP-5866 shard selectors, through the real
//! kubectl over HTTPS: lists and watches split by the hash of the uid or the
//! namespace, the selector echoed, a malformed one refused; and the request
//! latency a benchmark can add.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kubewasm_tests::{Apiserver, TestCluster};
use serde_json::Value;

const LOW: &str = "shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')";
const HIGH: &str = "shardRange(object.metadata.uid,'0x8000000000000000','0x10000000000000000')";

fn raw(server: &Apiserver, path: &str) -> Value {
    let out = server.ok(&["get", "--raw", path]);
    serde_json::from_str(&out).expect("JSON")
}

fn names(list: &Value) -> BTreeSet<String> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// The selector as a query parameter value.
fn query(selector: &str) -> String {
    selector
        .replace('\'', "%27")
        .replace(',', "%2C")
        .replace('|', "%7C")
}

#[test]
fn shard_selectors_should_split_lists_and_watches_and_echo_what_they_honoured() {
    let server = Apiserver::start();
    server.ok(&["create", "namespace", "shards"]);
    for i in 0..40 {
        server.ok(&["-n", "shards", "create", "configmap", &format!("cm-{i}")]);
    }
    let path = |selector: &str| {
        format!(
            "/api/v1/namespaces/shards/configmaps?shardSelector={}",
            query(selector)
        )
    };
    let all = names(&raw(&server, "/api/v1/namespaces/shards/configmaps"));
    let (low, high) = (raw(&server, &path(LOW)), raw(&server, &path(HIGH)));
    let (low_names, high_names) = (names(&low), names(&high));
    // Forty and the namespace's kube-root-ca.crt.
    assert_eq!(all.len(), 41);
    assert!(
        low_names.is_disjoint(&high_names),
        "{low_names:?} {high_names:?}"
    );
    assert_eq!(
        low_names
            .union(&high_names)
            .cloned()
            .collect::<BTreeSet<_>>(),
        all,
        "the halves cover the list"
    );
    assert!(!low_names.is_empty() && !high_names.is_empty());
    assert_eq!(
        low["metadata"]["shardInfo"]["selector"],
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
    );
    // Both halves joined with `||` are the whole.
    let both = raw(&server, &path(&format!("{LOW}||{HIGH}")));
    assert_eq!(names(&both), all);
    // Without a selector, no shardInfo: a client sees the server ignored
    // nothing.
    assert!(
        raw(&server, "/api/v1/namespaces/shards/configmaps")["metadata"]["shardInfo"].is_null()
    );

    // By namespace: a namespace's objects are all in or all out.
    let by_ns = |range: &str| {
        names(&raw(
            &server,
            &format!(
                "/api/v1/namespaces/shards/configmaps?shardSelector={}",
                query(&format!("shardRange(object.metadata.namespace,{range})"))
            ),
        ))
        .len()
    };
    let halves = [
        by_ns("'0x0000000000000000','0x8000000000000000'"),
        by_ns("'0x8000000000000000','0x10000000000000000'"),
    ];
    assert!(halves.contains(&0) && halves.contains(&41), "{halves:?}");

    // A watch with the selector sends only its shard's objects.
    let watch = server.kubectl(&[
        "get",
        "--raw",
        &format!("{}&watch=true&timeoutSeconds=2", path(LOW)),
    ]);
    let watched: BTreeSet<String> = watch
        .1
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| e["object"]["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(watched, low_names);

    // A malformed selector is refused naming the fault, as a real server
    // refuses it (a 500).
    let (ok, _, stderr) = server.kubectl(&[
        "get",
        "--raw",
        &format!(
            "/api/v1/namespaces/shards/configmaps?shardSelector={}",
            query("shardRange(object.metadata.name,'0x0000000000000000','0x0000000000000001')")
        ),
    ]);
    assert!(!ok);
    assert!(
        stderr.contains(r#"invalid shard selector: unsupported field path "object.metadata.name""#),
        "{stderr}"
    );
}

#[test]
fn request_latency_should_delay_every_answer() {
    if !TestCluster::embedded_only("--request-latency-ms") {
        return;
    }
    let server = Apiserver::start_with(&["--request-latency-ms", "300"]);
    let started = Instant::now();
    server.ok(&["get", "--raw", "/version"]);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
}
