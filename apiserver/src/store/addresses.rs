//! The Service addresses in use: ClusterIPs of [`SERVICE_RANGE`] and
//! nodePorts of [`NODE_PORTS`], kept as a real server's allocators keep
//! theirs (a set each where it keeps a bitmap), so a new Service's addresses are found without
//! reading the Services, and never given twice.
//!
//! # Invariant
//! An address is marked while a stored Service holds it or a create holds
//! its [`Reservation`] (until the create commits, or fails and drops it).
//! Every change of a Service marks and frees its addresses under the
//! store's lock ([`Addresses::follow`]); a reservation takes this module's
//! own lock, never the store's while holding it.
//!
//! # Cost
//! Next fit: a search starts where the last one ended, so while the range
//! is far from full a new address costs a few probes whatever the number of
//! Services ([`Addresses::probes`] counts them).

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;

/// The Service range: kubeadm's default, `10.96.0.0/12`.
pub const SERVICE_RANGE: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 96, 0, 0), 12);

/// The nodePort range, the API server's default.
pub const NODE_PORTS: RangeInclusive<u32> = 30000..=32767;

/// The ClusterIPs given out: the range's addresses past the first ten (the
/// first is the `kubernetes` Service's, the tenth is kept for DNS), the
/// broadcast address aside.
fn cluster_ips() -> RangeInclusive<u32> {
    let (base, prefix) = SERVICE_RANGE;
    let base = u32::from(base);
    base + 11..=base + (1u32 << (32 - prefix)) - 2
}

/// Why an address was not given.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AddressError {
    /// Every address of the range is in use.
    #[error("range is full")]
    Full,
    /// The address asked for is in use.
    #[error("provided {0} is already allocated")]
    Taken(&'static str),
}

/// One range of numbers: those in use, and where the next search starts.
#[derive(Debug)]
struct Pool {
    range: RangeInclusive<u32>,
    used: HashSet<u32>,
    next: u32,
}

impl Pool {
    fn new(range: RangeInclusive<u32>) -> Self {
        Self {
            next: *range.start(),
            range,
            used: HashSet::new(),
        }
    }

    /// The next free number, marked; the probes it took.
    fn take_next(&mut self, probes: &mut u64) -> Option<u32> {
        let (first, last) = (*self.range.start(), *self.range.end());
        for _ in self.range.clone() {
            let n = self.next;
            self.next = if n >= last { first } else { n + 1 };
            *probes += 1;
            if self.used.insert(n) {
                return Some(n);
            }
        }
        None
    }

    /// Marks `n`: false if it was in use. A number outside the range (the
    /// `kubernetes` Service's first address) is not kept.
    fn take(&mut self, n: u32) -> bool {
        !self.range.contains(&n) || self.used.insert(n)
    }

    fn free(&mut self, n: u32) {
        self.used.remove(&n);
    }
}

/// The addresses in use (see the module documentation).
#[derive(Debug)]
pub(crate) struct Addresses {
    ips: Pool,
    ports: Pool,
    probes: u64,
}

impl Default for Addresses {
    fn default() -> Self {
        Self {
            ips: Pool::new(cluster_ips()),
            ports: Pool::new(NODE_PORTS),
            probes: 0,
        }
    }
}

/// A Service's ClusterIPs (IPv4) and nodePorts.
fn held(service: &Value) -> (Vec<u32>, Vec<u32>) {
    let spec = service.get("spec");
    let text = |v: &Value| v.as_str().and_then(|s| s.parse::<Ipv4Addr>().ok());
    let mut ips: Vec<u32> = spec
        .and_then(|s| s.get("clusterIPs"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .chain(spec.and_then(|s| s.get("clusterIP")))
        .filter_map(text)
        .map(u32::from)
        .collect();
    ips.dedup();
    let ports = spec
        .and_then(|s| s.get("ports"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_u64))
        .filter_map(|p| u32::try_from(p).ok())
        .collect();
    (ips, ports)
}

impl Addresses {
    /// Follows a Service's change from `before` to `after` (none for a
    /// creation or a deletion): what it held is freed, what it holds marked.
    pub(crate) fn follow(&mut self, before: Option<&Value>, after: Option<&Value>) {
        if let Some(before) = before {
            let (ips, ports) = held(before);
            ips.into_iter().for_each(|ip| self.ips.free(ip));
            ports.into_iter().for_each(|port| self.ports.free(port));
        }
        if let Some(after) = after {
            let (ips, ports) = held(after);
            for ip in ips {
                self.ips.take(ip);
            }
            for port in ports {
                self.ports.take(port);
            }
        }
    }

    /// Probes made by the searches so far: the allocators' work.
    pub(crate) fn probes(&self) -> u64 {
        self.probes
    }

    fn cluster_ip(&mut self, asked: Option<Ipv4Addr>) -> Result<u32, AddressError> {
        match asked {
            Some(ip) if self.ips.take(u32::from(ip)) => Ok(u32::from(ip)),
            Some(_) => Err(AddressError::Taken("IP")),
            None => self
                .ips
                .take_next(&mut self.probes)
                .ok_or(AddressError::Full),
        }
    }

    fn node_port(&mut self, asked: Option<u32>) -> Result<u32, AddressError> {
        match asked {
            Some(port) if self.ports.take(port) => Ok(port),
            Some(_) => Err(AddressError::Taken("port")),
            None => self
                .ports
                .take_next(&mut self.probes)
                .ok_or(AddressError::Full),
        }
    }
}

/// Addresses a create holds until it commits ([`Reservation::keep`]); dropped
/// otherwise, they are freed.
#[derive(Debug)]
pub struct Reservation {
    addresses: Arc<Mutex<Addresses>>,
    ips: Vec<u32>,
    ports: Vec<u32>,
}

/// The addresses, locked.
pub(crate) fn lock(addresses: &Mutex<Addresses>) -> MutexGuard<'_, Addresses> {
    addresses.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Reservation {
    pub(crate) fn new(addresses: Arc<Mutex<Addresses>>) -> Self {
        Self {
            addresses,
            ips: Vec::new(),
            ports: Vec::new(),
        }
    }

    /// A ClusterIP: `asked`, if free, else the next free one.
    ///
    /// # Errors
    /// [`AddressError::Taken`] for an address in use, [`AddressError::Full`].
    pub fn cluster_ip(&mut self, asked: Option<Ipv4Addr>) -> Result<Ipv4Addr, AddressError> {
        let ip = lock(&self.addresses).cluster_ip(asked)?;
        self.ips.push(ip);
        Ok(Ipv4Addr::from(ip))
    }

    /// A nodePort: `asked`, if free, else the next free one.
    ///
    /// # Errors
    /// As [`Self::cluster_ip`].
    pub fn node_port(&mut self, asked: Option<u32>) -> Result<u32, AddressError> {
        let port = lock(&self.addresses).node_port(asked)?;
        self.ports.push(port);
        Ok(port)
    }

    /// The create committed: its Service holds the addresses now.
    pub fn keep(mut self) {
        self.ips.clear();
        self.ports.clear();
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.ips.is_empty() && self.ports.is_empty() {
            return;
        }
        let mut addresses = lock(&self.addresses);
        self.ips.drain(..).for_each(|ip| addresses.ips.free(ip));
        self.ports
            .drain(..)
            .for_each(|port| addresses.ports.free(port));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn addresses_should_follow_services_and_never_be_given_twice() {
        let mut addresses = Addresses::default();
        let first = addresses.cluster_ip(None).expect("free");
        assert_eq!(Ipv4Addr::from(first), Ipv4Addr::new(10, 96, 0, 11));
        let service = json!({"spec": {"clusterIP": "10.96.0.12", "clusterIPs": ["10.96.0.12"],
            "ports": [{"port": 80, "nodePort": 30000}]}});
        addresses.follow(None, Some(&service));
        assert_eq!(
            addresses.cluster_ip(Some(Ipv4Addr::new(10, 96, 0, 12))),
            Err(AddressError::Taken("IP"))
        );
        assert_eq!(
            addresses.node_port(Some(30000)),
            Err(AddressError::Taken("port"))
        );
        assert_eq!(
            Ipv4Addr::from(addresses.cluster_ip(None).expect("free")),
            Ipv4Addr::new(10, 96, 0, 13)
        );
        assert_eq!(addresses.node_port(None), Ok(30001));
        // Deleted, its addresses are free again.
        addresses.follow(Some(&service), None);
        assert_eq!(addresses.node_port(Some(30000)), Ok(30000));
        // The `kubernetes` Service's address is outside what is given.
        addresses.follow(None, Some(&json!({"spec": {"clusterIP": "10.96.0.1"}})));
        assert_eq!(
            addresses.cluster_ip(Some(Ipv4Addr::new(10, 96, 0, 1))),
            Ok(u32::from(Ipv4Addr::new(10, 96, 0, 1)))
        );
    }

    #[test]
    fn a_new_address_should_cost_as_much_at_ten_thousand_services_as_at_the_first() {
        let mut addresses = Addresses::default();
        let probes = |addresses: &mut Addresses, n: usize| {
            let before = addresses.probes();
            for _ in 0..n {
                addresses.cluster_ip(None).expect("free");
            }
            addresses.probes() - before
        };
        let first = probes(&mut addresses, 100);
        probes(&mut addresses, 9_800);
        let last = probes(&mut addresses, 100);
        assert_eq!((first, last), (100, 100), "one probe per address");
    }

    #[test]
    fn a_full_range_should_refuse() {
        let mut addresses = Addresses::default();
        for _ in NODE_PORTS {
            addresses.node_port(None).expect("free");
        }
        assert_eq!(addresses.node_port(None), Err(AddressError::Full));
    }
}
