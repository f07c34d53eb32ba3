//! What the proxy's benches share: a scripted upstream on loopback and a proxy in front of it,
//! both in this process.

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::Uri;
use axum::Router;
use staleguard::Config;
use staleguard_proxy::{Route, Routes, Settings};

/// A scripted model on a free loopback port: it answers Anthropic `/messages` and OpenAI
/// requests with a short message that says how many bytes it received.
pub(crate) async fn upstream() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let scripted = Router::new().fallback(|uri: Uri, body: Bytes| async move {
        if uri.path().ends_with("/messages") {
            format!(r#"{{"id":"msg_1","type":"message","role":"assistant","model":"bench","content":[{{"type":"text","text":"received {} bytes"}}],"stop_reason":"end_turn","usage":{{"input_tokens":1,"output_tokens":1}}}}"#, body.len())
        } else {
            format!(r#"{{"id":"chatcmpl-1","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"received {} bytes"}},"finish_reason":"stop"}}]}}"#, body.len())
        }
    });
    tokio::spawn(async move { axum::serve(listener, scripted).await });
    addr
}

/// A proxy on a free loopback port in front of `upstream`, projecting under `config`, with a
/// memo of `memo_bytes` (0: off).
pub(crate) async fn proxy(upstream: SocketAddr, memo_bytes: usize, config: Config) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let settings = Settings {
        routes: Routes(vec![
            Route::everything(&format!("http://{upstream}")).expect("route")
        ]),
        fail_closed: false,
        max_body_bytes: 64 << 20,
        upstream_timeout: Duration::from_secs(30),
        memo_bytes,
        metrics_path: None,
        shutdown_grace: Duration::from_secs(1),
        staleguard: config,
    };
    tokio::spawn(staleguard_proxy::serve(
        settings,
        listener,
        std::future::pending(),
    ));
    addr
}
