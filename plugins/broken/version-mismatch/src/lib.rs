//! Loader test fixture: a root module that looks like squall's but claims
//! contract version 2.0.0.
//!
//! The root module type mimics `squall_plugin_api::abi::PluginRoot` (same
//! module name, `squall_plugin`, same type and field names), and its version
//! strings are this package's version, 2.0.0. A host speaking contract 1.0.0
//! must refuse it in abi_stable's version check
//! (`LibraryError::IncompatibleVersionNumber`), before checking layouts and
//! before calling any of its code.

#![allow(non_local_definitions, non_camel_case_types)] // abi_stable naming (`PluginRoot_Ref`) and derive noise on recent rustc

use abi_stable::{
    declare_root_module_statics, export_root_module, library::RootModule, package_version_strings,
    prefix_type::PrefixTypeTrait, sabi_types::VersionStrings, StableAbi,
};

/// A stand-in for squall's root module, with a catalogue function that
/// returns a plain number.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginRoot_Ref)))]
pub struct PluginRoot {
    /// Never called by a correct host.
    #[sabi(last_prefix_field)]
    pub catalogue: extern "C" fn() -> u64,
}

impl std::fmt::Debug for PluginRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PluginRoot (version-mismatch fixture)")
    }
}

impl RootModule for PluginRoot_Ref {
    declare_root_module_statics! {PluginRoot_Ref}
    const BASE_NAME: &'static str = "squall_plugin";
    const NAME: &'static str = "squall_plugin";
    // This package's version: 2.0.0.
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

extern "C" fn catalogue() -> u64 {
    2
}

/// The exported root module constructor.
#[export_root_module]
pub fn instantiate_root_module() -> PluginRoot_Ref {
    PluginRoot { catalogue }.leak_into_prefix()
}
