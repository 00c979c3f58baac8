//! TLS: the server's rustls configuration, and [`Stream`], the byte stream a
//! connection runs over — plain TCP or TLS on TCP.
//!
//! `tls-port` opens listeners beside the plain ones (on the same `bind` addresses), so
//! a server can speak both at once. The certificate chain and key come from
//! `tls-cert-file` and `tls-key-file`; with `tls-auth-clients yes` a client must
//! present a certificate signed by a CA of `tls-ca-cert-file` (mutual TLS), with
//! `optional` a certificate is checked when given. `tls-protocols` picks TLSv1.2
//! and/or TLSv1.3. The crypto is rustls's `ring` provider.
//!
//! The handshake runs in the connection's own task, bounded by [`HANDSHAKE_TIMEOUT`],
//! so a client that opens a TLS connection and stalls costs a task and a socket for
//! that long, and nothing else.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::{Context as _, bail};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::config::security::{Tls, TlsAuthClients, parse_protocols};

/// How long a client may take to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A client connection's byte stream.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// The socket's descriptor.
    pub fn socket(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.tcp().as_fd()
    }

    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref().0,
        }
    }

    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.tcp().set_nodelay(on)
    }

    /// The socket's file descriptor (CLIENT LIST's `fd=`), -1 where there is none.
    pub fn fd(&self) -> i32 {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            self.tcp().as_raw_fd()
        }
        #[cfg(not(unix))]
        {
            -1
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The acceptor for `tls-port`, or `None` when TLS is off.
pub fn acceptor(tls: &Tls) -> anyhow::Result<Option<TlsAcceptor>> {
    if tls.port == 0 {
        return Ok(None);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (v12, v13) = parse_protocols(&tls.protocols).map_err(anyhow::Error::msg)?;
    let mut versions = Vec::new();
    if v12 {
        versions.push(&rustls::version::TLS12);
    }
    if v13 {
        versions.push(&rustls::version::TLS13);
    }
    let (Some(cert_file), Some(key_file)) = (&tls.cert_file, &tls.key_file) else {
        bail!("Failed to configure TLS: tls-cert-file and tls-key-file are required with tls-port");
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_file)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .with_context(|| format!("Failed to load certificate: {}", cert_file.display()))?;
    if certs.is_empty() {
        bail!(
            "Failed to load certificate: {}: no certificate found",
            cert_file.display()
        );
    }
    let key = PrivateKeyDer::from_pem_file(key_file)
        .with_context(|| format!("Failed to load private key: {}", key_file.display()))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .context("Failed to configure TLS")?;
    let builder = match tls.auth_clients {
        TlsAuthClients::No => builder.with_no_client_auth(),
        auth @ (TlsAuthClients::Yes | TlsAuthClients::Optional) => {
            let Some(ca_file) = &tls.ca_cert_file else {
                bail!(
                    "Failed to configure TLS: tls-ca-cert-file is required to check client \
                     certificates (or set tls-auth-clients no)"
                );
            };
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(ca_file).with_context(|| {
                format!(
                    "Failed to load CA certificate(s) file: {}",
                    ca_file.display()
                )
            })? {
                let cert = cert.with_context(|| {
                    format!(
                        "Failed to load CA certificate(s) file: {}",
                        ca_file.display()
                    )
                })?;
                roots
                    .add(cert)
                    .context("Failed to configure TLS: bad CA certificate")?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == TlsAuthClients::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .context("Failed to configure TLS: client certificate verifier")?,
            )
        }
    };
    let config = builder
        .with_single_cert(certs, key)
        .context("Failed to configure TLS: certificate and key do not match")?;
    Ok(Some(TlsAcceptor::from(Arc::new(config))))
}

/// Completes the server side of a handshake within [`HANDSHAKE_TIMEOUT`].
pub async fn handshake(acceptor: &TlsAcceptor, tcp: TcpStream) -> io::Result<Stream> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => Ok(Stream::Tls(Box::new(tls))),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "TLS handshake timed out",
        )),
    }
}
