//! A client for Kayra's API, configured from the kubeconfig kubectl reads (`$KUBECONFIG`, else
//! `~/.kube/config`): the current context's server, its CA, and its client certificate or
//! bearer token. Answers are JSON; a failure carries the server's `Status` message.
//! [`gateway`] holds the catalog reconciler's adapters for reaching registered APIs; [`join`]
//! is how a node joins a cluster and keeps its certificate.

pub mod gateway;
pub mod join;
pub mod kubeconfig;

use std::path::{Path, PathBuf};

use base64::Engine;
use kubeconfig::Kubeconfig;
use serde_json::Value;

/// Why a request did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig is missing or unusable.
    #[error("kubeconfig {path}: {message}")]
    Config {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The server could not be reached.
    #[error("cannot reach {server}: {source}")]
    Transport {
        /// The server.
        server: String,
        /// The cause.
        #[source]
        source: reqwest::Error,
    },
    /// The server refused, with its Status message.
    #[error("{message} ({code})")]
    Status {
        /// The HTTP status.
        code: u16,
        /// The Status message, or the body.
        message: String,
    },
}

impl ClientError {
    /// Whether trying again unchanged may succeed: the server was unreachable, overloaded
    /// (429) or failing (5xx); a bad kubeconfig or a refusal stays as it is.
    pub fn is_retryable(&self) -> bool {
        match self {
            ClientError::Transport { .. } => true,
            ClientError::Status { code, .. } => *code >= 500 || *code == 429,
            ClientError::Config { .. } => false,
        }
    }
}

/// A configured client.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    server: String,
    token: Option<String>,
    namespace: String,
}

impl Client {
    /// The client of the kubeconfig kubectl would use.
    pub fn from_environment() -> Result<Client, ClientError> {
        let path = match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
            Some(paths) => std::env::split_paths(&paths).next().unwrap_or_default(),
            None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".kube/config"),
        };
        Client::from_kubeconfig(&path)
    }

    /// The client of the current context of the kubeconfig at `path`.
    pub fn from_kubeconfig(path: &Path) -> Result<Client, ClientError> {
        let fail = |message: String| ClientError::Config { path: path.display().to_string(), message };
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let config = Kubeconfig::parse(&text).map_err(fail)?;
        let (cluster, user) = config.current().map_err(fail)?;
        let relative = |file: &PathBuf| path.parent().unwrap_or(Path::new(".")).join(file);
        let read = |data: &Option<String>, file: &Option<PathBuf>| -> Result<Option<Vec<u8>>, ClientError> {
            if let Some(data) = data {
                return base64::engine::general_purpose::STANDARD
                    .decode(data.trim())
                    .map(Some)
                    .map_err(|e| fail(format!("base64: {e}")));
            }
            file.as_ref()
                .map(|file| std::fs::read(relative(file)).map_err(|e| fail(e.to_string())))
                .transpose()
        };
        let mut builder = reqwest::Client::builder();
        if let Some(ca) = read(&cluster.certificate_authority_data, &cluster.certificate_authority)? {
            let ca = reqwest::Certificate::from_pem(&ca).map_err(|e| fail(format!("the CA: {e}")))?;
            builder = builder.tls_certs_only([ca]);
        }
        let mut token = None;
        if let Some(user) = user {
            let certificate = read(&user.client_certificate_data, &user.client_certificate)?;
            let key = read(&user.client_key_data, &user.client_key)?;
            if let (Some(certificate), Some(key)) = (certificate, key) {
                let identity = reqwest::Identity::from_pem(&[certificate, key].concat())
                    .map_err(|e| fail(format!("the client certificate: {e}")))?;
                builder = builder.identity(identity);
            }
            token.clone_from(&user.token);
        }
        let http = builder.build().map_err(|e| fail(e.to_string()))?;
        let namespace = config.current_namespace().to_owned();
        Ok(Client { http, server: cluster.server.trim_end_matches('/').to_owned(), token, namespace })
    }

    /// The server's URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The namespace of the current context (`default` when it names none): where a named
    /// object of a namespaced resource is looked for when no namespace is given.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Sends `method` to `path` with an optional JSON body; answers the JSON reply.
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        self.send_accepting(method, path, body, "application/json").await
    }

    /// As [`Client::send`], asking for `accept`.
    pub async fn send_accepting(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        accept: &str,
    ) -> Result<Value, ClientError> {
        let mut request =
            self.http.request(method, format!("{}{path}", self.server)).header("Accept", accept);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let transport = |source| ClientError::Transport { server: self.server.clone(), source };
        let response = request.send().await.map_err(transport)?;
        let code = response.status().as_u16();
        let text = response.text().await.map_err(transport)?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
        if !(200..300).contains(&code) {
            let message = value.get("message").and_then(Value::as_str).map(str::to_owned).unwrap_or(text);
            return Err(ClientError::Status { code, message });
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfigs_name_their_server_and_credentials() {
        let dir = std::env::temp_dir().join(format!("kayra-client-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443/\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n  user:\n    token: abc\n",
        )
        .unwrap();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::from_kubeconfig(&path).unwrap();
        assert_eq!(client.server(), "https://127.0.0.1:6443");
        assert_eq!(client.token.as_deref(), Some("abc"));
        assert_eq!(client.namespace(), "default", "a context naming no namespace");
        std::fs::write(
            &path,
            "clusters:\n- name: c\n  cluster:\n    server: https://h/\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n    namespace: shop\ncurrent-context: x\nusers:\n- name: u\n  user:\n    token: abc\n",
        )
        .unwrap();
        assert_eq!(Client::from_kubeconfig(&path).unwrap().namespace(), "shop");
        std::fs::write(&path, "contexts: []\n").unwrap();
        assert!(Client::from_kubeconfig(&path).unwrap_err().to_string().contains("no context"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
