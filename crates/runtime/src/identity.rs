//! An Application's identity directory: the service-account tokens the controller pushes for
//! it, the cluster's CA certificate (`ca.crt`) and its namespace (`namespace`), as Kubernetes
//! lays out `/var/run/secrets/kubernetes.io/serviceaccount`. The directory and its files belong
//! to the user the workload runs as and are readable by that user alone; each file is replaced
//! atomically (written aside, then renamed), so a reader never sees half a token. When the
//! agent is root the workload runs in a mount namespace of its own where this directory is
//! mounted at the path every in-cluster client reads ([`MOUNT_PATH`]).

use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

pub(crate) use kayra_api::kinds::application::MOUNT_PATH;

/// The directory's name within the Application's state directory.
pub(crate) const DIR_NAME: &str = "identity";

/// Makes `dir` hold exactly `files` (name and content): a file whose content differs is
/// replaced, one not named is removed. With `owner`, the directory and files are that user's
/// (mode 0500 and 0400: the agent, root, writes them all the same); without, they are the
/// agent's own (0700 and 0600).
pub(crate) fn sync(dir: &Path, files: &[(String, Vec<u8>)], owner: Option<(u32, u32)>) -> io::Result<()> {
    let (dir_mode, file_mode) = if owner.is_some() { (0o500, 0o400) } else { (0o700, 0o600) };
    std::fs::DirBuilder::new().recursive(true).create(dir)?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid))?;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(dir_mode))?;
    for (name, content) in files {
        let path = dir.join(name);
        if std::fs::read(&path).is_ok_and(|current| current == *content) {
            continue;
        }
        let aside = dir.join(format!(".{name}.new"));
        let _ = std::fs::remove_file(&aside);
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(file_mode).open(&aside)?;
        file.write_all(content)?;
        file.sync_all()?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::fchown(&file, Some(uid), Some(gid))?;
        }
        drop(file);
        std::fs::rename(&aside, &path)?;
    }
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name();
        let kept = files.iter().any(|(wanted, _)| std::ffi::OsStr::new(wanted) == name);
        if !kept {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

/// Enters a mount namespace of the calling process's own and mounts `source` at
/// [`MOUNT_PATH`] there, seen by nothing outside. Needs root; called by the exec shim before
/// it drops to the workload's user.
pub(crate) fn mount_privately(source: &Path) -> io::Result<()> {
    use rustix::mount::{MountPropagationFlags, mount_bind, mount_change};
    use rustix::thread::UnshareFlags;
    // Unsharing only the mount namespace leaves the file descriptor table as it is, which is
    // what makes the call sound (`unshare_unsafe` is about `CLONE_FILES`).
    #[allow(deprecated)]
    rustix::thread::unshare(UnshareFlags::NEWNS)?;
    // Mounts made here must not propagate back to the host's namespace.
    mount_change("/", MountPropagationFlags::REC | MountPropagationFlags::PRIVATE)?;
    std::fs::DirBuilder::new().recursive(true).mode(0o755).create(MOUNT_PATH)?;
    mount_bind(source, MOUNT_PATH)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    #[test]
    fn the_directory_holds_exactly_the_files_asked_for_each_replaced_whole() {
        let root = tempfile::tempdir().expect("a temporary directory");
        let dir = root.path().join("identity");
        let files = |token: &str| {
            vec![("token".to_owned(), token.as_bytes().to_vec()), ("namespace".to_owned(), b"shop".to_vec())]
        };
        sync(&dir, &files("one"), None).expect("written");
        assert_eq!(std::fs::read_to_string(dir.join("token")).unwrap(), "one");
        let before = std::fs::metadata(dir.join("namespace")).unwrap().ino();
        sync(&dir, &files("two"), None).expect("rewritten");
        assert_eq!(std::fs::read_to_string(dir.join("token")).unwrap(), "two");
        assert_eq!(
            std::fs::metadata(dir.join("namespace")).unwrap().ino(),
            before,
            "an unchanged file stays"
        );
        assert_eq!(std::fs::metadata(dir.join("token")).unwrap().mode() & 0o777, 0o600);
        sync(&dir, &files("two")[1..], None).expect("pruned");
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("namespace")],
            "a token no longer asked for is removed"
        );
    }

    #[test]
    fn as_root_the_files_are_the_workloads_and_readable_by_it_alone() {
        if !rustix::process::geteuid().is_root() {
            assert!(std::env::var_os("CI").is_none(), "CI runs as root");
            return;
        }
        let root = tempfile::tempdir().expect("a temporary directory");
        let dir = root.path().join("identity");
        sync(&dir, &[("token".to_owned(), b"t".to_vec())], Some((65532, 65532))).expect("written");
        let meta = std::fs::metadata(dir.join("token")).unwrap();
        assert_eq!((meta.uid(), meta.gid(), meta.mode() & 0o777), (65532, 65532, 0o400));
        let meta = std::fs::metadata(&dir).unwrap();
        assert_eq!((meta.uid(), meta.mode() & 0o777), (65532, 0o500));
    }
}
