//! A test plugin that misbehaves on request. Its primary is a ConfigMap;
//! its configuration's `mode` picks the behaviour:
//!
//! - `ok`: applies a copy of the primary named `<name>-copy`;
//! - `noop`: returns at once (measures a bare call);
//! - `read`: reads the primary, parses it, returns nothing (one typed read);
//! - `read-text`: reads the primary's JSON text unparsed (the crossing alone);
//! - `count`: returns an event whose note is how many calls this instance
//!   has served (shows whether instances are reused);
//! - `escape`: tries the filesystem, the environment, the arguments and
//!   the network, and reports what it got in an event;
//! - `loop`: never returns;
//! - `oom`: allocates until the memory limit stops it;
//! - `panic`: panics;
//! - `read-undeclared`: reads a Secret, which it did not declare, and fails
//!   with the error it got;
//! - `write-undeclared`: applies a Secret; on the retry after the host
//!   denied it, reports the denial it was told about in an event.

use std::sync::atomic::{AtomicU64, Ordering};

use kubewasm_guest::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kubewasm_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubewasm_guest::{
    Context, Declaration, Error, Event, ObjectKey, Outcome, Reconciler, Result, Verb,
};
use serde::Deserialize;

/// The plugin.
pub struct Misbehave;

#[derive(Deserialize)]
struct Config {
    mode: String,
}

static CALLS: AtomicU64 = AtomicU64::new(0);

impl Reconciler for Misbehave {
    fn declare() -> Declaration {
        Declaration::new::<ConfigMap>("misbehave", "0.1.0").primary_verbs([Verb::Apply])
    }

    fn reconcile(ctx: &Context) -> Result<Outcome> {
        let calls = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
        let config: Config = ctx.config()?;
        match config.mode.as_str() {
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
            "read" => {
                ctx.primary::<ConfigMap>()?;
                Ok(Outcome::new())
            }
            "read-text" => {
                ctx.get_text(ctx.resource(), ctx.key())?;
                Ok(Outcome::new())
            }
            "count" => {
                Ok(Outcome::new().event(Event::normal("Counted", "Count", calls.to_string())))
            }
            "escape" => {
                let file = std::fs::read_to_string("/etc/passwd").map(|s| s.len());
                let dir = std::fs::read_dir("/").map(|d| d.count());
                let env = std::env::vars().count();
                let args = std::env::args().count();
                let net = std::net::TcpStream::connect("127.0.0.1:22").map(|_| ());
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
}

kubewasm_guest::export!(Misbehave);
