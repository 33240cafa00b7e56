//! Plugin libraries: loading, ABI checks and the component registry.
//!
//! Every library named in a topology's `[plugins]` table is opened once as a
//! regular file, checked for safe ownership and permissions, hashed from that
//! descriptor when pinned, and loaded from the same descriptor with
//! `dlopen("/proc/self/fd/N", RTLD_NOW | RTLD_LOCAL)`, checked by abi_stable (abi_stable version,
//! contract version, then the layout of every type reachable from the root
//! module) and only then called. Libraries are never unloaded: values and
//! vtables created by a plugin point into its code (notes/plugin-abi.md §2).
//! Several libraries load side by side, including libraries that export the
//! same root-module type, because nothing here uses abi_stable's per-type
//! `RootModule::load_from*` cache.

mod error;
mod loader;
pub mod object;
pub mod services;

pub use error::{escape_controls, LoadError};
pub use loader::{
    load_in_process, load_library, load_library_with, Library, LoadOptions, ALLOW_WRITABLE_ENV,
    IN_PROCESS_PATH,
};
pub use object::{BoltObj, Constructor, ExtConstructor, Factory, Instance, SpoutObj};
