//! Optional TLS (rustls, `ring` provider) for both listeners.
//!
//! With `tls_cert` and `tls_key` set (PEM files: the certificate chain, leaf first, and its
//! private key in PKCS#8, PKCS#1 or SEC1 form), the HTTP and the native listener speak TLS only;
//! a plaintext client fails its handshake. The files are read once, at [`crate::Server::start`],
//! and a missing or unusable file is a startup error.
//!
//! The handshake runs per connection, inside that connection's task and under
//! [`HANDSHAKE_TIMEOUT`]: a stalled or failed handshake ends that connection (and frees its
//! `connections` permit) without delaying the accept loop or any other connection.

use crate::config::ServerConfig;
use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Longest a TLS handshake may take before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts TLS connections with the configured certificate. Cheap to clone.
#[derive(Clone)]
pub struct TlsAcceptor {
    inner: tokio_rustls::TlsAcceptor,
    timeout: Duration,
}

impl std::fmt::Debug for TlsAcceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsAcceptor").field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

impl TlsAcceptor {
    /// The acceptor for `config`'s `tls_cert`/`tls_key`, or `None` when TLS is off. A file that
    /// cannot be read or holds no usable certificate or key is an `InvalidInput` error naming it.
    pub fn from_config(config: &ServerConfig) -> io::Result<Option<TlsAcceptor>> {
        match (&config.tls_cert, &config.tls_key) {
            (Some(cert), Some(key)) => TlsAcceptor::from_pem_files(cert, key).map(Some),
            (None, None) => Ok(None),
            _ => Err(invalid("tls_cert and tls_key go together".into())),
        }
    }

    /// An acceptor for the PEM certificate chain at `cert` and private key at `key`.
    pub fn from_pem_files(cert: &Path, key: &Path) -> io::Result<TlsAcceptor> {
        let cert_pem = std::fs::read(cert).map_err(|e| invalid(format!("tls_cert {}: {e}", cert.display())))?;
        let key_pem = std::fs::read(key).map_err(|e| invalid(format!("tls_key {}: {e}", key.display())))?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("tls_cert {}: bad PEM: {e}", cert.display())))?;
        if chain.is_empty() {
            return Err(invalid(format!("tls_cert {}: no CERTIFICATE in the file", cert.display())));
        }
        let private_key = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| invalid(format!("tls_key {}: no usable private key: {e}", key.display())))?;
        let server = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("TLS setup: {e}")))?
            .with_no_client_auth()
            .with_single_cert(chain, private_key)
            .map_err(|e| invalid(format!("tls_cert {} / tls_key {}: {e}", cert.display(), key.display())))?;
        Ok(TlsAcceptor { inner: tokio_rustls::TlsAcceptor::from(Arc::new(server)), timeout: HANDSHAKE_TIMEOUT })
    }

    /// The same acceptor with another handshake timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> TlsAcceptor {
        self.timeout = timeout;
        self
    }

    /// Runs the server side of the handshake over `stream` under the timeout.
    pub async fn accept<S>(&self, stream: S) -> io::Result<tokio_rustls::server::TlsStream<S>>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        match tokio::time::timeout(self.timeout, self.inner.accept(stream)).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out")),
        }
    }

    /// Wraps `stream` in a TLS stream whose handshake runs on its first read or write (so in the
    /// task that serves the connection), under the timeout.
    pub fn accept_lazily<S>(&self, stream: S) -> LazyTlsStream<S>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        LazyTlsStream {
            state: LazyState::Handshaking {
                accept: Box::new(self.inner.accept(stream)),
                deadline: Box::pin(tokio::time::sleep(self.timeout)),
            },
        }
    }
}

/// A server-side TLS stream that completes its handshake when first polled.
pub struct LazyTlsStream<S> {
    state: LazyState<S>,
}

enum LazyState<S> {
    Handshaking { accept: Box<tokio_rustls::Accept<S>>, deadline: Pin<Box<tokio::time::Sleep>> },
    Ready(Box<tokio_rustls::server::TlsStream<S>>),
    Failed,
}

impl<S: AsyncRead + AsyncWrite + Unpin> LazyTlsStream<S> {
    /// Drives the handshake; `Ready(Ok(()))` once the stream is ready.
    fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let LazyState::Handshaking { accept, deadline } = &mut self.state else {
            return match self.state {
                LazyState::Failed => Poll::Ready(Err(io::Error::new(io::ErrorKind::NotConnected, "TLS handshake failed"))),
                _ => Poll::Ready(Ok(())),
            };
        };
        match Pin::new(&mut **accept).poll(cx) {
            Poll::Ready(Ok(stream)) => {
                self.state = LazyState::Ready(Box::new(stream));
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => {
                tracing::debug!(%error, "TLS handshake failed");
                self.state = LazyState::Failed;
                Poll::Ready(Err(error))
            }
            Poll::Pending => {
                if deadline.as_mut().poll(cx).is_ready() {
                    tracing::debug!("TLS handshake timed out");
                    self.state = LazyState::Failed;
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out")));
                }
                Poll::Pending
            }
        }
    }

    fn ready(&mut self) -> Option<Pin<&mut tokio_rustls::server::TlsStream<S>>> {
        match &mut self.state {
            LazyState::Ready(stream) => Some(Pin::new(&mut **stream)),
            _ => None,
        }
    }
}

/// Drives the handshake, then `$body` with the ready stream bound to `$stream`.
macro_rules! when_ready {
    ($self:ident, $cx:ident, |$stream:ident| $body:expr) => {{
        if let Err(error) = std::task::ready!($self.poll_handshake($cx)) {
            return Poll::Ready(Err(error));
        }
        match $self.ready() {
            Some($stream) => $body,
            None => Poll::Ready(Err(io::Error::new(io::ErrorKind::NotConnected, "TLS handshake failed"))),
        }
    }};
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for LazyTlsStream<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        when_ready!(this, cx, |stream| stream.poll_read(cx, buf))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for LazyTlsStream<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        when_ready!(this, cx, |stream| stream.poll_write(cx, buf))
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        when_ready!(this, cx, |stream| stream.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match &self.state {
            LazyState::Ready(stream) => stream.is_write_vectored(),
            _ => false,
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.ready() {
            Some(stream) => stream.poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.ready() {
            Some(stream) => stream.poll_shutdown(cx),
            // Not yet (or never) a TLS session: there is nothing to close but the socket,
            // which closes when the stream is dropped.
            None => Poll::Ready(Ok(())),
        }
    }
}

/// A server stream that is plain or TLS, as the listener is configured.
pub enum MaybeTlsStream<S> {
    Plain(S),
    Tls(LazyTlsStream<S>),
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for MaybeTlsStream<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTlsStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MaybeTlsStream::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for MaybeTlsStream<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTlsStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MaybeTlsStream::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTlsStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            MaybeTlsStream::Tls(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            MaybeTlsStream::Plain(s) => s.is_write_vectored(),
            MaybeTlsStream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTlsStream::Plain(s) => Pin::new(s).poll_flush(cx),
            MaybeTlsStream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTlsStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            MaybeTlsStream::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn acceptor(dir: &Path) -> TlsAcceptor {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
        std::fs::write(dir.join("cert.pem"), certified.cert.pem()).expect("write");
        std::fs::write(dir.join("key.pem"), certified.key_pair.serialize_pem()).expect("write");
        TlsAcceptor::from_pem_files(&dir.join("cert.pem"), &dir.join("key.pem")).expect("acceptor")
    }

    #[tokio::test]
    async fn a_stalled_handshake_times_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tls = acceptor(dir.path()).with_timeout(Duration::from_millis(100));
        // The peer end stays open and silent.
        let (server_end, _client_end) = tokio::io::duplex(1024);
        let Err(error) = tls.accept(server_end).await else { panic!("the handshake must time out") };
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);

        let (server_end, _client_end) = tokio::io::duplex(1024);
        let mut lazy = tls.accept_lazily(server_end);
        let mut byte = [0u8; 1];
        let Err(error) = lazy.read(&mut byte).await else { panic!("the read must time out") };
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(lazy.read(&mut byte).await.is_err(), "a failed stream stays failed");
    }

    #[tokio::test]
    async fn plaintext_fails_the_handshake_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tls = acceptor(dir.path());
        let (server_end, mut client_end) = tokio::io::duplex(1024);
        client_end.write_all(b"GET / HTTP/1.1\r\n\r\n").await.expect("write");
        let started = std::time::Instant::now();
        assert!(tls.accept(server_end).await.is_err());
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
