//! Servers of a test's own, for the broker-fault tests: a Redis or a NATS
//! (JetStream) started from the same binaries and with the same flags as
//! the machine's (see the `env` notes: Redis keeps nothing on disk), on a
//! free loopback port. A test stops and starts its own server as it likes,
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

fn program(kind: ServerKind) -> &'static str {
    match kind {
        ServerKind::Redis => "/usr/bin/redis-server",
        ServerKind::Nats => "/usr/sbin/nats-server",
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
        if !std::path::Path::new(program(kind)).is_file() {
            let required = std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1");
            assert!(
                !required,
                "{} is not installed, and {REQUIRE_VAR}=1 requires it",
                program(kind)
            );
            eprintln!("SKIPPED: {} is not installed", program(kind));
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
