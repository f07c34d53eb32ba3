//! The way upstream: a plain `http://` upstream through a connection of our own that ACKs
//! every read at once; everything else (TLS, an HTTP proxy from the environment) through
//! reqwest.
//!
//! Why a connection of our own: an upstream that writes an answer's head and its body apart
//! with Nagle's algorithm on (Python's `http.server` does, and so do many small servers in
//! front of local models) sends the body only once the head is ACKed. On a kept-alive
//! connection Linux delays that ACK, up to 40 ms, hoping to ride it on data of ours that
//! never comes: every request through the proxy waited that long. `TCP_QUICKACK` asks for the
//! ACK at once, but the kernel drops back to delayed ACKs on its own, so it is set again after
//! every read. reqwest keeps its sockets to itself, hence hyper's client with our connector.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioIo};
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT};
use reqwest::Method;

/// Sends requests upstream.
pub(crate) struct Upstream {
    client: reqwest::Client,
    /// For `http://` upstreams; `None` when an HTTP proxy in the environment must see them.
    plain: Option<PlainClient>,
}

type PlainClient = hyper_util::client::legacy::Client<QuickAckConnector, reqwest::Body>;

/// Why a request found no answer.
pub(crate) enum SendError {
    Reqwest(reqwest::Error),
    Plain(hyper_util::client::legacy::Error),
}

impl Upstream {
    /// `client` for what the proxy's own connection does not carry.
    pub(crate) fn new(client: reqwest::Client) -> Upstream {
        Upstream {
            client,
            plain: (!proxy_in_environment()).then(plain_client),
        }
    }

    /// Sends one request and gives the answer's head, its body to stream.
    pub(crate) async fn send(
        &self,
        method: Method,
        url: String,
        headers: HeaderMap,
        body: reqwest::Body,
    ) -> Result<reqwest::Response, SendError> {
        let plain = self.plain.as_ref().filter(|_| url.starts_with("http://"));
        let (Some(plain), Ok(uri)) = (plain, url.parse::<Uri>()) else {
            let request = self.client.request(method, url).headers(headers).body(body);
            return request.send().await.map_err(SendError::Reqwest);
        };
        let mut request = hyper::Request::new(body);
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        *request.headers_mut() = headers;
        // What reqwest sends when the client sent none, so both ways send the same head.
        let accept = HeaderValue::from_static("*/*");
        request.headers_mut().entry(ACCEPT).or_insert(accept);
        let response = plain.request(request).await.map_err(SendError::Plain)?;
        Ok(reqwest::Response::from(response.map(reqwest::Body::wrap)))
    }
}

impl SendError {
    /// The upstream could not be reached at all.
    pub(crate) fn is_connect(&self) -> bool {
        match self {
            SendError::Reqwest(e) => e.is_connect(),
            SendError::Plain(e) => e.is_connect(),
        }
    }

    pub(crate) fn is_timeout(&self) -> bool {
        match self {
            SendError::Reqwest(e) => e.is_timeout(),
            SendError::Plain(_) => false,
        }
    }

    /// The innermost cause, which says what went wrong without naming the request.
    pub(crate) fn root_cause(&self) -> Option<String> {
        let mut source: Option<&(dyn std::error::Error + 'static)> = match self {
            SendError::Reqwest(e) => std::error::Error::source(e),
            SendError::Plain(e) => std::error::Error::source(e),
        };
        let mut cause = None;
        while let Some(s) = source {
            cause = Some(s.to_string());
            source = s.source();
        }
        cause
    }
}

/// Whether reqwest would send plain HTTP through a proxy the environment names, as its
/// client does by default: then it keeps doing so.
fn proxy_in_environment() -> bool {
    ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
}

fn plain_client() -> PlainClient {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(QuickAckConnector(http))
}

/// Opens TCP connections whose reads are ACKed at once.
#[derive(Clone)]
pub(crate) struct QuickAckConnector(HttpConnector);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<Uri> for QuickAckConnector {
    type Response = QuickAck;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<QuickAck, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move {
            let io = connecting.await?;
            quickack(&io);
            Ok(QuickAck(io))
        })
    }
}

/// A TCP connection that asks for an immediate ACK again after every read.
pub(crate) struct QuickAck(TokioIo<tokio::net::TcpStream>);

/// Best effort: without it a read is only ACKed later, never lost.
fn quickack(io: &TokioIo<tokio::net::TcpStream>) {
    #[cfg(target_os = "linux")]
    let _ = socket2::SockRef::from(io.inner()).set_tcp_quickack(true);
    #[cfg(not(target_os = "linux"))]
    let _ = io;
}

impl Read for QuickAck {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let read = Pin::new(&mut self.0).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = read {
            quickack(&self.0);
        }
        read
    }
}

impl Write for QuickAck {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }
}

impl Connection for QuickAck {
    fn connected(&self) -> Connected {
        self.0.connected()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An upstream that keeps the head of each request it reads and answers `ok`.
    async fn recording_upstream() -> (String, tokio::sync::mpsc::Receiver<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (heads, received) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let heads = heads.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).into_owned();
                    let _ = heads.send(head).await;
                    let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    let _ = socket.write_all(answer.as_bytes()).await;
                });
            }
        });
        (format!("http://{addr}/v1/x?q=1"), received)
    }

    fn headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", HeaderValue::from_static("k"));
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers
    }

    #[tokio::test]
    async fn the_own_connection_sends_the_head_reqwest_sends() {
        let (url, mut heads) = recording_upstream().await;
        let via_reqwest = Upstream {
            client: reqwest::Client::new(),
            plain: None,
        };
        let via_own = Upstream {
            client: reqwest::Client::new(),
            plain: Some(plain_client()),
        };
        let mut seen = Vec::new();
        for upstream in [via_reqwest, via_own] {
            let body = reqwest::Body::from("{}");
            let sent = upstream.send(Method::POST, url.clone(), headers(), body);
            let answer = sent.await.ok().expect("an answer");
            assert_eq!(answer.status(), 200);
            assert_eq!(answer.bytes().await.ok().as_deref(), Some(&b"ok"[..]));
            seen.push(heads.recv().await.expect("a head"));
        }
        let lower = |h: &str| {
            let mut lines = h
                .to_ascii_lowercase()
                .lines()
                .map(String::from)
                .collect::<Vec<_>>();
            lines.sort();
            lines
        };
        assert!(
            seen[0].starts_with("POST /v1/x?q=1 HTTP/1.1\r\n"),
            "{}",
            seen[0]
        );
        assert_eq!(lower(&seen[0]), lower(&seen[1]));
    }

    #[tokio::test]
    async fn a_closed_port_is_a_connect_error_with_its_cause() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        drop(listener);
        let upstream = Upstream::new(reqwest::Client::new());
        let sent = upstream.send(
            Method::GET,
            format!("http://{addr}/"),
            HeaderMap::new(),
            "".into(),
        );
        let Err(error) = sent.await else {
            panic!("a closed port answered");
        };
        assert!(error.is_connect());
        let cause = error.root_cause().unwrap_or_default();
        assert!(cause.contains("refused"), "{cause}");
    }
}
