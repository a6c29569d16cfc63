//! What the engine's series and controller-runtime's share: the buckets of
//! a duration, a gauge of floats, a count as a gauge's value, the labels
//! of a plugin and of a state.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// A gauge of seconds or other fractions.
pub(super) type FloatGauge = Gauge<f64, AtomicU64>;

/// Buckets of a duration: 100 µs doubling to about 52 s.
pub(super) fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 20))
}

/// A count as a gauge's value (saturating).
pub(super) fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// kubewasm's label of a plugin's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct PluginLabel {
    pub(super) plugin: String,
}

/// A state a gauge of the host's is kept by.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StateLabel {
    pub(super) state: &'static str,
}

/// `plugin`'s label.
pub(super) fn label(plugin: &str) -> PluginLabel {
    PluginLabel {
        plugin: plugin.to_owned(),
    }
}
