//! Probe verdicts, and one real check of each kind.

use kayra_api::kinds::application::{ExecAction, HttpGetAction, TcpSocketAction};

use super::*;

fn probe(success: i64, failure: i64) -> Probe {
    Probe { success_threshold: Some(success), failure_threshold: Some(failure), ..Probe::default() }
}

#[test]
fn verdicts_change_after_their_thresholds() {
    /// Readiness (else liveness), success threshold, failure threshold, results, verdict changes.
    type Case = (bool, i64, i64, &'static [bool], &'static [Option<bool>]);
    let cases: [Case; 5] = [
        (
            true,
            1,
            3,
            &[true, true, false, false, false, true],
            &[Some(true), None, None, None, Some(false), Some(true)],
        ),
        (true, 2, 1, &[true, false, true, true, false], &[None, None, None, Some(true), Some(false)]),
        (
            false,
            1,
            3,
            &[false, false, true, false, false, false],
            &[None, None, None, None, None, Some(false)],
        ),
        (false, 1, 1, &[true, false, true], &[None, Some(false), Some(true)]),
        (true, 1, 1, &[false, false], &[None, None]),
    ];
    for (readiness, success, failure, results, expect) in cases {
        let probe = probe(success, failure);
        let mut counter = if readiness { Counter::readiness(&probe) } else { Counter::liveness(&probe) };
        let got: Vec<Option<bool>> = results.iter().map(|ok| counter.record(*ok)).collect();
        assert_eq!(got, expect, "readiness {readiness} thresholds {success}/{failure} results {results:?}");
    }
}

#[test]
fn timings_take_the_kubernetes_defaults() {
    let timing = Timing::of(&Probe::default());
    assert_eq!(
        (timing.initial_delay.as_secs(), timing.period.as_secs(), timing.timeout.as_secs()),
        (0, 10, 1)
    );
}

#[test]
fn status_lines_give_their_code() {
    let cases: [(&[u8], Option<u16>); 4] = [
        (b"HTTP/1.1 200 OK\r\n", Some(200)),
        (b"HTTP/1.0 503 Busy", Some(503)),
        (b"SSH-2.0", None),
        (b"", None),
    ];
    for (head, expect) in cases {
        assert_eq!(http_status(head), expect);
    }
}

#[tokio::test]
async fn each_kind_of_check_passes_and_fails() {
    let context = ExecContext {
        working_dir: "/".into(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        user: None,
    };
    let timeout = Duration::from_secs(2);
    let exec = |command: &[&str]| Probe {
        exec: Some(ExecAction { command: command.iter().map(|s| s.to_string()).collect() }),
        ..Probe::default()
    };
    assert_eq!(check(&exec(&["true"]), timeout, &context).await, Ok(()));
    assert!(check(&exec(&["false"]), timeout, &context).await.is_err());
    assert!(
        check(
            &exec(&["sh", "-c", "sleep 5", "kayra-test-probe-timeout"]),
            Duration::from_millis(200),
            &context
        )
        .await
        .unwrap_err()
        .contains("timed out")
    );

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = i64::from(listener.local_addr().unwrap().port());
    let server = tokio::spawn(async move {
        for status in ["200 OK", "500 Internal Server Error"] {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = vec![0; 1024];
            let _ = socket.read(&mut request).await;
            let _ =
                socket.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes()).await;
        }
        listener
    });
    let http =
        Probe { http_get: Some(HttpGetAction { port, path: Some("/healthz".into()) }), ..Probe::default() };
    assert_eq!(check(&http, timeout, &context).await, Ok(()));
    assert!(check(&http, timeout, &context).await.unwrap_err().contains("500"));
    let tcp = Probe { tcp_socket: Some(TcpSocketAction { port }), ..Probe::default() };
    let listener = server.await.unwrap();
    assert_eq!(check(&tcp, timeout, &context).await, Ok(()), "a listening port passes");
    drop(listener);
    assert!(check(&tcp, timeout, &context).await.is_err(), "a closed port fails");
}
