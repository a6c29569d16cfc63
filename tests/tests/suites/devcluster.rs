//! The dev cluster as an operator author uses it: what the embedded API
//! server's built-in controllers and simulated kubelet do, read through
//! kubectl and kube-rs, and the API rules a real server applies (CRD
//! metadata schemas, one Event resource with two views). The server is
//! the binary users run: `kubewasm apiserver --simulate-workloads`.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::runtime::wait::{await_condition, conditions};
use kubewasm_tests::Apiserver;
use serde_json::Value;

/// A server with the workload simulation on, over `nodes` Nodes.
fn simulated(nodes: &str) -> Apiserver {
    Apiserver::start_with(&["--simulate-workloads", "--nodes", nodes])
}

/// The names of the objects `args` lists.
fn names(server: &Apiserver, args: &[&str]) -> Vec<String> {
    let list = json_of(server, args);
    let mut names: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}

/// kubectl's JSON output of `args`.
fn json_of(server: &Apiserver, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&server.ok(&all)).expect("kubectl prints JSON")
}

/// Waits until `check` holds, with what kubectl shows of `show` if it never does.
fn until(
    server: &Apiserver,
    what: &str,
    within: Duration,
    show: &[&str],
    mut check: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + within;
    while !check() {
        if Instant::now() > deadline {
            let (_, out, err) = server.kubectl(show);
            panic!("never: {what}\n{out}{err}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn apply(server: &Apiserver, text: &str) -> (bool, String, String) {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), text).expect("written");
    let path = file.path().to_string_lossy().into_owned();
    server.kubectl(&["apply", "-f", &path])
}

/// A CRD as controller-gen (so kubebuilder) writes it: `metadata: {type: object}`.
const CONTROLLER_GEN_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: guestbooks.webapp.example.com
spec:
  group: webapp.example.com
  names: {kind: Guestbook, listKind: GuestbookList, plural: guestbooks, singular: guestbook}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        description: Guestbook is the Schema for the guestbooks API.
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            properties:
              foo: {type: string}
          status: {type: object}
"#;

#[test]
fn a_controller_gen_crd_should_be_used_as_written() {
    let server = Apiserver::start();
    let (ok, out, err) = apply(&server, CONTROLLER_GEN_CRD);
    assert!(ok, "{out}{err}");
    server.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/guestbooks.webapp.example.com",
    ]);
    let guestbook = "apiVersion: webapp.example.com/v1\nkind: Guestbook\nmetadata:\n  name: gb\n  \
                     labels: {app: web}\n  annotations: {note: kept}\nspec: {foo: bar}\n";
    for extra in [&[][..], &["--validate=false"][..]] {
        let (ok, out, err) = apply(&server, guestbook);
        assert!(ok, "{extra:?}: {out}{err}");
        let stored = json_of(&server, &["get", "guestbook", "gb"]);
        assert_eq!(stored["metadata"]["labels"]["app"], "web", "{stored}");
        assert_eq!(
            stored["metadata"]["annotations"]["note"], "kept",
            "{stored}"
        );
        assert!(
            stored["metadata"]["uid"]
                .as_str()
                .is_some_and(|u| !u.is_empty()),
            "{stored}"
        );
        assert_eq!(stored["spec"]["foo"], "bar");
        server.ok(&["delete", "guestbook", "gb"]);
    }
    // A schema saying more of metadata than its name is refused, in the
    // server's words.
    let refused = CONTROLLER_GEN_CRD
        .replace("guestbooks", "notebooks")
        .replace("Guestbook", "Notebook")
        .replace("guestbook", "notebook")
        .replace(
            "metadata: {type: object}",
            "metadata: {type: object, properties: {labels: {type: object}}}",
        );
    let (ok, out, err) = apply(&server, &refused);
    assert!(!ok, "{out}");
    assert!(
        err.contains("properties[metadata]: Forbidden: must not specify anything other than name and generateName"),
        "{err}"
    );
}

#[test]
fn an_event_written_through_one_api_should_read_through_the_other() {
    let server = Apiserver::start();
    server.ok(&["create", "configmap", "settings", "--from-literal=a=1"]);
    let uid = json_of(&server, &["get", "configmap", "settings"])["metadata"]["uid"]
        .as_str()
        .map(str::to_owned)
        .expect("a uid");
    // What the host's applier writes: events.k8s.io/v1.
    let (ok, out, err) = apply(
        &server,
        &format!(
            "apiVersion: events.k8s.io/v1\nkind: Event\nmetadata: {{name: settings.1, namespace: default}}\n\
             eventTime: \"2026-12-02T20:00:00.000000Z\"\nreportingController: kubewasm/replicator\n\
             reportingInstance: host-1\naction: Reconcile\nreason: Replicated\ntype: Normal\n\
             note: copied to 3 namespaces\nregarding: {{apiVersion: v1, kind: ConfigMap, name: settings, \
             namespace: default, uid: {uid}}}\n"
        ),
    );
    assert!(ok, "{out}{err}");
    let core = json_of(&server, &["get", "events.v1.", "settings.1"]);
    assert_eq!(core["message"], "copied to 3 namespaces", "{core}");
    assert_eq!(core["involvedObject"]["name"], "settings", "{core}");
    assert_eq!(core["reportingComponent"], "kubewasm/replicator", "{core}");
    assert!(core.get("note").is_none(), "{core}");
    let listed = server.ok(&["get", "events"]);
    assert!(
        listed.contains("Replicated")
            && listed.contains("configmap/settings")
            && listed.contains("copied to 3 namespaces"),
        "{listed}"
    );
    let described = server.ok(&["describe", "configmap", "settings"]);
    assert!(
        described.contains("Replicated") && described.contains("copied to 3 namespaces"),
        "{described}"
    );
    let events = server.ok(&["events", "--for", "configmap/settings"]);
    assert!(events.contains("copied to 3 namespaces"), "{events}");
    // And back: a core Event read through events.k8s.io, selected by a
    // field of that view.
    let (ok, out, err) = apply(
        &server,
        "apiVersion: v1\nkind: Event\nmetadata: {name: settings.2, namespace: default}\n\
         involvedObject: {kind: ConfigMap, name: settings, namespace: default}\n\
         reason: Edited\ntype: Warning\nmessage: edited by hand\nsource: {component: kubectl}\n",
    );
    assert!(ok, "{out}{err}");
    let view = json_of(
        &server,
        &[
            "get",
            "events.v1.events.k8s.io",
            "--field-selector",
            "regarding.name=settings,type=Warning",
        ],
    );
    let items = view["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 1, "{view}");
    assert_eq!(items[0]["note"], "edited by hand");
    assert_eq!(items[0]["deprecatedSource"]["component"], "kubectl");
    assert!(items[0].get("message").is_none(), "{view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_should_roll_out_through_replica_sets_and_roll_back() -> anyhow::Result<()> {
    let server = simulated("1");
    server.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1",
        "--replicas=3",
    ]);
    let deployments: Api<Deployment> = Api::default_namespaced(server.client().await?);
    let rolled_out = await_condition(
        deployments.clone(),
        "web",
        conditions::is_deployment_completed(),
    );
    tokio::time::timeout(Duration::from_secs(30), rolled_out).await??;
    let first = names(&server, &["get", "rs"]);
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(first[0].starts_with("web-"), "{first:?}");
    let rs = json_of(&server, &["get", "rs", &first[0]]);
    let hash = rs["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert_eq!(first[0], format!("web-{hash}"));
    assert_eq!(
        rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );
    assert_eq!(rs["metadata"]["ownerReferences"][0]["kind"], "Deployment");
    let pods = json_of(
        &server,
        &["get", "pods", "-l", &format!("pod-template-hash={hash}")],
    );
    let pods = pods["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(pods.len(), 3);
    for pod in &pods {
        assert_eq!(pod["status"]["phase"], "Running", "{pod}");
        assert!(
            pod["status"]["podIP"]
                .as_str()
                .is_some_and(|ip| ip.starts_with("10.244.")),
            "{pod}"
        );
        assert_eq!(
            pod["metadata"]["ownerReferences"][0]["name"],
            first[0].as_str()
        );
    }

    // A new image: a new ReplicaSet, the old scaled to zero.
    server.ok(&["set", "image", "deployment/web", "nginx=nginx:2"]);
    let (ok, out, err) = server.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(ok && out.contains("successfully rolled out"), "{out}{err}");
    let second = names(&server, &["get", "rs"]);
    assert_eq!(second.len(), 2, "{second:?}");
    let history = server.ok(&["rollout", "history", "deployment/web"]);
    assert!(history.contains('1') && history.contains('2'), "{history}");

    // Undo takes the first ReplicaSet back (no third one), as revision 3.
    server.ok(&["rollout", "undo", "deployment/web"]);
    let (ok, out, err) = server.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(ok, "{out}{err}");
    assert_eq!(
        names(&server, &["get", "rs"]),
        second,
        "undo reuses the old ReplicaSet"
    );
    let back = json_of(&server, &["get", "rs", &first[0]]);
    assert_eq!(back["spec"]["replicas"], 3, "{back}");
    assert_eq!(
        back["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "3"
    );
    let image = server.ok(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ]);
    assert_eq!(image, "nginx:1");

    // Restart: a third template, rolled out.
    server.ok(&["rollout", "restart", "deployment/web"]);
    let (ok, out, err) = server.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(ok, "{out}{err}");
    assert_eq!(names(&server, &["get", "rs"]).len(), 3);
    let status = json_of(&server, &["get", "deployment", "web"])["status"].clone();
    assert_eq!(
        (
            status["replicas"].as_i64(),
            status["updatedReplicas"].as_i64(),
            status["availableReplicas"].as_i64()
        ),
        (Some(3), Some(3), Some(3)),
        "{status}"
    );

    let logs = server.ok(&["logs", "deployment/web"]);
    assert!(logs.contains("is simulated"), "{logs}");
    // Orphaned ReplicaSets outlive their Deployment.
    server.ok(&["delete", "deployment", "web", "--cascade=orphan"]);
    until(
        &server,
        "the deployment gone",
        Duration::from_secs(10),
        &["get", "deploy"],
        || {
            server
                .kubectl(&["get", "deployment", "web"])
                .2
                .contains("NotFound")
        },
    );
    assert_eq!(
        names(&server, &["get", "rs"]).len(),
        3,
        "orphaned, not deleted"
    );
    Ok(())
}

#[test]
fn a_statefulset_should_make_ordered_pods_with_their_claims() {
    let server = simulated("1");
    let (ok, out, err) = apply(
        &server,
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  \
        serviceName: db\n  replicas: 3\n  selector: {matchLabels: {app: db}}\n  template:\n    metadata: {labels: {app: db}}\n    \
        spec: {containers: [{name: db, image: postgres}]}\n  volumeClaimTemplates:\n  - metadata: {name: data}\n    \
        spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n",
    );
    assert!(ok, "{out}{err}");
    let (ok, out, err) = server.kubectl(&["rollout", "status", "statefulset/db", "--timeout=60s"]);
    assert!(ok, "{out}{err}");
    assert_eq!(names(&server, &["get", "pods"]), ["db-0", "db-1", "db-2"]);
    let pods = json_of(&server, &["get", "pods"]);
    let started: Vec<&str> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.pointer("/status/startTime").and_then(Value::as_str))
        .collect();
    let mut ordered = started.clone();
    ordered.sort_unstable();
    assert_eq!(started, ordered, "each ordinal after the one before");
    let pod = json_of(&server, &["get", "pod", "db-1"]);
    assert_eq!(
        (
            pod["spec"]["hostname"].as_str(),
            pod["spec"]["subdomain"].as_str()
        ),
        (Some("db-1"), Some("db"))
    );
    assert_eq!(
        names(&server, &["get", "pvc"]),
        ["data-db-0", "data-db-1", "data-db-2"]
    );
    until(
        &server,
        "claims bound",
        Duration::from_secs(20),
        &["get", "pvc"],
        || {
            json_of(&server, &["get", "pvc"])["items"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|c| {
                    c["status"]["phase"] == "Bound"
                        && c["spec"]["volumeName"]
                            .as_str()
                            .is_some_and(|v| v.starts_with("pvc-"))
                })
        },
    );
    assert_eq!(names(&server, &["get", "pv"]).len(), 3);
    // Scaled down from the highest ordinal; the claims stay.
    server.ok(&["scale", "statefulset/db", "--replicas=1"]);
    until(
        &server,
        "scaled down to db-0",
        Duration::from_secs(30),
        &["get", "pods"],
        || names(&server, &["get", "pods"]) == ["db-0"],
    );
    assert_eq!(names(&server, &["get", "pvc"]).len(), 3);
    // Foreground deletion: the Pods go first, the claims stay (as on a
    // real cluster, unless a retention policy says otherwise).
    server.ok(&[
        "delete",
        "statefulset",
        "db",
        "--cascade=foreground",
        "--timeout=30s",
    ]);
    until(
        &server,
        "the pods gone",
        Duration::from_secs(30),
        &["get", "pods"],
        || names(&server, &["get", "pods"]).is_empty(),
    );
    assert_eq!(names(&server, &["get", "pvc"]).len(), 3);
}

#[test]
fn a_daemonset_should_run_one_pod_on_each_node() {
    let server = simulated("3");
    until(
        &server,
        "three nodes",
        Duration::from_secs(10),
        &["get", "nodes"],
        || names(&server, &["get", "nodes"]).len() == 3,
    );
    let (ok, out, err) = apply(
        &server,
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\nspec:\n  \
        selector: {matchLabels: {app: agent}}\n  template:\n    metadata: {labels: {app: agent}}\n    \
        spec: {containers: [{name: a, image: agent}]}\n",
    );
    assert!(ok, "{out}{err}");
    let (ok, out, err) = server.kubectl(&["rollout", "status", "daemonset/agent", "--timeout=60s"]);
    assert!(ok, "{out}{err}");
    let pods = json_of(&server, &["get", "pods", "-l", "app=agent"]);
    let mut nodes: Vec<&str> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.pointer("/spec/nodeName").and_then(Value::as_str))
        .collect();
    nodes.sort_unstable();
    assert_eq!(
        nodes,
        ["kubewasm-node", "kubewasm-node-2", "kubewasm-node-3"]
    );
    let status = json_of(&server, &["get", "daemonset", "agent"])["status"].clone();
    assert_eq!(
        (
            status["desiredNumberScheduled"].as_i64(),
            status["numberReady"].as_i64()
        ),
        (Some(3), Some(3)),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_should_complete_by_index_and_fail_past_their_backoff_limit() -> anyhow::Result<()> {
    let server = simulated("2");
    let (ok, out, err) = apply(
        &server,
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: indexed}\nspec:\n  \
        completions: 3\n  parallelism: 2\n  completionMode: Indexed\n  template:\n    spec:\n      restartPolicy: Never\n      \
        containers: [{name: c, image: busybox}]\n---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: failing}\nspec:\n  \
        backoffLimit: 1\n  template:\n    metadata: {annotations: {kubewasm.dev/simulate: fail}}\n    spec:\n      \
        restartPolicy: Never\n      containers: [{name: c, image: busybox}]\n",
    );
    assert!(ok, "{out}{err}");
    let jobs: Api<Job> = Api::default_namespaced(server.client().await?);
    let complete = await_condition(jobs.clone(), "indexed", conditions::is_job_completed());
    tokio::time::timeout(Duration::from_secs(30), complete).await??;
    let job = json_of(&server, &["get", "job", "indexed"]);
    assert_eq!(job["status"]["succeeded"], 3, "{job}");
    assert_eq!(job["status"]["completedIndexes"], "0-2", "{job}");
    let pods = names(
        &server,
        &["get", "pods", "-l", "batch.kubernetes.io/job-name=indexed"],
    );
    for (i, pod) in pods.iter().enumerate() {
        assert!(pod.starts_with(&format!("indexed-{i}-")), "{pods:?}");
    }
    let (ok, out, err) = server.kubectl(&[
        "wait",
        "--for=condition=failed",
        "job/failing",
        "--timeout=30s",
    ]);
    assert!(ok, "{out}{err}");
    let failed = json_of(&server, &["get", "job", "failing"]);
    assert_eq!(
        failed["status"]["failed"], 2,
        "backoffLimit 1: two tries; {failed}"
    );
    let reason = failed["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Failed")
        .and_then(|c| c["reason"].as_str())
        .map(str::to_owned);
    assert_eq!(reason.as_deref(), Some("BackoffLimitExceeded"));
    Ok(())
}

#[test]
fn a_cronjob_should_create_its_job_on_schedule() {
    let server = simulated("1");
    server.ok(&[
        "create",
        "cronjob",
        "tick",
        "--image=busybox",
        "--schedule=* * * * *",
    ]);
    // The next minute starts within 60 s; its Job then completes.
    until(
        &server,
        "a scheduled job",
        Duration::from_secs(90),
        &["get", "cronjobs,jobs"],
        || !names(&server, &["get", "jobs"]).is_empty(),
    );
    let job = names(&server, &["get", "jobs"]).remove(0);
    let minute: i64 = job
        .strip_prefix("tick-")
        .and_then(|m| m.parse().ok())
        .expect("tick-<minute>");
    assert!(minute > 29_000_000, "minutes since the epoch: {job}");
    let (ok, out, err) = server.kubectl(&[
        "wait",
        "--for=condition=complete",
        &format!("job/{job}"),
        "--timeout=30s",
    ]);
    assert!(ok, "{out}{err}");
    let cronjob = json_of(&server, &["get", "cronjob", "tick"]);
    assert!(
        cronjob["status"]["lastScheduleTime"].is_string(),
        "{cronjob}"
    );
}

#[test]
fn endpoint_slices_should_follow_pod_readiness() {
    let server = simulated("1");
    let (ok, out, err) = apply(
        &server,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: ready, labels: {app: web}}\n\
        spec: {containers: [{name: c, image: nginx, ports: [{name: http, containerPort: 8080}]}]}\n---\n\
        apiVersion: v1\nkind: Pod\nmetadata: {name: unready, labels: {app: web}, annotations: {kubewasm.dev/simulate: unready}}\n\
        spec: {containers: [{name: c, image: nginx}]}\n---\n\
        apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {app: web}, ports: [{port: 80, targetPort: http}]}\n",
    );
    assert!(ok, "{out}{err}");
    let ip = server.ok(&["get", "service", "web", "-o", "jsonpath={.spec.clusterIP}"]);
    assert!(ip.starts_with("10.96.") && ip != "10.96.0.1", "{ip}");
    let endpoints = || {
        let slices = json_of(
            &server,
            &[
                "get",
                "endpointslices",
                "-l",
                "kubernetes.io/service-name=web",
            ],
        );
        slices["items"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
            .map(|e| {
                (
                    e["targetRef"]["name"].as_str().unwrap_or("").to_owned(),
                    e["conditions"]["ready"] == true,
                )
            })
            .collect::<std::collections::BTreeMap<String, bool>>()
    };
    until(
        &server,
        "both pods listed",
        Duration::from_secs(20),
        &["get", "endpointslices", "-o", "yaml"],
        || endpoints() == [("ready".to_owned(), true), ("unready".to_owned(), false)].into(),
    );
    let slice = json_of(
        &server,
        &[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=web",
        ],
    );
    assert_eq!(
        slice["items"][0]["ports"][0]["port"], 8080,
        "named targetPort resolved: {slice}"
    );
    // A deleted Pod is Terminating for its grace period (its kubelet stops
    // it within a step), no longer ready, then leaves the slice.
    server.ok(&["delete", "pod", "ready", "--wait=false"]);
    let terminating = json_of(&server, &["get", "pod", "ready"]);
    assert_eq!(
        terminating["metadata"]["deletionGracePeriodSeconds"], 30,
        "{terminating}"
    );
    assert!(
        terminating["metadata"]["deletionTimestamp"].is_string(),
        "{terminating}"
    );
    until(
        &server,
        "the deleted pod gone",
        Duration::from_secs(20),
        &["get", "endpointslices", "-o", "yaml"],
        || endpoints() == [("unready".to_owned(), false)].into(),
    );
}

#[test]
fn aggregated_cluster_roles_should_show_the_rules_they_select() {
    // Aggregation runs without the simulation too.
    let server = Apiserver::start();
    let rules = |role: &str| json_of(&server, &["get", "clusterrole", role])["rules"].clone();
    until(
        &server,
        "view filled",
        Duration::from_secs(10),
        &["get", "clusterrole", "view", "-o", "yaml"],
        || rules("view").as_array().is_some_and(|r| !r.is_empty()),
    );
    assert!(
        rules("view").to_string().contains("configmaps"),
        "{}",
        rules("view")
    );
    assert!(
        !rules("view").to_string().contains("secrets"),
        "view reads no Secrets: {}",
        rules("view")
    );
    assert!(
        rules("edit").to_string().contains("secrets"),
        "{}",
        rules("edit")
    );
    let (ok, out, err) = apply(
        &server,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n\
        metadata: {name: widgets-view, labels: {rbac.authorization.k8s.io/aggregate-to-view: \"true\"}}\n\
        rules: [{apiGroups: [example.com], resources: [widgets], verbs: [get, list, watch]}]\n",
    );
    assert!(ok, "{out}{err}");
    until(
        &server,
        "widgets in view, edit and admin",
        Duration::from_secs(10),
        &["get", "clusterrole", "admin", "-o", "yaml"],
        || {
            ["view", "edit", "admin"]
                .iter()
                .all(|r| rules(r).to_string().contains("widgets"))
        },
    );
}

/// The condition of `kind` in `object`'s status: (status, reason, message).
fn condition_of(object: &Value, kind: &str) -> Option<(String, String, String)> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .map(|c| {
            let text = |f: &str| c[f].as_str().unwrap_or("").to_owned();
            (text("status"), text("reason"), text("message"))
        })
}

#[test]
fn budgets_quotas_and_autoscalers_should_get_the_status_their_controllers_write() {
    let server = simulated("2");
    let (ok, out, err) = apply(
        &server,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n\
        spec: {replicas: 3, selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, image: nginx}]}}}\n---\n\
        apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: min-two}\nspec: {minAvailable: 2, selector: {matchLabels: {app: web}}}\n---\n\
        apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: half}\nspec: {maxUnavailable: 50%, selector: {matchLabels: {app: web}}}\n---\n\
        apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: nothing}\nspec: {minAvailable: 1, selector: {matchLabels: {app: none}}}\n---\n\
        apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: counts}\nspec: {hard: {pods: \"10\", count/deployments.apps: \"5\", requests.cpu: \"1\"}}\n---\n\
        apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: missing}\n\
        spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: nowhere}, minReplicas: 1, maxReplicas: 3}\n",
    );
    assert!(ok, "{out}{err}");
    let status = |kind: &str, name: &str| json_of(&server, &["get", kind, name])["status"].clone();
    let counts = |name: &str| {
        let s = status("pdb", name);
        [
            "currentHealthy",
            "desiredHealthy",
            "expectedPods",
            "disruptionsAllowed",
        ]
        .map(|f| s[f].as_i64().unwrap_or(-1))
    };
    until(
        &server,
        "min-two allows one disruption",
        Duration::from_secs(30),
        &["get", "pdb", "-o", "yaml"],
        || counts("min-two") == [3, 2, 3, 1],
    );
    let pdb = json_of(&server, &["get", "pdb", "min-two"]);
    assert_eq!(
        condition_of(&pdb, "DisruptionAllowed"),
        Some(("True".into(), "SufficientPods".into(), String::new())),
        "{pdb}"
    );
    // 50% of the Deployment's 3, rounded up, may be unavailable.
    until(
        &server,
        "half allows two",
        Duration::from_secs(10),
        &["get", "pdb", "half", "-o", "yaml"],
        || counts("half") == [3, 1, 3, 2],
    );
    until(
        &server,
        "nothing covered, nothing allowed",
        Duration::from_secs(10),
        &["get", "pdb", "nothing", "-o", "yaml"],
        || {
            counts("nothing") == [0, 1, 0, 0]
                && condition_of(
                    &json_of(&server, &["get", "pdb", "nothing"]),
                    "DisruptionAllowed",
                )
                .is_some_and(|(s, r, _)| s == "False" && r == "InsufficientPods")
        },
    );
    // The quota counts objects; a compute amount is not summed.
    until(
        &server,
        "the quota's use counted",
        Duration::from_secs(10),
        &["get", "quota", "counts", "-o", "yaml"],
        || {
            let s = status("quota", "counts");
            s["used"] == serde_json::json!({"pods": "3", "count/deployments.apps": "1"})
                && s["hard"]["requests.cpu"] == "1"
        },
    );
    // An autoscaler whose target is missing says so; one whose target is
    // below its minimum scales it up.
    until(
        &server,
        "the missing target reported",
        Duration::from_secs(10),
        &["get", "hpa", "missing", "-o", "yaml"],
        || {
            condition_of(&json_of(&server, &["get", "hpa", "missing"]), "AbleToScale")
                == Some((
                    "False".into(),
                    "FailedGetScale".into(),
                    "the HPA controller was unable to get the target's current scale: deployments.apps \"nowhere\" not found".into(),
                ))
        },
    );
    let (ok, out, err) = apply(
        &server,
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web}\n\
        spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, minReplicas: 4, maxReplicas: 6}\n",
    );
    assert!(ok, "{out}{err}");
    until(
        &server,
        "the deployment scaled to the minimum",
        Duration::from_secs(10),
        &["get", "hpa", "web", "-o", "yaml"],
        || {
            json_of(&server, &["get", "deployment", "web"])["spec"]["replicas"] == 4
                && status("hpa", "web")["desiredReplicas"] == 4
        },
    );
    // A rescale says it did not go to zero, with the generation it saw.
    let hpa = json_of(&server, &["get", "hpa", "web"]);
    assert_eq!(
        condition_of(&hpa, "ScaledToZero"),
        Some((
            "False".into(),
            "NotScaledToZero".into(),
            "the HPA controller did not scale the workload to zero".into()
        )),
        "{hpa}"
    );
    assert_eq!(hpa["status"]["observedGeneration"], 1, "{hpa}");
    // The budgets follow the fourth Pod.
    until(
        &server,
        "min-two counts four",
        Duration::from_secs(30),
        &["get", "pdb", "-o", "yaml"],
        || counts("min-two") == [4, 2, 4, 2],
    );
}
