//! A test plugin written against Kubernetes 1.33's types (the guest SDK's
//! `v1_33` feature), run by a host that speaks a newer release: objects
//! cross the boundary as JSON, so the types a plugin was built with are
//! its own business. For a ConfigMap labelled `deploy=yes` it applies a
//! Deployment of the same name with `data.replicas` replicas, written in
//! 1.33's shape of the type (`Deployment.spec` an `Option`, which 1.37's
//! types made required), annotated `kubewasm.dev/seen` with what it read of
//! that Deployment through the same types (its replicas, or `none`).

use std::collections::BTreeMap;

use kubewasm_guest::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use kubewasm_guest::k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, PodTemplateSpec};
use kubewasm_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kubewasm_guest::{Context, Declaration, Outcome, Reconciler, Result};

/// The plugin.
pub struct Kubernetes133;

impl Reconciler for Kubernetes133 {
    fn declare() -> Declaration {
        Declaration::new::<ConfigMap>("kubernetes-1-33", env!("CARGO_PKG_VERSION"))
            .primary_selector("deploy=yes")
            .owns::<Deployment>()
    }

    fn reconcile(ctx: &Context) -> Result<Outcome> {
        let Some(config) = ctx.primary::<ConfigMap>()? else {
            return Ok(Outcome::new());
        };
        let replicas = config
            .data
            .as_ref()
            .and_then(|d| d.get("replicas"))
            .and_then(|r| r.parse().ok())
            .unwrap_or(1);
        let seen = ctx
            .get::<Deployment>(ctx.key())?
            .and_then(|d| d.spec)
            .and_then(|s| s.replicas)
            .map_or_else(|| "none".to_owned(), |r| r.to_string());
        let labels = BTreeMap::from([("app".to_owned(), ctx.name().to_owned())]);
        let deployment = Deployment {
            metadata: ObjectMeta {
                name: Some(ctx.name().to_owned()),
                annotations: Some(BTreeMap::from([("kubewasm.dev/seen".to_owned(), seen)])),
                ..ObjectMeta::default()
            },
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                selector: LabelSelector {
                    match_labels: Some(labels.clone()),
                    ..LabelSelector::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(labels),
                        ..ObjectMeta::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: "app".into(),
                            image: Some("nginx:1.27".into()),
                            ..Container::default()
                        }],
                        ..PodSpec::default()
                    }),
                },
                ..DeploymentSpec::default()
            }),
            status: None,
        };
        Ok(Outcome::new().apply(&deployment))
    }
}

kubewasm_guest::export!(Kubernetes133);
