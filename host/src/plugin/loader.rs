//! Opening one plugin library and reading its catalogue.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use abi_stable::library::{
    AbiHeaderRef, LibHeader, LibraryError, ROOT_MODULE_LOADER_NAME_WITH_NUL,
};
use abi_stable::std_types::RVec;
use libloading::os::unix::{Library as UnixLibrary, RTLD_LOCAL, RTLD_NOW};
use sha2::{Digest, Sha256};
use squall_plugin_api::abi::{
    lib_header, v1_0, v1_1, v1_2_root, Catalogue, ComponentExt, ComponentExt12, ComponentExt13,
    ComponentKind, Host13Box, HostBox, PResult, PanicStrategy, PluginRoot_Ref, PluginSource,
    CONTRACT_VERSION,
};
use squall_plugin_api::ErrorKind;

use super::copy::{self, CopyError};
use super::descriptor::{normalise, Descriptor, Parts};
use super::elf::{self, Verdict};
use super::error::{escape_controls, shown};
use super::LoadError;
use crate::files::OpenError;

/// A loaded, checked plugin library and its components.
#[derive(Debug)]
pub struct Library {
    /// The alias the topology gave it.
    pub alias: String,
    /// The path it was loaded from.
    pub path: PathBuf,
    /// The library's name (its crate name).
    pub plugin: String,
    /// The library's own version.
    pub version: String,
    /// The contract version it was built against.
    pub contract: String,
    /// Its components, one descriptor each whatever contract built it.
    pub descriptors: Vec<Descriptor>,
    /// The SHA-256 (64 lowercase hex digits) of the bytes loaded, or
    /// [`IN_PROCESS_DIGEST`] for a library linked into this process.
    pub digest: String,
}

impl Library {
    /// The component called `name` of kind `kind`.
    pub fn descriptor(&self, name: &str, kind: ComponentKind) -> Option<&Descriptor> {
        self.descriptors.iter().find(|d| d.name == name && d.kind == kind)
    }

    /// A component called `name`, of any kind (for "is a bolt, not a
    /// spout" messages).
    pub fn named(&self, name: &str) -> Option<&Descriptor> {
        self.descriptors.iter().find(|d| d.name == name)
    }

    /// The names of its components of kind `kind` (for "did you mean").
    pub fn names(&self, kind: ComponentKind) -> impl Iterator<Item = &str> {
        self.descriptors.iter().filter(move |d| d.kind == kind).map(|d| d.name.as_str())
    }

    /// True when it was built against contract 1.0 (it describes no config
    /// keys, state handover or wake handles).
    pub fn is_contract_1_0(&self) -> bool {
        self.contract.starts_with("1.0.")
    }
}

/// What the loader accepts besides a safe, regular file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Load a library even when it, or a folder on its path, can be written
    /// by group or others, or is owned by another user (docs/operations.md,
    /// "What squall refuses, and why"). Off by default.
    pub allow_writable: bool,
}

/// The environment variable that, set to `1`, allows writable plugin
/// libraries for every command (including `squall inspect`).
pub const ALLOW_WRITABLE_ENV: &str = "SQUALL_ALLOW_WRITABLE_PLUGINS";

/// Loads the plugin library at `path`, checks its contract, and reads its
/// catalogue, with the default [`LoadOptions`] (writable libraries refused
/// unless [`ALLOW_WRITABLE_ENV`] is `1`).
///
/// # Errors
/// As [`load_library_with`].
pub fn load_library(alias: &str, path: &Path, sha256: Option<&str>) -> Result<Library, LoadError> {
    load_library_with(alias, path, sha256, LoadOptions::default())
}

/// Loads the plugin library at `path`, checks its contract, and reads its
/// catalogue, from a private copy in [`private_dir`](super::private_dir)
/// (see [`load_library_in`]).
///
/// # Errors
/// As [`load_library_in`].
pub fn load_library_with(
    alias: &str,
    path: &Path,
    sha256: Option<&str>,
    options: LoadOptions,
) -> Result<Library, LoadError> {
    load_library_in(&copy::private_dir(), alias, path, sha256, options)
}

/// Loads the plugin library at `path` from a private copy in the folder
/// `dir`, checks its contract, and reads its catalogue.
///
/// The file is opened once. It must be a regular file (a FIFO, a device or a
/// directory is refused before anything is read), owned by root or by the
/// user running squall, and neither it nor a folder on its path may be
/// writable by group or others (unless `options` or [`ALLOW_WRITABLE_ENV`]
/// allow it). Its ELF header and program headers are checked against its
/// length: a file whose loadable segments run past its end (truncated, or
/// still being written) is refused, where mapping it would kill the process
/// with SIGBUS. A file that is not ELF at all is refused as not a shared
/// library without being copied.
///
/// The bytes are then copied from that open descriptor into a new file with
/// a name used once, in `dir` (made private, 0700, if missing), and hashed
/// while they are copied; a pinned digest is compared with that hash, the
/// copy is checked again, loaded with `dlopen` under its own path, and its
/// name unlinked once it is mapped. The bytes hashed are the bytes loaded,
/// and nothing done later to the file at `path` (`cp` over it, truncating
/// it) reaches the mapped code. The same bytes loaded again for the same
/// path reuse the library already mapped. [`PrivateCopies`](super::PrivateCopies)
/// removes the folders when the command ends.
///
/// # Errors
/// A [`LoadError`] naming `alias` and `path` for a missing file, a symbolic
/// link loop, a file that is not regular, unsafe permissions, a truncated
/// file, a copy that cannot be made, a digest mismatch, a file that is not
/// a shared library, a library that is not a squall plugin, an incompatible
/// contract, or a failing catalogue.
pub fn load_library_in(
    dir: &Path,
    alias: &str,
    path: &Path,
    sha256: Option<&str>,
    options: LoadOptions,
) -> Result<Library, LoadError> {
    let file = open_regular(alias, path)?;
    let allow_writable =
        options.allow_writable || std::env::var_os(ALLOW_WRITABLE_ENV).is_some_and(|v| v == "1");
    if !allow_writable {
        check_permissions(alias, path, &file)?;
    }
    // Before anything is copied: a file that is not ELF is never copied
    // (a huge one would fill the temporary folder), and a truncated one is
    // refused at once.
    let len = file.metadata().map_err(|source| read_error(alias, path, source))?.len();
    if let Checked::NotElf(detail) = check_elf(alias, path, &file, len)? {
        return Err(not_a_library(alias, path, &file, sha256, detail));
    }
    let source = Source { dir, alias, path, sha256 };
    let (root, digest) = copy_and_load(&source, file, allow_writable)?;
    read_root(alias, path, root, digest)
}

/// Why a file that is not ELF is refused: its pinned digest's mismatch
/// first, else that it is not a shared library (with what to do for a
/// `.rlib`).
fn not_a_library(
    alias: &str,
    path: &Path,
    file: &File,
    sha256: Option<&str>,
    detail: &str,
) -> LoadError {
    if let Some(expected) = sha256 {
        if let Err(mismatch) = check_digest(alias, path, file, expected) {
            return mismatch;
        }
    }
    let mut detail = detail.to_owned();
    if path.extension().is_some_and(|e| e == "rlib") {
        detail.push_str(
            " (help: a .rlib is a Rust library for the compiler, not a shared library: \
             add crate-type = [\"cdylib\"] under [lib] in the crate's Cargo.toml, build \
             it again and name the .so it writes beside the .rlib)",
        );
    }
    LoadError::NotALibrary { alias: alias.into(), path: path.into(), detail }
}

/// Where a library is loaded from: the folder of its private copies, its
/// alias, its path, and its pinned digest.
struct Source<'a> {
    dir: &'a Path,
    alias: &'a str,
    path: &'a Path,
    sha256: Option<&'a str>,
}

/// Copies the open `file` into a private copy, closes it, loads the copy
/// (or finds the same bytes already loaded) and unlinks the copy's name.
/// Returns the root module and the digest of the bytes copied.
fn copy_and_load(
    source: &Source<'_>,
    file: File,
    allow_writable: bool,
) -> Result<(Root, String), LoadError> {
    let Source { dir, alias, path, sha256 } = *source;
    let mut state = copy::state();
    let copy =
        copy::copy_into(&mut state, dir, alias, &file, allow_writable).map_err(|e| match e {
            CopyError::Read(source) => read_error(alias, path, source),
            CopyError::Private(detail) => LoadError::PrivateCopy {
                alias: alias.to_owned(),
                path: path.to_path_buf(),
                detail: escape_controls(&detail),
            },
        })?;
    drop(file);
    let root = load_copy(&mut state, alias, path, sha256, &copy);
    copy.unlink();
    Ok((root?, copy.digest))
}

/// Checks the copy (its pinned digest, its ELF bounds: the file may have
/// changed while it was copied) and loads it, unless the same bytes are
/// already loaded for `path`.
fn load_copy(
    state: &mut copy::State,
    alias: &str,
    path: &Path,
    sha256: Option<&str>,
    copy: &copy::Copy,
) -> Result<Root, LoadError> {
    if let Some(expected) = sha256 {
        if !copy.digest.eq_ignore_ascii_case(expected) {
            return Err(LoadError::Checksum {
                alias: alias.to_owned(),
                path: path.to_path_buf(),
                expected: expected.to_owned(),
                found: copy.digest.clone(),
            });
        }
    }
    let key = (path.to_path_buf(), copy.digest.clone());
    if let Some(root) = state.loaded.get(&key) {
        return Ok(root.clone());
    }
    if let Checked::NotElf(detail) = check_elf(alias, path, &copy.file, copy.len)? {
        let detail = detail.to_owned();
        return Err(LoadError::NotALibrary { alias: alias.into(), path: path.into(), detail });
    }
    let root = open_root(alias, path, &copy.path)?;
    state.loaded.insert(key, root.clone());
    Ok(root)
}

/// What [`check_elf`] found in a file that is not truncated.
enum Checked {
    /// An ELF file (checked, or left to `dlopen` to judge).
    Elf,
    /// Not an ELF file: what `dlopen` would have said.
    NotElf(&'static str),
}

/// Checks the ELF bounds of the `len` bytes of `file` ([`elf::check`]).
fn check_elf(alias: &str, path: &Path, file: &File, len: u64) -> Result<Checked, LoadError> {
    if len < 4 {
        return Ok(Checked::NotElf("file too short"));
    }
    let mut magic = [0u8; 4];
    file.read_exact_at(&mut magic, 0).map_err(|e| read_error(alias, path, e))?;
    if magic != *b"\x7fELF" {
        return Ok(Checked::NotElf("invalid ELF header"));
    }
    let mut read = |offset: u64, buf: &mut [u8]| file.read_exact_at(buf, offset);
    match elf::check(len, &mut read).map_err(|e| read_error(alias, path, e))? {
        Verdict::Sane | Verdict::Unchecked => Ok(Checked::Elf),
        Verdict::OutOfBounds(what) => Err(LoadError::Truncated {
            alias: alias.to_owned(),
            path: path.to_path_buf(),
            what,
            len,
        }),
    }
}

fn read_error(alias: &str, path: &Path, source: std::io::Error) -> LoadError {
    LoadError::Read { alias: alias.to_owned(), path: path.to_path_buf(), source }
}

/// Lowercase hex.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The digest a library linked into this process reports.
pub const IN_PROCESS_DIGEST: &str = "in-process";

/// The path a library linked into this process is reported under.
pub const IN_PROCESS_PATH: &str = "(linked in process)";

/// Reads the catalogue of a plugin crate linked into this process as a Rust
/// library (`crate-type = ["cdylib", "rlib"]`), through the same root module
/// `export_plugin!` exports from its `.so`: the contract is checked by
/// abi_stable, the host's services are attached and the panic strategy is
/// checked exactly as [`load_library_with`] does, with no `dlopen`. For
/// in-process tests (the `squall-harness` crate); the library is reported
/// under [`IN_PROCESS_PATH`].
///
/// # Errors
/// An incompatible contract, a `panic = "abort"` build, or a failing catalogue.
pub fn load_in_process<P: PluginSource>(alias: &str) -> Result<Library, LoadError> {
    let path = Path::new(IN_PROCESS_PATH);
    // abi_stable keeps the initialised root module in the header, which must
    // outlive every component made from it: one small header per call, kept
    // for the life of the process like a dlopen'ed library.
    let header: &'static LibHeader = Box::leak(Box::new(lib_header::<P>()));
    let root =
        header.init_root_module::<PluginRoot_Ref>().map_err(|e| LoadError::Incompatible {
            alias: alias.to_owned(),
            path: path.to_path_buf(),
            host_contract: CONTRACT_VERSION,
            detail: condense(&e),
        })?;
    read_root(alias, path, Root::newest(root), IN_PROCESS_DIGEST.to_owned())
}

/// Checks a library's root module and reads its catalogue and 1.1 descriptors.
fn read_root(alias: &str, path: &Path, root: Root, digest: String) -> Result<Library, LoadError> {
    check_panic_strategy(alias, path, root.panic_strategy)?;
    // Contract 1.1: hand the library the host's services (a 1.0 library has
    // no such field and is left as it is).
    if let Some(attach) = root.attach_host {
        attach(super::services::HostServices::boxed());
    }
    // Contract 1.3: labelled metrics, through their own object (a library
    // built before this field reads it as `None`).
    if let Some(attach) = root.attach_host_1_3 {
        attach(super::services::HostServices::boxed_1_3());
    }
    let catalogue_error = |e| catalogue_failure(alias, path, None, e);
    let catalogue = (root.catalogue)()
        .into_result()
        .map_err(|e| catalogue_failure(alias, path, root.mismatch_newest.as_deref(), e))?;
    if let Some(mismatch) = root.mismatch_newest.as_deref().filter(|_| of_this_contract(&catalogue))
    {
        warn_newest_mismatch(alias, path, &root, &catalogue, mismatch);
    } else if let Some(mismatch) = &root.mismatch_1_1 {
        warn_mismatch(alias, path, &catalogue, mismatch);
    }
    let extensions = call(root.extensions).map_err(catalogue_error)?;
    let extensions_12 = call(root.extensions_12).map_err(catalogue_error)?;
    let extensions_13 = call(root.extensions_13).map_err(catalogue_error)?;
    tracing::debug!(alias, path = %path.display(), plugin = %catalogue.plugin, version = %catalogue.version, "loaded plugin");
    let descriptors = normalise(&Parts {
        v1_0: &catalogue.components,
        v1_1: &extensions,
        v1_2: &extensions_12,
        v1_3: &extensions_13,
    });
    Ok(Library {
        alias: alias.to_owned(),
        path: path.to_path_buf(),
        plugin: catalogue.plugin.to_string(),
        version: catalogue.version.to_string(),
        contract: catalogue.contract_version.to_string(),
        descriptors,
        digest,
    })
}

/// Refuses a `panic = "abort"` library, which would take the whole host
/// down at its first panic, before any of its code is called. A 1.0
/// library does not say; it loads, with a warning.
fn check_panic_strategy(
    alias: &str,
    path: &Path,
    strategy: Option<PanicStrategy>,
) -> Result<(), LoadError> {
    match strategy {
        Some(PanicStrategy::UNWIND) => {}
        Some(_) => {
            return Err(LoadError::PanicAbort { alias: alias.to_owned(), path: path.to_path_buf() })
        }
        None => tracing::warn!(
            alias,
            "{} is loaded through its contract 1.0 root module, which does not record its panic \
             strategy; if it was built with panic = \"abort\", its first panic will abort squall",
            path.display()
        ),
    }
    Ok(())
}

/// What a failed catalogue is reported as: the library's own error, or,
/// when the library was read through an older contract's shape
/// (`mismatch_newest`, why this host's did not match) and refused this host
/// as older than its contract, the mismatch: the library was built against
/// this contract, but another layout of it.
fn catalogue_failure(
    alias: &str,
    path: &Path,
    mismatch_newest: Option<&str>,
    e: squall_plugin_api::PluginError,
) -> LoadError {
    match mismatch_newest {
        Some(mismatch) if e.kind == ErrorKind::CONTRACT => LoadError::Incompatible {
            alias: alias.to_owned(),
            path: path.to_path_buf(),
            host_contract: CONTRACT_VERSION,
            detail: mismatch.to_owned(),
        },
        _ => LoadError::Catalogue {
            alias: alias.to_owned(),
            path: path.to_path_buf(),
            detail: e.to_string(),
        },
    }
}

/// Whether the library says it was built against this host's contract
/// minor or a later one.
fn of_this_contract(catalogue: &Catalogue) -> bool {
    let minor = |v: &str| -> Option<(u64, u64)> {
        let mut parts = v.split('.');
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    };
    match (minor(catalogue.contract_version.as_str()), minor(CONTRACT_VERSION)) {
        (Some(built), Some(host)) => built >= host,
        _ => false,
    }
}

/// A library built against this host's contract whose newest part does not
/// match this host's (built against a pre-release whose types have since
/// moved) loads through an older contract's descriptors, without what
/// this contract added (a 1.3 library's bolts one call per tuple): says
/// so, and why.
fn warn_newest_mismatch(
    alias: &str,
    path: &Path,
    root: &Root,
    catalogue: &Catalogue,
    mismatch: &str,
) {
    let through = match (&root.extensions_12, &root.extensions) {
        (Some(_), _) => "1.2",
        (None, Some(_)) => "1.1",
        (None, None) => "1.0",
    };
    tracing::warn!(
        alias,
        "{} was built against contract {}, but its contract {CONTRACT_VERSION} part does not \
         match this host's ({mismatch}); it loads through its {through} descriptors, without \
         what later contracts added: rebuild it against this host's squall-plugin-api",
        path.display(),
        catalogue.contract_version
    );
}

/// A 1.0 library loads through its 1.0 descriptors as expected; a later
/// one whose 1.1 part does not match this host's (built against a
/// pre-release 1.1) loses its 1.1 features: says so, and why.
fn warn_mismatch(alias: &str, path: &Path, catalogue: &Catalogue, mismatch: &str) {
    let built = catalogue.contract_version.as_str();
    if !built.starts_with("1.0.") {
        tracing::warn!(
            alias,
            "{} was built against contract {built}, but its contract 1.1 part does not match \
             this host's ({mismatch}); it loads through its 1.0 descriptors, without its 1.1 \
             features: rebuild it against this host's squall-plugin-api",
            path.display()
        );
    }
}

/// Calls one of a root module's descriptor lists, if the library has it.
fn call<T>(
    list: Option<extern "C" fn() -> PResult<RVec<T>>>,
) -> Result<RVec<T>, squall_plugin_api::PluginError> {
    list.map_or_else(|| Ok(RVec::new()), |list| list().into_result())
}

/// Opens `path` for reading, refusing anything but a regular file before a
/// byte is read. The path is checked with `stat` first (so a FIFO is never
/// opened and a device never sees an `open`), then opened without blocking,
/// and the open descriptor is checked again (the path may have changed).
fn open_regular(alias: &str, path: &Path) -> Result<File, LoadError> {
    crate::files::open_regular(path).map_err(|e| match e {
        OpenError::Missing => LoadError::missing(alias, path),
        OpenError::SymlinkLoop => {
            LoadError::SymlinkLoop { alias: alias.to_owned(), path: path.into() }
        }
        OpenError::NotRegular(kind) => {
            LoadError::NotRegular { alias: alias.to_owned(), path: path.to_path_buf(), kind }
        }
        OpenError::Io(source) => read_error(alias, path, source),
    })
}

/// Refuses a library that someone other than its owner (or root) could have
/// replaced, as ssh does with its keys: the file, and every folder on its
/// path (as written, and after resolving symbolic links), must be owned by
/// root or by the effective user and not be writable by group or others. A
/// folder with the sticky bit (like `/tmp`) owned by root or by the user is
/// accepted: others may create files in it but not rename or replace ours.
fn check_permissions(alias: &str, path: &Path, file: &File) -> Result<(), LoadError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let unsafe_path = |culprit: &Path, (reason, fix): (String, &str)| LoadError::Unsafe {
        alias: alias.to_owned(),
        path: path.to_path_buf(),
        culprit: culprit.to_path_buf(),
        reason,
        fix: format!("{fix} {}", shown(culprit)),
    };
    let meta = file.metadata().map_err(|source| LoadError::Read {
        alias: alias.to_owned(),
        path: path.to_path_buf(),
        source,
    })?;
    if let Some(reason) = unsafe_mode(&meta, euid, false) {
        return Err(unsafe_path(path, reason));
    }
    match unsafe_folder(path, file, euid) {
        Some((dir, reason)) => Err(unsafe_path(&dir, reason)),
        None => Ok(()),
    }
}

/// The first folder holding `path` that is unsafe to load code from (see
/// [`unsafe_mode`]), and why: every folder on the path as written, then on
/// the path of the open `file` with all symbolic links resolved.
fn unsafe_folder(path: &Path, file: &File, euid: u32) -> Option<(PathBuf, (String, &'static str))> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map(|d| d.join(path)).unwrap_or_else(|_| path.to_path_buf())
    };
    // Where the open descriptor really is, all symbolic links resolved.
    let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok();
    let written = absolute.ancestors().skip(1);
    let resolved = real.iter().flat_map(|r| r.ancestors().skip(1));
    for dir in written.chain(resolved) {
        if dir.as_os_str().is_empty() {
            continue;
        }
        // A symbolic link's own mode means nothing; the folder holding it is
        // checked as the next ancestor, and its target with `resolved`.
        let Ok(meta) = std::fs::symlink_metadata(dir) else { continue };
        if !meta.is_dir() {
            continue;
        }
        if let Some(reason) = unsafe_mode(&meta, euid, true) {
            return Some((dir.to_path_buf(), reason));
        }
    }
    None
}

/// Why a file or folder with this metadata is unsafe to load code from, if
/// it is, and the command that fixes it (without its path).
pub(super) fn unsafe_mode(
    meta: &std::fs::Metadata,
    euid: u32,
    is_dir: bool,
) -> Option<(String, &'static str)> {
    let mode = meta.mode();
    let owner = meta.uid();
    if owner != 0 && owner != euid {
        let reason = format!("is owned by uid {owner}, neither root nor you (uid {euid})");
        return Some((reason, "chown root (or yourself)"));
    }
    let writable = match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (false, false) => return None,
        (true, false) => "group",
        (false, true) => "others",
        (true, true) => "group and others",
    };
    if is_dir && mode & 0o1000 != 0 {
        // Sticky, and owned by root or us (checked above).
        return None;
    }
    Some((format!("is writable by {writable}"), "chmod go-w"))
}

/// Hashes the open file from its start, 64 KiB at a time, and compares the
/// digest with `expected`.
fn check_digest(alias: &str, path: &Path, file: &File, expected: &str) -> Result<(), LoadError> {
    let read_error =
        |source| LoadError::Read { alias: alias.to_owned(), path: path.to_path_buf(), source };
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut offset = 0u64;
    loop {
        // Positioned reads leave the descriptor's offset alone.
        let n = match file.read_at(&mut buf, offset) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(read_error(e)),
        };
        hasher.update(&buf[..n]);
        offset += n as u64;
    }
    let found = hex(&hasher.finalize());
    if found.eq_ignore_ascii_case(expected) {
        return Ok(());
    }
    Err(LoadError::Checksum {
        alias: alias.to_owned(),
        path: path.to_path_buf(),
        expected: expected.to_owned(),
        found,
    })
}

/// What the host uses of a library's root module, whichever 1.x shape the
/// library was built with.
#[derive(Clone, Debug)]
pub(super) struct Root {
    catalogue: extern "C" fn() -> PResult<Catalogue>,
    /// Contract 1.1 and later.
    attach_host: Option<extern "C" fn(HostBox)>,
    /// Contract 1.3 (labelled metrics), in libraries built with the field.
    attach_host_1_3: Option<extern "C" fn(Host13Box)>,
    /// Contract 1.1 and later; `None` for a 1.0 library.
    panic_strategy: Option<PanicStrategy>,
    /// Contract 1.1 and later.
    extensions: Option<extern "C" fn() -> PResult<RVec<ComponentExt>>>,
    /// Contract 1.2 and later.
    extensions_12: Option<extern "C" fn() -> PResult<RVec<ComponentExt12>>>,
    /// Contract 1.3 and later.
    extensions_13: Option<extern "C" fn() -> PResult<RVec<ComponentExt13>>>,
    /// Why the 1.1 root module did not match, when the library loads
    /// through its 1.0 descriptors.
    mismatch_1_1: Option<String>,
    /// Why this host's root module did not match, when the library loads
    /// through an older contract's shape: what to report if the library
    /// then refuses this host as older than its own contract (a library
    /// built against a 1.3 whose layout differs from this host's).
    mismatch_newest: Option<String>,
}

/// Opens the private copy at `copy` with `RTLD_NOW` (so unresolved symbols
/// fail here, not mid-stream), finds abi_stable's header, and lets
/// abi_stable check it.
///
/// `copy` is an absolute path used for no other load (so `dlopen` neither
/// searches `LD_LIBRARY_PATH` or the system folders, nor returns a library
/// it loaded before under that name), in a folder only this user can write.
fn open_root(alias: &str, path: &Path, copy: &Path) -> Result<Root, LoadError> {
    let header = open_header(alias, path, copy)?;
    let incompatible = |e: LibraryError| LoadError::Incompatible {
        alias: alias.to_owned(),
        path: path.to_path_buf(),
        host_contract: CONTRACT_VERSION,
        detail: condense(&e),
    };
    let header = header.upgrade().map_err(incompatible)?;
    Root::init(header).map_err(incompatible)
}

/// `dlopen`s the copy and finds abi_stable's header in it; the library
/// stays mapped for the life of the process.
fn open_header(alias: &str, path: &Path, copy: &Path) -> Result<AbiHeaderRef, LoadError> {
    // SAFETY: loading a library runs its initialisers. Plugins are trusted
    // code by design (DESIGN.md: operators choose which libraries to load);
    // the ABI checks below keep us from calling into an incompatible one.
    let library = unsafe { UnixLibrary::open(Some(copy), RTLD_NOW | RTLD_LOCAL) }.map_err(|e| {
        LoadError::NotALibrary {
            alias: alias.to_owned(),
            path: path.to_path_buf(),
            detail: dl_detail(&e),
        }
    })?;
    // SAFETY: the symbol, when present, is abi_stable's `LibHeader` static,
    // whose first field is an `AbiHeader`; `AbiHeaderRef` is a reference to
    // it. abi_stable's own loader reads it the same way.
    let header =
        unsafe { library.get::<AbiHeaderRef>(ROOT_MODULE_LOADER_NAME_WITH_NUL.as_bytes()) }
            .map(|symbol| *symbol)
            .map_err(|_| LoadError::NotAPlugin {
                alias: alias.to_owned(),
                path: path.to_path_buf(),
            })?;
    // Never dlclose: vtables and allocators of plugin-made values must stay mapped.
    std::mem::forget(library);
    Ok(header)
}

impl Root {
    /// The root module in `header`, in the newest shape it checks out as.
    ///
    /// abi_stable accepts a library whose prefix types have at least the
    /// host's fields, never fewer: a 1.0 library fails the check against
    /// this host's 1.1 root module. So check the newest shape first, then
    /// the 1.0 shape, which every 1.x library has; a library that fails
    /// both is reported against the 1.0 shape, the one every squall plugin
    /// shares. The same holds between the later minors: newest shape, then
    /// 1.2, then 1.1, then 1.0.
    fn init(header: &'static LibHeader) -> Result<Root, LibraryError> {
        let newest = match header.init_root_module::<PluginRoot_Ref>() {
            Ok(root) => return Ok(Root::newest(root)),
            Err(e) => e,
        };
        Root::older(header).map(|root| Root { mismatch_newest: Some(condense(&newest)), ..root })
    }

    /// The root module in `header` in the newest older shape it checks out as.
    fn older(header: &'static LibHeader) -> Result<Root, LibraryError> {
        if let Ok(root) = header.init_root_module::<v1_2_root::PluginRoot_Ref>() {
            return Ok(Root {
                catalogue: root.catalogue(),
                attach_host: root.attach_host(),
                panic_strategy: root.panic_strategy(),
                extensions: root.extensions(),
                extensions_12: root.extensions_1_2(),
                extensions_13: None,
                attach_host_1_3: None,
                mismatch_1_1: None,
                mismatch_newest: None,
            });
        }
        match header.init_root_module::<v1_1::PluginRoot_Ref>() {
            Ok(root) => Ok(Root {
                catalogue: root.catalogue(),
                attach_host: root.attach_host(),
                panic_strategy: root.panic_strategy(),
                extensions: root.extensions(),
                extensions_12: None,
                extensions_13: None,
                attach_host_1_3: None,
                mismatch_1_1: None,
                mismatch_newest: None,
            }),
            Err(mismatch_1_1) => {
                header.init_root_module::<v1_0::PluginRoot_Ref>().map(|root| Root {
                    catalogue: root.catalogue(),
                    attach_host: None,
                    panic_strategy: None,
                    extensions: None,
                    extensions_12: None,
                    extensions_13: None,
                    attach_host_1_3: None,
                    mismatch_1_1: Some(condense(&mismatch_1_1)),
                    mismatch_newest: None,
                })
            }
        }
    }

    /// A root module of this host's contract, every field present.
    fn newest(root: PluginRoot_Ref) -> Root {
        Root {
            catalogue: root.catalogue(),
            attach_host: root.attach_host(),
            panic_strategy: root.panic_strategy(),
            extensions: root.extensions(),
            extensions_12: root.extensions_1_2(),
            extensions_13: root.extensions_1_3(),
            attach_host_1_3: root.attach_host_1_3(),
            mismatch_1_1: None,
            mismatch_newest: None,
        }
    }
}

/// What `dlopen` said, without the path it repeats.
fn dl_detail(e: &libloading::Error) -> String {
    let text = e.to_string();
    // dlerror() repeats the path; keep the part after the last ": ".
    text.rsplit(": ").next().unwrap_or(&text).to_owned()
}

/// Condenses an abi_stable error into one line.
///
/// abi_stable's layout report runs to tens of kilobytes; users need the first
/// mismatching item: `path.to.field: reason (expected X, found Y)`. The full
/// report goes to the debug log.
fn condense(e: &LibraryError) -> String {
    match e {
        LibraryError::IncompatibleVersionNumber { expected_version, actual_version, .. } => {
            format!(
                "the library was built against contract {actual_version}; this host speaks \
                 contract {CONTRACT_VERSION} and loads libraries of contract {}.x (from {expected_version})",
                expected_version.major
            )
        }
        LibraryError::InvalidAbiHeader(_) => {
            "the library was built with an incompatible abi_stable version".to_owned()
        }
        LibraryError::AbiInstability(_) => {
            let full = e.to_string();
            tracing::debug!(report = %full, "full abi_stable layout report");
            first_layout_mismatch(&full).unwrap_or_else(|| "type layouts differ".to_owned())
        }
        other => {
            let text = other.to_string();
            text.lines().find(|l| !l.trim().is_empty()).unwrap_or("unknown error").trim().to_owned()
        }
    }
}

/// Finds the first `Error:` entry in abi_stable's layout report and the field
/// path that leads to it.
fn first_layout_mismatch(report: &str) -> Option<String> {
    let mut path: Vec<&str> = Vec::new();
    let mut collecting = false;
    let mut lines = report.lines().map(str::trim);
    while let Some(line) = lines.next() {
        if line.ends_with("error(s)inside:") {
            collecting = true;
            path.clear();
        } else if line == "Layout of expected type:" {
            collecting = false;
        } else if collecting {
            if let Some(field) = line.strip_prefix("field_name:") {
                path.push(field.trim());
            }
        } else if let Some(kind) = line.strip_prefix("Error:") {
            // The report continues with "Expected:", the value, "Found:", the value.
            let rest: Vec<&str> = lines.by_ref().take(4).collect();
            let expected = rest.get(1).copied().unwrap_or("?");
            let found = rest.get(3).copied().unwrap_or("?");
            let at = if path.is_empty() { "root module".to_owned() } else { path.join(".") };
            return Some(format!("{at}: {} (expected {expected}, found {found})", kind.trim()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;

    use squall_plugin_api::PluginError;

    use super::*;

    #[test]
    fn missing_file_is_reported_with_alias_and_path() {
        let e = load_library("ex", Path::new("/nonexistent/libnope.so"), None).unwrap_err();
        assert_eq!(e.to_string(), "plugin \"ex\": /nonexistent/libnope.so does not exist");
    }

    #[test]
    fn a_missing_library_next_to_its_rlib_gets_a_hint_about_crate_type() {
        let dir = std::env::temp_dir().join(format!("squall-rlib-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("libmine.rlib"), b"!<arch>\n").unwrap();
        let e = load_library("mine", &dir.join("libmine.so"), None).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
        assert!(e.contains("crate-type = [\"cdylib\"]") && e.contains("libmine.rlib"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn naming_an_rlib_says_to_build_a_cdylib() {
        let dir = scratch("rlib-named");
        let path = dir.join("libmine.rlib");
        std::fs::write(&path, b"!<arch>\n").unwrap();
        let e = load_library("mine", &path, None).unwrap_err().to_string();
        assert!(e.contains("add crate-type = [\"cdylib\"]") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn a_text_file_is_not_a_library() {
        let dir = std::env::temp_dir().join(format!("squall-loader-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("libfake.so");
        std::fs::write(&path, "not an ELF file").unwrap();
        let e = load_library("fake", &path, None).unwrap_err();
        assert!(matches!(e, LoadError::NotALibrary { .. }), "{e}");
        assert!(!e.to_string().contains('\n'));
    }

    #[test]
    fn a_truncated_elf_file_is_refused_in_one_line_before_it_is_copied() {
        let dir = scratch("truncated-elf");
        let path = dir.join("libcut.so");
        // An ELF64 header whose one PT_LOAD segment covers bytes 0..8192 of
        // a file of 4096 bytes.
        let mut bytes = vec![0u8; 4096];
        bytes[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
        bytes[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        bytes[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        bytes[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        bytes[64..68].copy_from_slice(&1u32.to_le_bytes());
        bytes[64 + 32..64 + 40].copy_from_slice(&8192u64.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let private = dir.join("private");
        let e = load_library_in(&private, "cut", &path, None, LoadOptions::default()).unwrap_err();
        assert!(matches!(e, LoadError::Truncated { len: 4096, .. }), "{e}");
        assert_eq!(
            e.to_string(),
            format!(
                "plugin \"cut\": {} is truncated: its loadable segment 0 (PT_LOAD, file bytes \
                 0..8192) ends past the end of the file (4096 bytes); refusing to load it",
                path.display()
            )
        );
        assert!(!private.exists(), "nothing was copied");
    }

    #[test]
    fn digest_mismatch_is_refused_before_loading() {
        let dir = std::env::temp_dir().join(format!("squall-digest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("libx.so");
        std::fs::write(&path, "abc").unwrap();
        let e = load_library("x", &path, Some(&"0".repeat(64))).unwrap_err();
        assert!(e.to_string().contains("ba7816bf"), "{e}");
    }

    /// A fresh private folder for one test.
    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("squall-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = scratch("fifo");
        let path = dir.join("libfifo.so");
        let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
        for pin in [None, Some("0".repeat(64))] {
            let e = load_library("f", &path, pin.as_deref()).unwrap_err();
            assert!(matches!(e, LoadError::NotRegular { .. }), "{e}");
            assert!(e.to_string().contains("is a FIFO (named pipe), not a regular file"), "{e}");
        }
    }

    #[test]
    fn a_pinned_character_device_is_refused_before_it_is_read() {
        let e = load_library("z", Path::new("/dev/zero"), Some(&"0".repeat(64))).unwrap_err();
        assert!(matches!(e, LoadError::NotRegular { kind: "a character device", .. }), "{e}");
    }

    #[test]
    fn a_directory_is_refused() {
        let dir = scratch("dir-as-lib");
        let e = load_library("d", &dir, None).unwrap_err();
        assert!(e.to_string().contains("is a directory, not a regular file"), "{e}");
    }

    #[test]
    fn a_symlink_loop_says_so() {
        let dir = scratch("loop");
        std::os::unix::fs::symlink(dir.join("b.so"), dir.join("a.so")).unwrap();
        std::os::unix::fs::symlink(dir.join("a.so"), dir.join("b.so")).unwrap();
        let e = load_library("l", &dir.join("a.so"), None).unwrap_err();
        assert!(matches!(e, LoadError::SymlinkLoop { .. }), "{e}");
        assert!(e.to_string().contains("symbolic link loop"), "{e}");
    }

    #[test]
    fn a_file_writable_by_others_is_refused_unless_allowed() {
        let dir = scratch("writable-file");
        let path = dir.join("libw.so");
        std::fs::write(&path, "not an ELF file").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = load_library("w", &path, None).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, LoadError::Unsafe { .. }), "{text}");
        assert!(text.contains("is writable by group and others"), "{text}");
        assert!(text.contains(&format!("chmod go-w {}", path.display())), "{text}");
        let allowed = LoadOptions { allow_writable: true };
        let e = load_library_with("w", &path, None, allowed).unwrap_err();
        assert!(matches!(e, LoadError::NotALibrary { .. }), "allowed, then dlopen refuses: {e}");
    }

    #[test]
    fn a_folder_writable_by_others_is_refused_but_a_sticky_one_is_not() {
        let dir = scratch("writable-dir");
        let sub = dir.join("open");
        std::fs::create_dir(&sub).unwrap();
        let path = sub.join("libw.so");
        std::fs::write(&path, "not an ELF file").unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = load_library("w", &path, None).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(&format!("{} is writable by group and others", sub.display())));
        assert!(text.contains(&format!("chmod go-w {}, ", sub.display())), "{text}");
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let e = load_library("w", &path, None).unwrap_err();
        assert!(matches!(e, LoadError::NotALibrary { .. }), "a sticky folder is accepted: {e}");
    }

    #[test]
    fn a_library_owned_by_another_user_is_refused() {
        let dir = scratch("foreign-owner");
        let path = dir.join("libf.so");
        std::fs::write(&path, "not an ELF file").unwrap();
        // Only root may give a file away; elsewhere there is nothing to test.
        if std::os::unix::fs::chown(&path, Some(54_321), None).is_err() {
            return;
        }
        let e = load_library("f", &path, None).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("is owned by uid 54321, neither root nor you"), "{text}");
        assert!(text.contains(&format!("fix: chown root (or yourself) {}", path.display())));
    }

    #[test]
    fn a_symlink_into_a_writable_folder_is_refused() {
        let dir = scratch("writable-target");
        let open = dir.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::write(open.join("libw.so"), "not an ELF file").unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o775)).unwrap();
        let link = dir.join("libw.so");
        std::os::unix::fs::symlink(open.join("libw.so"), &link).unwrap();
        let e = load_library("w", &link, None).unwrap_err();
        assert!(e.to_string().contains("is writable by group"), "{e}");
    }

    #[test]
    fn control_characters_in_paths_are_escaped() {
        let e = load_library("x", Path::new("/nonexistent/a\nerror: forged\u{1b}[2J.so"), None)
            .unwrap_err();
        let text = e.to_string();
        assert!(!text.contains('\n') && !text.contains('\u{1b}'), "{text}");
        assert!(text.contains("a\\nerror: forged\\u{1b}[2J.so"), "{text}");
    }

    #[test]
    fn layout_report_is_condensed_to_the_first_mismatch() {
        let report = "blah\n  3 error(s)inside:\n field_name: catalogue\n field_name: __returns\nLayout of expected type:\n...\nError: mismatched type\nExpected:\n  u64\nFound:\n  u32\nError: other\n";
        assert_eq!(
            first_layout_mismatch(report).unwrap(),
            "catalogue.__returns: mismatched type (expected u64, found u32)"
        );
    }
    #[test]
    fn a_library_that_refuses_this_host_after_a_layout_fallback_is_reported_incompatible() {
        let path = Path::new("/plugins/libx.so");
        let older = || PluginError::new(ErrorKind::CONTRACT, "this host is older");
        let mismatch = "extensions_1_3: field missing";
        // Read through an older shape, it refuses this host as older: what
        // does not match is its newest part, and that is what is reported.
        let e = catalogue_failure("x", path, Some(mismatch), older());
        assert!(matches!(e, LoadError::Incompatible { .. }), "{e}");
        assert!(
            e.to_string().ends_with(&format!("(contract {CONTRACT_VERSION}): {mismatch}")),
            "{e}"
        );
        // Read through this host's shape, its refusal is its own to make.
        let e = catalogue_failure("x", path, None, older());
        assert!(
            e.to_string().ends_with("failed to list its components: this host is older"),
            "{e}"
        );
        // Any other failure of the catalogue is the library's error.
        let failed = PluginError::new(ErrorKind::RUNTIME, "no config");
        let e = catalogue_failure("x", path, Some(mismatch), failed);
        assert!(e.to_string().ends_with("failed to list its components: no config"), "{e}");
    }
}
