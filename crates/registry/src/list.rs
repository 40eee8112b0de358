//! Listing: pages read at one revision, selectors, continue tokens, answers from the watch
//! cache, and what a list older than the retained history gets.

use std::sync::Arc;

use kayra_store::{RangeRequest, Revision, StoreError};

use crate::token::Continue;
use crate::{
    JsonItems, JsonList, List, ListOptions, Object, Registry, RegistryError, Resource, object,
    parse_revision, selectors,
};

/// The most items one list page holds when the client sets no limit of its own.
const MAX_PAGE: usize = 100_000;

impl Registry {
    /// One page of the objects in `namespace` (every namespace when `None`) that match the
    /// selectors, read at one revision however many pages it takes.
    pub async fn list(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<List, RegistryError> {
        let (labels, fields) = selectors(resource, &options.label_selector, &options.field_selector)?;
        let (base, prefix) = self.list_prefixes(resource, namespace);
        let (revision, start) = self.list_start(options, &base, &prefix).await?;
        let limit = options.limit.filter(|limit| *limit > 0).unwrap_or(MAX_PAGE).min(MAX_PAGE);
        let filtered = !labels.is_empty() || !fields.is_empty();
        let mut items = Vec::new();
        let mut next = start;
        let mut read_at = revision;
        let mut remaining = None;
        let mut continue_from = None;
        'pages: loop {
            // Without selectors every key read is an item, so read exactly what is missing;
            // with them, read in chunks until enough match.
            let chunk = if filtered { (limit - items.len()).max(500) } else { limit - items.len() };
            let request = RangeRequest {
                prefix: prefix.clone(),
                start: Some(next.clone()),
                limit: Some(chunk),
                revision: read_at,
            };
            let page = match self.store.range(&request).await {
                Ok(page) => page,
                Err(StoreError::Compacted { requested, compacted }) => {
                    return Err(expired(
                        options.continue_token.is_some(),
                        &next,
                        &base,
                        requested,
                        compacted,
                    ));
                }
                Err(error) => return Err(error.into()),
            };
            read_at = Some(page.revision);
            let read = page.kvs.len();
            let mut last_key = None;
            for (at, kv) in page.kvs.into_iter().enumerate() {
                let object = object::decode_stored(&kv.key, &kv.value, kv.mod_revision)?;
                if (labels.is_empty() || labels.matches(&object::labels(&object))) && fields.matches(&object)
                {
                    items.push(object);
                }
                if items.len() == limit {
                    if at + 1 < read || page.more {
                        continue_from = Some(format!("{}\0", kv.key));
                        remaining = (!filtered).then(|| (page.count - (at + 1)) as u64);
                    }
                    break 'pages;
                }
                last_key = Some(kv.key);
            }
            match last_key {
                Some(key) if page.more => next = format!("{key}\0"),
                _ => break,
            }
        }
        let revision = read_at.unwrap_or_default();
        let continue_token = continue_from
            .and_then(|key| key.strip_prefix(&base).map(str::to_owned))
            .map(|start| Continue::new(revision, start).encode());
        Ok(List {
            items,
            resource_version: revision.to_string(),
            remaining_item_count: remaining.filter(|_| continue_token.is_some()).filter(|n| *n > 0),
            continue_token,
        })
    }

    /// Every object in `namespace` (every namespace when `None`) as it is now, with the
    /// revision they were read at: for the control plane's own followers, which keep what they
    /// list. Answered from the resource's watch cache when it has applied every change the store
    /// had when the list began, each object then shared with the cache rather than copied;
    /// otherwise read from the store, page after page at one revision.
    pub async fn list_shared(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
    ) -> Result<(Revision, Vec<Arc<Object>>), RegistryError> {
        let (base, prefix) = self.list_prefixes(resource, namespace);
        let current = self.store.revision().await?;
        self.caches.reach(&base, current).await;
        let (labels, fields) = selectors(resource, &None, &None)?;
        if let Some(page) = self.caches.page(&base, &prefix, current, labels, fields, usize::MAX) {
            return Ok((page.revision, page.items.iter().map(|entry| Arc::clone(entry.shared())).collect()));
        }
        let mut options = ListOptions::default();
        let (mut revision, mut objects) = (None, Vec::new());
        loop {
            let page = self.list(resource, namespace, &options).await?;
            revision.get_or_insert_with(|| parse_revision(&page.resource_version).unwrap_or_default());
            objects.extend(page.items.into_iter().map(Arc::new));
            match page.continue_token {
                Some(token) => options.continue_token = Some(token),
                None => return Ok((revision.unwrap_or_default(), objects)),
            }
        }
    }

    /// As [`Registry::list`], each item as its JSON. A list of the latest state (no
    /// `resourceVersion`, or `0`; no continue token, no `resourceVersionMatch`) is answered from
    /// the resource's watch cache once it has applied every change the store had when the list
    /// began (the list waits for it a moment, asking the store for progress, so a quiet
    /// resource on etcd is not read from etcd), so it is as recent as a read of the store; its
    /// items are the cache's encodings, made once per object version. Anything else, or a
    /// cache still behind after that moment, reads the store.
    pub async fn list_json(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<JsonList, RegistryError> {
        let empty = |value: &Option<String>| value.as_deref().is_none_or(str::is_empty);
        let latest = empty(&options.continue_token)
            && empty(&options.resource_version_match)
            && options.resource_version.as_deref().is_none_or(|rv| rv.is_empty() || rv == "0");
        if latest {
            let (labels, fields) = selectors(resource, &options.label_selector, &options.field_selector)?;
            let (base, prefix) = self.list_prefixes(resource, namespace);
            let limit = options.limit.filter(|limit| *limit > 0).unwrap_or(MAX_PAGE).min(MAX_PAGE);
            let current = self.store.revision().await?;
            self.caches.reach(&base, current).await;
            if let Some(page) = self.caches.json_page(&base, &prefix, current, labels, fields, limit) {
                let continue_token = page
                    .next
                    .and_then(|key| key.strip_prefix(&base).map(str::to_owned))
                    .map(|start| Continue::new(page.revision, start).encode());
                return Ok(JsonList {
                    items: page.items,
                    resource_version: page.revision.to_string(),
                    remaining_item_count: page
                        .remaining
                        .filter(|_| continue_token.is_some())
                        .filter(|n| *n > 0),
                    continue_token,
                });
            }
        }
        let list = self.list(resource, namespace, options).await?;
        Ok(JsonList {
            items: JsonItems::encoded(
                list.items
                    .iter()
                    .map(|item| {
                        bytes::Bytes::from(serde_json::to_vec(item).expect("a JSON map always serializes"))
                    })
                    .collect(),
            ),
            resource_version: list.resource_version,
            continue_token: list.continue_token,
            remaining_item_count: list.remaining_item_count,
        })
    }

    /// Where a resource's objects are kept, and where those of `namespace` are (every
    /// namespace's, the same, when `None` or for cluster objects).
    fn list_prefixes(&self, resource: &Resource, namespace: Option<&str>) -> (String, String) {
        let base = resource.store_prefix(&self.root);
        let prefix = match (resource.namespaced, namespace) {
            (true, Some(namespace)) => format!("{base}{namespace}/"),
            _ => base.clone(),
        };
        (base, prefix)
    }

    /// Where a list starts: the revision to read at (`None` for the latest) and the first key.
    async fn list_start(
        &self,
        options: &ListOptions,
        base: &str,
        prefix: &str,
    ) -> Result<(Option<Revision>, String), RegistryError> {
        let rv = options.resource_version.as_deref().filter(|rv| !rv.is_empty());
        if let Some(token) = options.continue_token.as_deref().filter(|token| !token.is_empty()) {
            if rv.is_some_and(|rv| rv != "0") {
                return Err(RegistryError::BadRequest(
                    "specifying resource version is not allowed when using continue".to_owned(),
                ));
            }
            let token = Continue::decode(token).ok_or_else(|| {
                RegistryError::BadRequest(
                    "continue key is not valid: it was not issued by this server".to_owned(),
                )
            })?;
            let start = format!("{base}{}", token.start);
            if !start.starts_with(prefix) {
                return Err(RegistryError::BadRequest(
                    "continue key does not belong to this list".to_owned(),
                ));
            }
            return Ok(((token.rv > 0).then_some(token.rv), start));
        }
        let revision = match (rv, options.resource_version_match.as_deref().filter(|m| !m.is_empty())) {
            (None, Some(_)) => {
                return Err(RegistryError::BadRequest(
                    "resourceVersionMatch is forbidden unless resourceVersion is provided".to_owned(),
                ));
            }
            (None | Some("0"), None) => None,
            (Some(rv), Some("Exact")) => Some(parse_revision(rv)?),
            (Some(rv), None | Some("NotOlderThan")) => {
                let requested = parse_revision(rv)?;
                let current = self.store.revision().await?;
                if requested > current {
                    return Err(RegistryError::TooLargeResourceVersion { requested, current });
                }
                None
            }
            (Some(_), Some(other)) => {
                return Err(RegistryError::BadRequest(format!(
                    "resourceVersionMatch {other:?} is not one of NotOlderThan, Exact"
                )));
            }
        };
        Ok((revision, prefix.to_owned()))
    }
}

/// The answer to a list whose revision is older than the retained history: for a continue
/// token, a hint token that lists the rest at the latest revision.
fn expired(
    continuing: bool,
    next: &str,
    base: &str,
    requested: Revision,
    compacted: Revision,
) -> RegistryError {
    if continuing {
        let hint = next.strip_prefix(base).map(|start| Continue::new(0, start.to_owned()).encode());
        return RegistryError::Expired {
            message: "The provided continue parameter is too old to display a consistent list result. You can \
                      start a new list without the continue parameter, or use the continue token in this \
                      response to retrieve the remainder of the results. Continuing with the provided token \
                      results in an inconsistent list - objects that were created, modified, or deleted between \
                      the time the first chunk was returned and now may show up in the list."
                .to_owned(),
            continue_from: hint,
        };
    }
    RegistryError::Expired {
        message: format!("too old resource version: {requested} ({compacted})"),
        continue_from: None,
    }
}
