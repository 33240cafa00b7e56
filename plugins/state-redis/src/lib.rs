//! A squall state backend on Redis: [`RedisState`].
//!
//! Layout of the state of namespace `NS` under `key_prefix` `P` (the braces
//! are a Redis Cluster hash tag, so all of a namespace's keys live in one
//! slot and a transaction may touch them all):
//!
//! - `P:{NS}:checkpoint`: a string, the last committed checkpoint number;
//! - `P:{NS}:scopes`: a set, the names of the scopes ever committed;
//! - `P:{NS}:data:SCOPE`: a hash per scope, record key → record value.
//!
//! A commit is one `MULTI`/`EXEC` holding every `HSET`, `HDEL`, `SADD` and
//! the checkpoint's `SET`, after a `WATCH` of the keys it writes and a check
//! that none of them holds another type (the one error Redis would report
//! inside `EXEC` after applying the other commands). See
//! `docs/state-backends.md`.
//!
//! ```toml
//! [plugins]
//! state_redis = "target/release/libsquall_state_redis.so"
//!
//! [state]
//! backend = "state_redis::RedisState"
//! config = { url = "redis://127.0.0.1:6379", key_prefix = "squall:state" }
//! ```

#![warn(missing_docs)]

mod backend;

pub use backend::RedisState;

squall_plugin_api::export_plugin! {
    state_backends: [RedisState],
}
