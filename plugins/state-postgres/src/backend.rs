//! [`PostgresState`]: the backend itself.

use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::str::FromStr;
use std::time::Duration;

use abi_stable::std_types::{ROption, RVec};
use postgres::{Client, Config, NoTls};
use squall_plugin_api::abi::{ScopeWrites, StateRecord};
use squall_plugin_api::prelude::*;

use crate::copy::{decode_pairs, CopyEncoder};

/// The advisory lock key (`pg_advisory_xact_lock`) under which sessions
/// create the backend's tables one at a time: "squall-b" in ASCII.
const SET_UP_LOCK: i64 = 0x7371_7561_6c6c_2d62;

squall_plugin_api::declare_config! {
    /// The backend's `[state.config]` table.
    #[derive(Debug, Clone, PartialEq)]
    struct PostgresStateConfig {
        url: String = default(
            String,
            "\"host=127.0.0.1 port=5432 user=postgres dbname=postgres\"",
            "libpq key=value settings or a postgres:// url"
        ),
        table: String = default(
            String,
            "\"squall_state\"",
            "the data table; the checkpoints go to TABLE_checkpoints"
        ),
        connect_timeout_ms: u64 = default(
            Integer,
            "5000",
            "how long one connection attempt may take"
        ),
        timeout_ms: u64 = default(
            Integer,
            "60000",
            "statement_timeout of the session: the longest one statement may run"
        ),
    }
}

/// The staging table of a session's commits.
const STAGE: &str = "squall_state_stage";

/// A message on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` as an SQL string literal (`standard_conforming_strings` is on for
/// every session of this backend).
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A postgres error on one line, with the server's message when there is one.
fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            one_line(&format!("{}: {} ({})", db.severity(), db.message(), db.code().code()))
        }
        None => one_line(&e.to_string()),
    }
}

/// Commits checkpoints to PostgreSQL, one transaction per commit (tables
/// and guarantees in `docs/state-backends.md`).
///
/// After a connection error the connection is dropped and the next call
/// connects again, so a server that was away works again once it is back.
pub struct PostgresState {
    config: PostgresStateConfig,
    pg: Config,
    client: Option<Client>,
    namespace: Option<String>,
    data: String,
    checkpoints: String,
    /// Tests only: called with the session's backend pid after every
    /// statement of the next commit but `COMMIT`.
    #[cfg(test)]
    before_commit: Option<fn(i32)>,
}

impl std::fmt::Debug for PostgresState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresState")
            .field("config", &self.config)
            .field("connected", &self.client.is_some())
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// True for `[A-Za-z_][A-Za-z0-9_]*`, at most 48 characters.
fn valid_table(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 48
}

/// The most recent write of each key, per scope, in first-seen order.
type Merged<'a> = Vec<(&'a str, &'a [u8], Option<&'a [u8]>)>;

fn merge(writes: &[ScopeWrites]) -> Merged<'_> {
    let mut out: Merged<'_> = Vec::new();
    let mut at: HashMap<(&str, &[u8]), usize> = HashMap::new();
    for w in writes {
        let scope = w.scope.as_str();
        for r in w.records.iter() {
            let value = r.value.as_ref().map(|v| v.as_slice()).into_option();
            let key = r.key.as_slice();
            match at.get(&(scope, key)) {
                Some(&i) => out[i].2 = value,
                None => {
                    at.insert((scope, key), out.len());
                    out.push((scope, key, value));
                }
            }
        }
    }
    out
}

/// Copies a commit's rows into the staging table (binary COPY), then
/// updates its statistics.
fn stage(
    tx: &mut postgres::Transaction<'_>,
    rows: &Merged<'_>,
) -> std::result::Result<(), Failure> {
    let mut sink =
        tx.copy_in(&format!("COPY {STAGE} (scope, key, value) FROM STDIN (FORMAT binary)"))?;
    let mut enc = CopyEncoder::new();
    for (scope, key, value) in rows {
        enc.row(&[Some(scope.as_bytes()), Some(key), *value]);
        if enc.full() {
            sink.write_all(&enc.take())?;
        }
    }
    enc.finish();
    sink.write_all(&enc.take())?;
    sink.finish()?;
    tx.batch_execute(&format!("ANALYZE {STAGE}"))?;
    Ok(())
}

impl PostgresState {
    /// Applies the staged rows to namespace `ns`: deletes those without a
    /// value (when `deleted`: some are), upserts the others.
    fn apply_stage(
        &self,
        tx: &mut postgres::Transaction<'_>,
        ns: &str,
        deleted: bool,
    ) -> std::result::Result<(), Failure> {
        if deleted {
            tx.execute(
                &format!(
                    "DELETE FROM {data} d USING {STAGE} s \
                     WHERE s.value IS NULL AND d.namespace = $1 \
                     AND d.scope = s.scope AND d.key = s.key",
                    data = self.data
                ),
                &[&ns],
            )?;
        }
        tx.execute(
            &format!(
                "INSERT INTO {data} (namespace, scope, key, value) \
                 SELECT $1, scope, key, value FROM {STAGE} WHERE value IS NOT NULL \
                 ON CONFLICT (namespace, scope, key) DO UPDATE SET value = EXCLUDED.value",
                data = self.data
            ),
            &[&ns],
        )?;
        Ok(())
    }

    /// Writes the checkpoint number last (a kill before COMMIT leaves it
    /// unwritten), and only if it is above the last one committed: the row
    /// is locked and read as committed, so a newer owner's commit (a
    /// group's fencing) makes this one refuse and roll back.
    fn raise_checkpoint(
        &self,
        tx: &mut postgres::Transaction<'_>,
        ns: &str,
        checkpoint: u64,
        number: i64,
    ) -> std::result::Result<(), Failure> {
        let raised = tx.execute(
            &format!(
                "INSERT INTO {t} (namespace, checkpoint) VALUES ($1, $2) \
                 ON CONFLICT (namespace) DO UPDATE SET checkpoint = EXCLUDED.checkpoint \
                 WHERE {t}.checkpoint < EXCLUDED.checkpoint",
                t = self.checkpoints
            ),
            &[&ns, &number],
        )?;
        if raised == 0 {
            return Err(Failure::Refused(format!(
                "checkpoint {checkpoint} is not above the last committed one: refused, \
                 nothing written (a newer owner of this namespace committed)"
            )));
        }
        Ok(())
    }

    fn server(&self) -> String {
        let host = match self.pg.get_hosts().first() {
            Some(postgres::config::Host::Tcp(h)) => h.clone(),
            #[cfg(unix)]
            Some(postgres::config::Host::Unix(p)) => p.display().to_string(),
            None => "localhost".to_owned(),
        };
        let port = self.pg.get_ports().first().copied().unwrap_or(5432);
        format!("postgres at {host}:{port}")
    }

    /// Connects, sets the session up and creates the tables when missing.
    fn connect(&self) -> std::result::Result<Client, postgres::Error> {
        let mut client = self.pg.connect(NoTls)?;
        client.batch_execute(&format!(
            "SET standard_conforming_strings = on; SET statement_timeout = {};",
            self.config.timeout_ms
        ))?;
        let schema = format!(
            "CREATE TABLE IF NOT EXISTS {data} (
                 namespace TEXT NOT NULL,
                 scope TEXT NOT NULL,
                 key BYTEA NOT NULL,
                 value BYTEA NOT NULL,
                 PRIMARY KEY (namespace, scope, key));
             CREATE TABLE IF NOT EXISTS {checkpoints} (
                 namespace TEXT PRIMARY KEY,
                 checkpoint BIGINT NOT NULL);",
            data = self.data,
            checkpoints = self.checkpoints,
        );
        // Sessions creating the same tables at once (the partitions of a
        // group on one host open together) race in the catalog: a unique
        // violation, or "type already exists" for a table's row type, even
        // with IF NOT EXISTS. A transaction-scoped advisory lock makes them
        // take turns; the later ones find the tables.
        let mut tx = client.transaction()?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SET_UP_LOCK])?;
        tx.batch_execute(&schema)?;
        tx.commit()?;
        client.batch_execute(&format!(
            "CREATE TEMP TABLE IF NOT EXISTS {STAGE} (
                 scope TEXT NOT NULL,
                 key BYTEA NOT NULL,
                 value BYTEA) ON COMMIT DELETE ROWS;"
        ))?;
        Ok(client)
    }

    /// Runs `f` on the connection (connecting first when there is none); a
    /// lost connection is dropped, so the next call connects again.
    fn with_client<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut Client, &str, &Self) -> std::result::Result<T, Failure>,
    ) -> Result<T> {
        let Some(namespace) = self.namespace.clone() else {
            return Err("postgres state backend used before open".into());
        };
        if self.client.is_none() {
            let client = self.connect().map_err(|e| {
                format!("{}: {what}: cannot reconnect: {}", self.server(), describe(&e))
            })?;
            self.client = Some(client);
        }
        let mut client = self.client.take().expect("connected above");
        let result = f(&mut client, &namespace, self);
        let lost = client.is_closed();
        if !lost {
            self.client = Some(client);
        }
        result.map_err(|failure| {
            let message = match failure {
                Failure::Pg(e) => describe(&e),
                Failure::Io(e) => one_line(&e.to_string()),
                Failure::Refused(why) => why,
            };
            format!(
                "{}: {what} failed{}: {message}",
                self.server(),
                if lost { " (connection lost; the next call reconnects)" } else { "" }
            )
            .into()
        })
    }
}

/// Why a call failed.
enum Failure {
    Pg(postgres::Error),
    Io(std::io::Error),
    /// The commit's number is not above the last committed one.
    Refused(String),
}

impl From<postgres::Error> for Failure {
    fn from(e: postgres::Error) -> Self {
        Failure::Pg(e)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Io(e)
    }
}

impl StateBackend for PostgresState {
    const NAME: &'static str = "PostgresState";
    const DESCRIPTION: &'static str =
        "checkpoints in PostgreSQL: one transaction per commit, COPY in and out";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(PostgresStateConfig::KEYS);

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = PostgresStateConfig::parse(config)?;
        if !valid_table(&config.table) {
            return Err(format!(
                "table {:?} must be letters, digits and underscores (at most 48), \
                 not starting with a digit",
                config.table
            )
            .into());
        }
        if config.timeout_ms == 0 || config.connect_timeout_ms == 0 {
            return Err("timeout_ms and connect_timeout_ms must be positive".into());
        }
        let mut pg = Config::from_str(&config.url).map_err(|e| {
            format!(
                "url {:?} is not a valid postgres connection string: {}",
                config.url,
                one_line(&e.to_string())
            )
        })?;
        if pg.get_connect_timeout().is_none() {
            pg.connect_timeout(Duration::from_millis(config.connect_timeout_ms));
        }
        pg.keepalives(true);
        let data = format!("\"{}\"", config.table);
        let checkpoints = format!("\"{}_checkpoints\"", config.table);
        Ok(PostgresState {
            config,
            pg,
            client: None,
            namespace: None,
            data,
            checkpoints,
            #[cfg(test)]
            before_commit: None,
        })
    }

    fn open(&mut self, namespace: &str) -> Result<()> {
        if namespace.is_empty() || namespace.contains('\0') {
            return Err("the state namespace must not be empty or hold a NUL".into());
        }
        self.namespace = Some(namespace.to_owned());
        self.client = None;
        let client = self
            .connect()
            .map_err(|e| format!("cannot connect to {}: {}", self.server(), describe(&e)))?;
        self.client = Some(client);
        Ok(())
    }

    fn last_committed(&mut self) -> Result<Option<u64>> {
        self.with_client("reading the last checkpoint", |client, ns, this| {
            let row = client.query_opt(
                &format!("SELECT checkpoint FROM {} WHERE namespace = $1", this.checkpoints),
                &[&ns],
            )?;
            // Only commit writes the row, never a negative number; one
            // written by someone else reads as none.
            Ok(row.and_then(|r| u64::try_from(r.get::<_, i64>(0)).ok()))
        })
    }

    fn commit(&mut self, checkpoint: u64, writes: &[ScopeWrites]) -> Result<()> {
        let number = i64::try_from(checkpoint)
            .map_err(|_| format!("checkpoint {checkpoint} does not fit a BIGINT"))?;
        #[cfg(test)]
        let hook = self.before_commit.take();
        self.with_client(&format!("commit of checkpoint {checkpoint}"), |client, ns, this| {
            let mut tx = client.transaction()?;
            let rows = merge(writes);
            if !rows.is_empty() {
                stage(&mut tx, &rows)?;
                this.apply_stage(&mut tx, ns, rows.iter().any(|r| r.2.is_none()))?;
            }
            this.raise_checkpoint(&mut tx, ns, checkpoint, number)?;
            #[cfg(test)]
            if let Some(hook) = hook {
                let pid: i32 = tx.query_one("SELECT pg_backend_pid()", &[])?.get(0);
                hook(pid);
            }
            tx.commit()?;
            Ok(())
        })
    }

    fn load(&mut self, scope: &str) -> Result<Vec<StateRecord>> {
        if scope.contains('\0') {
            return Ok(Vec::new());
        }
        self.with_client(&format!("load of scope {scope:?}"), |client, ns, this| {
            let query = format!(
                "COPY (SELECT key, value FROM {} WHERE namespace = {} AND scope = {}) \
                 TO STDOUT (FORMAT binary)",
                this.data,
                literal(ns),
                literal(scope)
            );
            let reader = client.copy_out(&query)?;
            let mut reader = BufReader::with_capacity(1 << 20, reader);
            let mut out = Vec::new();
            decode_pairs(&mut reader, |key, value| {
                out.push(StateRecord {
                    key: RVec::from(key),
                    value: ROption::RSome(RVec::from(value)),
                });
            })?;
            Ok(out)
        })
    }

    fn scopes(&mut self) -> Result<Vec<String>> {
        self.with_client("listing the scopes", |client, ns, this| {
            let rows = client.query(
                &format!(
                    "SELECT DISTINCT scope FROM {} WHERE namespace = $1 ORDER BY scope",
                    this.data
                ),
                &[&ns],
            )?;
            Ok(rows.into_iter().map(|r| r.get(0)).collect())
        })
    }

    fn clear(&mut self) -> Result<()> {
        self.with_client("clearing the namespace", |client, ns, this| {
            let mut tx = client.transaction()?;
            tx.execute(&format!("DELETE FROM {} WHERE namespace = $1", this.data), &[&ns])?;
            tx.execute(&format!("DELETE FROM {} WHERE namespace = $1", this.checkpoints), &[&ns])?;
            tx.commit()?;
            Ok(())
        })
    }

    fn close(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = client.close();
        }
    }
}

#[cfg(test)]
mod tests;
