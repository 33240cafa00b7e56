//! The address of `--http` and `[topology.http] addr`.

use std::net::{SocketAddr, ToSocketAddrs};

/// Why a value is not an address to bind.
#[derive(Debug, thiserror::Error)]
pub enum AddrError {
    /// Neither a port nor `HOST:PORT`.
    #[error("{text:?} is not PORT or HOST:PORT ({cause})")]
    Malformed {
        /// The value.
        text: String,
        /// What the resolver said.
        cause: std::io::Error,
    },
    /// A host name with no address.
    #[error("{0:?} resolves to no address")]
    NoAddress(String),
}

/// Parses `--http`'s value: `PORT` (bound on loopback), `HOST:PORT` or
/// `[V6]:PORT`.
///
/// # Errors
/// A value that is neither a port nor an address.
pub fn parse_addr(s: &str) -> Result<SocketAddr, AddrError> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.to_socket_addrs()
        .map_err(|cause| AddrError::Malformed { text: s.to_owned(), cause })?
        .next()
        .ok_or_else(|| AddrError::NoAddress(s.to_owned()))
}
