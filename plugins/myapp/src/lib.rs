//! The MyApp operator: for each `example.com/v1` MyApp it desires a
//! Deployment and a Service of the same name, both owned by the MyApp, and
//! reports the Deployment's available replicas in the MyApp's status.

use std::collections::BTreeMap;

use kubewasm_guest::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use kubewasm_guest::k8s_openapi::api::core::v1::{
    Container, ContainerPort, PodSpec, PodTemplateSpec, Service, ServicePort, ServiceSpec,
};
use kubewasm_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition, LabelSelector, ObjectMeta, Time,
};
use kubewasm_guest::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kubewasm_guest::k8s_openapi::jiff::Timestamp;
use kubewasm_guest::{Context, Declaration, Outcome, Reconciler, Result, Verb};

mod types;

pub use types::{MyApp, MyAppSpec, MyAppStatus};

/// The operator.
pub struct MyAppOperator;

impl Reconciler for MyAppOperator {
    fn declare() -> Declaration {
        Declaration::new::<MyApp>("myapp", env!("CARGO_PKG_VERSION"))
            .primary_verbs([Verb::ApplyStatus])
            .owns::<Deployment>()
            .owns::<Service>()
    }

    fn reconcile(ctx: &Context) -> Result<Outcome> {
        // Gone from the cache: the garbage collector removes what we own.
        let Some(app) = ctx.primary::<MyApp>()? else {
            return Ok(Outcome::new());
        };
        let observed = ctx.get::<Deployment>(ctx.key())?;
        Ok(Outcome::new()
            .apply(&desired_deployment(&app))
            .apply(&desired_service(&app))
            .apply_status(&with_status(&app, observed.as_ref(), kubewasm_guest::now())))
    }
}

kubewasm_guest::export!(MyAppOperator);

/// Labels on everything made for `app`; the instance label selects its pods.
fn labels(app: &MyApp) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "myapp".to_owned()),
        ("app.kubernetes.io/instance".to_owned(), name(app)),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "kubewasm-myapp".to_owned(),
        ),
    ])
}

fn selector(app: &MyApp) -> BTreeMap<String, String> {
    BTreeMap::from([("app.kubernetes.io/instance".to_owned(), name(app))])
}

fn name(app: &MyApp) -> String {
    app.metadata.name.clone().unwrap_or_default()
}

fn child_metadata(app: &MyApp) -> ObjectMeta {
    ObjectMeta {
        name: app.metadata.name.clone(),
        namespace: app.metadata.namespace.clone(),
        labels: Some(labels(app)),
        ..ObjectMeta::default()
    }
}

/// The Deployment `app` asks for.
pub fn desired_deployment(app: &MyApp) -> Deployment {
    let mut pod_labels = labels(app);
    pod_labels.extend(selector(app));
    Deployment {
        metadata: child_metadata(app),
        spec: DeploymentSpec {
            replicas: Some(app.spec.replicas),
            selector: LabelSelector {
                match_labels: Some(selector(app)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".into(),
                        image: Some(app.spec.image.clone()),
                        ports: Some(vec![ContainerPort {
                            name: Some("http".into()),
                            container_port: app.spec.port,
                            ..ContainerPort::default()
                        }]),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        status: None,
    }
}

/// The Service `app` asks for.
pub fn desired_service(app: &MyApp) -> Service {
    Service {
        metadata: child_metadata(app),
        spec: Some(ServiceSpec {
            selector: Some(selector(app)),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: app.spec.port,
                target_port: Some(IntOrString::Int(app.spec.port)),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// `app` with the status its observed Deployment implies. The `Available`
/// condition keeps its transition time while its status does not change, so
/// a steady state writes an identical status (a no-op for the API server).
pub fn with_status(app: &MyApp, observed: Option<&Deployment>, now: Timestamp) -> MyApp {
    let available = observed
        .and_then(|d| d.status.as_ref())
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    let wanted = app.spec.replicas;
    let (status, reason, message) = if observed.is_none() {
        (
            "False",
            "DeploymentPending",
            "the Deployment does not exist yet".to_owned(),
        )
    } else if available >= wanted {
        (
            "True",
            "ReplicasAvailable",
            format!("{available} of {wanted} replicas available"),
        )
    } else {
        (
            "False",
            "ReplicasUnavailable",
            format!("{available} of {wanted} replicas available"),
        )
    };
    let previous = app
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Available"));
    let last_transition_time = match previous {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Time(now),
    };
    MyApp {
        metadata: ObjectMeta {
            name: app.metadata.name.clone(),
            namespace: app.metadata.namespace.clone(),
            ..ObjectMeta::default()
        },
        spec: app.spec.clone(),
        status: Some(MyAppStatus {
            available_replicas: available,
            conditions: vec![Condition {
                type_: "Available".into(),
                status: status.into(),
                observed_generation: app.metadata.generation,
                last_transition_time,
                reason: reason.into(),
                message,
            }],
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_guest::ObjectKey;
    use kubewasm_guest::serde_json::{Value, json};
    use kubewasm_guest::testing::Harness;

    fn myapp() -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "MyApp",
               "metadata": {"name": "demo", "namespace": "default", "uid": "u1", "generation": 4},
               "spec": {"replicas": 3, "image": "nginx:1.27", "port": 8080}})
    }

    fn deployment(available: i32) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "demo", "namespace": "default"},
               "spec": {"selector": {}, "template": {}},
               "status": {"availableReplicas": available}})
    }

    fn key() -> ObjectKey {
        ObjectKey::namespaced("default", "demo")
    }

    #[test]
    fn reconcile_should_desire_deployment_service_and_status() {
        let at: kubewasm_guest::k8s_openapi::jiff::Timestamp =
            "2026-01-01T00:00:00Z".parse().expect("a time");
        let outcome = Harness::new()
            .object(myapp())
            .object(deployment(2))
            .now(at)
            .reconcile::<MyAppOperator>(key())
            .expect("reconciles");
        let applied: Vec<&Value> = outcome.applied().collect();
        assert_eq!(applied.len(), 2);
        assert_eq!(applied[0]["kind"], "Deployment");
        assert_eq!(applied[0]["spec"]["replicas"], 3);
        assert_eq!(
            applied[0]["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1.27"
        );
        assert_eq!(
            applied[0]["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
            8080
        );
        assert_eq!(applied[1]["kind"], "Service");
        assert_eq!(applied[1]["spec"]["ports"][0]["port"], 8080);
        let status = outcome.statuses().next().expect("a status");
        assert_eq!(status["status"]["availableReplicas"], 2);
        assert_eq!(status["status"]["conditions"][0]["status"], "False");
        assert_eq!(status["status"]["conditions"][0]["observedGeneration"], 4);
        // The harness's clock, as the host's: a condition's time is the call's.
        assert_eq!(
            status["status"]["conditions"][0]["lastTransitionTime"],
            "2026-01-01T00:00:00Z"
        );
    }

    #[test]
    fn reconcile_of_a_deleted_myapp_should_do_nothing() {
        let outcome = Harness::new()
            .reconcile::<MyAppOperator>(key())
            .expect("reconciles");
        assert!(outcome.actions().is_empty());
    }

    #[test]
    fn status_should_keep_transition_time_while_unchanged() {
        let mut app: MyApp = kubewasm_guest::serde_json::from_value(myapp()).expect("valid");
        let deploy: Deployment =
            kubewasm_guest::serde_json::from_value(deployment(3)).expect("valid");
        let first = with_status(&app, Some(&deploy), Timestamp::UNIX_EPOCH);
        app.status = first.status.clone();
        let later = Timestamp::from_second(1_000).expect("valid time");
        let second = with_status(&app, Some(&deploy), later);
        assert_eq!(
            first.status, second.status,
            "steady state writes the same status"
        );
        let none = with_status(&app, None, later);
        let cond = &none.status.expect("status").conditions[0];
        assert_eq!(
            (cond.status.as_str(), cond.last_transition_time.0),
            ("False", later)
        );
    }
}
