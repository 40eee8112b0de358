//! Request metrics: each routed request counted by what its route names and how it was
//! answered, timed, its body sizes measured, and held in the in-flight gauge of its kind while it is answered; a watch
//! or a followed stream is held in the long-running gauge instead, until its body ends.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, HttpBody};
use axum::extract::Request;
use axum::http::Method;
use axum::response::Response;
use futures_util::StreamExt;
use kayra_api::verb::Verb;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

use super::routing::Route;
use crate::metrics::{AnsweredLabels, KindLabels, RequestLabels, RequestMetrics};
use crate::routes::{Target, query, verb};
use crate::state::ApiState;

/// Counts and times the request.
pub(crate) async fn layer<F: Future<Output = Response>>(
    state: &Arc<ApiState>,
    request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let Some(metrics) = state.requests.clone() else { return next(request).await };
    let (labels, long_running) = labels(&request);
    let request_kind = match *request.method() {
        Method::GET | Method::HEAD | Method::OPTIONS => "readOnly",
        _ => "mutating",
    };
    // The length the client declared: a body of unknown length is not measured.
    if let Some(length) = HttpBody::size_hint(request.body()).exact().filter(|length| *length > 0) {
        metrics.request_sizes.get_or_create(&labels).observe(length as f64);
    }
    let started = Instant::now();
    let response = if long_running {
        let open = metrics.longrunning.get_or_create(&labels).clone();
        open.inc();
        let response = next(request).await;
        held_until_the_body_ends(response, open)
    } else {
        let in_flight = metrics.in_flight.get_or_create(&KindLabels { request_kind }).clone();
        in_flight.inc();
        let response = next(request).await;
        in_flight.dec();
        metrics.duration.get_or_create(&labels).observe(started.elapsed().as_secs_f64());
        let sizes = metrics.response_sizes.get_or_create(&labels).clone();
        measured(response, sizes)
    };
    count(&metrics, labels, response.status().as_u16());
    response
}

fn count(metrics: &RequestMetrics, labels: RequestLabels, code: u16) {
    let RequestLabels { verb, group, resource, subresource, scope } = labels;
    metrics.total.get_or_create(&AnsweredLabels { verb, group, resource, subresource, scope, code }).inc();
}

/// Observes the response body's size in `sizes`: at once when its length is known, else once
/// it has been sent whole.
fn measured(response: Response, sizes: Histogram) -> Response {
    if let Some(length) = HttpBody::size_hint(response.body()).exact() {
        sizes.observe(length as f64);
        return response;
    }
    struct Sent {
        bytes: u64,
        sizes: Histogram,
    }
    impl Drop for Sent {
        fn drop(&mut self) {
            self.sizes.observe(self.bytes as f64);
        }
    }
    let mut sent = Sent { bytes: 0, sizes };
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        // The whole counter moves into the stream, to be observed when the stream is dropped.
        let sent = &mut sent;
        if let Ok(bytes) = &chunk {
            sent.bytes += bytes.len() as u64;
        }
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

/// Keeps `open` raised until the response's body is done with (sent whole, or dropped).
fn held_until_the_body_ends(response: Response, open: Gauge) -> Response {
    struct Open(Gauge);
    impl Drop for Open {
        fn drop(&mut self) {
            self.0.dec();
        }
    }
    let open = Open(open);
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _held = &open;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

/// The request's labels, and whether it is long-running (a watch, a followed log, a stream).
fn labels(request: &Request) -> (RequestLabels, bool) {
    let method = request.method();
    let query = query(request.uri()).unwrap_or_default();
    let plain = |verb| RequestLabels {
        verb,
        group: String::new(),
        resource: String::new(),
        subresource: String::new(),
        scope: "",
    };
    let Some(Route::Served(target)) = request.extensions().get::<Route>() else {
        return (plain(method_name(method)), false);
    };
    let (group, resource, namespace, name, subresource) = match target {
        Target::Resource(path) => (
            path.kind.group.clone(),
            path.kind.plural.to_owned(),
            path.namespace.is_some(),
            path.name.is_some(),
            path.subresource.clone(),
        ),
        Target::Catalog(path) => (
            String::new(),
            path.plural.to_owned(),
            path.namespace.is_some(),
            path.name.is_some(),
            path.subresource.clone(),
        ),
        Target::NodeLog { group, .. } => {
            (group.clone(), "nodes".to_owned(), false, true, Some("log".to_owned()))
        }
        Target::SessionLog { group, .. } => {
            (group.clone(), "nodes".to_owned(), false, true, Some("sessionlog".to_owned()))
        }
        Target::SessionStream { group, .. } => {
            (group.clone(), "nodes".to_owned(), false, true, Some("sessionstream".to_owned()))
        }
        Target::SessionUsage { group } => (group.clone(), "sessionusage".to_owned(), false, false, None),
        _ => return (plain(method_name(method)), false),
    };
    let verb = match (method, &subresource) {
        (&Method::POST, Some(_)) => Verb::Create,
        _ => match verb(method, name, &query) {
            Ok(verb) => verb,
            Err(_) => return (plain(method_name(method)), false),
        },
    };
    let streams = matches!(subresource.as_deref(), Some("exec" | "attach" | "portforward"))
        || (subresource.as_deref() == Some("log") && query.get("follow").is_some_and(|f| f == "true"));
    let scope = match (name, namespace) {
        (true, _) => "resource",
        (false, true) => "namespace",
        (false, false) => "cluster",
    };
    let labels = RequestLabels {
        verb: kube_verb(verb),
        group,
        resource,
        subresource: subresource.unwrap_or_default(),
        scope,
    };
    (labels, verb == Verb::Watch || streams)
}

/// kube-apiserver's spelling of a verb in its request metrics.
fn kube_verb(verb: Verb) -> &'static str {
    match verb {
        Verb::Get => "GET",
        Verb::List => "LIST",
        Verb::Watch => "WATCH",
        Verb::Create => "POST",
        Verb::Update => "PUT",
        Verb::Patch => "PATCH",
        Verb::Delete | Verb::DeleteCollection => "DELETE",
    }
}

fn method_name(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}
