//! `kubewasm apiserver` as a cluster the real `kubectl` accepts: HTTPS with
//! a generated CA, a bearer token, a kubeconfig with namespace `default`.

use std::path::{Path, PathBuf};
use std::process::Command;

use kubewasm_tests::{Apiserver, TestCluster};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

/// Applies the MyApp CRD and waits until it is served; what apply said.
fn apply_myapp_crd(server: &Apiserver) -> String {
    let crd = kubewasm_tests::example_file("myapp", "crd.yaml");
    let applied = server.ok(&["apply", "-f", crd.to_str().expect("utf-8")]);
    server.ok(&[
        "wait",
        "--for",
        "condition=Established",
        "crd/myapps.example.com",
        "--timeout=20s",
    ]);
    applied
}

#[test]
fn kubectl_should_treat_the_embedded_server_as_a_cluster() {
    let server = Apiserver::start();
    if TestCluster::embedded_only("the kubeconfig it writes and the version it serves") {
        let kubeconfig = std::fs::read_to_string(&server.kubeconfig).expect("kubeconfig");
        assert!(
            kubeconfig.contains("server: https://127.0.0.1:")
                && kubeconfig.contains("namespace: default")
        );
        assert!(server.ok(&["version"]).contains(&format!(
            "Server Version: {}-kubewasm",
            kubewasm_types::KUBERNETES_RELEASE
        )));
    }
    let namespaces = server.ok(&["get", "namespaces", "-o", "name"]);
    assert_eq!(
        namespaces.lines().collect::<Vec<_>>(),
        [
            "namespace/default",
            "namespace/kube-node-lease",
            "namespace/kube-public",
            "namespace/kube-system"
        ]
    );
    assert!(
        server
            .ok(&["get", "svc", "kubernetes", "-o", "name"])
            .contains("service/kubernetes")
    );
    let resources = server.ok(&["api-resources"]);
    for line in ["configmaps", "deployments", "customresourcedefinitions"] {
        assert!(
            resources.contains(line),
            "{line} missing from api-resources"
        );
    }
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("deployments") && l.contains("deploy"))
    );
    // The reviews, create-only, as a real server lists them.
    for (group, review) in [
        ("authorization.k8s.io", "subjectaccessreviews"),
        ("authentication.k8s.io", "tokenreviews"),
    ] {
        let listed = server.ok(&["api-resources", "-o", "wide", "--api-group", group]);
        assert!(
            listed.lines().any(|l| {
                let words: Vec<_> = l.split_whitespace().collect();
                words.first() == Some(&review)
                    && words.contains(&"false")
                    && words.contains(&"create")
            }),
            "{listed}"
        );
        let can = server.ok(&["auth", "can-i", "create", &format!("{review}.{group}")]);
        assert_eq!(can.trim(), "yes", "{review}");
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let cm = write(
        dir.path(),
        "cm.json",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"demo"},"data":{"a":"1"}}"#,
    );
    let cm = cm.to_str().expect("utf-8");
    assert!(
        server
            .ok(&["create", "-f", cm, "--validate=false"])
            .contains("configmap/demo created")
    );
    let (ok, _, stderr) = server.kubectl(&["create", "-f", cm, "--validate=false"]);
    assert!(!ok && stderr.contains("AlreadyExists"), "{stderr}");
    server.ok(&["label", "configmap", "demo", "tier=web"]);
    server.ok(&["annotate", "configmap", "demo", "note=hello"]);
    server.ok(&[
        "patch",
        "configmap",
        "demo",
        "--type=merge",
        "-p",
        r#"{"data":{"a":"2"}}"#,
    ]);
    server.ok(&[
        "patch",
        "configmap",
        "demo",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/data/b","value":"3"}]"#,
    ]);
    let json: serde_json::Value =
        serde_json::from_str(&server.ok(&["get", "cm", "-l", "tier=web", "-o", "json"]))
            .expect("json");
    let item = &json["items"][0];
    assert_eq!(item["metadata"]["annotations"]["note"], "hello");
    assert_eq!(item["data"], serde_json::json!({"a": "2", "b": "3"}));
    assert!(
        server
            .ok(&["delete", "configmap", "demo"])
            .contains("deleted")
    );
    let (ok, _, stderr) = server.kubectl(&["get", "configmap", "demo"]);
    assert!(!ok && stderr.contains("NotFound"), "{stderr}");

    // Client-side apply: create, then a strategic merge patch of the change.
    let deploy = |image: &str| {
        format!(
            r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"web"}},"spec":{{"replicas":1,
            "selector":{{"matchLabels":{{"app":"web"}}}},"template":{{"metadata":{{"labels":{{"app":"web"}}}},
            "spec":{{"containers":[{{"name":"web","image":"{image}","env":[{{"name":"A","value":"1"}}]}}]}}}}}}}}"#
        )
    };
    let file = write(dir.path(), "deploy.json", &deploy("nginx:1.26"));
    let file = file.to_str().expect("utf-8");
    assert!(
        server
            .ok(&["apply", "-f", file])
            .contains("deployment.apps/web created")
    );
    write(dir.path(), "deploy.json", &deploy("nginx:1.27"));
    assert!(
        server
            .ok(&["apply", "-f", file])
            .contains("deployment.apps/web configured")
    );
    server.ok(&["patch", "deployment", "web", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"B","value":"2"}]}]}}}}"#]);
    let json: serde_json::Value =
        serde_json::from_str(&server.ok(&["get", "deploy", "web", "-o", "json"])).expect("json");
    let container = &json["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "nginx:1.27");
    // The patched entry first, as the real server orders it.
    let both = serde_json::json!([{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]);
    assert_eq!(container["env"], both);
    assert_eq!(
        json["metadata"]["generation"], 3,
        "each spec change bumps the generation"
    );
    // Apply again: kubectl's patch merges the containers by name (the
    // documents say how), so the entry another wrote stays.
    write(dir.path(), "deploy.json", &deploy("nginx:1.28"));
    server.ok(&["apply", "-f", file]);
    let json: serde_json::Value =
        serde_json::from_str(&server.ok(&["get", "deploy", "web", "-o", "json"])).expect("json");
    let container = &json["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "nginx:1.28");
    assert_eq!(container["env"], both);
    assert!(
        server
            .ok(&["explain", "deployment"])
            .contains("KIND:       Deployment")
    );

    let status = server.terminate();
    if TestCluster::chosen() == TestCluster::Embedded {
        assert!(status.success(), "clean exit on SIGTERM: {status}");
    }
}

#[test]
fn requests_without_the_token_should_be_refused() {
    let server = Apiserver::start();
    let kubeconfig = std::fs::read_to_string(&server.kubeconfig).expect("kubeconfig");
    let anonymous: String = kubeconfig
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("token:") {
                "    token: wrong"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "anonymous", &anonymous);
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&path)
        .args(["get", "namespaces"])
        .output()
        .expect("kubectl runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("You must be logged in to the server"),
        "{stderr}"
    );
    server.terminate();
}

#[test]
fn a_crd_applied_at_run_time_should_be_served_at_once() {
    let server = Apiserver::start();
    assert!(
        apply_myapp_crd(&server)
            .contains("customresourcedefinition.apiextensions.k8s.io/myapps.example.com created")
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let app = write(
        dir.path(),
        "app.yaml",
        "apiVersion: example.com/v1\nkind: MyApp\nmetadata:\n  name: demo\nspec:\n  replicas: 2\n  image: nginx\n  port: 80\n",
    );
    assert!(
        server
            .ok(&["apply", "-f", app.to_str().expect("utf-8")])
            .contains("myapp.example.com/demo created")
    );
    assert_eq!(
        server.ok(&["get", "ma", "-o", "name"]).trim(),
        "myapp.example.com/demo"
    );
    assert!(
        server
            .ok(&["api-resources", "--api-group=example.com"])
            .contains("myapps")
    );
    // The CRD's structural schema: defaults, validation, strict field validation.
    assert_eq!(
        server.ok(&["get", "myapp", "demo", "-o", "jsonpath={.spec.replicas}"]),
        "2"
    );
    let lean = write(
        dir.path(),
        "lean.yaml",
        "apiVersion: example.com/v1\nkind: MyApp\nmetadata:\n  name: lean\nspec:\n  image: nginx\n  port: 80\n",
    );
    server.ok(&["apply", "-f", lean.to_str().expect("utf-8")]);
    assert_eq!(
        server.ok(&["get", "myapp", "lean", "-o", "jsonpath={.spec.replicas}"]),
        "1",
        "defaulted"
    );
    let negative = write(
        dir.path(),
        "negative.yaml",
        "apiVersion: example.com/v1\nkind: MyApp\nmetadata:\n  name: neg\nspec:\n  image: nginx\n  port: 80\n  replicas: -1\n",
    );
    let (ok, _, stderr) = server.kubectl(&["apply", "-f", negative.to_str().expect("utf-8")]);
    assert!(
        !ok && stderr.contains("spec.replicas in body should be greater than or equal to 0"),
        "{stderr}"
    );
    let typo = write(
        dir.path(),
        "typo.yaml",
        "apiVersion: example.com/v1\nkind: MyApp\nmetadata:\n  name: typo\nspec:\n  image: nginx\n  port: 80\n  replica: 3\n",
    );
    let (ok, _, stderr) = server.kubectl(&["apply", "-f", typo.to_str().expect("utf-8")]);
    assert!(
        !ok && stderr.contains("unknown field \"spec.replica\""),
        "{stderr}"
    );
    server.ok(&["delete", "crd", "myapps.example.com"]);
    let (ok, _, stderr) = server.kubectl(&["get", "myapps"]);
    assert!(!ok, "the resource is gone with its CRD: {stderr}");
    server.terminate();
}

/// `kubectl create -f` of a `v1 List`. The v3 documents cannot vouch for a
/// List, so kubectl validates its items on the client against
/// `/openapi/v2` (gnostic's protobuf) before it sends one: a valid list is
/// created whole, a custom resource among its items; an item's unknown
/// field, wrong type or missing required field is refused in the real
/// server's words (Kubernetes 1.37.2 says exactly these) and nothing of the
/// list is created.
#[test]
fn kubectl_create_should_validate_the_items_of_a_list() {
    let server = Apiserver::start();
    apply_myapp_crd(&server);
    let dir = tempfile::tempdir().expect("tempdir");
    // A ConfigMap, a Deployment and a MyApp named `name`.
    let list = |name: &str, replicas: &str, myapp: &str| {
        let text = format!(
            "apiVersion: v1\nkind: List\nitems:\n\
             - apiVersion: v1\n  kind: ConfigMap\n  metadata: {{name: {name}}}\n  data: {{a: b}}\n\
             - apiVersion: apps/v1\n  kind: Deployment\n  metadata: {{name: {name}}}\n  spec:\n    \
             {replicas}\n    selector: {{matchLabels: {{app: {name}}}}}\n    template:\n      \
             metadata: {{labels: {{app: {name}}}}}\n      spec: {{containers: [{{name: c, image: nginx}}]}}\n\
             - apiVersion: example.com/v1\n  kind: MyApp\n  metadata: {{name: {name}}}\n  spec: {myapp}\n"
        );
        let path = write(dir.path(), &format!("{name}.yaml"), &text);
        path.to_str().expect("utf-8").to_owned()
    };
    let good = list("listed", "replicas: 0", "{image: nginx, port: 80}");
    let created = server.ok(&["create", "-f", &good]);
    for line in [
        "configmap/listed created",
        "deployment.apps/listed created",
        "myapp.example.com/listed created",
    ] {
        assert!(created.contains(line), "{created}");
    }
    for (name, replicas, myapp, refusal) in [
        (
            "unknown",
            "replicass: 0",
            "{image: nginx, port: 80}",
            "ValidationError(Deployment.spec): unknown field \"replicass\" in io.k8s.api.apps.v1.DeploymentSpec",
        ),
        (
            "mistyped",
            "replicas: zero",
            "{image: nginx, port: 80}",
            "ValidationError(Deployment.spec.replicas): invalid type for io.k8s.api.apps.v1.DeploymentSpec.replicas: got \"string\", expected \"integer\"",
        ),
        (
            "custom-unknown",
            "replicas: 0",
            "{image: nginx, port: 80, replica: 2}",
            "ValidationError(MyApp.spec): unknown field \"replica\" in com.example.v1.MyApp.spec",
        ),
        (
            "custom-missing",
            "replicas: 0",
            "{image: nginx}",
            "ValidationError(MyApp.spec): missing required field \"port\" in com.example.v1.MyApp.spec",
        ),
    ] {
        let file = list(name, replicas, myapp);
        let (ok, _, stderr) = server.kubectl(&["create", "-f", &file]);
        assert!(!ok && stderr.contains(refusal), "{name}: {stderr}");
        let (exists, _, _) = server.kubectl(&["get", "configmap", name]);
        assert!(!exists, "{name}: an item of a refused list was created");
    }
    server.terminate();
}

#[test]
fn server_side_apply_should_report_and_force_conflicts() {
    let server = Apiserver::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = |value: &str| {
        let path = write(
            dir.path(),
            "cm.yaml",
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  key: \"{value}\"\n"
            ),
        );
        path.to_str().expect("utf-8").to_owned()
    };
    let first = file("1");
    assert!(
        server
            .ok(&["apply", "--server-side", "-f", &first])
            .contains("configmap/ssa serverside-applied")
    );
    let second = file("2");
    let (ok, _, stderr) = server.kubectl(&[
        "apply",
        "--server-side",
        "--field-manager",
        "other",
        "-f",
        &second,
    ]);
    assert!(!ok && stderr.contains("conflict"), "{stderr}");
    server.ok(&[
        "apply",
        "--server-side",
        "--field-manager",
        "other",
        "--force-conflicts",
        "-f",
        &second,
    ]);
    assert_eq!(
        server.ok(&["get", "cm", "ssa", "-o", "jsonpath={.data.key}"]),
        "2"
    );
    let managers = server.ok(&[
        "get",
        "cm",
        "ssa",
        "--show-managed-fields",
        "-o",
        "jsonpath={.metadata.managedFields[*].manager}",
    ]);
    assert!(managers.contains("other"), "{managers}");
    server.terminate();
}

#[test]
fn simulated_workloads_should_become_available() {
    let server = Apiserver::start_with(&["--simulate-workloads"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let deploy = write(
        dir.path(),
        "deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - {name: web, image: nginx}\n",
    );
    server.ok(&["apply", "-f", deploy.to_str().expect("utf-8")]);
    server.ok(&[
        "wait",
        "--for=condition=Available",
        "deployment/web",
        "--timeout=30s",
    ]);
    assert_eq!(
        server.ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.status.availableReplicas}"
        ]),
        "3"
    );
    server.ok(&["scale", "deployment", "web", "--replicas=5"]);
    server.ok(&[
        "wait",
        "--for=jsonpath={.status.availableReplicas}=5",
        "deployment/web",
        "--timeout=30s",
    ]);
    server.terminate();
}

#[test]
fn kubectl_create_should_work_with_its_protobuf_bodies() {
    let server = Apiserver::start();
    assert!(
        server
            .ok(&["create", "namespace", "team-a"])
            .contains("namespace/team-a created")
    );
    assert!(
        server
            .ok(&[
                "create",
                "configmap",
                "settings",
                "-n",
                "team-a",
                "--from-literal=LOG=debug"
            ])
            .contains("created")
    );
    assert!(
        server
            .ok(&[
                "create",
                "secret",
                "generic",
                "token",
                "-n",
                "team-a",
                "--from-literal=key=s3cret"
            ])
            .contains("created")
    );
    assert!(
        server
            .ok(&["create", "serviceaccount", "robot", "-n", "team-a"])
            .contains("created")
    );
    assert_eq!(
        server.ok(&[
            "get",
            "cm",
            "settings",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.data.LOG}"
        ]),
        "debug"
    );
    // c3NjcmV0 is "s3cret" in base64, as Secret data is stored.
    assert_eq!(
        server.ok(&[
            "get",
            "secret",
            "token",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.data.key}"
        ]),
        "czNjcmV0"
    );
    server.terminate();
}

#[test]
fn every_protobuf_creator_of_kubectl_should_work() {
    let server = Apiserver::start();
    let jsonpath = |args: &[&str], path: &str| {
        let mut all = vec!["get"];
        all.extend(args);
        let path = format!("jsonpath={path}");
        all.extend(["-o", &path]);
        server.ok(&all)
    };
    server.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=3",
        "--port=80",
    ]);
    assert_eq!(
        jsonpath(
            &["deployment", "web"],
            "{.spec.replicas} {.spec.template.spec.containers[0].ports[0].containerPort}"
        ),
        "3 80"
    );
    server.ok(&[
        "create",
        "job",
        "once",
        "--image=busybox",
        "--",
        "echo",
        "hi",
    ]);
    assert_eq!(
        jsonpath(
            &["job", "once"],
            "{.spec.template.spec.containers[0].command}"
        ),
        r#"["echo","hi"]"#
    );
    server.ok(&[
        "create",
        "cronjob",
        "tick",
        "--image=busybox",
        "--schedule=*/5 * * * *",
        "--",
        "date",
    ]);
    assert_eq!(
        jsonpath(&["cronjob", "tick"], "{.spec.schedule}"),
        "*/5 * * * *"
    );
    server.ok(&["create", "service", "clusterip", "web", "--tcp=80:8080"]);
    assert_eq!(
        jsonpath(&["service", "web"], "{.spec.ports[0].targetPort}"),
        "8080"
    );
    server.ok(&[
        "create",
        "role",
        "reader",
        "--verb=get,list",
        "--resource=configmaps",
    ]);
    server.ok(&[
        "create",
        "rolebinding",
        "reads",
        "--role=reader",
        "--user=alice",
    ]);
    server.ok(&[
        "create",
        "clusterrole",
        "pods",
        "--verb=get",
        "--resource=pods",
    ]);
    server.ok(&[
        "create",
        "clusterrolebinding",
        "pods",
        "--clusterrole=pods",
        "--group=ops",
    ]);
    assert_eq!(
        jsonpath(
            &["rolebinding", "reads"],
            "{.roleRef.name} {.subjects[0].name}"
        ),
        "reader alice"
    );
    server.ok(&["create", "quota", "small", "--hard=pods=10,cpu=2"]);
    assert_eq!(jsonpath(&["quota", "small"], "{.spec.hard.cpu}"), "2");
    server.ok(&[
        "create",
        "pdb",
        "web",
        "--selector=app=web",
        "--min-available=50%",
    ]);
    assert_eq!(jsonpath(&["pdb", "web"], "{.spec.minAvailable}"), "50%");
    server.ok(&["create", "priorityclass", "high", "--value=1000"]);
    assert_eq!(jsonpath(&["priorityclass", "high"], "{.value}"), "1000");
    server.ok(&["create", "ingress", "web", "--rule=example.com/=web:80"]);
    assert_eq!(
        jsonpath(
            &["ingress", "web"],
            "{.spec.rules[0].http.paths[0].backend.service.name}"
        ),
        "web"
    );
    // Tokens, and the reviews behind `auth can-i` and `auth whoami`.
    server.ok(&["create", "serviceaccount", "bot"]);
    let token = server.ok(&["create", "token", "bot", "--duration=20m"]);
    assert_eq!(token.trim().split('.').count(), 3, "{token}");
    assert_eq!(
        server
            .ok(&["auth", "can-i", "list", "configmaps", "--as=alice"])
            .trim(),
        "yes"
    );
    let (allowed, out, _) =
        server.kubectl(&["auth", "can-i", "delete", "configmaps", "--as=alice"]);
    assert!(!allowed && out.trim() == "no", "{out}");
    assert!(server.ok(&["auth", "whoami"]).contains("kubewasm-admin"));
    server.terminate();
}

#[test]
fn describe_get_watch_and_finalized_deletes_should_work() {
    let server = Apiserver::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let held = write(
        dir.path(),
        "held.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  finalizers: [example.com/hold]\ndata:\n  a: b\n",
    );
    server.ok(&["apply", "-f", held.to_str().expect("utf-8")]);
    let described = server.ok(&["describe", "configmap", "held"]);
    assert!(
        described.contains("held") && described.contains("Data"),
        "{described}"
    );

    // `get -w` streams: it prints an object created after it started.
    let mut watch = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args(["get", "configmaps", "-w", "-o", "name"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("kubectl get -w");
    let stdout = watch.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    server.ok(&["create", "configmap", "watched", "--from-literal=x=y"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let mut seen = false;
    while !seen && std::time::Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(std::time::Duration::from_millis(200)) {
            seen = line.trim() == "configmap/watched";
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(seen, "kubectl get -w printed the new object");

    // A delete waits on the finalizer; removing it completes the delete.
    server.ok(&["delete", "configmap", "held", "--wait=false"]);
    let stamp = server.ok(&[
        "get",
        "cm",
        "held",
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(!stamp.is_empty(), "marked for deletion");
    server.ok(&[
        "patch",
        "configmap",
        "held",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    let (ok, _, stderr) = server.kubectl(&["get", "configmap", "held"]);
    assert!(!ok && stderr.contains("NotFound"), "{stderr}");
    server.terminate();
}

#[test]
fn namespaces_should_be_active_and_secret_string_data_merged() {
    let server = Apiserver::start();
    for immortal in ["default", "kube-system", "kube-public"] {
        let (ok, out, err) = server.kubectl(&["delete", "namespace", immortal]);
        assert!(!ok, "{out}");
        assert!(
            err.contains(&format!(
                "namespaces \"{immortal}\" is forbidden: this namespace may not be deleted"
            )),
            "{err}"
        );
    }
    server.ok(&["create", "namespace", "team-x"]);
    assert_eq!(
        server.ok(&[
            "get",
            "namespace",
            "team-x",
            "-o",
            "jsonpath={.status.phase}"
        ]),
        "Active"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = write(
        dir.path(),
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\ndata: {user: YWRtaW4=}\nstringData: {password: s3cret}\n",
    );
    server.ok(&["apply", "-f", secret.to_str().unwrap_or_default()]);
    let stored: serde_json::Value =
        serde_json::from_str(&server.ok(&["get", "secret", "creds", "-o", "json"])).expect("json");
    assert_eq!(
        stored["data"],
        serde_json::json!({"user": "YWRtaW4=", "password": "czNjcmV0"})
    );
    assert!(stored.get("stringData").is_none(), "{stored}");
    // `kubectl create secret` (a protobuf body) stores its literal in `data`.
    server.ok(&[
        "create",
        "secret",
        "generic",
        "more",
        "--from-literal=token=abc",
    ]);
    assert_eq!(
        server.ok(&["get", "secret", "more", "-o", "jsonpath={.data.token}"]),
        "YWJj"
    );
}
