//! How a watch cache follows the store: a list, then a watch from the list's revision, applied
//! change by change; a fresh list when the store's history no longer reaches back far enough,
//! or when the store sends a change it had already reported progress past.

use super::*;

/// Lists, then follows the store from the list's revision for as long as the cache lives;
/// starts over with a fresh list when the store's history no longer reaches back far enough.
pub(super) async fn follow(cache: Weak<Cache>, store: Arc<dyn Store>, prefix: String) {
    let mut backoff = Duration::from_millis(50);
    loop {
        match follow_once(&cache, &store, &prefix).await {
            Ok(()) => return,
            Err(error) => {
                tracing::warn!(%error, %prefix, "watch cache restarting");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
        if cache.strong_count() == 0 {
            return;
        }
    }
}

async fn follow_once(cache: &Weak<Cache>, store: &Arc<dyn Store>, prefix: &str) -> Result<(), RegistryError> {
    let (revision, objects) = list(store, prefix, 0).await?;
    let Some(live) = cache.upgrade() else { return Ok(()) };
    live.reset(revision, objects);
    drop(live);
    let mut watcher = store.watch(prefix, revision).await?;
    live_requester(cache, &watcher);
    loop {
        let event = match watcher.next_change().await {
            Some(Ok(kayra_store::Change::Event(event))) => event,
            Some(Ok(kayra_store::Change::Progress(reached))) => {
                // Nothing of this resource changed up to `reached`: watches from there may start.
                let Some(live) = cache.upgrade() else { return Ok(()) };
                live.progressed(reached);
                continue;
            }
            Some(Err(StoreError::WatchLagged { resume_after })) => {
                watcher = store.watch(prefix, resume_after).await?;
                live_requester(cache, &watcher);
                continue;
            }
            Some(Err(error)) => return Err(error.into()),
            None => return Ok(()),
        };
        let Some(live) = cache.upgrade() else { return Ok(()) };
        let revision = event.revision();
        if !live.in_order(revision) {
            return Err(RegistryError::Store(StoreError::Unavailable {
                message: format!(
                    "the store sent a change at revision {revision} after reporting progress past it; listing again"
                ),
                source: None,
            }));
        }
        // An object this registry wrote comes as it was written; any other is decoded.
        let decode = |kv: &kayra_store::KeyValue| {
            let object = match live.take_written(&kv.key, kv.mod_revision) {
                Some(object) => object,
                None => object::decode_stored(&kv.key, &kv.value, kv.mod_revision)?,
            };
            Ok::<_, RegistryError>(Entry::new(object, kv.value.len()))
        };
        // The version before the change is the cache's own: the store's copy of it is not
        // decoded again.
        let change = Change {
            revision,
            key: event.kv.key.clone(),
            object: match event.kind {
                EventKind::Put => Some(decode(&event.kv)?),
                EventKind::Delete => {
                    live.take_written(&event.kv.key, revision);
                    None
                }
            },
            prev: None,
            gone: OnceLock::new(),
        };
        live.apply(vec![change], revision);
    }
}

/// Every object under the prefix, at one revision.
async fn list(
    store: &Arc<dyn Store>,
    prefix: &str,
    revision: Revision,
) -> Result<(Revision, BTreeMap<String, Arc<Entry>>), RegistryError> {
    let mut objects = BTreeMap::new();
    let mut request =
        RangeRequest { limit: Some(1000), revision: Some(revision), ..RangeRequest::prefix(prefix) };
    loop {
        let page = store.range(&request).await?;
        request.revision = Some(page.revision);
        let last = page.kvs.last().map(|kv| format!("{}\0", kv.key));
        for kv in page.kvs {
            let object = object::decode_stored(&kv.key, &kv.value, kv.mod_revision)?;
            let size = kv.value.len();
            objects.insert(kv.key, Entry::new(object, size));
        }
        match last {
            Some(start) if page.more => request.start = Some(start),
            _ => return Ok((page.revision, objects)),
        }
    }
}

/// Lets the cache ask `watcher`, the store watch it now follows, for progress, and tells it
/// whether that watch's progress reports may answer reads.
fn live_requester(cache: &Weak<Cache>, watcher: &kayra_store::Watcher) {
    if let Some(live) = cache.upgrade() {
        *live.progress_requester.lock().expect("watch cache lock poisoned") = watcher.progress_requester();
        live.state.lock().expect("watch cache lock poisoned").ordered_progress =
            watcher.progress_is_ordered();
    }
}
