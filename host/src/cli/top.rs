//! `squall top ADDR`: a terminal dashboard, in the spirit of `vector top`,
//! over the REST API of a running `squall run --http ADDR`.
//!
//! A thread fetches `GET /api/v1/topology` once a second ([`client`]); the
//! main thread draws the answer with ratatui ([`view`] turns the JSON into
//! strings, [`dashboard`] lays them out; both come with the `top` feature) and reads the keys: `q`, Esc or
//! Ctrl-C quit, `w` cycles the rate window, ↑/↓ select a row. An endpoint
//! that cannot be reached is shown in the header and asked again every
//! second.

// `squall tap` uses part of the client; the rest only serves the dashboard.
#[cfg_attr(not(feature = "top"), allow(dead_code))]
pub(super) mod client;
#[cfg(feature = "top")]
mod dashboard;
#[cfg(feature = "top")]
mod view;

#[cfg(feature = "top")]
pub use dashboard::top;

/// Without the `top` feature the command says how to get it.
///
/// # Errors
/// Always: this build has no dashboard.
#[cfg(not(feature = "top"))]
pub fn top(
    _addr: std::net::SocketAddr,
    _token_file: Option<&std::path::Path>,
    _tls_ca: Option<&std::path::Path>,
) -> Result<(), super::Failure> {
    Err(anyhow::anyhow!(
        "this squall was built without the `top` feature (ratatui): rebuild squall-host with its \
         default features, or watch the topology with `curl ADDR/api/v1/topology`"
    )
    .into())
}
