//! Consul's parameters as its clients send them, and its refusals of bad ones.

use super::*;

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.insert(*name, value.parse().unwrap());
    }
    headers
}

#[test]
fn go_durations_read_as_the_go_client_and_py_consul_send_them() {
    assert_eq!(go_duration("10s"), Some(Duration::from_secs(10)));
    assert_eq!(go_duration("1500ms"), Some(Duration::from_millis(1500)));
    assert_eq!(go_duration("1m30s"), Some(Duration::from_secs(90)));
    assert_eq!(go_duration("0"), Some(Duration::ZERO));
    for bad in ["", "10", "s", "10x", "-1s", "1e5s"] {
        assert_eq!(go_duration(bad), None, "{bad:?}");
    }
}

#[test]
fn parameters_and_headers_are_read_as_consul_reads_them() {
    let query = "stale=&cached=&wait=1500ms&index=7&tag=a&tag=b%3Dc&passing=1&dc=dc1";
    let parsed = parse(Some(query), &headers(&[("x-consul-token", "t1")]), "dc1", "default").unwrap();
    assert_eq!(parsed.index, Some(7));
    assert_eq!(parsed.wait, Duration::from_millis(1500));
    assert_eq!(parsed.tags, ["a", "b=c"]);
    assert!(parsed.passing);
    assert_eq!(parsed.token.as_deref(), Some("t1"));
    assert_eq!(parsed.namespace, "default");
    let bearer =
        parse(Some("ns=team-a"), &headers(&[("authorization", "Bearer t2")]), "dc1", "default").unwrap();
    assert_eq!((bearer.token.as_deref(), bearer.namespace.as_str()), (Some("t2"), "team-a"));
    let header =
        parse(Some("token=t3"), &headers(&[("x-consul-namespace", "team-b")]), "dc1", "platform").unwrap();
    assert_eq!((header.token.as_deref(), header.namespace.as_str()), (Some("t3"), "team-b"));
    assert_eq!(parse(None, &HeaderMap::new(), "dc1", "platform").unwrap().namespace, "platform");
    assert!(!parse(Some("passing=false"), &HeaderMap::new(), "dc1", "d").unwrap().passing);
    assert_eq!(parse(Some("wait=1h"), &HeaderMap::new(), "dc1", "d").unwrap().wait, MAX_WAIT);
}

#[test]
fn bad_parameters_are_refused_as_consul_refuses_them() {
    let refused = |query: &str| parse(Some(query), &HeaderMap::new(), "dc1", "default").unwrap_err();
    assert_eq!(
        refused("dc=dc9"),
        Refusal { status: StatusCode::INTERNAL_SERVER_ERROR, text: "No path to datacenter".into() }
    );
    assert_eq!(refused("index=abc").status, StatusCode::BAD_REQUEST);
    assert!(refused("index=abc").text.starts_with("Bad request: Invalid index"));
    assert_eq!(refused("wait=soon").text, "Bad request: Invalid wait time");
    assert_eq!(refused("filter=Service.ID%20%3D%3D%20%22x%22").text, "Bad request: filter not supported");
    let huge = format!("filter={}", "a".repeat(100_000));
    assert!(refused(&huge).text.contains("longer than"));
}
