//! [`PostgresSink`]: rows into a PostgreSQL table, each row of a committed
//! checkpoint exactly once.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::str::FromStr;
use std::time::{Duration, Instant};

use postgres::{Client, Config, NoTls};
use squall_plugin_api::metrics;
use squall_plugin_api::prelude::*;

use crate::buffer::{Buffer, Due};
use crate::render;

/// The advisory lock key (`pg_advisory_xact_lock`) under which sink
/// tasks create their tables one at a time: "squall-s" in ASCII.
const SET_UP_LOCK: i64 = 0x7371_7561_6c6c_2d73;

squall_plugin_api::declare_config! {
    /// The sink's `config` table.
    #[derive(Debug, Clone, PartialEq)]
    struct SinkConfig {
        table: String = required(String, "the table: NAME or SCHEMA.NAME"),
        columns: Vec<String> = required(
            Array,
            "the tuple fields to write, each into the column of the same name"
        ),
        url: String = default(
            String,
            "\"host=127.0.0.1 port=5432 user=postgres dbname=postgres\"",
            "libpq key=value settings or a postgres:// url (no TLS)"
        ),
        create_table: bool = default(
            Bool,
            "false",
            "create the table when missing (column types from column_types, else text)"
        ),
        #[serde(default)]
        column_types: BTreeMap<String, String> = maybe(
            Table,
            "with create_table: a type per column, e.g. { count = \"bigint\" }"
        ),
        name: Option<String> = maybe(
            String,
            "the sink's name in the progress table (default TOPOLOGY/COMPONENT)"
        ),
        progress_table: String = default(
            String,
            "\"squall_sink_progress\"",
            "the table that records what each sink generation wrote"
        ),
        connect_timeout_ms: u64 = default(
            Integer,
            "5000",
            "how long one connection attempt may take"
        ),
        timeout_ms: u64 = default(Integer, "60000", "statement_timeout of the session"),
        checkpoint_wait_ms: u64 = default(
            Integer,
            "60000",
            "fail tuples when rows waited this long for a checkpoint (no [state])"
        ),
    }
}

/// True for an SQL identifier the sink quotes as is: `[A-Za-z_][A-Za-z0-9_]*`,
/// at most 63 bytes (PostgreSQL's limit).
fn identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 63
}

/// `name` or `schema.name`, each part an [`identifier`], quoted.
fn table_name(what: &str, name: &str) -> Result<String> {
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() > 2 || !parts.iter().all(|p| identifier(p)) {
        return Err(format!(
            "{what} {name:?} must be NAME or SCHEMA.NAME, each letters, digits and \
             underscores (at most 63), not starting with a digit"
        )
        .into());
    }
    Ok(parts.iter().map(|p| format!("\"{p}\"")).collect::<Vec<_>>().join("."))
}

/// A column type for `create_table`: letters, digits, spaces, `_`, `(`,
/// `)`, `,` and `[]` (`bigint`, `numeric(10, 2)`, `text[]`).
fn column_type(t: &str) -> bool {
    !t.trim().is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || " _(),[]".contains(c))
}

/// A message on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A postgres error on one line, with the server's message when there is one.
/// Why the sink has no connection: connecting, or setting up its tables.
#[derive(Debug)]
struct NotConnected {
    /// `postgres at HOST:PORT`.
    server: String,
    /// "connect" or "set up".
    step: &'static str,
    cause: postgres::Error,
}

impl std::fmt::Display for NotConnected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (server, cause) = (&self.server, describe(&self.cause));
        match self.step {
            "connect" => write!(f, "cannot connect to {server}: {cause}"),
            _ => write!(f, "{server}: setting up the tables: {cause}"),
        }
    }
}

impl std::error::Error for NotConnected {}

fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            one_line(&format!("{}: {} ({})", db.severity(), db.message(), db.code().code()))
        }
        None => one_line(&e.to_string()),
    }
}

/// A generation no other sink instance draws (see `buffer.rs`): 64 random
/// bits from the kernel, or from the clock and the process when
/// `/dev/urandom` cannot be read.
fn draw_generation() -> i64 {
    let mut bytes = [0_u8; 8];
    let from_kernel =
        std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).is_ok();
    if !from_kernel {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let seed = nanos ^ (u64::from(std::process::id()) << 32) ^ (&bytes as *const _ as u64);
        bytes = squall_plugin_api::rng::SplitMix64::new(seed).next_u64().to_le_bytes();
    }
    i64::from_le_bytes(bytes)
}

/// Writes each input tuple as one row of a PostgreSQL table, so that every
/// row of a committed checkpoint is in the table exactly once, whatever
/// crashes and restarts happen (docs/state.md, "Exactly-once output to
/// PostgreSQL").
///
/// The rows executed between two checkpoint barriers are staged in a
/// durable store (`staged`) and so committed with the checkpoint; once it
/// committed, they are copied into `table` in one transaction that also
/// raises this generation's row in `progress_table`, and only if that row
/// says they were not written before. Rows reach the table one checkpoint
/// interval after their tuple; inputs are acked as usual.
///
/// It needs the topology's `[state]`: without checkpoints it never writes,
/// and once `checkpoint_wait_ms` passed with rows staged and no checkpoint
/// it fails every tuple, saying so.
///
/// Config keys: `table`, `columns` (tuple fields, each written to the
/// column of the same name), `url`, `create_table`, `column_types`,
/// `name`, `progress_table`, `connect_timeout_ms`, `timeout_ms`,
/// `checkpoint_wait_ms`. See docs/connectors.md.
pub struct PostgresSink {
    config: SinkConfig,
    pg: Config,
    client: Option<Client>,
    buffer: Buffer,
    /// The sink's name in the progress table.
    sink: String,
    /// `COPY table (columns) FROM STDIN`.
    copy_sql: String,
    /// Raises a generation's row; one row affected: the batch is new.
    mark_sql: String,
    progress: String,
    table: String,
    /// The field names of the last tuple's stream and where the columns are
    /// in them (streams of several inputs alternate rarely).
    fields_seen: (usize, usize),
    indices: Vec<usize>,
    last_barrier: Instant,
    since_clock: u32,
    no_checkpoint: bool,
    metrics: Option<Metrics>,
}

struct Metrics {
    written: metrics::Counter,
    skipped: metrics::Counter,
    failures: metrics::Counter,
    staged: metrics::Gauge,
}

impl std::fmt::Debug for PostgresSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSink")
            .field("table", &self.config.table)
            .field("sink", &self.sink)
            .field("buffer", &self.buffer)
            .field("connected", &self.client.is_some())
            .finish_non_exhaustive()
    }
}

/// Tuples between two reads of the clock for `checkpoint_wait_ms`.
const CLOCK_EVERY: u32 = 1024;

impl PostgresSink {
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

    /// Connects, sets the session up, creates the tables when missing and
    /// checks that `table` has the columns.
    fn connect(&self) -> std::result::Result<Client, NotConnected> {
        let mut client = self.pg.connect(NoTls).map_err(|cause| NotConnected {
            server: self.server(),
            step: "connect",
            cause,
        })?;
        self.set_up(&mut client).map_err(|cause| NotConnected {
            server: self.server(),
            step: "set up",
            cause,
        })?;
        Ok(client)
    }

    fn set_up(&self, client: &mut Client) -> std::result::Result<(), postgres::Error> {
        client.batch_execute(&format!("SET statement_timeout = {};", self.config.timeout_ms))?;
        let mut schema = format!(
            "CREATE TABLE IF NOT EXISTS {} (
                 sink TEXT NOT NULL,
                 generation BIGINT NOT NULL,
                 task INTEGER NOT NULL,
                 checkpoint BIGINT NOT NULL,
                 written_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                 PRIMARY KEY (sink, generation));",
            self.progress
        );
        if self.config.create_table {
            let columns: Vec<String> = self
                .config
                .columns
                .iter()
                .map(|c| {
                    let t = self.config.column_types.get(c).map_or("text", String::as_str);
                    format!("\"{c}\" {t}")
                })
                .collect();
            schema.push_str(&format!(
                "CREATE TABLE IF NOT EXISTS {} ({});",
                self.table,
                columns.join(", ")
            ));
        }
        // Tasks creating the same tables at once race in the catalog (a
        // unique violation, or "type already exists" for the table's row
        // type, even with IF NOT EXISTS): one transaction-scoped advisory
        // lock makes them take turns, and the later ones find the tables.
        let mut tx = client.transaction()?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SET_UP_LOCK])?;
        tx.batch_execute(&schema)?;
        tx.commit()?;
        let columns: Vec<String> = self.config.columns.iter().map(|c| format!("\"{c}\"")).collect();
        client.batch_execute(&format!("SELECT {} FROM {} LIMIT 0", columns.join(", "), self.table))
    }

    /// Writes every staged batch that checkpoint `committed` covers, in one
    /// transaction; on failure keeps them for the next commit.
    fn flush(&mut self, committed: u64) {
        let due = self.buffer.due(committed);
        if due.is_empty() {
            return;
        }
        let client = match self.client.take() {
            Some(c) => Ok(c),
            None => self.connect(),
        };
        let mut client = match client {
            Ok(c) => c,
            Err(e) => {
                self.failed(committed, &e.to_string());
                return;
            }
        };
        let result = self.write_due(&mut client, &due);
        let lost = client.is_closed();
        if !lost {
            self.client = Some(client);
        }
        match result {
            Ok((written, skipped)) => self.written(committed, written, skipped),
            Err(failure) => {
                let message = match failure {
                    Failure::Pg(e) => describe(&e),
                    Failure::Io(e) => one_line(&e.to_string()),
                    Failure::Other(s) => s,
                };
                let lost = if lost { " (connection lost; the next commit reconnects)" } else { "" };
                self.failed(committed, &format!("{message}{lost}"));
            }
        }
    }

    /// Writes the `due` batches in one transaction, each unless the
    /// progress table says it was written before (a restart). Returns the
    /// rows written and the rows skipped.
    fn write_due(
        &self,
        client: &mut Client,
        due: &[Due<'_>],
    ) -> std::result::Result<(u64, u64), Failure> {
        let mut tx = client.transaction()?;
        let (mut written, mut skipped) = (0, 0);
        for d in due {
            let checkpoint = i64::try_from(d.batch.checkpoint)
                .map_err(|_| Failure::Other("a checkpoint beyond a BIGINT".into()))?;
            let task = i32::try_from(d.task).unwrap_or(i32::MAX);
            let fresh =
                tx.execute(&self.mark_sql, &[&self.sink, &d.generation, &task, &checkpoint])?;
            if fresh == 1 {
                let mut w = tx.copy_in(&self.copy_sql)?;
                w.write_all(d.batch.text.as_bytes()).map_err(Failure::Io)?;
                w.finish()?;
                written += d.batch.rows;
            } else {
                skipped += d.batch.rows;
            }
        }
        tx.commit()?;
        Ok((written, skipped))
    }

    /// The batches checkpoint `committed` covers are written: they leave
    /// the buffer, and the counts go to the metrics.
    fn written(&mut self, committed: u64, written: u64, skipped: u64) {
        self.buffer.written(committed);
        if let Some(m) = &self.metrics {
            m.written.add(written);
            m.skipped.add(skipped);
            m.staged.set(i64::try_from(self.buffer.sealed_rows()).unwrap_or(i64::MAX));
        }
        if skipped > 0 {
            squall_plugin_api::info!(
                "{}: {skipped} staged rows were already in {} (written before a \
                 restart); not written again",
                self.sink,
                self.config.table
            );
        }
    }

    fn failed(&mut self, committed: u64, why: &str) {
        if let Some(m) = &self.metrics {
            m.failures.inc();
        }
        squall_plugin_api::warn!(
            "{}: writing the rows of checkpoint {committed} into {} failed ({}): {why}; \
             {} rows stay staged and are written after the next commit",
            self.sink,
            self.config.table,
            self.server(),
            self.buffer.sealed_rows()
        );
    }

    /// Where each column is in a tuple with these field names.
    fn locate(&mut self, fields: &[abi_stable::std_types::RString]) -> Result<()> {
        self.indices.clear();
        for column in &self.config.columns {
            let Some(i) = fields.iter().position(|f| f.as_str() == column) else {
                let names: Vec<&str> = fields.iter().map(|f| f.as_str()).collect();
                return Err(format!(
                    "the tuple has no field {column:?} (its fields: {})",
                    names.join(", ")
                )
                .into());
            };
            self.indices.push(i);
        }
        self.fields_seen = (fields.as_ptr() as usize, fields.len());
        Ok(())
    }

    /// Fails tuples once rows have waited `checkpoint_wait_ms` for a
    /// checkpoint that never came: the topology has no `[state]`.
    fn check_checkpoints(&mut self) -> Result<()> {
        if self.no_checkpoint {
            return Err(self.no_checkpoint_error().into());
        }
        self.since_clock += 1;
        if self.since_clock < CLOCK_EVERY {
            return Ok(());
        }
        self.since_clock = 0;
        let wait = Duration::from_millis(self.config.checkpoint_wait_ms);
        if self.buffer.open_rows() > 0 && self.last_barrier.elapsed() >= wait {
            self.no_checkpoint = true;
            let e = self.no_checkpoint_error();
            squall_plugin_api::error!("{e}");
            return Err(e.into());
        }
        Ok(())
    }

    fn no_checkpoint_error(&self) -> String {
        format!(
            "{}: no checkpoint reached the sink in {} ms: it writes rows only when a checkpoint \
             commits, so the topology needs a [state] table (docs/state.md); failing tuples",
            self.sink, self.config.checkpoint_wait_ms
        )
    }
}

impl SinkConfig {
    /// Checks the columns, their types, the name and the timeouts.
    fn check(&self) -> Result<()> {
        if self.columns.is_empty() {
            return Err("columns must name at least one tuple field".into());
        }
        for (i, c) in self.columns.iter().enumerate() {
            if !identifier(c) {
                return Err(format!(
                    "column {c:?} must be letters, digits and underscores (at most 63), not \
                     starting with a digit"
                )
                .into());
            }
            if self.columns[..i].contains(c) {
                return Err(format!("column {c:?} is listed twice").into());
            }
        }
        if !self.column_types.is_empty() && !self.create_table {
            return Err("column_types applies only with create_table = true".into());
        }
        for (c, t) in &self.column_types {
            if !self.columns.contains(c) {
                return Err(format!("column_types names {c:?}, which is not in columns").into());
            }
            if !column_type(t) {
                return Err(format!("column_types.{c} = {t:?} is not a type name").into());
            }
        }
        if self.name.as_deref().is_some_and(str::is_empty) {
            return Err("name must not be empty".into());
        }
        if self.timeout_ms == 0 || self.connect_timeout_ms == 0 || self.checkpoint_wait_ms == 0 {
            return Err(
                "timeout_ms, connect_timeout_ms and checkpoint_wait_ms must be positive".into()
            );
        }
        Ok(())
    }

    /// The connection settings from `url`, with `connect_timeout_ms` unless
    /// the URL sets one, and keepalives.
    fn pg_config(&self) -> Result<Config> {
        let mut pg = Config::from_str(&self.url).map_err(|e| {
            format!(
                "url {:?} is not a valid postgres connection string: {}",
                self.url,
                one_line(&e.to_string())
            )
        })?;
        if pg.get_connect_timeout().is_none() {
            pg.connect_timeout(Duration::from_millis(self.connect_timeout_ms));
        }
        pg.keepalives(true);
        Ok(pg)
    }
}

/// Why a write failed.
enum Failure {
    Pg(postgres::Error),
    Io(std::io::Error),
    Other(String),
}

impl From<postgres::Error> for Failure {
    fn from(e: postgres::Error) -> Self {
        Failure::Pg(e)
    }
}

impl BasicBolt for PostgresSink {
    const NAME: &'static str = "PostgresSink";
    const DESCRIPTION: &'static str =
        "writes rows into a PostgreSQL table once their checkpoint commits: each row once";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(SinkConfig::KEYS);
    const STORES: Option<&'static [StoreSpec]> = Some(&[StoreSpec::other(crate::buffer::STORE)]);

    fn check_inputs(config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> Result<()> {
        let config = SinkConfig::parse(config)?;
        for input in inputs {
            for column in &config.columns {
                if !input.fields.iter().any(|f| f.as_str() == column) {
                    let names: Vec<&str> = input.fields.iter().map(|f| f.as_str()).collect();
                    return Err(format!(
                        "column {column:?} is not a field of the input from \"{}\" (stream \
                         \"{}\": {})",
                        input.component,
                        input.stream,
                        names.join(", ")
                    )
                    .into());
                }
            }
        }
        Ok(())
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = SinkConfig::parse(config)?;
        let table = table_name("table", &config.table)?;
        let progress = table_name("progress_table", &config.progress_table)?;
        config.check()?;
        let pg = config.pg_config()?;
        let columns: Vec<String> = config.columns.iter().map(|c| format!("\"{c}\"")).collect();
        let copy_sql = format!("COPY {table} ({}) FROM STDIN", columns.join(", "));
        let mark_sql = format!(
            "INSERT INTO {progress} (sink, generation, task, checkpoint) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (sink, generation) DO UPDATE SET checkpoint = EXCLUDED.checkpoint, \
             task = EXCLUDED.task, written_at = now() \
             WHERE {progress}.checkpoint < EXCLUDED.checkpoint"
        );
        Ok(Self {
            config,
            pg,
            client: None,
            buffer: Buffer::new(draw_generation(), 0),
            sink: String::new(),
            copy_sql,
            mark_sql,
            progress,
            table,
            fields_seen: (0, 0),
            indices: Vec::new(),
            last_barrier: Instant::now(),
            since_clock: 0,
            no_checkpoint: false,
            metrics: None,
        })
    }

    fn prepare(&mut self, context: &TaskContext) -> Result<()> {
        self.sink = match &self.config.name {
            Some(name) => name.clone(),
            None => format!("{}/{}", context.topology, context.component),
        };
        self.buffer.set_task(context.task_index);
        // The store is keyed by generation, and the host refuses a key that
        // another task owns (the one a restore would give it to): draw
        // until this task owns its generation (about `parallelism` draws).
        let n = context.parallelism as usize;
        let owned = |g: i64| {
            squall_plugin_api::state::key_index(std::iter::once(&Value::I64(g)), n)
                == context.task_index as usize
        };
        if !owned(self.buffer.generation()) {
            let mut generation = draw_generation();
            while !owned(generation) {
                generation = draw_generation();
            }
            self.buffer.set_generation(generation);
        }
        self.client = Some(self.connect()?);
        self.last_barrier = Instant::now();
        self.metrics = Some(Metrics {
            written: metrics::counter("rows_written", "Rows written into the table."),
            skipped: metrics::counter(
                "rows_skipped",
                "Staged rows not written because the progress table says they were.",
            ),
            failures: metrics::counter("write_failures", "Transactions that failed."),
            staged: metrics::gauge("rows_staged", "Rows committed but not yet written."),
        });
        squall_plugin_api::debug!(
            "{}: task {} stages its rows under generation {}",
            self.sink,
            context.task_index,
            self.buffer.generation()
        );
        let restored = self.buffer.sealed_rows();
        if restored > 0 {
            squall_plugin_api::info!(
                "{}: {restored} rows restored from the checkpoint; written after the first \
                 commit unless {} says they were",
                self.sink,
                self.config.progress_table
            );
        }
        Ok(())
    }

    fn execute(&mut self, input: &Tuple<'_>, _collector: &mut BasicCollector<'_>) -> Result<()> {
        if input.is_tick() {
            return Ok(());
        }
        self.check_checkpoints()?;
        let fields = input.fields();
        if (fields.as_ptr() as usize, fields.len()) != self.fields_seen || self.indices.is_empty() {
            self.locate(fields)?;
        }
        let values = input.values();
        let indices = &self.indices;
        self.buffer
            .push(|out| {
                for (n, &i) in indices.iter().enumerate() {
                    if n > 0 {
                        out.push('\t');
                    }
                    let value = values.get(i).ok_or(render::Unwritable::Short)?;
                    render::field(out, value)?;
                }
                Ok(())
            })
            .map_err(|e| format!("{}: {e}", self.sink).into())
    }

    fn barrier(&mut self, checkpoint: u64) {
        self.buffer.seal(checkpoint);
        self.last_barrier = Instant::now();
        self.no_checkpoint = false;
    }

    fn committed(&mut self, checkpoint: u64) {
        self.flush(checkpoint);
    }

    fn stores(&mut self) -> Stores<'_> {
        Stores::none().with(&mut self.buffer)
    }

    fn cleanup(&mut self) {
        let staged = self.buffer.sealed_rows() + self.buffer.open_rows();
        if staged > 0 {
            squall_plugin_api::info!(
                "{}: {staged} rows not yet written at shutdown; the next run writes those a \
                 committed checkpoint holds",
                self.sink
            );
        }
        if let Some(client) = self.client.take() {
            let _ = client.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink(config: &str) -> Result<PostgresSink> {
        PostgresSink::new(&ComponentConfig::new(config))
    }

    #[test]
    fn bad_config_is_refused_with_the_reason() {
        let e = |c: &str| sink(c).unwrap_err().to_string();
        assert!(e("columns = [\"a\"]").contains("table"), "{}", e("columns = [\"a\"]"));
        assert!(e("table = \"t;drop\"\ncolumns = [\"a\"]").contains("SCHEMA.NAME"));
        assert!(e("table = \"t\"\ncolumns = []").contains("at least one"));
        assert!(e("table = \"t\"\ncolumns = [\"a b\"]").contains("letters"));
        assert!(e("table = \"t\"\ncolumns = [\"a\", \"a\"]").contains("twice"));
        assert!(e("table = \"t\"\ncolumns = [\"a\"]\ncolumn_types = { a = \"int\" }")
            .contains("only with create_table"));
        assert!(e(
            "table = \"t\"\ncolumns = [\"a\"]\ncreate_table = true\ncolumn_types = { a = \"int; x\" }"
        )
        .contains("not a type"));
        assert!(e("table = \"t\"\ncolumns = [\"a\"]\nurl = \"host=x port=notaport\"")
            .contains("not a valid postgres"));
        assert!(sink("table = \"public.t\"\ncolumns = [\"a\", \"b\"]").is_ok());
    }

    #[test]
    fn generations_differ() {
        assert_ne!(draw_generation(), draw_generation());
    }
}

#[cfg(test)]
mod pg_tests;
