//! The HTTPS client behind every SDK client here ([`crate::aws::config::sdk_config`]).
//!
//! The SDK's default client reads the system trust store when the first client
//! is built: on Debian every file under /etc/ssl/certs, over half of a cold
//! start's CPU (bench/README.md). This one trusts Mozilla's roots built in,
//! from `webpki-root-certs` (maintained by the rustls project): the set the
//! system stores of Lambda's images are made from, so every endpoint the
//! default client reached is still reached, in every partition. The five roots
//! Amazon Trust Services names for custom trust stores would save about
//! 1.7 ms of init, but no document says every endpoint (China's, a
//! sovereign cloud's) chains to them; a wrong guess would fail only there.
//!
//! Who needs other roots (a TLS-inspecting proxy, an endpoint with a private
//! CA, a partition whose endpoints chain elsewhere) names them as for other
//! tools: `AWS_CA_BUNDLE` (a PEM file, as for the AWS CLI and the other SDKs;
//! the Rust SDK does not read it), otherwise `SSL_CERT_FILE` (a PEM file) and
//! `SSL_CERT_DIR` (`:`-separated directories), which the SDK's default client
//! honours. They *replace* the built-in roots, as they replace the system store
//! for OpenSSL, curl, the AWS CLI and the SDK's default client: a bundle means
//! the same here as elsewhere, and can narrow trust as well as widen it. An
//! empty variable counts as unset. A bundle that cannot be read, or holds no
//! certificate that can be a trust anchor, is a configuration error: never a
//! panic, never a silent fallback.
//!
//! rustls runs on ring rather than aws-lc: the same cipher suites, a smaller
//! binary (bench/README.md, "Trust store and size").

use std::ffi::OsString;
use std::path::Path;

use aws_smithy_http_client::proxy::ProxyConfig;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode, TlsContext, TrustStore};
use aws_smithy_http_client::ConnectorBuilder;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use rustls_pki_types::CertificateDer;

use crate::vocab::error::LockError;

/// The roots AWS's own endpoints chain to (Amazon Trust Services' list for
/// custom trust stores): the built-in set must hold them.
pub const AMAZON_TRUST_SERVICES_ROOTS: [&str; 5] = [
    "Amazon Root CA 1",
    "Amazon Root CA 2",
    "Amazon Root CA 3",
    "Amazon Root CA 4",
    "Starfield Services Root Certificate Authority - G2",
];

/// Mozilla's roots. Not checked with `usable`: the crate's tests convert every
/// one to a webpki trust anchor.
pub fn built_in_roots() -> Vec<CertificateDer<'static>> {
    webpki_root_certs::TLS_SERVER_ROOT_CERTS.to_vec()
}

/// The HTTPS client, trusting the roots the environment names, or the built-in ones.
pub fn https_client() -> Result<SharedHttpClient, LockError> {
    client_trusting(&roots(|name| std::env::var_os(name))?)
}

/// An HTTP client that fails every request with `error`: what
/// [`crate::aws::config::sdk_config`] hands out when the trust store is misconfigured,
/// so that each call says why instead of the process panicking.
pub fn refusing_client(error: &LockError) -> SharedHttpClient {
    SharedHttpClient::new(Refuse(error.to_string()))
}

fn client_trusting(roots: &[CertificateDer<'_>]) -> Result<SharedHttpClient, LockError> {
    // The SDK takes roots as PEM only, and panics on one rustls cannot use as a
    // trust anchor: every certificate is checked here first (`usable`).
    let mut store = TrustStore::empty().with_native_roots(false);
    for cert in roots {
        let base64 = aws_smithy_types::base64::encode(cert);
        store.add_pem_certificate(format!(
            "-----BEGIN CERTIFICATE-----\n{base64}\n-----END CERTIFICATE-----\n"
        ));
    }
    let context = TlsContext::builder()
        .with_trust_store(store)
        .build()
        .map_err(|error| misconfigured(format!("TLS settings: {error}")))?;
    // As the SDK's default client builds its connectors (aws-smithy-runtime's
    // default_https_client): the call's timeouts and sleep, and the proxy
    // from HTTPS_PROXY/HTTP_PROXY/NO_PROXY, which `build_https` would leave
    // off: a user behind a proxy (the reason for a custom CA, often) needs it.
    Ok(
        aws_smithy_http_client::Builder::new().build_with_connector_fn(
            move |settings, components| {
                let mut connector = ConnectorBuilder::default()
                    .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
                    .tls_context(context.clone());
                connector.set_connector_settings(settings.cloned());
                if let Some(components) = components {
                    connector.set_sleep_impl(components.sleep_impl());
                }
                connector.set_proxy_config(Some(ProxyConfig::from_env()));
                connector.build()
            },
        ),
    )
}

/// The roots to trust: from the first variable set (`SSL_CERT_FILE` and
/// `SSL_CERT_DIR` together, as OpenSSL reads them), else the built-in ones.
fn roots(
    lookup: impl Fn(&str) -> Option<OsString>,
) -> Result<Vec<CertificateDer<'static>>, LockError> {
    let set = |name: &str| lookup(name).filter(|value| !value.is_empty());
    let sources: Vec<(&str, OsString)> = match set("AWS_CA_BUNDLE") {
        Some(bundle) => vec![("AWS_CA_BUNDLE", bundle)],
        None => ["SSL_CERT_FILE", "SSL_CERT_DIR"]
            .into_iter()
            .filter_map(|name| set(name).map(|value| (name, value)))
            .collect(),
    };
    if sources.is_empty() {
        return Ok(built_in_roots());
    }
    let mut roots = Vec::new();
    for (name, value) in &sources {
        let paths: Vec<_> = match *name {
            "SSL_CERT_DIR" => std::env::split_paths(value)
                .filter(|p| !p.as_os_str().is_empty())
                .collect(),
            _ => vec![value.into()],
        };
        for path in paths {
            roots.extend(read_roots(name, &path)?);
        }
    }
    if roots.is_empty() {
        let named: Vec<String> = sources
            .iter()
            .map(|(name, value)| format!("{name}={}", value.to_string_lossy()))
            .collect();
        return Err(misconfigured(format!(
            "{} holds no PEM certificate that can be a trusted root",
            named.join(" and ")
        )));
    }
    Ok(roots)
}

/// The usable certificates of one file or directory; any error reading it fails.
fn read_roots(name: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, LockError> {
    let (file, dir) = match name {
        "SSL_CERT_DIR" => (None, Some(path)),
        _ => (Some(path), None),
    };
    let found = rustls_native_certs::load_certs_from_paths(file, dir);
    match found.errors.first() {
        Some(error) => Err(misconfigured(format!("{name}={}: {error}", path.display()))),
        None => Ok(found.certs.into_iter().filter(usable).collect()),
    }
}

/// A certificate rustls accepts as a trust anchor (the SDK would panic on another).
fn usable(cert: &CertificateDer<'_>) -> bool {
    webpki::anchor_from_trusted_cert(cert).is_ok()
}

fn misconfigured(detail: String) -> LockError {
    LockError::StoreMisconfigured {
        detail: format!("trust store: {detail}"),
    }
}

#[derive(Clone, Debug)]
struct Refuse(String);

impl HttpConnector for Refuse {
    fn call(&self, _request: HttpRequest) -> HttpConnectorFuture {
        HttpConnectorFuture::ready(Err(ConnectorError::user(self.0.clone().into())))
    }
}

impl HttpClient for Refuse {
    fn http_connector(
        &self,
        _: &HttpConnectorSettings,
        _: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(self.clone())
    }
}
