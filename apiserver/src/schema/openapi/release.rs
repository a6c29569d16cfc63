//! What the server of the Kubernetes release kubewasm speaks publishes as
//! OpenAPI, recorded from it by `tests/real-cluster/openapi`
//! (`release.json.gz`, written again by `make kubernetes-version`):
//! - `/openapi/v2` and every document `/openapi/v3` lists, each the exact
//!   text the real server sent, which the embedded server serves as it is
//!   (a v3 document's `?hash=` is then the real one's);
//! - the documents a custom resource adds, one per scope, recorded for a
//!   template CustomResourceDefinition (`widgets.template.kubewasm.dev`,
//!   `Widget`, `v1`, with status and scale), which [`super::custom`] makes
//!   into any custom resource's.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::LazyLock;

use serde::Deserialize;
use serde_json::{Map, Value};

/// The recording, gzipped.
const RECORDED: &[u8] = include_bytes!("release.json.gz");

/// The recording, read once. (Recorded from a real server; a test beside
/// checks that it reads whole.)
static RELEASE: LazyLock<Release> = LazyLock::new(|| {
    let mut text = String::new();
    if flate2::read::GzDecoder::new(RECORDED)
        .read_to_string(&mut text)
        .is_err()
    {
        return Release::default();
    }
    serde_json::from_str(&text).unwrap_or_default()
});

/// The release's OpenAPI documents.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Release {
    /// The release (`v1.37.2`).
    pub(super) version: String,
    /// `/openapi/v2`, as served.
    pub(super) v2: String,
    /// Each document `/openapi/v3` lists, by its path there (`api/v1`,
    /// `apis/apps/v1`, `version`), as served.
    pub(super) v3: BTreeMap<String, String>,
    /// What a custom resource adds, by scope.
    pub(super) custom: Custom,
}

/// The templates of a custom resource's documents.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Custom {
    #[serde(rename = "Namespaced")]
    pub(super) namespaced: Template,
    #[serde(rename = "Cluster")]
    pub(super) cluster: Template,
}

/// What the template CustomResourceDefinition of one scope adds.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Template {
    /// Its group version's `/openapi/v3` document, as served.
    pub(super) v3: String,
    /// What it adds to `/openapi/v2`.
    pub(super) v2: Additions,
}

/// The paths and definitions a custom resource adds to `/openapi/v2`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Additions {
    pub(super) paths: Map<String, Value>,
    pub(super) definitions: Map<String, Value>,
}

/// The recording.
pub(super) fn release() -> &'static Release {
    &RELEASE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recording_should_read_whole_and_be_the_pinned_releases() {
        let release = release();
        assert_eq!(release.version, kubewasm_types::KUBERNETES_RELEASE);
        let v2: Value = serde_json::from_str(&release.v2).expect("v2 is JSON");
        assert_eq!(v2["swagger"], "2.0");
        assert!(v2["definitions"]["io.k8s.api.apps.v1.Deployment"].is_object());
        for path in ["api/v1", "apis/apps/v1", "apis", "version"] {
            let document: Value =
                serde_json::from_str(&release.v3[path]).expect("a v3 document is JSON");
            assert_eq!(document["openapi"], "3.0.0", "{path}");
        }
        for template in [&release.custom.namespaced, &release.custom.cluster] {
            let document: Value = serde_json::from_str(&template.v3).expect("JSON");
            assert!(
                document["components"]["schemas"]["dev.kubewasm.template.v1.Widget"].is_object()
            );
            assert!(
                template
                    .v2
                    .definitions
                    .contains_key("dev.kubewasm.template.v1.WidgetList")
            );
            assert!(!template.v2.paths.is_empty());
        }
    }
}
