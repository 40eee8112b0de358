//! The verbs a request to a resource is made with, as Kubernetes names them: what discovery
//! advertises for each resource, what a request's method and query amount to, and what RBAC is
//! asked about. RBAC rules themselves keep strings, since they also name wildcards (`*`) and
//! verbs no request is made with (`escalate`, `bind`, `impersonate`, `approve`).

use serde::Serialize;

/// A request verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    /// Create an object (`POST` to a collection, or to a subresource that creates, such as an
    /// Eviction).
    Create,
    /// Delete one object.
    Delete,
    /// Delete every object of a collection that the selectors match.
    DeleteCollection,
    /// Read one object.
    Get,
    /// Read a collection.
    List,
    /// Change an object with a patch.
    Patch,
    /// Replace an object.
    Update,
    /// Follow a collection's changes.
    Watch,
}

impl Verb {
    /// Every request verb, in discovery's order.
    pub const ALL: [Verb; 8] = [
        Verb::Create,
        Verb::Delete,
        Verb::DeleteCollection,
        Verb::Get,
        Verb::List,
        Verb::Patch,
        Verb::Update,
        Verb::Watch,
    ];

    /// The verb as Kubernetes spells it (`deletecollection`), in RBAC rules and discovery.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Create => "create",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Patch => "patch",
            Verb::Update => "update",
            Verb::Watch => "watch",
        }
    }

    /// The verb of that spelling, if it is a request verb.
    pub fn parse(text: &str) -> Option<Verb> {
        Verb::ALL.into_iter().find(|verb| verb.as_str() == text)
    }

    /// Whether the verb only reads.
    pub fn reads(self) -> bool {
        matches!(self, Verb::Get | Verb::List | Verb::Watch)
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_are_spelled_as_kubernetes_spells_them() {
        let spelled: Vec<&str> = Verb::ALL.iter().map(|verb| verb.as_str()).collect();
        assert_eq!(
            spelled,
            ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        );
        for verb in Verb::ALL {
            assert_eq!(Verb::parse(verb.as_str()), Some(verb));
            assert_eq!(serde_json::to_value(verb).unwrap(), verb.as_str());
        }
        assert_eq!(Verb::parse("escalate"), None);
    }
}
