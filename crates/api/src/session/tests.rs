//! Registration taints as kubelet's flag spells them, and what a registration may ask.

use super::*;

fn taint(key: &str, value: &str, effect: &str) -> NodeTaint {
    NodeTaint { key: key.into(), value: value.into(), effect: effect.into() }
}

#[test]
fn taints_read_as_kubelet_spells_them() {
    let cases: Vec<(&str, Result<Vec<NodeTaint>, &str>)> = vec![
        ("dedicated=gpu:NoSchedule", Ok(vec![taint("dedicated", "gpu", "NoSchedule")])),
        (
            "example.com/spot:PreferNoSchedule,maintenance=now:NoExecute",
            Ok(vec![
                taint("example.com/spot", "", "PreferNoSchedule"),
                taint("maintenance", "now", "NoExecute"),
            ]),
        ),
        ("dedicated=gpu", Err("taints[0]")),
        ("dedicated=gpu:Sometimes", Err("taints[0].effect")),
        ("a:NoSchedule,-bad-:NoSchedule", Err("taints[1].key")),
        ("key=not ok:NoSchedule", Err("taints[0].value")),
        ("", Err("taints[0]")),
    ];
    for (text, expect) in cases {
        let got = NodeTaint::parse_list(text).map_err(|error| error.field);
        assert_eq!(got, expect.map_err(str::to_owned), "{text:?}");
    }
}

#[test]
fn a_taint_prints_as_it_is_spelled() {
    assert_eq!(taint("dedicated", "gpu", "NoSchedule").to_string(), "dedicated=gpu:NoSchedule");
    assert_eq!(taint("spot", "", "PreferNoSchedule").to_string(), "spot:PreferNoSchedule");
}

#[test]
fn a_registration_names_each_bad_or_repeated_taint() {
    let registration = Registration {
        unschedulable: false,
        taints: vec![
            taint("a", "1", "NoSchedule"),
            taint("a", "2", "NoSchedule"),
            taint("a", "1", "NoExecute"),
            taint("b", "", "Never"),
        ],
    };
    let fields: Vec<String> = registration.validate().into_iter().map(|error| error.field).collect();
    assert_eq!(fields, ["spec.taints[1]", "spec.taints[3].effect"]);
    assert!(Registration::default().validate().is_empty());
}
