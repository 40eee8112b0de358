//! The usage samples this replica's sessions hold, read by the application layer through its
//! [`UsageSource`] port: an Application's are found through the node it is bound to, a node's
//! under its own session.

use std::sync::{Arc, Weak};

use kayra_application::usage::{Samples, UsageSource};

use crate::{Inner, NodeServer};

/// Reads the samples of a node server's sessions. It holds the server weakly: the application
/// layer holds the reader, and the server holds the layer.
struct Reader {
    inner: Weak<Inner>,
}

impl NodeServer {
    /// The usage samples of this server's sessions, as the application layer reads them.
    pub fn usage_source(&self) -> Arc<dyn UsageSource> {
        Arc::new(Reader { inner: Arc::downgrade(&self.inner) })
    }
}

impl Reader {
    /// Every session's samples that `keep` keeps, by node.
    fn collect(&self, keep: impl Fn(&str, &str) -> bool) -> Vec<Samples> {
        let Some(inner) = self.inner.upgrade() else { return Vec::new() };
        let sessions: Vec<_> = inner.sessions().values().cloned().collect();
        let mut found = Vec::new();
        for live in sessions {
            let usage = live.usage();
            found.extend(
                usage
                    .iter()
                    .filter(|((namespace, name), _)| keep(namespace, name))
                    .map(|(_, samples)| samples.clone()),
            );
        }
        found
    }

    /// The samples session `node` holds under `namespace/name`.
    fn of(&self, node: &str, namespace: &str, name: &str) -> Option<Samples> {
        let inner = self.inner.upgrade()?;
        let live = inner.sessions().get(node).cloned()?;
        let usage = live.usage();
        usage.get(&(namespace.to_owned(), name.to_owned())).cloned()
    }
}

#[async_trait::async_trait]
impl UsageSource for Reader {
    async fn application(&self, namespace: &str, name: &str) -> Option<Samples> {
        let inner = self.inner.upgrade()?;
        let application = inner.cache.application(namespace, name)?;
        let node = kayra_api::kinds::application::bound_node(&application)?.to_owned();
        self.of(&node, namespace, name)
    }

    async fn applications(&self, namespace: Option<&str>) -> Vec<Samples> {
        self.collect(|ns, name| !name.is_empty() && namespace.is_none_or(|wanted| wanted == ns))
    }

    async fn node(&self, node: &str) -> Option<Samples> {
        self.of(node, "", "")
    }

    async fn nodes(&self) -> Vec<Samples> {
        self.collect(|_, name| name.is_empty())
    }

    async fn held(&self) -> Vec<Samples> {
        self.collect(|_, _| true)
    }
}
