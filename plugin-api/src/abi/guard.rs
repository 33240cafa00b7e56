//! The panic guard around every entry point into plugin code.
//!
//! abi_stable turns a panic that unwinds through an `extern "C"` shim into
//! `std::process::exit(1)` (notes/plugin-abi.md §3). So every call the host can
//! make into a plugin runs inside [`guard`], on the plugin's side of the
//! boundary, and a panic comes back as a [`PluginError`] of kind
//! [`ErrorKind::PANIC`]. The no-panic path costs nothing measurable.

use std::panic::{catch_unwind, AssertUnwindSafe};

use abi_stable::std_types::RResult;

use crate::{ErrorKind, PluginError};

/// What every call across the boundary returns.
pub type PResult<T> = RResult<T, PluginError>;

/// Runs `f`, turning a panic into a [`PluginError`] of kind [`ErrorKind::PANIC`].
pub fn guard<T>(f: impl FnOnce() -> Result<T, PluginError>) -> PResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result.into(),
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_owned());
            RResult::RErr(PluginError::new(ErrorKind::PANIC, message))
        }
    }
}

/// Converts an author-side error into a boundary error of the given kind.
pub(crate) fn to_plugin_error(kind: ErrorKind) -> impl FnOnce(crate::Error) -> PluginError {
    move |e| PluginError::new(kind, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_becomes_a_panic_error() {
        let r: PResult<()> = guard(|| panic!("boom {}", 7));
        let e = r.into_result().unwrap_err();
        assert!(e.is_panic());
        assert_eq!(e.message.as_str(), "boom 7");
    }

    #[test]
    fn ok_and_err_pass_through() {
        assert_eq!(guard(|| Ok(3)).into_result(), Ok(3));
        let e = PluginError::new(ErrorKind::RUNTIME, "bad");
        assert_eq!(guard(|| Err::<(), _>(e.clone())).into_result(), Err(e));
    }
}
