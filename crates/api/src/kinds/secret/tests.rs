//! Secrets: their data, limits and bootstrap tokens.

use super::*;

fn token_secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() },
        type_: Some(BOOTSTRAP_TOKEN_TYPE.into()),
        data: data.iter().map(|(k, v)| ((*k).to_owned(), STANDARD.encode(v))).collect(),
        ..Secret::default()
    }
}

#[test]
fn bootstrap_token_secrets_are_checked_and_expire() {
    let digest = "a".repeat(64);
    let good = token_secret(
        "bootstrap-token-abc123",
        &[("token-id", "abc123"), ("token-secret-sha256", &digest), ("expiration", "2026-12-01T00:00:00Z")],
    );
    assert!(good.validate(None).is_empty(), "{:?}", good.validate(None));
    assert_eq!(good.expires_at(), Some("2026-12-01T00:00:00Z".parse().unwrap()));

    let fields = |secret: &Secret| secret.validate(None).into_iter().map(|e| e.field).collect::<Vec<_>>();
    let misnamed = token_secret(
        "other",
        &[("token-id", "abc123"), ("token-secret-sha256", &digest), ("expiration", "2026-12-01T00:00:00Z")],
    );
    assert_eq!(fields(&misnamed), ["metadata.name"]);
    let forever =
        token_secret("bootstrap-token-abc123", &[("token-id", "abc123"), ("token-secret-sha256", &digest)]);
    assert_eq!(fields(&forever), ["data[expiration]"]);
    let plain = token_secret(
        "bootstrap-token-abc123",
        &[
            ("token-id", "abc123"),
            ("token-secret-sha256", "0123456789abcdef"),
            ("expiration", "2026-12-01T00:00:00Z"),
        ],
    );
    assert_eq!(fields(&plain), ["data[token-secret-sha256]"], "a secret half is no digest");
    let promoted = token_secret(
        "bootstrap-token-abc123",
        &[
            ("token-id", "abc123"),
            ("token-secret-sha256", &digest),
            ("expiration", "2026-12-01T00:00:00Z"),
            ("auth-extra-groups", "system:masters"),
        ],
    );
    assert_eq!(fields(&promoted), ["data[auth-extra-groups]"]);

    let opaque = Secret { type_: Some("Opaque".into()), ..good.clone() };
    assert!(opaque.expires_at().is_none(), "only bootstrap tokens expire");
    assert_eq!(fields(&Secret { ..opaque.clone() }), Vec::<String>::new());
    let retyped = opaque.validate(Some(&good)).into_iter().map(|e| e.field).collect::<Vec<_>>();
    assert_eq!(retyped, ["type"], "a Secret's type is immutable");
}
