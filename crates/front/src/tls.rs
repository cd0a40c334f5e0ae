//! TLS for a server behind the front: the operator's certificate chain and private key, read
//! from PEM files once, when the server starts.
//!
//! What this module promises: [`Tls::read`] gives a rustls configuration (TLS 1.2 and 1.3,
//! the ring provider, no client certificates) with the certificate chain as PEM (public: a
//! client on this machine may be told to trust exactly it), or says, naming the file, why it
//! cannot: a file that cannot be read, holds no certificate or no private key, or a key that
//! does not belong to the certificate.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why the TLS configuration cannot be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError(pub String);

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsError {}

/// A server's TLS: its configuration and its certificate chain.
#[derive(Clone)]
pub struct Tls {
    pub config: Arc<rustls::ServerConfig>,
    /// The certificate chain, as PEM.
    pub chain_pem: String,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// The TLS of the certificate chain in `cert` and the private key in `key` (PEM files;
    /// the chain's first certificate is the server's).
    pub fn read(cert: &Path, key: &Path) -> Result<Tls, TlsError> {
        let config = server_config(cert, key)?;
        let chain = CertificateDer::pem_file_iter(cert)
            .map_err(|error| TlsError(format!("{}: {error}", cert.display())))?
            .filter_map(Result::ok)
            .map(|der| pem("CERTIFICATE", &der))
            .collect();
        Ok(Tls {
            config,
            chain_pem: chain,
        })
    }
}

/// `der` as one PEM block labelled `label`.
fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut text = format!("-----BEGIN {label}-----\n");
    for line in encoded.as_bytes().chunks(64) {
        text.push_str(&String::from_utf8_lossy(line));
        text.push('\n');
    }
    text.push_str(&format!("-----END {label}-----\n"));
    text
}

/// The server configuration for the certificate chain in `cert` and the private key in `key`.
fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|error| {
            TlsError(format!(
                "the certificate file {} cannot be read: {error}",
                cert.display()
            ))
        })?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| {
            TlsError(format!(
                "the certificate file {} is not PEM: {error}",
                cert.display()
            ))
        })?;
    if chain.is_empty() {
        return Err(TlsError(format!(
            "the certificate file {} holds no certificate",
            cert.display()
        )));
    }
    let private_key = PrivateKeyDer::from_pem_file(key).map_err(|error| {
        TlsError(format!(
            "the key file {} holds no private key in PEM: {error}",
            key.display()
        ))
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| TlsError(format!("TLS cannot be set up: {error}")))?
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .map_err(|error| {
            TlsError(format!(
                "the key in {} does not fit the certificate in {}: {error}",
                key.display(),
                cert.display()
            ))
        })?;
    Ok(Arc::new(config))
}
