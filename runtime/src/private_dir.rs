//! A directory only the host's user can write, inside one others may share.
//!
//! What the host keeps on disk between runs (precompiled components, pulled
//! artifacts and the receipts of their pulls) is trusted when read back:
//! whoever can change it runs code in the host or skips a registry's
//! authorization. Yet the directory an operator names is often shared: a
//! Pod's `emptyDir` is mode 0777, owned by root; `/tmp` is everyone's.
//!
//! # Guarantees
//! - Everything lives in `PARENT/uid-UID` (the host's effective user id),
//!   created mode 0700. `PARENT` is created 0700 when missing and may
//!   otherwise be anything, writable by anyone.
//! - The directory is opened once, without following a symbolic link, and
//!   checked on the open handle: owned by the host's user, no access for
//!   its group or others; anything else is refused with
//!   [`PrivateDirError`], never repaired (what another user could write
//!   may already hold their files).
//! - Every later access goes through that handle (`openat` and friends),
//!   never through the name again: another user who renames or replaces
//!   `uid-UID` in a shared parent changes nothing the host reads or writes.
//! - Files are created 0600 and replaced atomically: a reader sees a whole
//!   file or none.
//! - A name never leaves the directory: one that is absolute or holds `..`
//!   is refused (`InvalidInput`); a name of several components reaches
//!   into a subdirectory made by [`PrivateDir::subdir`].

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

/// Why the private directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PrivateDirError {
    /// Creating, opening or checking the directory failed.
    #[error("private directory {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Another user made it: they could have planted code in it.
    #[error(
        "private directory {path} is owned by uid {owner}, not by this host's uid {user}: another user made it and may have planted files in it; remove it (the host makes it anew) or choose another directory"
    )]
    NotOwned {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The host's effective user id.
        user: u32,
    },
    /// Its group or others have access: they could have planted code.
    #[error(
        "private directory {path} is open to its group or others (mode {mode:o}): what they wrote could run in the host; remove it (the host makes it anew, mode 700) or choose another directory"
    )]
    Insecure {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

/// A directory of the host's own, held open (see the module's guarantees).
#[derive(Clone, Debug)]
pub struct PrivateDir {
    path: PathBuf,
    fd: Arc<OwnedFd>,
}

impl PrivateDir {
    /// Opens `parent/uid-UID`, creating it (and `parent`) private if need be.
    ///
    /// # Errors
    /// [`PrivateDirError`] when it cannot be created or opened, or is not
    /// private to the host's user.
    pub fn open(parent: impl AsRef<Path>) -> Result<Self, PrivateDirError> {
        let parent = parent.as_ref();
        let user = rustix::process::geteuid().as_raw();
        let path = parent.join(format!("uid-{user}"));
        let io = |source: std::io::Error| PrivateDirError::Io {
            path: path.clone(),
            source,
        };
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(parent)
            .map_err(io)?;
        let parent =
            rustix::fs::open(parent, directory(), Mode::empty()).map_err(|e| io(e.into()))?;
        match rustix::fs::mkdirat(&parent, path_name(&path), Mode::RWXU) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(error) => return Err(io(error.into())),
        }
        let fd = rustix::fs::openat(
            &parent,
            path_name(&path),
            directory() | OFlags::NOFOLLOW,
            Mode::empty(),
        )
        .map_err(|e| io(e.into()))?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| io(e.into()))?;
        if stat.st_uid != user {
            return Err(PrivateDirError::NotOwned {
                path,
                owner: stat.st_uid,
                user,
            });
        }
        let mode = stat.st_mode & 0o777;
        if mode & 0o077 != 0 {
            return Err(PrivateDirError::Insecure { path, mode });
        }
        Ok(Self {
            path,
            fd: Arc::new(fd),
        })
    }

    /// Its path, for messages (the host never opens it by name again).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The subdirectory `name` (one component), created private if need be.
    ///
    /// # Errors
    /// What creating or opening it failed with.
    pub fn subdir(&self, name: &str) -> std::io::Result<Self> {
        let name = inside(name)?;
        match rustix::fs::mkdirat(&*self.fd, name, Mode::RWXU) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(error) => return Err(error.into()),
        }
        let fd = rustix::fs::openat(
            &*self.fd,
            name,
            directory() | OFlags::NOFOLLOW,
            Mode::empty(),
        )?;
        Ok(Self {
            path: self.path.join(name),
            fd: Arc::new(fd),
        })
    }

    /// The contents of file `name`, `None` when there is none.
    ///
    /// # Errors
    /// What reading it failed with.
    pub fn read(&self, name: &str) -> std::io::Result<Option<Vec<u8>>> {
        let name = inside(name)?;
        let fd = match rustix::fs::openat(
            &*self.fd,
            name,
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        let mut bytes = Vec::new();
        File::from(fd).read_to_end(&mut bytes)?;
        Ok(Some(bytes))
    }

    /// Whether file `name` is there.
    pub fn contains(&self, name: &str) -> bool {
        inside(name).is_ok_and(|name| {
            rustix::fs::statat(&*self.fd, name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
        })
    }

    /// Writes `bytes` as file `name`, replacing it atomically.
    ///
    /// # Errors
    /// What writing it failed with (nothing is left half-written).
    pub fn write(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        let name = inside(name)?;
        let tmp = self.write_temporary(name, bytes)?;
        let renamed = rustix::fs::renameat(&*self.fd, &tmp, &*self.fd, name);
        if renamed.is_err() {
            let _ = rustix::fs::unlinkat(&*self.fd, &tmp, AtFlags::empty());
        }
        Ok(renamed?)
    }

    /// Writes `bytes` as file `name` unless there is one already: `false`
    /// when another writer's file was there first (it is kept whole).
    ///
    /// # Errors
    /// What writing it failed with.
    pub fn write_new(&self, name: &str, bytes: &[u8]) -> std::io::Result<bool> {
        let name = inside(name)?;
        let tmp = self.write_temporary(name, bytes)?;
        let linked = rustix::fs::linkat(&*self.fd, &tmp, &*self.fd, name, AtFlags::empty());
        let _ = rustix::fs::unlinkat(&*self.fd, &tmp, AtFlags::empty());
        match linked {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    /// `bytes` written whole and synced to a new file of a name no other
    /// writer (thread or process) uses; its name.
    fn write_temporary(&self, name: &str, bytes: &[u8]) -> std::io::Result<String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let unique = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = format!("{name}.tmp.{}.{unique}", std::process::id());
        let fd = rustix::fs::openat(
            &*self.fd,
            &tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::RUSR | Mode::WUSR,
        )?;
        let mut file = File::from(fd);
        let written = file.write_all(bytes).and_then(|()| file.sync_all());
        if let Err(error) = written {
            let _ = rustix::fs::unlinkat(&*self.fd, &tmp, AtFlags::empty());
            return Err(error);
        }
        Ok(tmp)
    }
}

/// `name` when it stays inside the directory: relative, without `..`.
fn inside(name: &str) -> std::io::Result<&str> {
    let path = Path::new(name);
    let stays = !name.is_empty()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if stays {
        Ok(name)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{name:?} is not a name inside the directory"),
        ))
    }
}

/// Flags opening a directory as a handle for `*at` calls.
fn directory() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC
}

/// The last component of `path` (`uid-UID`), as built by [`PrivateDir::open`].
fn path_name(path: &Path) -> &std::ffi::OsStr {
    path.file_name().unwrap_or(path.as_os_str())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn open_should_make_a_private_directory_inside_a_world_writable_one() {
        let root = tempfile::tempdir().expect("tempdir");
        // As a kubelet makes an emptyDir.
        let shared = root.path().join("empty-dir");
        std::fs::create_dir(&shared).expect("mkdir");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let dir = PrivateDir::open(&shared).expect("opened");
        assert_eq!(dir.path().parent(), Some(shared.as_path()));
        assert_eq!(mode(dir.path()), 0o700);
        assert_eq!(mode(&shared), 0o777, "the parent is left as it is");

        dir.write("a", b"one").expect("written");
        assert_eq!(mode(&dir.path().join("a")), 0o600);
        assert_eq!(dir.read("a").expect("read"), Some(b"one".to_vec()));
        dir.write("a", b"two").expect("replaced");
        assert_eq!(dir.read("a").expect("read"), Some(b"two".to_vec()));
        assert!(!dir.write_new("a", b"three").expect("kept"));
        assert_eq!(dir.read("a").expect("read"), Some(b"two".to_vec()));
        assert_eq!(dir.read("none").expect("read"), None);
        assert!(dir.contains("a") && !dir.contains("none"));
        for outside in ["", "/etc/passwd", "../a", "sub/../../a", "."] {
            let refused = dir.read(outside).expect_err(outside);
            assert_eq!(
                refused.kind(),
                std::io::ErrorKind::InvalidInput,
                "{outside}"
            );
            assert!(dir.write(outside, b"x").is_err() && !dir.contains(outside));
        }
        // A name of two components reaches into a subdirectory.
        let sub = dir.subdir("sub").expect("made");
        assert_eq!(mode(sub.path()), 0o700);
        sub.write("b", b"inner").expect("written");
        assert_eq!(dir.read("sub/b").expect("read"), Some(b"inner".to_vec()));
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("listed")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 2, "no temporary file is left: {names:?}");

        // A missing parent is made private; a second open finds the first's.
        let missing = root.path().join("new/cache");
        let made = PrivateDir::open(&missing).expect("made");
        assert_eq!(mode(&missing), 0o700);
        made.write("k", b"v").expect("written");
        let again = PrivateDir::open(&missing).expect("reopened");
        assert_eq!(again.read("k").expect("read"), Some(b"v".to_vec()));
    }

    #[test]
    fn a_directory_renamed_or_replaced_by_name_should_change_nothing_the_host_reads() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = PrivateDir::open(root.path()).expect("opened");
        dir.write("key", b"mine").expect("written");
        // Another writer of the parent moves it away and puts its own in
        // its place, with its own key.
        let moved = root.path().join("moved");
        std::fs::rename(dir.path(), &moved).expect("renamed");
        std::fs::create_dir(dir.path()).expect("replaced");
        std::fs::write(dir.path().join("key"), b"theirs").expect("planted");
        assert_eq!(dir.read("key").expect("read"), Some(b"mine".to_vec()));
        dir.write("artifact", b"code").expect("written");
        assert!(moved.join("artifact").is_file());
        assert!(!dir.path().join("artifact").exists());
    }

    #[test]
    fn open_should_refuse_a_directory_others_can_enter_a_link_or_another_users() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = PrivateDir::open(root.path()).expect("opened");
        let path = dir.path().to_owned();
        drop(dir);

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o770)).expect("chmod");
        match PrivateDir::open(root.path()) {
            Err(PrivateDirError::Insecure { mode, .. }) => assert_eq!(mode, 0o770),
            other => panic!("not refused as insecure: {other:?}"),
        }

        // A link planted under the name is not followed.
        std::fs::remove_dir(&path).expect("removed");
        let elsewhere = root.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).expect("mkdir");
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        std::os::unix::fs::symlink(&elsewhere, &path).expect("symlink");
        match PrivateDir::open(root.path()) {
            // O_DIRECTORY | O_NOFOLLOW on a link: ENOTDIR (ELOOP elsewhere).
            Err(PrivateDirError::Io { source, .. }) => assert!(
                [Errno::NOTDIR, Errno::LOOP]
                    .map(|e| Some(e.raw_os_error()))
                    .contains(&source.raw_os_error()),
                "{source}"
            ),
            other => panic!("a link was followed: {other:?}"),
        }

        // Made by another user (only root can hand a directory to one).
        if rustix::process::geteuid().is_root() {
            std::fs::remove_file(&path).expect("removed");
            std::fs::create_dir(&path).expect("mkdir");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).expect("chmod");
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).expect("chown");
            match PrivateDir::open(root.path()) {
                Err(PrivateDirError::NotOwned { owner, .. }) => assert_eq!(owner, 65534),
                other => panic!("another user's directory was used: {other:?}"),
            }
        }
    }
}
