//! Servers of a test's own, for the broker-fault tests: a Redis, a NATS
//! (JetStream) or a Kafka-protocol broker (Tansu) started from the same
//! binaries and with the same flags as the machine's (see the `env` notes:
//! Redis keeps nothing on disk; ../shared/kafka/README.md: Tansu keeps
//! everything in memory), on a free loopback port. A test stops and starts its own server as it likes,
//! and the tests beside it, on the machine's servers, never notice. The
//! server is killed when the value is dropped, also when the test fails.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::REQUIRE_VAR;

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// `redis-server --save "" --appendonly no`: a restart loses every key.
    Redis,
    /// `nats-server -js` with a store directory of its own, kept across
    /// restarts (as the machine's `/var/lib/nats-server`).
    Nats,
    /// Tansu (`tansu broker`, memory storage), the binary that
    /// `start-kafka.sh` installed in `KAFKA_CACHE_DIR` (default
    /// `~/.cache/squall-kafka`): a restart is an empty cluster.
    Kafka,
}

/// A running (or stopped) server of the test's own.
#[derive(Debug)]
pub struct OwnServer {
    kind: ServerKind,
    /// Its loopback port.
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

fn program(kind: ServerKind) -> PathBuf {
    match kind {
        ServerKind::Redis => "/usr/bin/redis-server".into(),
        ServerKind::Nats => "/usr/sbin/nats-server".into(),
        ServerKind::Kafka => {
            let cache =
                std::env::var_os("KAFKA_CACHE_DIR").map(PathBuf::from).unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                        .join(".cache/squall-kafka")
                });
            std::fs::read_dir(&cache)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path().join("tansu"))
                .find(|p| p.is_file())
                .unwrap_or_else(|| cache.join("tansu-*/tansu"))
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl OwnServer {
    /// Starts one; `None` (the test skips) when the binary is missing,
    /// a failure under `SQUALL_REQUIRE_TOOLS=1`.
    pub fn start(kind: ServerKind, test: &str) -> Option<Self> {
        if !program(kind).is_file() {
            let required = std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1");
            assert!(
                !required,
                "{} is not installed, and {REQUIRE_VAR}=1 requires it",
                program(kind).display()
            );
            eprintln!("SKIPPED: {} is not installed", program(kind).display());
            return None;
        }
        let dir = std::env::temp_dir().join(format!(
            "squall-{test}-{}-{}",
            std::process::id(),
            free_port()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the server's directory");
        let mut server = Self { kind, port: free_port(), dir, child: None };
        server.up();
        Some(server)
    }

    /// `redis://127.0.0.1:PORT` or `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        match self.kind {
            ServerKind::Redis => format!("redis://127.0.0.1:{}", self.port),
            ServerKind::Nats => format!("nats://127.0.0.1:{}", self.port),
            ServerKind::Kafka => format!("127.0.0.1:{}", self.port),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Starts the server again (after [`OwnServer::stop`]) and waits until
    /// it accepts connections.
    pub fn up(&mut self) {
        assert!(self.child.is_none(), "already running");
        let port = self.port.to_string();
        let mut cmd = Command::new(program(self.kind));
        match self.kind {
            ServerKind::Redis => {
                cmd.args([
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    &port,
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .arg("--dir")
                .arg(&self.dir);
            }
            ServerKind::Nats => {
                cmd.args(["-a", "127.0.0.1", "-p", &port, "-js", "-sd"]).arg(self.dir.join("js"));
            }
            ServerKind::Kafka => {
                let listener = format!("tcp://127.0.0.1:{port}");
                cmd.args(["broker", "--listener-url", &listener, "--advertised-listener-url"])
                    .arg(&listener)
                    .args(["--storage-engine", "memory://tansu/", "--cluster-id", "squall-own"]);
            }
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        self.child = Some(cmd.spawn().expect("start the server"));
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect_timeout(&self.addr(), Duration::from_millis(200)).is_err() {
            assert!(Instant::now() < deadline, "{:?} on {} did not start", self.kind, self.port);
            std::thread::sleep(Duration::from_millis(50));
        }
        if self.kind == ServerKind::Nats {
            // JetStream answers a little after the port opens.
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Freezes the server (SIGSTOP): its connections stay open and nothing
    /// answers, as with a hung broker or a partitioned network.
    pub fn freeze(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Lets a frozen server go on (SIGCONT).
    pub fn thaw(&self) {
        self.signal(libc::SIGCONT);
    }

    fn signal(&self, signal: libc::c_int) {
        let child = self.child.as_ref().expect("the server runs");
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe {
            libc::kill(child.id() as libc::pid_t, signal);
        }
    }

    /// Stops the server (SIGTERM, then SIGKILL after 10 s) and waits for it.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if child.try_wait().ok().flatten().is_some() {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
