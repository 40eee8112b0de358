//! Planning a run: program lookup, identity, environment and limits.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kayra_api::kinds::application::{ResourceList, Resources, SecretKeyRef, SecurityContext};

use super::*;

fn secret(namespace: &str, name: &str, data: &[(&str, &[u8])]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        data: data
            .iter()
            .map(|(k, v)| (k.to_string(), base64::engine::general_purpose::STANDARD.encode(v)))
            .collect::<BTreeMap<_, _>>(),
        ..Secret::default()
    }
}

fn value(name: &str, value: &str) -> EnvVar {
    EnvVar { name: name.into(), value: Some(value.into()), ..EnvVar::default() }
}

fn from_secret(name: &str, secret: &str, key: &str, optional: bool) -> EnvVar {
    EnvVar {
        name: name.into(),
        secret_ref: Some(SecretKeyRef { name: secret.into(), key: key.into(), optional: Some(optional) }),
        ..EnvVar::default()
    }
}

#[test]
fn environments_resolve_values_and_secret_keys() {
    let secrets = [
        secret("team", "db", &[("user", b"app"), ("password", b"s3cret")]),
        secret("other", "db", &[("user", b"intruder")]),
        secret("team", "bin", &[("blob", &[0xff, 0xfe])]),
    ];
    let all = EnvVar { prefix: Some("DB_".into()), ..from_secret("", "db", "*", false) };
    type Case = (Vec<EnvVar>, Result<Vec<(&'static str, &'static str)>, &'static str>);
    let cases: Vec<Case> = vec![
        (vec![value("A", "1"), from_secret("U", "db", "user", false)], Ok(vec![("A", "1"), ("U", "app")])),
        (vec![all.clone()], Ok(vec![("DB_password", "s3cret"), ("DB_user", "app")])),
        (
            vec![value("DB_user", "x"), all, value("A", "2")],
            Ok(vec![("DB_user", "app"), ("DB_password", "s3cret"), ("A", "2")]),
        ),
        (vec![from_secret("X", "missing", "k", true), from_secret("Y", "db", "nokey", true)], Ok(vec![])),
        (vec![from_secret("X", "missing", "k", false)], Err("secret \"missing\" not found")),
        (vec![from_secret("Y", "db", "nokey", false)], Err("couldn't find key nokey in Secret team/db")),
        (
            vec![from_secret("B", "bin", "blob", false)],
            Err("key \"blob\" of secret \"bin\" is not UTF-8 text"),
        ),
        (vec![value("A", "1"), value("A", "2")], Ok(vec![("A", "2")])),
    ];
    for (vars, expect) in cases {
        let got = resolve_env(&vars, "team", &secrets);
        let expect = expect
            .map(|pairs| pairs.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect::<Vec<_>>())
            .map_err(|message| Refused(message.to_owned()));
        assert_eq!(got, expect, "{vars:?}");
    }
}

#[test]
fn programs_are_found_in_the_path_or_named_by_path() {
    let executable = |path: &Path| ["/usr/bin/python3", "/opt/app/run"].contains(&path.to_str().unwrap());
    let cases = [
        ("python3", Ok("/usr/bin/python3")),
        ("/opt/app/run", Ok("/opt/app/run")),
        ("nosuch", Err("command \"nosuch\" not found in PATH (/bin:/usr/bin)")),
        ("/opt/app/missing", Err("command \"/opt/app/missing\" is not an executable file")),
    ];
    for (command, expect) in cases {
        let got = find_program(command, "/bin:/usr/bin", &executable);
        assert_eq!(got, expect.map(PathBuf::from).map_err(|m: &str| Refused(m.to_owned())), "{command}");
    }
}

#[test]
fn root_runs_processes_as_their_user_and_others_as_themselves() {
    let app = |user: Option<i64>, group: Option<i64>| Application {
        spec: kayra_api::kinds::application::ApplicationSpec {
            security_context: Some(SecurityContext { run_as_user: user, run_as_group: group }),
            ..Default::default()
        },
        ..Application::default()
    };
    let root = AgentUser { uid: 0, gid: 0 };
    let plain = AgentUser { uid: 1000, gid: 1000 };
    let cases = [
        (app(None, None), root, Ok(Some((65532, 65532)))),
        (app(Some(1234), None), root, Ok(Some((1234, 65532)))),
        (app(Some(7), Some(8)), root, Ok(Some((7, 8)))),
        (app(Some(0), None), root, Err("root")),
        (app(None, None), plain, Ok(None)),
        (app(Some(1000), Some(1000)), plain, Ok(None)),
        (app(Some(65532), None), plain, Err("runAsUser is 65532, but the agent runs as 1000")),
        (app(None, Some(5)), plain, Err("runAsGroup is 5")),
    ];
    for (app, agent, expect) in cases {
        match (user(&app, agent), expect) {
            (Ok(got), Ok(expect)) => assert_eq!(got, expect),
            (Err(Refused(message)), Err(part)) => assert!(message.contains(part), "{message}"),
            (got, expect) => {
                panic!("{:?} as {agent:?}: got {got:?}, expected {expect:?}", app.spec.security_context)
            }
        }
    }
}

#[test]
fn limits_convert_to_kernel_units() {
    let app = |cpu: Option<&str>, memory: Option<&str>| Application {
        spec: kayra_api::kinds::application::ApplicationSpec {
            resources: Some(Resources {
                limits: Some(ResourceList { cpu: cpu.map(Into::into), memory: memory.map(Into::into) }),
                requests: None,
            }),
            ..Default::default()
        },
        ..Application::default()
    };
    let cases = [
        (
            app(Some("500m"), Some("64Mi")),
            Limits { cpu_millis: Some(500), memory_bytes: Some(64 << 20), pids: Some(10) },
        ),
        (app(Some("2"), None), Limits { cpu_millis: Some(2000), memory_bytes: None, pids: Some(10) }),
        (
            app(Some("0.0001"), Some("1G")),
            Limits { cpu_millis: Some(1), memory_bytes: Some(1_000_000_000), pids: Some(10) },
        ),
        (Application::default(), Limits { pids: Some(10), ..Limits::default() }),
    ];
    for (app, expect) in cases {
        assert_eq!(limits(&app, Some(10)), expect);
    }
}
