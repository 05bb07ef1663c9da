//! Service discovery for pingora-load-balancing: every configured
//! `HOST:PORT` is resolved on each pass, and every address it resolves to
//! is a backend. IP literals resolve to themselves; a Kubernetes headless
//! service name resolves to one address per ready pod.

use std::collections::{BTreeSet, HashMap};

use async_trait::async_trait;
use pingora::lb::discovery::ServiceDiscovery;
use pingora::lb::Backend;
use pingora_core::{Error as PingoraError, ErrorType, Result as PingoraResult};

/// The configured addresses, shared with the pool (a reload replaces them).
pub(crate) type Addresses = std::sync::Arc<std::sync::RwLock<Vec<String>>>;

pub(crate) struct Discovery {
    addresses: Addresses,
}

impl Discovery {
    pub(crate) fn new(addresses: Addresses) -> Discovery {
        Discovery { addresses }
    }
}

#[async_trait]
impl ServiceDiscovery for Discovery {
    /// Fails (keeping the previous membership) when any name does not
    /// resolve: a DNS hiccup must not drain healthy backends.
    async fn discover(&self) -> PingoraResult<(BTreeSet<Backend>, HashMap<u64, bool>)> {
        let mut backends = BTreeSet::new();
        let addresses = self.addresses.read().map(|a| a.clone()).unwrap_or_default();
        for address in &addresses {
            let resolved = tokio::net::lookup_host(address.as_str())
                .await
                .map_err(|e| {
                    PingoraError::explain(
                        ErrorType::ConnectError,
                        format!("cannot resolve upstream {address}: {e}"),
                    )
                })?;
            for addr in resolved {
                backends.insert(Backend {
                    addr: pingora::protocols::l4::socket::SocketAddr::Inet(addr),
                    weight: 1,
                    ext: Default::default(),
                });
            }
        }
        Ok((backends, HashMap::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn names_resolve_to_every_address_and_literals_to_themselves() {
        let d = Discovery::new(Addresses::new(
            vec!["127.0.0.1:9001".into(), "localhost:9002".into()].into(),
        ));
        let (backends, _) = d.discover().await.expect("resolves");
        let text: Vec<String> = backends.iter().map(|b| b.addr.to_string()).collect();
        assert!(text.contains(&"127.0.0.1:9001".to_string()), "{text:?}");
        assert!(text.iter().any(|a| a.ends_with(":9002")), "{text:?}");
    }

    /// An address that does not resolve fails the whole pass, so the
    /// previous membership stays. The bad entry has no port: the standard
    /// library rejects it before asking the system resolver, so the test
    /// makes no DNS lookup (`name.invalid:1` would query the resolver).
    #[tokio::test]
    async fn an_unresolvable_address_fails_the_pass_and_keeps_the_previous_set() {
        let addresses = Addresses::new(vec!["127.0.0.1:9001".into()].into());
        let backends = pingora::lb::Backends::new(Box::new(Discovery::new(addresses.clone())));
        backends.update(|_| {}).await.expect("first pass resolves");
        *addresses.write().unwrap() = vec!["127.0.0.2:9001".into(), "no-such-host.invalid".into()];
        assert!(backends.update(|_| {}).await.is_err());
        let kept: Vec<String> = backends
            .get_backend()
            .iter()
            .map(|b| b.addr.to_string())
            .collect();
        assert_eq!(kept, ["127.0.0.1:9001"]);
    }
}
