//! The server through the unmodified kube-rs client, over a real socket.

use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kube::runtime::watcher;
use kube::{Api, Client, Config};
use kubewasm_apiserver::http::api::{Api as RestApi, ApiConfig};
use kubewasm_apiserver::http::server::ApiServer;
use kubewasm_apiserver::store::Store;
use kubewasm_apiserver::store::seed::seed;
use serde_json::json;

async fn cluster(history: usize) -> anyhow::Result<(ApiServer, Client)> {
    let store = Store::new(history);
    seed(&store)?;
    let api = RestApi::new(store, ApiConfig::default());
    let server = ApiServer::start("127.0.0.1:0".parse()?, api, None).await?;
    let config = Config::new(format!("http://{}", server.addr()).parse()?);
    Ok((server, Client::try_from(config)?))
}

fn cm(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": "demo"}}, "data": {"k": value}}),
    )
    .unwrap_or_default()
}

#[tokio::test]
async fn crud_should_work_through_kube_rs() -> anyhow::Result<()> {
    let (_server, client) = cluster(1000).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let names: Vec<_> = namespaces
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(
        names,
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = cms.create(&PostParams::default(), &cm("a", "1")).await?;
    assert!(created.metadata.uid.is_some() && created.metadata.resource_version.is_some());
    let err = cms
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .expect_err("duplicate");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.reason == "AlreadyExists" && s.code == 409),
        "{err}"
    );

    let patched = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "2"}})),
        )
        .await?;
    assert_eq!(
        patched.data.and_then(|d| d.get("k").cloned()).as_deref(),
        Some("2")
    );

    // A stale resourceVersion conflicts.
    let mut stale = created.clone();
    stale.data = Some([("k".to_owned(), "3".to_owned())].into());
    let err = cms
        .replace("a", &PostParams::default(), &stale)
        .await
        .expect_err("stale");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.reason == "Conflict"),
        "{err}"
    );

    let missing = cms.get_opt("nope").await?;
    assert!(missing.is_none());
    cms.delete("a", &DeleteParams::default()).await?;
    assert!(cms.get_opt("a").await?.is_none());
    Ok(())
}

#[tokio::test]
async fn finalizers_should_hold_deletion_until_removed() -> anyhow::Result<()> {
    let (_server, client) = cluster(1000).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut held = cm("held", "1");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &held).await?;
    cms.delete("held", &DeleteParams::default()).await?;
    let deleting = cms.get("held").await?;
    assert!(deleting.metadata.deletion_timestamp.is_some());
    let patch = json!([
        {"op": "test", "path": "/metadata/finalizers", "value": ["example.com/hold"]},
        {"op": "remove", "path": "/metadata/finalizers/0"}
    ]);
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::<()>::Json(serde_json::from_value(patch)?),
    )
    .await?;
    assert!(
        cms.get_opt("held").await?.is_none(),
        "gone once its last finalizer is"
    );
    Ok(())
}

#[tokio::test]
async fn lists_should_paginate_over_one_snapshot() -> anyhow::Result<()> {
    let (_server, client) = cluster(1000).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..7 {
        cms.create(&PostParams::default(), &cm(&format!("cm-{i}"), "x"))
            .await?;
    }
    let first = cms.list(&ListParams::default().limit(3)).await?;
    assert_eq!(first.items.len(), 3);
    let token = first.metadata.continue_.clone().expect("more pages");
    // A write between pages does not show in the continued list.
    cms.create(&PostParams::default(), &cm("cm-9", "x")).await?;
    let mut names: Vec<String> = first
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let mut next = Some(token);
    while let Some(token) = next {
        let page = cms
            .list(&ListParams::default().limit(3).continue_token(&token))
            .await?;
        assert_eq!(
            page.metadata.resource_version,
            first.metadata.resource_version
        );
        names.extend(page.items.into_iter().filter_map(|c| c.metadata.name));
        next = page.metadata.continue_;
    }
    assert_eq!(names, (0..7).map(|i| format!("cm-{i}")).collect::<Vec<_>>());
    let selected = cms
        .list(
            &ListParams::default()
                .labels("app=demo")
                .fields("metadata.name=cm-2"),
        )
        .await?;
    assert_eq!(selected.items.len(), 1);
    Ok(())
}

#[tokio::test]
async fn watcher_should_see_changes_and_recover_from_expiry() -> anyhow::Result<()> {
    // A history of 3 events: a watcher that falls behind gets a 410 and
    // relists. Falling behind is a race, so rounds repeat until one did.
    let (_server, client) = cluster(3).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut stream = watcher(cms.clone(), watcher::Config::default()).boxed();
    let mut seen = std::collections::BTreeSet::new();
    let mut expired = 0;
    let mut created = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for round in 0..20 {
        let writer = cms.clone();
        let names: Vec<String> = (0..20).map(|i| format!("w-{round}-{i}")).collect();
        let batch = names.clone();
        let writes = tokio::spawn(async move {
            let params = PostParams::default();
            let objects: Vec<ConfigMap> = batch.iter().map(|n| cm(n, "x")).collect();
            futures_util::future::try_join_all(objects.iter().map(|o| writer.create(&params, o)))
                .await
        });
        created += names.len();
        while names.iter().any(|n| !seen.contains(n)) {
            match tokio::time::timeout_at(deadline, stream.next()).await? {
                Some(Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => {
                    seen.insert(o.metadata.name.unwrap_or_default());
                }
                Some(Ok(_)) => {}
                // The 410 ERROR event: the watcher reports it, then relists.
                Some(Err(watcher::Error::WatchError(status))) if status.code == 410 => expired += 1,
                Some(Err(other)) => return Err(other.into()),
                None => anyhow::bail!("the watcher ended"),
            }
        }
        writes.await??;
        if expired > 0 {
            break;
        }
    }
    assert_eq!(seen.len(), created, "every object seen despite the expiry");
    assert!(
        expired >= 1,
        "a watcher behind a 3-event history got a 410 and relisted"
    );
    Ok(())
}

#[tokio::test]
async fn expired_watch_should_get_a_410_error_event_in_a_200_stream() -> anyhow::Result<()> {
    let (_server, client) = cluster(3).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let start = cms
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    for i in 0..5 {
        cms.create(&PostParams::default(), &cm(&format!("e-{i}"), "x"))
            .await?;
    }
    let mut events = cms
        .watch(&kube::api::WatchParams::default(), &start)
        .await?
        .boxed();
    match events.try_next().await? {
        Some(kube::api::WatchEvent::Error(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(
                status.message.starts_with("too old resource version"),
                "{}",
                status.message
            );
        }
        other => anyhow::bail!("expected a 410 ERROR event, got {other:?}"),
    }
    // From a retained version, the watch resumes with nothing lost.
    let now = cms
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut events = cms
        .watch(&kube::api::WatchParams::default().timeout(2), &now)
        .await?
        .boxed();
    cms.create(&PostParams::default(), &cm("after", "x"))
        .await?;
    match events.try_next().await? {
        Some(kube::api::WatchEvent::Added(o)) => {
            assert_eq!(o.metadata.name.as_deref(), Some("after"))
        }
        other => anyhow::bail!("expected ADDED, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn https_with_a_token_should_be_required_and_trusted_through_the_kubeconfig()
-> anyhow::Result<()> {
    let store = Store::default();
    seed(&store)?;
    let ip = "127.0.0.1".parse()?;
    let credentials = kubewasm_apiserver::http::tls::Credentials::generate(ip)?;
    let server = ApiServer::start(
        "127.0.0.1:0".parse()?,
        RestApi::new(store, ApiConfig::default()),
        Some(credentials.clone()),
    )
    .await?;
    let kubeconfig = credentials.kubeconfig(&format!("https://{}", server.addr()));
    let parsed = kube::config::Kubeconfig::from_yaml(&kubeconfig)?;
    let config =
        Config::from_custom_kubeconfig(parsed.clone(), &kube::config::KubeConfigOptions::default())
            .await?;
    assert_eq!(config.default_namespace, "default");
    let client = Client::try_from(config)?;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    cms.create(&PostParams::default(), &cm("secure", "1"))
        .await?;
    assert!(cms.get_opt("secure").await?.is_some());

    // The same server without the token: 401.
    let mut anonymous = parsed;
    for user in &mut anonymous.auth_infos {
        if let Some(auth) = user.auth_info.as_mut() {
            auth.token = None;
        }
    }
    let config =
        Config::from_custom_kubeconfig(anonymous, &kube::config::KubeConfigOptions::default())
            .await?;
    let cms: Api<ConfigMap> = Api::default_namespaced(Client::try_from(config)?);
    let err = cms.get("secure").await.expect_err("unauthorized");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 401),
        "{err}"
    );
    Ok(())
}

/// Polls until `check` holds, for up to ten seconds.
async fn eventually<F, Fut>(what: &str, check: F) -> anyhow::Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check().await? {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

fn owned_by(name: &str, owner: &ConfigMap) -> ConfigMap {
    let mut child = cm(name, "x");
    child.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: owner.metadata.name.clone().unwrap_or_default(),
            uid: owner.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
    ]);
    child
}

#[tokio::test]
async fn garbage_collection_should_follow_the_propagation_policy() -> anyhow::Result<()> {
    let (_server, client) = cluster(1000).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PostParams::default();

    // Background: the dependent goes after its owner.
    let owner = cms.create(&pp, &cm("bg-owner", "x")).await?;
    cms.create(&pp, &owned_by("bg-child", &owner)).await?;
    cms.delete("bg-owner", &DeleteParams::background()).await?;
    eventually("the background dependent to go", || async {
        Ok(cms.get_opt("bg-child").await?.is_none())
    })
    .await?;

    // Written after its owner went (an apply racing the deletion): it goes
    // too, as the real collector deletes dependents of a dangling owner.
    let late = cms.create(&pp, &owned_by("bg-late", &owner)).await?;
    assert!(late.metadata.uid.is_some());
    eventually("the dependent of a gone owner to go", || async {
        Ok(cms.get_opt("bg-late").await?.is_none())
    })
    .await?;

    // Foreground: the owner waits for its dependents, then goes too.
    let owner = cms.create(&pp, &cm("fg-owner", "x")).await?;
    cms.create(&pp, &owned_by("fg-child", &owner)).await?;
    cms.delete("fg-owner", &DeleteParams::foreground()).await?;
    eventually("the foreground owner and dependent to go", || async {
        Ok(cms.get_opt("fg-owner").await?.is_none() && cms.get_opt("fg-child").await?.is_none())
    })
    .await?;

    // Orphan: the dependent stays, without its owner reference.
    let owner = cms.create(&pp, &cm("or-owner", "x")).await?;
    cms.create(&pp, &owned_by("or-child", &owner)).await?;
    cms.delete("or-owner", &DeleteParams::orphan()).await?;
    eventually("the orphaning owner to go", || async {
        Ok(cms.get_opt("or-owner").await?.is_none())
    })
    .await?;
    let orphan = cms.get("or-child").await?;
    assert!(
        orphan
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
    Ok(())
}

#[tokio::test]
async fn deleting_a_namespace_should_delete_its_objects_then_itself() -> anyhow::Result<()> {
    let (_server, client) = cluster(1000).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team-a"}}))?;
    namespaces.create(&PostParams::default(), &ns).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
    let mut held = cm("held", "x");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &held).await?;
    cms.create(&PostParams::default(), &cm("plain", "x"))
        .await?;

    namespaces
        .delete("team-a", &DeleteParams::default())
        .await?;
    let terminating = namespaces.get("team-a").await?;
    assert_eq!(
        terminating.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    eventually("the plain object to go", || async {
        Ok(cms.get_opt("plain").await?.is_none())
    })
    .await?;
    // The finalizer holds the object, and so the namespace.
    assert!(namespaces.get_opt("team-a").await?.is_some());
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await?;
    eventually("the namespace to go", || async {
        Ok(namespaces.get_opt("team-a").await?.is_none())
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn server_side_apply_should_track_owners_conflict_and_prune() -> anyhow::Result<()> {
    let (_server, client) = cluster(1000).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let apply = |data: serde_json::Value| {
        Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": data}),
        )
    };
    let one = PatchParams::apply("one");
    let created = cms
        .patch("ssa", &one, &apply(json!({"a": "1", "b": "2"})))
        .await?;
    let managers: Vec<_> = created
        .metadata
        .managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|m| m.manager)
        .collect();
    assert_eq!(managers, [Some("one".to_owned())]);

    // The same apply again changes nothing: same resourceVersion.
    let again = cms
        .patch("ssa", &one, &apply(json!({"a": "1", "b": "2"})))
        .await?;
    assert_eq!(
        again.metadata.resource_version,
        created.metadata.resource_version
    );

    // Another manager changing `a` conflicts, unless it forces.
    let two = PatchParams::apply("two");
    let err = cms
        .patch("ssa", &two, &apply(json!({"a": "9"})))
        .await
        .expect_err("conflict");
    match err {
        kube::Error::Api(status) => {
            assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
            assert!(
                status.message.contains("one") && status.message.contains(".data.a"),
                "{}",
                status.message
            );
        }
        other => anyhow::bail!("expected a conflict, got {other}"),
    }
    let forced = cms
        .patch("ssa", &two.clone().force(), &apply(json!({"a": "9"})))
        .await?;
    assert_eq!(
        forced
            .data
            .clone()
            .unwrap_or_default()
            .get("a")
            .map(String::as_str),
        Some("9")
    );

    // `one` stops applying `b`: it goes (nobody else owns it); `a` is now two's.
    let pruned = cms.patch("ssa", &one, &apply(json!({}))).await?;
    let data = pruned.data.unwrap_or_default();
    assert_eq!(
        (data.get("a").map(String::as_str), data.get("b")),
        (Some("9"), None)
    );
    Ok(())
}

#[tokio::test]
async fn streaming_lists_and_timeouts_should_work_with_the_watcher() -> anyhow::Result<()> {
    let (_server, client) = cluster(1000).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &cm("before", "x"))
        .await?;
    // A streaming list (sendInitialEvents), and a 1 s watch timeout that the
    // watcher resumes from.
    let config = watcher::Config::default().streaming_lists().timeout(1);
    let mut stream = watcher(cms.clone(), config).boxed();
    let mut init_done = false;
    let mut seen = std::collections::BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut created_after = false;
    while !seen.contains("after") {
        match tokio::time::timeout_at(deadline, stream.try_next()).await?? {
            Some(watcher::Event::InitApply(o) | watcher::Event::Apply(o)) => {
                seen.insert(o.metadata.name.unwrap_or_default());
            }
            Some(watcher::Event::InitDone) => {
                init_done = true;
                // Outlive one watch timeout before writing: the watcher must
                // reconnect from its last version and still see the write.
                tokio::time::sleep(Duration::from_millis(2500)).await;
                if !created_after {
                    cms.create(&PostParams::default(), &cm("after", "x"))
                        .await?;
                    created_after = true;
                }
            }
            Some(_) => {}
            None => break,
        }
    }
    assert!(
        init_done,
        "the initial-events-end bookmark ended the initial list"
    );
    assert!(
        seen.contains("before") && seen.contains("after"),
        "{seen:?}"
    );
    Ok(())
}

#[tokio::test]
async fn bad_input_should_get_a_status_with_the_right_code() -> anyhow::Result<()> {
    let (_server, client) = cluster(1000).await?;
    let send = |method: &str, path: &str, content_type: &str, body: Vec<u8>| {
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .body(body);
        let client = client.clone();
        async move {
            match client.request::<serde_json::Value>(request?).await {
                Ok(_) => anyhow::bail!("expected an error"),
                Err(kube::Error::Api(status)) => Ok((status.code, status.reason)),
                Err(other) => Err(other.into()),
            }
        }
    };
    let cms = "/api/v1/namespaces/default/configmaps";
    let json = "application/json";
    for (method, path, content_type, body, code, reason) in [
        ("POST", cms, json, b"{not json".to_vec(), 400, "BadRequest"),
        (
            "POST",
            cms,
            json,
            br#"{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"a"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            cms,
            json,
            br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            cms,
            json,
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}"#.to_vec(),
            422,
            "Invalid",
        ),
        (
            "POST",
            "/api/v1/namespaces/nope/configmaps",
            json,
            br#"{"metadata":{"name":"a"}}"#.to_vec(),
            404,
            "NotFound",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/widgets",
            json,
            Vec::new(),
            404,
            "NotFound",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/missing",
            "application/merge-patch+json",
            b"{}".to_vec(),
            404,
            "NotFound",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/missing",
            "application/xml",
            b"{}".to_vec(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "POST",
            cms,
            json,
            vec![b' '; (3 << 20) + 1],
            413,
            "RequestEntityTooLarge",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
            json,
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"strict"},"dta":{"a":"b"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/x?fieldManager=m",
            "application/apply-patch+yaml",
            b"a: [unclosed".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?fieldSelector=spec.x%3D1",
            json,
            Vec::new(),
            400,
            "BadRequest",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?labelSelector=a+in+(b",
            json,
            Vec::new(),
            400,
            "BadRequest",
        ),
    ] {
        let (got_code, got_reason) = send(method, path, content_type, body).await?;
        assert_eq!(
            (got_code, got_reason.as_str()),
            (code, reason),
            "{method} {path}"
        );
    }
    // And the server still answers.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("still-fine", "x"))
        .await?;
    Ok(())
}

#[tokio::test]
async fn aggregated_discovery_should_describe_every_group() -> anyhow::Result<()> {
    let (_server, client) = cluster(1000).await?;
    let discovery = kube::Discovery::new(client).run_aggregated().await?;
    let apps = discovery.get("apps").expect("apps group");
    let (deployments, caps) = apps
        .recommended_resources()
        .into_iter()
        .find(|(r, _)| r.plural == "deployments")
        .expect("deployments");
    assert_eq!(
        (deployments.kind.as_str(), deployments.version.as_str()),
        ("Deployment", "v1")
    );
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    assert!(
        caps.subresources
            .iter()
            .any(|(r, _)| r.plural == "deployments/scale" || r.plural == "scale")
    );
    assert!(discovery.get("").is_some(), "the core group");
    let reviews = discovery
        .get("authorization.k8s.io")
        .expect("the reviews' group")
        .recommended_resources();
    let (_, caps) = reviews
        .iter()
        .find(|(r, _)| r.plural == "subjectaccessreviews")
        .expect("subjectaccessreviews listed");
    assert_eq!(caps.operations, vec!["create".to_owned()], "create-only");
    assert_eq!(
        discovery
            .get("autoscaling")
            .map(|g| g.preferred_version_or_latest().to_owned())
            .as_deref(),
        Some("v2")
    );
    Ok(())
}

#[tokio::test]
async fn a_reflector_should_mirror_the_server() -> anyhow::Result<()> {
    let (_server, client) = cluster(1000).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..3 {
        cms.create(&PostParams::default(), &cm(&format!("r-{i}"), "x"))
            .await?;
    }
    let (reader, writer) = kube::runtime::reflector::store::<ConfigMap>();
    let stream = kube::runtime::reflector(writer, watcher(cms.clone(), watcher::Config::default()));
    let task = tokio::spawn(stream.for_each(|_| async {}));
    reader.wait_until_ready().await?;
    cms.delete("r-0", &DeleteParams::default()).await?;
    cms.patch(
        "r-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "changed"}})),
    )
    .await?;
    eventually("the reflector to catch up", || {
        let reader = reader.clone();
        async move {
            let names: std::collections::BTreeSet<String> = reader
                .state()
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .collect();
            let changed = reader.state().iter().any(|c| {
                c.metadata.name.as_deref() == Some("r-1")
                    && c.data.as_ref().and_then(|d| d.get("k")).map(String::as_str)
                        == Some("changed")
            });
            Ok(names == ["r-1".to_owned(), "r-2".to_owned()].into() && changed)
        }
    })
    .await?;
    task.abort();
    Ok(())
}

#[tokio::test]
async fn selector_transitions_should_be_added_and_deleted_events() -> anyhow::Result<()> {
    let (_server, client) = cluster(1000).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = cms
        .create(&PostParams::default(), &cm("moving", "x"))
        .await?;
    let rv = created.metadata.resource_version.unwrap_or_default();
    let mut events = cms
        .watch(
            &kube::api::WatchParams::default()
                .labels("app=demo")
                .timeout(5),
            &rv,
        )
        .await?
        .boxed();
    let relabel = |app: &str| Patch::Merge(json!({"metadata": {"labels": {"app": app}}}));
    cms.patch("moving", &PatchParams::default(), &relabel("other"))
        .await?;
    match events.try_next().await? {
        Some(kube::api::WatchEvent::Deleted(o)) => {
            assert_eq!(
                o.metadata.name.as_deref(),
                Some("moving"),
                "left the selection: DELETED"
            );
        }
        other => anyhow::bail!("expected DELETED, got {other:?}"),
    }
    cms.patch("moving", &PatchParams::default(), &relabel("demo"))
        .await?;
    match events.try_next().await? {
        Some(kube::api::WatchEvent::Added(o)) => {
            assert_eq!(
                o.metadata
                    .labels
                    .unwrap_or_default()
                    .get("app")
                    .map(String::as_str),
                Some("demo")
            );
        }
        other => anyhow::bail!("expected ADDED, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn generation_should_be_kept_where_a_real_server_keeps_it() -> anyhow::Result<()> {
    use k8s_openapi::api::apps::v1::Deployment;
    let (_server, client) = cluster(1000).await?;
    // A ConfigMap has none, created or changed (GenerationChangedPredicate
    // depends on it).
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("a", "1")).await?;
    let changed = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "2"}})),
        )
        .await?;
    assert_eq!(changed.metadata.generation, None);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    assert_eq!(namespaces.get("default").await?.metadata.generation, None);
    // A Deployment starts at 1 and counts its spec's changes, not its
    // labels'.
    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    let deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}))?;
    let created = deployments
        .create(&PostParams::default(), &deployment)
        .await?;
    assert_eq!(created.metadata.generation, Some(1));
    let labelled = deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await?;
    assert_eq!(labelled.metadata.generation, Some(1));
    let scaled = deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await?;
    assert_eq!(scaled.metadata.generation, Some(2));
    Ok(())
}

#[tokio::test]
async fn a_protobuf_delete_should_delete_as_client_go_sends_it() -> anyhow::Result<()> {
    let (_server, client) = cluster(1000).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("a", "1")).await?;
    // client-go's DeleteOptions for a ConfigMap: the `k8s\0` envelope of an
    // empty `v1 DeleteOptions`, 31 bytes.
    let body = b"k8s\0\x0a\x13\x0a\x02v1\x12\x0dDeleteOptions\x12\x00\x1a\x00\x22\x00".to_vec();
    assert_eq!(body.len(), 31);
    let request = http::Request::builder()
        .method("DELETE")
        .uri("/api/v1/namespaces/default/configmaps/a")
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .body(body)?;
    client.request_text(request).await?;
    assert!(cms.get_opt("a").await?.is_none(), "deleted");
    Ok(())
}

/// A Job deleted with no propagation named orphans its Pods, as batch/v1's
/// default policy says, and the answer warns of it (a real server's
/// `Warning: 299 - "child pods are preserved ..."`); a policy named, or
/// the deprecated `orphanDependents`, is followed without a warning.
#[tokio::test]
async fn a_job_delete_should_orphan_by_default_and_warn() -> anyhow::Result<()> {
    let (_server, client) = cluster(1000).await?;
    let jobs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("batch", "v1", "Job"), "jobs"),
    );
    let job = |name: &str| -> anyhow::Result<DynamicObject> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}]}}}
        }))?)
    };
    let delete = |name: &str, body: serde_json::Value| -> anyhow::Result<http::Request<Vec<u8>>> {
        Ok(http::Request::builder()
            .method("DELETE")
            .uri(format!("/apis/batch/v1/namespaces/default/jobs/{name}"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body)?)?)
    };
    let warnings = |response: &http::Response<_>| -> Vec<String> {
        response
            .headers()
            .get_all("warning")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect()
    };
    for name in ["default", "background", "kept"] {
        jobs.create(&PostParams::default(), &job(name)?).await?;
    }
    let response = client
        .send(delete("default", json!({}))?.map(Into::into))
        .await?;
    assert_eq!(
        warnings(&response),
        [
            "299 - \"child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning\""
        ]
    );
    // Marked for the garbage collector, which orphans the Pods, then lets
    // the Job go.
    let body = http_body_util::BodyExt::collect(response.into_body()).await?;
    let marked: serde_json::Value = serde_json::from_slice(&body.to_bytes())?;
    assert!(
        marked.pointer("/metadata/deletionTimestamp").is_some(),
        "{marked}"
    );
    assert_eq!(
        marked.pointer("/metadata/finalizers"),
        Some(&json!(["orphan"]))
    );

    let response = client
        .send(delete("background", json!({"propagationPolicy": "Background"}))?.map(Into::into))
        .await?;
    assert!(warnings(&response).is_empty());
    assert!(
        jobs.get_opt("background").await?.is_none(),
        "deleted at once"
    );

    let response = client
        .send(delete("kept", json!({"orphanDependents": false}))?.map(Into::into))
        .await?;
    assert!(warnings(&response).is_empty());
    assert!(
        jobs.get_opt("kept").await?.is_none(),
        "orphanDependents false: background"
    );

    let both = json!({"orphanDependents": true, "propagationPolicy": "Background"});
    let err = client
        .request_text(delete("default", both)?)
        .await
        .expect_err("both set");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 422),
        "{err}"
    );
    Ok(())
}

/// What `make difference` found a real kube-apiserver (v1.37.2) does that
/// this server did not: typeless items in a list of a built-in type, a
/// Namespace's name label.
#[tokio::test]
async fn writes_and_lists_should_answer_as_a_real_server_does() -> anyhow::Result<()> {
    let (_server, client) = cluster(1000).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team"}}))?,
        )
        .await?;
    let team = namespaces.get("team").await?;
    assert_eq!(
        team.spec.as_ref().and_then(|s| s.finalizers.clone()),
        Some(vec!["kubernetes".to_owned()])
    );
    let labels = team.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels
            .get("kubernetes.io/metadata.name")
            .map(String::as_str),
        Some("team")
    );
    let list = client
        .request_text(http::Request::get("/api/v1/namespaces").body(Vec::new())?)
        .await?;
    let list: serde_json::Value = serde_json::from_str(&list)?;
    assert_eq!(list["kind"], "NamespaceList");
    assert_eq!(list["items"][0]["kind"], serde_json::Value::Null, "{list}");
    assert!(list["items"][0]["metadata"]["name"].is_string());

    // A PUT creates a Lease that is not there (its strategy allows it),
    // never a ConfigMap.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "team");
    let lease = serde_json::from_value(json!({"metadata": {"name": "held"},
        "spec": {"holderIdentity": "a"}}))?;
    let created = leases
        .replace("held", &PostParams::default(), &lease)
        .await?;
    assert_eq!(
        created.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("a")
    );
    let configs: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    let absent = serde_json::from_value(json!({"metadata": {"name": "absent"}}))?;
    match configs
        .replace("absent", &PostParams::default(), &absent)
        .await
    {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 404),
        other => panic!("a ConfigMap PUT must not create: {other:?}"),
    }

    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn services_created_at_once_should_get_distinct_addresses_at_a_constant_cost()
-> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Service;
    let store = Store::new(1000);
    seed(&store)?;
    let api = RestApi::new(store.clone(), ApiConfig::default());
    let server = ApiServer::start("127.0.0.1:0".parse()?, api, None).await?;
    let client = Client::try_from(Config::new(format!("http://{}", server.addr()).parse()?))?;
    let services: Api<Service> = Api::namespaced(client, "default");
    // `count` Services created by 16 clients at once: their probes of the
    // allocators' ranges.
    let create = |from: usize, count: usize| {
        let (services, store) = (services.clone(), store.clone());
        async move {
            let before = store.address_probes();
            let mut running = tokio::task::JoinSet::new();
            for client in 0..16 {
                let services = services.clone();
                running.spawn(async move {
                    for i in (from + client..from + count).step_by(16) {
                        let service: Service = serde_json::from_value(json!({
                            "metadata": {"name": format!("s-{i}")},
                            "spec": {"type": if i % 2 == 0 { "NodePort" } else { "ClusterIP" },
                                "ports": [{"port": 80}]}}))?;
                        services.create(&PostParams::default(), &service).await?;
                    }
                    anyhow::Ok(())
                });
            }
            while let Some(done) = running.join_next().await {
                done??;
            }
            anyhow::Ok(store.address_probes() - before)
        }
    };
    let first = create(0, 200).await?;
    create(200, 1_800).await?;
    let last = create(2_000, 200).await?;
    eprintln!(
        "allocators' probes: {first} for the first 200 Services, {last} for the 200 after 2,000"
    );
    // A ClusterIP each, and a nodePort each other one: at most two
    // probes per address when none was freed.
    assert!(
        first <= 300 && last <= first,
        "{first} probes for the first 200, {last} for the last"
    );
    let all = services.list(&ListParams::default()).await?.items;
    let mut ips: Vec<_> = all
        .iter()
        .filter_map(|s| s.spec.as_ref()?.cluster_ip.clone())
        .collect();
    let mut ports: Vec<_> = all
        .iter()
        .flat_map(|s| s.spec.iter().flat_map(|s| s.ports.iter().flatten()))
        .filter_map(|p| p.node_port)
        .collect();
    let (services_count, node_ports) = (ips.len(), ports.len());
    ips.sort();
    ips.dedup();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(
        (ips.len(), ports.len()),
        (services_count, node_ports),
        "an address given twice"
    );
    assert_eq!(
        (services_count, node_ports),
        (2_201, 1_100),
        "the `kubernetes` Service and ours"
    );
    // A Service deleted frees its address; one asking for a held address
    // is refused as a real server refuses it.
    let taken: Service = serde_json::from_value(json!({"metadata": {"name": "taken"},
        "spec": {"clusterIP": "10.96.0.11", "ports": [{"port": 80}]}}))?;
    let refused = services
        .create(&PostParams::default(), &taken)
        .await
        .expect_err("held");
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 422
            && s.message.contains("failed to allocate IP 10.96.0.11: provided IP is already allocated")),
        "{refused}"
    );
    let holder = all
        .iter()
        .find(|s| s.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("10.96.0.11"))
        .and_then(|s| s.metadata.name.clone())
        .ok_or_else(|| anyhow::anyhow!("no Service holds 10.96.0.11"))?;
    services.delete(&holder, &DeleteParams::default()).await?;
    services.create(&PostParams::default(), &taken).await?;
    Ok(())
}

/// A real server's field manager tracks an object's fields from its
/// creation or first apply: an update of an object nobody owns fields of
/// records nothing, and the first apply gives its fields to
/// `before-first-apply` (as kube-apiserver v1.37.2 does).
#[tokio::test]
async fn an_untracked_object_should_be_tracked_from_its_first_apply() -> anyhow::Result<()> {
    let (_server, client) = cluster(1000).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    // Nothing to own: the creation records no entry.
    let bare: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "bare"}}))?;
    let created = cms.create(&PostParams::default(), &bare).await?;
    assert_eq!(created.metadata.managed_fields, None);
    let patch = json!({"metadata": {"labels": {"sweep": "yes"}}, "data": {"k": "v"}});
    let labelled = cms
        .patch("bare", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    assert_eq!(
        labelled.metadata.managed_fields, None,
        "an update started tracking"
    );
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "bare"}, "data": {"z": "1"}});
    let applied = cms
        .patch("bare", &PatchParams::apply("x"), &Patch::Apply(&applied))
        .await?;
    let owners: Vec<_> = applied
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|e| {
            (
                e.manager.clone().unwrap_or_default(),
                e.operation.clone().unwrap_or_default(),
                serde_json::to_value(&e.fields_v1).unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        owners,
        [
            ("x".into(), "Apply".into(), json!({"f:data": {"f:z": {}}})),
            (
                "before-first-apply".into(),
                "Update".into(),
                json!({"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:sweep": {}}}})
            ),
        ]
    );
    Ok(())
}
