//! The benchmark's HTTP/1.1 client: a keep-alive connection over TCP or TLS that sends one
//! request in one buffered write and parses the answer's head in place (why it is hand-written
//! rather than hyper's is in the parent module's documentation).

use std::net::SocketAddr;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

/// Opens an HTTP connection to `addr`, with TLS when `tls` is given.
pub(super) async fn http_connect(addr: SocketAddr, tls: Option<&(TlsConnector, ServerName<'static>)>) -> std::io::Result<HttpConnection> {
    let stream = TcpStream::connect(addr).await?;
    let _ = stream.set_nodelay(true);
    Ok(match tls {
        None => HttpConnection::new(stream),
        Some((connector, name)) => HttpConnection::new(connector.connect(name.clone(), stream).await?),
    })
}

/// An HTTP answer: status, body, and whether the server closes the connection.
#[derive(Debug)]
pub struct HttpAnswer {
    pub status: u16,
    pub body: Vec<u8>,
    pub close: bool,
}

/// What an [`HttpConnection`] runs over: a `TcpStream` or a TLS session on one.
pub trait ClientStream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> ClientStream for S {}

/// A keep-alive HTTP/1.1 client connection.
pub struct HttpConnection {
    stream: Box<dyn ClientStream>,
    buffer: Vec<u8>,
    request: Vec<u8>,
}

impl HttpConnection {
    pub fn new(stream: impl ClientStream + 'static) -> Self {
        HttpConnection { stream: Box::new(stream), buffer: Vec::with_capacity(4096), request: Vec::with_capacity(256) }
    }

    /// Sends `head` (request line and headers, each ending in CRLF, without Content-Length and
    /// the blank line) with `body`, and reads the answer.
    pub async fn post(&mut self, head: &str, body: &[u8]) -> std::io::Result<HttpAnswer> {
        use std::io::Write;
        self.request.clear();
        self.request.extend_from_slice(head.as_bytes());
        let _ = write!(self.request, "Content-Length: {}\r\n\r\n", body.len());
        if body.len() <= 64 * 1024 {
            self.request.extend_from_slice(body);
            self.stream.write_all(&self.request).await?;
        } else {
            self.stream.write_all(&self.request).await?;
            self.stream.write_all(body).await?;
        }
        self.read_answer().await
    }

    async fn fill(&mut self) -> std::io::Result<()> {
        let mut chunk = [0u8; 8192];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the server closed the connection"));
        }
        self.buffer.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    async fn read_answer(&mut self) -> std::io::Result<HttpAnswer> {
        let invalid = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
        let head_end = loop {
            if let Some(at) = find(&self.buffer, b"\r\n\r\n") {
                break at;
            }
            if self.buffer.len() > 64 * 1024 {
                return Err(invalid("answer head over 64 KiB"));
            }
            self.fill().await?;
        };
        let head = std::str::from_utf8(&self.buffer[..head_end]).map_err(|_| invalid("answer head is not UTF-8"))?;
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default();
        let status: u16 = parts.next().and_then(|s| s.parse().ok()).ok_or_else(|| invalid("bad status line"))?;
        let mut close = version == "HTTP/1.0";
        let mut length: Option<usize> = None;
        let mut chunked = false;
        for line in lines {
            let Some((name, value)) = line.split_once(':') else { continue };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(value.parse().map_err(|_| invalid("bad Content-Length"))?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.to_ascii_lowercase().contains("chunked");
            } else if name.eq_ignore_ascii_case("connection") {
                let value = value.to_ascii_lowercase();
                close = value.contains("close") || (close && !value.contains("keep-alive"));
            }
        }
        self.buffer.drain(..head_end + 4);
        let no_body = status == 204 || status == 304 || (100..200).contains(&status);
        let body = if no_body {
            Vec::new()
        } else if chunked {
            self.read_chunked().await?
        } else if let Some(length) = length {
            while self.buffer.len() < length {
                self.fill().await?;
            }
            self.buffer.drain(..length).collect()
        } else {
            // Delimited by the end of the connection.
            loop {
                match self.fill().await {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(e),
                }
            }
            close = true;
            std::mem::take(&mut self.buffer)
        };
        Ok(HttpAnswer { status, body, close })
    }

    async fn read_chunked(&mut self) -> std::io::Result<Vec<u8>> {
        let invalid = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
        let mut body = Vec::new();
        for _ in 0..1_000_000 {
            let line_end = loop {
                if let Some(at) = find(&self.buffer, b"\r\n") {
                    break at;
                }
                self.fill().await?;
            };
            let size_text = std::str::from_utf8(&self.buffer[..line_end]).map_err(|_| invalid("bad chunk size"))?;
            let size_text = size_text.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size_text, 16).map_err(|_| invalid("bad chunk size"))?;
            self.buffer.drain(..line_end + 2);
            if size == 0 {
                // Trailers end with an empty line.
                loop {
                    if let Some(at) = find(&self.buffer, b"\r\n") {
                        self.buffer.drain(..at + 2);
                        if at == 0 {
                            return Ok(body);
                        }
                    } else {
                        self.fill().await?;
                    }
                }
            }
            while self.buffer.len() < size + 2 {
                self.fill().await?;
            }
            body.extend_from_slice(&self.buffer[..size]);
            self.buffer.drain(..size + 2);
        }
        Err(invalid("too many chunks"))
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
