//! `kayra-bench http-load`: the load generator of the external HTTP benchmark, a process of
//! its own. N HTTP/1.1 keep-alive connections (hyper's bare client connection, one request in
//! flight on each) send GETs, or POSTs of a template with a unique name each, for a fixed time
//! or a fixed count.
//! Prints one JSON line: `{"requests", "rate", "p50_ms", "p99_ms"}`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

/// What the load generator was asked for.
#[derive(Debug, Default)]
struct Options {
    url: Option<String>,
    token: Option<String>,
    connections: usize,
    seconds: Option<f64>,
    count: Option<usize>,
    post: Option<String>,
    prefix: String,
}

fn options(args: &[String]) -> Result<Options, String> {
    let mut options = Options { connections: 1, prefix: "load".into(), ..Options::default() };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?.clone();
        match arg.as_str() {
            "--url" => options.url = Some(value),
            "--token" => options.token = Some(value),
            "--connections" => {
                options.connections = value.parse().map_err(|e| format!("--connections: {e}"))?
            }
            "--seconds" => options.seconds = Some(value.parse().map_err(|e| format!("--seconds: {e}"))?),
            "--count" => options.count = Some(value.parse().map_err(|e| format!("--count: {e}"))?),
            "--post" => options.post = Some(value),
            "--prefix" => options.prefix = value,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if options.connections == 0 || options.seconds.is_none() == options.count.is_none() {
        return Err("need --connections N >= 1 and exactly one of --seconds S, --count N".into());
    }
    Ok(options)
}

/// When a worker stops: at a deadline, or once `count` operations were claimed.
#[derive(Clone)]
struct Stop {
    deadline: Option<Instant>,
    count: Option<usize>,
    claimed: Arc<AtomicUsize>,
}

impl Stop {
    /// Claims the next operation's number, or answers `None` when the run is over.
    fn next(&self) -> Option<usize> {
        if self.deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            return None;
        }
        let n = self.claimed.fetch_add(1, Ordering::Relaxed);
        match self.count {
            Some(count) if n >= count => None,
            _ => Some(n),
        }
    }
}

/// `kayra-bench http-load ...`.
pub(crate) async fn run(args: &[String]) -> Result<(), String> {
    let options = options(args)?;
    let stop = Stop {
        deadline: options.seconds.map(|s| Instant::now() + Duration::from_secs_f64(s)),
        count: options.count,
        claimed: Arc::new(AtomicUsize::new(0)),
    };
    let started = Instant::now();
    let mut latencies = http_connections(&options, &stop).await?;
    let elapsed = started.elapsed();
    latencies.sort();
    let quantile = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q).round() as usize)
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
    };
    println!(
        "{}",
        serde_json::json!({
            "requests": latencies.len(),
            "rate": latencies.len() as f64 / elapsed.as_secs_f64(),
            "p50_ms": quantile(0.5),
            "p99_ms": quantile(0.99),
        })
    );
    Ok(())
}

/// What every request of a run shares.
struct Target {
    authority: String,
    path: String,
    token: Option<String>,
    /// For POSTs: the body's text before and after `{NAME}`.
    post: Option<(String, String)>,
    prefix: String,
}

impl Target {
    fn request(&self, n: usize) -> Result<hyper::Request<Full<Bytes>>, String> {
        let mut builder = hyper::Request::builder()
            .uri(&self.path)
            .header(hyper::header::HOST, &self.authority)
            .header(hyper::header::ACCEPT, "application/json");
        if let Some(token) = &self.token {
            builder = builder.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let body = match &self.post {
            Some((before, after)) => {
                builder = builder.method("POST").header(hyper::header::CONTENT_TYPE, "application/json");
                Bytes::from(format!("{before}{}-{n}{after}", self.prefix))
            }
            None => Bytes::new(),
        };
        builder.body(Full::new(body)).map_err(|e| e.to_string())
    }
}

async fn http_connections(options: &Options, stop: &Stop) -> Result<Vec<Duration>, String> {
    let url = options.url.as_deref().ok_or("--url is needed")?;
    let rest = url.strip_prefix("http://").ok_or("the load generator speaks plain http:// only")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let post = match &options.post {
        Some(file) => {
            let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
            let (before, after) = text.split_once("{NAME}").ok_or("the POST template names no {NAME}")?;
            Some((before.to_owned(), after.to_owned()))
        }
        None => None,
    };
    let target = Arc::new(Target {
        authority: authority.to_owned(),
        path: if path.is_empty() { "/".into() } else { path.to_owned() },
        token: options.token.clone(),
        post,
        prefix: options.prefix.clone(),
    });
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..options.connections {
        let (target, stop) = (target.clone(), stop.clone());
        tasks.spawn(async move {
            let stream =
                tokio::net::TcpStream::connect(&target.authority).await.map_err(|e| e.to_string())?;
            stream.set_nodelay(true).map_err(|e| e.to_string())?;
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            let mut latencies = Vec::new();
            while let Some(n) = stop.next() {
                let request = target.request(n)?;
                let started = Instant::now();
                // The connection takes the next request only once it has finished the last
                // response, which may lag its body's end by a moment.
                sender.ready().await.map_err(|e| e.to_string())?;
                let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
                let status = response.status();
                let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
                latencies.push(started.elapsed());
                if !status.is_success() {
                    return Err(format!("request {n} answered {status}: {}", String::from_utf8_lossy(&body)));
                }
            }
            Ok::<_, String>(latencies)
        });
    }
    let mut all = Vec::new();
    while let Some(done) = tasks.join_next().await {
        all.extend(done.map_err(|e| e.to_string())??);
    }
    Ok(all)
}
