//! A workload's identity directory, with a real supervisor: the tokens pushed for it are in
//! files only its user may read, replaced in place when a fresh one comes, and (the agent
//! being root) mounted at the service-account path in a mount namespace the host does not see.

use std::os::unix::fs::MetadataExt;

use kayra_api::kinds::application::MOUNT_PATH;
use kayra_api::session::ProjectedToken;
use kayra_runtime::runtime::{ApiAccess, Desired, Runtime};

use crate::*;

fn token(uid: &str, path: &str, text: &str) -> ProjectedToken {
    ProjectedToken { uid: uid.to_owned(), path: path.to_owned(), token: text.to_owned(), expires_at: 1 }
}

#[tokio::test]
async fn a_workload_reads_its_tokens_at_the_service_account_path_and_sees_them_refreshed() {
    let node = Node::new("identity");
    let mut config = node.config();
    config.api = Some(ApiAccess { host: "192.0.2.2".into(), port: 6443, ca_pem: "CA PEM\n".into() });
    let runtime = Runtime::open(config).await.expect("the runtime opens");
    let root = rustix::process::geteuid().is_root();
    let script = r#"d="$KAYRA_IDENTITY_DIR"; while :; do echo "at=$d host=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT ns=$(cat $d/namespace) ca=$(cat $d/ca.crt) token=$(cat $d/token)"; sleep 0.1; done"#;
    let app = application("prover", node.shell(script));
    let uid = app.metadata.uid.clone().expect("a uid");
    let other = application("bystander", node.shell("sleep 1000"));
    let other_uid = other.metadata.uid.clone().expect("a uid");
    let apply = |first: &str| Desired {
        applications: vec![app.clone(), other.clone()],
        secrets: Vec::new(),
        tokens: vec![token(&uid, "token", first), token(&other_uid, "token", "not-yours")],
    };
    runtime.apply(apply("one.two.three"));
    let seen_at = if root {
        MOUNT_PATH.to_owned()
    } else {
        node.dir.path().join("data/apps").join(&uid).join("identity").display().to_string()
    };
    let line = format!("at={seen_at} host=192.0.2.2:6443 ns=default ca=CA PEM token=one.two.three");
    crate::logs::follow_until(&runtime, "prover", &line, 1).await;

    let dir = node.dir.path().join("data/apps").join(&uid).join("identity");
    let meta = std::fs::metadata(dir.join("token")).expect("the token file");
    if root {
        assert_eq!((meta.uid(), meta.mode() & 0o777), (65532, 0o400), "the workload's user alone reads it");
        assert!(
            !std::path::Path::new(MOUNT_PATH).join("token").exists(),
            "the mount is the workload's own, not the host's"
        );
    }
    // A fresh token replaces the file the running process reads, without a restart.
    runtime.apply(apply("four.five.six"));
    let line = format!("at={seen_at} host=192.0.2.2:6443 ns=default ca=CA PEM token=four.five.six");
    crate::logs::follow_until(&runtime, "prover", &line, 1).await;
    let status = current_status(&runtime, "prover", "running", |s| s.started_at.is_some()).await;
    assert_eq!(status.restarts.unwrap_or_default(), 0);
    // A command run beside the workload (`kubectl exec`) sees what it sees, where it sees it.
    let command = kayra_runtime::runtime::ExecCommand {
        uid: uid.clone(),
        command: vec!["cat".into(), format!("{seen_at}/token")],
        stdout: true,
        stderr: true,
        ..Default::default()
    };
    let mut execution = runtime.exec(command).await.expect("the command starts");
    let mut seen = String::new();
    while let Some(chunk) = futures_util::StreamExt::next(&mut execution.output).await {
        seen.push_str(&String::from_utf8_lossy(&chunk.expect("output").1));
    }
    assert_eq!((seen.as_str(), execution.wait().await.expect("it ends")), ("four.five.six", 0));
    let theirs = node.dir.path().join("data/apps").join(&other_uid).join("identity/token");
    assert_eq!(std::fs::read_to_string(theirs).expect("the bystander's token"), "not-yours");
    runtime.close().await;
}
