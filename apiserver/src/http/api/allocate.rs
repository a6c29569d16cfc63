//! What a Service is given when it is created, as a real server's registry
//! gives it: a ClusterIP from [`SERVICE_RANGE`] (the first address is the
//! `kubernetes` Service's, the tenth is kept for DNS), `clusterIPs`, the IP
//! family fields, and a `nodePort` from 30000–32767 for each port of a
//! NodePort or LoadBalancer Service that has none. `clusterIP: None`
//! (headless) and ExternalName Services get no address.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::Api;
use crate::http::error::ApiError;
use crate::store::{ListAt, ResourceKey};

/// The Service range: kubeadm's default, `10.96.0.0/12`.
pub(super) const SERVICE_RANGE: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 96, 0, 0), 12);

impl Api {
    /// Fills in a new Service's addresses and ports.
    pub(super) fn allocate_service(&self, service: &mut Value) -> Result<(), ApiError> {
        let kind = service
            .pointer("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_owned();
        let Some(spec) = service.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        if kind == "ExternalName" {
            return Ok(());
        }
        let existing = self
            .store
            .list(&ResourceKey::new("", "services"), None, ListAt::Latest)?;
        let asked = spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let ip = if asked.is_empty() {
            let used: HashSet<&str> = existing
                .items
                .iter()
                .filter_map(|s| s.pointer("/spec/clusterIP").and_then(Value::as_str))
                .collect();
            let (base, prefix) = SERVICE_RANGE;
            let size = 1u32 << (32 - prefix);
            (11..size - 1)
                .map(|n| Ipv4Addr::from(u32::from(base) + n).to_string())
                .find(|ip| !used.contains(ip.as_str()))
                .ok_or_else(|| {
                    ApiError::forbidden("failed to allocate a serviceIP: range is full")
                })?
        } else {
            asked
        };
        spec.insert("clusterIP".into(), ip.clone().into());
        spec.insert("clusterIPs".into(), json!([ip]));
        if ip != "None" {
            spec.entry("ipFamilies").or_insert_with(|| json!(["IPv4"]));
            spec.entry("ipFamilyPolicy")
                .or_insert_with(|| "SingleStack".into());
        }
        if matches!(kind.as_str(), "NodePort" | "LoadBalancer") {
            let mut used: HashSet<i64> = existing
                .items
                .iter()
                .flat_map(|s| {
                    s.pointer("/spec/ports")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default()
                })
                .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
                .collect();
            for port in spec
                .get_mut("ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if port.get("nodePort").and_then(Value::as_i64).is_none() {
                    let free = (30000..=32767).find(|p| !used.contains(p)).ok_or_else(|| {
                        ApiError::forbidden("failed to allocate a nodePort: range is full")
                    })?;
                    used.insert(free);
                    port["nodePort"] = free.into();
                }
            }
        }
        Ok(())
    }
}
