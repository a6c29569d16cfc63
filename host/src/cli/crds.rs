//! `kubewasm crds`: the CustomResourceDefinitions of `Plugin` and
//! `ClusterPlugin` (`deploy/crds.yaml`).

/// Prints them.
pub(super) fn run() {
    print!("{}", kubewasm_engine::plugin_resource::crds_yaml());
}
