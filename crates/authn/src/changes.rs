//! Whether a file may have changed since it was last looked at, told without walking its path
//! on every request: an inotify watch on its directory, read without blocking, says whether
//! anything happened there since the last question. A change made before a request was sent is
//! queued in the kernel before the request arrives, so the answer is as fresh as a `stat` of
//! the path; what the watch cannot see makes every question answer yes, as `stat`ing every time
//! did: a file that is a symbolic link (its target may change elsewhere), a directory reached
//! through one, a watch the kernel dropped or overflowed, or no inotify at all. Once a second
//! the answer is yes regardless, for what no watch sees (a directory above replaced).

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

/// How long an answer of no may stand without the file being looked at.
const AT_MOST: Duration = Duration::from_secs(1);

/// What happens in a directory that may change a file in it.
const CHANGES: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF);

/// Events after which the watch no longer sees the directory (or missed some of it).
const LOST: ReadFlags = ReadFlags::IGNORED
    .union(ReadFlags::QUEUE_OVERFLOW)
    .union(ReadFlags::UNMOUNT)
    .union(ReadFlags::DELETE_SELF)
    .union(ReadFlags::MOVE_SELF);

/// The changes to one file.
#[derive(Debug)]
pub(crate) struct Changes {
    path: PathBuf,
    /// The watch on the file's directory, while it can be trusted.
    inotify: Option<OwnedFd>,
    /// When the answer was last yes.
    looked: Option<Instant>,
}

impl Changes {
    /// Watches for changes to the file at `path`: the first question answers yes.
    pub(crate) fn watch(path: &Path) -> Changes {
        let inotify = match watch_directory(path) {
            Ok(inotify) => inotify,
            Err(error) => {
                tracing::debug!(path = %path.display(), %error, "no inotify watch; the file is looked at on every use");
                None
            }
        };
        Changes { path: path.to_owned(), inotify, looked: None }
    }

    /// Whether the file must be looked at again: something happened in its directory since the
    /// last question, the watch cannot tell, or a second has passed since the file was last
    /// looked at.
    pub(crate) fn pending(&mut self) -> bool {
        let now = Instant::now();
        let due = self.looked.is_none_or(|looked| now.duration_since(looked) >= AT_MOST);
        let changed = match &self.inotify {
            None => true,
            Some(inotify) => match drain(inotify) {
                Ok(Drained::Nothing) => false,
                Ok(Drained::Events) => true,
                Ok(Drained::Lost) | Err(_) => {
                    self.inotify = None;
                    true
                }
            },
        };
        // A file replaced by a symbolic link may from then on change where no watch sees it.
        if changed && self.inotify.is_some() && is_link(&self.path) {
            self.inotify = None;
        }
        let pending = due || changed;
        if pending {
            self.looked = Some(now);
        }
        pending
    }

    /// Whether a watch still tells the changes (else every question answers yes).
    #[cfg(test)]
    pub(crate) fn watching(&self) -> bool {
        self.inotify.is_some()
    }
}

/// A non-blocking inotify watch on `path`'s directory, or `None` when a watch there could not
/// see every change to the file.
fn watch_directory(path: &Path) -> io::Result<Option<OwnedFd>> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let absolute = std::path::absolute(directory)?;
    if std::fs::canonicalize(directory)? != absolute || is_link(path) {
        return Ok(None);
    }
    let inotify = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
    inotify::add_watch(&inotify, &absolute, CHANGES | WatchFlags::ONLYDIR)?;
    Ok(Some(inotify))
}

fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|metadata| metadata.file_type().is_symlink())
}

enum Drained {
    Nothing,
    Events,
    Lost,
}

/// Reads every event queued on `inotify`.
fn drain(inotify: &OwnedFd) -> io::Result<Drained> {
    let mut buffer = [MaybeUninit::<u8>::uninit(); 1024];
    let mut events = inotify::Reader::new(inotify, &mut buffer);
    let mut drained = Drained::Nothing;
    loop {
        match events.next() {
            Ok(event) if event.events().intersects(LOST) => drained = Drained::Lost,
            Ok(_) => {
                if let Drained::Nothing = drained {
                    drained = Drained::Events;
                }
            }
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(drained),
            Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(errno.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asks until the once-a-second answer is not due.
    fn settled(changes: &mut Changes) {
        while changes.pending() {}
    }

    #[test]
    fn a_change_in_the_directory_is_told_once_and_quiet_is_told_no() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("tokens.csv");
        std::fs::write(&path, "a,alice,1\n").expect("the file");
        let mut changes = Changes::watch(&path);
        assert!(changes.watching());
        assert!(changes.pending(), "the first question is answered yes");
        assert!(!changes.pending(), "nothing happened since");
        let edits: [&dyn Fn(); 4] = [
            &|| std::fs::write(&path, "b,alice,1\n").expect("an edit in place"),
            &|| {
                std::fs::write(dir.path().join("next.csv"), "c,alice,1\n").expect("a new file");
                std::fs::rename(dir.path().join("next.csv"), &path).expect("renamed over it");
            },
            &|| std::fs::remove_file(&path).expect("removed"),
            &|| std::fs::write(&path, "d,alice,1\n").expect("created again"),
        ];
        for (at, edit) in edits.iter().enumerate() {
            settled(&mut changes);
            edit();
            assert!(changes.pending(), "edit {at} is told at once");
            assert!(!changes.pending(), "edit {at} is told once");
            assert!(changes.watching());
        }
    }

    #[test]
    fn what_a_watch_cannot_see_is_always_told_yes() {
        let dir = tempfile::tempdir().expect("a directory");
        let target = dir.path().join("target.csv");
        std::fs::write(&target, "a,alice,1\n").expect("the file");
        let link = dir.path().join("tokens.csv");
        std::os::unix::fs::symlink(&target, &link).expect("a link");
        let mut linked = Changes::watch(&link);
        assert!(!linked.watching(), "a link's target may change in another directory");
        assert!(linked.pending() && linked.pending());

        let real = dir.path().join("real");
        std::fs::create_dir(&real).expect("a directory");
        let through = dir.path().join("through");
        std::os::unix::fs::symlink(&real, &through).expect("a linked directory");
        std::fs::write(real.join("tokens.csv"), "a,alice,1\n").expect("the file");
        assert!(!Changes::watch(&through.join("tokens.csv")).watching(), "a linked directory");

        let path = real.join("tokens.csv");
        let mut replaced = Changes::watch(&path);
        settled(&mut replaced);
        std::fs::remove_file(&path).expect("removed");
        std::os::unix::fs::symlink(&target, &path).expect("replaced by a link");
        assert!(replaced.pending());
        assert!(!replaced.watching(), "a file replaced by a link is no longer watched");
        assert!(replaced.pending());

        let gone = dir.path().join("gone");
        std::fs::create_dir(&gone).expect("a directory");
        let mut removed = Changes::watch(&gone.join("tokens.csv"));
        settled(&mut removed);
        std::fs::remove_dir(&gone).expect("the directory removed");
        assert!(removed.pending());
        assert!(!removed.watching(), "the watch went with its directory");
        assert!(removed.pending());
    }

    #[test]
    fn an_unchanged_file_is_looked_at_again_after_a_second() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("tokens.csv");
        std::fs::write(&path, "a,alice,1\n").expect("the file");
        let mut changes = Changes::watch(&path);
        settled(&mut changes);
        changes.looked = changes.looked.map(|looked| looked - AT_MOST);
        assert!(changes.pending(), "a second after the last look");
        assert!(!changes.pending());
    }
}
