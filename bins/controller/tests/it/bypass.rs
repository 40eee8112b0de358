//! The authorization bypass matrix: every request of the table answers its expected code over
//! real HTTPS, and no body carries a byte of what the caller may not read.
//!
//! `alice` may get, list and watch applications in namespace `a` only. Namespace `b` holds an
//! Application whose content is a canary string; namespace `a` holds an ApplicationSet with a
//! marker of its own, which a list of applications must never return (only the Application
//! the set renders from it).

use std::process::Command;

use crate::{Controller, have_kubectl};

const G: &str = "/apis/fleet.example.com/v1";
const CANARY: &str = "CANARY-9f2c61";
const SET_MARKER: &str = "SETMARK-41d0";

struct Answer {
    code: u16,
    body: String,
}

fn curl(controller: &Controller, args: &[&str], path: &str) -> Answer {
    let body = tempfile::NamedTempFile::new().unwrap();
    let output = Command::new("curl")
        .args(["--path-as-is", "-s", "--max-time", "5", "-o"])
        .arg(body.path())
        .args(["-w", "%{http_code}", "--cacert"])
        .arg(controller.scratch().join("data/pki/ca.crt"))
        .args(args)
        .arg(format!("{}{path}", controller.url()))
        .output()
        .expect("curl runs");
    let code = String::from_utf8_lossy(&output.stdout).trim().parse().unwrap_or(0);
    Answer { code, body: std::fs::read_to_string(body.path()).unwrap_or_default() }
}

fn setup(controller: &Controller) {
    let manifest = format!(
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: a
---
apiVersion: v1
kind: Namespace
metadata:
  name: b
---
apiVersion: authorization.example.com/v1
kind: Role
metadata:
  name: app-reader
  namespace: a
rules:
- apis: ["fleet.example.com"]
  resources: ["applications"]
  verbs: ["get", "list", "watch"]
---
apiVersion: authorization.example.com/v1
kind: RoleBinding
metadata:
  name: alice-reads
  namespace: a
subjects:
- kind: User
  name: alice
roleRef:
  kind: Role
  name: app-reader
---
apiVersion: fleet.example.com/v1
kind: Application
metadata:
  name: canary
  namespace: b
  labels:
    secret: "{CANARY}"
spec:
  command: ["/bin/echo", "{CANARY}"]
  env:
  - name: TOKEN
    value: "{CANARY}"
---
apiVersion: fleet.example.com/v1
kind: Application
metadata:
  name: web
  namespace: a
spec:
  command: ["/bin/web"]
---
apiVersion: fleet.example.com/v1
kind: ApplicationSet
metadata:
  name: shop
  namespace: a
spec:
  applications:
  - name: web
    spec:
      command: ["/bin/echo", "{SET_MARKER}"]
"#
    );
    let path = controller.scratch().join("bypass.yaml");
    std::fs::write(&path, manifest).unwrap();
    let created = controller.kubectl(&["apply", "-f", &path.display().to_string()]);
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    controller.add_token("alice-token", "alice");
}

#[test]
fn the_bypass_matrix_finds_nothing() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "memory"]);
    setup(&controller);
    let alice = ["-H", "Authorization: Bearer alice-token"];
    let as_alice = |path: &str| curl(&controller, &alice, path);
    // The binding reaches the RBAC index within a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while as_alice(&format!("{G}/namespaces/a/applications")).code != 200 {
        assert!(std::time::Instant::now() < deadline, "alice's binding never took effect");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    let with = |extra: &[&'static str]| -> Vec<&'static str> { [&alice[..], extra].concat() };
    let ns_b = format!("{G}/namespaces/b/applications");
    #[rustfmt::skip]
    let cases: Vec<(Vec<&str>, String, &[u16], &str)> = vec![
        (with(&[]), ns_b.clone(), &[403], "another namespace"),
        (with(&[]), format!("{ns_b}/canary"), &[403], "an object in another namespace"),
        (with(&[]), format!("{ns_b}/no-such-app"), &[403], "a missing object there answers the same"),
        (with(&[]), format!("{G}/namespaces/a/../b/applications"), &[400, 404], "dot-dot"),
        (with(&[]), format!("{G}/namespaces/a%2F..%2Fb/applications"), &[400], "encoded slashes"),
        (with(&[]), format!("{G}/namespaces/a%2f..%2fb/applications"), &[400], "lowercase encoding"),
        (with(&[]), format!("{G}/namespaces/%2e%2e/b/applications"), &[400], "encoded dots"),
        (with(&[]), format!("{G}/namespaces/a%5c..%5cb/applications"), &[400], "encoded backslashes"),
        (with(&[]), format!("{G}/namespaces/a%252F..%252Fb/applications"), &[400], "double encoding"),
        (with(&[]), format!("{G}/namespaces/b%2Fapplications"), &[400], "an encoded slash in a segment"),
        (with(&[]), format!("{G}/namespaces/../applications"), &[400, 404], "dot-dot for the namespace"),
        (with(&[]), format!("{G}/namespaces/./applications"), &[400, 404], "a dot segment"),
        (with(&[]), format!("/{G}/namespaces/b/applications"), &[400, 403, 404], "a leading double slash"),
        (with(&[]), format!("{G}/namespaces/b/applications/"), &[400, 403, 404], "a trailing slash"),
        (with(&[]), "/APIS/fleet.example.com/v1/namespaces/b/applications".to_owned(), &[403, 404], "upper case"),
        (with(&[]), format!("{G}/namespaces/a/nodes"), &[404], "a cluster-scoped kind through a namespaced path"),
        (with(&[]), "/api/v1/namespaces/a/nodes".to_owned(), &[404], "the core group too"),
        (with(&[]), "/api/v1/namespaces/a/namespaces".to_owned(), &[404], "namespaces inside a namespace"),
        (with(&[]), format!("{G}/namespaces/a/applicationsets"), &[403], "a kind sharing the prefix"),
        (with(&[]), format!("{ns_b}?watch=1"), &[403], "watch=1"),
        (with(&[]), format!("{ns_b}?watch=True"), &[403], "watch=True"),
        (with(&[]), format!("{ns_b}?watch=true&watch=false"), &[403], "repeated watch"),
        (with(&[]), format!("{G}/applications"), &[403], "every namespace at once"),
        (with(&[]), format!("{G}/applications?watch=true"), &[403], "watching every namespace"),
        (with(&[]), "/api/v1/namespaces/b".to_owned(), &[403], "the other namespace object"),
        (with(&["-H", "Impersonate-User: admin"]), format!("{G}/namespaces/a/applications"), &[403], "impersonation without the right"),
        (with(&["-H", "Impersonate-User: alice", "-H", "Impersonate-Group: system:masters"]), ns_b.clone(), &[403], "promotion through a group"),
        (with(&["-X", "DELETE"]), format!("{G}/namespaces/a/applications/web"), &[403], "a delete alice may not make"),
        (with(&["-X", "POST", "-H", "Content-Type: application/json", "-d", r#"{"apiVersion":"fleet.example.com/v1","kind":"Application","metadata":{"name":"x","namespace":"b"},"spec":{"command":["/bin/x"]}}"#]),
            format!("{G}/namespaces/a/applications"), &[400, 403], "a body namespace unlike the path's"),
        (vec![], format!("{G}/namespaces/a/applications"), &[401], "anonymous, a resource"),
        (vec![], "/api".to_owned(), &[401], "anonymous, discovery"),
        (vec![], "/version".to_owned(), &[401], "anonymous, version"),
        (vec![], "/openapi/v3".to_owned(), &[401], "anonymous, OpenAPI"),
        (vec![], "/no/such/path".to_owned(), &[401], "anonymous, nothing"),
        (vec!["-H", "Authorization: Bearer wrong"], ns_b.clone(), &[401], "a wrong token"),
        (vec!["-H", "Authorization: Basic YWRtaW46YWRtaW4="], ns_b.clone(), &[401], "basic auth"),
        (vec![], "/healthz".to_owned(), &[200], "anonymous health"),
    ];
    let mut failures = Vec::new();
    for (args, path, expected, what) in &cases {
        let answer = curl(&controller, args, path);
        if !expected.contains(&answer.code) {
            failures.push(format!(
                "{what}: {path} answered {} (expected {expected:?}): {}",
                answer.code, answer.body
            ));
        }
        if answer.body.contains(CANARY) {
            failures.push(format!("{what}: {path} leaked the canary: {}", answer.body));
        }
    }

    // What alice may read carries no foreign bytes either: no applicationset in a list of
    // applications, and GET semantics whatever override header is sent.
    let list = as_alice(&format!("{G}/namespaces/a/applications"));
    assert_eq!(list.code, 200);
    // (The set's own child, an Application rendered from it, is rightly listed.)
    let listed: serde_json::Value = serde_json::from_str(&list.body).unwrap();
    for item in listed["items"].as_array().unwrap() {
        let a_set = item.pointer("/spec/applications").is_some() || item["metadata"]["name"] == "shop";
        assert!(!a_set, "an ApplicationSet in a list of applications: {item}");
    }
    assert!(list.body.contains("\"web\""), "{}", list.body);
    for header in ["X-HTTP-Method-Override: DELETE", "X-HTTP-Method: DELETE", "X-Method-Override: DELETE"] {
        let overridden =
            curl(&controller, &with(&["-H", header]), &format!("{G}/namespaces/a/applications/web"));
        assert_eq!(overridden.code, 200, "{header}: {}", overridden.body);
    }
    assert_eq!(as_alice(&format!("{G}/namespaces/a/applications/web")).code, 200, "nothing was deleted");
    let watched =
        curl(&controller, &with(&[]), &format!("{G}/namespaces/a/applications?watch=1&timeoutSeconds=1"));
    assert_eq!(watched.code, 200);
    assert!(!watched.body.contains(CANARY), "{}", watched.body);
    for line in watched.body.lines().filter(|line| !line.trim().is_empty()) {
        let event: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(
            event.pointer("/object/spec/applications").is_none(),
            "an ApplicationSet in a watch of applications: {line}"
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
