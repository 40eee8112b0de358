//! The `scale` subresource of an ApplicationSet: the set seen as an `autoscaling/v1` Scale, and
//! a Scale written back as the replicas of the set's one replicated component (what `kubectl
//! scale appset/<name> --replicas=N` sends).
//!
//! A set with no component scaled by `replicas`, or with several, cannot be scaled: 422 naming
//! why. `status.replicas` counts the component's Applications; `status.selector` is the
//! reserved labels that select them.

use kayra_api::kinds::applicationset::{ApplicationSet, component_label, set_label};
use kayra_api::validation::FieldError;
use kayra_authn::Identity;
use kayra_registry::{FieldManager, ListOptions, Object, Part, PatchKind, RegistryError, Resource, meta_str};
use serde_json::{Value, json};

use crate::ApplicationLayer;
use crate::options::WriteRequest;

/// The subresource a Scale is written through, as the set's managers record it.
const SCALE: &str = "scale";

/// The set `name` as a Scale.
pub async fn read(control: &ApplicationLayer, namespace: &str, name: &str) -> Result<Value, RegistryError> {
    let sets = sets(control)?;
    let object = control.registry().get(&sets, Some(namespace), name).await?;
    scale_of(control, &object).await
}

/// Sets the replicas of the set's replicated component to the Scale's `spec.replicas`, as
/// `identity` (admitted as an update of the set, recorded as the request's manager through
/// `scale`); answers the Scale after the write. `metadata.resourceVersion`, when the Scale
/// carries one, must be the set's; without one the replicas are set on the set as it stands,
/// however often its loop writes its status meanwhile.
pub async fn write(
    control: &ApplicationLayer,
    identity: &Identity,
    namespace: &str,
    name: &str,
    scale: &Value,
    request: &WriteRequest,
) -> Result<Value, RegistryError> {
    let sets = sets(control)?;
    if let Some(named) = scale.pointer("/metadata/name").and_then(Value::as_str)
        && named != name
    {
        return Err(RegistryError::BadRequest(format!(
            "name in URL does not match name in Scale object: \"{name}\" and \"{named}\""
        )));
    }
    let replicas = match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => 0,
        Some(value) => value.as_i64().filter(|r| *r >= 0).ok_or_else(|| {
            invalid_scale(name, "spec.replicas", value, "must be a whole number greater than or equal to 0")
        })?,
    };
    let version = scale.pointer("/metadata/resourceVersion").and_then(Value::as_str);
    let build = |current: &Object| scaled(current, name, replicas);
    // What admission sees of the write: the set as it stands, scaled.
    let object = Value::Object(build(&control.registry().get(&sets, Some(namespace), name).await?)?);
    let mut options =
        control.write_options(identity, &sets, Part::Main, Some(&object), request.dry_run).await;
    options.manager = FieldManager { name: request.manager(identity), subresource: SCALE.to_owned() };
    let written =
        control.registry().update_with(&sets, Some(namespace), name, version, options, build).await?;
    scale_of(control, &written).await
}

/// Applies `patch` to the set's Scale and writes the result, as [`write`] does. A patch that
/// sets no `metadata.resourceVersion` of its own is applied again to the set as it stands when
/// another writer changed it meanwhile, as a patch of the set itself would be.
pub async fn patch(
    control: &ApplicationLayer,
    identity: &Identity,
    namespace: &str,
    name: &str,
    kind: PatchKind,
    patch: &[u8],
    request: &WriteRequest,
) -> Result<Value, RegistryError> {
    let bad =
        |error: String| RegistryError::BadRequest(format!("the patch does not apply to the Scale: {error}"));
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut scale = read(control, namespace, name).await?;
        let read_at = scale.pointer("/metadata/resourceVersion").cloned();
        match kind {
            PatchKind::Merge => {
                let patch: Value = serde_json::from_slice(patch).map_err(|e| bad(e.to_string()))?;
                json_patch::merge(&mut scale, &patch);
            }
            PatchKind::Json => {
                let patch: json_patch::Patch =
                    serde_json::from_slice(patch).map_err(|e| bad(e.to_string()))?;
                json_patch::patch(&mut scale, &patch).map_err(|e| bad(e.to_string()))?;
            }
        }
        let pinned = scale.pointer("/metadata/resourceVersion") != read_at.as_ref();
        match write(control, identity, namespace, name, &scale, request).await {
            Err(RegistryError::Conflict { .. }) if !pinned && attempts < PATCH_ATTEMPTS => {}
            written => return written,
        }
    }
}

/// How many times a patch of a Scale is applied to a set that other writers keep changing.
const PATCH_ATTEMPTS: usize = 8;

/// The set `current` with its replicated component at `replicas`.
fn scaled(current: &Object, name: &str, replicas: i64) -> Result<Object, RegistryError> {
    let at = decode(current)?
        .scaled_component()
        .map_err(|why| invalid_scale(name, "spec.replicas", &replicas, &why))?;
    let mut object = current.clone();
    let component = object
        .get_mut("spec")
        .and_then(|spec| spec.get_mut("applications"))
        .and_then(|components| components.get_mut(at))
        .and_then(Value::as_object_mut)
        .expect("the component scaled_component found is in the stored set");
    component.insert("scale".into(), json!({"replicas": replicas}));
    Ok(object)
}

fn invalid_scale(name: &str, field: &str, value: &dyn std::fmt::Display, why: &str) -> RegistryError {
    RegistryError::Invalid {
        kind: "Scale".to_owned(),
        name: name.to_owned(),
        causes: vec![FieldError::invalid(field, value, why)],
    }
}

fn sets(control: &ApplicationLayer) -> Result<Resource, RegistryError> {
    control
        .resource_named(&format!("fleet.{}", control.scheme().domain()), "applicationsets")
        .cloned()
        .ok_or_else(|| RegistryError::BadRequest("the server does not serve applicationsets".to_owned()))
}

fn decode(object: &Object) -> Result<ApplicationSet, RegistryError> {
    serde::Deserialize::deserialize(object).map_err(|error: serde_json::Error| {
        RegistryError::BadRequest(format!("a stored set does not decode into its Kind: {error}"))
    })
}

/// The Scale of a stored set.
async fn scale_of(control: &ApplicationLayer, object: &Object) -> Result<Value, RegistryError> {
    let set = decode(object)?;
    let at = set.scaled_component().map_err(|why| RegistryError::Invalid {
        kind: "Scale".to_owned(),
        name: meta_str(object, "name").to_owned(),
        causes: vec![FieldError::invalid("spec.replicas", "\"\"", &why)],
    })?;
    let component = &set.spec.applications[at];
    let domain = control.scheme().domain();
    let name = meta_str(object, "name");
    let namespace = meta_str(object, "namespace");
    let selector = format!("{}={name},{}={}", set_label(domain), component_label(domain), component.name);
    let replicas = component.scale.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    let applications = control
        .resource_named(&format!("fleet.{domain}"), "applications")
        .ok_or_else(|| RegistryError::BadRequest("the server does not serve applications".to_owned()))?;
    let options = ListOptions { label_selector: Some(selector.clone()), ..ListOptions::default() };
    let current = control.registry().list(applications, Some(namespace), &options).await?.items.len();
    let metadata = object.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let keep = |field: &str| metadata.get(field).cloned().unwrap_or(Value::Null);
    Ok(json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": name, "namespace": namespace, "uid": keep("uid"),
            "resourceVersion": keep("resourceVersion"), "creationTimestamp": keep("creationTimestamp"),
        },
        "spec": {"replicas": replicas},
        "status": {"replicas": current, "selector": selector},
    }))
}
