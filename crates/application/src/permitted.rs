//! An authorized request: the only way to the registry. [`Client::authorize`] decides a
//! [`Request`] and answers a [`Permitted`], whose operations (read, write, the subresources,
//! the reviews) do what was authorized and nothing else — an operation of another verb or on
//! another target is refused. Admission, the Kinds' rules and the waits for the fleet index
//! happen inside each operation, the same for a REST request and a loop's write.
//!
//! [`Client::authorize`]: crate::client::Client::authorize

pub mod doors;
pub mod history;
pub mod read;
pub mod subresources;
pub mod token;
pub mod usage;
pub mod write;

use kayra_api::verb::Verb;
use kayra_authn::Identity;
use kayra_registry::{RegistryError, Resource};

use crate::ApplicationLayer;
use crate::authorization::{KindTarget, Request, Scope, Target};
use crate::client::Client;

/// A request its caller may make, and what of it the caller may see.
#[derive(Debug, Clone)]
pub struct Permitted {
    client: Client,
    request: Request,
    scope: Scope,
}

impl Permitted {
    pub(crate) fn new(client: Client, request: Request, scope: Scope) -> Permitted {
        Permitted { client, request, scope }
    }

    /// What was authorized.
    pub fn request(&self) -> &Request {
        &self.request
    }

    /// Who asked.
    pub fn identity(&self) -> &Identity {
        self.client.identity()
    }

    /// The Kind's objects the request addresses, when it addresses a Kind.
    pub fn kind_target(&self) -> Option<&KindTarget> {
        match &self.request.target {
            Target::Kind(target) => Some(target),
            _ => None,
        }
    }

    /// The application layer.
    pub(crate) fn layer(&self) -> &ApplicationLayer {
        self.client.layer()
    }

    /// The client acting for the caller.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// The scope the caller may see.
    pub(crate) fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The Kind target of an operation of `verb`, with `subresource` (`None`: the object or
    /// collection itself); any other use of this permit is refused.
    pub(crate) fn target(&self, verb: Verb, subresource: Option<&str>) -> Result<&KindTarget, RegistryError> {
        self.target_of(verb, &[subresource])
    }

    /// The Kind target of an operation of `verb` on the object or on one of `subresources`
    /// (`None` standing for the object itself).
    pub(crate) fn target_of(
        &self,
        verb: Verb,
        subresources: &[Option<&str>],
    ) -> Result<&KindTarget, RegistryError> {
        match &self.request.target {
            Target::Kind(target)
                if self.request.verb == verb && subresources.contains(&target.subresource.as_deref()) =>
            {
                Ok(target)
            }
            _ => Err(self.misused(verb, subresources.first().copied().flatten())),
        }
    }

    /// The refusal of an operation this permit was not given for.
    pub(crate) fn misused(&self, verb: Verb, subresource: Option<&str>) -> RegistryError {
        let asked = match subresource {
            Some(sub) => format!("{verb} {sub}"),
            None => verb.to_string(),
        };
        RegistryError::Forbidden(format!(
            "the request was authorized to {} {}, not to {asked}",
            self.request.verb,
            describe(&self.request.target)
        ))
    }

    /// The registry resource serving a stored Kind target.
    pub(crate) fn stored(&self, target: &KindTarget) -> Result<&Resource, RegistryError> {
        if !target.kind.stored() {
            return Err(RegistryError::BadRequest(format!(
                "{} are not stored objects; this operation does not apply to them",
                target.kind.plural
            )));
        }
        Ok(self.layer().resource(&target.kind))
    }
}

/// What a target is, for a refusal.
fn describe(target: &Target) -> String {
    match target {
        Target::Kind(target) => {
            let mut described = target.kind.plural.to_owned();
            if let Some(sub) = &target.subresource {
                described = format!("{described}/{sub}");
            }
            if let Some(name) = &target.name {
                described = format!("{described} {name:?}");
            }
            described
        }
        Target::Check => "check".to_owned(),
        Target::NodeLog(node) => format!("nodes/log {node:?}"),
        Target::SessionLog(node) => format!("nodes/sessionlog {node:?}"),
        Target::SessionStream(node) => format!("nodes/sessionstream {node:?}"),
        Target::SessionUsage => "sessionusage".to_owned(),
        Target::Path(path) => format!("path {path:?}"),
    }
}

/// The name a request addresses, or a refusal of an operation that needs one.
pub(crate) fn named(target: &KindTarget) -> Result<&str, RegistryError> {
    target.name.as_deref().ok_or_else(|| {
        RegistryError::BadRequest(format!(
            "this operation needs the name of one of the {}",
            target.kind.plural
        ))
    })
}

/// A not-found error named by the Kind the caller asked for (a Pod, not the Application it views).
pub(crate) fn not_found_as(target: &KindTarget, name: &str, error: RegistryError) -> RegistryError {
    match error {
        RegistryError::NotFound { .. } => {
            let resource = match target.kind.group.as_str() {
                "" => target.kind.plural.to_owned(),
                group => format!("{}.{group}", target.kind.plural),
            };
            RegistryError::NotFound { resource, name: name.to_owned() }
        }
        other => other,
    }
}
