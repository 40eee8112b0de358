//! The catalog's reconciler as this service runs it: plain HTTP (reqwest) for the catalog's
//! document-fetching and step-sending ports, and a loop that runs a reconciliation pass when the
//! catalog changes and on a period regardless, so a failed fetch or step is tried again. Kayra's
//! controller does the same with leader election and backoff; one replica needs neither.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kayra_catalog::steps::{ReconcilerConfig, StepRequest, StepRunner};
use kayra_catalog::{Catalog, CatalogError, Report, SpecFetcher};

/// How long fetching a document may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// How many subscribers a pass reconciles at once.
const CONCURRENCY: usize = 8;

/// Plain HTTP to the gateway and to whatever the steps name; redirects are not followed.
pub struct Http(reqwest::Client);

impl Http {
    /// A client; a rustls crypto provider must be installed first (`main` installs ring's).
    pub fn new() -> Result<Http, reqwest::Error> {
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().map(Http)
    }
}

#[async_trait::async_trait]
impl SpecFetcher for Http {
    async fn fetch(&self, url: &str, limit: usize) -> Result<(u16, Vec<u8>), String> {
        let mut response = self.0.get(url).timeout(FETCH_TIMEOUT).send().await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let mut body = Vec::new();
        // At most `limit + 1` bytes: enough for the catalog to tell a document is too large.
        while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
            body.extend_from_slice(&chunk);
            if body.len() > limit {
                break;
            }
        }
        Ok((status, body))
    }
}

#[async_trait::async_trait]
impl StepRunner for Http {
    async fn send(&self, request: &StepRequest) -> Result<u16, String> {
        let method = reqwest::Method::from_bytes(request.method.as_bytes()).map_err(|e| e.to_string())?;
        let mut builder = self.0.request(method, &request.url).timeout(request.timeout);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        if !request.body.is_empty() {
            builder = builder.body(request.body.clone());
        }
        let response = builder.send().await.map_err(|e| e.to_string())?;
        Ok(response.status().as_u16())
    }
}

/// The reconciler of one catalog.
pub struct Reconciler {
    /// The catalog reconciled.
    pub catalog: Arc<Catalog>,
    /// The gateway and the modes registrations name.
    pub config: ReconcilerConfig,
    /// How documents are fetched and steps sent.
    pub http: Http,
}

impl Reconciler {
    /// One pass over every due subscription.
    pub async fn pass(&self) -> Result<Report, CatalogError> {
        self.catalog.reconcile(&self.config, &self.http, &self.http, CONCURRENCY).await
    }

    /// Runs passes until `shutdown` resolves: one at once, then one after every change to the
    /// catalog, and one every `period` regardless. After a pass with a failure the next waits
    /// for the period, so a broken gateway or step is retried, not hammered. Each pass's result
    /// goes to `on_pass`.
    pub async fn run(
        &self,
        period: Duration,
        mut on_pass: impl FnMut(&Result<Report, CatalogError>),
        shutdown: impl Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        loop {
            // Watching before the pass means a change made during it wakes the next one.
            let mut changes = self.catalog.changes().await.ok();
            let result = self.pass().await;
            let failed =
                result.as_ref().map_or(true, |report| report.attempts.iter().any(|a| a.failure.is_some()));
            on_pass(&result);
            let changed = async {
                if let Some(changes) = changes.as_mut().filter(|_| !failed)
                    && changes.next().await.is_some()
                {
                    return;
                }
                std::future::pending().await
            };
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(period) => {}
                () = changed => {}
            }
        }
    }
}
