//! The root module: the one symbol a plugin library exports.

use abi_stable::{
    declare_root_module_statics,
    library::{CheckTypeLayout, LibHeader, RootModule, RootModuleResult},
    prefix_type::PrefixTypeTrait,
    sabi_types::VersionStrings,
    StableAbi,
};

use abi_stable::std_types::RVec;

use crate::{ErrorKind, PluginError};

use super::{
    guard, Catalogue, ComponentExt, ComponentExt12, ComponentExt13, Host13Box, HostBox, PResult,
};

/// The contract version written in every library header: the oldest 1.x
/// contract, so that a host accepts every 1.x library (see
/// `RootModule::VERSION_STRINGS` below).
pub const ABI_BASELINE: &str = "1.0.0";

/// The contract version this crate implements (its package version).
pub const CONTRACT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The name of the symbol holding a library's header (abi_stable 0.11's
/// mangling of its root-module loader name). [`export_plugin!`](crate::export_plugin)
/// exports a static under exactly this name.
pub const ROOT_SYMBOL: &str = "_1as_0lib_1header_0root_bmodule_bloader";

/// The root module of a plugin library: a prefix type, so later contract
/// versions can add fields at the end.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginRoot_Ref)))]
#[sabi(missing_field(panic))]
pub struct PluginRoot {
    /// Lists the library's components.
    // Evolution rule: this is the last field of contract 1.0's prefix. Never
    // move it; fields added later go after it and are read as `Option`s.
    ///
    /// A library refuses to list its components (an error naming both
    /// contracts) to a host whose contract is older than its own: a 1.3
    /// library to a host that never called `attach_host_1_3`, which every
    /// 1.3 host calls before this.
    #[sabi(last_prefix_field)]
    pub catalogue: extern "C" fn() -> PResult<Catalogue>,
    /// Contract 1.1: the host hands the library its [`HostBox`] (logging,
    /// user metrics) once, right after loading it. `None` in a 1.0 library.
    #[sabi(missing_field(option))]
    pub attach_host: extern "C" fn(HostBox),
    /// Contract 1.1: how the library was built to handle panics. A library
    /// built with `panic = "abort"` would abort the whole host at its first
    /// panic, so the host refuses it. `None` in a 1.0 library.
    #[sabi(missing_field(option))]
    pub panic_strategy: PanicStrategy,
    /// Contract 1.1: the library's components as 1.1 describes them
    /// ([`ComponentExt`](super::ComponentExt)): declared config keys, inputs,
    /// outputs from config, state handover, wake handles, custom groupings.
    /// `None` in a 1.0 library.
    #[sabi(missing_field(option))]
    pub extensions: extern "C" fn() -> PResult<RVec<ComponentExt>>,
    /// Contract 1.2: the components a 1.2 host builds through contract 1.2
    /// ([`ComponentExt12`]): durable state, state backends, close budgets.
    /// `None` in a 1.0 or 1.1 library.
    #[sabi(missing_field(option))]
    pub extensions_1_2: extern "C" fn() -> PResult<RVec<ComponentExt12>>,
    /// Contract 1.3: the components a 1.3 host builds through contract 1.3
    /// ([`ComponentExt13`]): batch entry points and group coordinators.
    /// `None` in a library built before 1.3.
    #[sabi(missing_field(option))]
    pub extensions_1_3: extern "C" fn() -> PResult<RVec<ComponentExt13>>,
    /// Contract 1.3: the host hands the library its [`Host13Box`] (labelled
    /// user metrics) once, right after loading it and after `attach_host`.
    /// `None` in a library built before this field; such a library has no
    /// labelled metrics to register.
    #[sabi(missing_field(option))]
    pub attach_host_1_3: extern "C" fn(Host13Box),
}

/// How a library's code handles a panic (an open set of constants).
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct PanicStrategy(pub u8);

impl PanicStrategy {
    /// `panic = "unwind"` (Rust's default): panics are caught at the boundary.
    pub const UNWIND: Self = Self(0);
    /// `panic = "abort"`: a panic ends the process.
    pub const ABORT: Self = Self(1);

    /// The strategy this crate (and so the library it is part of) was built with.
    pub const fn of_this_build() -> Self {
        if cfg!(panic = "abort") {
            Self::ABORT
        } else {
            Self::UNWIND
        }
    }
}

impl std::fmt::Debug for PluginRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PluginRoot")
    }
}

impl RootModule for PluginRoot_Ref {
    // Required by the trait. The host never uses this per-type cache: it loads
    // every library through `lib_header_from_path(..)?.init_root_module()`.
    declare_root_module_statics! {PluginRoot_Ref}
    const BASE_NAME: &'static str = "squall_plugin";
    const NAME: &'static str = "squall_plugin";
    // The oldest contract a library may be built against, not this crate's
    // version: abi_stable accepts a library only if its minor version is at
    // least the host's, which would refuse every 1.0 library in a 1.1 host.
    // Contract minors are additive (prefix fields read as `Option`s), so the
    // baseline stays 1.0.0 for all of 1.x; the catalogue records the real
    // contract version of each library.
    const VERSION_STRINGS: VersionStrings = VersionStrings::new(ABI_BASELINE);
}

/// The root module as contract 1.0 shaped it: only the catalogue. A host
/// checks a library against this shape when the library lacks the newest
/// fields (it was built against an older 1.x), since abi_stable refuses a
/// library whose prefix types have fewer fields than the host's.
pub mod v1_0 {
    use abi_stable::{
        declare_root_module_statics, library::RootModule, sabi_types::VersionStrings, StableAbi,
    };

    use crate::abi::{Catalogue, PResult};

    /// Contract 1.0's root module: the same name and first field as
    /// [`super::PluginRoot`], nothing after it.
    #[repr(C)]
    #[derive(StableAbi)]
    #[sabi(kind(Prefix(prefix_ref = PluginRoot_Ref)))]
    #[sabi(missing_field(panic))]
    pub struct PluginRoot {
        /// Returns the library's catalogue.
        #[sabi(last_prefix_field)]
        pub catalogue: extern "C" fn() -> PResult<Catalogue>,
    }

    impl std::fmt::Debug for PluginRoot {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("PluginRoot (contract 1.0 shape)")
        }
    }

    impl RootModule for PluginRoot_Ref {
        declare_root_module_statics! {PluginRoot_Ref}
        const BASE_NAME: &'static str = "squall_plugin";
        const NAME: &'static str = "squall_plugin";
        const VERSION_STRINGS: VersionStrings = VersionStrings::new(super::ABI_BASELINE);
    }
}

/// The root module as contract 1.1 shaped it: the catalogue, the host
/// handle, the panic strategy and the 1.1 descriptors. A host checks a 1.1
/// library against this shape (see [`v1_0`]).
pub mod v1_1 {
    use abi_stable::{
        declare_root_module_statics, library::RootModule, sabi_types::VersionStrings,
        std_types::RVec, StableAbi,
    };

    use super::PanicStrategy;
    use crate::abi::{Catalogue, ComponentExt, HostBox, PResult};

    /// Contract 1.1's root module: the same name and fields as
    /// [`super::PluginRoot`] up to `extensions`, nothing after it.
    #[repr(C)]
    #[derive(StableAbi)]
    #[sabi(kind(Prefix(prefix_ref = PluginRoot_Ref)))]
    #[sabi(missing_field(panic))]
    pub struct PluginRoot {
        /// Returns the library's catalogue.
        #[sabi(last_prefix_field)]
        pub catalogue: extern "C" fn() -> PResult<Catalogue>,
        /// Hands the library its host handle.
        #[sabi(missing_field(option))]
        pub attach_host: extern "C" fn(HostBox),
        /// How the library handles panics.
        #[sabi(missing_field(option))]
        pub panic_strategy: PanicStrategy,
        /// The 1.1 descriptors.
        #[sabi(missing_field(option))]
        pub extensions: extern "C" fn() -> PResult<RVec<ComponentExt>>,
    }

    impl std::fmt::Debug for PluginRoot {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("PluginRoot (contract 1.1 shape)")
        }
    }

    impl RootModule for PluginRoot_Ref {
        declare_root_module_statics! {PluginRoot_Ref}
        const BASE_NAME: &'static str = "squall_plugin";
        const NAME: &'static str = "squall_plugin";
        const VERSION_STRINGS: VersionStrings = VersionStrings::new(super::ABI_BASELINE);
    }
}

/// The root module as contract 1.2 shaped it: every field of
/// [`PluginRoot`] up to `extensions_1_2`. A host checks a 1.2 library
/// against this shape (see [`v1_0`]).
pub mod v1_2_root {
    use abi_stable::{
        declare_root_module_statics, library::RootModule, sabi_types::VersionStrings,
        std_types::RVec, StableAbi,
    };

    use super::PanicStrategy;
    use crate::abi::{Catalogue, ComponentExt, ComponentExt12, HostBox, PResult};

    /// Contract 1.2's root module.
    #[repr(C)]
    #[derive(StableAbi)]
    #[sabi(kind(Prefix(prefix_ref = PluginRoot_Ref)))]
    #[sabi(missing_field(panic))]
    pub struct PluginRoot {
        /// Returns the library's catalogue.
        #[sabi(last_prefix_field)]
        pub catalogue: extern "C" fn() -> PResult<Catalogue>,
        /// Hands the library its host handle.
        #[sabi(missing_field(option))]
        pub attach_host: extern "C" fn(HostBox),
        /// How the library handles panics.
        #[sabi(missing_field(option))]
        pub panic_strategy: PanicStrategy,
        /// The 1.1 descriptors.
        #[sabi(missing_field(option))]
        pub extensions: extern "C" fn() -> PResult<RVec<ComponentExt>>,
        /// The 1.2 descriptors.
        #[sabi(missing_field(option))]
        pub extensions_1_2: extern "C" fn() -> PResult<RVec<ComponentExt12>>,
    }

    impl std::fmt::Debug for PluginRoot {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("PluginRoot (contract 1.2 shape)")
        }
    }

    impl RootModule for PluginRoot_Ref {
        declare_root_module_statics! {PluginRoot_Ref}
        const BASE_NAME: &'static str = "squall_plugin";
        const NAME: &'static str = "squall_plugin";
        const VERSION_STRINGS: VersionStrings = VersionStrings::new(super::ABI_BASELINE);
    }
}

/// A library's catalogue, implemented by the type [`export_plugin!`](crate::export_plugin) generates.
pub trait PluginSource {
    /// Builds the catalogue.
    fn catalogue() -> Catalogue;
    /// Builds the 1.1 descriptors.
    fn extensions() -> RVec<ComponentExt>;
    /// Builds the 1.2 descriptors.
    fn extensions_1_2() -> RVec<ComponentExt12> {
        RVec::new()
    }
    /// Builds the 1.3 descriptors.
    fn extensions_1_3() -> RVec<ComponentExt13> {
        RVec::new()
    }
}

extern "C" fn extensions_13_of<P: PluginSource>() -> PResult<RVec<ComponentExt13>> {
    guard(|| Ok(P::extensions_1_3()))
}

extern "C" fn extensions_12_of<P: PluginSource>() -> PResult<RVec<ComponentExt12>> {
    guard(|| Ok(P::extensions_1_2()))
}

extern "C" fn extensions_of<P: PluginSource>() -> PResult<RVec<ComponentExt>> {
    guard(|| Ok(P::extensions()))
}

extern "C" fn catalogue_of<P: PluginSource>() -> PResult<Catalogue> {
    guard(|| match crate::host::older_host() {
        Some(why) => Err(PluginError::new(ErrorKind::CONTRACT, why)),
        None => Ok(P::catalogue()),
    })
}

fn root_of<P: PluginSource>() -> PluginRoot_Ref {
    PluginRoot {
        catalogue: catalogue_of::<P>,
        attach_host: crate::host::attach,
        panic_strategy: PanicStrategy::of_this_build(),
        extensions: extensions_of::<P>,
        extensions_1_2: extensions_12_of::<P>,
        extensions_1_3: extensions_13_of::<P>,
        attach_host_1_3: crate::host::attach13,
    }
    .leak_into_prefix()
}

extern "C" fn load_root<P: PluginSource>() -> RootModuleResult {
    abi_stable::library::__call_root_module_loader(root_of::<P>)
}

/// The header a plugin library exports under [`ROOT_SYMBOL`].
pub const fn lib_header<P: PluginSource>() -> LibHeader {
    // SAFETY: `load_root::<P>` returns the `PrefixRef` of a `PluginRoot_Ref`
    // (erased by `__call_root_module_loader`), which is what `from_constructor`
    // requires for `M = PluginRoot_Ref`.
    unsafe { LibHeader::from_constructor::<PluginRoot_Ref>(load_root::<P>, CheckTypeLayout::Yes) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn root_symbol_matches_abi_stable_mangling() {
        assert_eq!(super::ROOT_SYMBOL, abi_stable::library::ROOT_MODULE_LOADER_NAME);
    }
}
