//! A squall state backend on PostgreSQL: [`PostgresState`].
//!
//! Two tables (created when missing): `TABLE (namespace, scope, key, value)`
//! with the primary key `(namespace, scope, key)`, and
//! `TABLE_checkpoints (namespace, checkpoint)`. A commit is one
//! transaction: the writes are copied (`COPY ... FROM STDIN BINARY`) into a
//! temporary staging table, then merged with one `DELETE ... USING` and one
//! `INSERT ... ON CONFLICT DO UPDATE`, and the checkpoint row is upserted
//! before `COMMIT`. A load is one `COPY (SELECT ...) TO STDOUT BINARY`.
//! See `docs/state-backends.md`.
//!
//! ```toml
//! [plugins]
//! state_pg = "target/release/libsquall_state_postgres.so"
//!
//! [state]
//! backend = "state_pg::PostgresState"
//! config = { url = "host=127.0.0.1 port=5432 user=postgres dbname=postgres" }
//! ```

#![warn(missing_docs)]

mod backend;
mod copy;

pub use backend::PostgresState;

squall_plugin_api::export_plugin! {
    state_backends: [PostgresState],
}
