//! The signer's rules, table by table.

use std::time::Duration;

use super::*;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

/// One request: signer, usages, requester and groups, requested CN and O.
struct Case {
    signer: &'static str,
    usages: &'static [&'static str],
    username: &'static str,
    groups: &'static [&'static str],
    cn: &'static str,
    o: &'static [&'static str],
}

const NODE_USAGES: &[&str] = &["digital signature", "client auth"];

fn bootstrap(cn: &'static str, o: &'static [&'static str]) -> Case {
    Case {
        signer: KUBELET_CLIENT_SIGNER,
        usages: NODE_USAGES,
        username: "system:bootstrap:abcdef",
        groups: &["system:bootstrappers", "system:authenticated"],
        cn,
        o,
    }
}

fn with<T>(case: &Case, f: impl FnOnce(&Request<'_>) -> T) -> T {
    let (usages, groups) = (strings(case.usages), strings(case.groups));
    let subject = RequestedSubject { common_name: case.cn.to_owned(), organizations: strings(case.o) };
    f(&Request {
        signer_name: case.signer,
        usages: &usages,
        expiration_seconds: None,
        username: case.username,
        groups: &groups,
        subject: &subject,
    })
}

#[test]
fn approved_without_a_person_are_bootstrap_and_renewal_requests_for_node_client_certificates() {
    let renewal = |username: &'static str, groups: &'static [&'static str]| Case {
        username,
        groups,
        ..bootstrap("system:node:n1", &["system:nodes"])
    };
    let cases: &[(Case, bool, &str)] = &[
        (bootstrap("system:node:n1", &["system:nodes"]), true, "a bootstrap token asks for a node"),
        (renewal("system:node:n1", &["system:nodes", "system:authenticated"]), true, "a node renews itself"),
        (renewal("system:node:n2", &["system:nodes"]), false, "a node asks for another node"),
        (renewal("system:node:n1", &["system:authenticated"]), false, "a node's name outside system:nodes"),
        (renewal("admin", &["system:masters"]), false, "an admin's request waits for a person"),
        (bootstrap("system:node:n1", &["system:masters"]), false, "a bootstrap request for another group"),
        (bootstrap("system:node:n1", &["system:nodes", "system:masters"]), false, "an extra group"),
        (bootstrap("system:node:n1", &[]), false, "no group"),
        (bootstrap("admin", &["system:nodes"]), false, "not a node's name"),
        (bootstrap("system:node:", &["system:nodes"]), false, "an empty node name"),
        (
            Case { signer: CLIENT_SIGNER, ..bootstrap("system:node:n1", &["system:nodes"]) },
            false,
            "another signer",
        ),
        (
            Case {
                usages: &["client auth", "server auth"],
                ..bootstrap("system:node:n1", &["system:nodes"])
            },
            false,
            "server usage",
        ),
        (
            Case { usages: &["digital signature"], ..bootstrap("system:node:n1", &["system:nodes"]) },
            false,
            "no client usage",
        ),
    ];
    for (case, approved, why) in cases {
        assert_eq!(with(case, auto_approval).is_some(), *approved, "{why}");
    }
}

#[test]
fn an_approved_request_is_signed_with_the_signers_subject() {
    let node =
        RequestedSubject { common_name: "system:node:n1".into(), organizations: strings(&["system:nodes"]) };
    let year = NODE_CERTIFICATE_TTL;
    let cases: &[(Case, Answer, &str)] = &[
        (
            bootstrap("system:node:n1", &["system:nodes"]),
            Answer::Sign(Signing { subject: node.clone(), ttl: year }),
            "a node",
        ),
        (
            bootstrap("system:node:n1", &["system:masters"]),
            Answer::Sign(Signing { subject: node.clone(), ttl: year }),
            "a node certificate's groups come from the signer, never from the request",
        ),
        (
            Case { signer: CLIENT_SIGNER, ..bootstrap("jane", &["devs"]) },
            Answer::Sign(Signing {
                subject: RequestedSubject { common_name: "jane".into(), organizations: strings(&["devs"]) },
                ttl: year,
            }),
            "an API client signed as it asked, once a person approved it",
        ),
        (
            Case { signer: "example.com/other", ..bootstrap("jane", &[]) },
            Answer::NotOurs,
            "another signer's request is left alone",
        ),
    ];
    for (case, expect, why) in cases {
        assert_eq!(&with(case, answer), expect, "{why}");
    }
    let failed = |case: Case| matches!(with(&case, answer), Answer::Fail(_));
    assert!(failed(bootstrap("jane", &["system:nodes"])), "the kubelet signer signs only node names");
    assert!(failed(Case { usages: &["server auth"], ..bootstrap("system:node:n1", &["system:nodes"]) }));
    assert!(failed(Case {
        signer: CLIENT_SIGNER,
        usages: &["server auth", "client auth"],
        ..bootstrap("jane", &[])
    }));
    assert!(failed(Case { signer: CLIENT_SIGNER, ..bootstrap("", &[]) }));
}

#[test]
fn a_certificate_lives_a_year_or_less_when_asked_never_under_ten_minutes() {
    let cases = [
        (None, NODE_CERTIFICATE_TTL),
        (Some(3600), Duration::from_secs(3600)),
        (Some(600), Duration::from_secs(600)),
        (Some(60), MIN_CERTIFICATE_TTL),
        (Some(-5), MIN_CERTIFICATE_TTL),
        (Some(i32::MAX), NODE_CERTIFICATE_TTL),
    ];
    for (asked, expect) in cases {
        assert_eq!(requested_ttl(asked), expect, "{asked:?}");
    }
    assert_eq!(kept_for(true), Duration::from_secs(3600));
    assert_eq!(kept_for(false), Duration::from_secs(86_400));
}
