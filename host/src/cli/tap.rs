//! `squall tap ADDR`: prints the tuples a running topology samples, read
//! from its `--http` endpoint's `GET /api/v1/tap` (docs/http-api.md,
//! "Tap"), as JSON lines, logfmt or a table, until `--limit` samples, the
//! end of the topology, or Ctrl-C.
//!
//! The client is blocking `std::net` (and rustls with `--tls-ca`), like
//! `squall top`'s: one request, then the chunked body read line by line.
//! The endpoint's status lines (samples dropped because this client, or
//! the network, was slower than the topology) go to stderr.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value as Json;

use super::top::client;
use super::Failure;

/// How to print each sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TapFormat {
    /// The endpoint's JSON object, one a line.
    Json,
    /// `key=value` pairs, one sample a line.
    Logfmt,
    /// Aligned columns: component, task, stream, then the fields.
    Table,
}

/// What `squall tap` asks for.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("side").required(true).args(["outputs_of", "inputs_of"])))]
pub struct TapArgs {
    /// The --http address of `squall run`: PORT (loopback) or HOST:PORT.
    #[arg(value_name = "ADDR", value_parser = crate::http::parse_addr)]
    pub addr: SocketAddr,
    /// Sample what this component emits.
    #[arg(long, value_name = "COMPONENT")]
    pub outputs_of: Option<String>,
    /// Sample what this bolt receives, before it executes it.
    #[arg(long, value_name = "BOLT")]
    pub inputs_of: Option<String>,
    /// Only this stream.
    #[arg(long, value_name = "STREAM")]
    pub stream: Option<String>,
    /// The share of tuples to sample, in (0, 1] (per task, deterministic).
    #[arg(long, value_name = "RATE", default_value_t = 1.0)]
    pub sample: f64,
    /// Stop after N samples (one-shot).
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// How to print the samples.
    #[arg(long, value_enum, default_value = "json")]
    pub format: TapFormat,
    /// A file holding the control token (the tap needs the control scope).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// Connect over HTTPS, trusting the PEM certificate(s) in FILE.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<std::path::PathBuf>,
}

/// How long connecting and the answer's head may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `squall tap`.
///
/// # Errors
/// A bad rate or token file ([`Failure::HttpConfig`], exit 78); an endpoint
/// that cannot be reached, refuses the tap, or breaks the stream
/// ([`Failure::Other`], exit 1).
pub fn tap(args: TapArgs) -> Result<(), Failure> {
    if !(args.sample > 0.0 && args.sample <= 1.0) {
        return Err(Failure::HttpConfig(format!(
            "--sample must be a share in (0, 1], got {}",
            args.sample
        )));
    }
    if args.limit == Some(0) {
        return Err(Failure::HttpConfig("--limit must be at least 1".into()));
    }
    let token = match &args.token_file {
        Some(path) => Some(
            crate::http::Token::from_file(path).map_err(Failure::http_config)?.secret().to_owned(),
        ),
        None => None,
    };
    let tls =
        args.tls_ca.as_deref().map(client::tls_config).transpose().map_err(Failure::http_config)?;
    let path = path(&args);
    let stream = TcpStream::connect_timeout(&args.addr, TIMEOUT)
        .map_err(|e| other(format!("cannot connect to {}: {e}", args.addr)))?;
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(TIMEOUT));
    let addr = args.addr;
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/x-ndjson\r\n\
         X-Requested-With: squall-tap\r\n{auth}Connection: close\r\n\r\n"
    );
    let mut out = std::io::stdout().lock();
    match tls {
        None => session(stream, &request, args.format, &mut out),
        Some(config) => {
            let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
            let conn = rustls::ClientConnection::new(config, name)
                .map_err(|e| other(format!("TLS: {e}")))?;
            session(rustls::StreamOwned::new(conn, stream), &request, args.format, &mut out)
        }
    }
}

fn other(message: String) -> Failure {
    Failure::Other(anyhow::anyhow!(message))
}

/// `/api/v1/tap?...` for `args`.
fn path(args: &TapArgs) -> String {
    let mut query = match (&args.outputs_of, &args.inputs_of) {
        (Some(c), _) => format!("outputs_of={}", encode(c)),
        (None, Some(c)) => format!("inputs_of={}", encode(c)),
        (None, None) => String::new(),
    };
    if let Some(s) = &args.stream {
        query.push_str(&format!("&stream={}", encode(s)));
    }
    if args.sample < 1.0 {
        query.push_str(&format!("&sample={}", args.sample));
    }
    if let Some(n) = args.limit {
        query.push_str(&format!("&limit={n}"));
    }
    format!("/api/v1/tap?{query}")
}

/// Percent-encodes everything but unreserved characters.
fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Sends the request, checks the answer's head, then prints the stream.
fn session(
    mut stream: impl Read + Write,
    request: &str,
    format: TapFormat,
    out: &mut impl Write,
) -> Result<(), Failure> {
    stream
        .write_all(request.as_bytes())
        .map_err(|e| other(format!("cannot send the request: {e}")))?;
    let mut reader = BufReader::new(stream);
    let (status, chunked) = head(&mut reader)?;
    if status != 200 {
        return Err(refused(reader, status, chunked));
    }
    let mut lines = Lines { reader, chunked, left: 0, partial: Vec::new(), done: false };
    let mut table = Table::default();
    while let Some(line) = lines.next_line()? {
        let Ok(json) = serde_json::from_slice::<Json>(&line) else { continue };
        if let Some(status) = json.get("status") {
            eprintln!(
                "squall tap: {} sampled, {} dropped (the client or the network was slower than the topology)",
                status["sampled"], status["dropped"]
            );
            continue;
        }
        let text = match format {
            TapFormat::Json => json.to_string(),
            TapFormat::Logfmt => logfmt(&json),
            TapFormat::Table => table.row(&json),
        };
        if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
            // stdout closed (`| head`): done.
            return Ok(());
        }
    }
    Ok(())
}

/// The error of an answer other than 200: its JSON `error`, else its body
/// as text.
fn refused(mut reader: impl Read, status: u16, chunked: bool) -> Failure {
    let mut rest = Vec::new();
    let _ = reader.read_to_end(&mut rest);
    let body = if chunked { dechunked(&rest) } else { rest };
    let why = serde_json::from_slice::<Json>(&body)
        .ok()
        .and_then(|j| j["error"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&body).trim().to_owned());
    other(format!("the endpoint refused the tap ({status}): {why}"))
}

/// Reads the answer's head: its status, and whether the body is chunked.
fn head(reader: &mut impl BufRead) -> Result<(u16, bool), Failure> {
    let mut line = String::new();
    reader.read_line(&mut line).map_err(|e| other(format!("no answer: {e}")))?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| other(format!("not an HTTP answer: {:?}", line.trim())))?;
    let mut chunked = false;
    loop {
        line.clear();
        let n = reader.read_line(&mut line).map_err(|e| other(format!("truncated answer: {e}")))?;
        if n == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
    }
    Ok((status, chunked))
}

/// The body of a chunked answer read whole (an error answer).
fn dechunked(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") else { return out };
        let size = std::str::from_utf8(&raw[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok());
        let Some(size) = size.filter(|&n| n > 0 && eol + 2 + n <= raw.len()) else { return out };
        out.extend_from_slice(&raw[eol + 2..eol + 2 + size]);
        raw = raw.get(eol + 4 + size..).unwrap_or(&[]);
    }
}

/// The body's lines, across chunk boundaries.
struct Lines<R> {
    reader: R,
    chunked: bool,
    /// Bytes left in the current chunk.
    left: usize,
    partial: Vec<u8>,
    done: bool,
}

impl<R: BufRead> Lines<R> {
    /// The next whole line (without its newline); `None` at the end.
    fn next_line(&mut self) -> Result<Option<Vec<u8>>, Failure> {
        loop {
            if let Some(at) = self.partial.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.partial.drain(..=at).take(at).collect();
                return Ok(Some(line));
            }
            if self.done {
                return Ok((!self.partial.is_empty()).then(|| std::mem::take(&mut self.partial)));
            }
            if self.chunked {
                self.read_chunked()?;
            } else {
                self.read_plain()?;
            }
        }
    }

    /// Reads what an unchunked body has next into `partial`; the end of
    /// the connection ends the body.
    fn read_plain(&mut self) -> Result<(), Failure> {
        let mut buf = [0u8; 8192];
        match self.reader.read(&mut buf) {
            Ok(0) => self.done = true,
            Ok(n) => self.partial.extend_from_slice(&buf[..n]),
            // A TLS peer that closes without close_notify.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => self.done = true,
            Err(e) => return Err(broken(e)),
        }
        Ok(())
    }

    /// Reads from the current chunk into `partial`, reading the next
    /// chunk's size first when the current one is used up.
    fn read_chunked(&mut self) -> Result<(), Failure> {
        if self.left == 0 {
            self.next_chunk()?;
            if self.left == 0 {
                return Ok(()); // the end, or the CRLF after a chunk
            }
        }
        let mut buf = vec![0u8; self.left.min(8192)];
        let n = self.reader.read(&mut buf).map_err(broken)?;
        if n == 0 {
            self.done = true;
            return Ok(());
        }
        self.left -= n;
        self.partial.extend_from_slice(&buf[..n]);
        Ok(())
    }

    /// Reads a chunk's size line into `left`; the last chunk (size 0) or
    /// the end of the connection ends the body, and the empty line after a
    /// chunk leaves `left` at 0.
    fn next_chunk(&mut self) -> Result<(), Failure> {
        let mut size = String::new();
        match self.reader.read_line(&mut size) {
            Ok(0) => {
                self.done = true;
                return Ok(());
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                self.done = true;
                return Ok(());
            }
            Err(e) => return Err(broken(e)),
        }
        let size = size.trim();
        if size.is_empty() {
            return Ok(());
        }
        let n = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| other(format!("bad chunk size {size:?}")))?;
        if n == 0 {
            self.done = true;
        }
        self.left = n;
        Ok(())
    }
}

/// The error of a stream that broke while it was read.
fn broken(e: std::io::Error) -> Failure {
    other(format!("the stream broke: {e}"))
}

/// A JSON value as a logfmt value: bare when it can be, quoted otherwise.
fn plain(value: &Json) -> String {
    let text = match value {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    };
    let bare = !text.is_empty()
        && !text.chars().any(|c| c.is_whitespace() || c == '"' || c == '=' || c.is_control());
    if bare {
        text
    } else {
        format!("{text:?}")
    }
}

/// The fields of a sample as `(name, value)`, in field order.
fn pairs(json: &Json) -> Vec<(String, String)> {
    let fields = json["fields"].as_array().cloned().unwrap_or_default();
    let values = json["values"].as_array().cloned().unwrap_or_default();
    fields
        .iter()
        .zip(&values)
        .map(|(f, v)| (f.as_str().unwrap_or("?").to_owned(), plain(v)))
        .collect()
}

/// One sample as logfmt.
fn logfmt(json: &Json) -> String {
    let mut out = format!(
        "component={} side={} task={} stream={}",
        plain(&json["component"]),
        plain(&json["side"]),
        json["task"],
        plain(&json["stream"])
    );
    if let Some(from) = json.get("from").filter(|f| !f.is_null()) {
        out.push_str(&format!(" from={}:{}", plain(&from["component"]), from["task"]));
    }
    for (name, value) in pairs(json) {
        out.push_str(&format!(" {}={value}", plain(&Json::String(name))));
    }
    let roots: Vec<&str> =
        json["roots"].as_array().into_iter().flatten().filter_map(Json::as_str).collect();
    if !roots.is_empty() {
        out.push_str(&format!(" roots={}", roots.join(",")));
    }
    if !json["message_id"].is_null() {
        out.push_str(&format!(" message_id={}", json["message_id"]));
    }
    out
}

/// The table format: a header line first, then one row per sample.
#[derive(Debug, Default)]
struct Table {
    headed: bool,
}

impl Table {
    fn row(&mut self, json: &Json) -> String {
        let fields: Vec<String> =
            pairs(json).into_iter().map(|(n, v)| format!("{n}={v}")).collect();
        let roots: Vec<&str> =
            json["roots"].as_array().into_iter().flatten().filter_map(Json::as_str).collect();
        let row = format!(
            "{:<16} {:>5} {:<12} {:<40} {}",
            plain(&json["component"]),
            json["task"],
            plain(&json["stream"]),
            fields.join(" "),
            roots.join(",")
        );
        if self.headed {
            return row;
        }
        self.headed = true;
        format!(
            "{:<16} {:>5} {:<12} {:<40} {}\n{row}",
            "COMPONENT", "TASK", "STREAM", "FIELDS", "ROOTS"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Json {
        serde_json::json!({
            "component": "split", "side": "outputs", "task": 2, "stream": "default",
            "fields": ["word", "note"], "values": ["cow", "a b"], "roots": ["00000000000000ab"],
            "message_id": null, "from": null,
        })
    }

    #[test]
    fn logfmt_and_table_show_every_field_by_name() {
        assert_eq!(
            logfmt(&sample()),
            "component=split side=outputs task=2 stream=default word=cow note=\"a b\" roots=00000000000000ab"
        );
        let mut table = Table::default();
        let first = table.row(&sample());
        assert!(first.starts_with("COMPONENT"), "{first}");
        assert!(first.lines().nth(1).unwrap().contains("word=cow note=\"a b\""), "{first}");
        assert!(!table.row(&sample()).starts_with("COMPONENT"));
    }

    #[test]
    fn a_chunked_stream_is_read_line_by_line_across_chunks() {
        let body = b"5\r\n{\"a\":\r\n6\r\n1}\n{\"b\r\n5\r\n\":2}\n\r\n0\r\n\r\n";
        let mut lines =
            Lines { reader: &body[..], chunked: true, left: 0, partial: Vec::new(), done: false };
        assert_eq!(lines.next_line().unwrap().unwrap(), b"{\"a\":1}");
        assert_eq!(lines.next_line().unwrap().unwrap(), b"{\"b\":2}");
        assert!(lines.next_line().unwrap().is_none());
        assert_eq!(dechunked(b"4\r\nabcd\r\n2\r\nef\r\n0\r\n\r\n"), b"abcdef");
    }

    #[test]
    fn the_query_is_encoded() {
        let args = TapArgs {
            addr: "127.0.0.1:1".parse().unwrap(),
            outputs_of: Some("a b".into()),
            inputs_of: None,
            stream: Some("s/1".into()),
            sample: 0.25,
            limit: Some(3),
            format: TapFormat::Json,
            token_file: None,
            tls_ca: None,
        };
        assert_eq!(path(&args), "/api/v1/tap?outputs_of=a%20b&stream=s%2F1&sample=0.25&limit=3");
    }
}
