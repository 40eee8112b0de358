//! The real binary, driven by the real kubectl: the acceptance script of the kubectl
//! contract, on the sled store and on a real etcd.

mod bypass;
mod csr;
mod kubectl;
mod logs;
mod scopes;
mod tokens;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A `kayra-controller` process with its own data directory and ports, killed when dropped.
pub struct Controller {
    child: Child,
    dir: tempfile::TempDir,
    https: u16,
    http: u16,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Controller {
    /// Starts the binary with no subcommand (init, then serve) and waits until it answers.
    pub fn start(extra: &[&str]) -> Controller {
        let dir = tempfile::tempdir().unwrap();
        let (https, http) = (free_port(), free_port());
        let log = std::fs::File::create(dir.path().join("controller.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_kayra-controller"))
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--listen", &format!("127.0.0.1:{https}"), "--http-listen", &format!("127.0.0.1:{http}")])
            .args(extra)
            .env("KAYRA_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the controller starts");
        let controller = Controller { child, dir, https, http };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", https)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the controller did not listen within 30 s:\n{}",
                controller.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        controller
    }

    /// What the controller logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("controller.log")).unwrap_or_default()
    }

    /// The admin kubeconfig `init` wrote.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("data/admin.kubeconfig")
    }

    /// The admin bearer token.
    pub fn token(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("data/admin.token")).unwrap().trim().to_owned()
    }

    /// A scratch directory for manifests.
    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }

    /// The HTTPS URL.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.https)
    }

    /// The plain-HTTP URL.
    pub fn http_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http)
    }

    /// Runs kubectl with this controller's kubeconfig and a fresh cache directory.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        let cache = tempfile::tempdir().unwrap();
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--cache-dir")
            .arg(cache.path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("kubectl runs")
    }

    /// Adds a bearer token to the controller's token file.
    pub fn add_token(&self, token: &str, user: &str) {
        let path = self.dir.path().join("data/tokens.csv");
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        text.push_str(&format!("{token},{user},{user}-uid\n"));
        std::fs::write(path, text).unwrap();
    }

    /// Runs kubectl as a bearer token alone (no client certificate), with a fresh cache.
    pub fn kubectl_with_token(&self, token: &str, args: &[&str]) -> Output {
        let cache = tempfile::tempdir().unwrap();
        Command::new("kubectl")
            .args(["--kubeconfig", "/dev/null", "--server", &self.url(), "--token", token])
            .arg("--certificate-authority")
            .arg(self.dir.path().join("data/pki/ca.crt"))
            .arg("--cache-dir")
            .arg(cache.path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("kubectl runs")
    }

    /// Starts kubectl in the background (for watches), output to a file.
    pub fn kubectl_background(&self, args: &[&str], out: &Path) -> Child {
        let cache = tempfile::tempdir().unwrap().keep();
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--cache-dir")
            .arg(cache)
            .args(args)
            .stdout(std::fs::File::create(out).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl runs")
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether kubectl is here; under CI its absence is a failure.
fn have_kubectl() -> bool {
    let present =
        Command::new("kubectl").arg("version").arg("--client").output().is_ok_and(|o| o.status.success());
    if !present {
        kayra_store_etcd::test_server::skip_test("kubectl is not installed");
    }
    present
}
