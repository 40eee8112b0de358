//! `kubectl apply --server-side` against the real binary: the README's examples applied (and
//! created by the apply), a second manager's conflict as kubectl prints it, `--force-conflicts`,
//! `kubectl scale` then an apply without `replicas`, `kubectl diff --server-side`, a server-side
//! dry run, the managers `--show-managed-fields` shows, and the move from client-side apply.
//! Every kubectl call uses a fresh `--cache-dir`.

use std::path::Path;
use std::process::Output;

use super::{Controller, have_kubectl};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs a step that must succeed; answers its stdout.
fn ok(c: &Controller, step: &str, args: &[&str]) -> String {
    let output = c.kubectl(args);
    assert!(
        output.status.success(),
        "{step}: kubectl {args:?} failed:\n{}\n{}\n--- controller log ---\n{}",
        text(&output.stdout),
        text(&output.stderr),
        c.log()
    );
    text(&output.stdout)
}

/// Runs a step that must fail; answers it.
fn fails(c: &Controller, step: &str, args: &[&str]) -> Output {
    let output = c.kubectl(args);
    assert!(
        !output.status.success(),
        "{step}: kubectl {args:?} should have failed:\n{}",
        text(&output.stdout)
    );
    output
}

fn example(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn manifest(c: &Controller, name: &str, body: &str) -> String {
    let path = c.scratch().join(name);
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

/// The lines a `kubectl diff` changes, without its file headers.
fn changed_lines(diff: &str) -> Vec<String> {
    diff.lines()
        .filter(|line| {
            (line.starts_with('+') || line.starts_with('-'))
                && !line.starts_with("+++")
                && !line.starts_with("---")
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn kubectl_server_side_apply() {
    if !have_kubectl() {
        return;
    }
    let c = Controller::start(&[]);

    // The README's examples, created by the apply itself.
    let application = manifest(&c, "application.yaml", &example("application.yaml"));
    let set = manifest(&c, "applicationset.yaml", &example("applicationset.yaml"));
    let service = manifest(&c, "service.yaml", &example("service.yaml"));
    for (path, created) in [
        (&application, vec!["application.fleet.example.com/hello serverside-applied"]),
        (&set, vec!["applicationset.fleet.example.com/shop serverside-applied"]),
        (
            &service,
            vec![
                "service.fleet.example.com/web serverside-applied",
                "application.fleet.example.com/web-ready serverside-applied",
                "application.fleet.example.com/web-unready serverside-applied",
            ],
        ),
    ] {
        let printed = ok(&c, "create-on-apply", &["apply", "--server-side", "-f", path]);
        assert_eq!(printed.lines().collect::<Vec<_>>(), created);
    }
    let managed = ok(&c, "managers", &["get", "app", "hello", "-o", "yaml", "--show-managed-fields"]);
    assert!(managed.contains("manager: kubectl\n    operation: Apply"), "{managed}");
    assert!(managed.contains("k:{\"name\":\"GREETING\"}"), "{managed}");
    assert!(
        !ok(&c, "managers", &["get", "app", "hello", "-o", "yaml"]).contains("managedFields"),
        "kubectl hides them unless asked"
    );

    // A second manager's different value conflicts, named as kubectl prints it; forced, it wins.
    let other =
        manifest(&c, "other.yaml", &example("application.yaml").replace("value: hello", "value: bonjour"));
    let refused = fails(&c, "conflict", &["apply", "--server-side", "--field-manager=other", "-f", &other]);
    let stderr = text(&refused.stderr);
    assert!(
        stderr.contains(
            "error: Apply failed with 1 conflict: conflict with \"kubectl\": .spec.env[name=\"GREETING\"].value"
        ) && stderr.contains("--force-conflicts"),
        "{stderr}"
    );
    assert_eq!(ok(&c, "conflict", &["get", "app", "hello", "-o", "jsonpath={.spec.env[0].value}"]), "hello");
    ok(&c, "force", &["apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", &other]);
    assert_eq!(ok(&c, "force", &["get", "app", "hello", "-o", "jsonpath={.spec.env[0].value}"]), "bonjour");
    let managed = ok(&c, "force", &["get", "app", "hello", "-o", "yaml", "--show-managed-fields"]);
    assert!(managed.contains("manager: other"), "{managed}");

    // `kubectl scale`, then the set applied without replicas: the scaled value stays.
    assert!(ok(&c, "scale", &["scale", "appset/shop", "--replicas=5"]).contains("scaled"));
    let unscaled = example("applicationset.yaml").replace("      scale:\n        replicas: 3\n", "");
    assert_ne!(unscaled, example("applicationset.yaml"), "the example scales web by replicas");
    let unscaled_path = manifest(&c, "shop.yaml", &unscaled);
    ok(&c, "scale", &["apply", "--server-side", "-f", &unscaled_path]);
    let replicas = "jsonpath={.spec.applications[?(@.name==\"web\")].scale.replicas}";
    assert_eq!(ok(&c, "scale", &["get", "appset", "shop", "-o", replicas]), "5");

    // `kubectl diff --server-side`: nothing for what is applied, only the change for a change.
    let same = c.kubectl(&["diff", "--server-side", "-f", &unscaled_path]);
    assert!(
        same.status.success() && text(&same.stdout).is_empty(),
        "{}{}",
        text(&same.stdout),
        text(&same.stderr)
    );
    let changed = manifest(&c, "shop-2.yaml", &unscaled.replace("maxUnavailable: 1", "maxUnavailable: 2"));
    let diff = c.kubectl(&["diff", "--server-side", "-f", &changed]);
    assert_eq!(diff.status.code(), Some(1), "differences: {}", text(&diff.stderr));
    assert_eq!(
        changed_lines(&text(&diff.stdout)),
        ["-  generation: 2", "+  generation: 3", "-    maxUnavailable: 1", "+    maxUnavailable: 2"],
        "{}",
        text(&diff.stdout)
    );

    // A server-side dry run answers as if applied, and stores nothing.
    let dry = manifest(&c, "dry.yaml", &example("application.yaml").replace("name: hello", "name: dry"));
    let printed = ok(&c, "dry run", &["apply", "--server-side", "--dry-run=server", "-f", &dry]);
    assert_eq!(printed.trim(), "application.fleet.example.com/dry serverside-applied (server dry run)");
    assert!(text(&fails(&c, "dry run", &["get", "app", "dry"]).stderr).contains("NotFound"));

    // Made by client-side apply, then applied server-side with a change: kubectl takes over
    // what it applied before, with no conflict, as kube-apiserver lets it.
    let client_side = example("application.yaml").replace("name: hello", "name: moved");
    let moved = manifest(&c, "moved.yaml", &client_side);
    assert!(ok(&c, "migration", &["apply", "-f", &moved]).contains("created"));
    let changed = manifest(&c, "moved-2.yaml", &client_side.replace("value: hello", "value: salut"));
    ok(&c, "migration", &["apply", "--server-side", "-f", &changed]);
    assert_eq!(ok(&c, "migration", &["get", "app", "moved", "-o", "jsonpath={.spec.env[0].value}"]), "salut");
    let managed = ok(&c, "migration", &["get", "app", "moved", "-o", "yaml", "--show-managed-fields"]);
    assert!(!managed.contains("kubectl-client-side-apply"), "kubectl folded it into its own:\n{managed}");
}
