//! `squall run --http` over TLS (issue 23): a certificate and key from
//! `[topology.http]`, served with rustls, and read again on SIGHUP. The
//! test certificates are made at test time with the `openssl` command.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::http::TOPOLOGY;
use crate::util::{require_tool, Workspace};

/// A self-signed certificate for 127.0.0.1 and localhost with common name
/// `cn`, and its key: `(cert.pem, key.pem)` in `ws` (`None` without openssl).
pub fn self_signed(ws: &Workspace, cn: &str) -> Option<(PathBuf, PathBuf)> {
    let openssl = require_tool("openssl")?;
    let (cert, key) = (ws.path(format!("{cn}.crt")), ws.path(format!("{cn}.key")));
    let out = Command::new(openssl)
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
        .args(["-nodes", "-days", "2", "-subj", &format!("/CN={cn}")])
        .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        // Not a CA: rustls (squall top) refuses a CA certificate as the
        // server's own (CaUsedAsEndEntity); openssl's default is CA:TRUE.
        .args(["-addext", "basicConstraints=critical,CA:FALSE", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("run openssl");
    assert!(out.status.success(), "openssl req: {}", String::from_utf8_lossy(&out.stderr));
    Some((cert, key))
}

/// `curl -sv --cacert CA URL` with extra arguments: exit success, stdout, stderr.
fn curl(ca: &std::path::Path, url: &str, extra: &[&str]) -> (bool, String, String) {
    let out = Command::new("curl")
        .args(["-sv", "--max-time", "10", "--cacert"])
        .arg(ca)
        .args(extra)
        .arg(url)
        .output()
        .expect("run curl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_endpoint_serves_tls_and_reloads_its_certificate_on_sighup() {
    if require_tool("curl").is_none() {
        return;
    }
    let ws = Workspace::new("http_tls");
    let Some((first, first_key)) = self_signed(&ws, "squall-first") else { return };
    let Some((second, second_key)) = self_signed(&ws, "squall-second") else { return };
    let (cert, key) = (ws.path("served.crt"), ws.path("served.key"));
    std::fs::copy(&first, &cert).expect("copy");
    std::fs::copy(&first_key, &key).expect("copy");
    ws.write("control.token", "tls-c0ntrol");
    let toml = format!(
        "{TOPOLOGY}\n[topology.http]\ntoken_file = \"control.token\"\ntls_cert = \"served.crt\"\ntls_key = \"served.key\"\n"
    );
    let path = ws.write_topology("web.toml", &toml);
    let mut cmd = crate::util::SquallCommand::run_until_interrupted(&ws, &path);
    cmd.args(["--http", "0"]).limit(Duration::from_secs(90));
    let mut child = cmd.spawn();
    child.wait_for_stderr("HTTP on https://", Duration::from_secs(30));
    let addr = crate::http::bound_addr(&mut child);
    let url = format!("https://{addr}/api/v1/topology");
    let auth = ["-H", "Authorization: Bearer tls-c0ntrol"];

    let (ok, body, log) = curl(&first, &url, &auth);
    assert!(ok, "{log}");
    assert!(body.contains("\"name\": \"web\""), "{body}");
    assert!(log.contains("CN=squall-first"), "{log}");
    // Without the token: 401 over TLS too.
    let (_, _, log) = curl(&first, &url, &[]);
    assert!(log.contains("< HTTP/1.1 401"), "{log}");
    // Plain HTTP to the TLS port gets no answer.
    let plain = crate::util::require_tool("curl").map(|_| {
        Command::new("curl")
            .args(["-s", "--max-time", "5", &format!("http://{addr}/healthz")])
            .output()
            .expect("curl")
    });
    assert!(plain.is_some_and(|o| !String::from_utf8_lossy(&o.stdout).contains("\"status\"")));
    // Control over TLS with the token.
    let steer = format!("https://{addr}/api/v1/deactivate");
    let (ok, body, log) = curl(&first, &steer, &["-X", "POST", auth[0], auth[1]]);
    assert!(ok && body.contains("\"ok\": true"), "{body}\n{log}");

    // New files, SIGHUP: new connections get the new certificate.
    std::fs::copy(&second, &cert).expect("copy");
    std::fs::copy(&second_key, &key).expect("copy");
    child.signal(libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (ok, _, log) = curl(&second, &url, &auth);
        if ok && log.contains("CN=squall-second") {
            break;
        }
        assert!(Instant::now() < deadline, "the new certificate was never served:\n{log}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // A broken file on the next SIGHUP keeps the current certificate.
    std::fs::write(&cert, "not a certificate").expect("write");
    child.signal(libc::SIGHUP);
    child.wait_for_stderr("TLS reload failed", Duration::from_secs(20));
    let (ok, _, log) = curl(&second, &url, &auth);
    assert!(ok && log.contains("CN=squall-second"), "{log}");
    child.interrupt();
    child.wait().assert_code(0);
}
