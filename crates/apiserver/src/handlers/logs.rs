//! `pods/<name>/log` and `applications/<name>/log`: an Application's output, streamed from the
//! node it runs on over that node's session (`kubectl logs [-f] [--tail] [--since]
//! [--timestamps] [--previous]`). The response body pulls from the node as the client reads,
//! so a slow reader slows the node; a client that goes away cancels the stream on the node.
//!
//! A log whose node holds its session with another replica is read through that replica
//! (`nodes/<name>/sessionlog`, see [`crate::peers`]), after this replica has authorized the
//! caller for the log as it always does; the replica holding the session serves it, or refuses,
//! and never forwards it again.
//!
//! Behind the `NodeLogs` gate, `GET /apis/fleet.<domain>/v1/nodes/<name>/log` streams a node
//! agent's own log the same way (`follow`, `tailLines`, `sinceSeconds`, `sinceTime`,
//! `limitBytes`; its lines carry their own times).

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use kayra_application::permitted::Permitted;
use kayra_nodeserver::{LogOptions, LogStream, NodeServerError};

use super::Call;
use crate::error::ApiError;
use crate::routes::Query;
use crate::state::ApiState;

/// How long a log request waits for its first bytes before it answers with the headers alone.
const FIRST_CHUNK_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// The one container a pod view has.
const CONTAINER: &str = "app";

fn flag(query: &Query, name: &str) -> Result<bool, ApiError> {
    match query.get(name).map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true" | "") => Ok(true),
        Some(other) => Err(ApiError::BadRequest(format!("{name} must be true or false, not {other:?}"))),
    }
}

fn number(query: &Query, name: &str) -> Result<Option<i64>, ApiError> {
    query
        .get(name)
        .map(|value| {
            value.parse::<i64>().ok().filter(|n| *n >= 0 || name == "tailLines").ok_or_else(|| {
                ApiError::BadRequest(format!("{name} must be a non-negative number, not {value:?}"))
            })
        })
        .transpose()
}

/// What the query asks of the log, as Kubernetes' `PodLogOptions` spells it.
pub(crate) fn options(query: &Query, now: jiff::Timestamp) -> Result<LogOptions, ApiError> {
    if let Some(container) = query.get("container").filter(|c| !c.is_empty() && *c != CONTAINER) {
        return Err(ApiError::BadRequest(format!(
            "container {container} is not valid for this pod: its one container is \"{CONTAINER}\""
        )));
    }
    let since_seconds = number(query, "sinceSeconds")?;
    let since_time = match query.get("sinceTime") {
        None => None,
        Some(time) => {
            let time: jiff::Timestamp = time.parse().map_err(|_| {
                ApiError::BadRequest(format!("sinceTime must be an RFC 3339 time, not {time:?}"))
            })?;
            Some(now.duration_since(time).as_secs().max(0))
        }
    };
    if since_seconds.is_some() && since_time.is_some() {
        return Err(ApiError::BadRequest("at most one of sinceSeconds or sinceTime may be given".into()));
    }
    let tail_lines = number(query, "tailLines")?.filter(|lines| *lines >= 0);
    Ok(LogOptions {
        follow: flag(query, "follow")?,
        tail_lines,
        since_seconds: since_seconds.or(since_time),
        timestamps: flag(query, "timestamps")?,
        previous: flag(query, "previous")?,
        limit_bytes: number(query, "limitBytes")?,
    })
}

/// Serves one log request, authorized for the `log` subresource.
pub(crate) async fn serve(call: &Call<'_>) -> Result<Response, ApiError> {
    let options = options(call.query, jiff::Timestamp::now())?;
    let (namespace, name) = call.permitted.log_source()?;
    let nodes = call.state.nodes.as_ref().ok_or_else(|| {
        ApiError::Unavailable("this server holds no node sessions, so it serves no logs".into())
    })?;
    let plural = call.target.kind.plural;
    let stream = match nodes.logs(namespace, name, options.clone()).await {
        Err(NodeServerError::NodeUnavailable { node, .. }) => {
            let what = Forwarded::Application { namespace, name };
            return forward(call.state, &node, &what, call.query).await;
        }
        other => other,
    };
    let stream = stream.map_err(|error| match error {
        NodeServerError::ApplicationNotFound { .. } => {
            ApiError::NotFound(format!("{plural} \"{name}\" not found"))
        }
        other => refusal(other),
    })?;
    respond(stream).await
}

/// Serves one read of a node agent's own log, authorized as `get` on `nodes/log`.
pub(crate) async fn serve_agent(
    state: &ApiState,
    permitted: &Permitted,
    query: &Query,
) -> Result<Response, ApiError> {
    let options = options(query, jiff::Timestamp::now())?;
    for (asked, flag) in [(options.previous, "previous"), (options.timestamps, "timestamps")] {
        if asked {
            return Err(ApiError::BadRequest(format!(
                "{flag} does not apply to a node's log: the agent keeps one log, whose lines carry their times"
            )));
        }
    }
    let node = permitted.node_log_source()?;
    let nodes = state.nodes.as_ref().ok_or_else(|| {
        ApiError::Unavailable("this server holds no node sessions, so it serves no node logs".into())
    })?;
    let stream = match nodes.agent_log(node, options.clone()).await {
        Err(NodeServerError::NoSession { .. }) => {
            return forward(state, node, &Forwarded::Agent, query).await;
        }
        other => other,
    };
    let stream = stream.map_err(refusal)?;
    respond(stream).await
}

/// Which log a forwarded request asks of the node's session.
enum Forwarded<'a> {
    /// An Application's.
    Application { namespace: &'a str, name: &'a str },
    /// The node agent's own.
    Agent,
}

/// Reads the log through the replica the store names as holding `node`'s session; 503 when
/// none does (or only this one, whose session has gone).
async fn forward(
    state: &ApiState,
    node: &str,
    what: &Forwarded<'_>,
    query: &Query,
) -> Result<Response, ApiError> {
    let unavailable = || ApiError::Unavailable(format!("node \"{node}\" holds no session with any replica"));
    let (Some((peers, me)), Some(nodes)) = (state.peers.as_ref(), state.nodes.as_ref()) else {
        return Err(unavailable());
    };
    let holder = nodes.holder(node).await.map_err(|error| ApiError::Unavailable(error.to_string()))?;
    let Some(holder) = holder.filter(|holder| holder.id != *me) else { return Err(unavailable()) };
    let mut forwarded: Vec<(String, String)> = query
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "namespace" | "name" | "agent"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    match what {
        Forwarded::Application { namespace, name } => {
            forwarded.push(("namespace".into(), (*namespace).to_owned()));
            forwarded.push(("name".into(), (*name).to_owned()));
        }
        Forwarded::Agent => forwarded.push(("agent".into(), "true".into())),
    }
    let query = forwarded
        .iter()
        .map(|(key, value)| format!("{}={}", encode(key), encode(value)))
        .collect::<Vec<_>>()
        .join("&");
    let url = format!(
        "{}/apis/fleet.{}/v1/nodes/{}/sessionlog?{query}",
        holder.url.trim_end_matches('/'),
        state.scheme().domain(),
        encode(node)
    );
    let answer = peers.get(url).await.map_err(|reason| {
        ApiError::Unavailable(format!(
            "the replica holding node \"{node}\"'s session did not answer: {reason}"
        ))
    })?;
    let mut response = Response::new(Body::from_stream(answer.body));
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    if let Ok(content_type) = HeaderValue::from_str(&answer.content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, content_type);
    }
    Ok(response)
}

/// `text` percent-encoded for a URL's path segment or query.
pub(crate) fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(byte).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// Serves a log another replica forwarded, from this replica's session of the node alone.
pub(crate) async fn serve_forwarded(
    state: &ApiState,
    permitted: &Permitted,
    query: &Query,
) -> Result<Response, ApiError> {
    let node = permitted.session_log_source()?;
    let options = options(query, jiff::Timestamp::now())?;
    let nodes = state
        .nodes
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("this server holds no node sessions".into()))?;
    let holds_nothing = || ApiError::Unavailable(format!("this replica holds no session of node \"{node}\""));
    let stream = if query.get("agent").is_some_and(|agent| agent == "true") {
        nodes.agent_log(node, options).await
    } else {
        let (Some(namespace), Some(name)) = (query.get("namespace"), query.get("name")) else {
            return Err(ApiError::BadRequest(
                "a session log names the Application: namespace and name".into(),
            ));
        };
        nodes.logs(namespace, name, options).await
    };
    let stream = stream.map_err(|error| match error {
        NodeServerError::NodeUnavailable { .. } | NodeServerError::NoSession { .. } => holds_nothing(),
        other => refusal(other),
    })?;
    respond(stream).await
}

/// What a log the node server could not open answers.
pub(crate) fn refusal(error: NodeServerError) -> ApiError {
    match error {
        NodeServerError::ApplicationNotFound { .. } | NodeServerError::NodeNotFound { .. } => {
            ApiError::NotFound(error.to_string())
        }
        NodeServerError::NotPlaced { .. } => ApiError::BadRequest(error.to_string()),
        NodeServerError::NodeUnavailable { .. }
        | NodeServerError::NoSession { .. }
        | NodeServerError::NodeDisconnected { .. } => ApiError::Unavailable(error.to_string()),
        NodeServerError::TooManyLogStreams => ApiError::TooManyRequests(error.to_string()),
        _ => ApiError::Internal(error.to_string()),
    }
}

/// The response streaming `stream` as the client reads.
async fn respond(mut stream: LogStream) -> Result<Response, ApiError> {
    // A log the node cannot serve at all (no previous run, not on the node) fails at once:
    // answered as an error, not as an empty log. Output, or a quiet follow, answers 200.
    let first = match tokio::time::timeout(FIRST_CHUNK_WITHIN, stream.next()).await {
        Ok(Some(Err(error))) => return Err(ApiError::BadRequest(error.to_string())),
        Ok(first) => first,
        Err(_) => None,
    };
    let first = futures_util::stream::iter(first.and_then(Result::ok).filter(|data| !data.is_empty()))
        .map(|data| Ok::<Bytes, std::io::Error>(Bytes::from(data)));
    // A stream that breaks off midway (the node went away, or broke the flow control, or
    // could not read its log) aborts the body, as kube-apiserver's does: a reader must not
    // take a cut log for the whole of it.
    let rest = futures_util::stream::unfold(Some(stream), |stream| async move {
        let mut stream = stream?;
        match stream.next().await {
            Some(Ok(data)) => Some((Ok::<Bytes, std::io::Error>(Bytes::from(data)), Some(stream))),
            Some(Err(error)) => {
                tracing::debug!(%error, "a log stream broke off");
                Some((Err(std::io::Error::other(error)), None))
            }
            None => None,
        }
    });
    let body = first.chain(rest);
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = StatusCode::OK;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> Query {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn the_query_reads_as_kubernetes_pod_log_options() {
        let now: jiff::Timestamp = "2026-01-01T00:10:00Z".parse().expect("a time");
        let asked = options(
            &query(&[("follow", "true"), ("tailLines", "10"), ("timestamps", "true"), ("container", "app")]),
            now,
        )
        .expect("valid");
        assert_eq!(
            asked,
            LogOptions { follow: true, tail_lines: Some(10), timestamps: true, ..LogOptions::default() }
        );
        let since = options(&query(&[("sinceTime", "2026-01-01T00:09:00Z"), ("previous", "true")]), now)
            .expect("valid");
        assert_eq!((since.since_seconds, since.previous), (Some(60), true));
        assert_eq!(
            options(&query(&[("tailLines", "-1")]), now).expect("valid").tail_lines,
            None,
            "-1 means all"
        );
        for bad in [
            query(&[("container", "sidecar")]),
            query(&[("follow", "maybe")]),
            query(&[("sinceSeconds", "-5")]),
            query(&[("sinceSeconds", "5"), ("sinceTime", "2026-01-01T00:09:00Z")]),
            query(&[("limitBytes", "lots")]),
        ] {
            assert!(matches!(options(&bad, now), Err(ApiError::BadRequest(_))), "{bad:?}");
        }
    }
}
