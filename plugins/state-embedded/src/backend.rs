//! [`EmbeddedState`]: the backend itself.

use std::path::{Path, PathBuf};

use abi_stable::std_types::{ROption, RVec};
use redb::{
    Database, DatabaseError, ReadableTable, ReadableTableMetadata, TableDefinition, TableError,
    TableHandle,
};
use squall_plugin_api::abi::{ScopeWrites, StateRecord};
use squall_plugin_api::prelude::*;

squall_plugin_api::declare_config! {
    /// The backend's `[state.config]` table.
    #[derive(Debug, Clone, PartialEq)]
    struct EmbeddedStateConfig {
        path: String = required(
            String,
            "an absolute folder; each namespace is a file NAMESPACE.redb in it (created as \
             needed). \"${SQUALL_TOPOLOGY_DIR}/state\" is a folder beside the topology file"
        ),
        cache_mib: u64 = default(Integer, "32", "the store's page cache, in MiB (1 to 65536)"),
    }
}

/// The table holding the last committed checkpoint (key [`CHECKPOINT`]).
const META: TableDefinition<'static, &str, u64> = TableDefinition::new("squall:meta");

/// The key of the checkpoint number in [`META`].
const CHECKPOINT: &str = "checkpoint";

/// Every scope's table name starts with this.
const SCOPE_PREFIX: &str = "s:";

/// A scope's table (its name is [`SCOPE_PREFIX`] and the scope).
fn scope_table(name: &str) -> TableDefinition<'_, &'static [u8], &'static [u8]> {
    TableDefinition::new(name)
}

/// A message on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The file name of `namespace`'s store: letters, digits, `-`, `_` and
/// `.` as they are, every other byte as `%XX`, so that two namespaces never
/// share a file and none escapes the folder.
fn file_name(namespace: &str) -> String {
    let mut out = String::with_capacity(namespace.len() + 5);
    for b in namespace.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out.push_str(".redb");
    out
}

/// Keeps checkpoints in a local file, one per namespace, with no server to
/// run: one redb write transaction per commit, fsynced before `commit`
/// returns (layout and guarantees in `docs/state-backends.md`).
///
/// The file stays open, and locked, from `open` to `close`: a second
/// process on the same file is refused at its `open`.
pub struct EmbeddedState {
    config: EmbeddedStateConfig,
    /// The folder of the stores (`path`, absolute).
    dir: PathBuf,
    /// The open store and its file, after `open`.
    store: Option<(Database, PathBuf)>,
    /// Tests only: fail the next commit after writing this many records,
    /// inside its transaction.
    #[cfg(test)]
    fail_after: Option<usize>,
}

impl std::fmt::Debug for EmbeddedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedState")
            .field("config", &self.config)
            .field("file", &self.store.as_ref().map(|(_, file)| file))
            .finish_non_exhaustive()
    }
}

/// Why a call failed, before the file's name is added.
type Failure = String;

fn fail(e: impl std::fmt::Display) -> Failure {
    one_line(&e.to_string())
}

/// Makes the directory entries of `file` durable: fsyncs the folder that
/// holds it (a new file is not reachable after a power loss until its
/// folder is synced), and `created`, the folders made for it, upwards.
fn sync_dirs(file: &Path, created: &[PathBuf]) -> std::io::Result<()> {
    let mut dirs: Vec<&Path> = file.parent().into_iter().collect();
    dirs.extend(created.iter().filter_map(|d| d.parent()));
    for dir in dirs {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Creates `dir` and the folders above it that are missing; returns those
/// it created, deepest first.
fn create_dirs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(d) = at {
        if d.exists() {
            break;
        }
        missing.push(d.to_path_buf());
        at = d.parent();
    }
    std::fs::create_dir_all(dir)?;
    Ok(missing)
}

impl EmbeddedState {
    /// The open store, or an error naming the call.
    fn db(&self) -> std::result::Result<&Database, Failure> {
        self.store
            .as_ref()
            .map(|(db, _)| db)
            .ok_or_else(|| "the embedded state backend was used before open".to_owned())
    }

    /// Runs `f` on the open store; an error names the file and `what`.
    fn with_db<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut Self) -> std::result::Result<T, Failure>,
    ) -> Result<T> {
        f(self).map_err(|cause| {
            let file = self.store.as_ref().map_or(self.dir.as_path(), |(_, file)| file.as_path());
            format!("embedded state at {}: {what} failed: {cause}", file.display()).into()
        })
    }
}

/// Writes one commit's records into its transaction, in order. `fail_after`
/// (tests only; `None` otherwise) fails it after that many records.
fn write_all(
    tx: &redb::WriteTransaction,
    writes: &[ScopeWrites],
    mut fail_after: Option<usize>,
) -> std::result::Result<(), Failure> {
    for w in writes {
        let name = format!("{SCOPE_PREFIX}{}", w.scope);
        let empty = {
            let mut table = tx.open_table(scope_table(&name)).map_err(fail)?;
            for record in w.records.iter() {
                if let Some(left) = fail_after.as_mut() {
                    if *left == 0 {
                        return Err("injected failure (tests)".to_owned());
                    }
                    *left -= 1;
                }
                match &record.value {
                    ROption::RSome(value) => {
                        table.insert(record.key.as_slice(), value.as_slice()).map_err(fail)?;
                    }
                    ROption::RNone => {
                        table.remove(record.key.as_slice()).map_err(fail)?;
                    }
                }
            }
            table.is_empty().map_err(fail)?
        };
        // A scope whose last record is deleted holds nothing: its table
        // goes, so `scopes` does not list it.
        if empty {
            tx.delete_table(scope_table(&name)).map_err(fail)?;
        }
    }
    Ok(())
}

impl StateBackend for EmbeddedState {
    const NAME: &'static str = "EmbeddedState";
    const DESCRIPTION: &'static str =
        "checkpoints in a local file (redb), one fsynced transaction per commit; no server";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(EmbeddedStateConfig::KEYS);

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = EmbeddedStateConfig::parse(config)?;
        if config.path.is_empty() {
            return Err("path must not be empty".into());
        }
        let dir = PathBuf::from(&config.path);
        if !dir.is_absolute() {
            return Err(format!(
                "path {:?} is relative; write an absolute folder, or \
                 \"${{SQUALL_TOPOLOGY_DIR}}/{}\" for one beside the topology file",
                config.path, config.path
            )
            .into());
        }
        if !(1..=65_536).contains(&config.cache_mib) {
            return Err(
                format!("cache_mib must be between 1 and 65536, got {}", config.cache_mib).into()
            );
        }
        Ok(EmbeddedState {
            config,
            dir,
            store: None,
            #[cfg(test)]
            fail_after: None,
        })
    }

    fn open(&mut self, namespace: &str) -> Result<()> {
        if namespace.is_empty() {
            return Err("the state namespace must not be empty".into());
        }
        self.store = None;
        let file = self.dir.join(file_name(namespace));
        let at = |cause: String| format!("embedded state at {}: {cause}", file.display());
        let created = create_dirs(&self.dir).map_err(|e| {
            format!("embedded state: cannot create folder {}: {e}", self.dir.display())
        })?;
        let existed = file.exists();
        let cache = usize::try_from(self.config.cache_mib << 20).unwrap_or(usize::MAX);
        let db = redb::Builder::new().set_cache_size(cache).create(&file).map_err(|e| match e {
            DatabaseError::DatabaseAlreadyOpen => {
                at("the store is in use by another process (it is locked): stop it, or give \
                 this one another namespace or path"
                    .to_owned())
            }
            DatabaseError::Storage(redb::StorageError::Io(io)) => at(format!("cannot open: {io}")),
            other => at(format!("cannot open as a redb store: {}", fail(other))),
        })?;
        if !existed {
            sync_dirs(&file, &created).map_err(|e| at(format!("cannot sync its folder: {e}")))?;
        }
        self.store = Some((db, file));
        Ok(())
    }

    fn last_committed(&mut self) -> Result<Option<u64>> {
        self.with_db("reading the last checkpoint", |me| {
            let tx = me.db()?.begin_read().map_err(fail)?;
            let meta = match tx.open_table(META) {
                Ok(meta) => meta,
                Err(TableError::TableDoesNotExist(_)) => return Ok(None),
                Err(e) => return Err(fail(e)),
            };
            let last = meta.get(CHECKPOINT).map_err(fail)?.map(|v| v.value());
            Ok(last)
        })
    }

    fn commit(&mut self, checkpoint: u64, writes: &[ScopeWrites]) -> Result<()> {
        self.with_db(&format!("commit of checkpoint {checkpoint}"), |me| {
            // Durability::Immediate (redb's default): `commit` returns once
            // the file is fsynced. Dropping the transaction on any error
            // below aborts it: nothing of it is ever visible.
            let tx = me.db()?.begin_write().map_err(fail)?;
            {
                let mut meta = tx.open_table(META).map_err(fail)?;
                let last = meta.get(CHECKPOINT).map_err(fail)?.map(|v| v.value());
                if let Some(last) = last.filter(|&last| last >= checkpoint) {
                    return Err(format!(
                        "checkpoint {checkpoint} is not above the last committed, {last}: \
                         refused, nothing written (a newer owner of this namespace committed)"
                    ));
                }
                meta.insert(CHECKPOINT, checkpoint).map_err(fail)?;
            }
            #[cfg(test)]
            let fail_after = me.fail_after.take();
            #[cfg(not(test))]
            let fail_after = None;
            write_all(&tx, writes, fail_after)?;
            tx.commit().map_err(fail)
        })
    }

    fn load(&mut self, scope: &str) -> Result<Vec<StateRecord>> {
        self.with_db(&format!("load of scope {scope:?}"), |me| {
            let tx = me.db()?.begin_read().map_err(fail)?;
            let name = format!("{SCOPE_PREFIX}{scope}");
            let table = match tx.open_table(scope_table(&name)) {
                Ok(table) => table,
                Err(TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
                Err(e) => return Err(fail(e)),
            };
            let mut out =
                Vec::with_capacity(usize::try_from(table.len().map_err(fail)?).unwrap_or(0));
            for entry in table.iter().map_err(fail)? {
                let (key, value) = entry.map_err(fail)?;
                out.push(StateRecord {
                    key: RVec::from(key.value()),
                    value: ROption::RSome(RVec::from(value.value())),
                });
            }
            Ok(out)
        })
    }

    fn scopes(&mut self) -> Result<Vec<String>> {
        self.with_db("listing the scopes", |me| {
            let tx = me.db()?.begin_read().map_err(fail)?;
            let mut names: Vec<String> = tx
                .list_tables()
                .map_err(fail)?
                .filter_map(|t| t.name().strip_prefix(SCOPE_PREFIX).map(str::to_owned))
                .collect();
            names.sort();
            Ok(names)
        })
    }

    fn clear(&mut self) -> Result<()> {
        self.with_db("clearing the namespace", |me| {
            let tx = me.db()?.begin_write().map_err(fail)?;
            let names: Vec<String> =
                tx.list_tables().map_err(fail)?.map(|t| t.name().to_owned()).collect();
            for name in &names {
                if name.starts_with(SCOPE_PREFIX) {
                    tx.delete_table(scope_table(name)).map_err(fail)?;
                }
            }
            tx.delete_table(META).map_err(fail)?;
            tx.commit().map_err(fail)
        })
    }

    fn close(&mut self) {
        self.store = None;
    }
}

#[cfg(test)]
mod tests;
