//! `kubewasm replay`: one reconcile (or one `map-keys`) against objects
//! from files, printing the requests the host would send.

use std::path::PathBuf;
use std::sync::Arc;

use clap::ValueEnum;
use kubewasm_runtime::cache::MemoryCache;
use kubewasm_runtime::fixture::Fixture;
use kubewasm_runtime::grants::OperatorGrants;
use kubewasm_runtime::mapper::RestMapper;
use kubewasm_runtime::replay::{self, ReplayError};
use kubewasm_runtime::resource::{ObjectKey, ResourceType};
use kubewasm_runtime::{InstanceReuse, LoadOptions, Plugin, Request, Runtime};

use super::error::CliError;
use super::flags::RuntimeFlags;
use super::process::{read_bytes, read_text};

/// `kubewasm replay`'s flags.
#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The plugin component.
    plugin: PathBuf,
    /// Objects to fill the cache with (multi-document YAML or JSON);
    /// repeatable. CustomResourceDefinitions among them say how their
    /// types are served, as discovery would. An object without a uid
    /// gets a stable one, derived from its identity.
    #[arg(long, required_unless_present = "fixture")]
    objects: Vec<PathBuf>,
    /// A call recorded by `kubewasm run --record` (JSON): replayed with
    /// what it recorded (objects, configuration, clock, confinement), its
    /// report printed; fails if it differs from the recording.
    #[arg(long, conflicts_with_all = ["objects", "config", "key", "map", "grants", "now", "name"])]
    fixture: Option<PathBuf>,
    /// The plugin's configuration (YAML or JSON).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The primary to reconcile: NAMESPACE/NAME, or NAME when cluster-scoped.
    #[arg(long, required_unless_present_any = ["map", "fixture", "converged"])]
    key: Option<String>,
    /// Run `map-keys` instead, for the first object of FILE, of type
    /// TYPE (`GROUP/VERSION/KIND`, `v1/KIND` for the core group), and
    /// print the primary keys it maps to.
    #[arg(long, num_args = 2, value_names = ["TYPE", "FILE"], conflicts_with = "key")]
    map: Option<Vec<String>>,
    /// The operator's grants file, narrowing what the plugin may do
    /// (see README, "Grants").
    #[arg(long)]
    grants: Option<PathBuf>,
    /// The name the plugin runs under, if not the one it declares (its
    /// file name in a plugin directory, its `Plugin` resource's name): its
    /// field manager and finalizer are named after it.
    #[arg(long)]
    name: Option<String>,
    /// Step every primary among the objects (its type and selector, within
    /// the granted namespaces) and print those not converged: whose step
    /// would still apply something that is not so, delete something or
    /// patch a finalizer, or fails. Exits 1 if any. For the final state of
    /// a soak, a chaos run or a rollout (`kubectl get ... -o yaml`).
    #[arg(long, conflicts_with_all = ["key", "map", "fixture"])]
    converged: bool,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Yaml)]
    output: Format,
    /// The time the reconcile runs at (RFC 3339, `2026-01-01T00:00:00Z`)
    /// [default: now]: with it, two replays print the same bytes.
    #[arg(long)]
    now: Option<jiff::Timestamp>,
    #[command(flatten)]
    runtime: RuntimeFlags,
}

/// How a report is printed.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Format {
    Yaml,
    Json,
}

/// Runs the replay and prints its report.
///
/// # Errors
/// [`CliError`] says which input was refused, or why the call failed.
pub(super) fn run(args: Args) -> Result<(), CliError> {
    if let Some(path) = args.fixture.clone() {
        return run_fixture(args, path);
    }
    // Parsed first: a bad key is reported before any compile.
    let key: Option<ObjectKey> = args.key.as_deref().map(str::parse).transpose()?;
    // One call or none: the baseline compiler makes a first replay of an
    // interpreted plugin take a second, not twenty (a cached optimized
    // build is still preferred).
    let runtime = args.runtime.runtime(InstanceReuse::Fresh, None)?;
    let mut objects = Vec::new();
    for path in args.objects {
        objects.extend(replay::parse_objects(&read_text(path)?)?);
    }
    replay::stable_uids(&mut objects);
    let cache = MemoryCache::from_objects(objects.iter().cloned()).map_err(ReplayError::from)?;
    let mapper = Arc::new(RestMapper::for_fixtures(&objects)?);
    let mut options = LoadOptions::new(Arc::clone(&mapper));
    if let Some(path) = args.grants {
        options = options.grants(OperatorGrants::from_file(&path)?);
    }
    if let Some(name) = &args.name {
        options = options.name(name);
    }
    let plugin = load(&runtime, args.plugin, &options)?;
    let config = match args.config {
        Some(path) => replay::parse_config(&read_text(path)?)?,
        None => "{}".to_owned(),
    };
    if let Some([resource, file]) = args.map.as_deref() {
        let resource = mapped_type(&mapper, resource)?;
        let object = replay::parse_objects(&read_text(PathBuf::from(file))?)?
            .into_iter()
            .next()
            .ok_or_else(|| CliError::NoObject(PathBuf::from(file)))?;
        let report = replay::map(&plugin, cache, &resource, &object, &config)?;
        return print_report(&report, args.output);
    }
    if args.converged {
        let unconverged = replay::unconverged(&plugin, &objects, &config)?;
        print_report(&unconverged, args.output)?;
        return match unconverged.len() {
            0 => Ok(()),
            n => Err(CliError::NotConverged(n)),
        };
    }
    let key = key.ok_or(CliError::NoKey)?;
    let mut request = Request {
        config,
        ..Request::new(key)
    };
    if let Some(now) = args.now {
        request.now = now;
    }
    print_report(&replay::replay(&plugin, cache, &request)?, args.output)
}

/// Replays a recorded call: prints its report (or fails as it failed), and
/// fails if that is not what was recorded.
fn run_fixture(args: Args, path: PathBuf) -> Result<(), CliError> {
    let fixture: Fixture = serde_json::from_str(&read_text(path.clone())?)
        .map_err(|e| ReplayError::Fixture(format!("{}: {e}", path.display())))?;
    let runtime = args.runtime.runtime(InstanceReuse::Fresh, None)?;
    let options = LoadOptions::new(Arc::new(fixture.mapper())).grants(OperatorGrants {
        namespaces: fixture.namespaces.clone(),
        ..OperatorGrants::unrestricted()
    });
    let plugin = load(&runtime, args.plugin, &options)?;
    let replayed = fixture.replay(&plugin)?;
    let matches = fixture.matches(&replayed);
    match replayed {
        Ok(report) => print_report(&report, args.output)?,
        Err(failure) if matches => return Err(CliError::FailedAgain(failure)),
        Err(failure) => eprintln!("replayed: {failure}"),
    }
    if matches {
        return Ok(());
    }
    Err(CliError::Differs {
        fixture: path,
        digest: if plugin.digest() == fixture.digest {
            String::new()
        } else {
            format!(
                "; recorded with component sha256:{}, replayed with sha256:{}",
                fixture.digest,
                plugin.digest()
            )
        },
    })
}

/// Loads the component at `path`.
fn load(runtime: &Runtime, path: PathBuf, options: &LoadOptions) -> Result<Plugin, CliError> {
    runtime
        .load(&read_bytes(&path)?, options)
        .map_err(|source| CliError::Load { path, source })
}

/// Prints a replay's report as `output` says.
fn print_report(report: &impl serde::Serialize, output: Format) -> Result<(), CliError> {
    let text = match output {
        Format::Yaml => serde_yaml::to_string(report).map_err(|e| CliError::Encode(Box::new(e)))?,
        Format::Json => {
            serde_json::to_string_pretty(report).map_err(|e| CliError::Encode(Box::new(e)))? + "\n"
        }
    };
    print!("{text}");
    Ok(())
}

/// The type `GROUP/VERSION/KIND` (or `VERSION/KIND`) names, as `mapper`
/// serves it.
fn mapped_type(mapper: &RestMapper, text: &str) -> Result<ResourceType, CliError> {
    let parts: Vec<&str> = text.split('/').collect();
    let (group, version, kind) = match parts.as_slice() {
        [version, kind] => ("", *version, *kind),
        [group, version, kind] => (*group, *version, *kind),
        _ => return Err(CliError::UnknownType(text.to_owned())),
    };
    mapper
        .lookup(group, version, kind)
        .ok_or_else(|| CliError::UnknownType(text.to_owned()))
}
