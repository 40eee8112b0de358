//! Reads: one object, a list (typed, or as each object's JSON from the watch cache) and a
//! watch. A read-only view (Pods of Applications) reads its source Kind and projects each
//! object, with the view's field selectors applied to the projection; a caller that may see
//! only some namespaces gets those alone, in one page.

use std::sync::Arc;

use bytes::Bytes;
use kayra_api::scheme::View;
use kayra_api::verb::Verb;
use kayra_registry::fields::FieldSelector;
use kayra_registry::{
    JsonItems, JsonList, List, ListOptions, Object, RegistryError, Resource, WatchEvent, WatchOptions,
    WatchStream, meta_str,
};
use serde_json::Value;

use super::{Permitted, named, not_found_as};
use crate::authorization::{KindTarget, Scope};

impl Permitted {
    /// The object the request names, as stored (a view's, projected from its source), also
    /// when it is read through its `status` or `approval` subresource. A `resource_version`
    /// (not `0`) must not be newer than the store.
    pub async fn get(&self, resource_version: Option<&str>) -> Result<Object, RegistryError> {
        let target = self.target_of(Verb::Get, &[None, Some("status"), Some("approval")])?;
        let name = named(target)?;
        if let Scope::Namespaces { visible, denied } = self.scope()
            && !visible.contains(name)
        {
            return Err(RegistryError::Forbidden(denied.clone()));
        }
        let registry = self.layer().registry();
        let namespace = target.namespace.as_deref();
        if let Some((source, project)) = target.kind.view_of {
            let object = registry
                .get(self.view_source(source), namespace, name)
                .await
                .map_err(|error| not_found_as(target, name, error))?;
            return Ok(projected(project, &object));
        }
        registry.not_older_than(resource_version).await?;
        registry.get(self.stored(target)?, namespace, name).await
    }

    /// As [`Permitted::get`], the object as its JSON: a read of the object itself (not
    /// through a subresource) is answered from the watch cache's encoding when it can be (see
    /// `kayra_registry::Registry::get_json`).
    pub async fn get_json(&self, resource_version: Option<&str>) -> Result<Bytes, RegistryError> {
        let target = self.target_of(Verb::Get, &[None, Some("status"), Some("approval")])?;
        let registry = self.layer().registry();
        if target.kind.view_of.is_some() || !matches!(self.scope(), Scope::All) {
            return self.get(resource_version).await.map(|object| encode(&object));
        }
        let name = named(target)?;
        registry.not_older_than(resource_version).await?;
        registry.get_json(self.stored(target)?, target.namespace.as_deref(), name).await
    }

    /// One page of the objects the request addresses that match `options`' selectors.
    pub async fn list(&self, options: &ListOptions) -> Result<List, RegistryError> {
        let target = self.target(Verb::List, None)?;
        let namespace = target.namespace.as_deref();
        if let Some(view) = target.kind.view_of {
            return self.list_view(target, view, options).await;
        }
        let resource = self.stored(target)?;
        let registry = self.layer().registry();
        match self.scope() {
            Scope::All => registry.list(resource, namespace, options).await,
            // Only the visible namespaces, all in one page: a continue token would carry the
            // name of the last namespace read, visible or not.
            Scope::Namespaces { visible, .. } => {
                let everything = ListOptions { limit: None, continue_token: None, ..options.clone() };
                let mut list = registry.list(resource, namespace, &everything).await?;
                list.items.retain(|item| visible.contains(meta_str(item, "name")));
                list.continue_token = None;
                list.remaining_item_count = None;
                Ok(list)
            }
        }
    }

    /// Every object the request addresses as it is now, with the revision they were read at,
    /// for a follower that keeps them: shared with the watch cache when it can be (see
    /// `kayra_registry::Registry::list_shared`), otherwise listed and wrapped.
    pub async fn list_shared(&self) -> Result<(u64, Vec<Arc<Object>>), RegistryError> {
        let target = self.target(Verb::List, None)?;
        if target.kind.view_of.is_none() && matches!(self.scope(), Scope::All) {
            let resource = self.stored(target)?;
            return self.layer().registry().list_shared(resource, target.namespace.as_deref()).await;
        }
        let (revision, objects) = self.list_all().await?;
        Ok((revision, objects.into_iter().map(Arc::new).collect()))
    }

    /// Every object the request addresses, page after page, with the revision the first page
    /// was read at (the later pages read at it too): where a watch that follows the list starts.
    pub async fn list_all(&self) -> Result<(u64, Vec<Object>), RegistryError> {
        let (mut revision, mut objects) = (None, Vec::new());
        let mut options = ListOptions { limit: Some(500), ..ListOptions::default() };
        loop {
            let page = self.list(&options).await?;
            revision.get_or_insert_with(|| page.resource_version.parse().unwrap_or_default());
            objects.extend(page.items);
            match page.continue_token {
                Some(token) => options.continue_token = Some(token),
                None => return Ok((revision.unwrap_or_default(), objects)),
            }
        }
    }

    /// As [`Permitted::list`], each object as its JSON: a list of the latest state is answered
    /// from the watch cache's shared encodings when it can be (see
    /// `kayra_registry::Registry::list_json`).
    pub async fn list_json(&self, options: &ListOptions) -> Result<JsonList, RegistryError> {
        let target = self.target(Verb::List, None)?;
        if target.kind.view_of.is_none() && matches!(self.scope(), Scope::All) {
            let resource = self.stored(target)?;
            return self.layer().registry().list_json(resource, target.namespace.as_deref(), options).await;
        }
        let list = self.list(options).await?;
        Ok(JsonList {
            items: JsonItems::encoded(list.items.iter().map(encode).collect()),
            resource_version: list.resource_version,
            continue_token: list.continue_token,
            remaining_item_count: list.remaining_item_count,
        })
    }

    /// The changes of the objects the request addresses that match `options`' selectors, from
    /// `options.resource_version` (every current object first, as `ADDED`, when none is
    /// given). The namespace is the request's.
    pub async fn watch(&self, options: &WatchOptions) -> Result<Watch, RegistryError> {
        let target = self.target(Verb::Watch, None)?;
        let mut options = WatchOptions { namespace: target.namespace.clone(), ..options.clone() };
        let registry = self.layer().registry();
        match target.kind.view_of {
            None => Ok(Watch::Objects(registry.watch(self.stored(target)?, &options).await?)),
            Some((source, project)) => {
                let fields = view_fields(target, options.field_selector.take().as_deref())?;
                let stream = registry.watch(self.view_source(source), &options).await?;
                Ok(Watch::View { stream, project, fields })
            }
        }
    }

    async fn list_view(
        &self,
        target: &KindTarget,
        view: View,
        options: &ListOptions,
    ) -> Result<List, RegistryError> {
        let (source, project) = view;
        let fields = view_fields(target, options.field_selector.as_deref())?;
        let source_options = ListOptions {
            field_selector: None,
            // With a field selector the projection is filtered here, so every page is read.
            limit: if fields.is_empty() { options.limit } else { None },
            ..options.clone()
        };
        let list = self
            .layer()
            .registry()
            .list(self.view_source(source), target.namespace.as_deref(), &source_options)
            .await?;
        let items = list
            .items
            .iter()
            .map(|object| projected(project, object))
            .filter(|item| fields.matches(item))
            .collect();
        Ok(List {
            items,
            resource_version: list.resource_version,
            continue_token: list.continue_token,
            remaining_item_count: None,
        })
    }

    /// The registry resource a view reads.
    fn view_source(&self, source: &str) -> &Resource {
        let layer = self.layer();
        layer
            .resource_named(&format!("fleet.{}", layer.scheme().domain()), source)
            .expect("a view's source is a Kind of the scheme")
    }
}

/// A watch of what a request addresses: the stored objects, or a view's projections of them.
#[derive(Debug)]
pub enum Watch {
    /// The objects' changes, as the watch cache delivers them.
    Objects(WatchStream),
    /// A view's: each change of the source object, projected, when the projection matches the
    /// view's field selector.
    View {
        /// The source Kind's changes.
        stream: WatchStream,
        /// How a source object appears in the view.
        project: fn(&Value) -> Value,
        /// The view's field selector, applied to the projection.
        fields: FieldSelector,
    },
}

impl Watch {
    /// The next change.
    pub async fn next(&mut self) -> Result<WatchEvent, RegistryError> {
        match self {
            Watch::Objects(stream) => stream.next().await,
            Watch::View { stream, project, fields } => loop {
                let event = stream.next().await?;
                let shown = projected(*project, event.object());
                if fields.matches(&shown) {
                    return Ok(same_change(&event, shown));
                }
            },
        }
    }

    /// The next change with its object's JSON: for stored objects the watch cache's encoding,
    /// shared by every watcher.
    pub async fn next_json(&mut self) -> Result<(WatchEvent, Bytes), RegistryError> {
        match self {
            Watch::Objects(stream) => stream.next_json().await,
            Watch::View { .. } => {
                let event = self.next().await?;
                let json = encode(event.object());
                Ok((event, json))
            }
        }
    }

    /// The revision every change up to which has been delivered (what a bookmark carries).
    pub fn revision(&self) -> u64 {
        match self {
            Watch::Objects(stream) | Watch::View { stream, .. } => stream.revision(),
        }
    }
}

/// A view's field selector, over the fields the view selects by.
fn view_fields(target: &KindTarget, selector: Option<&str>) -> Result<FieldSelector, RegistryError> {
    FieldSelector::parse(selector.unwrap_or_default(), target.kind.field_labels)
        .map_err(|error| RegistryError::BadRequest(error.to_string()))
}

/// `object` as the view shows it.
fn projected(project: fn(&Value) -> Value, object: &Object) -> Object {
    match project(&Value::Object(object.clone())) {
        Value::Object(map) => map,
        _ => Object::new(),
    }
}

/// The change `event` was, of `object`.
fn same_change(event: &WatchEvent, object: Object) -> WatchEvent {
    let object = std::sync::Arc::new(object);
    match event {
        WatchEvent::Added(_) => WatchEvent::Added(object),
        WatchEvent::Modified(_) => WatchEvent::Modified(object),
        WatchEvent::Deleted(_) => WatchEvent::Deleted(object),
    }
}

/// An object's JSON, as `serde_json` writes it.
fn encode(object: &Object) -> Bytes {
    Bytes::from(serde_json::to_vec(object).expect("a JSON map always serializes"))
}
