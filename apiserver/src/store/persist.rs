//! State that survives a restart (`--data-dir`): every object and the
//! resourceVersion counter, in a redb database.
//!
//! # Guarantees
//! - A write is acknowledged only once it is durable: it survives SIGKILL
//!   of the server and a crash of the machine. [`Persistence::record`]
//!   queues a change (in RV order, under the store's lock); a writer thread
//!   commits everything queued in one fsynced transaction (group commit),
//!   then raises the durable RV ([`Persistence::durable_rv`]) and wakes
//!   whoever waits on it. Many concurrent writes share one fsync, which is
//!   what keeps thousands of acknowledged writes per second.
//! - If a commit fails, the writer stops and every later wait fails
//!   ([`PersistError`]): the server refuses writes rather than acknowledge
//!   what it could not keep.
//! - Loading restores the objects and the counter, so resource versions keep
//!   increasing across restarts. A database that cannot be read, or a
//!   record that does not parse, is an error at start, never a silent loss.
//!   The event history starts empty: a watch from before the restart gets
//!   410 and relists, as after an etcd compaction.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::sync::{Arc, Mutex, PoisonError};

use kubewasm_core::ObjectKey;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;
use tokio::sync::Notify;

use kubewasm_types::info::ResourceKey;

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");

/// Most changes in one transaction.
const MAX_BATCH: usize = 4096;

/// Why the database failed.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum PersistError {
    /// The directory or the database could not be opened.
    #[error("cannot open the state database in {dir}: {reason}")]
    Open {
        /// The data directory.
        dir: String,
        /// What failed.
        reason: String,
    },
    /// A record could not be read back.
    #[error("the state database holds an unreadable record {key}: {reason}")]
    Corrupt {
        /// The record's key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A read or a commit failed.
    #[error("state database: {0}")]
    Io(String),
    /// The writer stopped after a failed commit; nothing later is kept.
    #[error("state database: an earlier commit failed ({0}); writes are refused")]
    Stopped(String),
}

fn io(e: impl std::fmt::Display) -> PersistError {
    PersistError::Io(e.to_string())
}

/// One queued change: an object's new bytes, or its removal.
struct Change {
    rv: u64,
    key: String,
    bytes: Option<Vec<u8>>,
}

/// What the writer tells the store.
#[derive(Debug, Default)]
struct Progress {
    /// Every change at or below this RV is durable.
    durable: AtomicU64,
    /// Set once a commit failed.
    failed: Mutex<Option<String>>,
}

/// The database behind a store.
pub struct Persistence {
    db: Arc<Database>,
    /// Taken on drop, which closes the queue.
    queue: Mutex<Option<Sender<Change>>>,
    progress: Arc<Progress>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Persistence {
    /// Closes the queue and waits for the writer to commit what it holds
    /// and release the database, so it can be opened again at once.
    fn drop(&mut self) {
        drop(
            self.queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl std::fmt::Debug for Persistence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persistence")
            .field("durable", &self.durable_rv())
            .finish_non_exhaustive()
    }
}

/// `group/plural/namespace/name`, the database key of an object.
fn db_key(resource: &ResourceKey, key: &ObjectKey) -> String {
    format!(
        "{}/{}/{}/{}",
        resource.group,
        resource.plural,
        key.namespace.as_deref().unwrap_or(""),
        key.name
    )
}

/// What a database holds: the objects and the last resourceVersion.
pub type Loaded = (u64, Vec<(ResourceKey, ObjectKey, Value)>);

impl Persistence {
    /// Opens (or creates) the database `state.redb` in `dir` and starts its
    /// writer, which wakes `changed` whenever the durable RV moves.
    ///
    /// # Errors
    /// [`PersistError::Open`] if the directory or the database cannot be
    /// opened.
    pub fn open(dir: &Path, changed: Arc<Notify>) -> Result<Self, PersistError> {
        let open = |e: &dyn std::fmt::Display| PersistError::Open {
            dir: dir.display().to_string(),
            reason: e.to_string(),
        };
        // The database holds Secrets: only the owner may enter the directory.
        super::private::create_private_dir(dir).map_err(|e| open(&e))?;
        let path = dir.join("state.redb");
        super::private::create_private_file(&path).map_err(|e| open(&e))?;
        let db = Database::create(path).map_err(|e| open(&e))?;
        let tx = db.begin_write().map_err(|e| open(&e))?;
        tx.open_table(OBJECTS).map_err(|e| open(&e))?;
        tx.open_table(COUNTERS).map_err(|e| open(&e))?;
        tx.commit().map_err(|e| open(&e))?;
        let db = Arc::new(db);
        let rv = Self::stored_rv(&db)?;
        let progress = Arc::new(Progress {
            durable: AtomicU64::new(rv),
            failed: Mutex::new(None),
        });
        let (queue, changes) = channel();
        let writer = Writer {
            db: Arc::clone(&db),
            progress: Arc::clone(&progress),
            changed,
        };
        let writer = std::thread::Builder::new()
            .name("kubewasm-persist".into())
            .spawn(move || writer.run(&changes))
            .map_err(|e| open(&e))?;
        Ok(Self {
            db,
            queue: Mutex::new(Some(queue)),
            progress,
            writer: Some(writer),
        })
    }

    fn stored_rv(db: &Database) -> Result<u64, PersistError> {
        let tx = db.begin_read().map_err(io)?;
        Ok(tx
            .open_table(COUNTERS)
            .map_err(io)?
            .get("resourceVersion")
            .map_err(io)?
            .map_or(0, |v| v.value()))
    }

    /// Every stored object and the last resourceVersion.
    ///
    /// # Errors
    /// [`PersistError`] on a read failure or a corrupt record.
    pub fn load(&self) -> Result<Loaded, PersistError> {
        let rv = Self::stored_rv(&self.db)?;
        let tx = self.db.begin_read().map_err(io)?;
        let mut objects = Vec::new();
        for entry in tx.open_table(OBJECTS).map_err(io)?.iter().map_err(io)? {
            let (k, v) = entry.map_err(io)?;
            let corrupt = |reason: &dyn std::fmt::Display| PersistError::Corrupt {
                key: k.value().to_owned(),
                reason: reason.to_string(),
            };
            let mut parts = k.value().splitn(4, '/');
            let (Some(group), Some(plural), Some(namespace), Some(name)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(corrupt(&"not group/plural/namespace/name"));
            };
            let value: Value = serde_json::from_slice(v.value()).map_err(|e| corrupt(&e))?;
            let key = if namespace.is_empty() {
                ObjectKey::cluster(name)
            } else {
                ObjectKey::namespaced(namespace, name)
            };
            objects.push((ResourceKey::new(group, plural), key, value));
        }
        Ok((rv, objects))
    }

    /// Queues an object's new state (`Some`, as JSON) or its removal (`None`) at
    /// `rv`; durable once [`Persistence::durable_rv`] reaches `rv`.
    /// Called in RV order (under the store's lock).
    ///
    /// # Errors
    /// [`PersistError::Stopped`] once a commit has failed.
    pub fn record(
        &self,
        rv: u64,
        resource: &ResourceKey,
        key: &ObjectKey,
        bytes: Option<Vec<u8>>,
    ) -> Result<(), PersistError> {
        self.check()?;
        let change = Change {
            rv,
            key: db_key(resource, key),
            bytes,
        };
        let gone = || PersistError::Stopped("the writer is gone".into());
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .ok_or_else(gone)?
            .send(change)
            .map_err(|_| gone())
    }

    /// Every change at or below this RV is durable.
    pub fn durable_rv(&self) -> u64 {
        self.progress.durable.load(Ordering::Acquire)
    }

    /// Fails once a commit has failed.
    ///
    /// # Errors
    /// [`PersistError::Stopped`].
    pub fn check(&self) -> Result<(), PersistError> {
        match &*self
            .progress
            .failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Some(reason) => Err(PersistError::Stopped(reason.clone())),
            None => Ok(()),
        }
    }
}

/// The writer thread's side.
struct Writer {
    db: Arc<Database>,
    progress: Arc<Progress>,
    changed: Arc<Notify>,
}

impl Writer {
    /// Commits batches until the queue closes or a commit fails.
    fn run(self, changes: &Receiver<Change>) {
        while let Ok(first) = changes.recv() {
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match changes.try_recv() {
                    Ok(change) => batch.push(change),
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            let last = batch.last().map_or(0, |c| c.rv);
            match self.commit(&batch) {
                Ok(()) => self.progress.durable.store(last, Ordering::Release),
                Err(error) => {
                    tracing::error!(%error, "state database commit failed; refusing writes");
                    *self
                        .progress
                        .failed
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(error.to_string());
                    self.changed.notify_waiters();
                    return;
                }
            }
            self.changed.notify_waiters();
        }
    }

    fn commit(&self, batch: &[Change]) -> Result<(), PersistError> {
        let mut tx = self.db.begin_write().map_err(io)?;
        tx.set_durability(Durability::Immediate).map_err(io)?;
        {
            let mut objects = tx.open_table(OBJECTS).map_err(io)?;
            for change in batch {
                match &change.bytes {
                    Some(bytes) => objects.insert(change.key.as_str(), bytes.as_slice()),
                    None => objects.remove(change.key.as_str()),
                }
                .map_err(io)?;
            }
            if let Some(last) = batch.last() {
                tx.open_table(COUNTERS)
                    .map_err(io)?
                    .insert("resourceVersion", last.rv)
                    .map_err(io)?;
            }
        }
        tx.commit().map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wait_durable(p: &Persistence, rv: u64) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while p.durable_rv() < rv {
            assert!(std::time::Instant::now() < deadline, "never durable");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn objects_and_the_counter_should_survive_reopening() {
        let dir = std::env::temp_dir().join(format!("kubewasm-persist-{}", uuid::Uuid::new_v4()));
        let cms = ResourceKey::new("", "configmaps");
        {
            let p = Persistence::open(&dir, Arc::default()).expect("opens");
            let put = |rv, name, v: Value| {
                p.record(
                    rv,
                    &cms,
                    &ObjectKey::namespaced("a", name),
                    serde_json::to_vec(&v).ok(),
                )
            };
            put(1, "x", json!({"v": 1})).expect("put");
            put(2, "y", json!({"v": 2})).expect("put");
            p.record(3, &cms, &ObjectKey::namespaced("a", "x"), None)
                .expect("remove");
            wait_durable(&p, 3);
        }
        let (rv, objects) = Persistence::open(&dir, Arc::default())
            .expect("reopens")
            .load()
            .expect("loads");
        assert_eq!(rv, 3);
        assert_eq!(objects.len(), 1);
        assert_eq!(objects[0].1, ObjectKey::namespaced("a", "y"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn the_database_should_be_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("kubewasm-persist-{}", uuid::Uuid::new_v4()));
        let mode = |path: &std::path::Path| {
            std::fs::metadata(path)
                .expect("exists")
                .permissions()
                .mode()
                & 0o777
        };
        drop(Persistence::open(&dir, Arc::new(Notify::new())).expect("opens"));
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("state.redb")), 0o600);
        // An existing database left readable by others is tightened.
        std::fs::set_permissions(
            dir.join("state.redb"),
            std::fs::Permissions::from_mode(0o644),
        )
        .expect("loosened");
        drop(Persistence::open(&dir, Arc::new(Notify::new())).expect("opens again"));
        assert_eq!(mode(&dir.join("state.redb")), 0o600);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unreadable_record_should_fail_the_load_by_name() {
        let dir = std::env::temp_dir().join(format!("kubewasm-persist-{}", uuid::Uuid::new_v4()));
        {
            let db = Database::create({
                crate::store::private::create_private_dir(&dir).expect("dir");
                dir.join("state.redb")
            })
            .expect("db");
            let tx = db.begin_write().expect("tx");
            tx.open_table(OBJECTS)
                .expect("table")
                .insert("/configmaps/a/x", b"{not json".as_slice())
                .expect("insert");
            tx.commit().expect("commit");
        }
        let error = Persistence::open(&dir, Arc::default())
            .expect("opens")
            .load()
            .expect_err("refused");
        assert!(matches!(&error, PersistError::Corrupt { key, .. } if key == "/configmaps/a/x"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
