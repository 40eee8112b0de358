//! Content negotiation: what a client accepts (plain JSON, server-side tables, aggregated
//! discovery) and what a request body is.

use axum::http::HeaderMap;
use axum::http::header::{ACCEPT, CONTENT_TYPE};

/// A media type with its parameters, lower-cased.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MediaType {
    essence: String,
    params: Vec<(String, String)>,
}

impl MediaType {
    fn parse(text: &str) -> MediaType {
        let mut parts = text.split(';');
        let essence = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let params = parts
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().trim_matches('"').to_owned()))
            .collect();
        MediaType { essence, params }
    }

    fn param(&self, name: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    fn is_json(&self) -> bool {
        matches!(self.essence.as_str(), "application/json" | "*/*" | "application/*")
            && self.param("as").is_none()
    }
}

fn accepted(headers: &HeaderMap) -> Vec<MediaType> {
    let text = headers.get(ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    if text.trim().is_empty() {
        return vec![MediaType::parse("application/json")];
    }
    text.split(',').map(MediaType::parse).collect()
}

/// How to answer a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// The object or list as JSON.
    Json,
    /// A `meta.k8s.io` Table (`v1` or `v1beta1`, answered in the version asked for).
    Table(&'static str),
}

/// The first of the client's accepted types that this server produces; `None` means 406.
pub(crate) fn output(headers: &HeaderMap) -> Option<Output> {
    for media in accepted(headers) {
        if media.essence == "application/json"
            && media.param("as") == Some("Table")
            && media.param("g") == Some("meta.k8s.io")
        {
            match media.param("v") {
                Some("v1") => return Some(Output::Table("v1")),
                Some("v1beta1") => return Some(Output::Table("v1beta1")),
                _ => continue,
            }
        }
        if media.is_json() {
            return Some(Output::Json);
        }
    }
    None
}

/// Which discovery document to answer `/api` and `/apis` with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Discovery {
    /// `APIGroupDiscoveryList` at `apidiscovery.k8s.io/v2` or `v2beta1`.
    Aggregated(&'static str),
    /// `APIVersions` / `APIGroupList`.
    Legacy,
}

/// The discovery format the client asked for first.
pub(crate) fn discovery(headers: &HeaderMap) -> Option<Discovery> {
    for media in accepted(headers) {
        if media.essence == "application/json"
            && media.param("g") == Some("apidiscovery.k8s.io")
            && media.param("as") == Some("APIGroupDiscoveryList")
        {
            match media.param("v") {
                Some("v2") => return Some(Discovery::Aggregated("v2")),
                Some("v2beta1") => return Some(Discovery::Aggregated("v2beta1")),
                _ => continue,
            }
        }
        if media.is_json() {
            return Some(Discovery::Legacy);
        }
    }
    None
}

/// What a request body is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    /// JSON, also when no `Content-Type` is given (kubectl sends some bodies without one).
    Json,
    /// The Kubernetes protobuf envelope.
    Protobuf,
    /// `application/merge-patch+json`.
    MergePatch,
    /// `application/json-patch+json`.
    JsonPatch,
    /// `application/strategic-merge-patch+json`.
    StrategicMergePatch,
    /// `application/apply-patch+yaml`.
    ApplyPatch,
    /// Anything else, named.
    Other(String),
}

/// The request body's media type.
pub(crate) fn body(headers: &HeaderMap) -> Body {
    let Some(text) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return Body::Json };
    let media = MediaType::parse(text);
    match media.essence.as_str() {
        "" | "application/json" => Body::Json,
        "application/vnd.kubernetes.protobuf" => Body::Protobuf,
        "application/merge-patch+json" => Body::MergePatch,
        "application/json-patch+json" => Body::JsonPatch,
        "application/strategic-merge-patch+json" => Body::StrategicMergePatch,
        "application/apply-patch+yaml" => Body::ApplyPatch,
        other => Body::Other(other.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(accept: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(ACCEPT, HeaderValue::from_str(accept).unwrap());
        map
    }

    #[test]
    fn kubectl_accept_headers_negotiate() {
        let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(output(&headers(table)), Some(Output::Table("v1")));
        assert_eq!(
            output(&headers("application/json;as=Table;v=v1beta1;g=meta.k8s.io")),
            Some(Output::Table("v1beta1"))
        );
        assert_eq!(
            output(&headers("application/vnd.kubernetes.protobuf,application/json")),
            Some(Output::Json)
        );
        assert_eq!(output(&headers("application/vnd.kubernetes.protobuf, */*")), Some(Output::Json));
        assert_eq!(output(&headers("application/yaml")), None);
        let aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(discovery(&headers(aggregated)), Some(Discovery::Aggregated("v2")));
        assert_eq!(
            discovery(&headers(
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
            )),
            Some(Discovery::Aggregated("v2beta1"))
        );
        assert_eq!(discovery(&headers("application/json")), Some(Discovery::Legacy));
    }
}
