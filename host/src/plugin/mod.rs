//! Plugin libraries: loading, ABI checks and the component registry.
//!
//! Every library named in a topology's `[plugins]` table is opened once as a
//! regular file, checked for safe ownership and permissions and for ELF
//! segments within the file, copied from that descriptor into a private
//! folder while it is hashed (the pinned digest is checked against that
//! hash), and loaded from the copy with `dlopen(copy, RTLD_NOW |
//! RTLD_LOCAL)`, after which the copy's name is unlinked (module `copy`). It
//! is checked by abi_stable (abi_stable version, contract version, then the
//! layout of every type reachable from the root module) and only then
//! called. Libraries are never unloaded: values and vtables created by a
//! plugin point into its code (notes/plugin-abi.md §2).
//! Several libraries load side by side, including libraries that export the
//! same root-module type, because nothing here uses abi_stable's per-type
//! `RootModule::load_from*` cache.

mod copy;
pub mod descriptor;
mod elf;
mod error;
mod loader;
pub mod object;
pub mod services;

pub use copy::{private_dir, remove_private_copies, try_remove_private_copies, PrivateCopies};
pub use descriptor::Descriptor;
pub use error::{escape_controls, LoadError};
pub use loader::{
    load_in_process, load_library, load_library_in, load_library_with, Library, LoadOptions,
    ALLOW_WRITABLE_ENV, IN_PROCESS_DIGEST, IN_PROCESS_PATH,
};
pub use object::{
    BoltObj, Constructor, Constructor12, Constructor13, ExtConstructor, Factory, Instance, SpoutObj,
};
