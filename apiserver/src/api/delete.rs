//! Deletes: graceful (finalizers, propagation policies) and immediate,
//! of one object or of a collection.

use serde_json::{Value, json};

use super::{Api, Reply, Request, Target, rv_of, served};
use crate::crd;
use crate::error::ApiError;
use crate::objects::{metadata_mut, now};

impl Api {
    pub(super) fn delete(
        &self,
        target: &Target,
        name: &str,
        request: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let info = target.info.clone();
        let options: Value = if request.body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            request.document()?
        };
        let dry_run = Self::dry_run(&request.query)
            || options
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|d| d.iter().any(|v| v == "All"));
        let key = self.key(target, name);
        let current = self
            .store
            .get(&info.storage_key(), &key)
            .ok_or_else(|| ApiError::not_found(&info, name))?;
        let precondition = |field: &str| {
            options
                .pointer(&format!("/preconditions/{field}"))
                .and_then(Value::as_str)
        };
        if let Some(uid) = precondition("uid")
            && current.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid)
        {
            return Err(ApiError::conflict(
                &info,
                name,
                &format!("Precondition failed: UID in precondition: {uid}"),
            ));
        }
        if let Some(rv) = precondition("resourceVersion")
            && rv_of(&current) != Some(rv)
        {
            return Err(ApiError::conflict(
                &info,
                name,
                &format!("Precondition failed: ResourceVersion in precondition: {rv}"),
            ));
        }
        let policy = options
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .unwrap_or("Background");
        let mut finalizers: Vec<Value> = current
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let gc_finalizer = match policy {
            "Foreground" => Some("foregroundDeletion"),
            "Orphan" => Some("orphan"),
            _ => None,
        };
        if let Some(f) = gc_finalizer
            && !finalizers.iter().any(|x| x == f)
        {
            finalizers.push(f.into());
        }
        // A namespace is emptied by the namespace controller (`gc`) first.
        let is_namespace = info.group.is_empty() && info.plural == "namespaces";
        if !finalizers.is_empty() || is_namespace {
            // Graceful: mark, and let the finalizers' owners finish.
            let deleting = move |object: &Value| -> Result<Value, ApiError> {
                let mut next = object.clone();
                if let Some(m) = metadata_mut(&mut next) {
                    m.entry("deletionTimestamp").or_insert_with(|| now().into());
                    m.entry("deletionGracePeriodSeconds")
                        .or_insert_with(|| 0.into());
                    if !finalizers.is_empty() {
                        m.insert("finalizers".into(), Value::Array(finalizers));
                    }
                }
                if is_namespace {
                    next["status"] = json!({"phase": "Terminating"});
                }
                Ok(next)
            };
            if dry_run {
                return Ok(Reply::Json(200, served(&info, &deleting(&current)?)));
            }
            let written = self.store.update(&info.storage_key(), &key, deleting)?;
            return Ok(Reply::Json(200, served(&info, &written.object)));
        }
        if !dry_run {
            let last = self
                .store
                .delete::<ApiError>(&info.storage_key(), &key, |_| Ok(()))
                .map_err(|_| ApiError::not_found(&info, name))?;
            if crd::is_crd(&info) {
                self.retire(&last);
            }
        }
        Ok(Reply::Json(
            200,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                   "details": {"name": name, "group": info.group, "kind": info.plural,
                               "uid": current.pointer("/metadata/uid").cloned().unwrap_or(Value::Null)}}),
        ))
    }
}
