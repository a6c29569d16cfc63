//! The plugin directory of `kubewasm run`: which plugins it holds, and what
//! changed since the last look.
//!
//! # Layout
//! A plugin `NAME` is the component `NAME.wasm`, or `NAME.oci`: a text
//! file whose first line is an OCI reference to it (`oci://REGISTRY/REPO:TAG`
//! or `@sha256:DIGEST`; `NAME.wasm` wins when both exist), with beside it the
//! operator's grants `NAME.grants.yaml` and its configuration
//! `NAME.config.yaml` (both optional to this module; the daemon says what a
//! missing grants file means).
//!
//! # Changes
//! [`scan`] reads the directory into a [`Listing`]: each plugin with a
//! fingerprint of its three files (inode, length and modification time of
//! each, or absent). [`Listing::changes`] compares two listings: plugins
//! added, changed (any of their three files), removed, in name order. A
//! file rewritten in place and one replaced by a rename both change the
//! fingerprint; a file caught half-written fails to load and is loaded
//! again once its writer finishes (its fingerprint changes once more).
//! Writing the new file beside and renaming it over the old one avoids even
//! that.
//!
//! # Watching
//! [`watch`] asks the kernel (inotify) to say when the directory changes,
//! so a caller rescans within milliseconds of a write, not at its next
//! periodic look; it only wakes the caller, which still compares listings
//! (a missed or spurious notification costs nothing but a rescan).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why the directory could not be read.
#[derive(Debug, thiserror::Error)]
#[error("failed to read the plugin directory {path}: {source}")]
pub struct ScanError {
    /// The directory.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// The files of one plugin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginFiles {
    /// Its name: the component's file name without `.wasm` (or `.oci`).
    pub name: String,
    /// `NAME.wasm`, or `NAME.oci`.
    pub component: PathBuf,
    /// `NAME.grants.yaml` (it may not exist).
    pub grants: PathBuf,
    /// `NAME.config.yaml` (it may not exist).
    pub config: PathBuf,
}

impl PluginFiles {
    /// Whether the component is named by an OCI reference (`NAME.oci`).
    pub fn is_reference(&self) -> bool {
        self.component.extension().is_some_and(|e| e == "oci")
    }

    fn of(component: PathBuf) -> Option<Self> {
        let name = component.file_stem()?.to_str()?.to_owned();
        Some(Self {
            grants: component.with_extension("grants.yaml"),
            config: component.with_extension("config.yaml"),
            name,
            component,
        })
    }

    fn fingerprint(&self) -> Fingerprint {
        let stamp = |path: &Path| {
            std::fs::metadata(path)
                .ok()
                .map(|m| (m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
        };
        Fingerprint([
            stamp(&self.component),
            stamp(&self.grants),
            stamp(&self.config),
        ])
    }
}

/// Inode, length and modification time of each of a plugin's files.
type Stamp = Option<(u64, u64, i64, i64)>;

/// What a plugin's files are at one look (inode, length and modification
/// time of each): two looks with equal fingerprints saw the same files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint([Stamp; 3]);

/// The plugins of a directory at one look, by name.
#[derive(Clone, Debug, Default)]
pub struct Listing(BTreeMap<String, (PluginFiles, Fingerprint)>);

/// What changed between two looks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A new plugin.
    Added(PluginFiles),
    /// A plugin whose component, grants or configuration changed.
    Changed(PluginFiles),
    /// A plugin whose component is gone.
    Removed(String),
}

impl Change {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Added(files) | Self::Changed(files) => &files.name,
            Self::Removed(name) => name,
        }
    }
}

impl Listing {
    /// The plugin `name`'s files and their fingerprint, if it is listed.
    pub fn get(&self, name: &str) -> Option<(&PluginFiles, &Fingerprint)> {
        self.0.get(name).map(|(files, print)| (files, print))
    }

    /// The plugins, in name order.
    pub fn plugins(&self) -> impl Iterator<Item = &PluginFiles> {
        self.0.values().map(|(files, _)| files)
    }

    /// What changed from `self` to `now`, in name order.
    pub fn changes(&self, now: &Self) -> Vec<Change> {
        let mut changes: Vec<(String, Change)> = now
            .0
            .iter()
            .filter_map(|(name, (files, print))| match self.0.get(name) {
                None => Some((name.clone(), Change::Added(files.clone()))),
                Some((_, was)) if was != print => {
                    Some((name.clone(), Change::Changed(files.clone())))
                }
                Some(_) => None,
            })
            .collect();
        changes.extend(
            self.0
                .keys()
                .filter(|name| !now.0.contains_key(*name))
                .map(|name| (name.clone(), Change::Removed(name.clone()))),
        );
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        changes.into_iter().map(|(_, change)| change).collect()
    }
}

/// A watch on a directory: [`Watch::changed`] returns after it changed.
pub struct Watch {
    _watcher: notify::RecommendedWatcher,
    changed: std::sync::Arc<tokio::sync::Notify>,
}

impl Watch {
    /// Returns once the directory changed since the last call (at once if
    /// it did meanwhile).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}

/// Watches `dir` for changes.
///
/// # Errors
/// [`notify::Error`] if the system refuses the watch (no inotify, too many
/// watches): the caller's periodic rescan is then all there is.
pub fn watch(dir: &Path) -> Result<Watch, notify::Error> {
    use notify::Watcher as _;
    let changed = std::sync::Arc::new(tokio::sync::Notify::new());
    let wake = std::sync::Arc::clone(&changed);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok_and(|e| !e.kind.is_access()) {
            wake.notify_one();
        }
    })?;
    watcher.watch(dir, notify::RecursiveMode::NonRecursive)?;
    Ok(Watch {
        _watcher: watcher,
        changed,
    })
}

/// Reads `dir`: every `*.wasm` and `*.oci` in it, with its grants and
/// configuration.
///
/// # Errors
/// [`ScanError`] if the directory cannot be read.
pub fn scan(dir: &Path) -> Result<Listing, ScanError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ScanError {
        path: dir.to_owned(),
        source,
    })?;
    let mut found: Vec<PluginFiles> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "wasm" || e == "oci"))
        .filter_map(PluginFiles::of)
        .collect();
    // By name, the component file before the reference: the first stays.
    found.sort_by(|a, b| (&a.name, a.is_reference()).cmp(&(&b.name, b.is_reference())));
    let mut plugins = BTreeMap::new();
    for files in found {
        let print = files.fingerprint();
        plugins.entry(files.name.clone()).or_insert((files, print));
    }
    Ok(Listing(plugins))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir(PathBuf);

    impl Dir {
        fn new(test: &str) -> Self {
            let path = std::env::temp_dir()
                .join(format!("kubewasm-plugin-dir-{test}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).expect("dir");
            Self(path)
        }

        fn write(&self, file: &str, text: &str) {
            std::fs::write(self.0.join(file), text).expect("written");
        }

        fn scan(&self) -> Listing {
            scan(&self.0).expect("scanned")
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn names(changes: &[Change]) -> Vec<String> {
        changes
            .iter()
            .map(|c| match c {
                Change::Added(f) => format!("+{}", f.name),
                Change::Changed(f) => format!("~{}", f.name),
                Change::Removed(n) => format!("-{n}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn a_watch_should_wake_on_a_write_in_the_directory() {
        let dir = Dir::new("watch");
        let watch = watch(&dir.0).expect("inotify");
        dir.write("a.wasm", "a");
        tokio::time::timeout(std::time::Duration::from_secs(5), watch.changed())
            .await
            .expect("woken by the write");
    }

    #[test]
    fn changes_should_name_what_was_added_changed_and_removed() {
        let dir = Dir::new("changes");
        dir.write("a.wasm", "a");
        dir.write("b.wasm", "b");
        dir.write("notes.txt", "not a plugin");
        let first = dir.scan();
        assert_eq!(
            first.plugins().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(names(&Listing::default().changes(&first)), ["+a", "+b"]);
        assert!(first.changes(&dir.scan()).is_empty(), "nothing changed");

        dir.write("a.config.yaml", "mode: ok\n");
        std::fs::remove_file(dir.0.join("b.wasm")).expect("removed");
        dir.write("c.wasm", "c");
        let second = dir.scan();
        assert_eq!(names(&first.changes(&second)), ["~a", "-b", "+c"]);

        // Replaced by a rename, same length: still a change.
        dir.write("c.next", "C");
        std::fs::rename(dir.0.join("c.next"), dir.0.join("c.wasm")).expect("renamed");
        dir.write("a.grants.yaml", "rules: []\n");
        assert_eq!(names(&second.changes(&dir.scan())), ["~a", "~c"]);
    }

    #[test]
    fn a_plugins_files_should_sit_beside_its_component() {
        let files = PluginFiles::of(PathBuf::from("/p/myapp.wasm")).expect("named");
        assert_eq!(files.name, "myapp");
        assert_eq!(files.grants, PathBuf::from("/p/myapp.grants.yaml"));
        assert_eq!(files.config, PathBuf::from("/p/myapp.config.yaml"));
    }

    #[test]
    fn an_unreadable_directory_should_say_which() {
        let error = scan(Path::new("/nonexistent/kubewasm")).expect_err("missing");
        assert!(
            error.to_string().contains("/nonexistent/kubewasm"),
            "{error}"
        );
    }
}
