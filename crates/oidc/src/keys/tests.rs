//! The key set's stored form, thumbprints, rotation and pruning.

use super::*;

#[test]
fn a_stored_key_set_reads_back_with_the_same_ids() {
    let set = KeySet::generate().expect("a key");
    let stored = set.stored();
    let text = serde_json::to_string(&stored).expect("serializes");
    let again = KeySet::from_stored(&serde_json::from_str(&text).expect("parses")).expect("reads back");
    assert_eq!(again.current().kid(), set.current().kid());
    assert_eq!(again.stored(), stored);
}

#[test]
fn the_kid_is_the_rfc_7638_thumbprint_of_the_public_jwk() {
    // RFC 7638's method applied to the JWK the set publishes: recompute it from the JWK alone.
    let set = KeySet::generate().expect("a key");
    let jwk = set.current().jwk();
    let canonical = serde_json::to_string(&json!({
        "crv": jwk["crv"], "kty": jwk["kty"], "x": jwk["x"], "y": jwk["y"],
    }))
    .expect("serializes");
    let expected = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes()));
    assert_eq!(jwk["kid"], expected.as_str());
    assert_eq!(set.current().kid().len(), 43, "a SHA-256 in base64url");
}

#[test]
fn the_jwks_carries_no_private_material() {
    let set = KeySet::generate().expect("a key");
    let jwks = set.jwks();
    let key = &jwks["keys"][0];
    let mut members: Vec<&str> = key.as_object().expect("an object").keys().map(String::as_str).collect();
    members.sort_unstable();
    assert_eq!(members, ["alg", "crv", "kid", "kty", "use", "x", "y"]);
    let pkcs8 = &set.stored().keys[0].pkcs8;
    assert!(!jwks.to_string().contains(pkcs8.as_str()));
}

#[test]
fn a_rotation_keeps_the_old_key_until_every_token_it_signed_has_expired() {
    let mut set = KeySet::generate().expect("a key");
    let old = set.current().kid().to_owned();
    set.rotate(SigningKey::generate().expect("a key"), 1_000);
    let new = set.current().kid().to_owned();
    assert_ne!(old, new);
    assert_eq!(set.jwks()["keys"].as_array().expect("keys").len(), 2, "both are published");
    assert!(set.find(&old).is_some(), "the old key still verifies");
    let last_expiry = 1_000 + MAX_EXPIRATION_SECONDS + CLOCK_SKEW_SECONDS;
    assert!(!set.outlived(last_expiry));
    assert!(!set.prune(last_expiry), "a token signed just before the rotation may still be valid");
    assert!(set.outlived(last_expiry + 1));
    assert!(set.prune(last_expiry + 1));
    assert!(!set.outlived(last_expiry + 1));
    assert!(set.find(&old).is_none());
    assert_eq!(set.jwks()["keys"].as_array().expect("keys").len(), 1);
    let stored = set.stored();
    assert_eq!(stored.keys.len(), 1);
    assert_eq!(stored.keys[0].retired_at, None);
}

#[test]
fn a_stored_set_without_exactly_one_current_key_is_refused() {
    let set = KeySet::generate().expect("a key");
    let mut none_current = set.stored();
    none_current.keys[0].retired_at = Some(5);
    assert!(matches!(KeySet::from_stored(&none_current), Err(Error::Key(_))));
    let mut two_current = set.stored();
    two_current.keys.push(two_current.keys[0].clone());
    assert!(matches!(KeySet::from_stored(&two_current), Err(Error::Key(_))));
    let damaged = StoredKeys { keys: vec![StoredKey { pkcs8: "bm90IGEga2V5".to_owned(), retired_at: None }] };
    assert!(matches!(KeySet::from_stored(&damaged), Err(Error::Key(_))));
}
