//! The embedded API server as an attacker and a crash find it: one test per
//! class of [apiserver-2]. Each sends what a hostile or broken client would,
//! over real TLS to the real binary, and checks the answer is a clear 4xx,
//! the server's memory stays bounded, and it keeps answering others.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Api, Client};
use kubewasm_tests::Apiserver;
use serde_json::{Value, json};

/// Sends a raw request; returns the status code and the body.
async fn send(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> anyhow::Result<(u16, String)> {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", content_type)
        .body(kube::client::Body::from(body))?;
    let response = client.send(request).await?;
    let code = response.status().as_u16();
    let bytes = response.into_body().collect_bytes().await?;
    Ok((code, String::from_utf8_lossy(&bytes).into_owned()))
}

fn cm(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_owned());
    cm.data = Some([("n".to_owned(), name.to_owned())].into());
    cm
}

/// The server answers an ordinary client at once, and its memory grew by
/// less than `budget_mib` since `before_kib`.
async fn still_serving(server: &Apiserver, before_kib: u64, budget_mib: u64) -> anyhow::Result<()> {
    let cms: Api<ConfigMap> = Api::namespaced(server.client().await?, "default");
    let name = format!("probe-{}", uuid_like());
    tokio::time::timeout(
        Duration::from_secs(5),
        cms.create(&PostParams::default(), &cm(&name)),
    )
    .await??;
    let grown = server.rss_kib().saturating_sub(before_kib) / 1024;
    anyhow::ensure!(grown < budget_mib, "memory grew by {grown} MiB");
    Ok(())
}

fn uuid_like() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_alias_bombs_should_be_refused_in_bounded_memory() -> anyhow::Result<()> {
    let server = Apiserver::start();
    let client = server.client().await?;
    let before = server.rss_kib();
    // A long string named 1500 times: 34 KB that expands to 45 MB.
    let mut wide = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: wide, namespace: default}}\nx: &a \"{}\"\ny: [",
        "x".repeat(30_000)
    );
    wide.push_str(&vec!["*a"; 1_500].join(","));
    wide.push_str("]\n");
    // Aliases of aliases: a billion laughs.
    let mut deep = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep, namespace: default}\na: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n",
    );
    let mut previous = 'a';
    for name in "bcdefghi".chars() {
        let refs = vec![format!("*{previous}"); 9].join(",");
        deep.push_str(&format!("{name}: &{name} [{refs}]\n"));
        previous = name;
    }
    for (name, bomb) in [("wide", &wide), ("deep", &deep)] {
        for (method, path, content_type) in [
            (
                "PATCH",
                format!("/api/v1/namespaces/default/configmaps/{name}?fieldManager=bomb"),
                "application/apply-patch+yaml",
            ),
            (
                "POST",
                "/api/v1/namespaces/default/configmaps".to_owned(),
                "application/yaml",
            ),
        ] {
            let (code, body) = send(
                &client,
                method,
                &path,
                content_type,
                bomb.as_bytes().to_vec(),
            )
            .await?;
            assert_eq!(code, 400, "{method} {name} bomb as {content_type}: {body}");
        }
    }
    // Plain YAML, with a small alias, is accepted.
    let fine = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine, namespace: default}\ndata: &d {a: b}\n";
    let (code, body) = send(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/yaml",
        fine.as_bytes().to_vec(),
    )
    .await?;
    assert_eq!(code, 201, "{body}");
    still_serving(&server, before, 40).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_patches_should_be_bounded_in_size_depth_and_operations() -> anyhow::Result<()> {
    let server = Apiserver::start();
    let client = server.client().await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut target = cm("target");
    target.data = Some([("a".to_owned(), "x".repeat(1000))].into());
    cms.create(&PostParams::default(), &target).await?;
    let before = server.rss_kib();
    let path = "/api/v1/namespaces/default/configmaps/target";
    let patch = |ops: Vec<Value>| serde_json::to_vec(&ops).unwrap_or_default();
    let cases = [
        // Forty copies that double the object each: 1 KB × 2^40.
        (
            (0..40)
                .map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/c{i}")}))
                .collect::<Vec<_>>(),
            413,
        ),
        // Nesting by copying an object into itself.
        (
            std::iter::once(json!({"op": "add", "path": "/metadata/annotations", "value": {}}))
                .chain((0..300).map(|_| {
                    json!({"op": "copy", "from": "/metadata/annotations", "path": "/metadata/annotations/a"})
                }))
                .collect(),
            422,
        ),
        // More operations than the real server allows.
        (
            vec![json!({"op": "test", "path": "/kind", "value": "ConfigMap"}); 10_001],
            422,
        ),
    ];
    for (ops, expected) in cases {
        let (code, body) = send(
            &client,
            "PATCH",
            path,
            "application/json-patch+json",
            patch(ops),
        )
        .await?;
        assert_eq!(code, expected, "{body}");
    }
    // Unchanged, and readable.
    let after = cms.get("target").await?;
    assert_eq!(after.data, target.data);
    still_serving(&server, before, 40).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_past_the_bounds_should_be_refused_and_the_store_stay_readable()
-> anyhow::Result<()> {
    let data = tempfile::tempdir()?;
    let data_dir = data.path().to_str().unwrap_or_default().to_owned();
    let server = Apiserver::start_with(&["--data-dir", &data_dir]);
    let client = server.client().await?;
    let before = server.rss_kib();
    let cms = "/api/v1/namespaces/default/configmaps";
    // 2 MiB of data: under the body limit, over the object limit.
    let big = json!({"metadata": {"name": "big"}, "data": {"k": "x".repeat(2 << 20)}});
    let (code, body) = send(
        &client,
        "POST",
        cms,
        "application/json",
        serde_json::to_vec(&big)?,
    )
    .await?;
    assert_eq!(code, 413, "{body}");
    // Grown past the limit by merge patches of 1 MiB each.
    let (code, _) = send(
        &client,
        "POST",
        cms,
        "application/json",
        serde_json::to_vec(&json!({"metadata": {"name": "grows"}}))?,
    )
    .await?;
    assert_eq!(code, 201);
    let mut codes = Vec::new();
    for i in 0..3 {
        let patch = json!({"data": {format!("k{i}"): "y".repeat(1 << 20)}});
        let (code, _) = send(
            &client,
            "PATCH",
            &format!("{cms}/grows"),
            "application/merge-patch+json",
            serde_json::to_vec(&patch)?,
        )
        .await?;
        codes.push(code);
    }
    assert_eq!(codes, [200, 413, 413]);
    // Nested deeper than can be stored: 120 levels (serde_json reads 128).
    let mut nested = json!("leaf");
    for _ in 0..120 {
        nested = json!({ "a": nested });
    }
    let deep = json!({"metadata": {"name": "deep", "annotations": {}}, "data": {}, "x": nested});
    let (code, body) = send(
        &client,
        "POST",
        cms,
        "application/json",
        serde_json::to_vec(&deep)?,
    )
    .await?;
    assert_eq!(code, 422, "{body}");
    still_serving(&server, before, 60).await?;
    // Everything stored is read back at start.
    let listen = server.listen();
    assert!(server.terminate().success());
    let again = Apiserver::start_at(&listen, &["--data-dir", &data_dir]);
    let cms: Api<ConfigMap> = Api::namespaced(again.client().await?, "default");
    assert!(cms.get("grows").await?.data.is_some_and(|d| d.len() == 1));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_bodies_and_parameters_should_get_4xx() -> anyhow::Result<()> {
    let mut server = Apiserver::start();
    let client = server.client().await?;
    let before = server.rss_kib();
    let cms = "/api/v1/namespaces/default/configmaps";
    let bodies: Vec<(&str, Vec<u8>, u16)> = vec![
        (
            "application/json",
            b"{\"metadata\": {\"name\": \"\xff\xfe\"}}".to_vec(),
            400,
        ),
        (
            "application/json",
            b"{\"metadata\": {\"name\": \"n\"}, \"x\": 1e999}".to_vec(),
            400,
        ),
        ("application/json", b"{\"metadata\": ".to_vec(), 400),
        ("application/json", vec![b'['; 100_000], 400),
        ("application/json", b"[1, 2]".to_vec(), 400),
        ("application/yaml", b"a: [\n".to_vec(), 400),
        ("application/yaml", b"? [a]\n: b\n".to_vec(), 400),
        (
            "application/vnd.kubernetes.protobuf",
            b"k8s\x00\xff\xff\xff\xff\x0f".to_vec(),
            400,
        ),
        (
            "application/vnd.kubernetes.protobuf",
            b"not protobuf at all".to_vec(),
            400,
        ),
        ("text/plain", b"hello".to_vec(), 415),
    ];
    for (content_type, body, expected) in bodies {
        let (code, answer) = send(&client, "POST", cms, content_type, body).await?;
        assert_eq!(code, expected, "{content_type}: {answer}");
        let status: Value = serde_json::from_str(&answer)?;
        assert_eq!(status["kind"], "Status", "{answer}");
    }
    let queries = [
        ("limit=-1", 400),
        ("limit=99999999999999999999999", 400),
        ("limit=18446744073709551615", 200),
        ("continue=garbage", 400),
        ("continue=eyJydiI6MSwiYWZ0ZXIiOjF9", 400),
        ("resourceVersion=-3", 400),
        ("labelSelector=a%20in%20(", 400),
        ("fieldSelector=spec.nodeName%3Dx", 400),
        ("watch=true&timeoutSeconds=-1", 400),
        ("watch=true&timeoutSeconds=1e3", 400),
    ];
    for (query, expected) in queries {
        let (code, answer) =
            send(&client, "GET", &format!("{cms}?{query}"), "", Vec::new()).await?;
        assert_eq!(code, expected, "{query}: {answer}");
    }
    // A watch asking for 2^64 seconds is clamped, not a panic.
    let watch = tokio::time::timeout(
        Duration::from_millis(500),
        send(
            &client,
            "GET",
            &format!("{cms}?watch=true&timeoutSeconds=18446744073709551615"),
            "",
            Vec::new(),
        ),
    )
    .await;
    assert!(watch.is_err(), "the watch should still be open");
    still_serving(&server, before, 40).await?;
    assert!(server.running());
    let (status, stderr) = server.terminate_logged();
    assert!(status.success());
    assert!(!stderr.contains("panicked"), "{stderr}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continued_lists_should_return_every_object_once_across_namespaces() -> anyhow::Result<()> {
    let server = Apiserver::start();
    let client = server.client().await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in ["a", "a-b", "a0", "b"] {
        let mut namespace = Namespace::default();
        namespace.metadata.name = Some(ns.to_owned());
        namespaces
            .create(&PostParams::default(), &namespace)
            .await?;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        for name in ["x", "y", "z-1"] {
            cms.create(&PostParams::default(), &cm(name)).await?;
        }
    }
    let all: Api<ConfigMap> = Api::all(client.clone());
    let late: Api<ConfigMap> = Api::namespaced(client, "a");
    for limit in [1, 2, 5] {
        let key = |c: ConfigMap| {
            format!(
                "{}/{}",
                c.metadata.namespace.unwrap_or_default(),
                c.metadata.name.unwrap_or_default()
            )
        };
        let expected: BTreeSet<String> = all
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .map(key)
            .collect();
        let mut seen = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut params = ListParams::default().limit(limit);
            if let Some(t) = &token {
                params = params.continue_token(t);
            }
            let page = all.list(&params).await?;
            // Written between pages: not in the snapshot being paged.
            late.create(
                &PostParams::default(),
                &cm(&format!("late-{limit}-{}", seen.len())),
            )
            .await?;
            seen.extend(page.items.into_iter().map(key));
            token = page.metadata.continue_;
            if token.is_none() {
                break;
            }
        }
        let unique: BTreeSet<String> = seen.iter().cloned().collect();
        assert_eq!(unique.len(), seen.len(), "an object repeated: {seen:?}");
        assert_eq!(unique, expected, "pages of {limit}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crds_should_survive_restarts_and_never_claim_built_ins() -> anyhow::Result<()> {
    let data = tempfile::tempdir()?;
    let data_dir = data.path().to_str().unwrap_or_default().to_owned();
    let server = Apiserver::start_with(&["--data-dir", &data_dir]);
    let client = server.client().await?;
    let crds = Api::<DynamicObject>::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    let crd = |group: &str, plural: &str, kind: &str| -> anyhow::Result<DynamicObject> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {"group": group, "scope": "Namespaced", "names": {"plural": plural, "kind": kind},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        }))?)
    };
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                             "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}))?,
        )
        .await?;
    for (group, plural, kind) in [
        ("apps", "deployments", "Deployment"),
        ("", "configmaps", "ConfigMap"),
        ("rbac.authorization.k8s.io", "roles", "Role"),
        ("storage.k8s.io", "widgets", "Widget"),
    ] {
        let refused = crds
            .create(&PostParams::default(), &crd(group, plural, kind)?)
            .await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(s)) if s.code == 422),
            "{plural}.{group}: {refused:?}"
        );
    }
    assert!(
        deployments.get("web").await.is_ok(),
        "the Deployment is intact"
    );
    crds.create(
        &PostParams::default(),
        &crd("example.com", "widgets", "Widget")?,
    )
    .await?;
    let widget = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let widgets = Api::<DynamicObject>::namespaced_with(client, "default", &widget);
    widgets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w"}, "spec": {"size": 3}}))?,
        )
        .await?;
    let listen = server.listen();
    assert!(server.terminate().success());

    let again = Apiserver::start_at(&listen, &["--data-dir", &data_dir]);
    let widgets = Api::<DynamicObject>::namespaced_with(again.client().await?, "default", &widget);
    let w = widgets.get("w").await?;
    assert_eq!(w.data["spec"]["size"], 3);
    let resources = again.ok(&["api-resources", "--api-group=example.com", "-o", "name"]);
    assert_eq!(resources.trim(), "widgets.example.com");
    // Deleting the CRD takes its objects, and only them.
    again.ok(&["delete", "crd", "widgets.example.com"]);
    assert!(
        again
            .ok(&["get", "deployments", "-o", "name"])
            .contains("deployment.apps/web")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_should_survive_sigkill() -> anyhow::Result<()> {
    let data = tempfile::tempdir()?;
    let data_dir = data.path().to_str().unwrap_or_default().to_owned();
    let server = Apiserver::start_with(&["--data-dir", &data_dir]);
    let listen = server.listen();
    let cms: Api<ConfigMap> = Api::namespaced(server.client().await?, "default");
    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    let highest_rv = Arc::new(Mutex::new(0u64));
    let mut writers = Vec::new();
    for w in 0..8 {
        let cms = cms.clone();
        let acknowledged = Arc::clone(&acknowledged);
        let highest_rv = Arc::clone(&highest_rv);
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let name = format!("w{w}-{i}");
                match cms.create(&PostParams::default(), &cm(&name)).await {
                    Ok(created) => {
                        let rv: u64 = created
                            .metadata
                            .resource_version
                            .and_then(|rv| rv.parse().ok())
                            .unwrap_or_default();
                        if let (Ok(mut acked), Ok(mut high)) =
                            (acknowledged.lock(), highest_rv.lock())
                        {
                            acked.insert(name);
                            *high = (*high).max(rv);
                        }
                    }
                    Err(_) => return,
                }
            }
        }));
    }
    // Writes in flight when the server dies.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.kill();
    for writer in writers {
        writer.await?;
    }
    let acknowledged = acknowledged.lock().map(|a| a.clone()).unwrap_or_default();
    let highest_rv = highest_rv.lock().map(|h| *h).unwrap_or_default();
    assert!(
        acknowledged.len() > 50,
        "only {} writes",
        acknowledged.len()
    );

    let again = Apiserver::start_at(&listen, &["--data-dir", &data_dir]);
    let cms: Api<ConfigMap> = Api::namespaced(again.client().await?, "default");
    let stored: BTreeSet<String> = cms
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let lost: Vec<_> = acknowledged.difference(&stored).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged writes lost: {lost:?}",
        lost.len()
    );
    let next = cms.create(&PostParams::default(), &cm("after")).await?;
    let rv: u64 = next.metadata.resource_version.unwrap_or_default().parse()?;
    assert!(rv > highest_rv, "resourceVersion {rv} after {highest_rv}");
    Ok(())
}
