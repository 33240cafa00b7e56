//! Loader test fixture: a root module with squall's name and contract
//! version (1.0.0) but a different layout.
//!
//! The version check passes, so the host must refuse it in abi_stable's
//! layout check (`LibraryError::AbiInstability`): here the catalogue function
//! takes and returns a `u32` instead of `fn() -> RResult<Catalogue, PluginError>`.
//! No code of the library may run.
//!
//! Note: abi_stable compares a type's package name before its fields, and
//! stops there when they differ. This crate cannot be called
//! `squall-plugin-api`, so the report's one error reads "mismatched package
//! (expected squall-plugin-api, found squall-broken-abi-mismatch)"; both
//! layouts, with their different `catalogue` signatures, are printed with it.

#![allow(non_local_definitions, non_camel_case_types)] // abi_stable naming (`PluginRoot_Ref`) and derive noise on recent rustc

use abi_stable::{
    declare_root_module_statics, export_root_module, library::RootModule, package_version_strings,
    prefix_type::PrefixTypeTrait, sabi_types::VersionStrings, StableAbi,
};

/// A stand-in for squall's root module with an incompatible catalogue function.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginRoot_Ref)))]
pub struct PluginRoot {
    /// Never called by a correct host.
    #[sabi(last_prefix_field)]
    pub catalogue: extern "C" fn(u32) -> u32,
}

impl std::fmt::Debug for PluginRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PluginRoot (abi-mismatch fixture)")
    }
}

impl RootModule for PluginRoot_Ref {
    declare_root_module_statics! {PluginRoot_Ref}
    const BASE_NAME: &'static str = "squall_plugin";
    const NAME: &'static str = "squall_plugin";
    // This package's version: 1.0.0, the same as the contract's.
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

extern "C" fn catalogue(x: u32) -> u32 {
    x
}

/// The exported root module constructor.
#[export_root_module]
pub fn instantiate_root_module() -> PluginRoot_Ref {
    PluginRoot { catalogue }.leak_into_prefix()
}
