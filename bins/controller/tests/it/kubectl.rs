//! The acceptance script of `kubectl-contract.md` (items 1–21, 24–37, 44 and 47), adapted to
//! Kayra's Application, against the real binary on sled and on etcd. Every kubectl call uses a
//! fresh `--cache-dir`.

use std::process::Output;
use std::time::Duration;

use kayra_store_etcd::test_server::{EtcdServer, StartError, skip_test};

use super::{Controller, have_kubectl};

const G: &str = "fleet.example.com";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs a step that must succeed; answers its stdout.
fn ok(c: &Controller, item: &str, args: &[&str]) -> String {
    let output = c.kubectl(args);
    assert!(
        output.status.success(),
        "item {item}: kubectl {args:?} failed:\n{}\n{}\n--- controller log ---\n{}",
        text(&output.stdout),
        text(&output.stderr),
        c.log()
    );
    text(&output.stdout)
}

/// Runs a step that must fail; answers its stderr.
fn fails(c: &Controller, item: &str, args: &[&str]) -> String {
    let output: Output = c.kubectl(args);
    assert!(
        !output.status.success(),
        "item {item}: kubectl {args:?} should have failed:\n{}",
        text(&output.stdout)
    );
    text(&output.stderr)
}

/// Polls until `done` holds, failing after 20 s.
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what} did not happen within 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn manifest(c: &Controller, name: &str, body: &str) -> String {
    let path = c.scratch().join(name);
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

fn application(name: &str, command: &str, extra: &str) -> String {
    format!(
        "apiVersion: {G}/v1\nkind: Application\nmetadata:\n  name: {name}\n  labels:\n    tier: web\n{extra}spec:\n  command: [\"{command}\", \"1000\"]\n"
    )
}

fn acceptance(c: &Controller) {
    // 2: the server reports minor 32 and no skew warning.
    let output = c.kubectl(&["version", "-o", "json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let version: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (version["serverVersion"]["major"].as_str(), version["serverVersion"]["minor"].as_str()),
        (Some("1"), Some("32"))
    );
    assert!(version["serverVersion"]["gitVersion"].as_str().unwrap().starts_with("v1.32"));
    assert!(!text(&output.stderr).contains("version difference"));

    // 4, 5: discovery.
    let versions = ok(c, "4", &["api-versions"]);
    assert!(
        versions.lines().any(|l| l == format!("{G}/v1")) && versions.lines().any(|l| l == "v1"),
        "{versions}"
    );
    let resources = ok(c, "5", &["api-resources", "-o", "wide"]);
    let line = resources.lines().find(|l| l.starts_with("applications ")).expect("applications listed");
    for word in [
        "app,apps",
        &format!("{G}/v1"),
        "true",
        "Application",
        "create",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ] {
        assert!(line.contains(word), "item 5: {word} missing from {line}");
    }

    // 6: aggregated discovery, so exactly three requests.
    let verbose = c.kubectl(&["-v=6", "get", "applications"]);
    assert_eq!(text(&verbose.stderr).matches("GET https").count(), 3, "item 6:\n{}", text(&verbose.stderr));

    // 7, 8: create, then create again.
    let a = manifest(c, "app-a.yaml", &application("a", "/bin/sleep", ""));
    assert_eq!(ok(c, "7", &["create", "-f", &a]).trim(), format!("application.{G}/a created"));
    let again = fails(c, "8", &["create", "-f", &a]);
    assert!(again.contains("(AlreadyExists)") && again.contains("\"a\" already exists"), "{again}");

    // 9: strict field validation, and its warning form.
    let bad = manifest(
        c,
        "bad.yaml",
        &format!(
            "apiVersion: {G}/v1\nkind: Application\nmetadata:\n  name: bad\nbogus: 1\nspec:\n  command: [\"/bin/true\"]\n"
        ),
    );
    assert!(
        fails(c, "9", &["create", "-f", &bad]).contains("strict decoding error: unknown field \"bogus\"")
    );
    let warned = c.kubectl(&["create", "-f", &bad, "--validate=warn"]);
    assert!(
        warned.status.success() && text(&warned.stderr).contains("Warning: unknown field \"bogus\""),
        "{}",
        text(&warned.stderr)
    );
    ok(c, "9", &["delete", "application", "bad"]);

    // 10–12: tables.
    let table = ok(c, "10", &["get", "app"]);
    let header = table.lines().next().unwrap();
    assert!(
        header.starts_with("NAME")
            && header.trim_end().ends_with("AGE")
            && table.lines().any(|l| l.starts_with("a ")),
        "{table}"
    );
    let wide = ok(c, "10", &["get", "app", "-o", "wide"]);
    assert!(wide.lines().next().unwrap().split_whitespace().count() > header.split_whitespace().count());
    let all = ok(c, "11", &["get", "app", "-A"]);
    assert_eq!(all.lines().nth(1).and_then(|l| l.split_whitespace().next()), Some("default"));
    assert!(ok(c, "12", &["get", "app", "--show-labels"]).contains("tier=web"));

    // 13, 14: selectors.
    assert_eq!(
        ok(c, "13", &["get", "app", "-l", "tier=web", "-o", "name"]).trim(),
        format!("application.{G}/a")
    );
    assert_eq!(ok(c, "13", &["get", "app", "-l", "tier=db", "-o", "name"]).trim(), "");
    let none = c.kubectl(&["get", "app", "-l", "tier=db"]);
    assert!(none.status.success() && text(&none.stderr).contains("No resources found in default namespace."));
    assert_eq!(
        ok(c, "14", &["get", "app", "--field-selector", "metadata.name=a", "-o", "name"]).trim(),
        format!("application.{G}/a")
    );
    assert!(
        fails(c, "14", &["get", "app", "--field-selector", "spec.bogus=x"])
            .contains("field label not supported")
    );

    // 15: chunked lists.
    for i in 1..=7 {
        let path =
            manifest(c, &format!("more-{i}.yaml"), &application(&format!("more{i}"), "/bin/sleep", ""));
        ok(c, "15", &["create", "-f", &path]);
    }
    let chunked = c.kubectl(&["-v=6", "get", "app", "--chunk-size=3"]);
    assert_eq!(text(&chunked.stderr).matches("continue=").count(), 2, "item 15:\n{}", text(&chunked.stderr));
    let names: Vec<String> = text(&chunked.stdout)
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    assert_eq!(names.len(), 8, "{names:?}");

    // 16, 17: JSON shape, and NotFound.
    let object: serde_json::Value =
        serde_json::from_str(&ok(c, "16", &["get", "app", "a", "-o", "json"])).unwrap();
    let meta = &object["metadata"];
    assert!(
        object["kind"] == "Application" && meta["uid"].is_string() && meta["resourceVersion"].is_string()
    );
    assert!(meta["creationTimestamp"].as_str().unwrap().ends_with('Z'));
    assert!(
        fails(c, "17", &["get", "app", "nope"])
            .contains(&format!("Error from server (NotFound): applications.{G} \"nope\" not found"))
    );

    // 18: a collection watch shows the row, then the change. The watch starts from the list's
    // revision, so a change made as soon as the row is printed is still seen.
    let watched = c.scratch().join("w.out");
    let mut watch = c.kubectl_background(&["get", "app", "-w"], &watched);
    let rows_of_a = |path: &std::path::Path| {
        std::fs::read_to_string(path).unwrap_or_default().lines().filter(|l| l.starts_with("a ")).count()
    };
    wait_for("item 18: the first row", || rows_of_a(&watched) >= 1);
    ok(c, "18", &["label", "app", "a", "x=1"]);
    wait_for("item 18: the change", || rows_of_a(&watched) >= 2);
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(rows_of_a(&watched), 2, "item 18:\n{}", std::fs::read_to_string(&watched).unwrap());

    // 19: a single-object watch gets its synthetic ADDED. kubectl prints the object from a GET,
    // then watches from revision 0 and drops that watch's first event, the synthetic ADDED, so
    // a change is seen only once the watch is registered: the server answers a watch once it
    // is, and kubectl logs the answer at -v=6. A second change shows that nothing came between
    // the two (a second ADDED, the first change twice).
    let watched = c.scratch().join("w1.out");
    let mut watch = c.kubectl_background(&["-v=6", "get", "app", "a", "-w", "-o", "name"], &watched);
    let lines = |path: &std::path::Path| std::fs::read_to_string(path).unwrap_or_default().lines().count();
    wait_for("item 19: the object", || lines(&watched) >= 1);
    let log = Controller::background_log(&watched);
    wait_for("item 19: the watch answered", || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("watch=true") && l.contains(" 200 OK "))
    });
    ok(c, "19", &["annotate", "app", "a", "n=1"]);
    wait_for("item 19: the change", || lines(&watched) >= 2);
    ok(c, "19", &["annotate", "app", "a", "m=1"]);
    wait_for("item 19: the second change", || lines(&watched) >= 3);
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(lines(&watched), 3, "item 19: {}", std::fs::read_to_string(&watched).unwrap_or_default());

    // 20: describe.
    let described = ok(c, "20", &["describe", "app", "a"]);
    for line in ["Name:         a", "Kind:         Application", "Spec:", "Events:"] {
        assert!(described.contains(line), "item 20: {line} missing:\n{described}");
    }

    // 21: client-side apply: configured, a merge patch, then unchanged.
    assert!(ok(c, "21", &["apply", "-f", &a]).contains("configured"));
    let a2 = manifest(c, "app-a2.yaml", &application("a", "/bin/sleepy", ""));
    assert!(ok(c, "21", &["apply", "-f", &a2]).contains("configured"));
    let unchanged = c.kubectl(&["-v=6", "apply", "-f", &a2]);
    assert!(
        text(&unchanged.stdout).contains("unchanged") && !text(&unchanged.stderr).contains("PATCH https"),
        "item 21"
    );

    // 24: edit.
    let edited = c.kubectl_with_editor(&["edit", "app", "a"], "sed -i s#sleepy#sleep3#");
    assert!(edited.status.success(), "item 24: {}", text(&edited.stderr));
    assert_eq!(ok(c, "24", &["get", "app", "a", "-o", "jsonpath={.spec.command[0]}"]), "/bin/sleep3");

    // 25–27: patch types.
    assert!(fails(c, "25", &["patch", "app", "a", "-p", r#"{"spec":{"args":["2"]}}"#]).contains(&format!(
        "application/strategic-merge-patch+json is not supported by {G}/v1, Kind=Application"
    )));
    assert!(
        ok(c, "26", &["patch", "app", "a", "--type=merge", "-p", r#"{"spec":{"args":["2"]}}"#])
            .trim()
            .ends_with("patched")
    );
    assert!(
        ok(c, "26", &["patch", "app", "a", "--type=merge", "-p", r#"{"spec":{"args":["2"]}}"#])
            .contains("patched (no change)")
    );
    assert!(
        ok(
            c,
            "27",
            &[
                "patch",
                "app",
                "a",
                "--type=json",
                "-p",
                r#"[{"op":"replace","path":"/spec/args/0","value":"3"}]"#
            ]
        )
        .trim()
        .ends_with("patched")
    );

    // 28, 29: labels, annotations, and a stale resourceVersion.
    assert!(ok(c, "28", &["label", "app", "a", "env=prod"]).contains("labeled"));
    fails(c, "28", &["label", "app", "a", "env=staging"]);
    assert!(ok(c, "28", &["label", "app", "a", "env-"]).contains("unlabeled"));
    assert!(
        fails(c, "29", &["annotate", "app", "a", "note=x", "--resource-version=1"]).contains("(Conflict)")
    );

    // 30–33: status and wait.
    ok(
        c,
        "30",
        &[
            "patch",
            "app",
            "a",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#,
        ],
    );
    assert!(
        ok(c, "30", &["wait", "--for=condition=Ready", "app/a", "--timeout=10s"]).contains("condition met")
    );
    let b = manifest(c, "app-b.yaml", &application("b", "/bin/sleep", ""));
    ok(c, "31", &["create", "-f", &b]);
    assert!(
        fails(c, "31", &["wait", "--for=condition=Ready", "app/b", "--timeout=3s"])
            .contains("timed out waiting for the condition on applications/b")
    );
    // The change is made while kubectl waits; from the patch's answer to the wait's end is the
    // watch's delivery, well under a second on a quiet machine. 10 s leaves a busy machine its
    // margin, and is half the wait's own timeout, which a missed change would run out.
    let patched = std::sync::OnceLock::new();
    let waited = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_secs(2));
            ok(
                c,
                "32",
                &[
                    "patch",
                    "app",
                    "b",
                    "--subresource=status",
                    "--type=merge",
                    "-p",
                    r#"{"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#,
                ],
            );
            let _ = patched.set(std::time::Instant::now());
        });
        ok(c, "32", &["wait", "--for=condition=Ready", "app/b", "--timeout=20s"]);
        std::time::Instant::now()
    });
    let delivered = waited.saturating_duration_since(*patched.get().expect("item 32: the patch was made"));
    eprintln!("item 32: kubectl wait ended {delivered:?} after the patch's answer");
    assert!(
        delivered < Duration::from_secs(10),
        "item 32: the watch delivers the change within 10 s (under 1 s on a quiet machine): {delivered:?}"
    );
    ok(c, "33", &["wait", "--for=jsonpath={.spec.command[0]}=/bin/sleep3", "app/a", "--timeout=5s"]);

    // 34: finalizers hold a deleted object until they are removed.
    ok(
        c,
        "34",
        &["patch", "app", "b", "--type=merge", "-p", r#"{"metadata":{"finalizers":["example.io/hold"]}}"#],
    );
    assert!(ok(c, "34", &["delete", "app", "b", "--wait=false"]).contains("deleted"));
    assert!(!ok(c, "34", &["get", "app", "b", "-o", "jsonpath={.metadata.deletionTimestamp}"]).is_empty());
    std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_secs(2));
            ok(c, "34", &["patch", "app", "b", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
        });
        assert!(
            ok(c, "34", &["wait", "--for=delete", "app/b", "--timeout=20s"])
                .contains(&format!("application.{G}/b condition met"))
        );
    });
    assert!(fails(c, "34", &["get", "app", "b"]).contains("NotFound"));

    // 35: delete, and a server-side dry run that deletes nothing.
    assert!(ok(c, "35", &["delete", "app", "more1"]).contains("deleted"));
    fails(c, "35", &["get", "app", "more1"]);
    let dry = ok(c, "35", &["delete", "app", "--all", "--dry-run=server"]);
    assert!(dry.contains("(server dry run)"), "{dry}");
    assert!(ok(c, "35", &["get", "app", "-o", "name"]).lines().count() >= 7);

    // 36, 37: explain from OpenAPI v3; no v2.
    let explained = ok(c, "36", &["explain", "applications"]);
    assert!(
        explained.starts_with(&format!("GROUP:      {G}\nKIND:       Application\nVERSION:    v1")),
        "{explained}"
    );
    assert!(ok(c, "36", &["explain", "app.spec"]).contains("command"));
    assert!(fails(c, "36", &["explain", "app.nope"]).contains("field \"nope\" does not exist"));
    assert!(fails(c, "37", &["get", "--raw", "/openapi/v2"]).contains("NotFound"));

    // 38–41: authorization reviews, identities, bearer tokens.
    assert_eq!(ok(c, "38", &["auth", "can-i", "list", "applications"]).trim(), "yes");
    assert_eq!(ok(c, "38", &["auth", "can-i", "get", "/healthz"]).trim(), "yes");
    assert_eq!(ok(c, "39", &["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]), "admin");
    c.add_token("bob-token", "bob");
    let bob =
        c.kubectl_with_token("bob-token", &["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]);
    assert_eq!(text(&bob.stdout), "bob", "{}", text(&bob.stderr));
    let denied = c.kubectl_with_token("bob-token", &["auth", "can-i", "delete", "applications"]);
    assert!(
        !denied.status.success() && text(&denied.stdout).trim() == "no",
        "item 38: a plain denial is a bare no, as Kubernetes prints it: {}",
        text(&denied.stdout)
    );
    let masked = c.kubectl_with_token("bob-token", &["-v=8", "get", "app", "a"]);
    assert!(text(&masked.stderr).contains("Authorization: Bearer <masked>"), "item 40");
    let wrong = c.kubectl_with_token("wrong-token", &["get", "app"]);
    assert!(
        !wrong.status.success() && text(&wrong.stderr).contains("You must be logged in to the server"),
        "item 41"
    );

    // can-i --list through SelfSubjectRulesReview, and --as through impersonation.
    let everything = ok(c, "can-i --list", &["auth", "can-i", "--list"]);
    assert!(everything.lines().any(|l| l.starts_with("*.*") && l.contains("[*]")), "{everything}");
    let view = manifest(
        c,
        "bob-views.yaml",
        "apiVersion: authorization.example.com/v1\nkind: RoleBinding\nmetadata:\n  name: bob-views\nsubjects:\n- kind: User\n  name: bob\nroleRef:\n  kind: ClusterRole\n  name: view\n",
    );
    ok(c, "can-i --list", &["create", "-f", &view]);
    let bob_list =
        || text(&c.kubectl_with_token("bob-token", &["auth", "can-i", "--list", "-n", "default"]).stdout);
    wait_for("bob's binding", || bob_list().contains(&format!("applications.{G}")));
    let listed = bob_list();
    let row = listed.lines().find(|l| l.starts_with(&format!("applications.{G} "))).unwrap();
    assert!(row.ends_with("[get list watch]"), "{listed}");
    assert_eq!(ok(c, "--as", &["auth", "can-i", "list", "applications", "--as", "bob"]).trim(), "yes");
    let as_bob = c.kubectl(&["auth", "can-i", "delete", "applications", "--as", "bob"]);
    assert_eq!(text(&as_bob.stdout).trim(), "no", "{}", text(&as_bob.stdout));
    assert!(ok(c, "--as", &["get", "app", "a", "--as", "bob", "-o", "name"]).contains("/a"));
    let refused = fails(c, "--as", &["delete", "app", "a", "--as", "bob"]);
    assert!(refused.contains("User \"bob\" cannot delete resource \"applications\""), "{refused}");
    let bob_promotes = c.kubectl_with_token("bob-token", &["get", "app", "--as", "admin"]);
    assert!(
        !bob_promotes.status.success()
            && text(&bob_promotes.stderr).contains("Error from server (Forbidden)"),
        "{}",
        text(&bob_promotes.stderr)
    );

    // 44: raw reads.
    let raw: serde_json::Value = serde_json::from_str(&ok(c, "44", &["get", "--raw", "/version"])).unwrap();
    assert_eq!(raw["minor"], "32");
    assert!(fails(c, "44", &["get", "--raw", "/nope"]).contains("(NotFound)"));

    // 47: kubectl create namespace sends protobuf.
    ok(c, "47", &["create", "namespace", "team-z"]);
    assert!(ok(c, "47", &["get", "ns", "-o", "name"]).contains("namespace/team-z"));

    // 48: several types at once.
    let set = manifest(
        c,
        "set.yaml",
        &format!(
            "apiVersion: {G}/v1\nkind: ApplicationSet\nmetadata:\n  name: shop\nspec:\n  applications:\n  - name: web\n    spec:\n      command: [\"/bin/web\"]\n"
        ),
    );
    ok(c, "48", &["create", "-f", &set]);
    let names = ok(c, "48", &["get", "app,appset", "-o", "name"]);
    assert!(names.lines().any(|l| l.starts_with(&format!("application.{G}/"))), "{names}");
    assert!(names.lines().any(|l| l == format!("applicationset.{G}/shop")), "{names}");

    // Pods are a read-only view of Applications.
    let pods = ok(c, "pods", &["get", "pods", "-o", "name"]);
    assert!(pods.lines().any(|l| l == "pod/a"), "{pods}");
    assert!(fails(c, "pods", &["delete", "pod", "a"]).contains("MethodNotAllowed"));

    // Nodes: created with their status, cordoned with a strategic merge patch.
    let node = manifest(
        c,
        "node.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\nstatus:\n  conditions:\n  - type: Ready\n    status: \"True\"\n  addresses:\n  - type: InternalIP\n    address: 10.0.0.7\n",
    );
    ok(c, "node", &["create", "-f", &node]);
    assert!(ok(c, "node", &["cordon", "n1"]).contains("cordoned"));
    let nodes = ok(c, "node", &["get", "nodes", "-o", "wide"]);
    assert!(nodes.contains("Ready,SchedulingDisabled") && nodes.contains("10.0.0.7"), "{nodes}");
    assert!(ok(c, "node", &["describe", "node", "n1"]).contains("Unschedulable:      true"));

    // The API catalog through kubectl: create, tables, YAML, explain.
    let registration = manifest(
        c,
        "registration.yaml",
        "apiVersion: catalog.example.com/v1\nkind: ApiRegistration\nmetadata:\n  name: compute.example.com\nshort_name: compute\nactive: true\nowner: sre-a\n",
    );
    let watched = c.scratch().join("registrations.out");
    let mut watch = c.kubectl_background(&["get", "apiregistrations", "-w"], &watched);
    let rows = |path: &std::path::Path| {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines().filter(|l| l.starts_with("compute.example.com")).count()
    };
    std::thread::sleep(Duration::from_millis(500));
    ok(c, "catalog", &["create", "-f", &registration]);
    wait_for("catalog: the watched registration", || rows(&watched) >= 1);
    let _ = watch.kill();
    let _ = watch.wait();
    let resources = ok(c, "catalog", &["api-resources"]);
    assert!(
        resources.contains("apiregistrations") && resources.contains("catalog.example.com/v1"),
        "{resources}"
    );
    let table = ok(c, "catalog", &["get", "apiregistrations"]);
    assert!(table.starts_with("NAME") && table.contains("SHORT") && table.contains("OWNER"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("compute.example.com") && l.contains("sre-a") && l.contains("true")),
        "{table}"
    );
    let yaml = ok(c, "catalog", &["get", "apiregistration", "compute.example.com", "-o", "yaml"]);
    assert!(yaml.contains("short_name: compute") && yaml.contains("kind: ApiRegistration"), "{yaml}");
    assert!(ok(c, "catalog", &["explain", "apiregistrations"]).contains("canary_namespaces"));
    let subscription = manifest(
        c,
        "subscription.yaml",
        "apiVersion: catalog.example.com/v1\nkind: Subscription\nmetadata:\n  name: compute.example.com\nactive: true\n",
    );
    ok(c, "catalog", &["create", "-n", "default", "-f", &subscription]);
    let subscriptions = ok(c, "catalog", &["get", "subscriptions", "-n", "default"]);
    assert!(
        subscriptions.contains("STATE") && subscriptions.contains("compute.example.com"),
        "{subscriptions}"
    );
    assert!(
        fails(c, "catalog", &["delete", "apiregistration", "compute.example.com"]).contains("subscriptions")
    );
    ok(c, "catalog", &["delete", "subscription", "compute.example.com", "-n", "default"]);
    ok(c, "catalog", &["delete", "apiregistration", "compute.example.com"]);

    // Deleting a namespace deletes what it holds, then the namespace.
    let z = manifest(c, "app-z.yaml", &application("z", "/bin/sleep", ""));
    ok(c, "ns", &["create", "-n", "team-z", "-f", &z]);
    assert!(ok(c, "ns", &["delete", "namespace", "team-z", "--timeout=20s"]).contains("deleted"));
    assert!(fails(c, "ns", &["get", "ns", "team-z"]).contains("NotFound"));
    assert!(fails(c, "ns", &["get", "app", "z", "-n", "team-z"]).contains("NotFound"));
}

impl Controller {
    fn kubectl_with_editor(&self, args: &[&str], editor: &str) -> Output {
        let cache = tempfile::tempdir().unwrap();
        std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--cache-dir")
            .arg(cache.path())
            .args(args)
            .env("EDITOR", editor)
            .env("KUBE_EDITOR", editor)
            .output()
            .expect("kubectl runs")
    }
}

#[test]
fn kubectl_acceptance_on_sled() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&[]);
    acceptance(&controller);
}

#[test]
fn kubectl_acceptance_on_etcd() {
    if !have_kubectl() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = match runtime.block_on(EtcdServer::start()) {
        Ok(server) => server,
        Err(StartError::Missing) => return skip_test(StartError::Missing),
        Err(error) => panic!("{error}"),
    };
    let controller = Controller::start(&["--store", "etcd", "--etcd-endpoints", server.endpoint()]);
    acceptance(&controller);
}

#[test]
fn credentials_are_required_on_both_listeners() {
    let controller = Controller::start(&["--store", "memory"]);
    let curl = |args: &[&str]| {
        let output = std::process::Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
            .args(args)
            .output()
            .expect("curl runs");
        text(&output.stdout)
    };
    let token = format!("Authorization: Bearer {}", controller.token());
    let http = controller.http_url();
    assert_eq!(curl(&[&format!("{http}/api/v1/namespaces")]), "401");
    assert_eq!(curl(&["-H", "Authorization: Bearer wrong", &format!("{http}/api/v1/namespaces")]), "401");
    assert_eq!(curl(&["-H", &token, &format!("{http}/api/v1/namespaces")]), "200");
    assert_eq!(curl(&["-H", &token, &format!("{http}/no/such/path")]), "404");
    assert_eq!(
        curl(&[&format!("{http}/no/such/path")]),
        "401",
        "an unknown path is 404 only to an authenticated caller"
    );
    assert_eq!(curl(&[&format!("{http}/healthz")]), "200");
    // A refused request's body is read, so its client gets the answer and not a reset.
    let body = format!("{{\"pad\":\"{}\"}}", "x".repeat(64 * 1024));
    for _ in 0..20 {
        let apps = format!("{}/apis/fleet.example.com/v1/namespaces/default/applications", controller.url());
        let code = curl(&["-k", "-X", "POST", "-H", "Content-Type: application/json", "-d", &body, &apps]);
        assert_eq!(code, "401", "an unauthenticated POST with a body");
    }
    assert_eq!(curl(&["-k", &format!("{}/api/v1/namespaces", controller.url())]), "401");
    assert_eq!(curl(&["-k", "-H", &token, &format!("{}/api/v1/namespaces", controller.url())]), "200");
}
