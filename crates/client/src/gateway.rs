//! The catalog reconciler's HTTP adapters: documents fetched and steps sent over plain
//! HTTP(S), to the gateway and wherever a mode's steps point. Redirects are not followed: a
//! document or a step answers where it was asked.

use std::time::Duration;

use kayra_catalog::SpecFetcher;
use kayra_catalog::steps::{StepRequest, StepRunner};

/// How long fetching a document may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Plain HTTP(S) for documents and steps, to the gateway and whatever steps name.
#[derive(Debug, Clone)]
pub struct Http(reqwest::Client);

#[async_trait::async_trait]
impl SpecFetcher for Http {
    async fn fetch(&self, url: &str, limit: usize) -> Result<(u16, Vec<u8>), String> {
        let mut response = self.0.get(url).timeout(FETCH_TIMEOUT).send().await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let mut body = Vec::new();
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

impl Http {
    /// A client that follows no redirects.
    pub fn new() -> Result<Http, reqwest::Error> {
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().map(Http)
    }
}
