//! Discovery documents: `/version`, `/api`, `/apis` (aggregated v2 and v2beta1, or legacy),
//! and each group-version's resource list, all built from the scheme.

use kayra_api::scheme::{KindInfo, Scheme};
use serde_json::{Value, json};

/// The version kubectl's dispatcher reads: major 1, minor 32.
pub(crate) fn version() -> Value {
    json!({
        "major": "1", "minor": "32",
        "gitVersion": concat!("v1.32.0+kayra.", env!("CARGO_PKG_VERSION")),
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "",
        "goVersion": "", "compiler": "rustc", "platform": "linux/amd64",
    })
}

fn response_kind(kind: &KindInfo) -> Value {
    json!({"group": kind.group, "version": kind.version, "kind": kind.kind})
}

fn aggregated_resource(kind: &KindInfo) -> Value {
    let subresources: Vec<Value> = kind
        .subresources
        .iter()
        .map(|sub| {
            let response = match sub.response {
                Some((group, version, kind)) => json!({"group": group, "version": version, "kind": kind}),
                None => response_kind(kind),
            };
            json!({"subresource": sub.name, "responseKind": response, "verbs": sub.verbs})
        })
        .collect();
    json!({
        "resource": kind.plural,
        "responseKind": response_kind(kind),
        "scope": if kind.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": kind.singular,
        "shortNames": kind.short_names,
        "categories": kind.categories,
        "verbs": kind.verbs,
        "subresources": subresources,
    })
}

/// An API registered in the catalog, as discovery lists it: its group, the version its
/// document's paths use, and the resources they serve (none before the first fetch).
pub(crate) struct RegisteredApi {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) resources: Vec<kayra_catalog::openapi::ApiResource>,
}

/// `APIGroupDiscoveryList` for the core group (`core: true`) or the named groups, Kayra's own
/// first, then the registered APIs.
pub(crate) fn aggregated(scheme: &Scheme, core: bool, version: &str, registered: &[RegisteredApi]) -> Value {
    let mut items: Vec<Value> = Vec::new();
    for (group, gv, kinds) in scheme.group_versions() {
        if group.is_empty() != core {
            continue;
        }
        let resources: Vec<Value> = kinds.iter().map(|k| aggregated_resource(k)).collect();
        let entry = json!({"version": gv, "freshness": "Current", "resources": resources});
        match items.iter_mut().find(|item| item["metadata"]["name"] == group.as_str()) {
            Some(item) => item["versions"].as_array_mut().expect("versions is a list").push(entry),
            None => items
                .push(json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": [entry]})),
        }
    }
    for api in registered.iter().filter(|_| !core) {
        let entry =
            json!({"version": api.version, "freshness": "Current", "resources": registered_resources(api)});
        items.push(json!({"metadata": {"name": api.group, "creationTimestamp": null}, "versions": [entry]}));
    }
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"), "metadata": {}, "items": items})
}

/// Legacy `/api`.
pub(crate) fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn api_group(scheme: &Scheme, group: &str) -> Value {
    let versions: Vec<Value> = scheme
        .group_versions()
        .into_iter()
        .filter(|(g, _, _)| g == group)
        .map(|(g, v, _)| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": versions, "preferredVersion": preferred})
}

/// A registered API's resources as aggregated discovery lists them: actions
/// (`dashboards/refresh`) as subresources of their resource.
fn registered_resources(api: &RegisteredApi) -> Vec<Value> {
    let kind_of = |resource: &str| {
        let singular = resource
            .strip_suffix("ies")
            .map(|stem| format!("{stem}y"))
            .or_else(|| resource.strip_suffix('s').map(str::to_owned))
            .unwrap_or_else(|| resource.to_owned());
        let mut chars = singular.chars();
        chars.next().map(|first| first.to_uppercase().chain(chars).collect::<String>()).unwrap_or_default()
    };
    let mut resources: Vec<Value> = Vec::new();
    for resource in &api.resources {
        let (base, action) = match resource.name.split_once('/') {
            Some((base, action)) => (base, Some(action)),
            None => (resource.name.as_str(), None),
        };
        let response_kind = json!({"group": api.group, "version": api.version, "kind": kind_of(base)});
        let at = match resources.iter().position(|r| r["resource"] == base) {
            Some(at) => at,
            None => {
                resources.push(json!({
                    "resource": base,
                    "responseKind": response_kind,
                    "scope": if resource.namespaced { "Namespaced" } else { "Cluster" },
                    "singularResource": "",
                    "verbs": [],
                    "subresources": [],
                }));
                resources.len() - 1
            }
        };
        match action {
            None => resources[at]["verbs"] = json!(resource.verbs),
            Some(action) => {
                let sub =
                    json!({"subresource": action, "responseKind": response_kind, "verbs": resource.verbs});
                if let Some(list) = resources[at]["subresources"].as_array_mut() {
                    list.push(sub);
                }
            }
        }
    }
    resources
}

/// `/apis/<api>/<version>` of a registered API: `APIResourceList`.
pub(crate) fn registered_resource_list(api: &RegisteredApi) -> Value {
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{}/{}", api.group, api.version), "resources": registered_api_resources(api)})
}

/// A registered API's resources as `APIResource`s, actions named `resource/action`.
fn registered_api_resources(api: &RegisteredApi) -> Vec<Value> {
    api.resources
        .iter()
        .map(|resource| {
            json!({"name": resource.name, "singularName": "", "namespaced": resource.namespaced, "kind": "", "verbs": resource.verbs})
        })
        .collect()
}

/// Legacy `/apis`: Kayra's groups, then the registered APIs, as `APIGroupList`, each group
/// with the `resources` of its preferred version (as its `APIResourceList` has them) beside the
/// fields Kubernetes clients decode, so that one plain `GET /apis` shows every API and what it
/// serves. A registered API whose document has not been fetched yet has no resources.
pub(crate) fn api_group_list(scheme: &Scheme, registered: &[RegisteredApi]) -> Value {
    let mut names: Vec<String> = Vec::new();
    for (group, _, _) in scheme.group_versions() {
        if !group.is_empty() && !names.contains(&group) {
            names.push(group);
        }
    }
    let groups: Vec<Value> = names
        .iter()
        .map(|g| {
            let mut group = api_group(scheme, g);
            let preferred = group["preferredVersion"]["version"].as_str().unwrap_or_default().to_owned();
            if let Some(map) = group.as_object_mut() {
                map.remove("kind");
                map.remove("apiVersion");
                map.insert("resources".to_owned(), Value::Array(api_resources(scheme, g, &preferred)));
            }
            group
        })
        .collect();
    let groups: Vec<Value> = groups
        .into_iter()
        .chain(registered.iter().map(|api| {
            let version =
                json!({"groupVersion": format!("{}/{}", api.group, api.version), "version": api.version});
            json!({"name": api.group, "versions": [version], "preferredVersion": version, "resources": registered_api_resources(api)})
        }))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub(crate) fn group(scheme: &Scheme, group: &str) -> Value {
    api_group(scheme, group)
}

/// `/api/v1` or `/apis/<group>/<version>`: `APIResourceList`.
pub(crate) fn resource_list(scheme: &Scheme, group: &str, version: &str) -> Value {
    let group_version = if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": api_resources(scheme, group, version)})
}

/// One group-version's resources as `APIResource`s: each Kind, then each of its subresources
/// as `plural/subresource`, with the verbs it serves.
fn api_resources(scheme: &Scheme, group: &str, version: &str) -> Vec<Value> {
    let mut resources = Vec::new();
    for kind in scheme.kinds().iter().filter(|k| k.group == group && k.version == version) {
        resources.push(json!({
            "name": kind.plural, "singularName": kind.singular, "namespaced": kind.namespaced,
            "kind": kind.kind, "verbs": kind.verbs, "shortNames": kind.short_names, "categories": kind.categories,
        }));
        for sub in kind.subresources {
            let mut resource = json!({
                "name": format!("{}/{}", kind.plural, sub.name), "singularName": "", "namespaced": kind.namespaced,
                "kind": kind.kind, "verbs": sub.verbs,
            });
            // A subresource taking another Kind names it with its group and version, as
            // `pods/eviction` does (kubectl drain looks for exactly that).
            if let Some((group, version, kind)) = sub.response {
                resource["group"] = json!(group);
                resource["version"] = json!(version);
                resource["kind"] = json!(kind);
            }
            resources.push(resource);
        }
    }
    resources
}
