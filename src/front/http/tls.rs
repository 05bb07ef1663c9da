//! HTTPS on the client side: pingora's rustls listener with a certificate
//! resolver that re-reads the certificate and key files when they change
//! (looked at most every `tls.reload_check_ms`), so a renewed certificate
//! is served without a restart. A broken new pair is refused (logged) and
//! the previous one kept.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use pingora_rustls::sign::CertifiedKey;
use pingora_rustls::{ClientHello, CryptoProvider, ResolvesServerCert};

/// Serves the current certificate; reloads it when its files change.
#[derive(Debug)]
pub(crate) struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    check_every: Duration,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    checked: Instant,
    modified: (Option<SystemTime>, Option<SystemTime>),
    current: Arc<CertifiedKey>,
}

impl ReloadingCert {
    /// Loads the pair now (an error here stops startup).
    pub(crate) fn new(
        cert: &Path,
        key: &Path,
        check_every: Duration,
    ) -> Result<ReloadingCert, String> {
        pingora_rustls::install_default_crypto_provider();
        let current = load(cert, key)?;
        Ok(ReloadingCert {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            check_every,
            state: Mutex::new(State {
                checked: Instant::now(),
                modified: modified(cert, key),
                current: Arc::new(current),
            }),
        })
    }

    fn current(&self) -> Arc<CertifiedKey> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.checked.elapsed() >= self.check_every {
            state.checked = Instant::now();
            let now = modified(&self.cert, &self.key);
            if now != state.modified {
                match load(&self.cert, &self.key) {
                    Ok(pair) => {
                        state.current = Arc::new(pair);
                        state.modified = now;
                        tracing::info!(cert = %self.cert.display(), "TLS certificate reloaded");
                    }
                    Err(error) => {
                        tracing::error!(%error, "new TLS certificate refused; keeping the previous one")
                    }
                }
            }
        }
        state.current.clone()
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn modified(cert: &Path, key: &Path) -> (Option<SystemTime>, Option<SystemTime>) {
    let at = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    (at(cert), at(key))
}

/// A certificate chain and its key from PEM files, checked to match.
fn load(cert: &Path, key: &Path) -> Result<CertifiedKey, String> {
    let text = |p: &Path| {
        p.to_str()
            .map(str::to_string)
            .ok_or("path is not UTF-8".to_string())
    };
    let (certs, key) = pingora_rustls::load_certs_and_key_files(&text(cert)?, &text(key)?)
        .map_err(|e| format!("cannot read {} / {}: {e}", cert.display(), key.display()))?
        .ok_or_else(|| {
            format!(
                "no certificate or key in {} / {}",
                cert.display(),
                key.display()
            )
        })?;
    let provider = CryptoProvider::get_default().ok_or("no TLS crypto provider")?;
    CertifiedKey::from_der(certs, key, provider)
        .map_err(|e| format!("certificate and key do not fit: {e}"))
}
