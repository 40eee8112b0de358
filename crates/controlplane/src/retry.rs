//! Patience with a store that does not answer yet: a starting controller retries what the
//! store may answer later (an etcd still electing a leader, a disk briefly saturated).

use std::future::Future;
use std::time::Duration;

use kayra_registry::RegistryError;

use crate::ControlPlaneError;

/// How long a starting controller keeps trying a store that does not answer before it gives up.
const STORE_PATIENCE: Duration = Duration::from_secs(60);

/// Runs `attempt` until it succeeds, retrying what the store may answer later for up to
/// [`STORE_PATIENCE`]; any other error, or the patience running out, fails with `what`.
pub(crate) async fn patiently<T, F, Fut>(what: &str, mut attempt: F) -> Result<T, ControlPlaneError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, RegistryError>>,
{
    let deadline = tokio::time::Instant::now() + STORE_PATIENCE;
    let mut pause = Duration::from_millis(100);
    loop {
        match attempt().await {
            Ok(value) => return Ok(value),
            Err(error) if error.is_retryable() && tokio::time::Instant::now() < deadline => {
                tracing::warn!(%error, "cannot {what} yet; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            Err(error) => return Err(ControlPlaneError::registry(what)(error)),
        }
    }
}
