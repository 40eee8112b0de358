//! Two cumulative samples make a rate; one, or two of different runs, make none.

use std::time::Duration;

use kayra_api::session::UsageSample;

use super::{Samples, go_duration};

fn sample(uid: &str, at: &str, cpu_usec: u64, memory_bytes: u64) -> UsageSample {
    UsageSample {
        namespace: "demo".into(),
        name: "web".into(),
        uid: uid.into(),
        cpu_usage_usec: cpu_usec,
        memory_bytes,
        timestamp: at.into(),
        ..UsageSample::default()
    }
}

fn first(sample: UsageSample) -> Samples {
    Samples { node: "n1".into(), latest: sample, previous: None }
}

#[test]
fn one_sample_gives_no_rate() {
    assert_eq!(first(sample("u1", "2026-01-01T00:00:00Z", 5_000_000, 10)).rate(), None);
}

#[test]
fn two_samples_give_cores_over_their_window_and_the_latest_memory() {
    let mut samples = first(sample("u1", "2026-01-01T00:00:00Z", 1_000_000, 10));
    // One core busy for 10 s, then half a core for 4 s.
    samples.follow(sample("u1", "2026-01-01T00:00:10Z", 11_000_000, 20));
    let rate = samples.rate().expect("two samples of one run");
    assert_eq!(
        (rate.nanocores, rate.memory_bytes, rate.window),
        (1_000_000_000, 20, Duration::from_secs(10))
    );
    assert_eq!(rate.at.to_string(), "2026-01-01T00:00:10Z");
    samples.follow(sample("u1", "2026-01-01T00:00:14Z", 13_000_000, 30));
    let rate = samples.rate().expect("the last two samples");
    assert_eq!((rate.nanocores, rate.memory_bytes, rate.window), (500_000_000, 30, Duration::from_secs(4)));
}

#[test]
fn a_sample_of_another_run_or_going_back_starts_afresh() {
    let cases = [
        ("another uid", sample("u2", "2026-01-01T00:00:10Z", 2_000_000, 10)),
        ("counters went back", sample("u1", "2026-01-01T00:00:10Z", 10, 10)),
        ("not later", sample("u1", "2026-01-01T00:00:00Z", 2_000_000, 10)),
        ("no time", sample("u1", "yesterday", 2_000_000, 10)),
    ];
    for (case, next) in cases {
        let mut samples = first(sample("u1", "2026-01-01T00:00:00Z", 1_000_000, 10));
        samples.follow(next.clone());
        assert_eq!((samples.previous.as_ref(), &samples.latest), (None, &next), "{case}");
        assert_eq!(samples.rate(), None, "{case}");
    }
}

#[test]
fn windows_print_as_go_durations() {
    let cases = [
        (Duration::from_secs(15), "15s"),
        (Duration::from_millis(15_250), "15.25s"),
        (Duration::from_millis(60_500), "1m0.5s"),
        (Duration::from_secs(3723), "1h2m3s"),
        (Duration::from_nanos(1_000_000_001), "1.000000001s"),
    ];
    for (window, printed) in cases {
        assert_eq!(go_duration(window), printed);
    }
}
