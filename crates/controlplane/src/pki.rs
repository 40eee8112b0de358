//! The data directory's credentials: `init` writes a CA, a serving certificate, an admin client
//! certificate in an admin kubeconfig, and an admin bearer token, keeping whatever is already
//! there; the serving side reads them back from here, and has the serving certificate cover
//! the address it serves on.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kayra_client::kubeconfig::Kubeconfig;
use kayra_pki::{Ca, Usage};

use crate::ControlPlaneError;
use crate::address::host_address;
use crate::config::Config;

/// Where `init` put things.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The CA certificate.
    pub ca_cert: PathBuf,
    /// The admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// The file holding the admin bearer token.
    pub admin_token: PathBuf,
}

/// What `init` did.
#[derive(Debug, Clone)]
pub struct Initialised {
    /// Where it put things.
    pub paths: Paths,
    /// Whether it made the admin bearer token or kept the one already there.
    pub admin_token: AdminToken,
}

/// Whether `init` made the admin bearer token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminToken {
    /// This `init` wrote it: the data directory is new.
    Created,
    /// It was there already.
    Kept,
}

/// The directory of the cluster's certificates and keys.
pub(crate) fn pki_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("pki")
}

/// The admin kubeconfig `init` writes.
pub(crate) fn admin_kubeconfig(data_dir: &Path) -> PathBuf {
    data_dir.join("admin.kubeconfig")
}

/// A client of the running controller as the data directory's admin, through the admin
/// kubeconfig, as kubectl and kayra-cli read theirs.
pub(crate) fn admin_client(data_dir: &Path) -> Result<kayra_client::Client, ControlPlaneError> {
    let kubeconfig = admin_kubeconfig(data_dir);
    if !kubeconfig.exists() {
        let source = std::io::Error::from(std::io::ErrorKind::NotFound);
        return Err(ControlPlaneError::NotInitialised { path: kubeconfig, source });
    }
    kayra_client::Client::from_kubeconfig(&kubeconfig).map_err(|source| ControlPlaneError::Client {
        what: "cannot use the admin kubeconfig".into(),
        source,
    })
}

/// Writes a CA, a serving certificate, an admin client certificate (`O=system:masters`), an
/// admin kubeconfig and an admin bearer token under the data directory; keeps whatever is
/// already there.
pub fn init(config: &Config) -> Result<Initialised, ControlPlaneError> {
    let dir = pki_dir(&config.data_dir);
    std::fs::create_dir_all(&dir)
        .map_err(ControlPlaneError::io(format!("cannot create {}", dir.display())))?;
    let paths = Paths {
        ca_cert: dir.join("ca.crt"),
        kubeconfig: admin_kubeconfig(&config.data_dir),
        admin_token: config.data_dir.join("admin.token"),
    };
    let ca = if paths.ca_cert.exists() {
        let cert = read_text(&paths.ca_cert)?;
        let key = read_text(&dir.join("ca.key"))?;
        Ca::from_pem(&cert, &key).map_err(ControlPlaneError::pki("the cluster CA is unusable"))?
    } else {
        let ca = Ca::generate("kayra-ca").map_err(ControlPlaneError::pki("cannot make the cluster CA"))?;
        write_private(&dir.join("ca.key"), &ca.issued().key_pem)?;
        write_public(&paths.ca_cert, ca.cert_pem())?;
        ca
    };
    if !dir.join("server.crt").exists() {
        let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
        let listen_ip = config.listen.ip();
        if !listen_ip.is_unspecified() && !names.contains(&listen_ip.to_string()) {
            names.push(listen_ip.to_string());
        }
        // Listening everywhere, the host's own address is the one a join command names.
        if let Some(host) = host_address().filter(|_| listen_ip.is_unspecified()) {
            names.push(host.to_string());
        }
        names.extend(config.server_names.iter().cloned());
        let server = ca
            .issue(Usage::Server, "kayra-controller", None, &names)
            .map_err(ControlPlaneError::pki("cannot issue the serving certificate"))?;
        write_private(&dir.join("server.key"), &server.key_pem)?;
        write_public(&dir.join("server.crt"), &server.cert_pem)?;
    }
    if !paths.kubeconfig.exists() {
        let admin = ca
            .issue(Usage::Client, "admin", Some("system:masters"), &[])
            .map_err(ControlPlaneError::pki("cannot issue the admin certificate"))?;
        write_private(
            &paths.kubeconfig,
            &Kubeconfig::with_client_certificate(
                "kayra",
                &admin_server(config.listen.ip(), config.listen.port()),
                ca.cert_pem(),
                "admin",
                &admin.cert_pem,
                &admin.key_pem,
            )
            .to_yaml(),
        )?;
    }
    let token_file = config.token_file();
    if paths.admin_token.exists() {
        return Ok(Initialised { paths, admin_token: AdminToken::Kept });
    }
    let token = random_token();
    write_private(&paths.admin_token, &format!("{token}\n"))?;
    let mut tokens = std::fs::read_to_string(&token_file).unwrap_or_default();
    tokens.push_str(&format!("{token},admin,admin,\"system:masters\"\n"));
    write_private(&token_file, &tokens)?;
    Ok(Initialised { paths, admin_token: AdminToken::Created })
}

/// The cluster's CA, certificate and key, as `init` wrote them.
pub(crate) fn read_ca(data_dir: &Path) -> Result<Ca, ControlPlaneError> {
    let dir = pki_dir(data_dir);
    Ca::from_pem(&read_text(&dir.join("ca.crt"))?, &read_text(&dir.join("ca.key"))?)
        .map_err(ControlPlaneError::pki("the cluster CA is unusable"))
}

/// The serving TLS configuration: the serving certificate's chain ends with the CA, so that a
/// joining node can pin the CA by the hash of its public key from the handshake alone
/// (kubeadm's discovery-token-ca-cert-hash); client certificates are verified against the CA.
pub(crate) fn serving_tls(data_dir: &Path) -> Result<Arc<rustls::ServerConfig>, ControlPlaneError> {
    let dir = pki_dir(data_dir);
    let ca = read_bytes(&dir.join("ca.crt"))?;
    let mut chain = read_bytes(&dir.join("server.crt"))?;
    if !chain.ends_with(b"\n") {
        chain.push(b'\n');
    }
    chain.extend_from_slice(&ca);
    kayra_apiserver::tls_config(&ca, &chain, &read_bytes(&dir.join("server.key"))?)
        .map_err(ControlPlaneError::Tls)
}

/// Makes the serving certificate cover `host`, the address the controller serves on: when it
/// does not, the cluster CA issues it again for the names it had and `host`.
pub(crate) fn cover_serving_host(data_dir: &Path, host: IpAddr) -> Result<(), ControlPlaneError> {
    let dir = pki_dir(data_dir);
    let path = dir.join("server.crt");
    let mut names = certificate_names(&read_text(&path)?).map_err(ControlPlaneError::Tls)?;
    if names.iter().any(|name| name.parse::<IpAddr>() == Ok(host)) {
        return Ok(());
    }
    names.push(host.to_string());
    let server = read_ca(data_dir)?
        .issue(Usage::Server, "kayra-controller", None, &names)
        .map_err(ControlPlaneError::pki("cannot issue the serving certificate"))?;
    write_private(&dir.join("server.key"), &server.key_pem)?;
    write_public(&path, &server.cert_pem)?;
    tracing::info!(%host, "the serving certificate was issued again to cover the address served on");
    Ok(())
}

/// The DNS names and IP addresses a certificate is for.
fn certificate_names(pem: &str) -> Result<Vec<String>, String> {
    use x509_parser::extensions::GeneralName;
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|error| error.to_string())?;
    let certificate = block.parse_x509().map_err(|error| error.to_string())?;
    let Some(alternative) = certificate.subject_alternative_name().map_err(|error| error.to_string())? else {
        return Ok(Vec::new());
    };
    Ok(alternative
        .value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => Some((*dns).to_owned()),
            GeneralName::IPAddress(bytes) => match bytes.len() {
                4 => <[u8; 4]>::try_from(*bytes).ok().map(|ip| IpAddr::from(ip).to_string()),
                16 => <[u8; 16]>::try_from(*bytes).ok().map(|ip| IpAddr::from(ip).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect())
}

/// The URL the admin kubeconfig names for a controller listening on `ip` and `port`: the
/// listener's own address, or loopback when it listens on every address.
fn admin_server(ip: IpAddr, port: u16) -> String {
    let host = if ip.is_unspecified() { IpAddr::from([127, 0, 0, 1]) } else { ip };
    crate::address::serving_url(host, port)
}

/// Points the admin kubeconfig at the listener the controller serves on (`ip` and `port`),
/// where it names this host's listener on another port or address, as when `init` ran with
/// the default listen address and `serve` with another; a kubeconfig naming any other host (a
/// balancer's name, say) is left as it is.
pub(crate) fn follow_listener(data_dir: &Path, ip: IpAddr, port: u16) -> Result<(), ControlPlaneError> {
    let path = admin_kubeconfig(data_dir);
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(()) };
    let Ok(mut kubeconfig) = Kubeconfig::parse(&text) else { return Ok(()) };
    let served = admin_server(ip, port);
    let mut moved = false;
    for named in &mut kubeconfig.clusters {
        let names_this_host = crate::address::url_host(&named.cluster.server)
            .and_then(|host| host.parse::<IpAddr>().ok())
            .is_some_and(|host| host.is_loopback() || host == ip);
        if names_this_host && named.cluster.server != served {
            tracing::info!(kubeconfig = %path.display(), from = %named.cluster.server, to = %served, "the admin kubeconfig follows the listener");
            named.cluster.server = served.clone();
            moved = true;
        }
    }
    if !moved {
        return Ok(());
    }
    let temporary = path.with_extension("tmp");
    write_private(&temporary, &kubeconfig.to_yaml())?;
    std::fs::rename(&temporary, &path)
        .map_err(ControlPlaneError::io(format!("cannot write {}", path.display())))
}

fn read_text(path: &Path) -> Result<String, ControlPlaneError> {
    std::fs::read_to_string(path)
        .map_err(|source| ControlPlaneError::NotInitialised { path: path.to_owned(), source })
}

fn read_bytes(path: &Path) -> Result<Vec<u8>, ControlPlaneError> {
    std::fs::read(path).map_err(|source| ControlPlaneError::NotInitialised { path: path.to_owned(), source })
}

/// Writes a file only its owner may read.
fn write_private(path: &Path, contents: &str) -> Result<(), ControlPlaneError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let failed = || ControlPlaneError::io(format!("cannot write {}", path.display()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(failed())?;
    file.write_all(contents.as_bytes()).map_err(failed())
}

fn write_public(path: &Path, contents: &str) -> Result<(), ControlPlaneError> {
    std::fs::write(path, contents).map_err(ControlPlaneError::io(format!("cannot write {}", path.display())))
}

fn random_token() -> String {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 24];
    ring::rand::SystemRandom::new().fill(&mut bytes).expect("the system has randomness");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
