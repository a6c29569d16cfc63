//! A test plugin that misbehaves on request. Its primary is a ConfigMap;
//! its configuration's `mode` picks the behaviour:
//!
//! - `ok`: applies a copy of the primary named `<name>-copy`;
//! - `noop`: returns at once (measures a bare call);
//! - `busy`: holds its worker for the configuration's `micros`
//!   microseconds (blocked, as a step waiting on the API server is), then
//!   asks to be called again in 1 ms (a saturating tenant);
//! - `spin`: the same, computing all along;
//! - `read`: reads the primary, parses it, returns nothing (one typed read);
//! - `read-text`: reads the primary's JSON text unparsed (the crossing alone);
//! - `count`: returns an event whose note is how many calls this instance
//!   has served (shows whether instances are reused);
//! - `language`: returns an event whose note is `rust` (the Python and
//!   JavaScript twins say theirs: a swap between them shows);
//! - `escape`: tries the filesystem, the environment, the arguments and
//!   the network (a connection to the loopback `port` of the
//!   configuration, where the test listens), and reports what it got in an
//!   event;
//! - `sleep`: sleeps for an hour (blocks in `wasi:io/poll`);
//! - `flood-log`: logs records until stopped;
//! - `flood-reads`: reads the primary from the cache until stopped;
//! - `flood-actions`: returns 5,000 tiny applies;
//! - `big-object`: applies a ConfigMap of 4 MiB;
//! - `lie-plural`: reads and deletes a ConfigMap through a type that claims
//!   the plural `secrets`, cluster-scoped;
//! - `bad-name`: applies a ConfigMap named `a/b`;
//! - `system-namespace`: applies a ConfigMap into `kube-system`;
//! - `list-pods`: lists Pods (declared with the selector
//!   `misbehave=visible`) and gets `default/hidden`, and reports what it saw
//!   (`denied` when the get was).
//!
//! - `list-outside`: lists ConfigMaps of every namespace and gets
//!   `target` in the configuration's `victim` namespace, and reports what
//!   it saw (`victim=denied` when the get was);
//! - `write-outside`: applies a ConfigMap `planted` into the `victim`
//!   namespace;
//! - `write-inside`: applies a ConfigMap `<name>-planted` beside the
//!   primary (what its grants allow, and the cluster's RBAC may not);
//! - `hostile`: the mode named by the primary's `attack` data entry, so
//!   one plugin runs every attack at once, one ConfigMap each.
//!
//! Its configuration must match its `config-schema`: an object with a
//! string `mode`, an optional integer `port`, an optional string `victim`
//! and an optional integer `micros`.
//! - `loop`: never returns;
//! - `oom`: allocates until the memory limit stops it;
//! - `panic`: panics;
//! - `read-undeclared`: reads a Secret, which it did not declare, and fails
//!   with the error it got;
//! - `write-undeclared`: applies a Secret; on the retry after the host
//!   denied it, reports the denial it was told about in an event.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kubewasm_guest::k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kubewasm_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubewasm_guest::{
    Context, Declaration, Error, Event, ObjectKey, Outcome, Preconditions, Reconciler,
    ResourceType, Result, Secondary, Verb,
};
use serde::Deserialize;

/// The plugin.
pub struct Misbehave;

#[derive(Deserialize)]
struct Config {
    mode: String,
    #[serde(default)]
    port: u16,
    #[serde(default)]
    victim: String,
    #[serde(default)]
    micros: u64,
}

fn config_map(name: &str, namespace: Option<&str>, data: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace}, "data": {"k": data}})
}

static CALLS: AtomicU64 = AtomicU64::new(0);

impl Reconciler for Misbehave {
    fn declare() -> Declaration {
        Declaration::new::<ConfigMap>("misbehave", "0.1.0")
            .primary_verbs([Verb::Apply, Verb::Delete])
            .secondary(
                Secondary::of::<Pod>()
                    .verbs([Verb::Get, Verb::List])
                    .label_selector("misbehave=visible"),
            )
            .config_schema(serde_json::json!({
                "type": "object",
                "required": ["mode"],
                "properties": {
                    "mode": {"type": "string"},
                    "port": {"type": "integer", "minimum": 0, "maximum": 65535},
                    "victim": {"type": "string"},
                    "micros": {"type": "integer", "minimum": 0, "maximum": 1000000}
                }
            }))
    }

    fn reconcile(ctx: &Context) -> Result<Outcome> {
        let calls = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
        let config: Config = ctx.config()?;
        let mode = if config.mode == "hostile" {
            ctx.primary::<ConfigMap>()?
                .and_then(|p| p.data?.remove("attack"))
                .unwrap_or_default()
        } else {
            config.mode.clone()
        };
        match mode.as_str() {
            "ok" => {
                let primary = ctx
                    .primary::<ConfigMap>()?
                    .ok_or_else(|| Error::msg("primary not found"))?;
                let copy = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(format!("{}-copy", ctx.name())),
                        ..ObjectMeta::default()
                    },
                    data: primary.data,
                    ..ConfigMap::default()
                };
                Ok(Outcome::new().apply(&copy))
            }
            "noop" => Ok(Outcome::new()),
            "busy" => {
                std::thread::sleep(Duration::from_micros(config.micros));
                Ok(Outcome::new().requeue_after(Duration::from_millis(1)))
            }
            "spin" => {
                let started = std::time::Instant::now();
                let mut spins = 0_u64;
                while started.elapsed() < Duration::from_micros(config.micros) {
                    spins = std::hint::black_box(spins.wrapping_add(1));
                }
                Ok(Outcome::new().requeue_after(Duration::from_millis(1)))
            }
            "read" => {
                ctx.primary::<ConfigMap>()?;
                Ok(Outcome::new())
            }
            "read-text" => {
                ctx.get_text(ctx.resource(), ctx.key())?;
                Ok(Outcome::new())
            }
            "language" => Ok(Outcome::new().event(Event::normal("Language", "Reconcile", "rust"))),
            "count" => {
                Ok(Outcome::new().event(Event::normal("Counted", "Count", calls.to_string())))
            }
            "escape" => {
                let file = std::fs::read_to_string("/etc/passwd").map(|s| s.len());
                let dir = std::fs::read_dir("/").map(|d| d.count());
                let env = std::env::vars().count();
                let args = std::env::args().collect::<Vec<_>>().join(",");
                let net = std::net::TcpStream::connect(("127.0.0.1", config.port)).map(|_| ());
                let note = format!(
                    "file={} dir={} env={env} args={args} net={}",
                    file.is_ok(),
                    dir.is_ok(),
                    net.is_ok()
                );
                Ok(Outcome::new().event(Event::normal("Escape", "Probe", note)))
            }
            "loop" => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "oom" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(std::hint::black_box(vec![1u8; 1 << 20]));
                }
            }
            "panic" => panic!("boom: misbehave was asked to panic"),
            "sleep" => {
                std::thread::sleep(Duration::from_secs(3600));
                Ok(Outcome::new())
            }
            "flood-log" => loop {
                kubewasm_guest::log::info("flood", &[("x", "y")]);
            },
            "flood-reads" => loop {
                ctx.get_text(ctx.resource(), ctx.key())?;
            },
            "flood-actions" => Ok((0..5_000).fold(Outcome::new(), |o, i| {
                o.apply_json(config_map(&format!("c{i}"), None, ""), true)
            })),
            "big-object" => {
                Ok(Outcome::new().apply_json(config_map("big", None, &"x".repeat(4 << 20)), true))
            }
            "lie-plural" => {
                let lying = ResourceType {
                    plural: "secrets".into(),
                    namespaced: false,
                    ..ctx.resource().clone()
                };
                let found = ctx.get_text(&lying, ctx.key())?.is_some();
                Ok(Outcome::new()
                    .event(Event::normal("Read", "Read", found.to_string()))
                    .delete_of(lying, ctx.key().clone(), Preconditions::default()))
            }
            "list-pods" => {
                let listed: Vec<String> = ctx
                    .list::<Pod>(None, "")?
                    .into_iter()
                    .filter_map(|p| p.metadata.name)
                    .collect();
                let hidden = match ctx.get::<Pod>(&ObjectKey::namespaced("default", "hidden")) {
                    Ok(found) => found.is_some().to_string(),
                    Err(_) => "denied".to_owned(),
                };
                let note = format!("listed={} hidden={hidden}", listed.join(","));
                Ok(Outcome::new().event(Event::normal("Listed", "List", note)))
            }
            "list-outside" => {
                let listed: Vec<String> = ctx
                    .list::<ConfigMap>(None, "")?
                    .into_iter()
                    .map(|c| {
                        format!(
                            "{}/{}",
                            c.metadata.namespace.unwrap_or_default(),
                            c.metadata.name.unwrap_or_default()
                        )
                    })
                    .collect();
                let victim =
                    match ctx.get::<ConfigMap>(&ObjectKey::namespaced(&config.victim, "target")) {
                        Ok(Some(_)) => "found",
                        Ok(None) => "absent",
                        Err(_) => "denied",
                    };
                let note = format!("listed={} victim={victim}", listed.join(","));
                Ok(Outcome::new().event(Event::normal("Listed", "List", note)))
            }
            "write-outside" => {
                Ok(Outcome::new()
                    .apply_json(config_map("planted", Some(&config.victim), ""), false))
            }
            "write-inside" => Ok(Outcome::new().apply_json(
                config_map(&format!("{}-planted", ctx.name()), None, ""),
                false,
            )),
            "bad-name" => Ok(Outcome::new().apply_json(config_map("a/b", None, ""), false)),
            "system-namespace" => Ok(
                Outcome::new().apply_json(config_map("planted", Some("kube-system"), ""), false)
            ),
            "read-undeclared" => {
                let secret = ctx.get::<Secret>(&ObjectKey::namespaced("default", "token"))?;
                Ok(Outcome::new().event(Event::normal(
                    "Read",
                    "Read",
                    format!("{}", secret.is_some()),
                )))
            }
            "write-undeclared" => match ctx.last_failure() {
                Some(why) => Ok(Outcome::new().event(Event::warning(
                    "Denied",
                    "Apply",
                    format!("host said: {why}"),
                ))),
                None => {
                    let secret = Secret {
                        metadata: ObjectMeta {
                            name: Some("stolen".into()),
                            ..ObjectMeta::default()
                        },
                        ..Secret::default()
                    };
                    Ok(Outcome::new().apply(&secret))
                }
            },
            other => Err(Error::msg(format!("unknown mode `{other}`"))),
        }
    }

    /// Returns as many keys as the object's `keys` data entry says, all
    /// named by its `name` entry (`../x` makes an invalid key, `fail` a
    /// failure), or by the `name` entry of the cached ConfigMap its `follow`
    /// entry names (a read inside `map-keys`); then the key its previous
    /// state's `name` entry names, if it had one, and `default/gone` if it
    /// was deleted (contract 0.3.0).
    fn map_keys(ctx: &Context, object: &serde_json::Value) -> Result<Vec<ObjectKey>> {
        let data = |object: &serde_json::Value, entry: &str| {
            object
                .pointer(&format!("/data/{entry}"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        let count = data(object, "keys")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let name = match data(object, "follow") {
            Some(followed) => {
                let followed: Option<ConfigMap> = ctx.get(&ctx.key().with_name(followed))?;
                followed
                    .and_then(|cm| cm.data?.get("name").cloned())
                    .ok_or_else(|| Error::msg("the followed ConfigMap names no one"))?
            }
            None => data(object, "name").unwrap_or_else(|| "x".to_owned()),
        };
        if name == "fail" {
            return Err(Error::msg("asked to fail"));
        }
        let left = ctx
            .previous()
            .and_then(|previous| data(previous, "name"))
            .into_iter()
            .chain(ctx.deleted().then(|| "gone".to_owned()));
        Ok((0..count)
            .map(|_| name.clone())
            .chain(left)
            .map(|name| ObjectKey::namespaced("default", &name))
            .collect())
    }
}

kubewasm_guest::export!(Misbehave);
