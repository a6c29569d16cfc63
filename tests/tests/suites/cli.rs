//! The `kubewasm` binary as plugin authors and operators use it: crds,
//! inspect and replay.

use std::path::Path;
use std::process::{Command, Output};

use kubewasm_tests::{compiled_cache_dir, example_file, example_plugin, kubewasm_bin, test_plugin};
use serde_json::{Value, json};

/// Runs the binary with the tests' shared precompiled cache, so each
/// component is compiled once per test run, not once per invocation.
fn kubewasm(args: &[&str]) -> Output {
    Command::new(kubewasm_bin())
        .args(args)
        .env("KUBEWASM_CACHE_DIR", compiled_cache_dir())
        .output()
        .expect("kubewasm runs")
}

/// Replays an example plugin against its `example.yaml`; it must succeed.
fn replay_example(plugin: &str, key: &str, extra: &[&str]) -> Output {
    let wasm = example_plugin(plugin);
    let objects = example_file(plugin, "example.yaml");
    let crd = example_file(plugin, "crd.yaml");
    let mut args = vec!["replay", path(&wasm), "--objects", path(&objects)];
    if crd.is_file() {
        args.extend(["--objects", path(&crd)]);
    }
    args.extend(["--key", key]);
    args.extend(extra);
    let out = kubewasm(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn deploy_crds_should_be_what_kubewasm_crds_prints() {
    let out = kubewasm(&["crds"]);
    assert!(out.status.success());
    let shipped =
        std::fs::read_to_string(kubewasm_tests::workspace_root().join("deploy/crds.yaml"))
            .expect("deploy/crds.yaml");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        shipped,
        "deploy/crds.yaml is stale: kubewasm crds > deploy/crds.yaml"
    );
}

#[test]
fn the_sdks_resource_types_should_be_what_kubewasm_types_prints() {
    for (lang, file) in [
        ("python", "guest-sdk/python/kubewasm_guest/types.py"),
        ("js", "guest-sdk/js/src/types.js"),
        ("go", "guest-sdk/go/builtin_types.go"),
    ] {
        let out = kubewasm(&["types", "--lang", lang]);
        assert!(out.status.success());
        let shipped = std::fs::read_to_string(kubewasm_tests::workspace_root().join(file))
            .expect("shipped constants");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            shipped,
            "{file} is stale: kubewasm types --lang {lang} > {file}"
        );
    }
    let crd = example_file("myapp", "crd.yaml");
    let out = kubewasm(&["types", "--lang", "python", "--crd", path(&crd)]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(r#"MyApp = ResourceType("example.com", "v1", "MyApp", "myapps", True)"#)
    );
    let out = kubewasm(&[
        "types",
        "--lang",
        "js",
        "--crd",
        path(&example_file("myapp", "demo.yaml")),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no CustomResourceDefinition"));
}

#[test]
fn replay_map_should_print_the_keys_map_keys_gives_and_refuse_an_unknown_type() {
    let dir = tempfile::tempdir().expect("tempdir");
    let object = dir.path().join("trigger.yaml");
    std::fs::write(
        &object,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: trigger, namespace: default}\n\
         data: {keys: \"2\", name: target}\n",
    )
    .expect("written");
    let plugin = test_plugin("misbehave");
    let out = kubewasm(&[
        "replay",
        path(&plugin),
        "--objects",
        path(&object),
        "--map",
        "v1/ConfigMap",
        path(&object),
        "-o",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        report,
        json!({"call": "map-keys", "object": "default/trigger", "keys": ["default/target", "default/target"]})
    );
    let out = kubewasm(&[
        "replay",
        path(&plugin),
        "--objects",
        path(&object),
        "--map",
        "v1/Nope",
        path(&object),
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown type `v1/Nope`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn inspect_should_print_the_declaration_as_json() {
    let out = kubewasm(&["inspect", path(&example_plugin("myapp"))]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decl: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(decl["name"], "myapp");
    assert_eq!(decl["primary"]["kind"], "MyApp");
    assert_eq!(decl["secondaries"][0]["mapping"]["kind"], "ownerReferences");
}

/// Contract versioning through replay: myapp built against 0.1.0 and 0.2.0
/// (kept as built) and against 0.3.0 ask for the very same requests, byte
/// for byte.
#[test]
fn replays_of_myapp_on_every_contract_should_print_the_same_bytes() {
    let objects = example_file("myapp", "example.yaml");
    let crd = example_file("myapp", "crd.yaml");
    let replay = |wasm: &Path| {
        let out = kubewasm(&[
            "replay",
            path(wasm),
            "--objects",
            path(&crd),
            "--objects",
            path(&objects),
            "--key",
            "default/demo",
            "--now",
            "2026-01-01T00:00:00Z",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            out.stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (new, new_log) = replay(&example_plugin("myapp"));
    assert!(new_log.contains(r#"contract="0.3.0""#), "{new_log}");
    for version in ["0.1.0", "0.2.0"] {
        let (old, old_log) = replay(&kubewasm_tests::contract_fixture(version, "myapp"));
        assert!(
            old_log.contains(&format!(r#"contract="{version}""#)),
            "{old_log}"
        );
        assert_eq!(String::from_utf8_lossy(&old), String::from_utf8_lossy(&new));
    }
    // The plugin's own clock is the call's: the status it computes carries
    // `--now`, so the bytes are the same on every run.
    assert!(
        String::from_utf8_lossy(&new).contains("lastTransitionTime: 2026-01-01T00:00:00Z"),
        "{}",
        String::from_utf8_lossy(&new)
    );
}

/// `myapp` in Go (plugins/myapp-go, the Go SDK) and in Rust: the same
/// fixtures, the same requests to the byte.
#[test]
fn myapp_in_go_should_replay_the_fixtures_to_the_rust_ones_bytes() {
    let pending = tempfile::NamedTempFile::new().expect("temp file");
    let example = std::fs::read_to_string(example_file("myapp", "example.yaml")).expect("example");
    let app = example.split("\n---\n").next().expect("the MyApp");
    std::fs::write(pending.path(), app).expect("written");
    for objects in [
        example_file("myapp", "example.yaml"),
        pending.path().to_owned(),
    ] {
        for format in ["yaml", "json"] {
            let replay = |plugin: &Path| {
                let out = kubewasm(&[
                    "replay",
                    path(plugin),
                    "--objects",
                    path(&example_file("myapp", "crd.yaml")),
                    "--objects",
                    path(&objects),
                    "--key",
                    "default/demo",
                    "--now",
                    "2026-01-01T00:00:00Z",
                    "-o",
                    format,
                ]);
                assert!(
                    out.status.success(),
                    "{}: {}",
                    plugin.display(),
                    String::from_utf8_lossy(&out.stderr)
                );
                String::from_utf8(out.stdout).expect("utf-8")
            };
            let (rust, go) = (
                replay(&example_plugin("myapp")),
                replay(&test_plugin("myapp-go")),
            );
            assert!(rust.contains("Deployment") && rust.contains("Available"));
            assert_eq!(go, rust, "{} as {format}", objects.display());
        }
    }
}

#[test]
fn replay_should_print_deployment_service_and_status_applies() {
    let out = replay_example("myapp", "default/demo", &[]);
    let report: Value = serde_yaml::from_slice(&out.stdout).expect("yaml");
    let actions = report["actions"].as_array().expect("actions");
    let kinds: Vec<_> = actions
        .iter()
        .map(|a| {
            (
                a["action"].as_str().unwrap_or(""),
                a["body"]["kind"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("apply", "Deployment"),
            ("apply", "Service"),
            ("applyStatus", "MyApp")
        ]
    );
    for child in &actions[..2] {
        assert_eq!(
            child["body"]["metadata"]["ownerReferences"][0]["name"],
            "demo"
        );
        assert!(
            child["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("fieldManager=kubewasm-myapp&force=true"))
        );
    }
    assert_eq!(actions[2]["body"]["status"]["availableReplicas"], 2);

    let json_out = replay_example("myapp", "default/demo", &["-o", "json"]);
    let report: Value = serde_json::from_slice(&json_out.stdout).expect("json");
    assert_eq!(report["call"], "reconcile");
    assert_eq!(report["actions"].as_array().map(Vec::len), Some(3));
}

/// `patch` merged into `object`, maps key by key (as an apply leaves
/// what it does not set).
fn merge(object: &mut Value, patch: &Value) {
    match (object, patch) {
        (Value::Object(o), Value::Object(p)) => {
            for (k, v) in p {
                merge(o.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (o, p) => *o = p.clone(),
    }
}

#[test]
fn replay_converged_should_name_what_is_not_so_and_pass_once_it_is() {
    let wasm = example_plugin("myapp");
    let crd = example_file("myapp", "crd.yaml");
    let example = example_file("myapp", "example.yaml");
    let converged = |objects: &Path| {
        kubewasm(&[
            "replay",
            path(&wasm),
            "--objects",
            path(&crd),
            "--objects",
            path(objects),
            "--converged",
            "-o",
            "json",
        ])
    };
    // The example holds a MyApp and its Deployment, no Service: not so.
    let out = converged(&example);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("1 primaries not converged"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(found[0]["key"], "default/demo");
    assert_eq!(found[0]["pending"]["action"], "apply");

    // The state once what it plans is applied: converged, nothing printed.
    let report: Value =
        serde_json::from_slice(&replay_example("myapp", "default/demo", &["-o", "json"]).stdout)
            .expect("json");
    let mut objects = kubewasm_runtime::replay::parse_objects(
        &std::fs::read_to_string(&example).expect("example"),
    )
    .expect("parses");
    for action in report["actions"].as_array().expect("actions") {
        let body = &action["body"];
        let same = |o: &Value| {
            o["kind"] == body["kind"] && o["metadata"]["name"] == body["metadata"]["name"]
        };
        match action["action"].as_str() {
            Some("applyStatus") => {
                if let Some(o) = objects.iter_mut().find(|o| same(o)) {
                    o["status"] = body["status"].clone();
                }
            }
            _ => match objects.iter_mut().find(|o| same(o)) {
                Some(object) => merge(object, body),
                None => objects.push(body.clone()),
            },
        }
    }
    let state = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(
        state.path(),
        json!({"kind": "List", "items": objects}).to_string(),
    )
    .expect("written");
    let out = converged(state.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).ok(),
        Some(json!([]))
    );
}

#[test]
fn replay_should_give_a_fixture_without_uids_stable_ones() {
    // The demo a user applies, written by hand: no uid anywhere.
    let demo = example_file("myapp", "demo.yaml");
    let crd = example_file("myapp", "crd.yaml");
    let replay = || {
        let out = kubewasm(&[
            "replay",
            path(&example_plugin("myapp")),
            "--objects",
            path(&demo),
            "--objects",
            path(&crd),
            "--key",
            "default/demo",
            "--now",
            "2026-01-01T00:00:00Z",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let first = replay();
    let report: Value = serde_yaml::from_slice(&first).expect("yaml");
    let owner = &report["actions"][0]["body"]["metadata"]["ownerReferences"][0];
    assert_eq!(owner["name"], "demo");
    assert_eq!(owner["uid"].as_str().map(str::len), Some(36), "{owner}");
    assert_eq!(replay(), first, "the same bytes, the same uid");
}

#[test]
fn replay_should_pass_config_and_fail_clearly_on_plugin_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let objects = dir.path().join("objects.yaml");
    std::fs::write(
        &objects,
        serde_yaml::to_string(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default", "uid": "u"}}))
        .expect("yaml"),
    )
    .expect("write");
    let config = dir.path().join("config.yaml");
    let plugin = test_plugin("misbehave");

    let replay_with = |mode: &str| {
        std::fs::write(&config, format!("mode: {mode}\n")).expect("write");
        let args = [
            "replay",
            path(&plugin),
            "--objects",
            path(&objects),
            "--config",
            path(&config),
            "--key",
            "default/cm",
        ];
        kubewasm(&args)
    };

    // With a clock given, two replays print the same bytes, the time in them.
    std::fs::write(&config, "mode: language\n").expect("write");
    let at_noon = || {
        kubewasm(&[
            "replay",
            path(&plugin),
            "--objects",
            path(&objects),
            "--config",
            path(&config),
            "--key",
            "default/cm",
            "--now",
            "2026-01-01T12:00:00Z",
        ])
    };
    let (first, second) = (at_noon(), at_noon());
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(first.stdout, second.stdout, "byte-identical");
    let text = String::from_utf8_lossy(&first.stdout);
    assert!(text.contains("2026-01-01T12:00:00"), "{text}");

    let ok = replay_with("ok");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("name: cm-copy"));

    let panic = replay_with("panic");
    assert!(!panic.status.success());
    let stderr = String::from_utf8_lossy(&panic.stderr);
    assert!(
        stderr.contains("error: reconcile of default/cm failed: plugin panicked"),
        "{stderr}"
    );
    assert!(
        stderr.contains("boom: misbehave was asked to panic"),
        "{stderr}"
    );
    assert!(panic.stdout.is_empty());
}

#[test]
fn replay_should_refuse_bad_input_with_a_clear_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugin = example_plugin("myapp");
    let bad_yaml = dir.path().join("bad.yaml");
    std::fs::write(&bad_yaml, "kind: ConfigMap\n---\n: : [\n").expect("write");
    let nameless = dir.path().join("nameless.yaml");
    std::fs::write(&nameless, "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n").expect("write");
    let good = example_file("myapp", "example.yaml");

    for (args, expected) in [
        (
            vec!["--objects", path(&bad_yaml), "--key", "default/demo"],
            "document #2",
        ),
        (
            vec!["--objects", path(&nameless), "--key", "default/demo"],
            "object #1 lacks metadata.name",
        ),
        (
            vec!["--objects", path(&good), "--key", "a/b/c"],
            "invalid object key `a/b/c`",
        ),
        (
            vec!["--objects", "/nonexistent.yaml", "--key", "default/demo"],
            "failed to read /nonexistent.yaml",
        ),
    ] {
        let mut all = vec!["replay", path(&plugin)];
        all.extend(args);
        let out = kubewasm(&all);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{expected}: {stderr}");
    }

    let not_plugin = kubewasm(&["inspect", path(&test_plugin("not-a-plugin"))]);
    assert!(!not_plugin.status.success());
    assert!(String::from_utf8_lossy(&not_plugin.stderr).contains("targets another world"));
}

#[test]
fn replay_should_report_python_and_javascript_errors_and_logs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let objects = dir.path().join("objects.yaml");
    std::fs::write(
        &objects,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: default}\n",
    )
    .expect("write");
    let config = dir.path().join("config.yaml");
    for (plugin, mode, expected) in [
        (
            "misbehave-py",
            "raise",
            // With the file and line that raised, the SDK's frames left out.
            "ValueError: misbehave-py was asked to raise (at misbehave.py:45 in reconcile)",
        ),
        (
            "misbehave-js",
            "throw",
            // Mapped back from the bundle to the source.
            "RangeError: misbehave-js was asked to throw (at tests/guests/misbehave-js/app.js:34)",
        ),
    ] {
        std::fs::write(&config, format!("mode: {mode}\n")).expect("write");
        let plugin = test_plugin(plugin);
        let out = kubewasm(&[
            "replay",
            path(&plugin),
            "--objects",
            path(&objects),
            "--config",
            path(&config),
            "--key",
            "default/cm",
        ]);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("error: reconcile of default/cm failed: plugin reported failure"),
            "{stderr}"
        );
        assert!(stderr.contains(expected), "{stderr}");
    }

    // A Python plugin's log records reach the host's log.
    let out = replay_example("tenant-bootstrap", "team-a", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bootstrapping tenant") && stderr.contains("plugin=tenant-bootstrap"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("reason: TenantBootstrapped"));
}
