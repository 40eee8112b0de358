//! Minting and verifying, and every way a token is refused: algorithm confusion, `alg: none`,
//! unknown and removed keys, forged signatures, oversized tokens, and the validity window with
//! its clock skew.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use super::*;
use crate::keys::{KeySet, SigningKey};

const ISSUER: &str = "https://kayra.example:6443";
const NOW: i64 = 1_800_000_000;

fn subject() -> Subject {
    Subject {
        namespace: "team".to_owned(),
        name: "web".to_owned(),
        uid: "0b0e9f2c-uid".to_owned(),
        node: Some(Reference { name: "n1".to_owned(), uid: "node-uid".to_owned() }),
    }
}

fn minted(keys: &KeySet) -> Minted {
    mint(keys, ISSUER, &subject(), &[ISSUER.to_owned()], None, NOW).expect("minted")
}

fn part(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

fn check(keys: &KeySet, token: &str, at: i64, expected: Result<(), Invalid>) {
    let verified = verify(keys, ISSUER, token, at).map(drop);
    assert_eq!(verified, expected, "at {at}");
}

#[test]
fn a_minted_token_has_the_projected_service_account_shape() {
    let keys = KeySet::generate().expect("a key");
    let minted = minted(&keys);
    assert_eq!(minted.expires_at, NOW + DEFAULT_EXPIRATION_SECONDS);
    let parts: Vec<&str> = minted.token.split('.').collect();
    let header: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).expect("b64")).expect("json");
    assert_eq!(header, json!({"alg": "ES256", "kid": keys.current().kid(), "typ": "JWT"}));
    let claims: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).expect("b64")).expect("json");
    assert_eq!(claims["iss"], ISSUER);
    assert_eq!(claims["sub"], "system:serviceaccount:team:web");
    assert_eq!(claims["aud"], json!([ISSUER]));
    assert_eq!((claims["iat"].as_i64(), claims["nbf"].as_i64()), (Some(NOW), Some(NOW)));
    assert_eq!(claims["exp"].as_i64(), Some(NOW + 3_600));
    assert!(claims["jti"].as_str().is_some_and(|jti| !jti.is_empty()));
    assert_eq!(
        claims["kubernetes.io"],
        json!({"namespace": "team", "serviceaccount": {"name": "web", "uid": "0b0e9f2c-uid"},
               "node": {"name": "n1", "uid": "node-uid"}})
    );
    let unbound = Subject { node: None, ..subject() };
    let token = mint(&keys, ISSUER, &unbound, &["vault".to_owned()], Some(600), NOW).expect("minted");
    let claims = verify(&keys, ISSUER, &token.token, NOW).expect("verifies");
    assert_eq!(claims.kubernetes.node, None, "no node claim when the Application is not bound");
}

#[test]
fn a_verified_token_is_the_service_account_identity_of_its_application() {
    let keys = KeySet::generate().expect("a key");
    let claims = verify(&keys, ISSUER, &minted(&keys).token, NOW).expect("verifies");
    let identity = claims.identity();
    assert_eq!(identity.user, "system:serviceaccount:team:web");
    assert_eq!(identity.uid, "0b0e9f2c-uid");
    assert_eq!(
        identity.groups,
        ["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"]
    );
    assert_eq!(claims.extra()["authentication.kubernetes.io/node-name"], ["n1"]);
    assert_eq!(claims.audiences_within(&["other".to_owned(), ISSUER.to_owned()]), [ISSUER]);
    assert!(claims.audiences_within(&["other".to_owned()]).is_empty());
}

#[test]
fn the_requested_life_is_between_ten_minutes_and_two_days() {
    for (asked, expected) in [
        (None, Some(3_600)),
        (Some(600), Some(600)),
        (Some(172_800), Some(172_800)),
        (Some(599), None),
        (Some(172_801), None),
        (Some(-1), None),
    ] {
        let life = expiration(asked);
        assert_eq!(life.as_ref().ok().copied(), expected, "{asked:?}");
        if let Err(error) = life {
            assert!(error.to_string().starts_with("spec.expirationSeconds"), "{error}");
        }
    }
    let keys = KeySet::generate().expect("a key");
    for audiences in [vec![], vec![String::new()], vec!["a".to_owned(); 17]] {
        let refused = mint(&keys, ISSUER, &subject(), &audiences, None, NOW).expect_err("refused");
        assert!(refused.to_string().starts_with("spec.audiences"), "{refused}");
    }
}

#[test]
fn the_validity_window_allows_sixty_seconds_of_clock_skew_either_side() {
    let keys = KeySet::generate().expect("a key");
    let token = minted(&keys).token;
    let expiry = NOW + DEFAULT_EXPIRATION_SECONDS;
    check(&keys, &token, NOW, Ok(()));
    check(&keys, &token, expiry + 60, Ok(()));
    check(&keys, &token, expiry + 61, Err(Invalid::Expired));
    check(&keys, &token, NOW - 60, Ok(()));
    check(&keys, &token, NOW - 61, Err(Invalid::NotYetValid));
}

#[test]
fn a_token_whose_not_before_is_in_the_future_is_refused() {
    let keys = KeySet::generate().expect("a key");
    let later = mint(&keys, ISSUER, &subject(), &[ISSUER.to_owned()], None, NOW + 3_600).expect("minted");
    check(&keys, &later.token, NOW, Err(Invalid::NotYetValid));
}

#[test]
fn alg_none_and_a_mac_keyed_with_the_public_key_are_refused() {
    let keys = KeySet::generate().expect("a key");
    let token = minted(&keys).token;
    let payload = token.split('.').nth(1).expect("a payload");
    let kid = keys.current().kid();
    let none = format!("{}.{payload}.", part(&json!({"alg": "none", "kid": kid})));
    check(&keys, &none, NOW, Err(Invalid::Algorithm));
    let none_upper = format!("{}.{payload}.", part(&json!({"alg": "NONE"})));
    check(&keys, &none_upper, NOW, Err(Invalid::Algorithm));
    // The classic confusion: HS256 keyed with the public key a verifier publishes.
    let input = format!("{}.{payload}", part(&json!({"alg": "HS256", "kid": kid})));
    let mac = ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, keys.current().public_key()),
        input.as_bytes(),
    );
    let hs256 = format!("{input}.{}", URL_SAFE_NO_PAD.encode(mac.as_ref()));
    check(&keys, &hs256, NOW, Err(Invalid::Algorithm));
    let no_alg =
        format!("{}.{payload}.{}", part(&json!({"kid": kid})), token.split('.').nth(2).expect("a signature"));
    check(&keys, &no_alg, NOW, Err(Invalid::Algorithm));
}

#[test]
fn an_unknown_kid_and_a_key_removed_after_rotation_are_refused() {
    let mut keys = KeySet::generate().expect("a key");
    let old = minted(&keys).token;
    let other = KeySet::generate().expect("another key");
    check(&keys, &minted(&other).token, NOW, Err(Invalid::UnknownKey));
    keys.rotate(SigningKey::generate().expect("a key"), NOW);
    check(&keys, &old, NOW + 10, Ok(()));
    let new = mint(&keys, ISSUER, &subject(), &[ISSUER.to_owned()], None, NOW + 10).expect("minted");
    assert_ne!(new.token.split('.').next(), old.split('.').next(), "new tokens name the new key");
    check(&keys, &new.token, NOW + 10, Ok(()));
    keys.prune(NOW + MAX_EXPIRATION_SECONDS + CLOCK_SKEW_SECONDS + 1);
    check(&keys, &old, NOW + 10, Err(Invalid::UnknownKey));
}

#[test]
fn a_forged_or_altered_token_is_refused() {
    let keys = KeySet::generate().expect("a key");
    let token = minted(&keys).token;
    let parts: Vec<&str> = token.split('.').collect();
    // Another key's signature under this key's id.
    let forger = KeySet::generate().expect("a key");
    let forged_input = format!("{}.{}", parts[0], parts[1]);
    let forged_signature = forger.current().sign(forged_input.as_bytes()).expect("signed");
    let forged = format!("{forged_input}.{}", URL_SAFE_NO_PAD.encode(forged_signature));
    check(&keys, &forged, NOW, Err(Invalid::Signature));
    // A claim changed after signing.
    let mut claims: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).expect("b64")).expect("json");
    claims["sub"] = json!("system:serviceaccount:kube-system:admin");
    let altered = format!("{}.{}.{}", parts[0], part(&claims), parts[2]);
    check(&keys, &altered, NOW, Err(Invalid::Signature));
    for malformed in ["", "a.b", "a.b.c.d", "!!.!!.!!", &format!("{}.{}.", parts[0], parts[1])] {
        let verified = verify(&keys, ISSUER, malformed, NOW).map(drop);
        assert!(
            matches!(verified, Err(Invalid::Malformed | Invalid::Signature)),
            "{malformed}: {verified:?}"
        );
    }
}

#[test]
fn another_issuer_and_a_mismatched_subject_are_refused() {
    let keys = KeySet::generate().expect("a key");
    let elsewhere =
        mint(&keys, "https://other", &subject(), &[ISSUER.to_owned()], None, NOW).expect("minted");
    check(&keys, &elsewhere.token, NOW, Err(Invalid::Issuer));
    // A token this issuer signed whose claims disagree with each other cannot be minted by
    // `mint`; build one by hand with the issuer's key.
    let mut claims =
        serde_json::to_value(verify(&keys, ISSUER, &minted(&keys).token, NOW).expect("ok")).expect("json");
    claims["sub"] = json!("system:serviceaccount:team:admin");
    let input = format!("{}.{}", part(&json!({"alg": "ES256", "kid": keys.current().kid()})), part(&claims));
    let signature = keys.current().sign(input.as_bytes()).expect("signed");
    check(&keys, &format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)), NOW, Err(Invalid::Subject));
}

#[test]
fn an_oversized_token_is_refused_unread_and_no_refusal_quotes_the_token() {
    let keys = KeySet::generate().expect("a key");
    let huge = "a".repeat(MAX_TOKEN_BYTES + 1);
    check(&keys, &huge, NOW, Err(Invalid::TooLarge));
    let token = minted(&keys).token;
    for invalid in [
        Invalid::TooLarge,
        Invalid::Malformed,
        Invalid::Algorithm,
        Invalid::UnknownKey,
        Invalid::Signature,
        Invalid::Issuer,
        Invalid::Expired,
        Invalid::NotYetValid,
        Invalid::Subject,
    ] {
        let message = crate::Error::Invalid(invalid).to_string();
        for piece in token.split('.') {
            assert!(!message.contains(piece), "{message}");
        }
    }
}

#[test]
fn the_discovery_document_points_at_the_jwks() {
    let document = crate::discovery_document("https://kayra.example:6443/");
    assert_eq!(document["jwks_uri"], "https://kayra.example:6443/openid/v1/jwks");
    assert_eq!(document["id_token_signing_alg_values_supported"], json!(["ES256"]));
}

#[test]
fn a_tokens_key_id_is_read_from_its_header_alone() {
    let keys = KeySet::generate().unwrap();
    let token = minted(&keys).token;
    assert_eq!(key_id(&token).as_deref(), Some(keys.current().kid()));
    let unnamed = format!("{}.{}.x", part(&json!({"alg": "ES256"})), part(&json!({})));
    for (text, why) in [
        (unnamed.as_str(), "no kid"),
        ("not a token", "no header"),
        ("%%%.e30.x", "a header that is not base64url JSON"),
    ] {
        assert_eq!(key_id(text), None, "{why}");
    }
    assert_eq!(key_id(&"a".repeat(MAX_TOKEN_BYTES + 1)), None, "oversized");
}
