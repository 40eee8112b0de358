//! The sled store: the conformance suite, the model test, crash safety, restarts and bad input.

mod crash;

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use kayra_store::conformance::{Harness, model};
use kayra_store::mvcc::Options;
use kayra_store::{Store, StoreError};
use tempfile::TempDir;

/// Opens each store in a directory of its own, removed when the harness is dropped.
#[derive(Default)]
struct Sled {
    dirs: Mutex<Vec<TempDir>>,
}

#[async_trait]
impl Harness for Sled {
    async fn open(&self) -> Arc<dyn Store> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let options = Options { watch_buffer: 64, ..Options::default() };
        let store = kayra_store_sled::open(dir.path(), options).expect("a sled store opens");
        self.dirs.lock().expect("harness lock").push(dir);
        Arc::new(store)
    }
}

async fn sled() -> Option<Sled> {
    Some(Sled::default())
}

kayra_store::conformance_tests!(sled);

#[test]
fn agrees_with_the_model() {
    model::check(&Sled::default(), 64);
}

/// Opens the store at `path` again, right after the one before it was dropped.
fn reopen(path: &Path) -> kayra_store::mvcc::MvccStore {
    kayra_store_sled::open(path, Options::default()).expect("the store reopens")
}

#[tokio::test]
async fn watchers_resume_after_a_restart_from_retained_history() {
    let dir = tempfile::tempdir().unwrap();
    let resume_after = {
        let store = kayra_store_sled::open(dir.path(), Options::default()).unwrap();
        store.put("app/a", b"1".to_vec()).await.unwrap();
        let seen = store.put("app/b", b"2".to_vec()).await.unwrap();
        store.put("app/a", b"3".to_vec()).await.unwrap();
        store.delete("app/b").await.unwrap();
        seen
    };
    let store = reopen(dir.path());
    assert_eq!(store.revision().await.unwrap(), resume_after + 2, "revisions survive a restart");
    let mut watcher = store.watch("app/", resume_after).await.unwrap();
    let first = watcher.next().await.unwrap().unwrap();
    assert_eq!((first.kv.value.as_slice(), first.prev.unwrap().value), (&b"3"[..], b"1".to_vec()));
    let second = watcher.next().await.unwrap().unwrap();
    assert_eq!((second.kind, second.revision()), (kayra_store::EventKind::Delete, resume_after + 2));
    let next = store.put("app/c", b"4".to_vec()).await.unwrap();
    assert_eq!(next, resume_after + 3);
    assert_eq!(watcher.next().await.unwrap().unwrap().revision(), next, "live events follow the replay");
}

#[tokio::test]
async fn a_store_held_by_another_opener_is_refused_after_the_lock_wait() {
    let dir = tempfile::tempdir().unwrap();
    let _first = kayra_store_sled::open(dir.path(), Options::default()).unwrap();
    let started = std::time::Instant::now();
    let second = kayra_store_sled::open(dir.path(), Options::default());
    assert!(matches!(second, Err(StoreError::Engine { .. })), "{second:?}");
    assert!(second.unwrap_err().to_string().contains(&dir.path().display().to_string()));
    assert!(started.elapsed() >= kayra_store_sled::LOCK_WAIT, "refused after {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_dropped_after_its_last_write_reopens_at_once() {
    // An embedding service that closes its store and opens it again (a restart in process) is
    // not refused while the dropped store's engine lets go of the database.
    let dir = tempfile::tempdir().unwrap();
    for round in 0..100u32 {
        let store = kayra_store_sled::open(dir.path(), Options::default()).unwrap_or_else(|error| {
            panic!("round {round}: the dropped store still holds the engine: {error}")
        });
        store.put("k", round.to_string().into_bytes()).await.unwrap();
        drop(store);
    }
}

#[tokio::test]
async fn bad_paths_give_errors_that_name_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"not a database").unwrap();
    for path in [file.clone(), file.join("below-a-file")] {
        match kayra_store_sled::open(&path, Options::default()) {
            Err(error @ StoreError::Engine { .. }) => {
                assert!(error.to_string().contains(&path.display().to_string()), "{error}");
            }
            other => panic!("opening {} must fail, got {other:?}", path.display()),
        }
    }
}

#[test]
fn damaged_files_are_reported_not_panicked_on() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = kayra_store_sled::open(dir.path(), Options::default()).unwrap();
        store.put("k", vec![7; 4096]).await.unwrap();
    });
    drop(runtime);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let len = std::fs::metadata(&path).unwrap().len() as usize;
            std::fs::write(&path, vec![0xA5; len.max(64)]).unwrap();
        }
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    match kayra_store_sled::open(dir.path(), Options::default()) {
        Err(StoreError::Corrupt(_) | StoreError::Engine { .. }) => {}
        other => panic!("damaged files must give a typed error, got {other:?}"),
    }
}
