//! Server-side apply: a create or a merge with field ownership, conflicts
//! refused in a real server's words ([`crate::mutation::apply`] owns the
//! fields; this room the request around it).

use serde_json::{Value, json};

use super::Api;
use super::request::{Reply, Request};
use super::route::Target;
use crate::http::error::ApiError;
use crate::mutation::apply;

impl Api {
    /// Server-side apply: create or merge with field ownership (see [`apply`]).
    pub(super) fn server_side_apply(
        &self,
        target: &Target,
        name: &str,
        request: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let info = target.info.clone();
        let Some(manager) = request
            .query
            .get("fieldManager")
            .filter(|m| !m.is_empty())
            .cloned()
        else {
            return Err(ApiError::option_required(
                "PatchOptions",
                "fieldManager",
                "is required for apply patch",
            ));
        };
        let force = request.query.get("force").is_some_and(|f| f == "true");
        let strict = Self::strict(&request.query);
        // YAML is the declared format; JSON (what kubectl and kube-rs send) is
        // YAML, and the media type says YAML.
        Self::apply_readable(&request.document()?)?;
        let applied = Self::body_named(&info, request, name)?;
        Self::apply_decodable(&info, name, &applied)?;
        let api_version = info.api_version();
        let apply_request = apply::ApplyRequest {
            manager: &manager,
            force,
            api_version: &api_version,
            custom: info.custom,
            part: apply::Part::of(info.status, target.subresource.as_deref()),
        };
        let conflict = |conflicts: Vec<apply::Conflict>| {
            let causes: Vec<Value> = conflicts
                .iter()
                .map(|c| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {}", c.manager), "field": c.field}))
                .collect();
            let mut error = ApiError::new(409, "Conflict", apply::conflict_message(&conflicts));
            error.details = Some(json!({"causes": causes}));
            error
        };
        let refused = |error: apply::ApplyError| match error {
            apply::ApplyError::Conflicts(conflicts) => conflict(conflicts),
            apply::ApplyError::Invalid(why) => ApiError::invalid(&info, name, why),
        };
        let key = self.key(target, name);
        if self.store.get(&info.storage_key(), &key).is_none() {
            if target.subresource.is_some() {
                return Err(ApiError::not_found(&info, name));
            }
            let created = apply::apply(&json!({}), &applied, apply_request).map_err(refused)?;
            return self.insert(target, created, &request.query, &request.user);
        }
        let subresource = target.subresource.clone();
        self.write(
            target,
            name,
            Self::dry_run(&request.query),
            &request.user,
            |current| {
                // Fields nobody owns go to `before-first-apply` first.
                let owned;
                let current = if apply::tracked(current) {
                    current
                } else {
                    let mut untracked = current.clone();
                    apply::record_update(
                        &Self::zero(&info),
                        &mut untracked,
                        apply::BEFORE_FIRST_APPLY,
                        &api_version,
                        info.custom,
                        apply::Part::of(info.status, None),
                    );
                    owned = untracked;
                    &owned
                };
                let merged = apply::apply(current, &applied, apply_request).map_err(refused)?;
                let next =
                    Self::next_version(&info, name, subresource.as_deref(), current, merged)?;
                Self::checked(&info, name, next, strict)
            },
        )
    }
}
