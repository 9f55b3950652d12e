//! The TLS crypto provider (feature `tls`).

/// Installs rustls's `ring` provider as the process default unless the process already chose
/// one. rustls 0.23 needs a process-wide provider once more than one could be used, and would
/// panic at the first TLS connection without it; the application's own choice, made before the
/// limiter is built, wins.
pub(crate) fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may install one in between: either way a provider is in place.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
