//! Joining a node, against the real binary: `token create --print-join-command`, discovery
//! of the CA by its pin, a certificate signed for the bootstrap token's request that then
//! authenticates as the node, renewal with it; and requests held for a person, approved and
//! denied with the real `kubectl certificate`.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use kayra_client::join::{self, Credentials, JoinError};

use crate::{Controller, Store, have_kubectl, on_store};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn runtime() -> tokio::runtime::Runtime {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Runtime::new().unwrap()
}

fn join_command(controller: &Controller) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kayra-controller"))
        .arg("--data-dir")
        .arg(controller.scratch().join("data"))
        .args(["--listen", controller.url().trim_start_matches("https://")])
        .args(["token", "create", "--print-join-command", "--description", "csr test"])
        .output()
        .expect("the controller binary runs")
}

/// kubeadm's formula, with openssl: sha256 over the DER SubjectPublicKeyInfo of the CA.
fn openssl_pin(ca: &std::path::Path) -> String {
    let output = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl x509 -pubkey -noout -in {} | openssl pkey -pubin -outform der | sha256sum",
            ca.display()
        ))
        .output()
        .expect("openssl runs");
    assert!(output.status.success(), "{}", text(&output.stderr));
    format!("sha256:{}", text(&output.stdout).split_whitespace().next().unwrap_or_default())
}

/// `(CN, [O])` of a PEM certificate.
fn subject(cert_pem: &str) -> (String, Vec<String>) {
    let (_, block) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).unwrap();
    let cert = block.parse_x509().unwrap();
    let cn = cert.subject().iter_common_name().next().unwrap().as_str().unwrap().to_owned();
    (cn, cert.subject().iter_organization().map(|o| o.as_str().unwrap().to_owned()).collect())
}

/// `curl` as the holder of `credentials`: the HTTP status and body.
fn curl_as(controller: &Controller, credentials: &Credentials, method: &str, path: &str) -> (u16, String) {
    let dir = tempfile::tempdir().unwrap();
    join::store(dir.path(), credentials).unwrap();
    let output = Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}", "-X", method, "--cacert"])
        .arg(dir.path().join(join::CA_FILE))
        .arg("--cert")
        .arg(dir.path().join(join::CERT_FILE))
        .arg("--key")
        .arg(dir.path().join(join::KEY_FILE))
        .args(["-H", "Content-Type: application/json"])
        .args(if method == "POST" {
            vec!["-d", r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#]
        } else {
            vec![]
        })
        .arg(format!("{}{path}", controller.url()))
        .output()
        .expect("curl runs");
    let out = text(&output.stdout);
    let (body, code) = out.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

#[test]
fn a_node_joins_with_a_token_and_the_pinned_ca_then_renews_its_certificate() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "sled"]);
    let printed = join_command(&controller);
    assert!(printed.status.success(), "{}", text(&printed.stderr));
    let stdout = text(&printed.stdout);
    assert_eq!(stdout.lines().count(), 1, "exactly one line: {stdout:?}");
    let words: Vec<&str> = stdout.split_whitespace().collect();
    let [agent, verb, "--server", server, "--token", token, "--ca-cert-hash", pin] = words[..] else {
        panic!("not a join command: {stdout}");
    };
    assert_eq!((agent, verb, server), ("kayra-agent", "join", controller.url().as_str()));
    let ca_file = controller.scratch().join("data/pki/ca.crt");
    assert_eq!(pin, openssl_pin(&ca_file), "the pin is kubeadm's");
    let ca_pem = std::fs::read_to_string(&ca_file).unwrap();

    let runtime = runtime();
    // A wrong pin ends the join at the handshake, before the token is sent.
    let wrong = kayra_pki::ca_cert_hash(kayra_pki::Ca::generate("impostor").unwrap().cert_pem()).unwrap();
    let refused = runtime.block_on(join::join(server, &wrong, token, "n1", Duration::from_secs(30)));
    assert!(matches!(refused, Err(JoinError::PinMismatch { .. })), "{refused:?}");

    assert_eq!(runtime.block_on(join::discover(server, pin)).unwrap(), ca_pem);
    let joined = runtime.block_on(join::join(server, pin, token, "n1", Duration::from_secs(60))).unwrap();
    assert_eq!(subject(&joined.cert_pem), ("system:node:n1".to_owned(), vec!["system:nodes".to_owned()]));

    // The certificate authenticates as the node: its own Node is not there yet (404, not a
    // refusal), it may not read Applications, and the server knows who it is.
    let (code, body) = curl_as(&controller, &joined, "GET", "/api/v1/nodes/n1");
    assert_eq!(code, 404, "{body}");
    let (code, body) =
        curl_as(&controller, &joined, "GET", "/apis/fleet.example.com/v1/namespaces/default/applications");
    assert_eq!(code, 403, "{body}");
    let (code, body) =
        curl_as(&controller, &joined, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews");
    assert_eq!(code, 201, "{body}");
    let review: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(review["status"]["userInfo"]["username"], "system:node:n1");
    assert!(review["status"]["userInfo"]["groups"].as_array().unwrap().contains(&"system:nodes".into()));

    // Renewal: a new key, approved because the node asks for itself.
    let renewed = runtime.block_on(join::renew(server, &joined, "n1", Duration::from_secs(60))).unwrap();
    assert_ne!(renewed.key_pem, joined.key_pem);
    assert_eq!(subject(&renewed.cert_pem), ("system:node:n1".to_owned(), vec!["system:nodes".to_owned()]));
    assert_eq!(curl_as(&controller, &renewed, "GET", "/api/v1/nodes/n1").0, 404);

    // kubectl sees both requests, approved and issued, and who made each.
    let listed = controller.kubectl(&["get", "csr"]);
    let listed = text(&listed.stdout);
    let header: Vec<&str> = listed.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"],
        "{listed}"
    );
    let id = token.split_once('.').unwrap().0;
    let rows: Vec<&str> = listed.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{listed}");
    for requester in [format!("system:bootstrap:{id}"), "system:node:n1".to_owned()] {
        assert!(
            rows.iter().any(|row| row.contains(&requester) && row.ends_with("Approved,Issued")),
            "{requester}: {listed}"
        );
    }
    assert!(rows.iter().all(|row| row.starts_with("node-csr-")), "{listed}");
}

/// A request for `CN=<cn>, O=<o>` from the API client signer, as a manifest.
fn client_request(name: &str, cn: &str, o: &str) -> String {
    use base64::Engine;
    let key = kayra_pki::generate_key().unwrap();
    let subject = kayra_pki::Subject { common_name: cn.to_owned(), organizations: vec![o.to_owned()] };
    let csr = kayra_pki::certificate_request(&key, &subject).unwrap();
    format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\nspec:\n  request: {}\n  signerName: kubernetes.io/kube-apiserver-client\n  expirationSeconds: 86400\n  usages: [\"client auth\"]\n  username: someone-else\n",
        base64::engine::general_purpose::STANDARD.encode(csr)
    )
}

/// PUTs `body` to a request's approval subresource as the bearer of `token`: the HTTP status.
fn put_approval(controller: &Controller, token: &str, name: &str, body: &str) -> String {
    let output = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT", "--cacert"])
        .arg(controller.scratch().join("data/pki/ca.crt"))
        .args(["-H", &format!("Authorization: Bearer {token}"), "-H", "Content-Type: application/json"])
        .args(["-d", body])
        .arg(format!(
            "{}/apis/certificates.k8s.io/v1/certificatesigningrequests/{name}/approval",
            controller.url()
        ))
        .output()
        .expect("curl runs");
    text(&output.stdout)
}

fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "{what} did not happen within 20 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ok(controller: &Controller, args: &[&str]) -> String {
    let output = controller.kubectl(args);
    assert!(
        output.status.success(),
        "kubectl {args:?}:\n{}\n--- controller log ---\n{}",
        text(&output.stderr),
        controller.log()
    );
    text(&output.stdout)
}

#[test]
fn a_request_held_for_a_person_is_signed_once_approved_and_never_once_denied_on_sled() {
    if have_kubectl() {
        on_store(Store::Sled, &[], held_requests);
    }
}

#[test]
fn a_request_held_for_a_person_is_signed_once_approved_and_never_once_denied_on_etcd() {
    if have_kubectl() {
        on_store(Store::Etcd, &[], held_requests);
    }
}

fn held_requests(controller: &mut Controller) {
    let controller = &*controller;
    for (name, cn) in [("jane", "jane"), ("joe", "joe")] {
        let path = controller.scratch().join(format!("{name}.yaml"));
        std::fs::write(&path, client_request(name, cn, "devs")).unwrap();
        ok(controller, &["create", "-f", path.to_str().unwrap()]);
    }
    // Held: a node's request made afterwards is signed while these still wait.
    let printed = join_command(controller);
    let words: Vec<String> = text(&printed.stdout).split_whitespace().map(str::to_owned).collect();
    let (server, token, pin) = (&words[3], &words[5], &words[7]);
    runtime().block_on(join::join(server, pin, token, "n2", Duration::from_secs(60))).unwrap();
    let listed = ok(controller, &["get", "csr", "jane", "joe", "--no-headers"]);
    for row in listed.lines() {
        let cells: Vec<&str> = row.split_whitespace().collect();
        // Who asked is the writer, whatever the manifest claimed.
        assert_eq!(
            cells[2..],
            ["kubernetes.io/kube-apiserver-client", "admin", "24h", "Pending"],
            "{listed}"
        );
    }
    let certificate =
        |name: &str| ok(controller, &["get", "csr", name, "-o", "jsonpath={.status.certificate}"]);
    assert_eq!(certificate("jane"), "");

    ok(controller, &["certificate", "approve", "jane"]);
    wait_for("jane's certificate", || !certificate("jane").is_empty());
    use base64::Engine;
    let pem = base64::engine::general_purpose::STANDARD.decode(certificate("jane")).unwrap();
    assert_eq!(subject(&text(&pem)), ("jane".to_owned(), vec!["devs".to_owned()]));
    let row = ok(controller, &["get", "csr", "jane", "--no-headers"]);
    assert!(row.trim_end().ends_with("Approved,Issued"), "{row}");
    let described = ok(controller, &["describe", "csr", "jane"]);
    for expected in [
        "Name:",
        "jane",
        "Requesting User:",
        "admin",
        "Signer:",
        "kubernetes.io/kube-apiserver-client",
        "Status:",
        "Approved,Issued",
        "Subject:",
        "Common Name:",
    ] {
        assert!(described.contains(expected), "describe lacks {expected:?}:\n{described}");
    }

    ok(controller, &["certificate", "deny", "joe"]);
    let row = ok(controller, &["get", "csr", "joe", "--no-headers"]);
    assert!(row.trim_end().ends_with("Denied"), "{row}");
    // A decision does not flip: kubectl refuses to try, and the server refuses it when asked.
    let flipped = controller.kubectl(&["certificate", "approve", "joe", "--force"]);
    assert!(text(&flipped.stderr).contains("already Denied"), "{}", text(&flipped.stderr));
    let approved = r#"{"apiVersion":"certificates.k8s.io/v1","kind":"CertificateSigningRequest","metadata":{"name":"joe"},"status":{"conditions":[{"type":"Approved","status":"True","reason":"Forced"}]}}"#;
    assert_eq!(put_approval(controller, &controller.token(), "joe", approved), "422");
    // The signer's one worker takes requests in the order their changes arrive: a request
    // approved after joe's denial is signed after the signer has looked at joe since, and a
    // signature of joe would have been written by then.
    let path = controller.scratch().join("kim.yaml");
    std::fs::write(&path, client_request("kim", "kim", "devs")).unwrap();
    ok(controller, &["create", "-f", path.to_str().unwrap()]);
    ok(controller, &["certificate", "approve", "kim"]);
    wait_for("kim's certificate", || !certificate("kim").is_empty());
    assert_eq!(certificate("joe"), "", "a denied request is never signed");

    // Approving takes update on certificatesigningrequests/approval: the bootstrap token has
    // none, and no one writes a decision through status.
    assert_eq!(put_approval(controller, token, "joe", approved), "403");
    let through_status = controller.kubectl(&[
        "patch",
        "csr",
        "jane",
        "--subresource=status",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/status/conditions/0/type","value":"Denied"}]"#,
    ]);
    assert!(!through_status.status.success(), "{}", text(&through_status.stdout));
}
