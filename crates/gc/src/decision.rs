//! What the garbage collector does for one owner, given the owner as stored (or its absence) and
//! the dependents that name it: pure, so every case is a row of a table.

use kayra_registry::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER};

/// The Kinds of dependent, in the order they are deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DependentKind {
    /// An Application.
    Application,
    /// A Service (deleted once no Application of the owner is left, as it is held by them).
    Service,
}

/// An owner as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owner {
    /// Its uid.
    pub uid: String,
    /// Whether it has a `deletionTimestamp`.
    pub terminating: bool,
    /// Its finalizers.
    pub finalizers: Vec<String>,
}

/// A dependent naming the owner (by name) in its controller owner reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependent {
    /// Its Kind.
    pub kind: DependentKind,
    /// Its name.
    pub name: String,
    /// Its own uid.
    pub uid: String,
    /// The uid its controller owner reference names.
    pub owner_uid: String,
    /// Whether it has a `deletionTimestamp` already.
    pub terminating: bool,
    /// Whether its reference says `blockOwnerDeletion: true`: a foreground deletion of the
    /// owner waits for it.
    pub blocks_owner: bool,
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Delete the dependent (of this uid) whose owner is gone or going.
    Delete(DependentKind, String, String),
    /// Release the dependent: remove its reference to the owner and the owner's marks.
    Release(DependentKind, String),
    /// Remove this finalizer from the owner: what it waited for is done.
    RemoveFinalizer(&'static str),
}

/// What to do for one owner: `owner` as stored (`None` when there is none of that name) and the
/// dependents naming it. A dependent already being deleted is not deleted again; a foreground
/// owner waits for it all the same.
pub fn decide(owner: Option<&Owner>, dependents: &[Dependent]) -> Vec<Step> {
    let ours = |dependent: &&Dependent| owner.is_some_and(|owner| owner.uid == dependent.owner_uid);
    let (owned, dangling): (Vec<&Dependent>, Vec<&Dependent>) = dependents.iter().partition(ours);
    let mut steps = Vec::new();
    let any_application = |list: &[&Dependent]| list.iter().any(|d| d.kind == DependentKind::Application);
    let delete_all = |list: &[&Dependent], steps: &mut Vec<Step>| {
        let applications_left = any_application(list);
        for dependent in list {
            if dependent.terminating || (dependent.kind == DependentKind::Service && applications_left) {
                continue;
            }
            steps.push(Step::Delete(dependent.kind, dependent.name.clone(), dependent.uid.clone()));
        }
    };
    delete_all(&dangling, &mut steps);
    let Some(owner) = owner.filter(|owner| owner.terminating) else { return steps };
    let has = |finalizer: &str| owner.finalizers.iter().any(|f| f == finalizer);
    if has(ORPHAN_FINALIZER) {
        steps.extend(owned.iter().map(|dependent| Step::Release(dependent.kind, dependent.name.clone())));
        if owned.is_empty() {
            steps.push(Step::RemoveFinalizer(ORPHAN_FINALIZER));
        }
        return steps;
    }
    delete_all(&owned, &mut steps);
    if has(FOREGROUND_FINALIZER) && !owned.iter().any(|dependent| dependent.blocks_owner) {
        steps.push(Step::RemoveFinalizer(FOREGROUND_FINALIZER));
    }
    steps
}

#[cfg(test)]
mod tests;
