//! End-to-end tests live in `main.rs`; this library is empty.
