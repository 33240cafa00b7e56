//! The address of `--http` and `[topology.http] addr`.

use std::net::{SocketAddr, ToSocketAddrs};

/// Parses `--http`'s value: `PORT` (bound on loopback), `HOST:PORT` or
/// `[V6]:PORT`.
///
/// # Errors
/// A value that is neither a port nor an address.
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.to_socket_addrs()
        .map_err(|e| format!("{s:?} is not PORT or HOST:PORT ({e})"))?
        .next()
        .ok_or_else(|| format!("{s:?} resolves to no address"))
}
