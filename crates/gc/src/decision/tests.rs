//! The garbage collector's decisions, one row per case: owner present, absent, made again
//! (another uid), or terminating with each finalizer; dependents owned, dangling or going.

use super::{Dependent, DependentKind, Owner, Step, decide};

use DependentKind::{Application, Service};

fn owner(terminating: bool, finalizers: &[&str]) -> Owner {
    Owner {
        uid: "u1".to_owned(),
        terminating,
        finalizers: finalizers.iter().map(|f| (*f).to_owned()).collect(),
    }
}

/// A dependent `name` of `kind` naming owner uid `owner_uid`; `going` when being deleted.
fn dependent(kind: DependentKind, name: &str, owner_uid: &str, going: bool) -> Dependent {
    Dependent {
        kind,
        name: name.to_owned(),
        uid: format!("{name}-uid"),
        owner_uid: owner_uid.to_owned(),
        terminating: going,
        blocks_owner: true,
    }
}

fn delete(kind: DependentKind, name: &str) -> Step {
    Step::Delete(kind, name.to_owned(), format!("{name}-uid"))
}

fn release(kind: DependentKind, name: &str) -> Step {
    Step::Release(kind, name.to_owned())
}

/// Why, the owner as stored, its dependents, and the steps expected.
type Row = (&'static str, Option<Owner>, Vec<Dependent>, Vec<Step>);

#[test]
fn each_owner_state_and_finalizer_gives_its_steps() {
    let app = |name: &str, uid: &str| dependent(Application, name, uid, false);
    let svc = |name: &str, uid: &str| dependent(Service, name, uid, false);
    let going = |name: &str, uid: &str| dependent(Application, name, uid, true);
    let live = owner(false, &[]);
    let table: Vec<Row> = vec![
        (
            "a live owner keeps its dependents",
            Some(live.clone()),
            vec![app("a", "u1"), svc("s", "u1")],
            vec![],
        ),
        ("an owner with no dependents: nothing", Some(live.clone()), vec![], vec![]),
        (
            "an absent owner: its Applications go, then its Services",
            None,
            vec![app("a", "u1"), app("b", "u1"), svc("s", "u1")],
            vec![delete(Application, "a"), delete(Application, "b")],
        ),
        (
            "an absent owner, Applications gone: the Service goes",
            None,
            vec![svc("s", "u1")],
            vec![delete(Service, "s")],
        ),
        (
            "an absent owner, Applications still going: the Service waits",
            None,
            vec![going("a", "u1"), svc("s", "u1")],
            vec![],
        ),
        (
            "an owner made again: the old one's dependents go, the new one's stay",
            Some(live.clone()),
            vec![app("old", "u0"), app("new", "u1")],
            vec![delete(Application, "old")],
        ),
        (
            "background deletion (no finalizer left to hold it): dependents go",
            Some(owner(true, &["other"])),
            vec![app("a", "u1"), svc("s", "u1")],
            vec![delete(Application, "a")],
        ),
        (
            "foreground: dependents go while the owner waits",
            Some(owner(true, &["foregroundDeletion"])),
            vec![app("a", "u1"), going("b", "u1"), svc("s", "u1")],
            vec![delete(Application, "a")],
        ),
        (
            "foreground, only the Service left: it goes, the owner still waits",
            Some(owner(true, &["foregroundDeletion"])),
            vec![svc("s", "u1")],
            vec![delete(Service, "s")],
        ),
        (
            "foreground, nothing left: the finalizer goes",
            Some(owner(true, &["foregroundDeletion"])),
            vec![],
            vec![Step::RemoveFinalizer("foregroundDeletion")],
        ),
        (
            "foreground, only a dependent that does not block: it goes and the finalizer too",
            Some(owner(true, &["foregroundDeletion"])),
            vec![Dependent { blocks_owner: false, ..app("a", "u1") }],
            vec![delete(Application, "a"), Step::RemoveFinalizer("foregroundDeletion")],
        ),
        (
            "orphan: every dependent is released, Services too",
            Some(owner(true, &["orphan"])),
            vec![app("a", "u1"), going("b", "u1"), svc("s", "u1")],
            vec![release(Application, "a"), release(Application, "b"), release(Service, "s")],
        ),
        (
            "orphan, all released: the finalizer goes",
            Some(owner(true, &["orphan"])),
            vec![],
            vec![Step::RemoveFinalizer("orphan")],
        ),
        (
            "orphan keeps only what is its own: an older owner's leftovers still go",
            Some(owner(true, &["orphan"])),
            vec![app("old", "u0"), app("a", "u1")],
            vec![delete(Application, "old"), release(Application, "a")],
        ),
        (
            "a live owner with an orphan finalizer set by hand: nothing until it is deleted",
            Some(owner(false, &["orphan"])),
            vec![app("a", "u1")],
            vec![],
        ),
    ];
    for (why, owner, dependents, expected) in table {
        assert_eq!(decide(owner.as_ref(), &dependents), expected, "{why}");
    }
}
