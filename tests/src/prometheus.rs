//! A real Prometheus for the tests: Debian's `prometheus` (2.42), on a free
//! loopback port with a configuration of its own (never Debian's service),
//! scraping the targets it is given every second (each as a job of its
//! own, its `job` label its own), and evaluating rule
//! files every second, its storage in a temporary directory, stopped when
//! dropped.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::host::http_get;

/// The server's binary.
const BINARY: &str = "prometheus";

/// A scrape target: `127.0.0.1:PORT` and the labels Prometheus gives its
/// series (`job`, `namespace`, `pod`, as a Kubernetes service discovery
/// would).
pub struct Target<'a> {
    /// Where `/metrics` is served.
    pub addr: &'a str,
    /// The target's labels.
    pub labels: &'a [(&'a str, &'a str)],
    /// Scraped over HTTPS (its certificate not verified: a self-signed
    /// one) with this bearer token.
    pub token: Option<&'a str>,
}

/// A running Prometheus, killed on drop.
pub struct Prometheus {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts one scraping `targets` and evaluating `rules` (rule files),
    /// and waits until it is ready.
    ///
    /// # Panics
    /// If `prometheus` is not installed (`.ci/setup` installs it) or is
    /// not ready within 30 s.
    pub fn start(targets: &[Target<'_>], rules: &[&Path]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let addr = format!("127.0.0.1:{port}");
        let scrape: Vec<Value> = targets
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let labels: serde_json::Map<String, Value> = t
                    .labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
                    .collect();
                let mut config = serde_json::json!({"job_name": format!("target-{i}"),
                    "static_configs": [{"targets": [t.addr], "labels": labels}]});
                if let Some(token) = t.token {
                    config["scheme"] = Value::from("https");
                    config["tls_config"] = serde_json::json!({"insecure_skip_verify": true});
                    config["authorization"] =
                        serde_json::json!({"type": "Bearer", "credentials": token});
                }
                config
            })
            .collect();
        // JSON is YAML: the configuration is written as JSON.
        let config = serde_json::json!({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
            "rule_files": rules.iter().map(|r| r.display().to_string()).collect::<Vec<_>>(),
            "scrape_configs": scrape,
        });
        let file = dir.path().join("prometheus.yml");
        std::fs::write(&file, config.to_string()).expect("config written");
        let child = Command::new(BINARY)
            .arg(format!("--config.file={}", file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).expect("log"))
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{BINARY} does not start ({e}): install it (.ci/setup does, as root)")
            });
        let prometheus = Self { child, addr, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(&prometheus.addr).is_err()
            || !http_get(&prometheus.addr, "/-/ready").0.contains("200")
        {
            assert!(
                Instant::now() < deadline,
                "{BINARY} not ready after 30 s: {}",
                prometheus.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        prometheus
    }

    /// What it logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// `GET /api/v1/PATH`'s `data`.
    ///
    /// # Panics
    /// If the answer is not a successful API response.
    pub fn api(&self, path_and_query: &str) -> Value {
        let (status, body) = http_get(&self.addr, &format!("/api/v1/{path_and_query}"));
        let answer: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{path_and_query}: {status}: {e}: {body}"));
        assert_eq!(
            answer["status"], "success",
            "{path_and_query}: {status}: {body}"
        );
        answer["data"].clone()
    }

    /// The series an instant query returns now: each one's labels and
    /// value.
    pub fn query(&self, expr: &str) -> Vec<(Value, f64)> {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("query", expr)
            .finish();
        let data = self.api(&format!("query?{query}"));
        data["result"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|series| {
                let value = series["value"][1]
                    .as_str()
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(f64::NAN);
                (series["metric"].clone(), value)
            })
            .collect()
    }

    /// The alerts pending or firing now: each one's name and state.
    pub fn alerts(&self) -> Vec<(String, String)> {
        self.api("alerts")["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|alert| {
                (
                    alert["labels"]["alertname"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    alert["state"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// Every rule loaded: its name and health (`ok`, `err`, `unknown`),
    /// with the last evaluation's error.
    pub fn rules(&self) -> Vec<(String, String, String)> {
        let data = self.api("rules");
        data["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|group| group["rules"].as_array().cloned().unwrap_or_default())
            .map(|rule| {
                let text = |field: &str| rule[field].as_str().unwrap_or_default().to_owned();
                (text("name"), text("health"), text("lastError"))
            })
            .collect()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
