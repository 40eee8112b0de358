//! The opaque `continue` token of a paginated list: the revision the list is read at and the
//! key to go on from, base64 of a small JSON document as Kubernetes makes it.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

/// Where the next page of a list starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Continue {
    /// The format, so tokens from elsewhere are recognised as such.
    v: String,
    /// The revision the whole list is read at; zero reads the latest.
    pub(crate) rv: u64,
    /// The key, relative to the resource's prefix, that the next page starts at.
    pub(crate) start: String,
}

const VERSION: &str = "meta.k8s.io/v1";

impl Continue {
    pub(crate) fn new(rv: u64, start: String) -> Continue {
        Continue { v: VERSION.to_owned(), rv, start }
    }

    pub(crate) fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).expect("a token serialises"))
    }

    /// Decodes a token; anything that is not one of ours is `None`.
    pub(crate) fn decode(token: &str) -> Option<Continue> {
        let bytes = URL_SAFE_NO_PAD.decode(token.trim_end_matches('=')).ok()?;
        let token: Continue = serde_json::from_slice(&bytes).ok()?;
        (token.v == VERSION && !token.start.contains("..")).then_some(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_foreign_ones_are_refused() {
        let token = Continue::new(42, "default/web\0".to_owned());
        assert_eq!(Continue::decode(&token.encode()), Some(token));
        for bad in ["", "not base64!", "e30", &URL_SAFE_NO_PAD.encode(br#"{"v":"x","rv":1,"start":""}"#)] {
            assert_eq!(Continue::decode(bad), None, "{bad:?}");
        }
    }
}
