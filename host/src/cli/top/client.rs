//! A tiny blocking HTTP/1.1 client for `squall top`: one `GET` per
//! connection (`Connection: close`) over `std::net`, and a thread that asks
//! for the topology once a period. No async runtime, no dependency.

use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

/// How long connecting, sending or reading may take before the fetch fails.
const TIMEOUT: Duration = Duration::from_secs(2);

/// What one fetch gives: the JSON, or why there is none, in a few words.
pub type Fetched = Result<Json, FetchError>;

/// Why a fetch gave no JSON, in a few words (the dashboard shows it).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FetchError {
    /// Connecting, sending or reading failed: the system's words, without
    /// their `(os error N)` tail.
    #[error("{0}")]
    Io(String),
    /// The TLS session could not be set up.
    #[error("TLS: {0}")]
    Tls(rustls::Error),
    /// The answer ends before its head does.
    #[error("truncated HTTP answer")]
    Truncated,
    /// The answer has no status line.
    #[error("not an HTTP answer")]
    NotHttp,
    /// A chunked body cut short or malformed.
    #[error("bad chunked body")]
    BadChunks,
    /// A 200 whose body is not JSON.
    #[error("the answer is not JSON")]
    NotJson,
    /// Another status, with the endpoint's `{"error": ...}` if it gave one.
    #[error("HTTP {status}{}", message.as_ref().map(|m| format!(": {m}")).unwrap_or_default())]
    Status {
        /// The status.
        status: u16,
        /// The endpoint's message.
        message: Option<String>,
    },
}

/// Why a CA file cannot be trusted. Each renders as one line naming it.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// The file cannot be read.
    #[error("{0}")]
    Read(#[from] crate::files::ReadError),
    /// A block is not PEM.
    #[error("{} is not PEM: {cause}", path.display())]
    NotPem {
        /// The file.
        path: std::path::PathBuf,
        /// What the PEM reader said.
        cause: rustls::pki_types::pem::Error,
    },
    /// A certificate rustls refuses, or no certificate at all (`None`).
    #[error("{}{}", path.display(), cause.as_ref().map_or(" holds no certificate".to_owned(), |c| format!(": {c}")))]
    Certificate {
        /// The file.
        path: std::path::PathBuf,
        /// What rustls said.
        cause: Option<rustls::Error>,
    },
    /// rustls refused its protocol versions.
    #[error("TLS: {0}")]
    Tls(rustls::Error),
}

/// Where to fetch from, and with what credentials.
#[derive(Clone, Debug)]
pub struct Target {
    /// The endpoint.
    pub addr: SocketAddr,
    /// A bearer token to send.
    pub token: Option<String>,
    /// Speak HTTPS, trusting these roots.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// A client configuration trusting the PEM certificates in `ca_file` (the
/// endpoint's own self-signed certificate, or the CA that signed it).
///
/// # Errors
/// The file cannot be read or holds no usable certificate.
pub fn tls_config(ca_file: &std::path::Path) -> Result<Arc<rustls::ClientConfig>, CaError> {
    use rustls::pki_types::pem::PemObject as _;
    let path = || ca_file.to_path_buf();
    let mut roots = rustls::RootCertStore::empty();
    let pem = crate::files::read_capped(ca_file, "the CA file", crate::files::PEM_FILE_CAP)?;
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|cause| CaError::NotPem { path: path(), cause })?;
        roots.add(cert).map_err(|e| CaError::Certificate { path: path(), cause: Some(e) })?;
    }
    if roots.is_empty() {
        return Err(CaError::Certificate { path: path(), cause: None });
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(CaError::Tls)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Starts a thread that fetches `GET path` from `target` every `period` and
/// sends each outcome; it ends when the receiver is dropped.
///
/// # Errors
/// The thread could not be spawned.
pub fn poll(
    target: Target,
    path: &'static str,
    period: Duration,
) -> std::io::Result<Receiver<Fetched>> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new().name("top-poll".into()).spawn(move || loop {
        let started = Instant::now();
        if tx.send(get(&target, path)).is_err() {
            return;
        }
        std::thread::sleep(period.saturating_sub(started.elapsed()));
    })?;
    Ok(rx)
}

/// `GET path` from `addr`, its body parsed as JSON.
///
/// # Errors
/// The endpoint is unreachable, answers something other than 200, or not JSON.
pub fn get(target: &Target, path: &str) -> Fetched {
    let addr = target.addr;
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| brief(&e))?;
    stream.set_read_timeout(Some(TIMEOUT)).map_err(|e| brief(&e))?;
    stream.set_write_timeout(Some(TIMEOUT)).map_err(|e| brief(&e))?;
    let auth = target.token.as_ref().map(|t| format!("Authorization: Bearer {t}\r\n"));
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\n{}Connection: close\r\n\r\n",
        auth.unwrap_or_default()
    );
    let mut raw = Vec::new();
    match &target.tls {
        None => exchange(&mut stream, &request, &mut raw)?,
        Some(config) => {
            let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
            let conn =
                rustls::ClientConnection::new(config.clone(), name).map_err(FetchError::Tls)?;
            let mut tls = rustls::StreamOwned::new(conn, stream);
            exchange(&mut tls, &request, &mut raw)?;
        }
    }
    parse(&raw)
}

/// Writes `request` and reads the answer to the end into `raw`.
fn exchange(
    stream: &mut (impl std::io::Read + std::io::Write),
    request: &str,
    raw: &mut Vec<u8>,
) -> Result<(), FetchError> {
    stream.write_all(request.as_bytes()).map_err(|e| brief(&e))?;
    match stream.read_to_end(raw) {
        Ok(_) => Ok(()),
        // A TLS server that closes without close_notify: the answer is in.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => Ok(()),
        Err(e) => Err(brief(&e)),
    }
}

/// An I/O error without its `(os error N)` tail: `Connection refused`.
fn brief(e: &std::io::Error) -> FetchError {
    let text = e.to_string();
    FetchError::Io(match text.find(" (os error") {
        Some(at) => text[..at].to_owned(),
        None => text,
    })
}

/// Parses a whole HTTP/1.1 answer: the status must be 200 and the body
/// (plain or chunked) JSON. A non-200 answer's `{"error": ...}` is kept.
///
/// # Errors
/// A malformed answer, a status other than 200, or a body that is not JSON.
pub fn parse(raw: &[u8]) -> Fetched {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or(FetchError::Truncated)?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or(FetchError::NotHttp)?;
    let chunked = lines.filter_map(|l| l.split_once(':')).any(|(k, v)| {
        k.trim().eq_ignore_ascii_case("transfer-encoding")
            && v.to_ascii_lowercase().contains("chunked")
    });
    if chunked {
        body = dechunk(&body).ok_or(FetchError::BadChunks)?;
    }
    let json: Option<Json> = serde_json::from_slice(&body).ok();
    match (status, json) {
        (200, Some(json)) => Ok(json),
        (200, None) => Err(FetchError::NotJson),
        (status, json) => {
            let message = json.as_ref().and_then(|j| j["error"].as_str()).map(str::to_owned);
            Err(FetchError::Status { status, message })
        }
    }
}

/// Joins a chunked body's chunks; `None` if it is cut short or malformed.
fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&rest[..eol]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_200_answer_gives_its_json_plain_or_chunked() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"a\": true}";
        assert_eq!(parse(plain), Ok(serde_json::json!({ "a": true })));
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n7\r\n: true}\r\n0\r\n\r\n";
        assert_eq!(parse(chunked), Ok(serde_json::json!({ "a": true })));
    }

    #[test]
    fn other_answers_say_what_went_wrong() {
        let missing = b"HTTP/1.1 404 Not Found\r\n\r\n{\"error\": \"no route GET /x\"}";
        let said = |raw: &[u8]| parse(raw).map_err(|e| e.to_string());
        assert_eq!(said(missing), Err("HTTP 404: no route GET /x".to_owned()));
        assert_eq!(said(b"HTTP/1.1 502 Bad Gateway\r\n\r\n<html>"), Err("HTTP 502".to_owned()));
        assert_eq!(
            said(b"HTTP/1.1 200 OK\r\n\r\n<html>"),
            Err("the answer is not JSON".to_owned())
        );
        assert_eq!(said(b"SSH-2.0-OpenSSH"), Err("truncated HTTP answer".to_owned()));
        let cut = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nff\r\n{}";
        assert_eq!(said(cut), Err("bad chunked body".to_owned()));
    }

    #[test]
    fn an_endpoint_that_is_not_there_is_an_error_not_a_panic() {
        // Bind then drop a listener: its port is very likely closed now.
        let addr = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr());
        let target = Target { addr: addr.expect("a free port"), token: None, tls: None };
        let err = get(&target, "/api/v1/topology").expect_err("nothing listens").to_string();
        assert!(!err.contains("os error"), "{err}");
    }
}
