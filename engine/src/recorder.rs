//! `kubewasm run --record DIR`: every reconcile of the plugins recorded, as
//! a fixture `kubewasm replay --fixture` runs again byte for byte
//! ([`kubewasm_runtime::fixture`]).
//!
//! # Layout and bounds
//! One directory per plugin under `DIR`, one JSON file per step that ran
//! (`<nanoseconds since the epoch>-<namespace>.<name>.json`, so that names
//! sort by time). Per plugin at most [`RecordOptions::max_files`] files and
//! [`RecordOptions::max_bytes`] bytes are kept: the oldest go first,
//! counting what an earlier run left there. A fixture that cannot be
//! written is logged and the step goes on: recording never fails a
//! reconcile.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use kubewasm_runtime::fixture::Fixture;

/// What `--record` asks for.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// Where fixtures go.
    pub dir: PathBuf,
    /// The plugins recorded (`None`: all).
    pub plugins: Option<BTreeSet<String>>,
    /// Files kept per plugin.
    pub max_files: usize,
    /// Bytes kept per plugin.
    pub max_bytes: u64,
    /// Keep Secrets' values (else redacted).
    pub secrets: bool,
}

/// Why a fixture was not written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file could not be written.
    #[error("failed to write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The fixture could not be encoded.
    #[error("failed to encode a fixture: {0}")]
    Encode(#[source] serde_json::Error),
}

/// The files kept of one plugin, oldest first.
#[derive(Default)]
struct Kept {
    files: VecDeque<(PathBuf, u64)>,
    bytes: u64,
}

/// Writes fixtures as [`RecordOptions`] say (see the module
/// documentation).
pub struct Recorder {
    options: RecordOptions,
    kept: Mutex<HashMap<String, Kept>>,
}

impl Recorder {
    /// A recorder writing under `options.dir`.
    pub fn new(options: RecordOptions) -> Self {
        Self {
            options,
            kept: Mutex::default(),
        }
    }

    /// Whether the plugin `name` is recorded.
    pub fn records(&self, name: &str) -> bool {
        self.options
            .plugins
            .as_ref()
            .is_none_or(|plugins| plugins.contains(name))
    }

    /// Whether Secrets' values are kept.
    pub fn secrets(&self) -> bool {
        self.options.secrets
    }

    /// The files a plugin's directory holds already, oldest first; a
    /// fixture half-written by a host killed before its rename
    /// (`.json.partial`) is removed.
    fn scan(dir: &std::path::Path) -> Kept {
        let entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        for partial in entries
            .iter()
            .filter(|p| p.extension().is_some_and(|x| x == "partial"))
        {
            if let Err(error) = std::fs::remove_file(partial) {
                tracing::debug!(path = %partial.display(), %error, "half-written fixture not removed");
            }
        }
        let mut files: Vec<(PathBuf, u64)> = entries
            .into_iter()
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .filter_map(|p| {
                let size = p.metadata().ok()?.len();
                Some((p, size))
            })
            .collect();
        files.sort();
        Kept {
            bytes: files.iter().map(|(_, size)| size).sum(),
            files: files.into(),
        }
    }

    /// Writes `fixture`, then drops the plugin's oldest files beyond the
    /// bounds; the file written.
    ///
    /// # Errors
    /// [`RecordError`] when it could not be written.
    pub fn write(&self, fixture: &Fixture) -> Result<PathBuf, RecordError> {
        let dir = self.options.dir.join(&fixture.plugin);
        let failed = |path: &PathBuf| {
            let path = path.clone();
            move |source| RecordError::Write { path, source }
        };
        std::fs::create_dir_all(&dir).map_err(failed(&dir))?;
        let text = serde_json::to_vec_pretty(fixture).map_err(RecordError::Encode)?;
        let nanos = jiff::Timestamp::now().as_nanosecond();
        let path = dir.join(format!(
            "{nanos:020}-{}.json",
            fixture.key.replace('/', ".")
        ));
        // Written beside and renamed: a host killed mid-write leaves no
        // truncated fixture under a fixture's name.
        let partial = path.with_extension("json.partial");
        std::fs::write(&partial, &text).map_err(failed(&partial))?;
        std::fs::rename(&partial, &path).map_err(failed(&path))?;
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = kept
            .entry(fixture.plugin.clone())
            .or_insert_with(|| Self::scan(&dir));
        if !kept.files.iter().any(|(p, _)| *p == path) {
            let size = text.len() as u64;
            kept.files.push_back((path.clone(), size));
            kept.bytes += size;
        }
        while kept.files.len() > self.options.max_files.max(1)
            || (kept.bytes > self.options.max_bytes && kept.files.len() > 1)
        {
            let Some((oldest, size)) = kept.files.pop_front() else {
                break;
            };
            kept.bytes = kept.bytes.saturating_sub(size);
            if let Err(error) = std::fs::remove_file(&oldest) {
                tracing::debug!(path = %oldest.display(), %error, "old fixture not removed");
            }
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(key: &str, padding: usize) -> Fixture {
        Fixture {
            plugin: "p".into(),
            digest: "d".into(),
            key: key.into(),
            now: jiff::Timestamp::UNIX_EPOCH,
            config: serde_json::json!({"padding": "x".repeat(padding)}),
            retries: 0,
            last_failure: None,
            released: false,
            namespaces: None,
            types: Vec::new(),
            objects: Vec::new(),
            report: None,
            failure: None,
        }
    }

    fn files(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.join("p"))
            .expect("dir")
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_oldest_fixtures_should_go_beyond_the_count_or_the_bytes() {
        let dir = tempfile::tempdir().expect("dir");
        let options = RecordOptions {
            dir: dir.path().to_owned(),
            plugins: Some(["p".to_owned()].into()),
            max_files: 3,
            max_bytes: 1 << 20,
            secrets: false,
        };
        let recorder = Recorder::new(options.clone());
        assert!(recorder.records("p") && !recorder.records("q"));
        for i in 0..5 {
            recorder
                .write(&fixture(&format!("ns/k{i}"), 0))
                .expect("written");
        }
        let names = files(dir.path());
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(
            names[0].ends_with("ns.k2.json"),
            "the oldest went: {names:?}"
        );
        // A new recorder counts what an earlier run left and removes what
        // a kill left half-written; bytes bound too.
        std::fs::write(dir.path().join("p/0-ns.killed.json.partial"), "{\"plu").expect("written");
        let recorder = Recorder::new(RecordOptions {
            max_files: 100,
            max_bytes: 2_300,
            ..options
        });
        recorder.write(&fixture("ns/big", 2_000)).expect("written");
        let names = files(dir.path());
        assert_eq!(names.len(), 1, "the big one alone fits: {names:?}");
        assert!(names[0].ends_with("ns.big.json"), "{names:?}");
    }
}
