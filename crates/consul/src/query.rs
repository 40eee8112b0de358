//! A request's Consul parameters: datacenter, namespace, token, blocking, tags, `passing`,
//! read and refused as Consul does (a bad value is a 400 naming it, an unknown datacenter a 500).

use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};

/// The longest a query is held, as Consul caps `wait`.
pub const MAX_WAIT: Duration = Duration::from_secs(600);
/// How long a query is held when it names no `wait`.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(300);
/// The longest `filter` looked at; longer ones are refused before they are parsed.
const MAX_FILTER_BYTES: usize = 4096;

/// A refusal, answered as Consul's plain-text error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Its status.
    pub status: StatusCode,
    /// Its text.
    pub text: String,
}

impl Refusal {
    pub(crate) fn bad_request(why: impl std::fmt::Display) -> Refusal {
        Refusal { status: StatusCode::BAD_REQUEST, text: format!("Bad request: {why}") }
    }
}

/// What a read asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Query {
    /// The namespace read: `ns`, else `X-Consul-Namespace`, else the configured default.
    pub namespace: String,
    /// The ACL token: `X-Consul-Token`, else `Authorization: Bearer`, else `token`.
    pub token: Option<String>,
    /// `index`: hold the request until what it reads changed past it.
    pub index: Option<u64>,
    /// `wait`: how long to hold it at most.
    pub wait: Duration,
    /// `tag`, repeatable: instances must carry every one.
    pub tags: Vec<String>,
    /// `passing`: only instances whose every check passes.
    pub passing: bool,
}

/// Reads `query` (the URL's query string) and `headers`, for a projection of datacenter
/// `datacenter` whose default namespace is `default_namespace`.
pub fn parse(
    query: Option<&str>,
    headers: &HeaderMap,
    datacenter: &str,
    default_namespace: &str,
) -> Result<Query, Refusal> {
    let mut parsed = Query { wait: DEFAULT_WAIT, ..Query::default() };
    let mut namespace = None;
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "dc" if !value.is_empty() && value != datacenter => {
                return Err(Refusal {
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    text: "No path to datacenter".to_owned(),
                });
            }
            "ns" if !value.is_empty() => namespace = Some(value.into_owned()),
            "index" => {
                let index = value
                    .parse::<u64>()
                    .map_err(|_| Refusal::bad_request(format!("Invalid index {value:?}")))?;
                parsed.index = Some(index);
            }
            "wait" => {
                let wait = go_duration(&value).ok_or_else(|| Refusal::bad_request("Invalid wait time"))?;
                parsed.wait = wait.min(MAX_WAIT);
            }
            "tag" => parsed.tags.push(value.into_owned()),
            "passing" => parsed.passing = !matches!(value.as_ref(), "0" | "false"),
            "token" if parsed.token.is_none() && !value.is_empty() => parsed.token = Some(value.into_owned()),
            "filter" if !value.is_empty() => {
                if value.len() > MAX_FILTER_BYTES {
                    return Err(Refusal::bad_request(format!("filter longer than {MAX_FILTER_BYTES} bytes")));
                }
                return Err(Refusal::bad_request("filter not supported"));
            }
            _ => {}
        }
    }
    let header =
        |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).filter(|v| !v.is_empty());
    let namespace = namespace.or_else(|| header("x-consul-namespace").map(str::to_owned));
    parsed.namespace = namespace.unwrap_or_else(|| default_namespace.to_owned());
    let bearer = header("authorization").and_then(|value| value.strip_prefix("Bearer ")).map(str::trim);
    if let Some(token) = header("x-consul-token").or(bearer) {
        parsed.token = Some(token.to_owned());
    }
    Ok(parsed)
}

/// A Go duration (`10s`, `1500ms`, `1m30s`, `0`), as `wait` carries it.
pub fn go_duration(text: &str) -> Option<Duration> {
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        let number: f64 = number.parse().ok()?;
        let unit_end = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let seconds = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += number * seconds;
        rest = after;
    }
    (total.is_finite() && total < 1e9).then(|| Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests;
