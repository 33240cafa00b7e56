//! [`RedisState`]: the backend itself.

use std::time::{Duration, Instant};

use abi_stable::std_types::{ROption, RVec};
use redis::{Client, Connection, RedisError, RedisResult, Value as RedisValue};
use rustc_hash::FxHashSet;
use squall_plugin_api::abi::{ScopeWrites, StateRecord};
use squall_plugin_api::prelude::*;

squall_plugin_api::declare_config! {
    /// The backend's `[state.config]` table.
    #[derive(Debug, Clone, PartialEq)]
    struct RedisStateConfig {
        url: String = default(
            String,
            "\"redis://127.0.0.1:6379\"",
            "redis://[user:password@]host[:port][/db]"
        ),
        key_prefix: String = default(
            String,
            "\"squall:state\"",
            "keys are PREFIX:{namespace}:checkpoint, :scopes and :data:SCOPE"
        ),
        connect_timeout_ms: u64 = default(
            Integer,
            "5000",
            "how long open retries the first connection; bounds each reconnect"
        ),
        timeout_ms: u64 = default(
            Integer,
            "30000",
            "how long one reply (a whole commit's transaction) may take"
        ),
        batch: usize = default(
            Integer,
            "10000",
            "records per HSET/HDEL in a commit, and per HSCAN in a load"
        ),
    }
}

/// The names of one namespace's keys.
#[derive(Debug, Clone)]
struct Keys {
    /// `P:{NS}`: the start of every key.
    base: String,
    checkpoint: String,
    scopes: String,
}

impl Keys {
    fn new(prefix: &str, namespace: &str) -> Self {
        let base = format!("{prefix}:{{{namespace}}}");
        Keys { checkpoint: format!("{base}:checkpoint"), scopes: format!("{base}:scopes"), base }
    }

    fn data(&self, scope: &str) -> String {
        format!("{}:data:{scope}", self.base)
    }
}

/// Commits checkpoints to Redis: one hash per scope, a set of the scopes
/// and a string holding the last committed checkpoint, all written in one
/// `MULTI`/`EXEC` per commit (layout and guarantees in
/// `docs/state-backends.md`).
///
/// After a connection error the connection is dropped and the next call
/// connects again (one attempt, bounded by `connect_timeout_ms`), so a
/// Redis that was away works again once it is back; the failed commit is
/// not visible and the host retries its writes with the next checkpoint.
pub struct RedisState {
    config: RedisStateConfig,
    client: Client,
    con: Option<Connection>,
    keys: Option<Keys>,
    /// Tests only: queue a command Redis refuses in the middle of the next
    /// commit's transaction, so that `EXEC` is aborted.
    #[cfg(test)]
    inject_bad_command: bool,
}

impl std::fmt::Debug for RedisState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisState")
            .field("config", &self.config)
            .field("connected", &self.con.is_some())
            .field("namespace", &self.keys.as_ref().map(|k| &k.base))
            .finish_non_exhaustive()
    }
}

/// True when `e` means the connection is gone or unusable.
fn is_connection_error(e: &RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_timeout() || e.is_connection_refusal()
}

/// A message on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The bytes of a string-like reply.
fn bytes(value: &RedisValue) -> Option<&[u8]> {
    match value {
        RedisValue::BulkString(b) => Some(b),
        RedisValue::SimpleString(s) => Some(s.as_bytes()),
        RedisValue::VerbatimString { text, .. } => Some(text.as_bytes()),
        _ => None,
    }
}

/// The items of an array or set reply (anything else is empty).
fn into_items(value: RedisValue) -> Vec<RedisValue> {
    match value {
        RedisValue::Array(items) | RedisValue::Set(items) => items,
        _ => Vec::new(),
    }
}

/// What one record write becomes in the transaction.
enum Run<'a> {
    Set(Vec<(&'a [u8], &'a [u8])>),
    Del(Vec<&'a [u8]>),
}

/// The commands of one scope's writes, in their order (a later write of a
/// key wins, since Redis applies a transaction's commands in order), at
/// most `batch` records per command.
fn scope_commands(key: &str, records: &[StateRecord], batch: usize) -> Vec<redis::Cmd> {
    let mut runs: Vec<Run<'_>> = Vec::new();
    for r in records {
        match (&r.value, runs.last_mut()) {
            (ROption::RSome(v), Some(Run::Set(pairs))) if pairs.len() < batch => {
                pairs.push((r.key.as_slice(), v.as_slice()));
            }
            (ROption::RSome(v), _) => runs.push(Run::Set(vec![(r.key.as_slice(), v.as_slice())])),
            (ROption::RNone, Some(Run::Del(keys))) if keys.len() < batch => {
                keys.push(r.key.as_slice());
            }
            (ROption::RNone, _) => runs.push(Run::Del(vec![r.key.as_slice()])),
        }
    }
    runs.into_iter()
        .map(|run| {
            let mut cmd;
            match run {
                Run::Set(pairs) => {
                    cmd = redis::cmd("HSET");
                    cmd.arg(key);
                    for (k, v) in pairs {
                        cmd.arg(k).arg(v);
                    }
                }
                Run::Del(keys) => {
                    cmd = redis::cmd("HDEL");
                    cmd.arg(key);
                    for k in keys {
                        cmd.arg(k);
                    }
                }
            }
            cmd
        })
        .collect()
}

impl RedisState {
    fn timeouts(&self) -> (Duration, Duration) {
        (
            Duration::from_millis(self.config.connect_timeout_ms.max(1)),
            Duration::from_millis(self.config.timeout_ms.max(1)),
        )
    }

    fn addr(&self) -> String {
        self.client.get_connection_info().addr().to_string()
    }

    fn connect_once(&self) -> RedisResult<Connection> {
        let (connect, reply) = self.timeouts();
        let con = self.client.get_connection_with_timeout(connect)?;
        con.set_read_timeout(Some(reply))?;
        con.set_write_timeout(Some(reply))?;
        Ok(con)
    }

    /// Connects, retrying with a growing pause for up to `connect_timeout_ms`.
    fn connect_with_retry(&self) -> std::result::Result<Connection, NotConnected> {
        let (budget, _) = self.timeouts();
        let started = Instant::now();
        let mut pause = Duration::from_millis(50);
        let mut attempts = 0_u32;
        loop {
            attempts += 1;
            match self.connect_once() {
                Ok(con) => return Ok(con),
                Err(e) => {
                    let waited = started.elapsed();
                    if waited + pause >= budget {
                        let (addr, cause) = (self.addr(), one_line(&e.to_string()));
                        return Err(NotConnected { addr, cause, attempts, waited });
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
            }
        }
    }

    fn keys(&self) -> std::result::Result<Keys, NotOpen> {
        self.keys.clone().ok_or(NotOpen)
    }

    /// Runs `f` on the connection (connecting first when there is none);
    /// a connection error drops the connection, so the next call connects
    /// again. The error names the server and `what` failed.
    fn with_con<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut Connection, &Keys) -> std::result::Result<T, Failure>,
    ) -> Result<T> {
        let keys = self.keys()?;
        if self.con.is_none() {
            let con = self.connect_once().map_err(|e| {
                format!(
                    "redis state at {}: {what}: cannot reconnect: {}",
                    self.addr(),
                    one_line(&e.to_string())
                )
            })?;
            self.con = Some(con);
        }
        let con = self.con.as_mut().expect("connected above");
        match f(con, &keys) {
            Ok(v) => Ok(v),
            Err(Failure::Redis(e)) => {
                let lost = is_connection_error(&e);
                if lost {
                    self.con = None;
                }
                Err(format!(
                    "redis state at {}: {what} failed{}: {}",
                    self.addr(),
                    if lost { " (connection lost; the next call reconnects)" } else { "" },
                    one_line(&e.to_string())
                )
                .into())
            }
            Err(Failure::Refused(message)) => {
                Err(format!("redis state at {}: {what} failed: {message}", self.addr()).into())
            }
        }
    }
}

/// The backend could not connect within its budget.
#[derive(Debug)]
struct NotConnected {
    /// The server.
    addr: String,
    /// The last attempt's error, on one line.
    cause: String,
    attempts: u32,
    waited: Duration,
}

impl std::fmt::Display for NotConnected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self { addr, cause, attempts, waited } = self;
        let secs = waited.as_secs_f64();
        write!(f, "cannot connect to redis at {addr}: {cause} ({attempts} attempts in {secs:.1} s)")
    }
}

impl std::error::Error for NotConnected {}

/// A call before `open`.
#[derive(Debug)]
struct NotOpen;

impl std::fmt::Display for NotOpen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("redis state backend used before open")
    }
}

impl std::error::Error for NotOpen {}

/// Why a call failed: the server or connection, or a check of ours.
enum Failure {
    Redis(RedisError),
    Refused(String),
}

impl From<RedisError> for Failure {
    fn from(e: RedisError) -> Self {
        Failure::Redis(e)
    }
}

/// Watches every key a commit writes (the checkpoint, the scope set, each
/// scope's hash `data` names), then checks their types: a change by anyone
/// else between the type check and EXEC makes EXEC do nothing.
fn watch_keys(
    con: &mut Connection,
    keys: &Keys,
    data: &[(String, &ScopeWrites)],
) -> std::result::Result<(), Failure> {
    let mut watch = redis::cmd("WATCH");
    watch.arg(&keys.checkpoint).arg(&keys.scopes);
    let mut expected = vec![(keys.checkpoint.as_str(), "string"), (keys.scopes.as_str(), "set")];
    for (key, _) in data {
        watch.arg(key);
        expected.push((key.as_str(), "hash"));
    }
    watch.query::<()>(con)?;
    if let Err(e) = check_types(con, &expected) {
        // Best effort: a lost connection forgets its watches anyway.
        let _ = redis::cmd("UNWATCH").query::<()>(con);
        return Err(e);
    }
    Ok(())
}

/// A number not above the last committed one is refused (a group's
/// fencing: a newer owner committed). The key is watched, so a commit by
/// anyone between this read and EXEC aborts EXEC.
fn check_fence(
    con: &mut Connection,
    keys: &Keys,
    checkpoint: u64,
) -> std::result::Result<(), Failure> {
    let last: Option<String> = redis::cmd("GET").arg(&keys.checkpoint).query(con)?;
    if let Some(last) = last.and_then(|l| l.parse::<u64>().ok()) {
        if last >= checkpoint {
            let _ = redis::cmd("UNWATCH").query::<()>(con);
            return Err(Failure::Refused(format!(
                "checkpoint {checkpoint} is not above the last committed, {last}: \
                 refused, nothing written (a newer owner of this namespace committed)"
            )));
        }
    }
    Ok(())
}

/// The MULTI/EXEC transaction of a commit: each scope's writes, the scopes
/// that hold values added to the scope set, and the checkpoint number.
/// `inject` (tests only) adds a command refused when queued.
fn commit_transaction(
    keys: &Keys,
    data: &[(String, &ScopeWrites)],
    checkpoint: u64,
    batch: usize,
    mut inject: bool,
) -> redis::Pipeline {
    let mut tx = redis::pipe();
    tx.atomic();
    let mut scopes = redis::cmd("SADD");
    scopes.arg(&keys.scopes);
    let mut any_scope = false;
    for (key, w) in data {
        for cmd in scope_commands(key, &w.records, batch) {
            tx.add_command(cmd).ignore();
        }
        if w.records.iter().any(|r| r.value.is_some()) {
            scopes.arg(w.scope.as_str());
            any_scope = true;
        }
        if std::mem::take(&mut inject) {
            // HSET with no field: refused when queued, so EXEC aborts.
            tx.cmd("HSET").arg(key).ignore();
        }
    }
    if any_scope {
        tx.add_command(scopes).ignore();
    }
    tx.cmd("SET").arg(&keys.checkpoint).arg(checkpoint.to_string()).ignore();
    tx
}

/// EXEC's reply: Nil when a watched key changed; a command inside that
/// failed is refused too.
fn exec_outcome(reply: RedisValue) -> std::result::Result<(), Failure> {
    match reply {
        RedisValue::Nil => Err(Failure::Refused(
            "a key of the namespace changed during the commit (another writer?); \
             nothing was written"
                .to_owned(),
        )),
        other => {
            if let Some(e) = into_items(other).into_iter().find_map(|v| match v {
                RedisValue::ServerError(e) => Some(e),
                _ => None,
            }) {
                return Err(Failure::Refused(format!("a command inside EXEC failed: {e:?}")));
            }
            Ok(())
        }
    }
}

/// The type each written key must have (or `none`).
fn check_types(
    con: &mut Connection,
    expected: &[(&str, &str)],
) -> std::result::Result<(), Failure> {
    let mut pipe = redis::pipe();
    for (key, _) in expected {
        pipe.cmd("TYPE").arg(*key);
    }
    let types: Vec<String> = pipe.query(con)?;
    for ((key, want), got) in expected.iter().zip(&types) {
        if got != "none" && got != want {
            return Err(Failure::Refused(format!(
                "key {key:?} holds a {got}, not a {want}; nothing was written"
            )));
        }
    }
    Ok(())
}

impl StateBackend for RedisState {
    const NAME: &'static str = "RedisState";
    const DESCRIPTION: &'static str =
        "checkpoints in Redis: a hash per scope, committed in one MULTI/EXEC";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(RedisStateConfig::KEYS);

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = RedisStateConfig::parse(config)?;
        if config.key_prefix.is_empty() {
            return Err("key_prefix must not be empty".into());
        }
        if !(1..=1_000_000).contains(&config.batch) {
            return Err(format!("batch must be between 1 and 1000000, got {}", config.batch).into());
        }
        if config.timeout_ms == 0 || config.connect_timeout_ms == 0 {
            return Err("timeout_ms and connect_timeout_ms must be positive".into());
        }
        let client = Client::open(config.url.as_str()).map_err(|e| {
            format!("url {:?} is not a valid redis url: {}", config.url, one_line(&e.to_string()))
        })?;
        Ok(RedisState {
            config,
            client,
            con: None,
            keys: None,
            #[cfg(test)]
            inject_bad_command: false,
        })
    }

    fn open(&mut self, namespace: &str) -> Result<()> {
        if namespace.is_empty() {
            return Err("the state namespace must not be empty".into());
        }
        self.keys = Some(Keys::new(&self.config.key_prefix, namespace));
        self.con = None;
        let con = self.connect_with_retry()?;
        self.con = Some(con);
        Ok(())
    }

    fn last_committed(&mut self) -> Result<Option<u64>> {
        self.with_con("reading the last checkpoint", |con, keys| {
            let text: Option<String> = redis::cmd("GET").arg(&keys.checkpoint).query(con)?;
            match text {
                None => Ok(None),
                Some(t) => t.parse().map(Some).map_err(|_| {
                    Failure::Refused(format!(
                        "key {:?} holds {t:?}, not a checkpoint number",
                        keys.checkpoint
                    ))
                }),
            }
        })
    }

    fn commit(&mut self, checkpoint: u64, writes: &[ScopeWrites]) -> Result<()> {
        let batch = self.config.batch;
        #[cfg(test)]
        let inject = std::mem::take(&mut self.inject_bad_command);
        #[cfg(not(test))]
        let inject = false;
        let what = format!("commit of checkpoint {checkpoint}");
        self.with_con(&what, |con, keys| {
            let data: Vec<(String, &ScopeWrites)> =
                writes.iter().map(|w| (keys.data(w.scope.as_str()), w)).collect();
            watch_keys(con, keys, &data)?;
            check_fence(con, keys, checkpoint)?;
            let tx = commit_transaction(keys, &data, checkpoint, batch, inject);
            exec_outcome(tx.query(con)?)
        })
    }

    fn load(&mut self, scope: &str) -> Result<Vec<StateRecord>> {
        let count = self.config.batch;
        self.with_con(&format!("load of scope {scope:?}"), |con, keys| {
            let key = keys.data(scope);
            let (len,): (usize,) = redis::pipe().cmd("HLEN").arg(&key).query(con)?;
            let mut out: Vec<StateRecord> = Vec::with_capacity(len);
            let mut cursor = b"0".to_vec();
            loop {
                let reply: RedisValue = redis::cmd("HSCAN")
                    .arg(&key)
                    .arg(&cursor)
                    .arg("COUNT")
                    .arg(count)
                    .query(con)?;
                let mut parts = into_items(reply).into_iter();
                let next = parts.next().as_ref().and_then(bytes).map(<[u8]>::to_vec);
                let Some(next) = next else {
                    return Err(Failure::Refused("HSCAN replied without a cursor".to_owned()));
                };
                let mut flat = parts.next().map(into_items).unwrap_or_default().into_iter();
                while let (Some(k), Some(v)) = (flat.next(), flat.next()) {
                    if let (RedisValue::BulkString(k), RedisValue::BulkString(v)) = (k, v) {
                        out.push(StateRecord {
                            key: RVec::from(k),
                            value: ROption::RSome(RVec::from(v)),
                        });
                    }
                }
                if next == b"0" {
                    break;
                }
                cursor = next;
            }
            // HSCAN may return a field twice (while the hash is rehashed);
            // with no writer, more records than HLEN means duplicates.
            if out.len() > len {
                let mut seen = FxHashSet::default();
                let mut unique = Vec::with_capacity(len);
                for r in out {
                    if seen.insert(r.key.clone()) {
                        unique.push(r);
                    }
                }
                out = unique;
            }
            Ok(out)
        })
    }

    fn scopes(&mut self) -> Result<Vec<String>> {
        self.with_con("listing the scopes", |con, keys| {
            let mut names: Vec<String> = redis::cmd("SMEMBERS").arg(&keys.scopes).query(con)?;
            names.sort();
            if names.is_empty() {
                return Ok(names);
            }
            // A hash whose last field was deleted is gone; its scope holds
            // no committed records any more.
            let mut pipe = redis::pipe();
            for name in &names {
                pipe.cmd("EXISTS").arg(keys.data(name));
            }
            let exists: Vec<bool> = pipe.query(con)?;
            Ok(names.into_iter().zip(exists).filter_map(|(n, e)| e.then_some(n)).collect())
        })
    }

    fn clear(&mut self) -> Result<()> {
        self.with_con("clearing the namespace", |con, keys| {
            let names: Vec<String> = redis::cmd("SMEMBERS").arg(&keys.scopes).query(con)?;
            let mut unlink = redis::cmd("UNLINK");
            unlink.arg(&keys.checkpoint).arg(&keys.scopes);
            for name in &names {
                unlink.arg(keys.data(name));
            }
            unlink.query::<()>(con)?;
            Ok(())
        })
    }

    fn close(&mut self) {
        self.con = None;
    }
}

#[cfg(test)]
mod tests;
