//! The [`export_plugin!`](crate::export_plugin) macro.

/// Exports a library's components: call it once, at the crate root of a
/// `cdylib`.
///
/// Each list is optional, but the lists that are present must come in this
/// order: `spouts`, `bolts`, `basic_bolts`, `wait_strategies`,
/// `windowed_bolts`, `groupings`, `state_backends` (contract 1.2),
/// `coordinators` (contract 1.3).
///
/// ```text
/// squall_plugin_api::export_plugin! {
///     spouts: [MySpout],
///     bolts: [MyRichBolt],
///     basic_bolts: [MyBasicBolt],
///     wait_strategies: [MyWait],
///     windowed_bolts: [MyWindowedBolt],
///     groupings: [MyGrouping],
///     state_backends: [MyBackend],
///     coordinators: [MyCoordinator],
/// }
/// ```
///
/// It generates the library's root module, whose catalogue names the crate
/// (`CARGO_PKG_NAME`) and its version, and exports it under
/// [`ROOT_SYMBOL`](crate::abi::ROOT_SYMBOL).
#[macro_export]
macro_rules! export_plugin {
    (
        $(spouts: [$($spout:ty),* $(,)?] $(,)?)?
        $(bolts: [$($bolt:ty),* $(,)?] $(,)?)?
        $(basic_bolts: [$($basic:ty),* $(,)?] $(,)?)?
        $(wait_strategies: [$($wait:ty),* $(,)?] $(,)?)?
        $(windowed_bolts: [$($windowed:ty),* $(,)?] $(,)?)?
        $(groupings: [$($grouping:ty),* $(,)?] $(,)?)?
        $(state_backends: [$($backend:ty),* $(,)?] $(,)?)?
        $(coordinators: [$($coordinator:ty),* $(,)?] $(,)?)?
    ) => {
        #[doc(hidden)]
        pub struct __SquallPlugin;

        impl __SquallPlugin {
            fn builder() -> $crate::abi::CatalogueBuilder {
                let mut builder =
                    $crate::abi::CatalogueBuilder::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"));
                $($(builder.spout::<$spout>();)*)?
                $($(builder.bolt::<$bolt>();)*)?
                $($(builder.basic_bolt::<$basic>();)*)?
                $($(builder.wait_strategy::<$wait>();)*)?
                $($(builder.windowed_bolt::<$windowed>();)*)?
                $($(builder.grouping::<$grouping>();)*)?
                $($(builder.state_backend::<$backend>();)*)?
                $($(builder.coordinator::<$coordinator>();)*)?
                builder
            }
        }

        impl $crate::abi::PluginSource for __SquallPlugin {
            fn catalogue() -> $crate::abi::Catalogue {
                Self::builder().build()
            }

            fn extensions() -> $crate::__private::RVec<$crate::abi::ComponentExt> {
                Self::builder().build_extensions()
            }

            fn extensions_1_2() -> $crate::__private::RVec<$crate::abi::ComponentExt12> {
                Self::builder().build_extensions_12()
            }

            fn extensions_1_3() -> $crate::__private::RVec<$crate::abi::ComponentExt13> {
                Self::builder().build_extensions_13()
            }
        }

        /// The library header abi_stable looks for (see `squall_plugin_api::abi::ROOT_SYMBOL`).
        #[doc(hidden)]
        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static _1as_0lib_1header_0root_bmodule_bloader: $crate::abi::__private::LibHeader =
            $crate::abi::lib_header::<__SquallPlugin>();
    };
}
