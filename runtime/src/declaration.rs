//! What a plugin declares at load: its identity, the resource types it
//! reconciles, reads and writes, and how the host should run it.
//!
//! These are the host's own types, converted from the WIT bindings once at
//! load and validated there, so the rest of the host never sees generated
//! code. They serialize to the JSON that `kubewasm inspect` prints, and read
//! it back (the conformance fixtures hold declarations in that form).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::mapper::{MapperError, RestMapper};
use kubewasm_core::resource::ResourceType;
pub use kubewasm_core::resource::Verb;
use kubewasm_core::schedule::{Schedule, ScheduleError};
use kubewasm_core::selector::{Selector, SelectorError};

/// How changes of a secondary resource map to primary keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "labelKey")]
pub enum Mapping {
    /// Read only: changes trigger nothing.
    None,
    /// Owners of the primary's type in `metadata.ownerReferences`.
    OwnerReferences,
    /// The value of this label names the primary (`name`, or `namespace.name`
    /// for a namespaced primary: label values cannot hold `/`).
    Label(String),
    /// The plugin's `map-keys` export computes the keys.
    Custom,
    /// The primaries whose last successful reconcile read the object.
    Reads,
}

/// A resource type other than the primary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Secondary {
    /// The type.
    #[serde(rename = "type")]
    pub resource: ResourceType,
    /// The verbs needed on it.
    pub verbs: BTreeSet<Verb>,
    /// Only objects matching this selector are cached and mapped.
    pub label_selector: String,
    /// How its changes map to primary keys.
    pub mapping: Mapping,
    /// Whether the owned children of this type form a set: those an
    /// outcome no longer applies are deleted ([`crate::step`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prune: bool,
}

/// A plugin's declaration, validated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Declaration {
    /// Plugin name (a DNS label).
    pub name: String,
    /// Plugin version.
    pub version: String,
    /// The primary resource type.
    pub primary: ResourceType,
    /// Verbs on the primary; always includes `get`, `list` and `watch`.
    #[serde(default)]
    pub primary_verbs: BTreeSet<Verb>,
    /// Only primaries matching this label selector are watched and
    /// reconciled (empty: all).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub primary_selector: String,
    /// Other resource types.
    #[serde(default)]
    pub secondaries: Vec<Secondary>,
    /// Whether the host manages the finalizer [`Declaration::finalizer`].
    #[serde(default)]
    pub managed_finalizer: bool,
    /// Resync period in seconds, if the plugin set one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resync_seconds: Option<u32>,
    /// Wanted concurrency, if the plugin set one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// JSON Schema of the configuration, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_schema: Option<serde_json::Value>,
    /// The cron schedule `scheduled` is called on, if any ([`kubewasm_core::schedule`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
}

/// Most secondaries a declaration may have.
pub const MAX_SECONDARIES: usize = 64;

/// Most bytes of a secondary's label selector, or of the config schema.
pub const MAX_DECLARED_TEXT: usize = 64 << 10;

/// Most bytes a compiled `pattern` of the config schema may take.
const MAX_PATTERN_BYTES: usize = 1 << 20;

/// Why a declaration was refused.
#[derive(Debug, thiserror::Error)]
pub enum DeclarationError {
    /// The name is not a DNS label.
    #[error(
        "invalid plugin name `{0}`: it must be a DNS label (lowercase alphanumerics and `-`, at most 63 characters)"
    )]
    InvalidName(String),
    /// A resource type lacks a version, kind or plural.
    #[error("invalid resource type `{0}`: version, kind and plural must be set")]
    InvalidResourceType(String),
    /// A type is declared again with another label selector (or another
    /// version of it): a plugin caches a type once, by one selector.
    #[error(
        "resource type `{0}` is declared twice, otherwise: a type may be declared again (to map its changes another way) only with the same version and label selector"
    )]
    Duplicate(String),
    /// A secondary's label selector does not parse.
    #[error("invalid label selector for `{resource}`")]
    Selector {
        /// The secondary.
        resource: String,
        /// The parse error.
        #[source]
        source: SelectorError,
    },
    /// The configuration schema is not JSON.
    #[error("config schema is not valid JSON: {0}")]
    ConfigSchema(#[source] serde_json::Error),
    /// The configuration schema is not a valid JSON Schema.
    #[error("config schema is not a valid JSON Schema: {0}")]
    InvalidConfigSchema(String),
    /// A part of the declaration is larger than the host accepts.
    #[error("declaration too large: {what} (at most {max})")]
    TooLarge {
        /// What.
        what: String,
        /// The bound.
        max: usize,
    },
    /// A type whose children form a set cannot be pruned as declared.
    #[error(
        "resource type `{0}` is declared with `prune`, which needs the `delete` verb on it and a type other than the primary's"
    )]
    Prune(String),
    /// The schedule does not parse.
    #[error("invalid schedule: {0}")]
    Schedule(#[from] ScheduleError),
    /// The schedule parses but names no time (the 30th of February).
    #[error("schedule `{0}` never fires")]
    NeverScheduled(String),
    /// A declared type is not served as declared.
    #[error("declared type refused: {0}")]
    Mapping(#[source] MapperError),
}

impl Declaration {
    /// The field manager the host uses for this plugin's writes.
    pub fn field_manager(&self) -> String {
        format!("kubewasm-{}", self.name)
    }

    /// The finalizer the host manages for this plugin.
    pub fn finalizer(&self) -> String {
        format!("kubewasm.dev/{}", self.name)
    }

    /// The schedule `scheduled` is called on, parsed (a validated
    /// declaration's parses, and fires).
    ///
    /// # Errors
    /// [`DeclarationError::Schedule`] if it does not parse,
    /// [`DeclarationError::NeverScheduled`] if it names no time.
    pub fn cron(&self) -> Result<Option<Schedule>, DeclarationError> {
        let Some(text) = &self.schedule else {
            return Ok(None);
        };
        let schedule = Schedule::parse(text)?;
        if schedule.next_after(jiff::Timestamp::UNIX_EPOCH).is_none() {
            return Err(DeclarationError::NeverScheduled(text.clone()));
        }
        Ok(Some(schedule))
    }

    /// Every declared resource type, the primary first.
    pub fn resource_types(&self) -> impl Iterator<Item = &ResourceType> {
        std::iter::once(&self.primary).chain(self.secondaries.iter().map(|s| &s.resource))
    }

    /// Every declared label selector with its type, the primary's first.
    fn selectors(&self) -> impl Iterator<Item = (&ResourceType, &str)> {
        std::iter::once((&self.primary, self.primary_selector.as_str())).chain(
            self.secondaries
                .iter()
                .map(|s| (&s.resource, s.label_selector.as_str())),
        )
    }

    /// The declared type with this `apiVersion` and `kind`, if any.
    pub fn resource_type(&self, api_version: &str, kind: &str) -> Option<&ResourceType> {
        self.resource_types().find(|ty| ty.is(api_version, kind))
    }

    /// Checks the declaration and normalizes it: implied verbs are added.
    ///
    /// # Errors
    /// [`DeclarationError`] says which part is invalid.
    pub fn validate(mut self) -> Result<Self, DeclarationError> {
        if !kubewasm_core::validation::is_dns_label(&self.name) {
            return Err(DeclarationError::InvalidName(self.name));
        }
        let too_large = |what: String, max| Err(DeclarationError::TooLarge { what, max });
        if self.secondaries.len() > MAX_SECONDARIES {
            return too_large(
                format!("{} secondaries", self.secondaries.len()),
                MAX_SECONDARIES,
            );
        }
        if self.version.len() > 256 {
            return too_large(format!("a version of {} bytes", self.version.len()), 256);
        }
        if let Some(schedule) = self.schedule.as_ref().filter(|s| s.len() > 256) {
            return too_large(format!("a schedule of {} bytes", schedule.len()), 256);
        }
        let schema_bytes = self
            .config_schema
            .as_ref()
            .map_or(0, |s| s.to_string().len());
        if schema_bytes > MAX_DECLARED_TEXT {
            return too_large(
                format!("a config schema of {schema_bytes} bytes"),
                MAX_DECLARED_TEXT,
            );
        }
        if let Some(selector) = self
            .selectors()
            .find(|(_, selector)| selector.len() > MAX_DECLARED_TEXT)
            .map(|(_, selector)| selector)
        {
            return too_large(
                format!("a label selector of {} bytes", selector.len()),
                MAX_DECLARED_TEXT,
            );
        }
        let mut seen = BTreeMap::new();
        for (ty, selector) in self.selectors() {
            if ty.version.is_empty() || ty.kind.is_empty() || ty.plural.is_empty() {
                return Err(DeclarationError::InvalidResourceType(ty.to_string()));
            }
            match seen.insert((&ty.group, &ty.kind), (ty, selector)) {
                Some(first) if first != (ty, selector) => {
                    return Err(DeclarationError::Duplicate(ty.to_string()));
                }
                _ => {}
            }
        }
        for (resource, selector) in self.selectors() {
            Selector::parse(selector).map_err(|source| DeclarationError::Selector {
                resource: resource.to_string(),
                source,
            })?;
        }
        self.cron()?;
        self.primary_verbs
            .extend([Verb::Get, Verb::List, Verb::Watch]);
        self.unite_verbs();
        if let Some(set) = self.secondaries.iter().find(|s| {
            let primary = s.resource.same_kind(&self.primary);
            s.prune && (!s.verbs.contains(&Verb::Delete) || primary)
        }) {
            return Err(DeclarationError::Prune(set.resource.to_string()));
        }
        Ok(self)
    }

    /// Gives every declaration of a type declared more than once (a child
    /// both owned and mapped, the primary's type mapped to other primaries)
    /// the verbs of them all, so whichever a check finds holds them.
    fn unite_verbs(&mut self) {
        let mut united: BTreeMap<ResourceType, BTreeSet<Verb>> = BTreeMap::new();
        let declared = std::iter::once((&self.primary, &self.primary_verbs))
            .chain(self.secondaries.iter().map(|s| (&s.resource, &s.verbs)));
        for (resource, verbs) in declared {
            united
                .entry(resource.clone())
                .or_default()
                .extend(verbs.iter().copied());
        }
        let verbs = std::iter::once((&self.primary, &mut self.primary_verbs)).chain(
            self.secondaries
                .iter_mut()
                .map(|s| (&s.resource, &mut s.verbs)),
        );
        for (resource, verbs) in verbs {
            if let Some(all) = united.get(resource) {
                verbs.clone_from(all);
            }
        }
    }

    /// Replaces every declared type with the type as the cluster serves it:
    /// the plural and scope a plugin passes are checked, never trusted.
    ///
    /// # Errors
    /// [`DeclarationError::Mapping`] names the first type the cluster does
    /// not serve, or serves with another plural or scope.
    pub fn resolve(mut self, mapper: &RestMapper) -> Result<Self, DeclarationError> {
        self.primary = mapper
            .resolve(&self.primary)
            .map_err(DeclarationError::Mapping)?;
        for secondary in &mut self.secondaries {
            secondary.resource = mapper
                .resolve(&secondary.resource)
                .map_err(DeclarationError::Mapping)?;
        }
        Ok(self)
    }

    /// Why `mapper` does not serve a type of this declaration as declared
    /// (the first such type), if it does not: what a running plugin is
    /// checked with when the cluster's types change.
    pub fn unserved(&self, mapper: &RestMapper) -> Option<MapperError> {
        std::iter::once(&self.primary)
            .chain(self.secondaries.iter().map(|s| &s.resource))
            .find_map(|declared| mapper.resolve(declared).err())
    }

    /// The compiled configuration schema, if the plugin declared one.
    /// Remote references are never fetched: a schema is self-contained.
    /// Patterns compile to the linear-time `regex` engine (with a size
    /// bound), so no configuration can make validation backtrack for long.
    ///
    /// # Errors
    /// [`DeclarationError::InvalidConfigSchema`] with the validator's message.
    pub fn config_validator(&self) -> Result<Option<jsonschema::Validator>, DeclarationError> {
        self.config_schema
            .as_ref()
            .map(|schema| {
                jsonschema::options()
                    .with_pattern_options(
                        jsonschema::PatternOptions::regex().size_limit(MAX_PATTERN_BYTES),
                    )
                    .build(schema)
                    .map_err(|e| DeclarationError::InvalidConfigSchema(e.to_string()))
            })
            .transpose()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn ty(
        api_version: &str,
        kind: &str,
        plural: &str,
        namespaced: bool,
    ) -> ResourceType {
        let (group, version) = kubewasm_core::resource::split_api_version(api_version);
        ResourceType {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
        }
    }

    pub(crate) fn sample() -> Declaration {
        Declaration {
            name: "myapp".into(),
            version: "0.1.0".into(),
            primary: ty("example.com/v1", "MyApp", "myapps", true),
            primary_verbs: [Verb::ApplyStatus].into(),
            primary_selector: String::new(),
            secondaries: vec![Secondary {
                resource: ty("apps/v1", "Deployment", "deployments", true),
                verbs: [Verb::Get, Verb::Watch, Verb::Apply].into(),
                label_selector: String::new(),
                mapping: Mapping::OwnerReferences,
                prune: false,
            }],
            managed_finalizer: false,
            resync_seconds: None,
            max_concurrency: None,
            config_schema: None,
            schedule: None,
        }
    }

    #[test]
    fn validate_should_add_implied_primary_verbs() {
        let decl = sample().validate().expect("valid");
        assert!(decl.primary_verbs.contains(&Verb::Get));
        assert!(decl.primary_verbs.contains(&Verb::Watch));
        assert_eq!(decl.field_manager(), "kubewasm-myapp");
        assert_eq!(decl.finalizer(), "kubewasm.dev/myapp");
    }

    #[test]
    fn validate_should_refuse_bad_names_duplicates_and_selectors() {
        let mut bad_name = sample();
        bad_name.name = "My_App".into();
        assert!(matches!(
            bad_name.validate(),
            Err(DeclarationError::InvalidName(_))
        ));

        let mut dup = sample();
        let mut other_selector = dup.secondaries[0].clone();
        other_selector.label_selector = "tier=web".into();
        dup.secondaries.push(other_selector);
        assert!(matches!(
            dup.validate(),
            Err(DeclarationError::Duplicate(_))
        ));
        let mut other_version = sample();
        let mut primary = other_version.secondaries[0].clone();
        primary.resource = ty("example.com/v2", "MyApp", "myapps", true);
        other_version.secondaries.push(primary);
        assert!(matches!(
            other_version.validate(),
            Err(DeclarationError::Duplicate(_))
        ));

        let mut selector = sample();
        selector.secondaries[0].label_selector = "a in (".into();
        assert!(matches!(
            selector.validate(),
            Err(DeclarationError::Selector { .. })
        ));
    }

    #[test]
    fn a_type_declared_again_with_its_selector_should_hold_the_verbs_of_both() {
        let mut decl = sample();
        // Deployments both owned and mapped by map-keys; the primary's
        // type mapped to other primaries.
        decl.secondaries.push(Secondary {
            verbs: [Verb::List].into(),
            mapping: Mapping::Custom,
            ..decl.secondaries[0].clone()
        });
        decl.secondaries.push(Secondary {
            resource: decl.primary.clone(),
            verbs: [Verb::Delete].into(),
            label_selector: String::new(),
            mapping: Mapping::Custom,
            prune: false,
        });
        let decl = decl.validate().expect("valid");
        let all: BTreeSet<Verb> = [Verb::Get, Verb::List, Verb::Watch, Verb::Apply].into();
        assert_eq!(decl.secondaries[0].verbs, all);
        assert_eq!(decl.secondaries[1].verbs, all);
        let primary: BTreeSet<Verb> = [
            Verb::Get,
            Verb::List,
            Verb::Watch,
            Verb::ApplyStatus,
            Verb::Delete,
        ]
        .into();
        assert_eq!(decl.primary_verbs, primary);
        assert_eq!(decl.secondaries[2].verbs, primary);
    }

    #[test]
    fn a_schedule_should_parse_and_fire() {
        let with = |schedule: &str| {
            let mut decl = sample();
            decl.schedule = Some(schedule.into());
            decl.validate()
        };
        assert!(with("*/5 * * * *").is_ok());
        assert!(matches!(
            with("61 * * * *"),
            Err(DeclarationError::Schedule(_))
        ));
        assert!(matches!(
            with("0 0 30 feb *"),
            Err(DeclarationError::NeverScheduled(_))
        ));
        assert!(matches!(
            with(&"* ".repeat(200)),
            Err(DeclarationError::TooLarge { .. })
        ));
    }

    #[test]
    fn config_validator_should_compile_schemas_and_refuse_invalid_ones() {
        let mut decl = sample();
        assert!(decl.config_validator().expect("no schema").is_none());
        decl.config_schema = Some(serde_json::json!({"type": "object", "required": ["mode"]}));
        let validator = decl.config_validator().expect("valid").expect("compiled");
        assert!(validator.is_valid(&serde_json::json!({"mode": "x"})));
        assert!(!validator.is_valid(&serde_json::json!({})));
        decl.config_schema = Some(serde_json::json!({"type": 5}));
        assert!(matches!(
            decl.config_validator(),
            Err(DeclarationError::InvalidConfigSchema(_))
        ));
        // Remote references are never fetched.
        decl.config_schema = Some(serde_json::json!({"$ref": "https://example.com/schema.json"}));
        assert!(decl.config_validator().is_err());
    }

    #[test]
    fn validate_should_bound_the_declaration() {
        let mut many = sample();
        many.secondaries = (0..=MAX_SECONDARIES)
            .map(|i| Secondary {
                resource: ty("v1", &format!("Kind{i}"), &format!("kinds{i}"), true),
                ..sample().secondaries[0].clone()
            })
            .collect();
        assert!(matches!(
            many.validate(),
            Err(DeclarationError::TooLarge { .. })
        ));
        let mut selector = sample();
        selector.secondaries[0].label_selector = "a,".repeat(MAX_DECLARED_TEXT);
        assert!(matches!(
            selector.validate(),
            Err(DeclarationError::TooLarge { .. })
        ));
    }

    #[test]
    fn config_patterns_should_not_backtrack() {
        let mut decl = sample();
        decl.config_schema = Some(serde_json::json!({"type": "string", "pattern": "^(a+)+$"}));
        let validator = decl.config_validator().expect("valid").expect("compiled");
        let started = std::time::Instant::now();
        let evil = format!("{}!", "a".repeat(50_000));
        assert!(!validator.is_valid(&serde_json::json!(evil)));
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
}
