//! Where each Application's working directory (its default working directory and `HOME`)
//! lives, so that the user it runs as can reach it.
//!
//! A workload runs as its own user (65532 by default when the agent is root), and it can enter
//! a directory only when every directory on the way lets other users through (`o+x`). The
//! agent's data directory may sit where that is not so: under `/root`, or under a home
//! directory created 0700 (Debian's default), as `./kayra-data/agent` does for a controller
//! started from one. An operator's directories are not the agent's to open up, so:
//!
//! - when every directory on the data directory's path lets other users through, or the agent
//!   is not root (its workloads then run as the agent's own user), each working directory is
//!   `<data dir>/apps/<uid>/work`, beside the rest of the Application's state;
//! - otherwise they live under a root of work directories whose path does let everyone
//!   through, `/var/lib/kayra/work` unless `RuntimeConfig::work_root` names another, as
//!   `<root>/<node>/<uid>`, the root and the node's directory owned by root with mode 0711
//!   (entered by anyone, listed by root alone), each working directory owned by its user;
//! - when that root's path does not let other users through either, the runtime refuses to
//!   open, naming the directories that stop them and what to do.
//!
//! The decision ([`choose`]) is pure; [`open`] reads the paths' modes and makes the node's
//! directory under the root.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::runtime::RuntimeError;

/// The root of work directories used when the data directory's path is closed to other users.
pub(crate) const DEFAULT_WORK_ROOT: &str = "/var/lib/kayra/work";

/// Where the node's working directories are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WorkDirs {
    /// `<data dir>/apps/<uid>/work`.
    InDataDir,
    /// `<this directory>/<uid>`: the node's directory under the root of work directories.
    Under(PathBuf),
}

/// A directory on a path, with its mode bits.
pub(crate) type Step = (PathBuf, u32);

/// The first directory on `path` (listed from `/` down) that does not let other users through.
pub(crate) fn first_closed(path: &[Step]) -> Option<&Step> {
    path.iter().find(|(_, mode)| mode & 0o001 == 0)
}

/// Why no working directory would be reachable by the workloads' users.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unreachable {
    /// The directory that stops them on the way to the data directory.
    pub(crate) data_dir_closed: Step,
    /// The root of work directories.
    pub(crate) work_root: PathBuf,
    /// The directory that stops them on the way to it.
    pub(crate) work_root_closed: Step,
}

/// Decides where the working directories of node `node` go: `data_dir` and `work_root_path`
/// are the directories on the way to the data directory and to the root of work directories
/// (as far as it exists), each with its mode.
pub(crate) fn choose(
    agent_is_root: bool,
    data_dir: &[Step],
    work_root: &Path,
    work_root_path: &[Step],
    node: &str,
) -> Result<WorkDirs, Unreachable> {
    let Some(closed) = first_closed(data_dir).filter(|_| agent_is_root) else {
        return Ok(WorkDirs::InDataDir);
    };
    match first_closed(work_root_path) {
        None => Ok(WorkDirs::Under(work_root.join(node))),
        Some(root_closed) => Err(Unreachable {
            data_dir_closed: closed.clone(),
            work_root: work_root.to_owned(),
            work_root_closed: root_closed.clone(),
        }),
    }
}

/// Decides where node `node`'s working directories go and makes the node's directory under the
/// root of work directories when they go there. `data_dir` exists.
pub(crate) fn open(
    agent_is_root: bool,
    data_dir: &Path,
    work_root: &Path,
    node: &str,
) -> Result<WorkDirs, RuntimeError> {
    if node.is_empty() || node == "." || node == ".." || node.contains('/') {
        return Err(RuntimeError::Io {
            what: format!("placing working directories for node {node:?}"),
            source: std::io::Error::other("the node's name is not a file name"),
        });
    }
    let data_path = path_of(data_dir)?;
    let root_path = path_of(existing_ancestor(work_root))?;
    let chosen = choose(agent_is_root, &data_path, work_root, &root_path, node).map_err(|unreachable| {
        RuntimeError::WorkDirsUnreachable {
            data_dir: data_dir.to_owned(),
            data_dir_closed: unreachable.data_dir_closed.0,
            data_dir_mode: unreachable.data_dir_closed.1 & 0o7777,
            work_root: unreachable.work_root,
            work_root_closed: unreachable.work_root_closed.0,
            work_root_mode: unreachable.work_root_closed.1 & 0o7777,
        }
    })?;
    if let WorkDirs::Under(node_dir) = &chosen {
        for dir in [work_root, node_dir.as_path()] {
            crate::runtime::create_dir(dir, 0o711)?;
            let owned_by_root = std::fs::symlink_metadata(dir)
                .map(|meta| meta.is_dir() && meta.uid() == 0)
                .map_err(RuntimeError::io(format!("checking {}", dir.display())))?;
            if !owned_by_root {
                return Err(RuntimeError::Io {
                    what: format!("checking {}", dir.display()),
                    source: std::io::Error::other(
                        "not a directory owned by root, so it cannot hold working directories",
                    ),
                });
            }
        }
    }
    Ok(chosen)
}

/// Every directory from `/` down to `dir` (resolved), with its mode.
fn path_of(dir: &Path) -> Result<Vec<Step>, RuntimeError> {
    let what = || format!("reading the permissions on the way to {}", dir.display());
    let resolved = std::fs::canonicalize(dir).map_err(RuntimeError::io(what()))?;
    let mut steps: Vec<&Path> = resolved.ancestors().collect();
    steps.reverse();
    steps
        .into_iter()
        .map(|step| {
            let meta = std::fs::metadata(step).map_err(RuntimeError::io(what()))?;
            Ok((step.to_owned(), meta.mode()))
        })
        .collect()
}

/// The deepest of `path` and its ancestors that exists (`/` at worst).
fn existing_ancestor(path: &Path) -> &Path {
    path.ancestors().find(|ancestor| ancestor.exists()).unwrap_or(Path::new("/"))
}

#[cfg(test)]
mod tests;
