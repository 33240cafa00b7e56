//! HTTPS with rustls (the `ring` provider): a certificate chain and a key
//! from PEM files, read again on SIGHUP. A reload that fails (a missing or
//! mismatched file) is logged and the endpoint keeps the certificate it had.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use rustls::pki_types::pem::{self, PemObject as _};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;

use crate::files::ReadError;

/// Why the TLS files cannot serve, or cannot be watched. Each renders as
/// one line naming the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file cannot be read.
    #[error("{0}")]
    Read(#[from] ReadError),
    /// The certificate file is not PEM.
    #[error("the TLS certificate {} is not PEM: {cause}", path.display())]
    NotPem {
        /// The certificate file.
        path: PathBuf,
        /// What the PEM reader said.
        cause: pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("the TLS certificate {} holds no certificate", path.display())]
    NoCertificate {
        /// The certificate file.
        path: PathBuf,
    },
    /// The key file holds no usable key.
    #[error("cannot read the TLS key {}: {cause}", path.display())]
    Key {
        /// The key file.
        path: PathBuf,
        /// What the PEM reader said.
        cause: pem::Error,
    },
    /// rustls refused its protocol versions.
    #[error("TLS: {0}")]
    Rustls(rustls::Error),
    /// The key does not fit the certificate.
    #[error("the TLS key {} does not fit the certificate {}: {cause}", key.display(), cert.display())]
    Mismatch {
        /// The key file.
        key: PathBuf,
        /// The certificate file.
        cert: PathBuf,
        /// What rustls said.
        cause: rustls::Error,
    },
    /// SIGHUP cannot be watched, or the reload thread cannot start.
    #[error("cannot {what}: {cause}")]
    Watch {
        /// "watch SIGHUP for the TLS files", "start the TLS reload thread".
        what: &'static str,
        /// The system's answer.
        cause: std::io::Error,
    },
}

/// The certificate chain and key files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl TlsFiles {
    /// Reads and checks both files: the server configuration they make.
    /// Each must be a regular file of at most
    /// [`PEM_FILE_CAP`](crate::files::PEM_FILE_CAP) bytes (see [`crate::files`]).
    ///
    /// # Errors
    /// A file that is missing, not a regular file, too large or cannot be
    /// read, holds no certificate or key, or a key that does not match the
    /// certificate.
    pub fn config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let cert = crate::files::read_capped(
            &self.cert,
            "the TLS certificate",
            crate::files::PEM_FILE_CAP,
        )?;
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert)
            .collect::<Result<_, _>>()
            .map_err(|cause| TlsError::NotPem { path: self.cert.clone(), cause })?;
        if certs.is_empty() {
            return Err(TlsError::NoCertificate { path: self.cert.clone() });
        }
        let key = crate::files::read_capped(&self.key, "the TLS key", crate::files::PEM_FILE_CAP)?;
        let key = PrivateKeyDer::from_pem_slice(&key)
            .map_err(|cause| TlsError::Key { path: self.key.clone(), cause })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Rustls)?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|cause| TlsError::Mismatch {
                key: self.key.clone(),
                cert: self.cert.clone(),
                cause,
            })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The configuration connections are accepted with, replaced on SIGHUP.
#[derive(Debug)]
pub struct TlsState {
    files: TlsFiles,
    config: RwLock<Arc<ServerConfig>>,
}

impl TlsState {
    /// Loads `files` and starts the thread that reloads them on SIGHUP.
    ///
    /// # Errors
    /// The files are unusable ([`TlsFiles::config`]) or the thread cannot start.
    pub fn load(files: TlsFiles) -> Result<Arc<Self>, TlsError> {
        let config = files.config()?;
        let state = Arc::new(Self { files, config: RwLock::new(config) });
        let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGHUP])
            .map_err(|cause| TlsError::Watch { what: "watch SIGHUP for the TLS files", cause })?;
        let weak = Arc::downgrade(&state);
        std::thread::Builder::new()
            .name("__http-tls".into())
            .spawn(move || {
                for _ in signals.forever() {
                    let Some(state) = weak.upgrade() else { return };
                    state.reload();
                }
            })
            .map_err(|cause| TlsError::Watch { what: "start the TLS reload thread", cause })?;
        Ok(state)
    }

    /// Reads the files again; on failure keeps the current certificate.
    pub fn reload(&self) {
        match self.files.config() {
            Ok(config) => {
                if let Ok(mut current) = self.config.write() {
                    *current = config;
                }
                tracing::info!(cert = %self.files.cert.display(), "TLS certificate reloaded");
            }
            Err(e) => tracing::error!("TLS reload failed, keeping the current certificate: {e}"),
        }
    }

    /// The configuration for the next connection.
    pub fn config(&self) -> Arc<ServerConfig> {
        match self.config.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}
