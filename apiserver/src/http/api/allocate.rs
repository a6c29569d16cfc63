//! What a Service is given when it is created, as a real server's registry
//! gives it: a ClusterIP from [`crate::store::SERVICE_RANGE`] (the first address is the
//! `kubernetes` Service's, the tenth is kept for DNS), `clusterIPs`, the IP
//! family fields, and a `nodePort` from 30000–32767 for each port of a
//! NodePort or LoadBalancer Service that has none. `clusterIP: None`
//! (headless) and ExternalName Services get no address. The store's
//! allocators give them ([`crate::store::Reservation`]): at a constant cost
//! whatever the number of Services, and an address asked for that another
//! Service holds is refused as a real server refuses it.

use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::Api;
use crate::http::error::ApiError;
use crate::store::{AddressError, Reservation};
use kubewasm_types::info::ResourceInfo;

impl Api {
    /// Fills in a new Service's addresses and ports, from the store's
    /// allocators ([`crate::store::Reservation`]): held by the reservation
    /// until the create commits.
    pub(super) fn allocate_service(
        &self,
        info: &ResourceInfo,
        name: &str,
        service: &mut Value,
    ) -> Result<Reservation, ApiError> {
        let mut reservation = self.store.reservation();
        let kind = service
            .pointer("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_owned();
        let Some(spec) = service.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(reservation);
        };
        if kind == "ExternalName" {
            return Ok(reservation);
        }
        let asked = spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let refused = |field: String, value: String, why: String| {
            ApiError::invalid(
                info,
                name,
                format!("{field}: Invalid value: {value}: {why}"),
            )
        };
        let ip = match asked.as_str() {
            "" => reservation
                .cluster_ip(None)
                .map_err(|_| ApiError::forbidden("failed to allocate a serviceIP: range is full"))?
                .to_string(),
            "None" => asked,
            text => match text.parse::<Ipv4Addr>() {
                Ok(ip) => match reservation.cluster_ip(Some(ip)) {
                    Ok(_) => asked,
                    Err(error) => {
                        return Err(refused(
                            "spec.clusterIPs".into(),
                            format!("[]string{{\"{ip}\"}}"),
                            format!("failed to allocate IP {ip}: {error}"),
                        ));
                    }
                },
                Err(_) => asked,
            },
        };
        spec.insert("clusterIP".into(), ip.clone().into());
        spec.insert("clusterIPs".into(), json!([ip]));
        if ip != "None" {
            spec.entry("ipFamilies").or_insert_with(|| json!(["IPv4"]));
            spec.entry("ipFamilyPolicy")
                .or_insert_with(|| "SingleStack".into());
        }
        if matches!(kind.as_str(), "NodePort" | "LoadBalancer") {
            for (i, port) in spec
                .get_mut("ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let asked = port
                    .get("nodePort")
                    .and_then(Value::as_u64)
                    .and_then(|p| u32::try_from(p).ok());
                match reservation.node_port(asked) {
                    Ok(given) => port["nodePort"] = given.into(),
                    Err(AddressError::Full) => {
                        return Err(ApiError::forbidden(
                            "failed to allocate a nodePort: range is full",
                        ));
                    }
                    Err(error @ AddressError::Taken(_)) => {
                        return Err(refused(
                            format!("spec.ports[{i}].nodePort"),
                            asked.map_or_else(String::new, |p| p.to_string()),
                            error.to_string(),
                        ));
                    }
                }
            }
        }
        Ok(reservation)
    }
}
