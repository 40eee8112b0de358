//! Bootstrap tokens: short-lived bearer tokens a new node joins with, `<id>.<secret>` where
//! the id is 6 and the secret 16 characters of `[a-z0-9]`. What is stored is the id, the
//! SHA-256 of the secret and an expiry; the secret itself exists only where it was printed.
//! A token authenticates as `system:bootstrap:<id>` in `system:bootstrappers` (and the extra
//! groups it carries). [`secret`] is how that record is stored as a Secret and read back.

pub mod secret;

use std::time::SystemTime;

use crate::Identity;

/// The group every bootstrap token belongs to.
pub const BOOTSTRAPPERS: &str = "system:bootstrappers";

/// A token's two halves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The public half, which names where the token is stored.
    pub id: String,
    /// The private half.
    pub secret: String,
}

impl Token {
    /// Splits a bearer token of the bootstrap form; `None` for any other token.
    pub fn parse(token: &str) -> Option<Token> {
        let (id, secret) = token.split_once('.')?;
        let valid = |part: &str, len: usize| {
            part.len() == len && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        };
        (valid(id, 6) && valid(secret, 16)).then(|| Token { id: id.to_owned(), secret: secret.to_owned() })
    }

    /// A fresh random token.
    pub fn generate() -> Token {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let mut random = [0u8; 22];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut random)
            .expect("the system's random source works");
        // 36 does not divide 256, so rejection-free mapping would bias; 252 = 7 * 36 does.
        let mut chars = Vec::with_capacity(22);
        let mut pool = random.to_vec();
        while chars.len() < 22 {
            match pool.pop() {
                Some(byte) if byte < 252 => chars.push(ALPHABET[usize::from(byte % 36)] as char),
                Some(_) => {}
                None => {
                    pool = vec![0u8; 22];
                    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut pool)
                        .expect("the system's random source works");
                }
            }
        }
        let text: String = chars.into_iter().collect();
        Token { id: text[..6].to_owned(), secret: text[6..].to_owned() }
    }

    /// The hex SHA-256 of the secret half: what is stored.
    pub fn secret_digest(&self) -> String {
        hex_sha256(self.secret.as_bytes())
    }
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.id, self.secret)
    }
}

/// What is stored of a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The id.
    pub id: String,
    /// The hex SHA-256 of the secret half.
    pub secret_digest: String,
    /// When the token stops authenticating.
    pub expires: SystemTime,
    /// Groups beyond `system:bootstrappers`, each `system:bootstrappers:...`.
    pub extra_groups: Vec<String>,
}

/// The identity `token` stands for, if `stored` is its record and it has not expired.
pub fn authenticate(token: &Token, stored: &Stored, now: SystemTime) -> Option<Identity> {
    let (given, kept) = (token.secret_digest(), stored.secret_digest.as_bytes().to_vec());
    // Every byte is compared, whatever the first difference.
    let same = given.len() == kept.len() && given.bytes().zip(kept).fold(0, |acc, (a, b)| acc | (a ^ b)) == 0;
    let matches = stored.id == token.id && same;
    if !matches || now >= stored.expires {
        return None;
    }
    let mut groups = vec![BOOTSTRAPPERS.to_owned()];
    groups.extend(stored.extra_groups.iter().filter(|g| g.starts_with("system:bootstrappers:")).cloned());
    Some(Identity::new(format!("system:bootstrap:{}", token.id), String::new(), groups))
}

fn hex_sha256(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn tokens_parse_only_in_the_bootstrap_form() {
        let token = Token::parse("abcdef.0123456789abcdef").unwrap();
        assert_eq!((token.id.as_str(), token.secret.as_str()), ("abcdef", "0123456789abcdef"));
        for bad in [
            "abcdef0123456789abcdef",
            "abcde.0123456789abcdef",
            "ABCDEF.0123456789abcdef",
            "abcdef.0123456789abcde",
            "abcdef.0123456789abcdefg",
            "abcdef.0123456789abcde/",
        ] {
            assert!(Token::parse(bad).is_none(), "{bad}");
        }
        let fresh = Token::generate();
        assert_eq!(Token::parse(&fresh.to_string()), Some(fresh.clone()));
        assert_ne!(fresh, Token::generate());
    }

    #[test]
    fn a_token_authenticates_until_it_expires_and_only_with_its_secret() {
        let token = Token::parse("abcdef.0123456789abcdef").unwrap();
        let now = SystemTime::now();
        let stored = Stored {
            id: "abcdef".into(),
            secret_digest: token.secret_digest(),
            expires: now + Duration::from_secs(60),
            extra_groups: vec!["system:bootstrappers:workers".into(), "system:masters".into()],
        };
        assert_ne!(stored.secret_digest, token.secret, "only the digest is stored");
        let identity = authenticate(&token, &stored, now).unwrap();
        assert_eq!(identity.user, "system:bootstrap:abcdef");
        assert_eq!(
            identity.groups,
            ["system:bootstrappers", "system:bootstrappers:workers", "system:authenticated"]
        );
        assert!(authenticate(&token, &stored, now + Duration::from_secs(60)).is_none(), "expired");
        let wrong = Token::parse("abcdef.0123456789abcdee").unwrap();
        assert!(authenticate(&wrong, &stored, now).is_none(), "another secret");
    }
}
