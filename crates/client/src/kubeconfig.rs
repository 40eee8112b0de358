//! The kubeconfig file, as kubectl reads and writes it: clusters, users and contexts by name,
//! and the current context. One typed shape for both directions: the controller writes the
//! admin's with it, and every client reads theirs with it.

use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

/// A kubeconfig (`apiVersion: v1`, `kind: Config`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct Kubeconfig {
    /// `v1`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// `Config`.
    pub kind: String,
    /// The clusters, by name.
    pub clusters: Vec<NamedCluster>,
    /// The users, by name.
    pub users: Vec<NamedUser>,
    /// The contexts, by name.
    pub contexts: Vec<NamedContext>,
    /// The context used when none is asked for.
    pub current_context: String,
}

/// A cluster and its name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NamedCluster {
    /// The name contexts refer to.
    pub name: String,
    /// The cluster.
    pub cluster: Cluster,
}

/// Where a cluster's API is and how to trust it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct Cluster {
    /// The API's URL.
    pub server: String,
    /// The CA certificate, PEM, base64-encoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate_authority_data: Option<String>,
    /// The CA certificate's file, relative to the kubeconfig.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate_authority: Option<PathBuf>,
}

/// A user and its name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NamedUser {
    /// The name contexts refer to.
    pub name: String,
    /// The user's credentials.
    pub user: User,
}

/// A user's credentials: a client certificate and key, or a bearer token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct User {
    /// The client certificate, PEM, base64-encoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_certificate_data: Option<String>,
    /// The client key, PEM, base64-encoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_key_data: Option<String>,
    /// The client certificate's file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<PathBuf>,
    /// The client key's file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_key: Option<PathBuf>,
    /// A bearer token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// A context and its name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NamedContext {
    /// The name `current-context` refers to.
    pub name: String,
    /// The context.
    pub context: Context,
}

/// A cluster, a user, and a default namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Context {
    /// The cluster's name.
    pub cluster: String,
    /// The user's name.
    pub user: String,
    /// The namespace used when none is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl Kubeconfig {
    /// One cluster `cluster` at `server` trusted through `ca_pem`, one user `user` holding a
    /// client certificate, and the context joining them (namespace `default`) as the current one.
    pub fn with_client_certificate(
        cluster: &str,
        server: &str,
        ca_pem: &str,
        user: &str,
        certificate_pem: &str,
        key_pem: &str,
    ) -> Kubeconfig {
        let context = format!("{cluster}-{user}");
        Kubeconfig {
            api_version: "v1".to_owned(),
            kind: "Config".to_owned(),
            clusters: vec![NamedCluster {
                name: cluster.to_owned(),
                cluster: Cluster {
                    server: server.to_owned(),
                    certificate_authority_data: Some(STANDARD.encode(ca_pem)),
                    certificate_authority: None,
                },
            }],
            users: vec![NamedUser {
                name: user.to_owned(),
                user: User {
                    client_certificate_data: Some(STANDARD.encode(certificate_pem)),
                    client_key_data: Some(STANDARD.encode(key_pem)),
                    ..User::default()
                },
            }],
            contexts: vec![NamedContext {
                name: context.clone(),
                context: Context {
                    cluster: cluster.to_owned(),
                    user: user.to_owned(),
                    namespace: Some("default".to_owned()),
                },
            }],
            current_context: context,
        }
    }

    /// Reads a kubeconfig from YAML.
    pub fn parse(text: &str) -> Result<Kubeconfig, String> {
        serde_saphyr::from_str(text).map_err(|error| error.to_string())
    }

    /// The kubeconfig as YAML, each value on its own line as kubectl writes it (no folded
    /// block scalars: tools that read a kubeconfig line by line find the whole value).
    pub fn to_yaml(&self) -> String {
        let mut options = serde_saphyr::SerializerOptions::default();
        options.prefer_block_scalars = false;
        serde_saphyr::to_string_with_options(self, options).expect("a kubeconfig serialises")
    }

    /// The current context (or the first), its cluster, and its user if it names one.
    pub fn current(&self) -> Result<(&Cluster, Option<&User>), String> {
        let context = self
            .contexts
            .iter()
            .find(|c| c.name == self.current_context)
            .or_else(|| self.contexts.first())
            .ok_or_else(|| "no context".to_owned())?;
        let cluster = self
            .clusters
            .iter()
            .find(|c| c.name == context.context.cluster)
            .ok_or_else(|| format!("no cluster {:?}", context.context.cluster))?;
        let user = self.users.iter().find(|u| u.name == context.context.user).map(|u| &u.user);
        Ok((&cluster.cluster, user))
    }

    /// The current context's namespace, `default` when it names none (as kubectl reads it).
    pub fn current_namespace(&self) -> &str {
        self.contexts
            .iter()
            .find(|c| c.name == self.current_context)
            .or_else(|| self.contexts.first())
            .and_then(|c| c.context.namespace.as_deref())
            .filter(|namespace| !namespace.is_empty())
            .unwrap_or("default")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_kubeconfig_reads_back_as_written_and_as_kubectl_spells_it() {
        let written = Kubeconfig::with_client_certificate(
            "kayra",
            "https://127.0.0.1:6443",
            "CA",
            "admin",
            "CERT",
            "KEY",
        );
        let yaml = written.to_yaml();
        for line in [
            "apiVersion: v1",
            "kind: Config",
            "current-context: kayra-admin",
            "certificate-authority-data: Q0E=",
            "client-key-data: S0VZ",
            "namespace: default",
        ] {
            assert!(yaml.contains(line), "{line} missing from:\n{yaml}");
        }
        let long = "x".repeat(2000);
        let wide = Kubeconfig::with_client_certificate("kayra", "https://h:1", &long, "admin", &long, &long)
            .to_yaml();
        let line = wide.lines().find(|line| line.trim_start().starts_with("client-key-data: ")).unwrap();
        assert_eq!(
            line.trim_start(),
            format!("client-key-data: {}", STANDARD.encode(&long)),
            "one line, as kubectl writes it"
        );
        let read = Kubeconfig::parse(&yaml).unwrap();
        assert_eq!(read, written);
        let (cluster, user) = read.current().unwrap();
        assert_eq!(cluster.server, "https://127.0.0.1:6443");
        assert_eq!(user.unwrap().client_certificate_data.as_deref(), Some("Q0VSVA=="));
    }
}
