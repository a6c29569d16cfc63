//! kubewasm beside the controllers the field runs: the MyApp operator as
//! the `kubewasm run` binary with the `myapp` component, as a native
//! kube-runtime controller and as a controller-runtime manager (Go), each
//! a process of its own against a fresh API server (the embedded one, and
//! the real control plane of `tests/real-cluster`), N MyApps created before
//! it starts. Measured from outside each process: the time until every
//! MyApp's status reports its Deployment, its CPU time and peak resident
//! memory until then (`/proc`), and the API requests it sent, counted by a
//! proxy every driver talks through.
//!
//! The MyApps ask for zero replicas, so that a real cluster's simulated
//! Pods (kwok, on the same two cores) are not what is measured: converged is
//! `Available` true, observed at the MyApp's generation.
//!
//! `make bench` runs it at the sizes of `KUBEWASM_BENCH_PEERS` (default
//! `embedded=1000,10000,100000;real=1000,10000`) with release builds and
//! writes its section and chart; `cargo test --all-targets` runs it small
//! (20 MyApps, the embedded server, debug builds), checking that all three
//! converge. `KUBEWASM_BENCH_PEERS_DRIVERS` (e.g. `kubewasm,kube-runtime`)
//! runs some drivers only, and then writes nothing.
//!
//! Beside it, many controllers over one cluster's ConfigMaps
//! (`KUBEWASM_BENCH_PEERS_MANY`, `50:10000` under `make bench`, `0` for
//! none): one kubewasm host running 50 `configmap-replicator`s against 50
//! controller-runtime managers of the same logic, their resident memory
//! once each reconciled every ConfigMap.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::Api;
use kubewasm_tests::bench::{is_real_run, ms, out_path, until, write_section};
use kubewasm_tests::chart::{Axis, Line, Panel};
use kubewasm_tests::peers::{Driver, Usage, converged, create_myapps, rust_binary};
use kubewasm_tests::proxy::Proxy;
use kubewasm_tests::{Apiserver, workspace_root};
use myapp::MyApp;

/// Which API server a run is against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Server {
    Embedded,
    Real,
}

impl Server {
    fn name(self) -> &'static str {
        match self {
            Self::Embedded => "embedded",
            Self::Real => "real",
        }
    }

    /// The embedded server is the drivers' build of `kubewasm`.
    fn start(self, profile: &str) -> Apiserver {
        match self {
            Self::Embedded => {
                Apiserver::start_embedded_from(&rust_binary(profile, "kubewasm"), &[])
            }
            Self::Real => Apiserver::start_real(&[]),
        }
    }
}

/// What one driver did with `n` MyApps on one server.
#[derive(Debug, Clone)]
struct Run {
    server: Server,
    n: usize,
    driver: Driver,
    took: Duration,
    usage: Usage,
    requests: BTreeMap<&'static str, u64>,
}

impl Run {
    fn requests_per_app(&self) -> f64 {
        self.requests.values().sum::<u64>() as f64 / self.n as f64
    }

    fn writes_per_app(&self) -> f64 {
        let writes: u64 = ["create", "update", "apply", "patch", "delete"]
            .iter()
            .filter_map(|v| self.requests.get(v))
            .sum();
        writes as f64 / self.n as f64
    }

    fn mib(&self) -> f64 {
        self.usage.peak_rss_kib as f64 / 1024.0
    }
}

/// The sizes to run: `embedded=1000,10000;real=1000` (a server left out is
/// not run).
fn sizes(spec: &str) -> anyhow::Result<Vec<(Server, usize)>> {
    let mut all = Vec::new();
    for part in spec.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (server, ns) = part
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("{part}: expected SERVER=N,N"))?;
        let server = match server.trim() {
            "embedded" => Server::Embedded,
            "real" => Server::Real,
            other => anyhow::bail!("{other}: expected embedded or real"),
        };
        for n in ns.split(',') {
            all.push((server, n.trim().parse()?));
        }
    }
    Ok(all)
}

/// A client of `server` whose watches are never cut by a read timeout
/// (the proxy's upstream carries every driver's watches).
async fn upstream(server: &Apiserver) -> anyhow::Result<Client> {
    let mut config = server.config().await?;
    config.read_timeout = None;
    Ok(Client::try_from(config)?)
}

/// Installs MyApp's CRD and creates `n` MyApps asking for no replicas.
async fn install_and_create(client: &Client, n: usize) -> anyhow::Result<()> {
    kubewasm::cli::install_crds(client, &workspace_root().join("plugins").join("myapp")).await?;
    let apps: Api<MyApp> = Api::namespaced(client.clone(), "default");
    // A real server serves a new CRD's resource once it is established.
    let deadline = Instant::now() + Duration::from_secs(60);
    while apps
        .list(&kube::api::ListParams::default().limit(1))
        .await
        .is_err()
    {
        anyhow::ensure!(Instant::now() < deadline, "MyApps not served after 60 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    create_myapps(client, n, 0).await?;
    Ok(())
}

/// One driver over `n` MyApps on a fresh `server`.
async fn run(server: Server, n: usize, driver: Driver, profile: &str) -> anyhow::Result<Run> {
    let cluster = server.start(profile);
    let client = cluster.client().await?;
    eprintln!(
        "{} server, {}: creating {n} MyApps",
        server.name(),
        driver.name()
    );
    install_and_create(&client, n).await?;
    let proxy = Proxy::start(upstream(&cluster).await?).await?;
    let scratch = tempfile::tempdir()?;
    let kubeconfig = scratch.path().join("kubeconfig");
    std::fs::write(&kubeconfig, proxy.kubeconfig())?;
    let log = scratch.path().join("driver.log");
    let started = Instant::now();
    let mut process = driver.spawn(&kubeconfig, profile, scratch.path(), &log)?;
    // A bound far above any figure measured, so a driver that never
    // converges fails the run rather than hanging it.
    let bound = Duration::from_secs(120) + Duration::from_millis(500) * n as u32;
    let done = converged(&client, n, "ReplicasAvailable");
    tokio::pin!(done);
    loop {
        tokio::select! {
            result = &mut done => { result?; break; }
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                let log = || std::fs::read_to_string(&log).unwrap_or_default();
                anyhow::ensure!(process.running(), "{} exited: {}", driver.name(), log());
                anyhow::ensure!(started.elapsed() < bound,
                    "{} did not converge {n} MyApps in {}: {}", driver.name(), ms(bound), log());
            }
        }
    }
    let took = started.elapsed();
    let usage = process.usage();
    let requests = proxy.counts();
    drop(process);
    let run = Run {
        server,
        n,
        driver,
        took,
        usage,
        requests,
    };
    eprintln!(
        "{} server, {n} MyApps, {}: {} to converge, {} CPU, {:.1} MiB peak, \
         {:.2} requests and {:.2} writes a MyApp ({:?})",
        server.name(),
        driver.name(),
        ms(took),
        ms(usage.cpu),
        run.mib(),
        run.requests_per_app(),
        run.writes_per_app(),
        run.requests
    );
    Ok(run)
}

/// Many controllers over one cluster's ConfigMaps: one kubewasm host
/// running `plugins` `configmap-replicator`s, against as many
/// controller-runtime managers (one process each, the same logic), once
/// every controller has reconciled every one of `objects` ConfigMaps.
#[derive(Debug, Clone, Copy)]
struct Many {
    plugins: usize,
    objects: usize,
    /// kubewasm's resident and peak memory, KiB.
    kubewasm: (u64, u64),
    /// The managers' resident and peak memory, summed, KiB.
    managers: (u64, u64),
}

/// `KUBEWASM_BENCH_PEERS_MANY`: `PLUGINS:OBJECTS`, or `0` for none.
fn many_spec(real: bool) -> anyhow::Result<Option<(usize, usize)>> {
    let spec = std::env::var("KUBEWASM_BENCH_PEERS_MANY")
        .unwrap_or_else(|_| if real { "50:10000" } else { "3:30" }.into());
    if spec.trim() == "0" {
        return Ok(None);
    }
    let (plugins, objects) = spec.split_once(':').ok_or_else(|| {
        anyhow::anyhow!("KUBEWASM_BENCH_PEERS_MANY={spec}: expected PLUGINS:OBJECTS")
    })?;
    Ok(Some((plugins.trim().parse()?, objects.trim().parse()?)))
}

/// A port free on loopback now.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The sum of a counter's series in the `/metrics` of `port` having
/// `having` among their labels (0 if it does not answer yet).
fn scraped(port: u16, metric: &str, having: &str) -> f64 {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return 0.0;
    };
    let mut text = String::new();
    let asked = stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n");
    if asked.is_err() || stream.read_to_string(&mut text).is_err() {
        return 0.0;
    }
    kubewasm_tests::host::metric_total(&text, metric, having)
}

/// The many-controllers scenario (see [`Many`]) on a fresh embedded server.
fn many(plugins: usize, objects: usize, profile: &str) -> anyhow::Result<Many> {
    let server = Server::Embedded.start(profile);
    let items = kubewasm_tests::host::namespaced_config_maps(objects);
    kubewasm_tests::host::create_all(&server, items);
    // Every ConfigMap there is, the namespaces' own `kube-root-ca.crt` too.
    let objects = kubewasm_tests::host::get_json(&server, &["configmaps", "-A"])
        .and_then(|list| list["items"].as_array().map(Vec::len))
        .unwrap_or(objects);
    let limit = Duration::from_secs(60) + Duration::from_millis(2) * (plugins * objects) as u32;
    let names: Vec<String> = (0..plugins).map(|p| format!("replicator-{p:02}")).collect();

    let component = kubewasm_tests::example_plugin("configmap-replicator");
    let loaded: Vec<(&str, std::path::PathBuf)> = names
        .iter()
        .map(|n| (n.as_str(), component.clone()))
        .collect();
    let host = kubewasm_tests::host::Host::start_from(
        &rust_binary(profile, "kubewasm"),
        &server.kubeconfig,
        &loaded,
        &[],
        &[],
    );
    host.wait_ready();
    let all = (plugins * objects) as f64;
    until(
        "kubewasm's plugins reconcile every ConfigMap",
        limit,
        || {
            let metrics = host.get("/metrics").1;
            kubewasm_tests::host::metric_total(
                &metrics,
                "controller_runtime_reconcile_total",
                "result=\"success\"",
            ) >= all
        },
    )?;
    let kubewasm = (
        kubewasm_tests::rss_kib(host.pid()),
        Usage::of(host.pid()).peak_rss_kib,
    );
    drop(host);

    let binary = kubewasm_tests::peers::controller_runtime_built()?;
    let scratch = tempfile::tempdir()?;
    let mut managers = Vec::new();
    for name in &names {
        let port = free_port()?;
        let log = std::fs::File::create(scratch.path().join(format!("{name}.log")))?;
        let child = std::process::Command::new(&binary)
            .arg("--kubeconfig")
            .arg(&server.kubeconfig)
            .args(["--configmap-replicator", name])
            .args(["--metrics-bind-address", &format!("127.0.0.1:{port}")])
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        managers.push((name, port, kubewasm_tests::peers::Running::from(child)));
    }
    until("the managers reconcile every ConfigMap", limit, || {
        managers.iter().all(|(name, port, _)| {
            let having = format!("controller=\"{name}\",result=\"success\"");
            scraped(*port, "controller_runtime_reconcile_total", &having) >= objects as f64
        })
    })?;
    let managers = managers
        .iter()
        .fold((0, 0), |(rss, peak), (_, _, running)| {
            (
                rss + kubewasm_tests::rss_kib(running.pid()),
                peak + running.usage().peak_rss_kib,
            )
        });
    let many = Many {
        plugins,
        objects,
        kubewasm,
        managers,
    };
    eprintln!(
        "{plugins} controllers over {objects} ConfigMaps: kubewasm {} KiB resident ({} peak), \
         {plugins} controller-runtime managers {} KiB ({} peak): {:.3}",
        kubewasm.0,
        kubewasm.1,
        managers.0,
        managers.1,
        kubewasm.0 as f64 / managers.0.max(1) as f64
    );
    Ok(many)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let real = is_real_run();
    let spec = std::env::var("KUBEWASM_BENCH_PEERS").unwrap_or_else(|_| {
        if real {
            "embedded=1000,10000,100000;real=1000,10000".into()
        } else {
            "embedded=20".into()
        }
    });
    // `make bench` builds the release binaries; a small run uses the
    // test build's.
    let profile = if real { "release" } else { "debug" };
    let drivers = drivers()?;
    if drivers.contains(&Driver::ControllerRuntime) {
        kubewasm_tests::peers::controller_runtime_built()?;
    }
    let mut runs = Vec::new();
    for (round, (server, n)) in sizes(&spec)?.into_iter().enumerate() {
        // Each size starts with another driver, so drift hits all alike.
        let mut order = drivers.clone();
        order.rotate_left(round % drivers.len());
        for driver in order {
            runs.push(run(server, n, driver, profile).await?);
        }
    }
    let many = match many_spec(real)? {
        Some((plugins, objects))
            if drivers.contains(&Driver::Kubewasm)
                && drivers.contains(&Driver::ControllerRuntime) =>
        {
            Some(tokio::task::spawn_blocking(move || many(plugins, objects, profile)).await??)
        }
        _ => None,
    };
    let all = drivers.len() == Driver::ALL.len();
    if let Some(path) = out_path().filter(|_| real && all) {
        let chart = "docs/bench/peers.svg";
        kubewasm_tests::chart::write(chart, &panels(&runs), (520, 380))?;
        write_section(
            &path,
            "peers",
            "Peers: kubewasm, kube-runtime and controller-runtime on the same servers",
            "make bench (KUBEWASM_BENCH_PEERS=embedded=1000,10000,100000;real=1000,10000 by default)",
            &report(&runs, &spec, chart, many),
        )?;
    }
    Ok(())
}

/// The drivers named by `KUBEWASM_BENCH_PEERS_DRIVERS` (the first word of
/// their name in the table, comma-separated), or all three.
fn drivers() -> anyhow::Result<Vec<Driver>> {
    let Ok(names) = std::env::var("KUBEWASM_BENCH_PEERS_DRIVERS") else {
        return Ok(Driver::ALL.to_vec());
    };
    names
        .split(',')
        .map(|name| {
            Driver::ALL
                .into_iter()
                .find(|d| d.name().split(' ').next() == Some(name.trim()))
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "KUBEWASM_BENCH_PEERS_DRIVERS: no driver {name:?} \
                         (kubewasm, kube-runtime, controller-runtime)"
                    )
                })
        })
        .collect()
}

/// The section: a table per server and size, the ratios, the chart.
fn report(runs: &[Run], spec: &str, chart: &str, many: Option<Many>) -> String {
    let mut out = format!(
        "Each driver a process of its own (release builds; controller-runtime v0.25.3 with \
         client-go v0.37.2), two reconciles at a time, no client-side rate limit, children by \
         server-side apply under its own field manager and read from a watch-fed cache, \
         against a fresh API server with N MyApps (zero replicas) created before it starts: \
         the embedded server (`kubewasm apiserver`, the same build as the drivers) and the real control plane \
         (`tests/real-cluster/up`: Kubernetes 1.37.2, etcd, kube-controller-manager, kwok). \
         Converged: every MyApp's `Available` condition true at its generation. CPU and peak \
         resident memory (`VmHWM`) are the driver's own, read from `/proc` at that moment; \
         requests are every one it sent, counted by a loopback proxy all three talk through. \
         Sizes run: `{spec}`.\n\n\
         | server | MyApps | driver | converge in | CPU | peak memory | requests / MyApp | writes / MyApp |\n\
         |---|---|---|---|---|---|---|---|\n"
    );
    for r in runs {
        out += &format!(
            "| {} | {} | {} | {} | {} | {:.1} MiB | {:.2} | {:.2} |\n",
            r.server.name(),
            r.n,
            r.driver.name(),
            ms(r.took),
            ms(r.usage.cpu),
            r.mib(),
            r.requests_per_app(),
            r.writes_per_app()
        );
    }
    out += "\nkubewasm against each peer, same server and size (time to converge; peak memory):\n\n\
            | server | MyApps | / kube-runtime | / controller-runtime |\n|---|---|---|---|\n";
    let mut keys: Vec<(Server, usize)> = runs.iter().map(|r| (r.server, r.n)).collect();
    keys.dedup();
    for (server, n) in keys {
        let of = |d: Driver| {
            runs.iter()
                .find(|r| r.server == server && r.n == n && r.driver == d)
        };
        if let (Some(k), Some(kr), Some(cr)) = (
            of(Driver::Kubewasm),
            of(Driver::KubeRuntime),
            of(Driver::ControllerRuntime),
        ) {
            let ratio = |a: &Run, b: &Run| {
                format!(
                    "**{:.2}x**; {:.2}x",
                    a.took.as_secs_f64() / b.took.as_secs_f64(),
                    a.mib() / b.mib()
                )
            };
            out += &format!(
                "| {} | {n} | {} | {} |\n",
                server.name(),
                ratio(k, kr),
                ratio(k, cr)
            );
        }
    }
    out += &format!("\n![time and memory against MyApps]({chart})\n");
    if let Some(many) = many {
        let mib = |kib: u64| kib as f64 / 1024.0;
        out += &format!(
            "\nMany controllers over one cluster: {p} `configmap-replicator`s in one `kubewasm run` \
             (the JavaScript component under {p} names) against {p} controller-runtime managers, one \
             process each, running the same logic (`bench/peers/controller-runtime --configmap-replicator`), \
             over {o} ConfigMaps on the embedded server, measured once every controller reconciled every \
             ConfigMap: kubewasm **{:.1} MiB** resident ({:.1} MiB peak), the managers **{:.1} MiB** \
             together ({:.1} MiB peak): **{:.3}** of it (goal: at most 1/20, 0.05).\n",
            mib(many.kubewasm.0),
            mib(many.kubewasm.1),
            mib(many.managers.0),
            mib(many.managers.1),
            many.kubewasm.0 as f64 / many.managers.0.max(1) as f64,
            p = many.plugins,
            o = many.objects,
        );
    }
    out
}

/// Time to converge and peak memory against the number of MyApps, one
/// line per driver and server (the real control plane's dashed), both axes
/// logarithmic.
fn panels(runs: &[Run]) -> Vec<Panel> {
    let panel = |title: &str, unit: &str, value: &dyn Fn(&Run) -> f64| {
        let mut lines = Vec::new();
        for server in [Server::Embedded, Server::Real] {
            for (colour, driver) in Driver::ALL.into_iter().enumerate() {
                lines.push(Line {
                    name: format!("{} ({} server)", driver.name(), server.name()),
                    points: runs
                        .iter()
                        .filter(|r| r.server == server && r.driver == driver)
                        .map(|r| (r.n as f64, value(r)))
                        .collect(),
                    dashed: server == Server::Real,
                    colour,
                });
            }
        }
        Panel {
            title: title.to_owned(),
            x: Axis::log("MyApps"),
            y: Axis::log(unit),
            lines,
        }
    };
    vec![
        panel("Time to converge", "seconds", &|r| r.took.as_secs_f64()),
        panel("Peak memory", "MiB", &|r| r.mib()),
    ]
}
