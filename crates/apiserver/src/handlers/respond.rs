//! Answers: one object or a Table of it, a list streamed as it is encoded (never held whole as
//! one response beside its items), a stream of watch events, and `Warning` headers.

use std::task::Poll;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use kayra_api::scheme::KindInfo;
use kayra_registry::Object;
use serde_json::{Value, json};

use crate::media::Output;
use crate::routes::Query;
use crate::table;

/// About how many bytes of a list are encoded at a time: a page of 500 objects goes out in one
/// write (a dozen smaller ones cost the kernel about twice what the same bytes cost in one),
/// while a list of every object holds no more than this beside what it streams.
const LIST_CHUNK: usize = 1 << 20;

/// From how many bytes a piece of a list goes out as it is rather than copied into a chunk.
const SHARED: usize = 64 << 10;

/// A JSON response with `Warning` headers.
pub(crate) fn json_response(code: StatusCode, body: &Value, warnings: &[String]) -> Response {
    let mut response = (code, axum::Json(body)).into_response();
    for warning in warnings {
        let text = format!("299 - \"{}\"", warning.replace('"', "\\\""));
        if let Ok(value) = HeaderValue::from_str(&text) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}

/// A JSON body written as it was encoded already.
pub(crate) fn json_bytes(code: StatusCode, body: Bytes) -> Response {
    let mut response = (code, body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// One object as `output` asks: its JSON, or a Table of one row.
pub(crate) fn one(kind: &KindInfo, object: Object, output: Output, query: &Query) -> Value {
    match output {
        Output::Json => Value::Object(object),
        Output::Table(version) => {
            let metadata = json!({"resourceVersion": object.get("metadata").and_then(|m| m.get("resourceVersion")).cloned().unwrap_or(Value::Null)});
            table::render(
                kind,
                &[object],
                metadata,
                version,
                query.get("includeObject").map(String::as_str),
                true,
            )
        }
    }
}

/// A list's `metadata`: its revision, continue token and how many items remain.
pub(crate) fn list_metadata(
    resource_version: &str,
    continue_token: Option<&str>,
    remaining: Option<u64>,
) -> Value {
    let mut metadata = json!({"resourceVersion": resource_version});
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(remaining) = remaining {
        metadata["remainingItemCount"] = json!(remaining);
    }
    metadata
}

/// A list of `items` (each an object's JSON, or a run of them joined with commas) as the
/// client takes it: the envelope with `metadata` first, then the items gathered into chunks,
/// each item taken (and, from the watch cache, encoded) only when its chunk is, so that neither
/// the whole response nor every item's JSON is ever held at once. A piece of [`SHARED`] bytes
/// or more (a page the watch cache keeps whole) goes out as it is, between chunks, not copied.
pub(crate) fn list(
    kind: &KindInfo,
    metadata: Value,
    items: impl Iterator<Item = Bytes> + Send + 'static,
) -> Response {
    let head = format!(
        "{{\"apiVersion\":{},\"kind\":{},\"metadata\":{},\"items\":[",
        Value::String(kind.api_version()),
        Value::String(format!("{}List", kind.kind)),
        metadata
    );
    let mut head = Some(head.into_bytes());
    let mut items = items;
    let (mut first, mut ended) = (true, false);
    // A large piece, to go out after the chunk before it.
    let mut shared: Option<Bytes> = None;
    let chunks = futures_util::stream::poll_fn(move |_| {
        if let Some(piece) = shared.take() {
            return Poll::Ready(Some(Ok::<_, std::io::Error>(piece)));
        }
        if ended {
            return Poll::Ready(None);
        }
        // The envelope goes out with the first items.
        let mut chunk = head.take().unwrap_or_default();
        let mut sized = false;
        while chunk.len() < LIST_CHUNK {
            let Some(item) = items.next() else {
                chunk.extend_from_slice(b"]}");
                ended = true;
                break;
            };
            if !first {
                chunk.push(b',');
            }
            first = false;
            if item.len() >= SHARED {
                shared = Some(item);
                break;
            }
            if !sized {
                // Room for as many more items of this one's size as are left, up to a chunk.
                let left = items.size_hint().0.saturating_add(1);
                chunk.reserve(
                    left.saturating_mul(item.len() + 1).saturating_add(2).min(LIST_CHUNK + (LIST_CHUNK >> 2)),
                );
                sized = true;
            }
            chunk.extend_from_slice(&item);
        }
        Poll::Ready(Some(Ok(Bytes::from(chunk))))
    });
    stream(Body::from_stream(chunks))
}

/// A streamed JSON response that no cache keeps.
pub(crate) fn stream(body: Body) -> Response {
    let mut response = Response::new(body);
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    response
}

/// A `Status` of success with `code`, as Kubernetes answers a binding or an eviction.
pub(crate) fn success(code: StatusCode) -> Response {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code.as_u16()});
    json_response(code, &status, &[])
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    /// The frames of a list of `count` items of about `size` bytes each.
    async fn frames(count: usize, size: usize) -> Vec<Bytes> {
        let scheme = kayra_api::scheme::Scheme::new("example.com");
        let kind = scheme.find("", "v1", "namespaces").expect("Namespaces are served").clone();
        let items: Vec<Bytes> =
            (0..count).map(|n| Bytes::from(json!({"n": n, "pad": "x".repeat(size)}).to_string())).collect();
        let response = list(&kind, list_metadata("7", None, None), items.into_iter());
        let mut stream = response.into_body().into_data_stream();
        let mut frames = Vec::new();
        while let Some(frame) = stream.next().await {
            frames.push(frame.expect("a frame"));
        }
        frames
    }

    #[tokio::test]
    async fn a_large_piece_goes_out_as_it_is_between_chunks() {
        let scheme = kayra_api::scheme::Scheme::new("example.com");
        let kind = scheme.find("", "v1", "namespaces").expect("Namespaces are served").clone();
        let small = |n: usize| Bytes::from(json!({"n": n}).to_string());
        let page: Vec<Bytes> = (1..8000).map(small).collect();
        let page = Bytes::from(page.iter().map(|b| b.to_vec()).collect::<Vec<_>>().join(&b","[..]));
        assert!(page.len() >= SHARED);
        for items in [vec![page.clone()], vec![small(0), page.clone(), small(8000)]] {
            let count = items.len();
            let response = list(&kind, list_metadata("7", None, None), items.into_iter());
            let mut stream = response.into_body().into_data_stream();
            let mut frames = Vec::new();
            while let Some(frame) = stream.next().await {
                frames.push(frame.expect("a frame"));
            }
            assert!(frames.iter().any(|frame| frame.as_ptr() == page.as_ptr()), "{count} pieces: not copied");
            let body: Value = serde_json::from_slice(&frames.concat()).expect("one JSON document");
            let numbers: Vec<u64> = body["items"]
                .as_array()
                .expect("items")
                .iter()
                .filter_map(|item| item["n"].as_u64())
                .collect();
            let expected: Vec<u64> = match count {
                1 => (1..8000).collect(),
                _ => (0..=8000).collect(),
            };
            assert_eq!(numbers, expected);
        }
    }

    #[tokio::test]
    async fn a_list_goes_out_whole_in_one_frame_up_to_a_chunk_and_in_chunks_beyond() {
        for (count, size, least, most) in [(0, 0, 1, 1), (1, 10, 1, 1), (500, 1300, 1, 1), (3000, 1300, 3, 5)]
        {
            let frames = frames(count, size).await;
            assert!((least..=most).contains(&frames.len()), "{count} items: {} frames", frames.len());
            for frame in &frames {
                assert!(frame.len() <= LIST_CHUNK + size + 64, "a frame of {} bytes", frame.len());
            }
            let body: Vec<u8> = frames.concat();
            let list: Value = serde_json::from_slice(&body).expect("the frames make one JSON document");
            assert_eq!(list["kind"], "NamespaceList");
            assert_eq!(list["metadata"]["resourceVersion"], "7");
            let numbers: Vec<u64> = list["items"]
                .as_array()
                .expect("items")
                .iter()
                .filter_map(|item| item["n"].as_u64())
                .collect();
            assert_eq!(numbers, (0..count as u64).collect::<Vec<_>>());
        }
    }
}
