//! A token's record survives being stored as a Secret, and only a bootstrap token's Secret
//! meant for authentication reads back as one.

use std::time::Duration;

use kayra_api::kinds::Kind;

use super::*;
use crate::bootstrap::{Token, authenticate};

fn stored(extra_groups: &[&str]) -> Stored {
    let token = Token::parse("abcdef.0123456789abcdef").unwrap();
    Stored {
        id: token.id.clone(),
        secret_digest: token.secret_digest(),
        expires: SystemTime::now() + Duration::from_secs(3600),
        extra_groups: extra_groups.iter().map(|group| (*group).to_owned()).collect(),
    }
}

#[test]
fn a_stored_token_reads_back_as_it_was_written() {
    for groups in [&[][..], &["system:bootstrappers:workers", "system:bootstrappers:edge"][..]] {
        let written = stored(groups);
        let secret = encode("example.com", &written, "node n1 joins");
        // Through the JSON the registry keeps, as the API reads it.
        let kept: Secret = serde_json::from_value(serde_json::to_value(&secret).unwrap()).unwrap();
        assert_eq!(decode(&kept), Some(written.clone()), "{groups:?}");
        assert!(kept.validate(None).is_empty(), "{:?}", kept.validate(None));
        assert_eq!(kept.metadata.name.as_deref(), Some("bootstrap-token-abcdef"));
        assert_eq!(kept.metadata.namespace.as_deref(), Some("kayra-system"));
        assert_eq!(kept.api_version.as_deref(), Some("fleet.example.com/v1"));
        assert_eq!(kept.text("description").as_deref(), Some("node n1 joins"));
        assert_eq!(kept.expires_at().map(SystemTime::from), Some(written.expires));
        let token = Token::parse("abcdef.0123456789abcdef").unwrap();
        assert!(authenticate(&token, &decode(&kept).unwrap(), SystemTime::now()).is_some());
    }
    let undescribed = encode("example.com", &stored(&[]), "");
    assert!(undescribed.text("description").is_none() && undescribed.text("auth-extra-groups").is_none());
}

#[test]
fn only_a_bootstrap_token_meant_for_authentication_reads_back() {
    let secret = encode("example.com", &stored(&[]), "");
    let opaque = Secret { type_: Some("Opaque".into()), ..secret.clone() };
    assert_eq!(decode(&opaque), None);
    let mut unusable = secret.clone();
    unusable.data.remove(USAGE_AUTHENTICATION);
    assert_eq!(decode(&unusable), None);
    let mut forever = secret.clone();
    forever.data.remove("expiration");
    assert_eq!(decode(&forever), None);
    let mut nameless = secret;
    nameless.data.remove("token-id");
    assert_eq!(decode(&nameless), None);
}
