//! What real clients ask of a cluster beyond CRUD: server-side table
//! columns (`kubectl get`), metadata-only reads and watches (kube-rs's
//! `metadata_watcher`, what caches use), and `deletecollection`.

use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kubewasm_tests::Apiserver;

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_owned());
    cm.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    cm.data = Some(
        [
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned()),
        ]
        .into(),
    );
    cm
}

/// The header and the rows of `kubectl get` output, split on runs of spaces.
fn table(output: &str) -> Vec<Vec<String>> {
    output
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[test]
fn kubectl_get_should_print_the_servers_columns() {
    let server = Apiserver::start_with(&["--simulate-workloads"]);
    server.ok(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=a=1",
        "--from-literal=b=2",
    ]);
    let rows = table(&server.ok(&["get", "configmaps", "settings"]));
    assert_eq!(rows[0], ["NAME", "DATA", "AGE"]);
    assert_eq!(rows[1][..2], ["settings", "2"]);
    let rows = table(&server.ok(&["get", "namespaces", "default"]));
    assert_eq!(rows[0], ["NAME", "STATUS", "AGE"]);
    assert_eq!(rows[1][..2], ["default", "Active"]);
    let rows = table(&server.ok(&["get", "nodes"]));
    assert_eq!(rows[0], ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);
    assert_eq!(rows[1][..3], ["kubewasm-node", "Ready", "control-plane"]);
    assert_eq!(rows[1][4], kubewasm_types::KUBERNETES_RELEASE);
    let rows = table(&server.ok(&["get", "services", "kubernetes"]));
    assert_eq!(
        rows[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    assert_eq!(rows[1][4], "443/TCP");

    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = dir.path().join("widgets.yaml");
    std::fs::write(
        &manifest,
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
"#,
    )
    .expect("write");
    server.ok(&["apply", "-f", manifest.to_str().unwrap_or_default()]);
    let widget = dir.path().join("w.yaml");
    std::fs::write(
        &widget,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3}\nstatus: {conditions: [{type: Synced, status: \"False\"}, {type: Ready, status: \"True\"}]}\n",
    )
    .expect("write");
    server.ok(&["apply", "-f", widget.to_str().unwrap_or_default()]);
    let rows = table(&server.ok(&["get", "widgets"]));
    assert_eq!(rows[0], ["NAME", "SIZE", "READY"]);
    assert_eq!(rows[1], ["w1", "3", "True"]);
}

#[test]
fn a_fresh_cluster_should_hold_what_a_real_one_does() {
    let server = Apiserver::start();
    server.ok(&["create", "namespace", "team-a"]);
    for ns in ["default", "kube-system", "team-a"] {
        let mut filled = false;
        for _ in 0..50 {
            let sa = server.kubectl(&["get", "serviceaccount", "default", "-n", ns, "-o", "name"]);
            let ca = server.kubectl(&[
                "get",
                "configmap",
                "kube-root-ca.crt",
                "-n",
                ns,
                "-o",
                "jsonpath={.data.ca\\.crt}",
            ]);
            if sa.0 && ca.0 && ca.1.contains("BEGIN CERTIFICATE") {
                filled = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert!(filled, "{ns} lacks its ServiceAccount or root CA");
    }
    let slice = server.ok(&[
        "get",
        "endpointslices",
        "kubernetes",
        "-o",
        "jsonpath={.ports[0].port}",
    ]);
    assert_eq!(slice, "6443");
    let statuses = server.ok(&["get", "componentstatuses", "-o", "name"]);
    assert!(statuses.contains("componentstatus/etcd-0"), "{statuses}");
    let phase = server.ok(&[
        "get",
        "namespace",
        "team-a",
        "-o",
        "jsonpath={.status.phase}",
    ]);
    assert_eq!(phase, "Active");
}

#[test]
fn kubectl_delete_all_should_delete_what_the_selector_picks() {
    let server = Apiserver::start();
    for (name, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
        server.ok(&["create", "configmap", name]);
        server.ok(&["label", "configmap", name, &format!("tier={tier}")]);
    }
    server.ok(&["delete", "configmaps", "-l", "tier=web"]);
    let left = server.ok(&["get", "configmaps", "-o", "name", "-l", "tier"]);
    assert_eq!(left.trim(), "configmap/c");
    server.ok(&["delete", "configmaps", "--all"]);
    let (_, stdout, stderr) = server.kubectl(&["get", "configmaps", "-o", "name"]);
    assert!(
        !stdout.contains("configmap/c") && !stderr.contains("error"),
        "{stdout}{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_collection_should_honour_selectors_dry_run_and_finalizers() -> anyhow::Result<()> {
    let server = Apiserver::start();
    let cms: Api<ConfigMap> = Api::namespaced(server.client().await?, "default");
    for (name, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
        cms.create(&PostParams::default(), &cm(name, &[("tier", tier)]))
            .await?;
    }
    let mut kept = cm("kept", &[("tier", "web")]);
    kept.metadata.finalizers = Some(vec!["example.com/hold".to_owned()]);
    cms.create(&PostParams::default(), &kept).await?;
    let web = ListParams::default().labels("tier=web");
    // Dry run: reports, changes nothing.
    let reported = cms
        .delete_collection(&DeleteParams::default().dry_run(), &web)
        .await?;
    let reported = reported.left().map(|l| l.items.len()).unwrap_or_default();
    assert_eq!(reported, 3);
    assert_eq!(
        cms.list(&ListParams::default().labels("tier"))
            .await?
            .items
            .len(),
        4
    );
    // For real: the two without finalizers go, the held one is marked.
    cms.delete_collection(&DeleteParams::default(), &web)
        .await?;
    let names: Vec<String> = cms
        .list(&ListParams::default().labels("tier"))
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(names, ["c", "kept"]);
    assert!(cms.get("kept").await?.metadata.deletion_timestamp.is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_reads_and_watches_should_carry_only_metadata() -> anyhow::Result<()> {
    let server = Apiserver::start();
    let client = server.client().await?;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &cm("first", &[("app", "x")]))
        .await?;
    let one = cms.get_metadata("first").await?;
    assert_eq!(one.metadata.labels.unwrap_or_default()["app"], "x");
    let list = cms.list_metadata(&ListParams::default()).await?;
    assert!(
        list.items
            .iter()
            .any(|m| m.metadata.name.as_deref() == Some("first"))
    );
    let rv = list.metadata.resource_version.unwrap_or_default();

    // The raw watch: PartialObjectMetadata objects.
    let mut raw = cms
        .watch_metadata(&WatchParams::default().timeout(10), &rv)
        .await?
        .boxed();
    cms.create(&PostParams::default(), &cm("second", &[]))
        .await?;
    let event = tokio::time::timeout(Duration::from_secs(5), raw.next()).await?;
    match event {
        Some(Ok(WatchEvent::Added(meta))) => {
            assert_eq!(meta.metadata.name.as_deref(), Some("second"));
            assert_eq!(
                meta.types.map(|t| t.kind).as_deref(),
                Some("PartialObjectMetadata")
            );
        }
        other => anyhow::bail!("unexpected {other:?}"),
    }

    // kube-runtime's watcher of metadata sees every object.
    let metadata: Api<PartialObjectMeta<ConfigMap>> =
        Api::namespaced(server.client().await?, "default");
    let mut seen = watcher(metadata, watcher::Config::default())
        .applied_objects()
        .boxed();
    let mut names = std::collections::BTreeSet::new();
    while names.len() < 3 {
        let meta = tokio::time::timeout(Duration::from_secs(5), seen.next())
            .await?
            .ok_or_else(|| anyhow::anyhow!("the watcher ended"))??;
        names.extend(meta.metadata.name);
    }
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["first", "kube-root-ca.crt", "second"]
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subresources_should_write_their_part_by_put_and_patch() -> anyhow::Result<()> {
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Patch, PatchParams};

    let server = Apiserver::start();
    let client = server.client().await?;
    // `kubectl certificate approve` (a PUT of /approval, in protobuf).
    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    for name in ["first", "second"] {
        let csr: CertificateSigningRequest = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K",
                     "signerName": "example.com/signer", "usages": ["client auth"]}}))?;
        csrs.create(&PostParams::default(), &csr).await?;
    }
    server.ok(&["certificate", "approve", "first"]);
    let first = csrs.get("first").await?;
    let conditions = first.status.and_then(|s| s.conditions).unwrap_or_default();
    assert_eq!(
        conditions.first().map(|c| c.type_.as_str()),
        Some("Approved")
    );
    // The same by PATCH; the spec is not the subresource's to change.
    csrs.patch_subresource(
        "approval",
        "second",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({
            "spec": {"signerName": "evil.example.com/signer"},
            "status": {"conditions": [{"type": "Denied", "status": "True", "reason": "Nope"}]}})),
    )
    .await?;
    let second = csrs.get("second").await?;
    assert_eq!(second.spec.signer_name, "example.com/signer");
    let denied = second.status.and_then(|s| s.conditions).unwrap_or_default();
    assert_eq!(denied.first().map(|c| c.type_.as_str()), Some("Denied"));

    // A Pod's ephemeral containers, as `kubectl debug` adds them.
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pod: Pod = serde_json::from_value(serde_json::json!({"metadata": {"name": "web"},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]}}))?;
    pods.create(&PostParams::default(), &pod).await?;
    pods.patch_subresource(
        "ephemeralcontainers",
        "web",
        &PatchParams::default(),
        &Patch::Strategic(serde_json::json!({"spec": {
            "containers": [{"name": "sneaky", "image": "evil"}],
            "ephemeralContainers": [{"name": "debugger", "image": "busybox"}]}})),
    )
    .await?;
    let spec = pods.get("web").await?.spec.unwrap_or_default();
    assert_eq!(spec.containers.len(), 1, "only ephemeral containers change");
    let ephemeral = spec.ephemeral_containers.unwrap_or_default();
    assert_eq!(ephemeral.first().map(|c| c.name.as_str()), Some("debugger"));
    Ok(())
}

#[test]
fn kubectl_explain_should_describe_nested_fields_of_built_in_kinds() {
    let server = Apiserver::start();
    let replicas = server.ok(&["explain", "deployments.spec.replicas"]);
    assert!(replicas.contains("FIELD: replicas <integer>"), "{replicas}");
    assert!(replicas.contains("Number of desired pods"), "{replicas}");
    let image = server.ok(&["explain", "pods.spec.containers.image"]);
    assert!(image.contains("FIELD: image <string>"), "{image}");
    let data = server.ok(&["explain", "configmaps.data"]);
    assert!(data.contains("map[string]string"), "{data}");
    let (ok, _, err) = server.kubectl(&["explain", "configmaps.nonsense"]);
    assert!(!ok && err.contains("nonsense"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_pods_should_run_and_writes_should_answer_as_asked() -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use kube::api::{Patch, PatchParams};
    use kube::core::{ObjectMeta, PartialObjectMetaExt};
    use kube::runtime::wait::{await_condition, conditions};

    let server = Apiserver::start_with(&["--simulate-workloads"]);
    let client = server.client().await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "sleeper", "labels": {"app": "demo"}},
        "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"]}]}}))?;
    pods.create(&PostParams::default(), &pod).await?;
    // As a kubelet would: bound, Running, every container ready.
    tokio::time::timeout(
        Duration::from_secs(20),
        await_condition(pods.clone(), "sleeper", conditions::is_pod_running()),
    )
    .await??;
    let running = pods.get("sleeper").await?;
    let status = running.status.unwrap_or_default();
    assert_eq!(
        running.spec.and_then(|s| s.node_name).as_deref(),
        Some("kubewasm-node")
    );
    assert!(
        status
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "ContainersReady" && c.status == "True")
    );
    let (ok, out, _) = server.kubectl(&["get", "pod", "sleeper", "--no-headers"]);
    assert!(
        ok && out.contains("1/1") && out.contains("Running"),
        "{out}"
    );

    // A Pod that is not restarted (here owned by no Job) completes.
    let once: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "once"},
        "spec": {"restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "busybox", "command": ["true"]}]}}))?;
    pods.create(&PostParams::default(), &once).await?;
    let succeeded = |pod: Option<&Pod>| {
        pod.and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Succeeded")
    };
    tokio::time::timeout(
        Duration::from_secs(20),
        await_condition(pods.clone(), "once", succeeded),
    )
    .await??;

    // A metadata patch answers with PartialObjectMetadata, as kube-rs asks.
    let patch = ObjectMeta {
        annotations: Some([("seen".to_owned(), "yes".to_owned())].into()),
        ..ObjectMeta::default()
    }
    .into_request_partial::<Pod>();
    let patched = pods
        .patch_metadata("sleeper", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    assert_eq!(
        patched.types.map(|t| t.kind).as_deref(),
        Some("PartialObjectMetadata")
    );
    assert_eq!(
        patched
            .metadata
            .annotations
            .and_then(|a| a.get("seen").cloned())
            .as_deref(),
        Some("yes")
    );

    // Typed field selectors: an absent `spec.unschedulable` is `false`.
    let nodes: Api<Node> = Api::all(client);
    let schedulable = ListParams::default().fields("spec.unschedulable==false");
    assert_eq!(nodes.list(&schedulable).await?.items.len(), 1);
    nodes.cordon("kubewasm-node").await?;
    assert_eq!(nodes.list(&schedulable).await?.items.len(), 0);
    Ok(())
}
