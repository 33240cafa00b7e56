//! Who may use the endpoint: bearer tokens with two scopes, the `Host`
//! check against DNS rebinding, the same-origin rule for steering without a
//! token, and CORS (off unless configured). Transport-agnostic: the server
//! hands over the few headers it needs and gets a verdict.
//!
//! The rules (docs/http-api.md, "Security"):
//!
//! - Every request's `Host` must be the bound address, `localhost`, an IP
//!   literal, or one of `allowed_hosts`: a rebound DNS name is refused.
//! - The page and its assets are static and public; `/metrics` is public
//!   with `metrics_public`.
//! - `read` routes need a `read` or `control` token once any token is set.
//! - `control` routes (every POST) need the `control` token when one is
//!   set; without one (loopback only: a non-loopback bind without a control
//!   token is refused before anything runs) they need a same-origin
//!   request: no `Origin`, or one that matches the `Host` (or a CORS
//!   origin), and a JSON `Content-Type` or an `X-Requested-With` header,
//!   which a cross-site form cannot send without a preflight we never pass.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use super::api::Answer;
use crate::files::ReadError;

/// What a route needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Anyone (the static page and its assets).
    Public,
    /// `/metrics`, the GET routes.
    Read,
    /// Every POST.
    Control,
}

/// A secret token, compared in constant time.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// What is wrong with a token's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadToken {
    /// Nothing but whitespace.
    #[error("is empty")]
    Empty,
    /// A character a header cannot carry.
    #[error("holds spaces or characters outside printable ASCII")]
    NotPrintable,
    /// Bytes that are not UTF-8 (a token file).
    #[error("holds characters outside printable ASCII")]
    NotUtf8,
}

/// Why a token could not be read. Each renders as one line naming the
/// file or the variable.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token file cannot be read.
    #[error("{0}")]
    Read(#[from] ReadError),
    /// The token file holds no valid token.
    #[error("the token file {} {problem}", crate::files::escape_controls(&path.to_string_lossy()))]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with its text.
        problem: BadToken,
    },
    /// The variable is not set.
    #[error("the token variable {name} is not set (or not UTF-8)")]
    Unset {
        /// The variable.
        name: String,
    },
    /// The variable holds no valid token.
    #[error("the token variable {name} {problem}")]
    Env {
        /// The variable.
        name: String,
        /// What is wrong with its text.
        problem: BadToken,
    },
}

impl Token {
    /// A token from its text (surrounding whitespace trimmed).
    ///
    /// # Errors
    /// The text is empty, or holds a character a header cannot carry.
    pub fn new(text: &str) -> Result<Self, BadToken> {
        let t = text.trim();
        if t.is_empty() {
            return Err(BadToken::Empty);
        }
        if !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(BadToken::NotPrintable);
        }
        Ok(Self(t.as_bytes().to_vec()))
    }

    /// Reads a token from `path`: a regular file of at most
    /// [`TOKEN_FILE_CAP`](crate::files::TOKEN_FILE_CAP) bytes (a FIFO or a
    /// device is refused before it is opened, see [`crate::files`]).
    ///
    /// # Errors
    /// The file is missing, not a regular file, too large, cannot be read,
    /// or holds no valid token.
    pub fn from_file(path: &Path) -> Result<Self, TokenError> {
        let bytes =
            crate::files::read_capped(path, "the token file", crate::files::TOKEN_FILE_CAP)?;
        let bad = |problem| TokenError::File { path: path.to_path_buf(), problem };
        let text = String::from_utf8(bytes).map_err(|_| bad(BadToken::NotUtf8))?;
        Self::new(&text).map_err(bad)
    }

    /// The token itself, to send as a bearer token (the clients, `squall
    /// top` and `squall tap`, send the token they read).
    pub fn secret(&self) -> &str {
        // Only printable ASCII is ever stored (see `new`).
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// Reads a token from the environment variable `name`.
    ///
    /// # Errors
    /// The variable is unset or holds no valid token.
    pub fn from_env(name: &str) -> Result<Self, TokenError> {
        let text = std::env::var(name).map_err(|_| TokenError::Unset { name: name.to_owned() })?;
        Self::new(&text).map_err(|problem| TokenError::Env { name: name.to_owned(), problem })
    }

    fn matches(&self, presented: &[u8]) -> bool {
        // Constant time in the contents; the length is not secret.
        self.0.len() == presented.len()
            && self.0.iter().zip(presented).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

/// The access policy of one endpoint.
#[derive(Clone, Debug, Default)]
pub struct Access {
    /// The `control` token (grants `read` too).
    pub control: Option<Token>,
    /// A `read`-only token.
    pub read: Option<Token>,
    /// `/metrics` needs no token.
    pub metrics_public: bool,
    /// More host names (`name` or `name:port`) to answer to.
    pub allowed_hosts: Vec<String>,
    /// Origins sent CORS headers (exact `scheme://host[:port]`).
    pub cors_origins: Vec<String>,
}

/// The parts of a request the policy looks at.
#[derive(Clone, Copy, Debug, Default)]
pub struct Request<'a> {
    /// `Host`.
    pub host: Option<&'a str>,
    /// `Origin`.
    pub origin: Option<&'a str>,
    /// `Authorization`.
    pub authorization: Option<&'a str>,
    /// `Content-Type`.
    pub content_type: Option<&'a str>,
    /// An `X-Requested-With` header is present.
    pub requested_with: bool,
}

/// Why a request is refused: 401 (no or a wrong token) or 403.
#[derive(Debug)]
pub struct Refusal {
    /// The answer to send.
    pub answer: Answer,
    /// Add `WWW-Authenticate: Bearer`.
    pub challenge: bool,
}

impl Refusal {
    fn unauthorized(message: &str) -> Self {
        Self { answer: Answer::error(401, message), challenge: true }
    }

    fn forbidden(message: impl Into<String>) -> Self {
        Self { answer: Answer::error(403, message), challenge: false }
    }
}

impl Access {
    /// Any token is set.
    pub fn has_tokens(&self) -> bool {
        self.control.is_some() || self.read.is_some()
    }

    /// The scope the request's bearer token grants: `None` without one.
    ///
    /// # Errors
    /// A token that is not one of ours, or a malformed `Authorization`.
    fn granted(&self, authorization: Option<&str>) -> Result<Option<Scope>, Refusal> {
        let Some(value) = authorization else { return Ok(None) };
        let presented = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .map(str::trim)
            .ok_or_else(|| Refusal::unauthorized("Authorization must be \"Bearer TOKEN\""))?;
        let presented = presented.as_bytes();
        if self.control.as_ref().is_some_and(|t| t.matches(presented)) {
            Ok(Some(Scope::Control))
        } else if self.read.as_ref().is_some_and(|t| t.matches(presented)) {
            Ok(Some(Scope::Read))
        } else {
            Err(Refusal::unauthorized("the token is not valid here"))
        }
    }

    /// `host` (a `Host` header) names this endpoint, bound at `bound`.
    pub fn host_allowed(&self, bound: SocketAddr, host: &str) -> bool {
        let host = host.trim();
        if self
            .allowed_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host) || split_host(host).0.eq_ignore_ascii_case(h))
        {
            return true;
        }
        let (name, port) = split_host(host);
        if port.is_some_and(|p| p != bound.port()) {
            return false;
        }
        let ip = name.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().ok();
        match ip {
            // Rebinding needs a DNS name; an IP literal is what the client
            // really dialled. On a loopback bind only loopback literals.
            Some(ip) => !bound.ip().is_loopback() || ip.is_loopback(),
            None => name.eq_ignore_ascii_case("localhost"),
        }
    }

    /// `origin` may call us: the origin of the page we serve (its host is
    /// the request's `Host`), or a configured CORS origin.
    pub fn origin_allowed(&self, origin: &str, host: Option<&str>) -> bool {
        if self.cors_origin(origin) {
            return true;
        }
        let Some(host) = host else { return false };
        let rest = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
        rest.is_some_and(|h| h.eq_ignore_ascii_case(host.trim()))
    }

    /// `origin` is one of `cors_origins`.
    pub fn cors_origin(&self, origin: &str) -> bool {
        self.cors_origins.iter().any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(origin))
    }

    /// Checks one request to a route needing `scope` on an endpoint bound at
    /// `bound`; on success, the scope its token granted (if any).
    ///
    /// # Errors
    /// The refusal to send: a foreign `Host` (403), no or a wrong token
    /// (401), a `read` token for control (403), a cross-site request (403).
    pub fn check(
        &self,
        bound: SocketAddr,
        scope: Scope,
        req: &Request<'_>,
    ) -> Result<Option<Scope>, Refusal> {
        match req.host {
            None => return Err(Refusal::forbidden("a Host header is required")),
            Some(h) if !self.host_allowed(bound, h) => {
                return Err(Refusal::forbidden(format!(
                    "Host {h:?} is not this endpoint (see allowed_hosts in docs/http-api.md)"
                )))
            }
            Some(_) => {}
        }
        let granted = self.granted(req.authorization)?;
        match scope {
            Scope::Public => Ok(granted),
            Scope::Read if !self.has_tokens() || granted.is_some() => Ok(granted),
            Scope::Read => Err(Refusal::unauthorized("this route needs a read token")),
            Scope::Control if self.control.is_some() => match granted {
                Some(Scope::Control) => Ok(granted),
                Some(_) => Err(Refusal::forbidden("this route needs the control token")),
                None => Err(Refusal::unauthorized("this route needs the control token")),
            },
            Scope::Control => {
                if let Some(origin) = req.origin {
                    if !self.origin_allowed(origin, req.host) {
                        return Err(Refusal::forbidden(format!(
                            "cross-site request from {origin:?} refused"
                        )));
                    }
                }
                let json = req.content_type.is_some_and(|c| {
                    c.split(';')
                        .next()
                        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
                });
                if json || req.requested_with {
                    Ok(granted)
                } else {
                    Err(Refusal::forbidden(
                        "a POST needs Content-Type: application/json or an X-Requested-With header",
                    ))
                }
            }
        }
    }
}

/// `name` and port of a `Host` value (`[::1]:80`, `a:80`, `a`).
fn split_host(host: &str) -> (&str, Option<u16>) {
    if let Some(rest) = host.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((ip, tail)) => (ip, tail.strip_prefix(':').and_then(|p| p.parse().ok())),
            None => (host, None),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') => match port.parse() {
            Ok(p) => (name, Some(p)),
            Err(_) => (host, Some(0)),
        },
        _ => (host, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOOP: &str = "127.0.0.1:7070";

    fn req(host: &str) -> Request<'_> {
        Request { host: Some(host), content_type: Some("application/json"), ..Default::default() }
    }

    fn tokens() -> Access {
        Access {
            control: Some(Token::new("c0ntrol").unwrap()),
            read: Some(Token::new("r3ad\n").unwrap()),
            ..Default::default()
        }
    }

    #[test]
    fn host_must_be_ours_an_ip_literal_or_configured() {
        let a = Access { allowed_hosts: vec!["squall.internal".into()], ..Default::default() };
        let bound: SocketAddr = LOOP.parse().unwrap();
        for ok in
            ["127.0.0.1:7070", "localhost:7070", "LOCALHOST", "[::1]:7070", "squall.internal:80"]
        {
            assert!(a.host_allowed(bound, ok), "{ok}");
        }
        for bad in ["evil.example:7070", "127.0.0.1:80", "10.0.0.1:7070", "127.0.0.1:x", ""] {
            assert!(!a.host_allowed(bound, bad), "{bad}");
        }
        let any: SocketAddr = "0.0.0.0:7070".parse().unwrap();
        assert!(a.host_allowed(any, "10.0.0.1:7070"));
        assert!(!a.host_allowed(any, "evil.example:7070"));
    }

    #[test]
    fn without_tokens_reads_are_open_and_control_is_same_origin_only() {
        let a = Access::default();
        let bound: SocketAddr = LOOP.parse().unwrap();
        assert!(a.check(bound, Scope::Read, &req(LOOP)).is_ok());
        assert!(a.check(bound, Scope::Control, &req(LOOP)).is_ok());
        let same = Request { origin: Some("http://127.0.0.1:7070"), ..req(LOOP) };
        assert!(a.check(bound, Scope::Control, &same).is_ok());
        // The request: a foreign origin, a simple content type.
        let evil = Request {
            origin: Some("http://evil.example"),
            content_type: Some("text/plain"),
            ..req(LOOP)
        };
        assert_eq!(a.check(bound, Scope::Control, &evil).unwrap_err().answer.status, 403);
        let evil_json = Request { origin: Some("http://evil.example"), ..req(LOOP) };
        assert_eq!(a.check(bound, Scope::Control, &evil_json).unwrap_err().answer.status, 403);
        let plain = Request { content_type: Some("text/plain"), ..req(LOOP) };
        assert_eq!(a.check(bound, Scope::Control, &plain).unwrap_err().answer.status, 403);
        let header = Request { content_type: None, requested_with: true, ..req(LOOP) };
        assert!(a.check(bound, Scope::Control, &header).is_ok());
        let rebound = req("evil.example:7070");
        assert_eq!(a.check(bound, Scope::Read, &rebound).unwrap_err().answer.status, 403);
        let cors = Access { cors_origins: vec!["https://dash.example/".into()], ..a };
        let dash = Request { origin: Some("https://dash.example"), ..req(LOOP) };
        assert!(cors.check(bound, Scope::Control, &dash).is_ok());
    }

    #[test]
    fn tokens_grant_their_scope_and_nothing_else() {
        let a = tokens();
        let bound: SocketAddr = LOOP.parse().unwrap();
        let with = |t: &'static str| Request { authorization: Some(t), ..req(LOOP) };
        assert_eq!(a.check(bound, Scope::Read, &req(LOOP)).unwrap_err().answer.status, 401);
        assert!(a.check(bound, Scope::Read, &with("Bearer r3ad")).is_ok());
        assert!(a.check(bound, Scope::Read, &with("Bearer c0ntrol")).is_ok());
        assert_eq!(
            a.check(bound, Scope::Control, &with("Bearer r3ad")).unwrap_err().answer.status,
            403
        );
        assert!(a.check(bound, Scope::Control, &with("Bearer c0ntrol")).is_ok());
        let wrong = a.check(bound, Scope::Control, &with("Bearer c0ntro1")).unwrap_err();
        assert!(wrong.challenge && wrong.answer.status == 401);
        assert_eq!(
            a.check(bound, Scope::Read, &with("Basic eA==")).unwrap_err().answer.status,
            401
        );
        // Same-origin is not enough once a control token is set.
        assert_eq!(a.check(bound, Scope::Control, &req(LOOP)).unwrap_err().answer.status, 401);
        assert!(a.check(bound, Scope::Public, &req(LOOP)).is_ok());
        assert!(Token::new(" \n").is_err() && Token::new("a b").is_err());
    }
}
