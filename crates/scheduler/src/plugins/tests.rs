//! Label selectors, node requirements and tolerations follow Kubernetes' operators.

use serde_json::json;

use super::testing::shape;
use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn label_selectors_and_node_requirements_follow_kubernetes_operators() {
    let web = labels(&[("app", "web"), ("tier", "front"), ("cores", "8")]);
    let cases = [
        (json!({}), true),
        (json!({"matchLabels": {"app": "web"}}), true),
        (json!({"matchLabels": {"app": "db"}}), false),
        (json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "x"]}]}), true),
        (json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}), false),
        (json!({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}), true),
        (json!({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}), false),
        (json!({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}), true),
    ];
    for (selector, expected) in cases {
        assert_eq!(selects(&shape(selector.clone()), &web), expected, "{selector}");
    }
    let requirement = |operator: &str, values: &[&str]| -> NodeSelectorRequirement {
        shape(json!({"key": "cores", "operator": operator, "values": values}))
    };
    assert!(meets(&requirement("Gt", &["4"]), &web));
    assert!(!meets(&requirement("Gt", &["8"]), &web));
    assert!(meets(&requirement("Lt", &["9"]), &web));
    assert!(!meets(&requirement("Lt", &["x"]), &web));
    assert!(!meets(&requirement("Gt", &["1"]), &labels(&[])), "Gt needs the label");
    assert!(meets(&requirement("In", &["8"]), &web));
    assert!(meets(&requirement("DoesNotExist", &[]), &labels(&[])));
}

#[test]
fn tolerations_match_taints_as_kubernetes_does() {
    let dedicated = taint("dedicated", "db", "NoSchedule");
    let cases = [
        (json!({"key": "dedicated", "value": "db"}), true),
        (json!({"key": "dedicated", "operator": "Equal", "value": "web"}), false),
        (json!({"key": "dedicated", "operator": "Exists"}), true),
        (json!({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}), false),
        (json!({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}), true),
        (json!({"operator": "Exists"}), true),
        (json!({"key": "other", "operator": "Exists"}), false),
    ];
    for (toleration, expected) in cases {
        assert_eq!(tolerates(&shape(toleration.clone()), &dedicated), expected, "{toleration}");
    }
    assert_eq!(untolerated(&dedicated), "node(s) had untolerated taint {dedicated: db}");
    assert_eq!(
        untolerated(&taint("node.kubernetes.io/not-ready", "", "NoSchedule")),
        "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    );
}
