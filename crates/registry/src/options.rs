//! The options and answers of the registry's operations: what a caller says about a write, a
//! delete or a list, and what comes back.

use crate::Object;
use crate::admission::Admit;

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Part {
    /// The object: everything but `status` when status is a subresource.
    #[default]
    Main,
    /// The `/status` subresource: only `status`.
    Status,
    /// The `/approval` subresource of a certificate request: only `status.conditions` (what is
    /// decided there, and what may not be, is the Kind's and admission's to say).
    Approval,
    /// The `/binding` subresource of an Application: the object and its status in one write,
    /// as a placement sets the node and the `Scheduled` condition together. Admission decides
    /// it as a write of the object; it leaves `metadata.generation` as stored, since placement
    /// is the control plane's decision and not a new desired state from the object's author.
    Binding,
    /// A door subresource (`freeze`, `thaw`): a write of the object that may change the field
    /// only that door writes (`Strategy::doors`). It moves `generation` as any spec change
    /// does, and adds no history entry: an operation, not a new state from the author.
    Door(&'static str),
}

impl Part {
    /// Whether a write of this part changes the object itself (not only its status): what
    /// admission's rules about the object decide.
    pub fn writes_object(self) -> bool {
        matches!(self, Part::Main | Part::Binding | Part::Door(_))
    }
}

impl Part {
    /// The subresource a write of this part comes through, as `metadata.managedFields` records
    /// it (empty for the object).
    pub fn subresource(self) -> &'static str {
        match self {
            Part::Main => "",
            Part::Status => "status",
            Part::Approval => "approval",
            Part::Binding => "binding",
            Part::Door(door) => door,
        }
    }
}

/// Options of a write.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// Validate and answer as if writing, but write nothing (`dryRun=All`).
    pub dry_run: bool,
    /// The object or its status.
    pub part: Part,
    /// Who decides what this writer may write, on the object as it would be stored.
    pub admit: Admit,
    /// Who the write is recorded as in `metadata.managedFields`.
    pub manager: FieldManager,
    /// The writer's user, as the object's history records it.
    pub author: Option<String>,
}

impl WriteOptions {
    /// A write of the object itself (not a dry run) by no one in particular, admitted by
    /// `admit`, recorded as an unnamed manager until one is named.
    pub fn new(admit: Admit) -> WriteOptions {
        WriteOptions {
            dry_run: false,
            part: Part::Main,
            admit,
            manager: FieldManager::default(),
            author: None,
        }
    }

    /// The subresource the write is recorded as coming through.
    pub fn subresource(&self) -> &str {
        match self.manager.subresource.as_str() {
            "" => self.part.subresource(),
            named => named,
        }
    }
}

/// Who a write is recorded as in `metadata.managedFields`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldManager {
    /// The manager's name: the request's `fieldManager`, or what its user agent or its
    /// writer's identity names.
    pub name: String,
    /// The subresource the write comes through when it is not its part's own (`scale`, which
    /// writes the object); empty otherwise.
    pub subresource: String,
}

/// What a server-side apply asks beyond its configuration and its write's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Take over the fields other managers own instead of refusing (`force=true`).
    pub force: bool,
    /// Whether the apply may create the object when it does not exist.
    pub creation: Creation,
}

/// Whether an apply may create its object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Creation {
    /// It may.
    Allowed,
    /// It may not, for this reason (the writer may patch, but not create).
    Forbidden(String),
}

/// What an apply wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The object as stored (or as it would be, on a dry run).
    pub object: Object,
    /// Whether the apply created it.
    pub created: bool,
}

/// The patch formats the registry applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// RFC 7386 JSON merge patch (`application/merge-patch+json`).
    Merge,
    /// RFC 6902 JSON patch (`application/json-patch+json`).
    Json,
}

/// Options of a list.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `limit`: at most this many items; a continue token brings the rest.
    pub limit: Option<usize>,
    /// `continue`: a token from a previous page.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`: `NotOlderThan` or `Exact`.
    pub resource_version_match: Option<String>,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct List {
    /// The objects, in key order (namespace, then name).
    pub items: Vec<Object>,
    /// The revision the list was read at, as `metadata.resourceVersion`.
    pub resource_version: String,
    /// The token for the next page, when there is one.
    pub continue_token: Option<String>,
    /// How many more objects the remaining pages hold, when known.
    pub remaining_item_count: Option<u64>,
}

/// One page of a list as each item's JSON, exactly the bytes `serde_json` writes for the
/// object: from the watch cache's objects when it can answer, else freshly encoded.
#[derive(Debug, Clone)]
pub struct JsonList {
    /// Each object's JSON, in key order.
    pub items: JsonItems,
    /// The revision the list was read at, as `metadata.resourceVersion`.
    pub resource_version: String,
    /// The token for the next page, when there is one.
    pub continue_token: Option<String>,
    /// How many more objects the remaining pages hold, when known.
    pub remaining_item_count: Option<u64>,
}

/// Preconditions and policy of a delete (the `DeleteOptions` body).
#[derive(Debug, Clone)]
pub struct DeleteOptions {
    /// The object must have this uid.
    pub uid: Option<String>,
    /// The object must be at this resourceVersion.
    pub resource_version: Option<String>,
    /// `Orphan`, `Background` or `Foreground`.
    pub propagation_policy: Option<String>,
    /// Accepted for compatibility; deletion is immediate once finalizers are done.
    pub grace_period_seconds: Option<i64>,
    /// Validate and answer as if deleting, but delete nothing.
    pub dry_run: bool,
    /// Who decides whether this deleter may delete the object, on the object as it stands.
    pub admit: Admit,
}

impl DeleteOptions {
    /// A delete without preconditions or policy (not a dry run), admitted by `admit`.
    pub fn new(admit: Admit) -> DeleteOptions {
        DeleteOptions {
            uid: None,
            resource_version: None,
            propagation_policy: None,
            grace_period_seconds: None,
            dry_run: false,
            admit,
        }
    }
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted {
    /// The object is gone; this was its last state.
    Gone(Object),
    /// The object has finalizers: it is marked for deletion and stays until they are removed.
    Pending(Object),
}

/// The items of a [`JsonList`], each encoded as it is taken: a response streams a list of the
/// watch cache's objects without first holding every object's JSON at once. A page the cache
/// keeps whole comes as one piece, its items joined with commas already: joining the pieces
/// with commas gives the list's items either way.
#[derive(Debug, Clone)]
pub struct JsonItems(Items);

#[derive(Debug, Clone)]
enum Items {
    Encoded(std::vec::IntoIter<bytes::Bytes>),
    Cached(std::vec::IntoIter<std::sync::Arc<crate::watch::Entry>>),
    /// Every item's JSON, joined with commas already.
    Joined(Option<bytes::Bytes>),
}

impl JsonItems {
    /// Items encoded already.
    pub fn encoded(items: Vec<bytes::Bytes>) -> JsonItems {
        JsonItems(Items::Encoded(items.into_iter()))
    }

    pub(crate) fn cached(entries: Vec<std::sync::Arc<crate::watch::Entry>>) -> JsonItems {
        JsonItems(Items::Cached(entries.into_iter()))
    }

    /// Items whose JSON is joined with commas already: one piece (none when there are none).
    pub(crate) fn joined(joined: bytes::Bytes) -> JsonItems {
        JsonItems(Items::Joined(Some(joined).filter(|joined| !joined.is_empty())))
    }
}

impl Iterator for JsonItems {
    type Item = bytes::Bytes;

    fn next(&mut self) -> Option<bytes::Bytes> {
        match &mut self.0 {
            Items::Encoded(items) => items.next(),
            Items::Cached(entries) => entries.next().map(|entry| entry.json_for_list()),
            Items::Joined(joined) => joined.take(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            Items::Encoded(items) => items.size_hint(),
            Items::Cached(entries) => entries.size_hint(),
            Items::Joined(joined) => (usize::from(joined.is_some()), Some(usize::from(joined.is_some()))),
        }
    }
}

impl ExactSizeIterator for JsonItems {}
