//! State that survives a restart (`--data-dir`): every object and the
//! resourceVersion counter, in a redb database.
//!
//! # Guarantees
//! - Each store write is written to the database before the store lock is
//!   released, so the database never lags what clients were told.
//! - Writes are committed without an fsync each (redb's `Durability::None`);
//!   [`Persistence::flush`] (called on SIGTERM) makes everything durable.
//!   A crash of the machine may lose the writes since the last flush; a
//!   crash of the process does not.
//! - Loading restores the objects and the counter, so resource versions keep
//!   increasing across restarts. The event history starts empty: a watch
//!   from before the restart gets 410 and relists, as after an etcd
//!   compaction.

use std::path::Path;
use std::sync::Arc;

use kubewasm_core::ObjectKey;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;

use crate::store::ResourceKey;

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");

/// Why the database failed.
#[derive(Debug, thiserror::Error)]
#[error("state database: {0}")]
pub struct PersistError(String);

fn err(e: impl std::fmt::Display) -> PersistError {
    PersistError(e.to_string())
}

/// The database behind a store.
#[derive(Clone)]
pub struct Persistence {
    db: Arc<Database>,
}

impl std::fmt::Debug for Persistence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persistence").finish_non_exhaustive()
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
    /// Opens (or creates) the database `state.redb` in `dir`.
    ///
    /// # Errors
    /// [`PersistError`] if the directory or the database cannot be opened.
    pub fn open(dir: &Path) -> Result<Self, PersistError> {
        // The database holds Secrets: only the owner may enter the directory.
        crate::tls::create_private_dir(dir).map_err(err)?;
        let db = Database::create(dir.join("state.redb")).map_err(err)?;
        let tx = db.begin_write().map_err(err)?;
        tx.open_table(OBJECTS).map_err(err)?;
        tx.open_table(COUNTERS).map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(Self { db: Arc::new(db) })
    }

    /// Every stored object and the last resourceVersion.
    ///
    /// # Errors
    /// [`PersistError`] on a read failure or a corrupt record.
    pub fn load(&self) -> Result<Loaded, PersistError> {
        let tx = self.db.begin_read().map_err(err)?;
        let rv = tx
            .open_table(COUNTERS)
            .map_err(err)?
            .get("resourceVersion")
            .map_err(err)?
            .map_or(0, |v| v.value());
        let mut objects = Vec::new();
        for entry in tx.open_table(OBJECTS).map_err(err)?.iter().map_err(err)? {
            let (k, v) = entry.map_err(err)?;
            let mut parts = k.value().splitn(4, '/');
            let (Some(group), Some(plural), Some(namespace), Some(name)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(PersistError(format!("corrupt key {}", k.value())));
            };
            let value: Value = serde_json::from_slice(v.value()).map_err(err)?;
            let key = if namespace.is_empty() {
                ObjectKey::cluster(name)
            } else {
                ObjectKey::namespaced(namespace, name)
            };
            objects.push((ResourceKey::new(group, plural), key, value));
        }
        Ok((rv, objects))
    }

    fn write(
        &self,
        rv: u64,
        change: impl FnOnce(&mut redb::Table<'_, &str, &[u8]>) -> Result<(), PersistError>,
    ) -> Result<(), PersistError> {
        let mut tx = self.db.begin_write().map_err(err)?;
        tx.set_durability(Durability::None).map_err(err)?;
        {
            let mut objects = tx.open_table(OBJECTS).map_err(err)?;
            change(&mut objects)?;
            tx.open_table(COUNTERS)
                .map_err(err)?
                .insert("resourceVersion", rv)
                .map_err(err)?;
        }
        tx.commit().map_err(err)
    }

    /// Records an object at `rv`.
    ///
    /// # Errors
    /// [`PersistError`] if the write fails.
    pub fn put(
        &self,
        rv: u64,
        resource: &ResourceKey,
        key: &ObjectKey,
        object: &Value,
    ) -> Result<(), PersistError> {
        let bytes = serde_json::to_vec(object).map_err(err)?;
        self.write(rv, |t| {
            t.insert(db_key(resource, key).as_str(), bytes.as_slice())
                .map(|_| ())
                .map_err(err)
        })
    }

    /// Records a deletion at `rv`.
    ///
    /// # Errors
    /// [`PersistError`] if the write fails.
    pub fn remove(
        &self,
        rv: u64,
        resource: &ResourceKey,
        key: &ObjectKey,
    ) -> Result<(), PersistError> {
        self.write(rv, |t| {
            t.remove(db_key(resource, key).as_str())
                .map(|_| ())
                .map_err(err)
        })
    }

    /// Makes every write so far durable (fsync).
    ///
    /// # Errors
    /// [`PersistError`] if the commit fails.
    pub fn flush(&self) -> Result<(), PersistError> {
        let mut tx = self.db.begin_write().map_err(err)?;
        tx.set_durability(Durability::Immediate).map_err(err)?;
        tx.commit().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_and_the_counter_should_survive_reopening() {
        let dir = std::env::temp_dir().join(format!("kubewasm-persist-{}", uuid::Uuid::new_v4()));
        let cms = ResourceKey::new("", "configmaps");
        {
            let p = Persistence::open(&dir).expect("opens");
            p.put(1, &cms, &ObjectKey::namespaced("a", "x"), &json!({"v": 1}))
                .expect("put");
            p.put(2, &cms, &ObjectKey::namespaced("a", "y"), &json!({"v": 2}))
                .expect("put");
            p.remove(3, &cms, &ObjectKey::namespaced("a", "x"))
                .expect("remove");
            p.flush().expect("flush");
        }
        let (rv, objects) = Persistence::open(&dir)
            .expect("reopens")
            .load()
            .expect("loads");
        assert_eq!(rv, 3);
        assert_eq!(objects.len(), 1);
        assert_eq!(objects[0].1, ObjectKey::namespaced("a", "y"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
