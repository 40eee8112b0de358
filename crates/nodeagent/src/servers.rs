//! The controllers a node may reach: `--server URL1,URL2,URL3`, one URL per replica (or one, a
//! balancer's). A node holds one session, to one of them; each node starts with the replica
//! its name picks, so that nodes spread over the replicas, and moves to the next in turn
//! whenever a connection fails or its session ends. Joining and renewing the certificate try
//! each in turn until one answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kayra_client::join::{self, JoinError};

/// The controllers, and the one to try next.
#[derive(Debug, Clone)]
pub struct Servers {
    urls: Arc<[String]>,
    next: Arc<AtomicUsize>,
}

impl Servers {
    /// The comma-separated `list`, each an `https://host[:port]` URL, first tried at the one
    /// `node`'s name picks.
    pub fn parse(list: &str, node: &str) -> Result<Servers, JoinError> {
        let urls: Vec<String> =
            list.split(',').map(str::trim).filter(|url| !url.is_empty()).map(str::to_owned).collect();
        if urls.is_empty() {
            return Err(JoinError::BadServer { server: list.to_owned() });
        }
        for url in &urls {
            join::check_server(url)?;
        }
        let start = pick(node, urls.len());
        Ok(Servers { urls: urls.into(), next: Arc::new(AtomicUsize::new(start)) })
    }

    /// The controller to try now; the following call answers the next one.
    pub fn take(&self) -> &str {
        let at = self.next.fetch_add(1, Ordering::Relaxed);
        &self.urls[at % self.urls.len()]
    }

    /// Every controller once, starting with the one to try now; which one the session tries
    /// next is left as it is.
    pub fn in_turn(&self) -> Vec<&str> {
        let at = self.next.load(Ordering::Relaxed);
        (0..self.urls.len()).map(|n| self.urls[(at + n) % self.urls.len()].as_str()).collect()
    }

    /// The host and port workloads reach the API at: those of the controller this node starts
    /// with (an IPv6 address without its brackets, as `KUBERNETES_SERVICE_HOST` carries it).
    pub fn api_host_port(&self) -> Option<(String, u16)> {
        host_port(self.in_turn().first()?)
    }

    /// The list, as it is written and given: comma-separated.
    pub fn list(&self) -> String {
        self.urls.join(",")
    }
}

/// The host and port of an `https://host[:port][/...]` URL (port 443 when it names none).
fn host_port(url: &str) -> Option<(String, u16)> {
    let authority = url.strip_prefix("https://")?.split('/').next()?;
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => {
            let (host, rest) = bracketed.split_once(']')?;
            (host, rest.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = match port {
        Some(port) => port.parse().ok()?,
        None => 443,
    };
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

/// Runs `attempt` against each controller in turn until one answers: an unreachable one is
/// passed over, any other answer (a success, a refusal, a CA that does not match the pin) is
/// the answer.
pub(crate) async fn each_until_answered<T, F, Fut>(servers: &Servers, mut attempt: F) -> Result<T, JoinError>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Result<T, JoinError>>,
{
    let mut unreachable = None;
    for server in servers.in_turn() {
        match attempt(server.to_owned()).await {
            Err(error @ JoinError::Unreachable { .. }) => {
                tracing::warn!(%error, "trying the next controller");
                unreachable = Some(error);
            }
            answered => return answered,
        }
    }
    Err(unreachable.expect("a list of servers is never empty"))
}

/// Where in a list of `len` a node named `node` starts: FNV-1a of the name, so that the same
/// node always starts at the same replica and different nodes spread.
fn pick(node: &str, len: usize) -> usize {
    let hash = node.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    usize::try_from(hash % u64::try_from(len).unwrap_or(1)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_names_https_urls_and_is_taken_in_turn_from_where_the_name_picks() {
        let servers =
            Servers::parse("https://a:6443, https://b:6443,https://c:6443", "node-1").expect("valid");
        let first = servers.take().to_owned();
        let turn = servers.in_turn();
        assert_eq!(turn.len(), 3);
        assert_ne!(turn[0], first, "the next one is tried after the first");
        let mut sorted = turn.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, ["https://a:6443", "https://b:6443", "https://c:6443"]);
        assert_eq!(servers.list(), "https://a:6443,https://b:6443,https://c:6443");
        let again = Servers::parse("https://a:6443,https://b:6443,https://c:6443", "node-1").expect("valid");
        assert_eq!(again.take(), first, "a node starts at the same replica every time");
        let starts: std::collections::HashSet<String> = (0..30)
            .map(|n| {
                Servers::parse("https://a,https://b,https://c", &format!("node-{n}"))
                    .expect("valid")
                    .take()
                    .to_owned()
            })
            .collect();
        assert_eq!(starts.len(), 3, "nodes spread over the replicas");
        for bad in ["", " , ", "https://a,http://b", "a:6443"] {
            assert!(Servers::parse(bad, "n").is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn an_unreachable_controller_is_passed_over_and_any_other_answer_kept() {
        let servers = Servers::parse("https://a,https://b,https://c", "n").expect("valid");
        let reached = each_until_answered(&servers, |server| async move {
            if server == "https://c" {
                Ok(server)
            } else {
                Err(JoinError::Unreachable { server, reason: "refused".into() })
            }
        })
        .await;
        assert_eq!(reached.ok().as_deref(), Some("https://c"));
        let mut asked = 0;
        let refused: Result<(), _> = each_until_answered(&servers, |_| {
            asked += 1;
            async { Err(JoinError::Refused { code: 403, message: "no".into() }) }
        })
        .await;
        assert!(matches!(refused, Err(JoinError::Refused { .. })));
        assert_eq!(asked, 1, "a refusal is an answer: the others are not asked");
    }

    #[test]
    fn workloads_reach_the_api_at_the_host_and_port_of_a_server_url() {
        for (url, expected) in [
            ("https://192.0.2.2:6443", Some(("192.0.2.2", 6443))),
            ("https://ctl.example.com", Some(("ctl.example.com", 443))),
            ("https://[::1]:7443/", Some(("::1", 7443))),
            ("https://[::1]", Some(("::1", 443))),
            ("https://:6443", None),
            ("https://a:port", None),
            ("http://a:1", None),
        ] {
            let got = host_port(url);
            assert_eq!(got.as_ref().map(|(h, p)| (h.as_str(), *p)), expected, "{url}");
        }
    }
}
