//! The service-account tokens a node's desired state carries: for each Application bound to
//! the node, one per file its `spec.identity` asks for, minted through the application layer's
//! issuer and held until 80 % of its life has passed, when the next push carries a fresh one.
//! Tokens are minted only for the Applications of the node being pushed to, so a node's
//! session never carries a token of an Application bound elsewhere.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kayra_api::kinds::application::{Projection, WorkloadIdentity};
use kayra_api::session::{DesiredState, Document, ProjectedToken};
use kayra_application::ApplicationLayer;
use kayra_registry::meta_str;
use serde_json::Value;
use tokio::time::Instant;

/// How soon a token that could not be minted is tried again.
const RETRY: Duration = Duration::from_secs(10);

/// The share of a token's life after which a fresh one is pushed.
const REFRESH_AT: f64 = 0.8;

/// The tokens last pushed to each node.
#[derive(Debug, Default)]
pub(crate) struct Tokens {
    held: Mutex<HashMap<String, NodeTokens>>,
}

/// One node's tokens, by Application uid and file.
type NodeTokens = HashMap<(String, String), Held>;

#[derive(Debug, Clone)]
struct Held {
    projection: Projection,
    token: ProjectedToken,
    /// On tokio's clock: when a fresh one is due.
    refresh_at: Instant,
}

impl Tokens {
    /// Adds to `desired` the tokens of its Applications, minting those that are missing or due,
    /// and folds them into its signature. Answers when the next one falls due.
    pub(crate) async fn fill(
        &self,
        control: &ApplicationLayer,
        node: &str,
        desired: &mut DesiredState,
    ) -> Option<Duration> {
        let before =
            self.held.lock().expect("the token table's lock is never held across a panic").remove(node);
        let mut before = before.unwrap_or_default();
        let mut now_held = HashMap::new();
        let mut next: Option<Duration> = None;
        let mut due = |at: Duration| next = Some(next.map_or(at, |next| next.min(at)));
        for application in &desired.applications {
            let uid = meta_str(application, "uid").to_owned();
            if uid.is_empty() || !meta_str(application, "deletionTimestamp").is_empty() {
                continue;
            }
            for projection in projections(application) {
                let key = (uid.clone(), projection.path.clone());
                let now = Instant::now();
                let held = match before.remove(&key) {
                    Some(held) if held.projection == projection && held.refresh_at > now => held,
                    _ => match mint(control, application, &uid, &projection).await {
                        Some(held) => held,
                        None => {
                            due(RETRY);
                            continue;
                        }
                    },
                };
                due(held.refresh_at.saturating_duration_since(now));
                now_held.insert(key, held);
            }
        }
        let mut tokens: Vec<ProjectedToken> = now_held.values().map(|held| held.token.clone()).collect();
        tokens.sort_by(|a, b| (&a.uid, &a.path).cmp(&(&b.uid, &b.path)));
        desired.signature = signed(&desired.signature, &tokens);
        desired.tokens = tokens;
        if !now_held.is_empty() {
            self.held
                .lock()
                .expect("the token table's lock is never held across a panic")
                .insert(node.to_owned(), now_held);
        }
        next
    }

    /// Forgets what was pushed to `node` (its session ended).
    pub(crate) fn forget(&self, node: &str) {
        self.held.lock().expect("the token table's lock is never held across a panic").remove(node);
    }
}

/// What `application`'s `spec.identity` asks for; nothing when it cannot be read.
fn projections(application: &Document) -> Vec<Projection> {
    let identity = application
        .get("spec")
        .and_then(|spec| spec.get("identity"))
        .map(|identity| serde_json::from_value::<WorkloadIdentity>(identity.clone()));
    match identity {
        None => WorkloadIdentity::projections(None),
        Some(Ok(identity)) => WorkloadIdentity::projections(Some(&identity)),
        Some(Err(_)) => Vec::new(),
    }
}

async fn mint(
    control: &ApplicationLayer,
    application: &Document,
    uid: &str,
    projection: &Projection,
) -> Option<Held> {
    let audiences: Vec<String> = projection.audience.iter().cloned().collect();
    let object = Value::Object((**application).clone());
    match control.mint_token(&object, &audiences, Some(projection.expiration_seconds)).await {
        Ok(minted) => {
            let life = (minted.expires_at - kayra_application::identity::now()).max(0);
            let refresh_in = Duration::from_secs_f64(life as f64 * REFRESH_AT);
            Some(Held {
                projection: projection.clone(),
                token: ProjectedToken {
                    uid: uid.to_owned(),
                    path: projection.path.clone(),
                    token: minted.token,
                    expires_at: minted.expires_at,
                },
                refresh_at: Instant::now() + refresh_in,
            })
        }
        Err(error) => {
            tracing::warn!(
                namespace = meta_str(application, "namespace"),
                name = meta_str(application, "name"),
                path = projection.path,
                %error,
                "could not mint a service-account token"
            );
            None
        }
    }
}

/// The state's signature with its tokens' files and expiries folded in: a fresh token is a
/// new state to push.
fn signed(signature: &str, tokens: &[ProjectedToken]) -> String {
    if tokens.is_empty() {
        return signature.to_owned();
    }
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    digest.update(signature.as_bytes());
    for token in tokens {
        digest.update(format!("\n{} {} {}", token.uid, token.path, token.expires_at).as_bytes());
    }
    crate::cache::hex(digest.finish().as_ref())
}
