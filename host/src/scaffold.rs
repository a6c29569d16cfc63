//! `kubewasm new`: a plugin project of its own, in Rust, Python,
//! JavaScript or Go, that builds, tests and replays out of the box.
//!
//! A project is a directory outside any workspace with the reconciler, a
//! unit test run natively by the language's own runner under the host's
//! rules (the SDK harnesses), an `example.yaml` of one primary object for
//! `kubewasm replay`, a `Makefile` of four targets (`setup`, `test`,
//! `build`, `replay`) and a README saying so. The SDK comes from a kubewasm
//! checkout: the Rust crate and the Go module by path, the Python wheel and
//! the npm tarball that `make sdk` builds into `target/sdk/`.
//!
//! The primary is a built-in type (its plural and scope from the registry
//! of the Kubernetes version kubewasm serves; Python and JavaScript name it
//! by the SDK's generated constant, `core_v1.ConfigMap`) or a custom one:
//! then the plural is the lowercase kind plus `s`, the type is namespaced
//! (cluster-scoped when asked: `--cluster-scoped`), and the project gets a `crd.yaml` serving it, for replay and for a
//! cluster, and for Python, JavaScript and Go the constants generated from it
//! (`resource_types.py`, `resource-types.js`, `resource_types.go`:
//! [`crate::typegen`]). A Go project names a built-in primary by its
//! k8s.io/api struct (`&corev1.ConfigMap{}`) and reads a custom one as
//! `unstructured.Unstructured`.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::typegen;
use kubewasm_runtime::mapper::RestMapper;
use kubewasm_runtime::resource::ResourceType;

/// The languages a project can be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    /// Rust, with the `kubewasm-guest` crate.
    Rust,
    /// Python, with the `kubewasm-guest` wheel and componentize-py.
    Python,
    /// JavaScript, with the `@kubewasm/guest` package and componentize-js.
    Js,
    /// Go, with the `kubewasm.dev/guest` module, built for wasip1 and made a
    /// component by `kubewasm componentize`.
    Go,
}

/// Why a project could not be created.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name cannot name a plugin.
    #[error(
        "`{0}` cannot name a plugin: use a lowercase DNS label (letters, digits, `-`), such as `hello`"
    )]
    InvalidName(String),
    /// The primary type does not parse.
    #[error(
        "`{0}` is not a type: use GROUP/VERSION/KIND, or VERSION/KIND for the core group (`v1/ConfigMap`)"
    )]
    InvalidPrimary(String),
    /// A cluster-scoped primary was asked of a built-in namespaced type.
    #[error("`{0}` is a built-in namespaced type: --cluster-scoped is for a custom type")]
    NamespacedBuiltin(String),
    /// The directory exists and is not empty.
    #[error("{0} exists and is not empty: pick another name or --dir")]
    NotEmpty(PathBuf),
    /// The SDK is missing from the checkout.
    #[error("{what} is not at {path}: {fix}")]
    NoSdk {
        /// Which part.
        what: &'static str,
        /// Where it was looked for.
        path: PathBuf,
        /// What to run.
        fix: &'static str,
    },
    /// The custom primary's constants could not be generated.
    #[error(transparent)]
    Constants(#[from] typegen::TypegenError),
    /// A file could not be written.
    #[error("failed to write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What to create.
#[derive(Clone, Debug)]
pub struct Project {
    /// The plugin's name (a DNS label).
    pub name: String,
    /// Its language.
    pub language: Language,
    /// `GROUP/VERSION/KIND` of its primary.
    pub primary: String,
    /// Whether a custom primary is cluster-scoped (its CRD's scope).
    pub cluster_scoped: bool,
    /// The kubewasm checkout the SDK comes from.
    pub sdk: PathBuf,
    /// The `kubewasm` binary the Makefile runs.
    pub kubewasm: PathBuf,
}

/// One file of a project: its path in the project and its template.
struct Template {
    path: &'static str,
    text: &'static str,
}

macro_rules! templates {
    ($($path:literal => $file:literal),* $(,)?) => {
        &[$(Template { path: $path, text: include_str!(concat!("../templates/", $file)) }),*]
    };
}

const RUST: &[Template] = templates! {
    "Cargo.toml" => "rust/Cargo.toml.tmpl",
    "src/lib.rs" => "rust/lib.rs.tmpl",
    "Makefile" => "rust/Makefile.tmpl",
    ".gitignore" => "rust/gitignore.tmpl",
};

const PYTHON: &[Template] = templates! {
    "{{module}}.py" => "python/plugin.py.tmpl",
    "app.py" => "python/app.py.tmpl",
    "test_{{module}}.py" => "python/test_plugin.py.tmpl",
    "Makefile" => "python/Makefile.tmpl",
    ".gitignore" => "python/gitignore.tmpl",
};

const JS: &[Template] = templates! {
    "plugin.js" => "js/plugin.js.tmpl",
    "app.js" => "js/app.js.tmpl",
    "plugin.test.js" => "js/plugin.test.js.tmpl",
    "package.json" => "js/package.json.tmpl",
    "Makefile" => "js/Makefile.tmpl",
    ".gitignore" => "js/gitignore.tmpl",
};

const GO: &[Template] = templates! {
    "main.go" => "go/main.go.tmpl",
    "main_test.go" => "go/main_test.go.tmpl",
    "go.mod" => "go/go.mod.tmpl",
    "Makefile" => "go/Makefile.tmpl",
    ".gitignore" => "go/gitignore.tmpl",
};

const README: &str = include_str!("../templates/README.md.tmpl");

/// Where `make sdk` puts the Python wheel and the npm tarball.
pub const SDK_DIR: &str = "target/sdk";

/// The Python wheel's file name.
pub const PYTHON_WHEEL: &str = "kubewasm_guest-0.3.0-py3-none-any.whl";

/// The npm tarball's file name.
pub const NPM_TARBALL: &str = "kubewasm-guest-0.3.0.tgz";

impl Project {
    /// Writes the project into `dir` (created; it must be empty if it
    /// exists); returns the files written, relative to `dir`.
    ///
    /// # Errors
    /// [`ScaffoldError`] says what is wrong or what failed.
    pub fn create(&self, dir: &Path) -> Result<Vec<String>, ScaffoldError> {
        if !kubewasm_runtime::is_plugin_name(&self.name) || self.name.contains('.') {
            return Err(ScaffoldError::InvalidName(self.name.clone()));
        }
        let (primary, custom) = primary_type(&self.primary, self.cluster_scoped)?;
        if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
            return Err(ScaffoldError::NotEmpty(dir.to_owned()));
        }
        let vars = self.variables(&primary, custom)?;
        let mut files: Vec<(String, String)> = match self.language {
            Language::Rust => RUST,
            Language::Python => PYTHON,
            Language::Js => JS,
            Language::Go => GO,
        }
        .iter()
        .map(|t| (render(t.path, &vars), render(t.text, &vars)))
        .collect();
        files.push(("README.md".into(), render(README, &vars)));
        files.push(("example.yaml".into(), example_yaml(&primary)));
        if custom {
            let crd = crd(&primary);
            files.push(("crd.yaml".into(), crd_yaml(&primary, &crd)));
            let constants = |lang| typegen::from_crds(lang, std::slice::from_ref(&crd));
            match self.language {
                Language::Rust => {}
                Language::Python => files.push((
                    "resource_types.py".into(),
                    constants(typegen::Language::Python)?,
                )),
                Language::Js => files.push((
                    "resource-types.js".into(),
                    constants(typegen::Language::Js)?,
                )),
                Language::Go => files.push((
                    "resource_types.go".into(),
                    constants(typegen::Language::Go)?,
                )),
            }
        }
        for (path, text) in &files {
            let path = dir.join(path);
            let written = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&path, text));
            written.map_err(|source| ScaffoldError::Write { path, source })?;
        }
        Ok(files.into_iter().map(|(path, _)| path).collect())
    }

    /// The values the templates name as `{{variable}}`.
    fn variables(
        &self,
        primary: &ResourceType,
        custom: bool,
    ) -> Result<Vec<(&'static str, String)>, ScaffoldError> {
        // Absolute: the project refers to it from its own directory.
        let root = self.sdk.canonicalize().unwrap_or_else(|_| self.sdk.clone());
        let sdk = |what, relative: &str, fix| {
            let path = root.join(relative);
            if path.exists() {
                Ok(path.display().to_string())
            } else {
                Err(ScaffoldError::NoSdk { what, path, fix })
            }
        };
        let module = self.name.replace('-', "_");
        let (language, setup_note, main_file, sdk_var) = match self.language {
            Language::Rust => (
                "Rust",
                "adds the wasm32-wasip2 target",
                "src/lib.rs".to_owned(),
                (
                    "rust_sdk",
                    sdk(
                        "the Rust SDK",
                        "guest-sdk/Cargo.toml",
                        "pass --sdk the kubewasm checkout",
                    )
                    .map(|_| root.join("guest-sdk").display().to_string())?,
                ),
            ),
            Language::Python => (
                "Python",
                "installs the SDK wheel (and componentize-py) into this Python",
                format!("{module}.py"),
                (
                    "python_sdk",
                    sdk(
                        "the Python SDK wheel",
                        &format!("{SDK_DIR}/{PYTHON_WHEEL}"),
                        "run `make sdk` in the kubewasm checkout",
                    )?,
                ),
            ),
            Language::Js => (
                "JavaScript",
                "installs the SDK tarball and the component toolchain into node_modules",
                "plugin.js".to_owned(),
                (
                    "js_sdk",
                    sdk(
                        "the JavaScript SDK tarball",
                        &format!("{SDK_DIR}/{NPM_TARBALL}"),
                        "run `make sdk` in the kubewasm checkout",
                    )?,
                ),
            ),
            Language::Go => (
                "Go",
                "resolves and downloads the module's dependencies (the SDK from the checkout, k8s.io/api)",
                "main.go".to_owned(),
                (
                    "go_sdk",
                    sdk(
                        "the Go SDK",
                        "guest-sdk/go/go.mod",
                        "pass --sdk the kubewasm checkout",
                    )
                    .map(|_| root.join("guest-sdk/go").display().to_string())?,
                ),
            ),
        };
        let key = match primary.namespaced {
            true => "default/example",
            false => "example",
        };
        let objects = if custom {
            "--objects crd.yaml --objects example.yaml"
        } else {
            "--objects example.yaml"
        };
        let namespace = primary.namespaced.then_some("default");
        let constants = typegen::namespace(&primary.group, &primary.version, !custom);
        let (py_import, js_import) = if custom {
            (
                format!("from resource_types import {constants}"),
                format!("import {{ {constants} }} from './resource-types.js';"),
            )
        } else {
            (
                format!("from kubewasm_guest.types import {constants}"),
                format!("import {{ {constants} }} from '@kubewasm/guest/types';"),
            )
        };
        // Go: a built-in primary by its k8s.io/api struct, a custom one by
        // its generated Type, read as unstructured.
        let (go_import, go_primary, go_struct) = if custom {
            (
                "\"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured\"".to_owned(),
                typegen::go_variable(&primary.kind, &primary.version),
                "unstructured.Unstructured".to_owned(),
            )
        } else {
            let package = typegen::go_package(&primary.group, &primary.version);
            let alias: String = package
                .rsplit('/')
                .take(2)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            (
                format!("{alias} \"{package}\""),
                format!("&{alias}.{}{{}}", primary.kind),
                format!("{alias}.{}", primary.kind),
            )
        };
        let types_note = match (custom, self.language) {
            (true, Language::Python) => "\n`crd.yaml` serves the primary type; after changing it, \
                `kubewasm types --lang python --crd crd.yaml > resource_types.py` regenerates its constant."
                .to_owned(),
            (true, Language::Js) => "\n`crd.yaml` serves the primary type; after changing it, \
                `kubewasm types --lang js --crd crd.yaml > resource-types.js` regenerates its constant."
                .to_owned(),
            (true, Language::Go) => "\n`crd.yaml` serves the primary type; after changing it, \
                `kubewasm types --lang go --crd crd.yaml > resource_types.go` regenerates its variable."
                .to_owned(),
            (true, Language::Rust) => "\n`crd.yaml` serves the primary type: keep `primary()` in \
                `src/lib.rs` in step with it."
                .to_owned(),
            (false, _) => String::new(),
        };
        Ok(vec![
            ("name", self.name.clone()),
            ("crate", module.clone()),
            ("module", module),
            ("language", language.into()),
            ("setup_note", setup_note.into()),
            ("main_file", main_file),
            sdk_var,
            ("kubewasm", self.kubewasm.display().to_string()),
            ("group", primary.group.clone()),
            ("version", primary.version.clone()),
            ("kind", primary.kind.clone()),
            ("plural", primary.plural.clone()),
            ("api_version", primary.api_version()),
            ("namespaced", primary.namespaced.to_string()),
            (
                "py_namespace",
                namespace.map_or("None".into(), |ns| format!("\"{ns}\"")),
            ),
            (
                "js_namespace",
                namespace.map_or("undefined".into(), |ns| format!("'{ns}'")),
            ),
            (
                "rust_key",
                match namespace {
                    Some(ns) => format!("ObjectKey::namespaced(\"{ns}\", \"example\")"),
                    None => "ObjectKey::cluster(\"example\")".into(),
                },
            ),
            ("json_object", example(primary).to_string()),
            ("py_import", py_import),
            ("js_import", js_import),
            ("primary_constant", format!("{constants}.{}", primary.kind)),
            ("types_note", types_note),
            ("key", key.into()),
            ("objects", objects.into()),
            ("go_namespace", namespace.unwrap_or_default().into()),
            ("go_import", go_import),
            ("go_primary", go_primary),
            ("go_struct", go_struct),
        ])
    }
}

/// `GROUP/VERSION/KIND` (or `VERSION/KIND`) as the cluster serves it, or
/// as a custom type would be served; with whether it is custom.
fn primary_type(text: &str, cluster_scoped: bool) -> Result<(ResourceType, bool), ScaffoldError> {
    let invalid = || ScaffoldError::InvalidPrimary(text.to_owned());
    let (group, version, kind) = match text.split('/').collect::<Vec<_>>().as_slice() {
        [version, kind] => ("", *version, *kind),
        [group, version, kind] => (*group, *version, *kind),
        _ => return Err(invalid()),
    };
    let identifier = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
    let group_ok = group
        .split('.')
        .all(|label| group.is_empty() || kubewasm_runtime::is_plugin_name(label));
    if !group_ok
        || !identifier(version)
        || !identifier(kind)
        || !kind.starts_with(|c: char| c.is_ascii_uppercase())
    {
        return Err(invalid());
    }
    Ok(match RestMapper::builtin().lookup(group, version, kind) {
        Some(builtin) if cluster_scoped && builtin.namespaced => {
            return Err(ScaffoldError::NamespacedBuiltin(text.to_owned()));
        }
        Some(builtin) => (builtin, false),
        None => (
            ResourceType {
                group: group.to_owned(),
                version: version.to_owned(),
                kind: kind.to_owned(),
                plural: format!("{}s", kind.to_ascii_lowercase()),
                namespaced: !cluster_scoped,
            },
            true,
        ),
    })
}

/// The example primary object.
fn example(primary: &ResourceType) -> serde_json::Value {
    let mut metadata = json!({"name": "example", "uid": "00000000-0000-0000-0000-000000000001",
                              "generation": 1});
    if primary.namespaced {
        metadata["namespace"] = "default".into();
    }
    json!({"apiVersion": primary.api_version(), "kind": primary.kind, "metadata": metadata})
}

fn example_yaml(primary: &ResourceType) -> String {
    format!(
        "# One {kind} for `make replay` (kubewasm replay) and the unit test's fixture.\n{}",
        serde_yaml::to_string(&example(primary)).unwrap_or_default(),
        kind = primary.kind
    )
}

/// A CustomResourceDefinition serving a custom primary, with an open
/// `spec` and `status` to fill in.
fn crd(primary: &ResourceType) -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{}", primary.plural, primary.group)},
        "spec": {
            "group": primary.group,
            "names": {"kind": primary.kind, "plural": primary.plural,
                      "singular": primary.kind.to_ascii_lowercase()},
            "scope": if primary.namespaced { "Namespaced" } else { "Cluster" },
            "versions": [{
                "name": primary.version, "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                }}},
            }],
        },
    })
}

fn crd_yaml(primary: &ResourceType, crd: &serde_json::Value) -> String {
    format!(
        "# Serves {} {}: describe its spec here.\n{}",
        primary.api_version(),
        primary.kind,
        serde_yaml::to_string(crd).unwrap_or_default()
    )
}

/// `text` with each `{{variable}}` replaced.
fn render(text: &str, vars: &[(&'static str, String)]) -> String {
    vars.iter().fold(text.to_owned(), |text, (name, value)| {
        text.replace(&format!("{{{{{name}}}}}"), value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(language: Language, primary: &str, sdk: &Path) -> Project {
        Project {
            name: "hello-world".into(),
            language,
            primary: primary.into(),
            cluster_scoped: false,
            sdk: sdk.to_owned(),
            kubewasm: "kubewasm".into(),
        }
    }

    fn fake_checkout() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let sdk = dir.path().join(SDK_DIR);
        std::fs::create_dir_all(&sdk).expect("sdk dir");
        std::fs::create_dir_all(dir.path().join("guest-sdk/go")).expect("guest-sdk");
        for file in [
            sdk.join(PYTHON_WHEEL),
            sdk.join(NPM_TARBALL),
            dir.path().join("guest-sdk/Cargo.toml"),
            dir.path().join("guest-sdk/go/go.mod"),
        ] {
            std::fs::write(file, "").expect("fake sdk file");
        }
        dir
    }

    #[test]
    fn every_template_variable_should_be_filled_in_every_language() {
        let checkout = fake_checkout();
        for language in [Language::Rust, Language::Python, Language::Js, Language::Go] {
            for primary in [
                "v1/ConfigMap",
                "v1/Namespace",
                "example.com/v1alpha1/Widget",
            ] {
                let out = tempfile::tempdir().expect("tempdir");
                let files = project(language, primary, checkout.path())
                    .create(out.path())
                    .expect("created");
                for file in &files {
                    let text = std::fs::read_to_string(out.path().join(file)).expect("written");
                    assert!(
                        !text.contains("{{"),
                        "{language:?} {primary} {file}: {text}"
                    );
                }
                assert_eq!(
                    files.iter().any(|f| f == "crd.yaml"),
                    primary.contains("Widget"),
                    "{files:?}"
                );
            }
        }
    }

    #[test]
    fn primaries_should_come_from_the_registry_or_be_guessed_as_custom() {
        let ns = primary_type("v1/Namespace", false).expect("built-in").0;
        assert_eq!((ns.plural.as_str(), ns.namespaced), ("namespaces", false));
        let deployment = primary_type("apps/v1/Deployment", false)
            .expect("built-in")
            .0;
        assert_eq!(deployment.plural, "deployments");
        let widget = primary_type("example.com/v1/Widget", false)
            .expect("custom")
            .0;
        assert_eq!(
            (widget.plural.as_str(), widget.namespaced),
            ("widgets", true)
        );
        let cluster = primary_type("example.com/v1/Widget", true)
            .expect("custom")
            .0;
        assert!(!cluster.namespaced);
        assert_eq!(crd(&cluster)["spec"]["scope"], "Cluster");
        assert!(
            primary_type("v1/Namespace", true).is_ok(),
            "cluster-scoped already"
        );
        assert!(matches!(
            primary_type("v1/ConfigMap", true),
            Err(ScaffoldError::NamespacedBuiltin(_))
        ));
        for bad in [
            "ConfigMap",
            "v1/configmap",
            "a/b/c/D",
            "Bad_Group/v1/X",
            "v1/Config-Map",
        ] {
            assert!(
                matches!(
                    primary_type(bad, false),
                    Err(ScaffoldError::InvalidPrimary(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn refusals_should_name_the_fix() {
        let checkout = fake_checkout();
        let out = tempfile::tempdir().expect("tempdir");
        let mut bad = project(Language::Rust, "v1/ConfigMap", checkout.path());
        bad.name = "Hello_World".into();
        assert!(matches!(
            bad.create(out.path()),
            Err(ScaffoldError::InvalidName(_))
        ));
        let empty = tempfile::tempdir().expect("tempdir");
        let err = project(Language::Python, "v1/ConfigMap", empty.path())
            .create(out.path())
            .expect_err("no wheel");
        assert!(err.to_string().contains("run `make sdk`"), "{err}");
        std::fs::write(out.path().join("keep"), "mine").expect("a file");
        let err = project(Language::Js, "v1/ConfigMap", checkout.path())
            .create(out.path())
            .expect_err("not empty");
        assert!(matches!(err, ScaffoldError::NotEmpty(_)), "{err}");
        assert_eq!(
            std::fs::read_to_string(out.path().join("keep")).expect("kept"),
            "mine"
        );
    }
}
