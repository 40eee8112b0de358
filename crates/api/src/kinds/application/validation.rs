//! What an Application may hold: a command, an environment, ports, resources, restart
//! limits, probes and placement rules in Kubernetes' shapes, each refusal naming its field.

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, PodAffinityTerm, WeightedPodAffinityTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{Application, EnvVar, MAX_ENV, NODE_NAME_FIELD, Placement, Port, Probe, ResourceList, Resources};
use crate::kinds::{duplicates, validate_conditions};
use crate::quantity::Quantity;
use crate::validation::{FieldError, has_control_breaks, is_clean_absolute_path, is_dns_subdomain};

const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
const PHASES: &[&str] = &["Pending", "Running", "Succeeded", "Failed", "Terminating"];

/// Every problem with `application`, each naming its field.
pub(super) fn validate(application: &Application) -> Vec<FieldError> {
    let spec = &application.spec;
    let mut errors = Vec::new();
    if spec.command.is_empty() {
        errors.push(FieldError::required("spec.command"));
    }
    if let Some(program) = spec.command.first()
        && program.is_empty()
    {
        errors.push(FieldError::invalid("spec.command[0]", "\"\"", "must name a program"));
    }
    for (field, list) in [("spec.command", &spec.command), ("spec.args", &spec.args)] {
        for (at, arg) in list.iter().enumerate() {
            if has_control_breaks(arg) {
                errors.push(FieldError::invalid(
                    format!("{field}[{at}]"),
                    format!("{arg:?}"),
                    "must not contain NUL, CR or LF",
                ));
            }
        }
    }
    if let Some(dir) = &spec.working_dir
        && !is_clean_absolute_path(dir)
    {
        errors.push(FieldError::invalid(
            "spec.workingDir",
            format!("\"{dir}\""),
            "must be an absolute, clean path",
        ));
    }
    errors.extend(validate_env(&spec.env));
    errors.extend(validate_ports(&spec.ports));
    if let Some(resources) = &spec.resources {
        errors.extend(validate_resources(resources));
    }
    let lifecycle = &spec.lifecycle;
    let policy = lifecycle.restart_policy.as_deref().unwrap_or("Always");
    if !RESTART_POLICIES.contains(&policy) {
        errors.push(FieldError::not_supported("spec.lifecycle.restartPolicy", policy, RESTART_POLICIES));
    }
    for (field, value) in [
        ("terminationGracePeriodSeconds", lifecycle.termination_grace_period_seconds),
        ("backoffLimit", lifecycle.backoff_limit),
        ("activeDeadlineSeconds", lifecycle.active_deadline_seconds),
    ] {
        if let Some(value) = value.filter(|value| *value < 0) {
            errors.push(FieldError::invalid(
                format!("spec.lifecycle.{field}"),
                value,
                "must be greater than or equal to 0",
            ));
        }
    }
    if policy == "Always" {
        for (field, value) in [
            ("backoffLimit", lifecycle.backoff_limit),
            ("activeDeadlineSeconds", lifecycle.active_deadline_seconds),
        ] {
            if value.is_some() {
                errors.push(FieldError::forbidden(
                    format!("spec.lifecycle.{field}"),
                    "only jobs (restartPolicy OnFailure or Never) have one",
                ));
            }
        }
    }
    if let Some(placement) = &spec.placement
        && let Some(node) = placement.node_name.as_deref().filter(|node| !is_dns_subdomain(node))
    {
        errors.push(FieldError::invalid(NODE_NAME_FIELD, format!("\"{node}\""), "must be a DNS subdomain"));
    }
    if let Some(placement) = &spec.placement {
        errors.extend(validate_placement(placement));
    }
    if let Some(service) = spec.service_name.as_deref().filter(|name| !is_dns_subdomain(name)) {
        errors.push(FieldError::invalid(
            "spec.serviceName",
            format!("\"{service}\""),
            "must be a DNS subdomain",
        ));
    }
    if let Some(context) = &spec.security_context {
        for (field, value) in [("runAsUser", context.run_as_user), ("runAsGroup", context.run_as_group)] {
            if let Some(value) = value.filter(|value| !(0..=i64::from(u32::MAX - 1)).contains(value)) {
                errors.push(FieldError::invalid(
                    format!("spec.securityContext.{field}"),
                    value,
                    "must be between 0 and 4294967294, inclusive",
                ));
            }
        }
    }
    if let Some(identity) = &spec.identity {
        errors.extend(identity.validate());
    }
    if let Some(probes) = &spec.probes {
        for (field, probe) in [("readiness", &probes.readiness), ("liveness", &probes.liveness)] {
            if let Some(probe) = probe {
                errors.extend(validate_probe(&format!("spec.probes.{field}"), probe, field == "liveness"));
            }
        }
    }
    if let Some(status) = &application.status {
        if let Some(phase) = status.phase.as_deref().filter(|phase| !PHASES.contains(phase)) {
            errors.push(FieldError::not_supported("status.phase", phase, PHASES));
        }
        errors.extend(validate_conditions("status.conditions", &status.conditions));
    }
    errors
}

fn validate_probe(field: &str, probe: &Probe, liveness: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let handlers = [probe.exec.is_some(), probe.http_get.is_some(), probe.tcp_socket.is_some()];
    match handlers.iter().filter(|set| **set).count() {
        0 => errors.push(FieldError::required(format!("{field}.exec|httpGet|tcpSocket"))),
        1 => {}
        _ => errors
            .push(FieldError::forbidden(field.to_owned(), "may have only one of exec, httpGet or tcpSocket")),
    }
    if let Some(exec) = &probe.exec {
        if exec.command.is_empty() || exec.command[0].is_empty() {
            errors.push(FieldError::required(format!("{field}.exec.command")));
        }
        for (at, arg) in exec.command.iter().enumerate() {
            if has_control_breaks(arg) {
                errors.push(FieldError::invalid(
                    format!("{field}.exec.command[{at}]"),
                    format!("{arg:?}"),
                    "must not contain NUL, CR or LF",
                ));
            }
        }
    }
    let ports = [
        ("httpGet.port", probe.http_get.as_ref().map(|http| http.port)),
        ("tcpSocket.port", probe.tcp_socket.as_ref().map(|tcp| tcp.port)),
    ];
    for (name, port) in ports {
        if let Some(port) = port.filter(|port| !(1..=65535).contains(port)) {
            errors.push(FieldError::invalid(
                format!("{field}.{name}"),
                port,
                "must be between 1 and 65535, inclusive",
            ));
        }
    }
    if let Some(path) = probe.http_get.as_ref().and_then(|http| http.path.as_deref())
        && (!path.starts_with('/') || has_control_breaks(path) || path.contains(' '))
    {
        errors.push(FieldError::invalid(
            format!("{field}.httpGet.path"),
            format!("\"{path}\""),
            "must start with / and contain no spaces or line breaks",
        ));
    }
    for (name, value, least) in [
        ("initialDelaySeconds", probe.initial_delay_seconds, 0),
        ("periodSeconds", probe.period_seconds, 1),
        ("timeoutSeconds", probe.timeout_seconds, 1),
        ("failureThreshold", probe.failure_threshold, 1),
        ("successThreshold", probe.success_threshold, 1),
    ] {
        if let Some(value) = value.filter(|value| *value < least) {
            errors.push(FieldError::invalid(
                format!("{field}.{name}"),
                value,
                &format!("must be greater than or equal to {least}"),
            ));
        }
    }
    if liveness && probe.success_threshold.is_some_and(|value| value != 1) {
        errors.push(FieldError::invalid(
            format!("{field}.successThreshold"),
            probe.success_threshold.unwrap_or_default(),
            "must be 1 for a liveness probe",
        ));
    }
    errors
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn validate_env(env: &[EnvVar]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if env.len() > MAX_ENV {
        errors.push(FieldError::too_many("spec.env", env.len(), MAX_ENV));
    }
    for (at, var) in env.iter().enumerate() {
        let field = format!("spec.env[{at}]");
        let import_all = var.secret_ref.as_ref().is_some_and(|secret| secret.key == "*");
        if import_all {
            if !var.name.is_empty() {
                errors.push(FieldError::forbidden(
                    format!("{field}.name"),
                    "must be empty when every key of a Secret is imported",
                ));
            }
        } else if var.name.is_empty() {
            errors.push(FieldError::required(format!("{field}.name")));
        } else if !is_env_name(&var.name) {
            errors.push(FieldError::invalid(
                format!("{field}.name"),
                format!("\"{}\"", var.name),
                "must match [A-Za-z_][A-Za-z0-9_]*",
            ));
        }
        if var.prefix.is_some() && !import_all {
            errors.push(FieldError::forbidden(format!("{field}.prefix"), "only with secretRef.key \"*\""));
        }
        if let Some(prefix) = var.prefix.as_deref().filter(|p| !p.is_empty() && !is_env_name(p)) {
            errors.push(FieldError::invalid(
                format!("{field}.prefix"),
                format!("\"{prefix}\""),
                "must match [A-Za-z_][A-Za-z0-9_]*",
            ));
        }
        match (&var.value, &var.secret_ref) {
            (Some(_), Some(_)) => errors.push(FieldError::forbidden(
                format!("{field}.secretRef"),
                "may not be set together with value",
            )),
            (Some(value), None) if has_control_breaks(value) => {
                errors.push(FieldError::invalid(
                    format!("{field}.value"),
                    "<value>",
                    "must not contain NUL, CR or LF",
                ));
            }
            (_, Some(secret)) => {
                if !is_dns_subdomain(&secret.name) {
                    errors.push(FieldError::invalid(
                        format!("{field}.secretRef.name"),
                        format!("\"{}\"", secret.name),
                        "must be a DNS subdomain",
                    ));
                }
                if secret.key.is_empty() {
                    errors.push(FieldError::required(format!("{field}.secretRef.key")));
                }
            }
            _ => {}
        }
    }
    errors.extend(duplicates(
        "spec.env",
        env.iter().map(|var| var.name.as_str()).filter(|name| !name.is_empty()),
    ));
    errors
}

fn validate_ports(ports: &[Port]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (at, port) in ports.iter().enumerate() {
        if !(1..=65535).contains(&port.port) {
            errors.push(FieldError::invalid(
                format!("spec.ports[{at}].port"),
                port.port,
                "must be between 1 and 65535, inclusive",
            ));
        }
        if !matches!(port.protocol.as_str(), "TCP" | "UDP") {
            errors.push(FieldError::not_supported(
                format!("spec.ports[{at}].protocol"),
                &port.protocol,
                &["TCP", "UDP"],
            ));
        }
    }
    errors.extend(duplicates("spec.ports", ports.iter().filter_map(|port| port.name.as_deref())));
    errors
}

fn validate_resources(resources: &Resources) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut parsed = |side: &str, list: &Option<ResourceList>| -> [Option<Quantity>; 2] {
        let Some(list) = list else { return [None, None] };
        [("cpu", &list.cpu), ("memory", &list.memory)].map(|(name, value)| {
            let value = value.as_deref()?;
            let quantity = Quantity::parse(value);
            if quantity.is_none() {
                errors.push(FieldError::invalid(
                    format!("spec.resources.{side}.{name}"),
                    format!("\"{value}\""),
                    "must be a quantity such as 500m, 2, 128Mi or 1G",
                ));
            }
            quantity
        })
    };
    let requests = parsed("requests", &resources.requests);
    let limits = parsed("limits", &resources.limits);
    for (at, name) in ["cpu", "memory"].iter().enumerate() {
        if let (Some(request), Some(limit)) = (requests[at], limits[at])
            && request > limit
        {
            errors.push(FieldError::invalid(
                format!("spec.resources.requests.{name}"),
                format!(
                    "\"{}\"",
                    resources
                        .requests
                        .as_ref()
                        .and_then(|r| if at == 0 { r.cpu.clone() } else { r.memory.clone() })
                        .unwrap_or_default()
                ),
                &format!("must be less than or equal to {name} limit"),
            ));
        }
    }
    errors
}

const NODE_OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
const SELECTOR_OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist"];
const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

fn validate_placement(placement: &Placement) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let field = "spec.placement";
    if let Some(affinity) = &placement.affinity {
        if let Some(node) = &affinity.node_affinity {
            let required = node.required_during_scheduling_ignored_during_execution.as_ref();
            for (at, term) in required.into_iter().flat_map(|r| r.node_selector_terms.iter()).enumerate() {
                let term_field = format!(
                    "{field}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{at}]"
                );
                for (i, requirement) in term.match_expressions.iter().flatten().enumerate() {
                    errors.extend(validate_node_requirement(
                        &format!("{term_field}.matchExpressions[{i}]"),
                        requirement,
                    ));
                }
                if term.match_fields.as_ref().is_some_and(|fields| !fields.is_empty()) {
                    errors.push(FieldError::forbidden(
                        format!("{term_field}.matchFields"),
                        "is not supported; use matchExpressions over node labels",
                    ));
                }
            }
            let preferred = node.preferred_during_scheduling_ignored_during_execution.iter().flatten();
            for (at, term) in preferred.enumerate() {
                let term_field = format!(
                    "{field}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{at}]"
                );
                errors.extend(validate_weight(&term_field, term.weight));
                for (i, requirement) in term.preference.match_expressions.iter().flatten().enumerate() {
                    errors.extend(validate_node_requirement(
                        &format!("{term_field}.preference.matchExpressions[{i}]"),
                        requirement,
                    ));
                }
            }
        }
        let workload = [
            (
                "workloadAffinity",
                affinity.workload_affinity.as_ref().map(|a| {
                    (
                        &a.required_during_scheduling_ignored_during_execution,
                        &a.preferred_during_scheduling_ignored_during_execution,
                    )
                }),
            ),
            (
                "workloadAntiAffinity",
                affinity.workload_anti_affinity.as_ref().map(|a| {
                    (
                        &a.required_during_scheduling_ignored_during_execution,
                        &a.preferred_during_scheduling_ignored_during_execution,
                    )
                }),
            ),
        ];
        for (name, rules) in workload {
            let Some((required, preferred)) = rules else { continue };
            for (at, term) in required.iter().flatten().enumerate() {
                errors.extend(validate_workload_term(
                    &format!("{field}.affinity.{name}.requiredDuringSchedulingIgnoredDuringExecution[{at}]"),
                    term,
                ));
            }
            for (at, WeightedPodAffinityTerm { weight, pod_affinity_term }) in
                preferred.iter().flatten().enumerate()
            {
                let term_field =
                    format!("{field}.affinity.{name}.preferredDuringSchedulingIgnoredDuringExecution[{at}]");
                errors.extend(validate_weight(&term_field, *weight));
                errors.extend(validate_workload_term(
                    &format!("{term_field}.podAffinityTerm"),
                    pod_affinity_term,
                ));
            }
        }
    }
    for (at, toleration) in placement.tolerations.iter().enumerate() {
        let t_field = format!("{field}.tolerations[{at}]");
        let operator = toleration.operator.as_deref().unwrap_or("Equal");
        match operator {
            "Equal" => {
                if toleration.key.as_deref().unwrap_or_default().is_empty() {
                    errors.push(FieldError::invalid(format!("{t_field}.operator"), "\"Equal\"", "operator must be Exists when `key` is empty, which means \"match all values and all keys\""));
                }
            }
            "Exists" => {
                if toleration.value.as_deref().is_some_and(|value| !value.is_empty()) {
                    errors.push(FieldError::invalid(
                        format!("{t_field}.operator"),
                        "\"Exists\"",
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errors.push(FieldError::not_supported(
                format!("{t_field}.operator"),
                other,
                &["Equal", "Exists"],
            )),
        }
        if let Some(effect) =
            toleration.effect.as_deref().filter(|e| !e.is_empty() && !TAINT_EFFECTS.contains(e))
        {
            errors.push(FieldError::not_supported(format!("{t_field}.effect"), effect, TAINT_EFFECTS));
        }
        if toleration.toleration_seconds.is_some() && toleration.effect.as_deref() != Some("NoExecute") {
            errors.push(FieldError::invalid(
                format!("{t_field}.effect"),
                format!("\"{}\"", toleration.effect.as_deref().unwrap_or_default()),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
    }
    errors
}

fn validate_weight(field: &str, weight: i32) -> Option<FieldError> {
    (!(1..=100).contains(&weight))
        .then(|| FieldError::invalid(format!("{field}.weight"), weight, "must be in the range 1-100"))
}

fn validate_node_requirement(field: &str, requirement: &NodeSelectorRequirement) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if requirement.key.is_empty() {
        errors.push(FieldError::required(format!("{field}.key")));
    }
    let values = requirement.values.as_deref().unwrap_or_default();
    match requirement.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => errors.push(FieldError::required(format!("{field}.values"))),
        "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(FieldError::forbidden(
            format!("{field}.values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if values.len() != 1 => errors.push(FieldError::required(format!("{field}.values"))),
        "Gt" | "Lt" if values[0].parse::<i64>().is_err() => errors.push(FieldError::invalid(
            format!("{field}.values[0]"),
            format!("\"{}\"", values[0]),
            "must be an integer",
        )),
        operator if !NODE_OPERATORS.contains(&operator) => {
            errors.push(FieldError::not_supported(format!("{field}.operator"), operator, NODE_OPERATORS));
        }
        _ => {}
    }
    errors
}

fn validate_workload_term(field: &str, term: &PodAffinityTerm) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if term.topology_key.is_empty() {
        errors.push(FieldError::required(format!("{field}.topologyKey")));
    }
    if let Some(selector) = &term.label_selector {
        errors.extend(validate_label_selector(&format!("{field}.labelSelector"), selector));
    }
    if term.namespace_selector.is_some() {
        errors.push(FieldError::forbidden(
            format!("{field}.namespaceSelector"),
            "is not supported; list `namespaces`",
        ));
    }
    errors
}

fn validate_label_selector(field: &str, selector: &LabelSelector) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (at, requirement) in selector.match_expressions.iter().flatten().enumerate() {
        let values = requirement.values.as_deref().unwrap_or_default();
        let item = format!("{field}.matchExpressions[{at}]");
        match requirement.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                errors.push(FieldError::required(format!("{item}.values")))
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(FieldError::forbidden(
                format!("{item}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            operator if !SELECTOR_OPERATORS.contains(&operator) => {
                errors.push(FieldError::not_supported(
                    format!("{item}.operator"),
                    operator,
                    SELECTOR_OPERATORS,
                ));
            }
            _ => {}
        }
    }
    errors
}
