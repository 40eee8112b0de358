//! Who the caller is: a client certificate verified against the cluster CA (CN is the user,
//! each O a group) or a bearer token from the static token file. There is no anonymous
//! access and no way to turn authentication off.
//!
//! This crate does no networking: the transport verifies the certificate chain and hands the
//! leaf to [`identity_from_certificate`]; bearer tokens go to [`TokenFile::authenticate`].

pub mod bootstrap;
mod changes;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};
use std::time::SystemTime;

use changes::Changes;

/// The group of the controller's replicas, as they identify themselves to each other (a client
/// certificate each replica issues itself with the cluster CA). Reserved: no token, bootstrap
/// or node credential, impersonation or RBAC object can put a caller in it.
pub const CONTROLLERS_GROUP: &str = "system:kayra:controllers";

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The user name.
    pub user: String,
    /// A stable id for the user, when the credential carries one.
    pub uid: String,
    /// The groups, always including `system:authenticated`.
    pub groups: Vec<String>,
}

impl Identity {
    /// An identity with `system:authenticated` added to its groups.
    pub fn new(user: impl Into<String>, uid: impl Into<String>, mut groups: Vec<String>) -> Identity {
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".to_owned());
        }
        Identity { user: user.into(), uid: uid.into(), groups }
    }
}

/// The identity of a verified client certificate, put into each request of the TLS connection
/// that presented it by the listener's accept loop (the REST API and the node session read it).
#[derive(Debug, Clone)]
pub struct PeerIdentity(pub Identity);

/// The identity in a verified client certificate: CN is the user, each O a group.
pub fn identity_from_certificate(der: &[u8]) -> Option<Identity> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = certificate.subject();
    let user = subject.iter_common_name().next()?.as_str().ok()?.to_owned();
    let groups = subject.iter_organization().filter_map(|o| o.as_str().ok().map(str::to_owned)).collect();
    (!user.is_empty()).then(|| Identity::new(user, String::new(), groups))
}

/// Bearer tokens from a file of `token,user,uid,"group1,group2"` lines, reloaded when the file
/// changes. Kept in memory by hash, never as the token itself.
#[derive(Debug)]
pub struct TokenFile {
    path: Option<PathBuf>,
    /// Whether the file may have changed: held while the file is looked at, so that no request
    /// sent after a change is authenticated before the change is read.
    changes: Option<Mutex<Changes>>,
    state: RwLock<TokenState>,
}

#[derive(Debug, Default)]
struct TokenState {
    /// What the file looked like when last read: modification time, size and inode, so an
    /// edit that keeps the timestamp is still noticed.
    version: Option<(SystemTime, u64, u64)>,
    identities: HashMap<[u8; 32], Identity>,
}

/// Why a token file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("cannot read token file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A line is malformed.
    #[error("token file {path}, line {line}: {message}")]
    Malformed {
        /// The file.
        path: String,
        /// The 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

impl TokenFileError {
    /// Whether reading the file again may succeed: an unreadable file may become readable
    /// (it is being replaced); a malformed line stays until someone fixes it.
    pub fn is_retryable(&self) -> bool {
        matches!(self, TokenFileError::Read { .. })
    }
}

impl TokenFile {
    /// No tokens at all: only client certificates authenticate.
    pub fn none() -> TokenFile {
        TokenFile { path: None, changes: None, state: RwLock::new(TokenState::default()) }
    }

    /// Loads the file at `path`; a malformed file is an error naming the line.
    pub fn load(path: &Path) -> Result<TokenFile, TokenFileError> {
        let file = TokenFile {
            path: Some(path.to_owned()),
            changes: Some(Mutex::new(Changes::watch(path))),
            state: RwLock::new(TokenState::default()),
        };
        file.reload()?;
        Ok(file)
    }

    fn reload(&self) -> Result<(), TokenFileError> {
        let Some(path) = &self.path else { return Ok(()) };
        let read = |source| TokenFileError::Read { path: path.display().to_string(), source };
        let metadata = std::fs::metadata(path).map_err(read)?;
        let version = (
            metadata.modified().map_err(read)?,
            metadata.len(),
            std::os::unix::fs::MetadataExt::ino(&metadata),
        );
        if self.state.read().expect("token lock").version == Some(version) {
            return Ok(());
        }
        let text = std::fs::read_to_string(path).map_err(read)?;
        let parsed = parse_tokens(&text).map_err(|(line, message)| TokenFileError::Malformed {
            path: path.display().to_string(),
            line,
            message,
        });
        // A file that changed but no longer parses trusts no token: a revoked token must not
        // live on because the edit that removed it has a typo elsewhere.
        let identities = parsed.as_ref().map(Clone::clone).unwrap_or_default();
        *self.state.write().expect("token lock") = TokenState { version: Some(version), identities };
        parsed.map(drop)
    }

    /// The identity a bearer token stands for.
    pub fn authenticate(&self, token: &str) -> Option<Identity> {
        if let Some(changes) = &self.changes {
            let mut changes = changes.lock().expect("token file watch lock");
            if changes.pending()
                && let Err(error) = self.reload()
            {
                tracing::error!(%error, "the token file cannot be used; no bearer token is accepted until it is fixed");
            }
        }
        self.state.read().expect("token lock").identities.get(&digest(token)).cloned()
    }
}

/// Tokens are kept only as SHA-256 digests.
fn digest(token: &str) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    digest.as_ref().try_into().expect("SHA-256 is 32 bytes")
}

/// Parses token lines; answers the line number and problem of the first bad line.
fn parse_tokens(text: &str) -> Result<HashMap<[u8; 32], Identity>, (usize, String)> {
    let mut identities = HashMap::new();
    for (at, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields = split_csv(line).map_err(|message| (at + 1, message))?;
        if fields.len() < 3 {
            return Err((at + 1, "expected token,user,uid[,\"groups\"]".to_owned()));
        }
        if fields[0].is_empty() || fields[1].is_empty() {
            return Err((at + 1, "the token and the user may not be empty".to_owned()));
        }
        let groups: Vec<String> = fields
            .get(3)
            .map(|g| g.split(',').map(str::trim).filter(|g| !g.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default();
        if groups.iter().any(|group| group == CONTROLLERS_GROUP) {
            return Err((
                at + 1,
                format!("the group {CONTROLLERS_GROUP} is the replicas' own; no token carries it"),
            ));
        }
        identities.insert(digest(&fields[0]), Identity::new(fields[1].clone(), fields[2].clone(), groups));
    }
    Ok(identities)
}

fn split_csv(line: &str) -> Result<Vec<String>, String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                fields.last_mut().expect("a field").push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(String::new()),
            c => fields.last_mut().expect("a field").push(c),
        }
    }
    if quoted {
        return Err("unterminated quote".to_owned());
    }
    Ok(fields.into_iter().map(|f| f.trim().to_owned()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_are_noticed_and_a_broken_file_trusts_no_token() {
        let dir = std::env::temp_dir().join(format!("kayra-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens.csv");
        std::fs::write(&path, "old,alice,1\n").unwrap();
        let file = TokenFile::load(&path).unwrap();
        assert!(file.authenticate("old").is_some());
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, "new,alice,1,\"g\"\n").unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(modified).unwrap();
        assert!(file.authenticate("old").is_none(), "a same-timestamp edit still revokes");
        assert!(file.authenticate("new").is_some());
        std::fs::write(&path, "new,alice,1,\"g\"\nbroken\n").unwrap();
        assert!(file.authenticate("new").is_none(), "a broken file trusts nobody");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_token_carries_the_replicas_group() {
        let refused = parse_tokens("abc,mallory,u1,\"dev,system:kayra:controllers\"\n").expect_err("refused");
        assert_eq!(refused.0, 1);
        assert!(refused.1.contains(CONTROLLERS_GROUP), "{}", refused.1);
    }

    #[test]
    fn token_lines_parse_as_kubernetes_token_files() {
        let tokens = parse_tokens("# comment\nabc,alice,u1,\"dev,ops\"\nxyz,bob,u2\n").unwrap();
        assert_eq!(tokens[&digest("abc")], Identity::new("alice", "u1", vec!["dev".into(), "ops".into()]));
        assert_eq!(tokens[&digest("xyz")].groups, ["system:authenticated"]);
        assert_eq!(parse_tokens("onlytoken\n").unwrap_err().0, 1);
        assert_eq!(parse_tokens("ok,a,1\nt,u,\"unterminated\n").unwrap_err().0, 2);
    }
}
