//! Authentication and authorization as a real cluster does them: a
//! ServiceAccount token from TokenRequest reads what its Role grants and is
//! refused the rest, with kubectl and kube-rs; impersonation needs the
//! `impersonate` verb; self access reviews answer for the caller, access
//! reviews of others for the subject named (and need their own right);
//! deleting the account revokes its tokens.

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::authorization::v1::{SelfSubjectAccessReview, SubjectAccessReview};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use kubewasm_tests::host::apply_text;
use kubewasm_tests::{Apiserver, kubectl_with};
use serde_json::json;

fn kubeconfig_with(server: &Apiserver, token: &str, dir: &std::path::Path) -> std::path::PathBuf {
    server.kubeconfig_with_token(token, &dir.join("bot.kubeconfig"))
}

async fn create<K>(api: Api<K>, value: serde_json::Value) -> anyhow::Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    K::DynamicType: Default,
{
    Ok(api
        .create(&PostParams::default(), &serde_json::from_value(value)?)
        .await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_token_should_get_what_its_role_grants_and_nothing_else()
-> anyhow::Result<()> {
    let server = Apiserver::start();
    let admin = server.client().await?;
    create(
        Api::<Namespace>::all(admin.clone()),
        json!({"metadata": {"name": "team"}}),
    )
    .await?;
    create(
        Api::<ServiceAccount>::namespaced(admin.clone(), "team"),
        json!({"metadata": {"name": "bot"}}),
    )
    .await?;
    create(Api::<Role>::namespaced(admin.clone(), "team"), json!({"metadata": {"name": "reader"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}))
    .await?;
    create(
        Api::<RoleBinding>::namespaced(admin.clone(), "team"),
        json!({"metadata": {"name": "bot-reads"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "team"}]}),
    )
    .await?;
    create(
        Api::<ConfigMap>::namespaced(admin.clone(), "team"),
        json!({"metadata": {"name": "settings"}, "data": {"a": "1"}}),
    )
    .await?;
    create(
        Api::<Secret>::namespaced(admin.clone(), "team"),
        json!({"metadata": {"name": "key"}, "stringData": {"k": "v"}}),
    )
    .await?;

    // TokenRequest, as `kubectl create token` sends it.
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "team");
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}}))?;
    let issued = accounts
        .create_token_request("bot", &PostParams::default(), &request)
        .await?;
    let token = issued.status.and_then(|s| s.token).unwrap_or_default();
    assert!(token.split('.').count() == 3, "a JWT: {token}");

    let dir = tempfile::tempdir()?;
    let bot = kubeconfig_with(&server, &token, dir.path());
    let (ok, out, err) = kubectl_with(&bot, &["get", "configmaps", "-n", "team", "-o", "name"]);
    assert!(ok && out.contains("configmap/settings"), "{out}{err}");
    for refused in [
        vec!["get", "configmaps", "-n", "default"],
        vec!["get", "secrets", "-n", "team"],
        vec!["delete", "configmap", "settings", "-n", "team"],
        vec!["get", "namespaces"],
        vec!["get", "configmaps", "-n", "team", "--as", "kubewasm-admin"],
    ] {
        let (ok, out, err) = kubectl_with(&bot, &refused);
        assert!(
            !ok && err.contains("Forbidden"),
            "{refused:?} was not refused: {out}{err}"
        );
    }
    let (_, _, err) = kubectl_with(&bot, &["get", "secrets", "-n", "team"]);
    assert!(
        err.contains("User \"system:serviceaccount:team:bot\" cannot list resource \"secrets\" in API group \"\" in the namespace \"team\""),
        "{err}"
    );

    // The admin may impersonate the account, and sees what it sees.
    let (ok, out, err) = server.kubectl(&[
        "get",
        "configmaps",
        "-n",
        "team",
        "-o",
        "name",
        "--as",
        "system:serviceaccount:team:bot",
    ]);
    assert!(ok && out.contains("configmap/settings"), "{out}{err}");
    let (ok, _, err) = server.kubectl(&[
        "get",
        "secrets",
        "-n",
        "team",
        "--as",
        "system:serviceaccount:team:bot",
    ]);
    assert!(!ok && err.contains("Forbidden"), "{err}");

    // A self access review answers for the caller.
    let text = std::fs::read_to_string(&bot)?;
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&text)?,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    let as_bot = Client::try_from(config)?;
    let reviews: Api<SelfSubjectAccessReview> = Api::all(as_bot.clone());
    for (verb, resource, expected) in [
        ("list", "configmaps", true),
        ("delete", "configmaps", false),
        ("get", "secrets", false),
    ] {
        let review: SelfSubjectAccessReview =
            serde_json::from_value(json!({"spec": {"resourceAttributes": {
            "namespace": "team", "verb": verb, "resource": resource}}}))?;
        let answer = reviews.create(&PostParams::default(), &review).await?;
        assert_eq!(
            answer.status.map(|s| s.allowed),
            Some(expected),
            "{verb} {resource}"
        );
    }

    // An access review of another answers for the subject named, with
    // exactly the groups named; the bot may not ask about others.
    let subject = |verb: &str, resource: &str, groups: serde_json::Value| {
        serde_json::from_value::<SubjectAccessReview>(json!({"spec": {
            "user": "system:serviceaccount:team:bot", "groups": groups,
            "resourceAttributes": {"namespace": "team", "verb": verb, "resource": resource}}}))
    };
    let admin_reviews: Api<SubjectAccessReview> = Api::all(admin.clone());
    for (verb, resource, expected) in [
        ("watch", "configmaps", true),
        ("list", "secrets", false),
        ("patch", "configmaps", false),
    ] {
        let answer = admin_reviews
            .create(&PostParams::default(), &subject(verb, resource, json!([]))?)
            .await?;
        assert_eq!(
            answer.status.map(|s| s.allowed),
            Some(expected),
            "{verb} {resource} as the bot"
        );
    }
    let refused = Api::<SubjectAccessReview>::all(as_bot.clone())
        .create(
            &PostParams::default(),
            &subject("get", "secrets", json!([]))?,
        )
        .await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(s)) if s.code == 403),
        "{refused:?}"
    );
    let nobody = admin_reviews
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"spec": {"resourceAttributes": {"verb": "get"}}}))?,
        )
        .await;
    assert!(
        matches!(&nobody, Err(kube::Error::Api(s)) if s.code == 422),
        "{nobody:?}"
    );

    // Deleting the account revokes its token.
    accounts.delete("bot", &DeleteParams::default()).await?;
    let cms: Api<ConfigMap> = Api::namespaced(as_bot, "team");
    let revoked = cms.get("settings").await;
    assert!(
        matches!(&revoked, Err(kube::Error::Api(s)) if s.code == 401),
        "{revoked:?}"
    );
    let forged = kubeconfig_with(&server, "not-a-token", dir.path());
    let (ok, _, err) = kubectl_with(&forged, &["get", "configmaps"]);
    assert!(!ok && err.contains("Unauthorized"), "{err}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_roles_should_bind_as_on_a_real_cluster() -> anyhow::Result<()> {
    let server = Apiserver::start();
    let admin = server.client().await?;
    create(
        Api::<RoleBinding>::namespaced(admin.clone(), "default"),
        json!({"metadata": {"name": "alice-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "alice"}]}),
    )
    .await?;
    let as_alice = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--as", "alice"]);
        server.kubectl(&all)
    };
    assert!(as_alice(&["get", "configmaps"]).0);
    assert!(as_alice(&["get", "pods"]).0);
    assert!(!as_alice(&["get", "secrets"]).0, "view reads no secrets");
    assert!(!as_alice(&["delete", "configmap", "kube-root-ca.crt"]).0);
    assert!(!as_alice(&["get", "configmaps", "-n", "kube-system"]).0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_review_should_check_audiences_and_bearers_need_the_api_audience()
-> anyhow::Result<()> {
    use k8s_openapi::api::authentication::v1::TokenReview;
    let server = Apiserver::start();
    let admin = server.client().await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
    create(accounts.clone(), json!({"metadata": {"name": "robot"}})).await?;
    let issue = |audiences: serde_json::Value| {
        let accounts = accounts.clone();
        async move {
            let request: TokenRequest =
                serde_json::from_value(json!({"spec": {"audiences": audiences}}))?;
            let issued = accounts
                .create_token_request("robot", &PostParams::default(), &request)
                .await?;
            anyhow::Ok(issued)
        }
    };
    let reviews: Api<TokenReview> = Api::all(admin.clone());
    let review = |token: String, audiences: serde_json::Value| {
        let reviews = reviews.clone();
        async move {
            let review: TokenReview =
                serde_json::from_value(json!({"spec": {"token": token, "audiences": audiences}}))?;
            let answer = reviews.create(&PostParams::default(), &review).await?;
            anyhow::Ok(answer.status.unwrap_or_default())
        }
    };

    // A token for another audience: valid for it, refused as a bearer.
    let vault = issue(json!(["vault"])).await?;
    let token = vault.status.and_then(|s| s.token).unwrap_or_default();
    let status = review(token.clone(), json!(["vault", "other"])).await?;
    assert_eq!(status.authenticated, Some(true));
    assert_eq!(status.audiences, Some(vec!["vault".to_owned()]));
    assert_eq!(
        status.user.and_then(|u| u.username).as_deref(),
        Some("system:serviceaccount:default:robot")
    );
    let status = review(token.clone(), json!(["other"])).await?;
    assert_eq!(status.authenticated, Some(false));
    assert!(
        status.error.is_some_and(|e| e.contains("audiences")),
        "names the audience mismatch"
    );
    let dir = tempfile::tempdir()?;
    let (ok, _, err) = kubectl_with(
        &kubeconfig_with(&server, &token, dir.path()),
        &["get", "cm"],
    );
    // kubectl's words for a 401 (its parenthesis depends on whether its
    // discovery cache already knows this address: ports get reused).
    assert!(
        !ok && err.contains("You must be logged in to the server"),
        "a 401: {err}"
    );

    // With no audience the API server's own is issued, reviewed and accepted.
    let default = issue(json!([])).await?;
    let audiences = default
        .spec
        .clone()
        .and_then(|s| s.audiences)
        .unwrap_or_default();
    assert_eq!(audiences, ["https://kubernetes.default.svc.cluster.local"]);
    let token = default.status.and_then(|s| s.token).unwrap_or_default();
    assert_eq!(
        review(token.clone(), json!([])).await?.authenticated,
        Some(true)
    );
    let (ok, _, err) = kubectl_with(
        &kubeconfig_with(&server, &token, dir.path()),
        &["auth", "whoami"],
    );
    assert!(ok, "{err}");

    // Garbage is unauthenticated, and reviewing needs `create tokenreviews`.
    let status = review("not-a-token".to_owned(), json!([])).await?;
    assert_eq!(status.authenticated, Some(false));
    let as_robot = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&std::fs::read_to_string(kubeconfig_with(
            &server,
            &token,
            dir.path(),
        ))?)?,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    let refused = Api::<TokenReview>::all(Client::try_from(as_robot)?)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"spec": {"token": token}}))?,
        )
        .await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(s)) if s.code == 403),
        "{refused:?}"
    );
    Ok(())
}

/// A server with the namespace `team` and its ServiceAccount `bot`.
fn team_with_bot() -> Apiserver {
    let server = Apiserver::start();
    server.ok(&["create", "namespace", "team"]);
    server.ok(&["-n", "team", "create", "serviceaccount", "bot"]);
    server
}

#[test]
fn nobody_should_grant_what_they_do_not_hold_unless_they_may_bind_or_escalate() {
    let server = team_with_bot();
    server.ok(&[
        "-n",
        "team",
        "create",
        "secret",
        "generic",
        "key",
        "--from-literal=k=v",
    ]);
    // The bot manages roles and bindings in its namespace, nothing else.
    let manager = |extra: &str| {
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: rbac-manager, namespace: team}}\nrules:\n- apiGroups: [rbac.authorization.k8s.io]\n  resources: [roles, rolebindings]\n  verbs: [get, list, create, update, patch, delete]\n{extra}"
        )
    };
    apply_text(&server, &manager(""));
    server.ok(&[
        "-n",
        "team",
        "create",
        "rolebinding",
        "bot-manages",
        "--role=rbac-manager",
        "--serviceaccount=team:bot",
    ]);
    let token = server.ok(&["-n", "team", "create", "token", "bot"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = kubeconfig_with(&server, token.trim(), dir.path());
    let refused = |args: &[&str], missing: &str| {
        let (ok, out, err) = kubectl_with(&bot, args);
        assert!(!ok, "{args:?} was allowed: {out}");
        assert!(
            err.contains("is forbidden: user \"system:serviceaccount:team:bot\" (groups=[")
                && err.contains("is attempting to grant RBAC permissions not currently held:")
                && err.contains(missing),
            "{args:?}: {err}"
        );
    };

    // Binding cluster-admin, or writing a Role with rights it lacks: refused,
    // naming what is missing as the real server does.
    refused(
        &[
            "-n",
            "team",
            "create",
            "rolebinding",
            "grab",
            "--clusterrole=cluster-admin",
            "--serviceaccount=team:bot",
        ],
        "{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}",
    );
    refused(
        &[
            "-n",
            "team",
            "create",
            "role",
            "peek",
            "--verb=get,list",
            "--resource=secrets",
        ],
        "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}",
    );
    let (ok, _, err) = kubectl_with(&bot, &["-n", "team", "get", "secret", "key"]);
    assert!(!ok && err.contains("Forbidden"), "{err}");

    // What it holds it may grant: a Role of its own rights, bound to itself.
    let (ok, out, err) = kubectl_with(
        &bot,
        &[
            "-n",
            "team",
            "create",
            "role",
            "roles-reader",
            "--verb=get,list",
            "--resource=roles.rbac.authorization.k8s.io",
        ],
    );
    assert!(ok, "{out}{err}");
    let (ok, out, err) = kubectl_with(
        &bot,
        &[
            "-n",
            "team",
            "create",
            "rolebinding",
            "reads-roles",
            "--role=roles-reader",
            "--serviceaccount=team:bot",
        ],
    );
    assert!(ok, "{out}{err}");

    // `bind` on a ClusterRole lets it bind that role; `escalate` on roles
    // lets it write any Role. Neither lets it read the Secret by itself.
    apply_text(
        &server,
        &manager(
            "- apiGroups: [rbac.authorization.k8s.io]\n  resources: [clusterroles]\n  verbs: [bind]\n  resourceNames: [view]\n- apiGroups: [rbac.authorization.k8s.io]\n  resources: [roles]\n  verbs: [escalate]\n",
        ),
    );
    let (ok, out, err) = kubectl_with(
        &bot,
        &[
            "-n",
            "team",
            "create",
            "rolebinding",
            "views",
            "--clusterrole=view",
            "--serviceaccount=team:bot",
        ],
    );
    assert!(ok, "bind: {out}{err}");
    refused(
        &[
            "-n",
            "team",
            "create",
            "rolebinding",
            "edits",
            "--clusterrole=edit",
            "--serviceaccount=team:bot",
        ],
        "Verbs:[",
    );
    let (ok, out, err) = kubectl_with(
        &bot,
        &[
            "-n",
            "team",
            "create",
            "role",
            "peek",
            "--verb=get",
            "--resource=secrets",
        ],
    );
    assert!(ok, "escalate: {out}{err}");
    let (ok, _, err) = kubectl_with(&bot, &["-n", "team", "get", "secret", "key"]);
    assert!(!ok && err.contains("Forbidden"), "{err}");
}

/// A ServiceAccount bound to `edit` in its namespace may do there what a
/// real `edit` allows and nothing more: its workloads, Services and
/// Secrets, not its quota, its LimitRange, its Namespace or its Pods'
/// status (the default roles are the real server's bootstrap policy).
#[test]
fn edit_in_a_namespace_should_grant_what_a_real_edit_grants_and_no_more() {
    let server = team_with_bot();
    server.ok(&[
        "-n",
        "team",
        "create",
        "rolebinding",
        "bot-edits",
        "--clusterrole=edit",
        "--serviceaccount=team:bot",
    ]);
    let can = |question: &[&str]| {
        let mut args = vec!["auth", "can-i"];
        args.extend_from_slice(question);
        args.extend(["-n", "team", "--as=system:serviceaccount:team:bot"]);
        let (_, out, err) = server.kubectl(&args);
        match out.trim() {
            "yes" => true,
            "no" => false,
            other => panic!("kubectl auth can-i {question:?}: {other} {err}"),
        }
    };
    for allowed in [
        &["create", "deployments.apps"][..],
        &["delete", "pods"],
        &["update", "services"],
        &["create", "secrets"],
        &["create", "pods/exec"],
    ] {
        assert!(can(allowed), "edit allows {allowed:?}");
    }
    for refused in [
        &["create", "resourcequotas"][..],
        &["delete", "limitranges"],
        &["patch", "namespace/team"],
        &["update", "pods", "--subresource=status"],
        &["create", "roles.rbac.authorization.k8s.io"],
    ] {
        assert!(!can(refused), "edit refuses {refused:?}");
    }
}
