//! How this replica reaches the others: HTTPS with a client certificate it issues itself with
//! the cluster CA at start (user `system:kayra:controller:<id>`, group
//! `system:kayra:controllers`, kept in memory only), trusting the cluster CA alone. The API
//! uses it to read a log through the replica holding the node's session, to open an exec,
//! attach or port-forward there (over HTTP/1.1, whose upgrade the stream protocols need), and
//! `kubectl top` to read the usage samples the other replicas hold.

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use kayra_apiserver::peers::{PeerAnswer, PeerUpgrade, Peers};
use kayra_pki::Usage;

use crate::ControlPlaneError;

/// The other replicas, over HTTPS.
pub(crate) struct HttpsPeers {
    client: reqwest::Client,
    /// The same, HTTP/1.1 only: a stream is an upgraded HTTP/1.1 connection.
    upgrades: reqwest::Client,
}

impl HttpsPeers {
    /// A client for replica `id`, with a certificate the CA under `data_dir` signs for it.
    pub(crate) fn new(data_dir: &std::path::Path, id: &str) -> Result<HttpsPeers, ControlPlaneError> {
        let ca = crate::pki::read_ca(data_dir)?;
        let user = format!("system:kayra:controller:{id}");
        let issued = ca
            .issue(Usage::Client, &user, Some(kayra_authn::CONTROLLERS_GROUP), &[])
            .map_err(ControlPlaneError::pki("cannot issue the replica's own certificate"))?;
        let tls = |error: reqwest::Error| ControlPlaneError::Tls(format!("the replica's client: {error}"));
        let identity =
            reqwest::Identity::from_pem(format!("{}{}", issued.cert_pem, issued.key_pem).as_bytes())
                .map_err(tls)?;
        let root = reqwest::Certificate::from_pem(ca.cert_pem().as_bytes()).map_err(tls)?;
        let builder = || {
            reqwest::Client::builder()
                .tls_certs_only([root.clone()])
                .identity(identity.clone())
                .connect_timeout(std::time::Duration::from_secs(5))
        };
        let client = builder().build().map_err(tls)?;
        let upgrades = builder().http1_only().build().map_err(tls)?;
        Ok(HttpsPeers { client, upgrades })
    }
}

impl HttpsPeers {
    /// `GET url` as this replica, answering its JSON body; anything but a 200 in 5 s fails.
    pub(crate) async fn json(&self, url: &str) -> Result<serde_json::Value, String> {
        let sent = self.client.get(url).timeout(std::time::Duration::from_secs(5)).send();
        let response = sent.await.map_err(|error| error.to_string())?;
        if !response.status().is_success() {
            return Err(format!("{url} answered {}", response.status()));
        }
        response.json().await.map_err(|error| error.to_string())
    }
}

impl Peers for HttpsPeers {
    fn get(&self, url: String) -> BoxFuture<'static, Result<PeerAnswer, String>> {
        let client = self.client.clone();
        Box::pin(async move {
            let response = client.get(&url).send().await.map_err(|error| error.to_string())?;
            Ok(answer(response))
        })
    }

    fn upgrade(
        &self,
        method: String,
        url: String,
        headers: Vec<(String, String)>,
    ) -> BoxFuture<'static, Result<PeerUpgrade, String>> {
        let client = self.upgrades.clone();
        Box::pin(async move {
            let method = reqwest::Method::from_bytes(method.as_bytes()).map_err(|error| error.to_string())?;
            let mut request = client.request(method, &url);
            for (name, value) in headers {
                request = request.header(name, value);
            }
            let response = request.send().await.map_err(|error| error.to_string())?;
            if response.status() != reqwest::StatusCode::SWITCHING_PROTOCOLS {
                return Ok(PeerUpgrade::Refused(answer(response)));
            }
            let headers = response
                .headers()
                .iter()
                .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
                .collect();
            let connection = response.upgrade().await.map_err(|error| error.to_string())?;
            Ok(PeerUpgrade::Switched { headers, connection: Box::new(connection) })
        })
    }
}

/// A peer's answer as it streams.
fn answer(response: reqwest::Response) -> PeerAnswer {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("text/plain; charset=utf-8")
        .to_owned();
    let body = futures_util::stream::unfold(Some(response), |response| async move {
        let mut response = response?;
        match response.chunk().await {
            Ok(Some(chunk)) => Some((Ok(chunk), Some(response))),
            Ok(None) => None,
            Err(error) => Some((Err(std::io::Error::other(error)), None)),
        }
    })
    .boxed();
    PeerAnswer { status, content_type, body }
}
