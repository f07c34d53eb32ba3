//! The process edge: the child server, standard input and output, and exit codes.

use std::ffi::OsString;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;

use crate::relay::{Options, Output, Relay};

/// A line from either side, or the end of one.
enum Event {
    Client(Vec<u8>),
    ClientClosed,
    Server(Vec<u8>),
    ServerClosed,
}

/// Runs `command` as the MCP server and relays between it and our standard input and
/// output until the server exits. Returns the server's exit code (128 + signal when a signal
/// ended it).
pub async fn run(command: &[OsString], options: Options) -> std::io::Result<i32> {
    let (program, args) = command.split_first().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "no server command given")
    })?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot start {}: {e}", program.to_string_lossy()),
            )
        })?;
    let (Some(server_in), Some(server_out)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other("the server's pipes are missing"));
    };
    let (events, mut inbox) = mpsc::unbounded_channel();
    tokio::spawn(read_lines(
        tokio::io::stdin(),
        events.clone(),
        Event::Client,
        Event::ClientClosed,
    ));
    tokio::spawn(read_lines(
        server_out,
        events,
        Event::Server,
        Event::ServerClosed,
    ));

    let timeout = options.snapshot_timeout;
    let mut relay = Relay::new(options);
    let mut server_in = Some(server_in);
    let mut client_out = tokio::io::stdout();
    let mut waiting_since = None;
    loop {
        let event = match waiting_since {
            // A held call waits for the server's answer to our own snapshot, not forever.
            Some(since) => match tokio::time::timeout_at(since + timeout, inbox.recv()).await {
                Ok(event) => event,
                Err(_) => {
                    let outputs = relay.give_up_waiting();
                    deliver(outputs, &mut server_in, &mut client_out).await?;
                    log_notes(&mut relay);
                    waiting_since = None;
                    continue;
                }
            },
            None => inbox.recv().await,
        };
        let Some(event) = event else { break };
        let outputs = match event {
            Event::Client(line) => relay.from_client(&line),
            Event::Server(line) => relay.from_server(&line),
            // Closing the server's input tells it the session is over.
            Event::ClientClosed => {
                server_in = None;
                continue;
            }
            Event::ServerClosed => break,
        };
        log_notes(&mut relay);
        deliver(outputs, &mut server_in, &mut client_out).await?;
        waiting_since = match (relay.is_waiting(), waiting_since) {
            (true, None) => Some(tokio::time::Instant::now()),
            (true, since) => since,
            (false, _) => None,
        };
    }
    drop(server_in);
    client_out.flush().await?;
    let status = child.wait().await?;
    Ok(exit_code(status))
}

fn log_notes(relay: &mut Relay) {
    for note in relay.take_notes() {
        eprintln!("staleguard mcp: {note}");
    }
}

async fn deliver(
    outputs: Vec<Output>,
    server_in: &mut Option<tokio::process::ChildStdin>,
    client_out: &mut tokio::io::Stdout,
) -> std::io::Result<()> {
    for output in outputs {
        match output {
            Output::ToServer(line) => {
                if let Some(pipe) = server_in.as_mut() {
                    // A server that stopped reading is about to exit: its code tells why.
                    if write_line(pipe, &line).await.is_err() {
                        *server_in = None;
                    }
                }
            }
            Output::ToClient(line) => write_line(client_out, &line).await?,
        }
    }
    Ok(())
}

async fn read_lines(
    from: impl AsyncRead + Unpin,
    to: mpsc::UnboundedSender<Event>,
    line: fn(Vec<u8>) -> Event,
    end: Event,
) {
    let mut reader = BufReader::with_capacity(1 << 16, from);
    loop {
        let mut buf = Vec::new();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                while matches!(buf.last(), Some(b'\n' | b'\r')) {
                    buf.pop();
                }
                if to.send(line(buf)).is_err() {
                    return;
                }
            }
        }
    }
    let _ = to.send(end);
}

async fn write_line(to: &mut (impl AsyncWriteExt + Unpin), line: &[u8]) -> std::io::Result<()> {
    to.write_all(line).await?;
    to.write_all(b"\n").await?;
    to.flush().await
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    if let Some(code) = status.code() {
        return code;
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return 128 + signal;
        }
    }
    1
}
