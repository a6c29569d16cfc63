//! The difference tool: the same request sequences to a fresh embedded
//! server (`kubewasm apiserver --simulate-workloads`) and a fresh real
//! control plane (`tests/real-cluster/up`), answers compared after
//! normalising what legitimately differs (`normalise`).
//!
//! ```text
//! cargo run -p kubewasm-tests --bin difference [-- --only PREFIX] [--show] [--markdown FILE]
//!                                              [--fuzz N [--seed S]]
//! cargo run -p kubewasm-tests --bin difference -- --record-kubectl
//! ```
//!
//! Sequences: those generated for every resource of
//! `tests/difference/resources.json` (create, list with selectors, update,
//! the four patch types, apply with conflicts, delete with each
//! propagation policy and preconditions, deletecollection, watch from a
//! version, status and scale), the seeds of the `apiserver_request` fuzz
//! target, and the files of `tests/difference/sequences/`. Each request's
//! status code, `Content-Type`, `Warning` and `Retry-After`, and body are
//! compared. A sequence is identical when every answer is.
//!
//! `tests/difference/known.json` lists the differences kept on purpose,
//! each with its reason. The tool prints a table per resource and verb and
//! the figure (sequences identical / all), and fails on a difference not
//! listed, or a listed one that no longer differs.
//!
//! `--fuzz N` sends N mutants of the generated sequences instead
//! ([`mutate`]): each difference not listed is a finding, printed with its
//! sequence; the figure is mutants identical / all. `--record-kubectl`
//! writes the kubectl scenarios' sequences ([`record`]).

mod mutate;
mod namespace;
mod normalise;
mod record;
mod sequence;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use http_body_util::BodyExt as _;
use kubewasm_tests::{Apiserver, workspace_root};
use serde_json::Value;

use sequence::{PROTOBUF, Resource, Sequence, Step};

/// How long a request may take, its body read.
const ANSWER: Duration = Duration::from_secs(30);

/// Sequences run at once (each in its namespace).
const PARALLEL: usize = 8;

/// How long an object's resourceVersion stays put before the controllers
/// are taken to be done with it.
const QUIET: Duration = Duration::from_millis(750);

/// How long an object may keep changing before the sequence goes on.
const SETTLE_AT_MOST: Duration = Duration::from_secs(10);

/// One answer, as compared.
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    status: u16,
    content_type: String,
    warning: String,
    retry_after: String,
    body: Value,
    /// `metadata.resourceVersion` and `metadata.uid` of the body, for the
    /// placeholders of later requests.
    rv: String,
    uid: String,
}

/// A server and what its requests need.
struct Target {
    client: kube::Client,
}

impl Target {
    async fn new(server: &Apiserver) -> anyhow::Result<Self> {
        Ok(Self {
            client: server.client().await?,
        })
    }

    async fn send(&self, step: &Step, ns: &str, answers: &[Answer]) -> anyhow::Result<Answer> {
        let fill = |text: &str| fill(text, ns, answers);
        let mut target = fill(&step.target);
        if target.contains("watch=") && !target.contains("timeoutSeconds=") {
            // A watch ends, so that its events can be compared.
            target.push_str("&timeoutSeconds=1");
        }
        let mut request = http::Request::builder()
            .method(step.method.as_str())
            .uri(as_uri(&target));
        if !step.content_type.is_empty() {
            request = request.header(http::header::CONTENT_TYPE, &step.content_type);
        }
        if !step.accept.is_empty() {
            request = request.header(http::header::ACCEPT, &step.accept);
        }
        let body = if step.protobuf() {
            step.body.clone()
        } else {
            fill(&String::from_utf8_lossy(&step.body)).into_bytes()
        };
        let request = request.body(kube::client::Body::from(body))?;
        let response = tokio::time::timeout(ANSWER, self.client.send(request))
            .await
            .context("no answer in 30 s")??;
        let (status, content_type, warning, retry_after) = {
            let header = |name: http::header::HeaderName| {
                response
                    .headers()
                    .get_all(name)
                    .iter()
                    .map(|v| v.to_str().unwrap_or_default().to_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            (
                response.status().as_u16(),
                header(http::header::CONTENT_TYPE),
                header(http::header::WARNING),
                header(http::header::RETRY_AFTER),
            )
        };
        let bytes = tokio::time::timeout(ANSWER, response.into_body().collect())
            .await
            .context("no whole body in 30 s")??
            .to_bytes();
        // A protobuf answer is compared as the JSON it carries (its
        // Content-Type still compared).
        let bytes = if content_type.starts_with(PROTOBUF) {
            protobuf_as_json(&bytes).into()
        } else {
            bytes
        };
        let raw: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let text = |pointer: &str| {
            raw.pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Ok(Answer {
            status,
            content_type,
            warning,
            retry_after: if retry_after.is_empty() {
                String::new()
            } else {
                "<set>".to_owned()
            },
            body: normalise::body(&bytes),
            rv: text("/metadata/resourceVersion"),
            uid: text("/metadata/uid"),
        })
    }

    /// Runs a sequence in namespace `ns`: every answer. After each write
    /// that succeeds, the object written is let [`settle`](Self::settle).
    async fn run(&self, sequence: &Sequence, ns: &str) -> anyhow::Result<Vec<Answer>> {
        let mut answers: Vec<Answer> = Vec::new();
        for step in &sequence.steps {
            let answer = self.send(step, ns, &answers).await?;
            for path in written(step, &answer, ns) {
                self.settle(&path).await?;
            }
            answers.push(answer);
        }
        Ok(answers)
    }

    /// Waits until the object at `path` is left alone by the controllers
    /// (its resourceVersion unchanged for [`QUIET`] and not being deleted,
    /// or it is gone), so that the next request sees what a client sees
    /// once they have acted, not how far each has got: a real controller
    /// writes a moment after the request that woke it, a simulated one
    /// sooner, and which one a read catches is a race, not a property of
    /// either server.
    async fn settle(&self, path: &str) -> anyhow::Result<()> {
        let read = Step {
            method: "GET".into(),
            target: path.to_owned(),
            content_type: String::new(),
            accept: String::new(),
            body: Vec::new(),
        };
        let started = tokio::time::Instant::now();
        let (mut seen, mut since) = (None, started);
        while started.elapsed() < SETTLE_AT_MOST {
            let answer = self.send(&read, "", &[]).await?;
            if answer.status == 404 {
                return Ok(());
            }
            let deleting = answer.body.pointer("/metadata/deletionTimestamp").is_some();
            if seen.as_ref() != Some(&answer.rv) {
                (seen, since) = (Some(answer.rv), tokio::time::Instant::now());
            } else if since.elapsed() >= QUIET && !deleting {
                return Ok(());
            }
            tokio::time::sleep(QUIET / 5).await;
        }
        Ok(())
    }

    /// Creates namespace `ns` and waits for its `default` ServiceAccount.
    async fn namespace(&self, ns: &str) -> anyhow::Result<()> {
        namespace::create(&self.client, ns).await
    }
}

/// The objects a step wrote (a write that succeeded, not a dry run): their
/// paths, placeholders filled.
fn written(step: &Step, answer: &Answer, ns: &str) -> Vec<String> {
    if step.method == "GET"
        || !(200..300).contains(&answer.status)
        || step.target.contains("dryRun")
    {
        return Vec::new();
    }
    let path = fill(step.target.split('?').next().unwrap_or_default(), ns, &[]);
    let path = path
        .strip_suffix("/status")
        .or_else(|| path.strip_suffix("/scale"))
        .unwrap_or(&path);
    let name = |object: &Value| {
        object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(|name| format!("{path}/{name}"))
    };
    match (step.method.as_str(), answer.body.get("items")) {
        ("POST", _) => name(&answer.body).into_iter().collect(),
        // A collection's delete answers the list it deleted.
        ("DELETE", Some(Value::Array(items))) => items.iter().filter_map(name).collect(),
        _ => vec![path.to_owned()],
    }
}

/// A request's text with its placeholders filled.
fn fill(text: &str, ns: &str, answers: &[Answer]) -> String {
    let last = |field: fn(&Answer) -> &str| {
        answers
            .iter()
            .rev()
            .map(field)
            .find(|v| !v.is_empty())
            .unwrap_or_default()
            .to_owned()
    };
    let mut out = text
        .replace("{ns}", ns)
        .replace("{rv}", &last(|a| &a.rv))
        .replace("{uid}", &last(|a| &a.uid));
    for (i, answer) in answers.iter().enumerate() {
        out = out
            .replace(&format!("{{rv:{i}}}"), &answer.rv)
            .replace(&format!("{{uid:{i}}}"), &answer.uid);
    }
    out
}

/// How one sequence compared.
#[derive(Debug)]
enum Verdict {
    Identical,
    /// The first request answered differently, and how.
    Differs {
        step: usize,
        what: String,
    },
}

/// A protobuf answer as the JSON its server writes for the same object:
/// decoded, then the fields Go's JSON encoder writes for a zero value set
/// as it writes them (an Event's `eventTime: null`), with the defaults a
/// served object already has; an undecodable one as its error.
fn protobuf_as_json(bytes: &[u8]) -> Vec<u8> {
    use kubewasm_apiserver::schema::{defaults, protobuf};
    let mut value = match protobuf::decode(bytes) {
        Ok(value) => value,
        Err(error) => return Value::String(error.to_string()).to_string().into_bytes(),
    };
    let text = |field: &str| value[field].as_str().unwrap_or_default().to_owned();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    match kind.strip_suffix("List") {
        Some(item) => {
            // The wire has no empty list; a server's lists always hold one.
            if value.get("items").is_none() {
                value["items"] = Value::Array(Vec::new());
            }
            for object in value["items"].as_array_mut().into_iter().flatten() {
                defaults::apply(&api_version, item, object);
            }
        }
        None => defaults::apply(&api_version, &kind, &mut value),
    }
    value.to_string().into_bytes()
}

/// Compares two sequences' answers, the `masks` (fields kept different on
/// purpose) left out of their bodies or headers: the verdict, and whether
/// a mask hid a difference.
fn compare(embedded: &[Answer], real: &[Answer], masks: &[&str]) -> (Verdict, bool) {
    let mut masked = false;
    for (step, (e, r)) in embedded.iter().zip(real).enumerate() {
        let (mut ours, mut theirs) = (e.body.clone(), r.body.clone());
        for mask in masks {
            normalise::without(&mut ours, mask);
            normalise::without(&mut theirs, mask);
        }
        let body = normalise::first_difference(&ours, &theirs);
        masked |= body.is_none() && normalise::first_difference(&e.body, &r.body).is_some();
        // A header listed by its name: its values are not compared.
        let content_type = e.content_type != r.content_type;
        let content_type_listed = masks.iter().any(|m| m.eq_ignore_ascii_case("Content-Type"));
        masked |= content_type && content_type_listed;
        let what = if e.status != r.status {
            format!("status {} (real {})", e.status, r.status)
        } else if content_type && !content_type_listed {
            format!(
                "Content-Type {:?} (real {:?})",
                e.content_type, r.content_type
            )
        } else if e.warning != r.warning {
            format!("Warning {:?} (real {:?})", e.warning, r.warning)
        } else if e.retry_after != r.retry_after {
            format!("Retry-After {:?} (real {:?})", e.retry_after, r.retry_after)
        } else if let Some((pointer, ours, theirs)) = body {
            format!("body at {pointer:?}: {ours} (real {theirs})")
        } else {
            continue;
        };
        return (Verdict::Differs { step, what }, masked);
    }
    (Verdict::Identical, masked)
}

/// A difference kept on purpose (`tests/difference/known.json`).
#[derive(Debug, serde::Deserialize)]
struct Known {
    /// A sequence's name, or `resource/*`, `*/verb`.
    sequence: String,
    /// The one field that differs (a JSON pointer into an object, in an
    /// answer, a list's items or a watch's events; or `Content-Type`, the
    /// header), the rest of the sequence compared; without it, the whole
    /// sequence is kept apart.
    #[serde(default)]
    field: Option<String>,
    reason: String,
}

impl Known {
    /// Whether it lists sequence `name` (a mutant's, `<base>~<n>`, as its
    /// base's).
    fn matches(&self, name: &str) -> bool {
        let name = name.split_once('~').map_or(name, |(base, _)| base);
        let (resource, verb) = name.split_once('/').unwrap_or((name, ""));
        match self.sequence.split_once('/') {
            Some(("*", v)) => v == verb,
            Some((r, "*")) => r == resource,
            _ => self.sequence == name,
        }
    }
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}", path.display()))
}

/// `target` as a client sends it: what a URI may not hold (a space, a
/// backslash, a quote a fuzzed seed has) percent-encoded.
fn as_uri(target: &str) -> String {
    let mut uri = String::with_capacity(target.len());
    for c in target.chars() {
        if c.is_ascii_alphanumeric() || "-._~:/?#[]@!$&'()*+,;=%".contains(c) {
            uri.push(c);
        } else {
            let mut bytes = [0; 4];
            for byte in c.encode_utf8(&mut bytes).bytes() {
                uri.push_str(&format!("%{byte:02X}"));
            }
        }
    }
    uri
}

/// Every sequence: generated, the fuzz seeds, the files.
fn sequences(resources: &[Resource]) -> anyhow::Result<Vec<Sequence>> {
    let mut all: Vec<Sequence> = resources
        .iter()
        .filter(|r| !r.setup)
        .flat_map(Resource::sequences)
        .collect();
    for (dir, prefix) in [
        ("fuzz/seeds/apiserver_request", "fuzz-seed"),
        ("tests/difference/sequences", "file"),
    ] {
        let mut files: Vec<_> = std::fs::read_dir(workspace_root().join(dir))
            .with_context(|| dir.to_owned())?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        files.sort();
        for file in files {
            let name = file
                .file_stem()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .trim_start_matches("seed-")
                .to_owned();
            let text = std::fs::read_to_string(&file)?;
            all.push(Sequence::parse(&format!("{prefix}/{name}"), &text));
        }
    }
    Ok(all)
}

struct Options {
    only: Option<String>,
    show: bool,
    markdown: Option<std::path::PathBuf>,
    /// Mutants to send instead of the sequences.
    fuzz: Option<usize>,
    seed: u64,
    /// Record kubectl's scenarios instead.
    record: bool,
}

const USAGE: &str = "usage: difference [--only PREFIX] [--show] [--markdown FILE] \
                     [--fuzz N [--seed S]] | --record-kubectl";

fn options() -> anyhow::Result<Options> {
    let mut options = Options {
        only: None,
        show: false,
        markdown: None,
        fuzz: None,
        seed: 1,
        record: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |what: &str| -> anyhow::Result<u64> {
            args.next()
                .and_then(|n| n.parse().ok())
                .with_context(|| format!("{what} takes a number: {USAGE}"))
        };
        match arg.as_str() {
            "--only" => options.only = args.next(),
            "--show" => options.show = true,
            "--markdown" => options.markdown = args.next().map(Into::into),
            "--fuzz" => options.fuzz = Some(usize::try_from(number("--fuzz")?)?),
            "--seed" => options.seed = number("--seed")?,
            "--record-kubectl" => options.record = true,
            other => anyhow::bail!("{other}: {USAGE}"),
        }
    }
    Ok(options)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let options = options()?;
    if options.record {
        return record::kubectl().await;
    }
    let root = workspace_root();
    let resources: Vec<Resource> = serde_json::from_value(
        read_json(&root.join("tests/difference/resources.json"))?["resources"].clone(),
    )?;
    let known: Vec<Known> = serde_json::from_value(
        read_json(&root.join("tests/difference/known.json"))?["known"].clone(),
    )?;
    let mut all = sequences(&resources)?;
    if let Some(only) = &options.only {
        all.retain(|s| s.name.starts_with(only.as_str()));
    }
    if let Some(count) = options.fuzz {
        let bases: Vec<Sequence> = all.into_iter().filter(Sequence::generated).collect();
        eprintln!(
            "difference: {count} mutants of {} sequences, seed {}",
            bases.len(),
            options.seed
        );
        all = mutate::mutants(&bases, count, &mut mutate::Rng::new(options.seed));
    }

    eprintln!("difference: starting the embedded server and the real control plane");
    let embedded_server = Apiserver::start_embedded(&[
        "--simulate-workloads",
        "--nodes",
        "3",
        // kwok's `fast` stages make Pods ready at once.
        "--pod-step-ms",
        "100",
    ]);
    let real_server = Apiserver::start_real(&["--nodes", "3"]);
    let embedded = Target::new(&embedded_server).await?;
    let real = Target::new(&real_server).await?;
    for resource in resources.iter().filter(|r| r.setup) {
        let setup = Sequence {
            name: "setup".to_owned(),
            steps: vec![resource.setup_step()],
        };
        let (e, r) = tokio::join!(embedded.run(&setup, ""), real.run(&setup, ""));
        anyhow::ensure!(e?[0].status == 201 && r?[0].status == 201, "setup failed");
    }
    // Custom resources are served once established.
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Generated sequences meet nowhere and run at once; seeds and files may
    // share names (the `default` namespace), so they run one by one after.
    let (generated, rest): (Vec<_>, Vec<_>) = all.into_iter().partition(Sequence::generated);
    let targets = std::sync::Arc::new((embedded, real));
    let known = std::sync::Arc::new(known);
    let mut verdicts = run_all(&targets, &known, generated, 0, PARALLEL, options.show).await?;
    let offset = verdicts.len();
    verdicts.extend(run_all(&targets, &known, rest, offset, 1, options.show).await?);
    report(
        &verdicts,
        &known,
        options.markdown.as_deref(),
        options.fuzz.is_some(),
    )
}

/// What a sequence's run gave: the sequence, its verdict, and whether a
/// listed field hid a difference.
type Run = (Sequence, Verdict, bool);

/// Runs `sequences` on both servers, `parallel` at a time, sequence `i`
/// in namespace `diff-<offset + i>`: each one's verdict, in order.
async fn run_all(
    targets: &std::sync::Arc<(Target, Target)>,
    known: &std::sync::Arc<Vec<Known>>,
    sequences: Vec<Sequence>,
    offset: usize,
    parallel: usize,
    show: bool,
) -> anyhow::Result<Vec<Run>> {
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(parallel));
    let mut running = tokio::task::JoinSet::new();
    for (i, sequence) in sequences.into_iter().enumerate() {
        let (targets, permits, known) = (targets.clone(), permits.clone(), known.clone());
        running.spawn(async move {
            let _permit = permits.acquire_owned().await?;
            let (embedded, real) = (&targets.0, &targets.1);
            // A file's sequence runs in the namespace it was written for
            // (its name: a recorded protobuf body names it).
            let ns = match sequence.name.strip_prefix("file/") {
                Some(stem) => stem.to_owned(),
                None => format!("diff-{}", offset + i),
            };
            let (e, r) = tokio::join!(embedded.namespace(&ns), real.namespace(&ns));
            e?;
            r?;
            let (e, r) = tokio::join!(embedded.run(&sequence, &ns), real.run(&sequence, &ns));
            let (e, r) = (e?, r?);
            let masks: Vec<&str> = known
                .iter()
                .filter(|k| k.matches(&sequence.name))
                .filter_map(|k| k.field.as_deref())
                .collect();
            let (verdict, masked) = compare(&e, &r, &masks);
            if show && let Verdict::Differs { step, what } = &verdict {
                let mut text = format!("--- {} (in {ns}), request {step}: {what}\n", sequence.name);
                text += &format!(
                    "    {} {}\n",
                    sequence.steps[*step].method, sequence.steps[*step].target
                );
                text += &format!(
                    "    embedded: {}\n    real:     {}\n",
                    e[*step].body, r[*step].body
                );
                text += "    the sequence (a file of tests/difference/sequences/ replays it):\n";
                for line in sequence.text().lines() {
                    text += &format!("    | {line}\n");
                }
                print!("{text}");
            }
            anyhow::Ok((i, sequence, verdict, masked))
        });
    }
    let mut done = Vec::new();
    while let Some(finished) = running.join_next().await {
        done.push(finished??);
    }
    done.sort_by_key(|(i, ..)| *i);
    Ok(done.into_iter().map(|(_, s, v, m)| (s, v, m)).collect())
}

/// The table, the figure, and the verdict on the listed differences.
/// Prints the table (not for mutants: their findings are the point) and
/// the figure; fails on a difference not listed and, but for mutants, on a
/// listed one gone.
fn report(
    verdicts: &[Run],
    known: &[Known],
    markdown: Option<&Path>,
    mutants: bool,
) -> anyhow::Result<()> {
    let mut table: BTreeMap<String, BTreeMap<String, &'static str>> = BTreeMap::new();
    let mut verbs: Vec<String> = Vec::new();
    let mut others: Vec<(String, &str)> = Vec::new();
    let (mut identical, mut but_listed, mut unlisted, mut stale) = (0, 0, Vec::new(), Vec::new());
    for (sequence, verdict, masked) in verdicts {
        let listed = known
            .iter()
            .find(|k| k.field.is_none() && k.matches(&sequence.name));
        let cell = match (verdict, listed) {
            (Verdict::Identical, None) => {
                identical += 1;
                if *masked {
                    but_listed += 1;
                    "=*"
                } else {
                    "="
                }
            }
            (Verdict::Identical, Some(_)) => {
                identical += 1;
                stale.push(sequence.name.clone());
                "="
            }
            (Verdict::Differs { .. }, Some(_)) => "listed",
            (Verdict::Differs { step, what }, None) => {
                unlisted.push(format!("{} (request {step}): {what}", sequence.name));
                "DIFFERS"
            }
        };
        if !sequence.generated() {
            others.push((sequence.name.clone(), cell));
            continue;
        }
        if !verbs.iter().any(|v| v == sequence.verb()) {
            verbs.push(sequence.verb().to_owned());
        }
        table
            .entry(sequence.resource().to_owned())
            .or_default()
            .insert(sequence.verb().to_owned(), cell);
    }
    let columns: Vec<&str> = verbs.iter().map(String::as_str).collect();
    let mut text = format!(
        "| resource | {} |\n|---|{}\n",
        columns.join(" | "),
        "---|".repeat(columns.len())
    );
    for (resource, cells) in &table {
        let row: Vec<&str> = columns
            .iter()
            .map(|v| cells.get(*v).copied().unwrap_or(""))
            .collect();
        text.push_str(&format!("| {resource} | {} |\n", row.join(" | ")));
    }
    for (name, cell) in &others {
        text.push_str(&format!("\n- {name}: {cell}"));
    }
    if mutants {
        text.clear();
    }
    // A listed field that hid nothing anywhere is gone.
    for k in known.iter().filter(|k| k.field.is_some() && !mutants) {
        let hid = verdicts
            .iter()
            .any(|(sequence, _, masked)| *masked && k.matches(&sequence.name));
        if !hid {
            stale.push(format!(
                "{} {}",
                k.sequence,
                k.field.as_deref().unwrap_or("")
            ));
        }
    }
    let total = verdicts.len();
    let figure = format!(
        "{identical} of {total} sequences identical ({:.1}%; {but_listed} of them but for a listed field, `=*`)",
        identical as f64 * 100.0 / total.max(1) as f64
    );
    println!("{text}\n\n{figure}");
    for line in &unlisted {
        println!("not listed: {line}");
    }
    for name in &stale {
        println!("listed but identical now: {name}");
    }
    if let Some(path) = markdown {
        let reasons: String = known
            .iter()
            .map(|k| match &k.field {
                Some(field) => format!("- `{}` `{field}`: {}\n", k.sequence, k.reason),
                None => format!("- `{}`: {}\n", k.sequence, k.reason),
            })
            .collect();
        std::fs::write(
            path,
            format!("{text}\n\n{figure}\n\nListed differences:\n{reasons}"),
        )?;
    }
    anyhow::ensure!(
        unlisted.is_empty() && stale.is_empty(),
        "{} differences not listed in tests/difference/known.json, {} listed ones gone",
        unlisted.len(),
        stale.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_target_should_be_sent_as_a_client_encodes_it() {
        assert_eq!(
            super::as_uri("/api/v1/conf\\gmaps?labelSelector=a b&x='0x0'"),
            "/api/v1/conf%5Cgmaps?labelSelector=a%20b&x='0x0'"
        );
    }

    use super::*;

    fn answer(status: u16, body: Value) -> Answer {
        Answer {
            status,
            content_type: String::new(),
            warning: String::new(),
            retry_after: String::new(),
            body,
            rv: String::new(),
            uid: String::new(),
        }
    }

    fn step(method: &str, target: &str) -> Step {
        Step {
            method: method.into(),
            target: target.into(),
            content_type: String::new(),
            accept: String::new(),
            body: Vec::new(),
        }
    }

    #[test]
    fn the_objects_a_write_names_should_be_the_ones_let_settle() {
        let c = "/api/v1/namespaces/{ns}/configmaps";
        let created = answer(201, serde_json::json!({"metadata": {"name": "a"}}));
        assert_eq!(
            written(&step("POST", c), &created, "n"),
            ["/api/v1/namespaces/n/configmaps/a"]
        );
        let listed = answer(
            200,
            serde_json::json!({"items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}),
        );
        assert_eq!(
            written(
                &step("DELETE", &format!("{c}?labelSelector=x")),
                &listed,
                "n"
            ),
            [
                "/api/v1/namespaces/n/configmaps/a",
                "/api/v1/namespaces/n/configmaps/b"
            ]
        );
        let patched = answer(200, serde_json::json!({}));
        assert_eq!(
            written(&step("PATCH", &format!("{c}/a/status")), &patched, "n"),
            ["/api/v1/namespaces/n/configmaps/a"]
        );
        assert!(
            written(
                &step("PATCH", &format!("{c}/a")),
                &answer(409, Value::Null),
                "n"
            )
            .is_empty()
        );
        assert!(written(&step("DELETE", &format!("{c}/a?dryRun=All")), &patched, "n").is_empty());
        assert!(written(&step("GET", c), &listed, "n").is_empty());
    }
}
