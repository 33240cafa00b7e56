//! End-to-end tests (table of contents filled in below).
