//! Feature gates: named switches for what a deployment turns on deliberately, set by
//! `featureGates` in `kayra.yaml` (a map of gate to bool) and `--feature-gates
//! Name=bool,...` on the command line, which wins for the gates it names. A name that is no
//! gate is refused at start, naming the gates there are, so a typo never leaves a feature
//! silently off.

use std::collections::BTreeMap;

/// One gate: its name, what it is off or on by default, and what it turns on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gate {
    /// The name `featureGates` and `--feature-gates` use.
    pub name: &'static str,
    /// Whether the gate is on when nothing sets it.
    pub default: bool,
    /// What it turns on.
    pub description: &'static str,
}

/// The gates there are.
pub const GATES: &[Gate] = &[Gate {
    name: "NodeLogs",
    default: false,
    description: "serve a node agent's own log at /apis/fleet.<domain>/v1/nodes/<name>/log",
}];

/// What every gate is set to, once checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    node_logs: bool,
}

impl Default for FeatureGates {
    fn default() -> FeatureGates {
        FeatureGates { node_logs: default_of("NodeLogs") }
    }
}

fn default_of(name: &str) -> bool {
    GATES.iter().find(|gate| gate.name == name).is_some_and(|gate| gate.default)
}

impl FeatureGates {
    /// The gates `set` turns on or off, the rest at their defaults; a name that is no gate is
    /// an error naming it and the gates there are.
    pub fn from_map(set: &BTreeMap<String, bool>) -> Result<FeatureGates, String> {
        let mut gates = FeatureGates::default();
        for (name, on) in set {
            match name.as_str() {
                "NodeLogs" => gates.node_logs = *on,
                other => {
                    let known: Vec<&str> = GATES.iter().map(|gate| gate.name).collect();
                    return Err(format!(
                        "unknown feature gate {other:?}; the gates are: {}",
                        known.join(", ")
                    ));
                }
            }
        }
        Ok(gates)
    }

    /// Whether a node agent's own log is served (`NodeLogs`).
    pub fn node_logs(&self) -> bool {
        self.node_logs
    }
}

/// `--feature-gates Name=bool,...` as a map; an entry that is not `Name=true` or `Name=false`
/// is an error naming it. Which names are gates is [`FeatureGates::from_map`]'s to say.
pub fn parse_flag(text: &str) -> Result<BTreeMap<String, bool>, String> {
    let mut set = BTreeMap::new();
    for entry in text.split(',').map(str::trim).filter(|entry| !entry.is_empty()) {
        let (name, value) = entry
            .split_once('=')
            .ok_or_else(|| format!("--feature-gates: {entry:?} is not Name=true or Name=false"))?;
        let on = match value.trim() {
            "true" => true,
            "false" => false,
            other => return Err(format!("--feature-gates: {name}={other}: expected true or false")),
        };
        set.insert(name.trim().to_owned(), on);
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(flag: &str, expect: Result<bool, &str>) {
        let decided =
            parse_flag(flag).and_then(|set| FeatureGates::from_map(&set)).map(|gates| gates.node_logs());
        match (expect, decided) {
            (Ok(expect), Ok(decided)) => assert_eq!(decided, expect, "{flag}"),
            (Err(text), Err(error)) => assert!(error.contains(text), "{flag}: {error} lacks {text:?}"),
            (expect, decided) => panic!("{flag}: expected {expect:?}, got {decided:?}"),
        }
    }

    #[test]
    fn gates_are_set_by_name_and_an_unknown_one_is_refused() {
        check("", Ok(false));
        check("NodeLogs=true", Ok(true));
        check(" NodeLogs=true , ", Ok(true));
        check("NodeLogs=false", Ok(false));
        check("NodeLog=true", Err("unknown feature gate \"NodeLog\"; the gates are: NodeLogs"));
        check("NodeLogs", Err("\"NodeLogs\" is not Name=true or Name=false"));
        check("NodeLogs=yes", Err("NodeLogs=yes: expected true or false"));
    }

    #[test]
    fn node_logs_is_off_by_default() {
        assert!(!FeatureGates::default().node_logs());
        assert_eq!(
            GATES.iter().map(|gate| (gate.name, gate.default)).collect::<Vec<_>>(),
            [("NodeLogs", false)]
        );
    }
}
