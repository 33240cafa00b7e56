//! Connections and replies: opening a connection with a bounded retry,
//! telling a lost connection from a server's refusal, and reading the few
//! reply shapes the stream commands return.

use std::time::{Duration, Instant};

use redis::{Client, Connection, RedisError, Value as RedisValue};

/// Socket timeouts and how long `open`/`prepare` keep retrying.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    /// How long the first connection may take, retries included.
    pub connect: Duration,
    /// How long one reply may take beyond a command's own blocking time.
    pub reply: Duration,
}

/// Why there is no connection; each message names the server or the url.
#[derive(Debug)]
pub(crate) enum ConnError {
    /// The url does not parse.
    BadUrl { url: String, cause: RedisError },
    /// No attempt connected within the budget.
    NotConnected { addr: String, cause: RedisError, attempts: u32, waited: Duration },
    /// The connection was gone and one attempt to make it again failed.
    Reconnect(RedisError),
    /// The server refused, or the connection broke during, a command.
    Redis(RedisError),
}

impl std::fmt::Display for ConnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BadUrl { url, cause } => {
                write!(f, "url {url:?} is not a valid redis url: {cause}")
            }
            Self::NotConnected { addr, cause, attempts, waited } => write!(
                f,
                "cannot connect to redis at {addr}: {cause} ({attempts} attempts in {:.1} s)",
                waited.as_secs_f64()
            ),
            Self::Reconnect(cause) => write!(f, "cannot reconnect: {cause}"),
            Self::Redis(cause) => cause.fmt(f),
        }
    }
}

impl std::error::Error for ConnError {}

/// Parses `url` without connecting: a malformed url is a config error.
pub(crate) fn client(url: &str) -> Result<Client, ConnError> {
    Client::open(url).map_err(|cause| ConnError::BadUrl { url: url.to_owned(), cause })
}

/// One connection attempt, with its socket timeouts set (`block` is the
/// longest time a command on it blocks on the server).
pub(crate) fn connect_once(
    client: &Client,
    timeouts: Timeouts,
    block: Duration,
) -> redis::RedisResult<Connection> {
    let attempt = timeouts.connect.min(Duration::from_secs(2));
    let con = client.get_connection_with_timeout(attempt)?;
    con.set_read_timeout(Some(block + timeouts.reply))?;
    con.set_write_timeout(Some(timeouts.reply))?;
    Ok(con)
}

/// Connects, retrying with a growing pause until `timeouts.connect` has
/// passed; the error names the server, how long it tried and the last cause.
pub(crate) fn connect_with_retry(
    client: &Client,
    timeouts: Timeouts,
    block: Duration,
) -> Result<Connection, ConnError> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(50);
    let mut attempts = 0_u32;
    loop {
        attempts += 1;
        match connect_once(client, timeouts, block) {
            Ok(con) => return Ok(con),
            Err(cause) => {
                let waited = started.elapsed();
                if waited + pause >= timeouts.connect {
                    let addr = client.get_connection_info().addr().to_string();
                    return Err(ConnError::NotConnected { addr, cause, attempts, waited });
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// True when `e` means the connection is gone or unusable (reconnect),
/// false when the server answered with an error (the command was refused).
pub(crate) fn is_connection_error(e: &RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_timeout() || e.is_connection_refusal()
}

/// The bytes of a string-like reply.
pub(crate) fn bytes(value: &RedisValue) -> Option<&[u8]> {
    match value {
        RedisValue::BulkString(b) => Some(b),
        RedisValue::SimpleString(s) => Some(s.as_bytes()),
        RedisValue::VerbatimString { text, .. } => Some(text.as_bytes()),
        _ => None,
    }
}

/// A string-like reply as text (lossy for binary).
pub(crate) fn text(value: &RedisValue) -> Option<String> {
    bytes(value).map(|b| String::from_utf8_lossy(b).into_owned())
}

/// The items of an array reply (a nil is empty).
pub(crate) fn items(value: &RedisValue) -> &[RedisValue] {
    match value {
        RedisValue::Array(items) | RedisValue::Set(items) => items,
        _ => &[],
    }
}

/// An integer reply, also when sent as a string.
pub(crate) fn int(value: &RedisValue) -> Option<i64> {
    match value {
        RedisValue::Int(n) => Some(*n),
        other => text(other)?.parse().ok(),
    }
}

/// A stream entry as it came from the server: its id and field pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawEntry {
    /// The entry id, `<ms>-<seq>`.
    pub id: String,
    /// Field names and values, in the entry's order.
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Reads `[[id, [f1, v1, ...]], ...]`: the entries of one stream in an
/// XREADGROUP or XAUTOCLAIM reply. An entry whose fields are nil (deleted
/// while pending) is returned with no fields.
pub(crate) fn entries(list: &RedisValue) -> Vec<RawEntry> {
    let mut out = Vec::new();
    for entry in items(list) {
        let parts = items(entry);
        let Some(id) = parts.first().and_then(text) else { continue };
        let mut fields = Vec::new();
        let flat = parts.get(1).map(items).unwrap_or(&[]);
        for pair in flat.chunks_exact(2) {
            if let (Some(k), Some(v)) = (bytes(&pair[0]), bytes(&pair[1])) {
                fields.push((k.to_vec(), v.to_vec()));
            }
        }
        if let Some(RedisValue::Map(map)) = parts.get(1) {
            for (k, v) in map {
                if let (Some(k), Some(v)) = (bytes(k), bytes(v)) {
                    fields.push((k.to_vec(), v.to_vec()));
                }
            }
        }
        out.push(RawEntry { id, fields });
    }
    out
}

/// The entries of an XREADGROUP reply for one stream (nil: none arrived).
pub(crate) fn xreadgroup_entries(reply: &RedisValue) -> Vec<RawEntry> {
    match reply {
        // RESP2: [[stream, entries]]
        RedisValue::Array(streams) => {
            streams.iter().flat_map(|s| items(s).get(1).map(entries).unwrap_or_default()).collect()
        }
        // RESP3: {stream: entries}
        RedisValue::Map(streams) => streams.iter().flat_map(|(_, e)| entries(e)).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> RedisValue {
        RedisValue::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn reads_an_xreadgroup_reply_with_its_fields_in_order() {
        let reply = RedisValue::Array(vec![RedisValue::Array(vec![
            bulk("s"),
            RedisValue::Array(vec![
                RedisValue::Array(vec![
                    bulk("1-0"),
                    RedisValue::Array(vec![bulk("a"), bulk("1"), bulk("b"), bulk("2")]),
                ]),
                RedisValue::Array(vec![bulk("1-1"), RedisValue::Nil]),
            ]),
        ])]);
        let got = xreadgroup_entries(&reply);
        assert_eq!(
            got,
            vec![
                RawEntry {
                    id: "1-0".into(),
                    fields: vec![(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"2".to_vec())]
                },
                RawEntry { id: "1-1".into(), fields: vec![] },
            ]
        );
        assert!(xreadgroup_entries(&RedisValue::Nil).is_empty());
    }

    #[test]
    fn a_malformed_url_is_refused_without_connecting() {
        let err = client("htp://nowhere").unwrap_err().to_string();
        assert!(err.contains("not a valid redis url"), "{err}");
        assert!(client("redis://127.0.0.1:1/0").is_ok());
    }

    #[test]
    fn an_unreachable_server_is_named_after_a_bounded_retry() {
        // Port 1 on loopback refuses at once, so this only exercises the retry.
        let c = client("redis://127.0.0.1:1").unwrap();
        let timeouts =
            Timeouts { connect: Duration::from_millis(300), reply: Duration::from_secs(1) };
        let Err(err) = connect_with_retry(&c, timeouts, Duration::ZERO) else {
            panic!("connected to port 1")
        };
        let err = err.to_string();
        assert!(err.starts_with("cannot connect to redis at 127.0.0.1:1"), "{err}");
        assert!(err.contains("attempts"), "{err}");
    }
}
