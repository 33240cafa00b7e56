//! Loader test fixture: a shared library that is not a squall plugin.
//!
//! It has no abi_stable library header (no
//! `_1as_0lib_1header_0root_bmodule_bloader` symbol), only one plain C
//! function. The host must refuse it with a "not a squall plugin" style error
//! (abi_stable reports `GetSymbolError`), without crashing.

#![warn(missing_docs)]

/// A plain C function, so the library exports something.
#[no_mangle]
pub extern "C" fn squall_broken_hello() -> i32 {
    42
}
