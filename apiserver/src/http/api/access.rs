//! Who may do what: authentication of bearer tokens, impersonation, RBAC
//! authorization of every resource request (see [`crate::http::auth`]), the
//! self-reviews (`kubectl auth can-i`, `kubectl auth whoami`), the
//! reviews of others (`SubjectAccessReview`, `TokenReview`) and
//! TokenRequest (`kubectl create token`).
//!
//! Non-resource requests (discovery, OpenAPI, `/version`, health) are open
//! to every authenticated user, as `system:discovery` and
//! `system:public-info-viewer` make them on a real cluster; so are the
//! self-reviews, as `system:basic-user` makes them.

use serde_json::{Value, json};

use super::Api;
use super::request::{Reply, Request};
use super::route::{Review, Target};
use crate::http::auth::rbac::{Attributes, Policy};
use crate::http::auth::token::{DEFAULT_EXPIRATION, MAX_EXPIRATION, MIN_EXPIRATION};
use crate::http::auth::{AuthError, Impersonation, User};
use crate::http::error::ApiError;
use crate::objects::{new_uid, strings_at, text_at};

impl Api {
    /// The user a bearer token stands for; everyone is the admin when the
    /// API runs without authentication (in-process tests).
    ///
    /// # Errors
    /// 401 when the token is missing or invalid.
    pub fn authenticate(&self, bearer: Option<&str>) -> Result<User, ApiError> {
        match &self.authenticator {
            None => Ok(User::admin()),
            Some(authenticator) => authenticator.authenticate(bearer).map_err(|e| {
                if !matches!(e, AuthError::Missing) {
                    tracing::debug!(error = %e, "authentication failed");
                }
                ApiError::unauthorized()
            }),
        }
    }

    /// The user a request acts as: its own, or the one it impersonates once
    /// the `impersonate` verb allows each part.
    pub(super) fn acting_user(
        &self,
        user: &User,
        impersonation: &Impersonation,
    ) -> Result<User, ApiError> {
        if impersonation.is_empty() {
            return Ok(user.clone());
        }
        let Some(name) = &impersonation.user else {
            return Err(ApiError::bad_request(
                "requested impersonation of groups or uid without a user",
            ));
        };
        let policy = Policy::of(&self.store);
        let mut checks = Vec::new();
        let account = name
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'));
        checks.push(match account {
            Some((namespace, account)) => Attributes {
                verb: "impersonate".into(),
                resource: "serviceaccounts".into(),
                namespace: namespace.into(),
                name: account.into(),
                ..Attributes::default()
            },
            None => Attributes {
                verb: "impersonate".into(),
                resource: "users".into(),
                name: name.clone(),
                ..Attributes::default()
            },
        });
        for group in &impersonation.groups {
            checks.push(Attributes {
                verb: "impersonate".into(),
                resource: "groups".into(),
                name: group.clone(),
                ..Attributes::default()
            });
        }
        if let Some(uid) = &impersonation.uid {
            checks.push(Attributes {
                verb: "impersonate".into(),
                group: "authentication.k8s.io".into(),
                resource: "uids".into(),
                name: uid.clone(),
                ..Attributes::default()
            });
        }
        if let Some(refused) = checks.iter().find(|a| !policy.allows(user, a)) {
            return Err(ApiError::forbidden(refused.forbidden_message(user)));
        }
        let mut acting = match account {
            Some((namespace, account)) => {
                User::service_account(namespace, account, impersonation.uid.clone())
            }
            None => User {
                name: name.clone(),
                uid: impersonation.uid.clone(),
                groups: vec![crate::http::auth::AUTHENTICATED.to_owned()],
            },
        };
        for group in &impersonation.groups {
            if !acting.groups.contains(group) {
                acting.groups.push(group.clone());
            }
        }
        Ok(acting)
    }

    /// Authorizes a resource request.
    ///
    /// # Errors
    /// 403 with the real server's message.
    pub(super) fn authorize(&self, target: &Target, request: &Request<'_>) -> Result<(), ApiError> {
        if request.user.is_master() {
            return Ok(());
        }
        let watching = request
            .query
            .get("watch")
            .is_some_and(|w| w == "true" || w == "1");
        let verb = match (request.method, target.name.is_some()) {
            ("GET" | "HEAD", false) if watching => "watch",
            ("GET" | "HEAD", false) => "list",
            ("GET" | "HEAD", true) => "get",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "patch",
            ("DELETE", false) => "deletecollection",
            ("DELETE", true) => "delete",
            (other, _) => return Err(ApiError::method_not_allowed(format!("method {other}"))),
        };
        let attributes = Attributes {
            verb: verb.into(),
            group: target.info.group.clone(),
            resource: target.info.plural.clone(),
            subresource: target.subresource.clone().unwrap_or_default(),
            name: target.name.clone().unwrap_or_default(),
            namespace: target.namespace.clone().unwrap_or_default(),
            path: None,
        };
        if Policy::of(&self.store).allows(&request.user, &attributes) {
            Ok(())
        } else {
            Err(
                ApiError::forbidden(attributes.forbidden_message(&request.user))
                    .about(&target.info, target.name.as_deref().unwrap_or("")),
            )
        }
    }

    /// Answers a self-review.
    pub(super) fn review(&self, review: Review, request: &Request<'_>) -> Result<Reply, ApiError> {
        let mut body = review_body(request)?;
        let user = &request.user;
        let policy = Policy::of(&self.store);
        match review {
            Review::Access => {
                let allowed = policy.allows(user, &reviewed_attributes(&body));
                body["status"] = access_status(allowed);
            }
            Review::Subject => {
                delegated(
                    &policy,
                    user,
                    "subjectaccessreviews",
                    "authorization.k8s.io",
                )?;
                let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
                let subject = User {
                    name: text(&spec, "user"),
                    uid: spec.get("uid").and_then(Value::as_str).map(str::to_owned),
                    groups: strings_at(&spec, "/groups"),
                };
                if subject.name.is_empty() && subject.groups.is_empty() {
                    return Err(ApiError::invalid_kind(
                        "SubjectAccessReview",
                        "",
                        "spec.user: Invalid value: \"\": at least one of user or group must be specified",
                    ));
                }
                let allowed = policy.allows(&subject, &reviewed_attributes(&body));
                body["status"] = access_status(allowed);
            }
            Review::Rules => {
                let namespace = body
                    .pointer("/spec/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let rules = if user.is_master() {
                    vec![json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})]
                } else {
                    policy.rules(user, Some(&namespace))
                };
                let (non_resource, resource): (Vec<Value>, Vec<Value>) = rules
                    .into_iter()
                    .partition(|r| r.get("nonResourceURLs").is_some());
                body["status"] = json!({"resourceRules": resource, "nonResourceRules": non_resource,
                                        "incomplete": false});
            }
            Review::WhoAmI => {
                body["status"] = json!({"userInfo": user.info()});
            }
            Review::Token => {
                delegated(&policy, user, "tokenreviews", "authentication.k8s.io")?;
                let token = body
                    .pointer("/spec/token")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let wanted = strings_at(&body, "/spec/audiences");
                let reviewed = match &self.authenticator {
                    Some(authenticator) => authenticator.review(token, &wanted),
                    None => Err(AuthError::Missing),
                };
                body["status"] = match reviewed {
                    Ok((reviewed, audiences)) => json!({"authenticated": true,
                        "user": reviewed.info(), "audiences": audiences}),
                    Err(error) => json!({"authenticated": false, "user": {},
                        "error": format!("[{error}]")}),
                };
            }
        }
        if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("creationTimestamp".into(), Value::Null);
        }
        Ok(Reply::Json(201, body))
    }

    /// A `LocalSubjectAccessReview` in `namespace`: may this user, with
    /// these groups, do this there? Needs `create localsubjectaccessreviews`
    /// in the namespace (`admin` grants it); refused as a real server
    /// refuses it when the attributes name another namespace, name none, or
    /// are non-resource ones.
    pub(super) fn local_review(
        &self,
        namespace: &str,
        request: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        const GROUP: &str = "authorization.k8s.io";
        let mut body = review_body(request)?;
        let policy = Policy::of(&self.store);
        let create = Attributes {
            verb: "create".into(),
            group: GROUP.into(),
            resource: "localsubjectaccessreviews".into(),
            namespace: namespace.into(),
            ..Attributes::default()
        };
        if !policy.allows(&request.user, &create) {
            return Err(ApiError::forbidden(create.forbidden_message(&request.user)));
        }
        let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
        let subject = User {
            name: text(&spec, "user"),
            uid: spec.get("uid").and_then(Value::as_str).map(str::to_owned),
            groups: strings_at(&spec, "/groups"),
        };
        let mut errors = Vec::new();
        if subject.name.is_empty() && subject.groups.is_empty() {
            errors.push(
                "spec.user: Invalid value: \"\": at least one of user or group must be specified"
                    .to_owned(),
            );
        }
        if let Some(attributes) = spec.get("nonResourceAttributes") {
            // Go prints the struct's fields in its order, capitalized.
            let printed =
                json!({"Path": text(attributes, "path"), "Verb": text(attributes, "verb")});
            errors.push(format!(
                "spec.nonResourceAttributes: Invalid value: {printed}: disallowed on this kind of request"
            ));
        } else {
            let named = body
                .pointer("/spec/resourceAttributes/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            if named != namespace {
                errors.push(format!(
                    "spec.resourceAttributes.namespace: Invalid value: {}: must match metadata.namespace",
                    Value::from(named)
                ));
            }
        }
        if !errors.is_empty() {
            return Err(ApiError::invalid_review(GROUP, &errors));
        }
        let allowed = policy.allows(&subject, &reviewed_attributes(&body));
        body["metadata"] = json!({"namespace": namespace});
        body["status"] = access_status(allowed);
        Ok(Reply::Json(201, body))
    }

    /// TokenRequest: a token for a ServiceAccount (`kubectl create token`).
    pub(super) fn request_token(
        &self,
        target: &Target,
        name: &str,
        request: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let Some(authenticator) = &self.authenticator else {
            return Err(ApiError::method_not_allowed(
                "this server runs without authentication and issues no tokens",
            ));
        };
        let account = self
            .store
            .get(&target.info.storage_key(), &self.key(target, name))
            .ok_or_else(|| ApiError::not_found(&target.info, name))?;
        let uid = account
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut body = request.document_or_empty()?;
        let seconds = body
            .pointer("/spec/expirationSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(DEFAULT_EXPIRATION);
        if !(MIN_EXPIRATION..=MAX_EXPIRATION).contains(&seconds) {
            return Err(ApiError::invalid_kind(
                "TokenRequest",
                name,
                format!(
                    "spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration less than {MIN_EXPIRATION} seconds or more than {MAX_EXPIRATION} seconds"
                ),
            ));
        }
        let audiences = strings_at(&body, "/spec/audiences");
        let audiences = if audiences.is_empty() {
            vec![crate::http::auth::token::API_AUDIENCE.to_owned()]
        } else {
            audiences
        };
        let now = jiff::Timestamp::now().as_second();
        let namespace = target.namespace.as_deref().unwrap_or("");
        let token = authenticator
            .signer()
            .issue(namespace, name, uid, &audiences, now, seconds);
        let expires = jiff::Timestamp::from_second(now + seconds)
            .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default();
        body["kind"] = "TokenRequest".into();
        body["apiVersion"] = "authentication.k8s.io/v1".into();
        body["metadata"] = json!({"name": name, "namespace": namespace, "uid": new_uid(),
                                  "creationTimestamp": Value::Null});
        body["spec"]["expirationSeconds"] = seconds.into();
        body["spec"]["audiences"] = audiences.into();
        body["status"] = json!({"token": token, "expirationTimestamp": expires});
        Ok(Reply::Json(201, body))
    }
}

/// Refuses `user` unless it may `create` `resource` of `group`: the
/// reviews of others are delegated rights.
fn delegated(policy: &Policy, user: &User, resource: &str, group: &str) -> Result<(), ApiError> {
    let create = Attributes {
        verb: "create".into(),
        group: group.into(),
        resource: resource.into(),
        ..Attributes::default()
    };
    if policy.allows(user, &create) {
        Ok(())
    } else {
        Err(ApiError::forbidden(create.forbidden_message(user)))
    }
}

/// A review's body: POSTed, and a JSON object.
fn review_body(request: &Request<'_>) -> Result<Value, ApiError> {
    if request.method != "POST" {
        return Err(ApiError::not_allowed());
    }
    let body = request.document()?;
    if body.is_object() {
        Ok(body)
    } else {
        Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ))
    }
}

/// What an access review's `spec` asks about: its resource or its
/// non-resource attributes.
fn reviewed_attributes(body: &Value) -> Attributes {
    match body.pointer("/spec/nonResourceAttributes") {
        Some(n) => Attributes {
            verb: text(n, "verb"),
            path: Some(text(n, "path")),
            ..Attributes::default()
        },
        None => {
            let r = body
                .pointer("/spec/resourceAttributes")
                .cloned()
                .unwrap_or_else(|| json!({}));
            Attributes {
                verb: text(&r, "verb"),
                group: text(&r, "group"),
                resource: text(&r, "resource"),
                subresource: text(&r, "subresource"),
                name: text(&r, "name"),
                namespace: text(&r, "namespace"),
                path: None,
            }
        }
    }
}

/// An access review's `status`.
fn access_status(allowed: bool) -> Value {
    json!({"allowed": allowed, "reason": if allowed { "allowed by RBAC" } else { "" }})
}

fn text(value: &Value, field: &str) -> String {
    text_at(value, &format!("/{field}")).to_owned()
}
