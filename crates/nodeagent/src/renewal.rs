//! The node certificate's renewal: when 70–90 % of its lifetime has passed, as kubelet does,
//! a new certificate is asked for with the current one and kept in place of it.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use kayra_client::join;
use tokio_util::sync::CancellationToken;

use crate::servers::{self, Servers};

/// How long a failed renewal waits before it is tried again.
const RENEWAL_RETRY: Duration = Duration::from_secs(60);

/// Renews the certificate kept under `dir` whenever it is due, until `stop`.
/// Each renewal asks the controllers in turn until one answers.
pub(crate) async fn renew(dir: PathBuf, servers: Servers, node: String, stop: CancellationToken) {
    loop {
        let current = match join::load(&dir) {
            Ok(Some(current)) => current,
            _ => return,
        };
        let jitter = f64::from(
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().subsec_millis(),
        ) / 1000.0;
        let wait = join::certificate_renewal_due(&current.cert_pem, jitter)
            .ok()
            .and_then(|due| due.duration_since(SystemTime::now()).ok())
            .unwrap_or_default();
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        let renewed = servers::each_until_answered(&servers, |server| {
            let (current, node) = (&current, &node);
            async move { join::renew(&server, current, node, join::DEFAULT_CERTIFICATE_TIMEOUT).await }
        });
        match renewed.await {
            Ok(renewed) => match join::store(&dir, &renewed) {
                Ok(()) => tracing::info!(node, "renewed the node's certificate"),
                Err(error) => tracing::warn!(%error, "cannot keep the renewed certificate"),
            },
            Err(error) => {
                tracing::warn!(%error, "cannot renew the node's certificate; trying again shortly");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(RENEWAL_RETRY) => {}
                }
            }
        }
    }
}
