//! The real binary, driven by the real kubectl: the acceptance script of the kubectl
//! contract, on the sled store and on a real etcd.

mod agents;
mod appsets;
mod bypass;
mod consul;
mod csr;
mod draining;
mod failover;
mod features;
mod freezing;
mod history;
mod kubectl;
mod leases;
mod logs;
mod registration;
mod replicas;
mod scheduling;
mod scopes;
mod server_side_apply;
mod services;
mod streams;
mod tokens;
mod tour;

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
    args: Vec<String>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The stores an end-to-end test runs on: the embedded default, and a private etcd.
#[derive(Clone, Copy, Debug)]
pub enum Store {
    /// sled under the controller's data directory.
    Sled,
    /// A private etcd started for the test.
    Etcd,
}

/// Runs `body` against a controller (no local node, `extra` arguments) on `store`. On etcd,
/// the test is recorded as skipped when no etcd binary is installed, as every etcd test is.
pub fn on_store(store: Store, extra: &[&str], body: impl FnOnce(&mut Controller)) {
    use kayra_store_etcd::test_server::{EtcdServer, StartError, skip_test};
    match store {
        Store::Sled => {
            let mut args = vec!["--store", "sled"];
            args.extend_from_slice(extra);
            body(&mut Controller::start(&args));
        }
        Store::Etcd => {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            let etcd = match runtime.block_on(EtcdServer::start()) {
                Ok(server) => server,
                Err(StartError::Missing) => return skip_test(StartError::Missing),
                Err(error) => panic!("{error}"),
            };
            let mut args = vec!["--store", "etcd", "--etcd-endpoints", etcd.endpoint()];
            args.extend_from_slice(extra);
            body(&mut Controller::start(&args));
        }
    }
}

impl Controller {
    /// Starts the binary with no subcommand (init, then serve) and no local node, and waits
    /// until it answers.
    pub fn start(extra: &[&str]) -> Controller {
        let mut args = vec!["--no-agent"];
        args.extend_from_slice(extra);
        Controller::launch(&args)
    }

    /// As [`Controller::start`], with the local node the binary runs by default.
    pub fn start_with_local_node(extra: &[&str]) -> Controller {
        Controller::launch(extra)
    }

    /// As [`Controller::start_with_local_node`], with the data directory inside a directory
    /// only its owner may enter (mode 0700), as `/root` or a Debian home directory is.
    pub fn start_with_local_node_in_a_private_directory(extra: &[&str]) -> Controller {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        Controller::launch_in(dir, extra)
    }

    fn launch(extra: &[&str]) -> Controller {
        Controller::launch_in(tempfile::tempdir().unwrap(), extra)
    }

    fn launch_in(dir: tempfile::TempDir, extra: &[&str]) -> Controller {
        let args: Vec<String> = extra.iter().map(|arg| (*arg).to_owned()).collect();
        let log = |dir: &Path| std::fs::read_to_string(dir.join("controller.log")).unwrap_or_default();
        // A free port may be taken by another test between its choice and the controller's
        // bind: the controller then exits at once, and is started again on other ports.
        for _ in 0..5 {
            let (https, http) = (free_port(), free_port());
            let logged = log(dir.path()).len();
            let mut child = Controller::spawn(dir.path(), https, http, &args);
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    let said = log(dir.path()).split_off(logged);
                    assert!(said.contains("Address already in use"), "the controller exited:\n{said}");
                    break;
                }
                if std::net::TcpStream::connect(("127.0.0.1", https)).is_ok() {
                    return Controller { child, dir, https, http, args };
                }
                assert!(
                    Instant::now() < deadline,
                    "the controller did not listen within 30 s:\n{}",
                    log(dir.path())
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!("the controller found no free ports in five tries:\n{}", log(dir.path()));
    }

    fn spawn(dir: &Path, https: u16, http: u16, args: &[String]) -> Child {
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(dir.join("controller.log")).unwrap();
        Command::new(env!("CARGO_BIN_EXE_kayra-controller"))
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(["--listen", &format!("127.0.0.1:{https}"), "--http-listen", &format!("127.0.0.1:{http}")])
            .args(args)
            .env("KAYRA_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the controller starts")
    }

    fn wait_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.https)).is_err() {
            assert!(Instant::now() < deadline, "the controller did not listen within 30 s:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the controller (SIGTERM, as an operator's service manager would) and starts it
    /// again on the same data directory and ports.
    pub fn restart(&mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.wait();
        self.child = Controller::spawn(self.dir.path(), self.https, self.http, &self.args);
        self.wait_listening();
    }

    /// The controller's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
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

    /// The sum of the `/metrics` series whose names and labels start with `series` (say
    /// `kayra_loop_reconciles_total{controller="scheduler"`): a counter the test waits on to
    /// know that a loop has acted since it last read it.
    pub fn metric_sum(&self, series: &str) -> f64 {
        let output = self.kubectl(&["get", "--raw", "/metrics"]);
        assert!(output.status.success(), "/metrics: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| line.starts_with(series))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
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

    /// Where [`Controller::kubectl_background`] writing to `out` writes kubectl's own log.
    pub fn background_log(out: &Path) -> PathBuf {
        let mut log = out.as_os_str().to_owned();
        log.push(".log");
        PathBuf::from(log)
    }

    /// Starts kubectl in the background (for watches), output to a file, its log (stderr) to
    /// [`Controller::background_log`] of that file.
    pub fn kubectl_background(&self, args: &[&str], out: &Path) -> Child {
        let cache = tempfile::tempdir().unwrap().keep();
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--cache-dir")
            .arg(cache)
            .args(args)
            .stdout(std::fs::File::create(out).unwrap())
            .stderr(std::fs::File::create(Controller::background_log(out)).unwrap())
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
