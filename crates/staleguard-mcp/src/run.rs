//! The process edge: the child server, standard input and output, exit codes, and the
//! server's faults that are about processes: a server that dies (mid-call or idle), closes
//! its output, starts slowly or stops reading.

use std::ffi::OsString;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::relay::{Options, Output, Relay};

/// How long the relay still waits for more of what a server that exited wrote before it
/// went (a process it started may hold its output open).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(1);

/// How long a server that closed its output, while the client is still there, has to exit
/// before it is stopped.
const EXIT_AFTER_OUTPUT_CLOSED: Duration = Duration::from_secs(2);

/// Lines from the server that are no JSON-RPC message: at most this many are logged per
/// window, the rest counted.
const DROPPED_SHOWN: u32 = 5;
const DROPPED_WINDOW: Duration = Duration::from_secs(10);

/// A line from either side, or the end of one.
enum Event {
    Client(Vec<u8>),
    ClientClosed,
    Server(Vec<u8>),
    ServerClosed,
}

/// How the server's side ended.
enum End {
    Exited(ExitStatus),
    /// It closed its output and did not exit in time: it was stopped.
    OutputClosed,
}

/// Runs `command` as the MCP server and relays between it and our standard input and
/// output until the server exits. Returns the server's exit code (128 + signal when a signal
/// ended it).
///
/// When the server ends while the client still waits for answers, each unanswered request
/// gets a JSON-RPC error (-32000) that says how the server ended, and the code is never 0
/// (1 when the server's was). A server that closes its output but does not exit is stopped
/// (code 1).
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
    // The server's input has a writer of its own: a server that starts slowly or stops
    // reading never holds up the client's side (answers the guard gives itself, errors).
    let (to_server, server_lines) = mpsc::unbounded_channel();
    tokio::spawn(write_lines(server_in, server_lines));

    let timeout = options.snapshot_timeout;
    let mut host = Host {
        relay: Relay::new(options),
        to_server: Some(to_server),
        client_out: tokio::io::stdout(),
        client_gone: false,
        client_closed: false,
        dropped: DropLog::new(),
    };
    let mut waiting_since: Option<Instant> = None;
    let exited = loop {
        let deadline = waiting_since.map(|since| since + timeout);
        tokio::select! {
            event = inbox.recv() => match event {
                Some(Event::ServerClosed) | None => break None,
                Some(event) => host.handle(event).await,
            },
            status = child.wait() => break Some(status?),
            // A held call waits for the server's answer to our own snapshot, not forever.
            () = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                let outputs = host.relay.give_up_waiting();
                host.deliver(outputs).await;
            }
        }
        host.log();
        waiting_since = match (host.relay.is_waiting(), waiting_since) {
            (true, None) => Some(Instant::now()),
            (true, since) => since,
            (false, _) => None,
        };
    };

    let end = match exited {
        // It exited: what it wrote before it went is still read, then its output's end.
        Some(status) => {
            let mut until = Instant::now() + DRAIN_AFTER_EXIT;
            while let Ok(Some(event)) = tokio::time::timeout_at(until, inbox.recv()).await {
                match event {
                    Event::ServerClosed => break,
                    Event::Server(line) => {
                        until = Instant::now() + DRAIN_AFTER_EXIT;
                        host.handle(Event::Server(line)).await;
                    }
                    event => host.handle(event).await,
                }
                host.log();
            }
            End::Exited(status)
        }
        // The client closed the session first: the server shuts down in its own time.
        None if host.client_closed => End::Exited(child.wait().await?),
        None => match tokio::time::timeout(EXIT_AFTER_OUTPUT_CLOSED, child.wait()).await {
            Ok(status) => End::Exited(status?),
            Err(_) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                End::OutputClosed
            }
        },
    };
    host.to_server = None;
    let how = describe(&end);
    let mut outputs = host.relay.server_exited(&how);
    // The client's lines already read get the same answers.
    while let Ok(event) = inbox.try_recv() {
        if let Event::Client(line) = event {
            outputs.extend(host.relay.from_client(&line));
        }
    }
    let answered = outputs
        .iter()
        .filter(|o| matches!(o, Output::ToClient(_)))
        .count();
    host.deliver(outputs).await;
    host.log();
    host.dropped.flush();
    let _ = host.client_out.flush().await;

    let code = match end {
        End::Exited(status) => exit_code(status),
        End::OutputClosed => 1,
    };
    // A server that leaves the client without answers did not end well, whatever it says.
    let code = if code == 0 && answered > 0 && !host.client_closed {
        1
    } else {
        code
    };
    if answered > 0 {
        eprintln!(
            "staleguard mcp: the browser MCP server {how} with {answered} request{} unanswered: each got an error response; exiting with status {code}",
            if answered == 1 { "" } else { "s" }
        );
    } else if !host.client_closed {
        eprintln!(
            "staleguard mcp: the browser MCP server {how} while the client was still connected (no request was pending); exiting with status {code}"
        );
    } else if code != 0 {
        eprintln!(
            "staleguard mcp: the browser MCP server {how} after the client closed the session"
        );
    }
    Ok(code)
}

/// The relay and the two ends it writes to.
struct Host {
    relay: Relay,
    /// The server's input, until the client closes its side.
    to_server: Option<mpsc::UnboundedSender<Vec<u8>>>,
    client_out: tokio::io::Stdout,
    /// Writing to the client failed: it is gone, and nothing more is written.
    client_gone: bool,
    /// The client closed its side (end of our standard input).
    client_closed: bool,
    dropped: DropLog,
}

impl Host {
    async fn handle(&mut self, event: Event) {
        let outputs = match event {
            Event::Client(line) => self.relay.from_client(&line),
            Event::Server(line) => self.relay.from_server_owned(line),
            // Closing the server's input tells it the session is over.
            Event::ClientClosed => {
                self.client_closed = true;
                self.to_server = None;
                return;
            }
            Event::ServerClosed => return,
        };
        self.deliver(outputs).await;
    }

    async fn deliver(&mut self, outputs: Vec<Output>) {
        for output in outputs {
            match output {
                Output::ToServer(line) => {
                    // A server that stopped reading is about to exit: its status tells why.
                    if let Some(to_server) = &self.to_server {
                        let _ = to_server.send(line);
                    }
                }
                Output::ToClient(line) => {
                    if !self.client_gone && write_line(&mut self.client_out, &line).await.is_err() {
                        self.client_gone = true;
                    }
                }
            }
        }
    }

    /// What the relay did, and the lines it dropped (rate-limited), on standard error.
    fn log(&mut self) {
        for note in self.relay.take_notes() {
            eprintln!("staleguard mcp: {note}");
        }
        let dropped = self.relay.take_dropped();
        self.dropped.log(dropped);
    }
}

/// The log of dropped server lines: one line each, at most [`DROPPED_SHOWN`] per
/// [`DROPPED_WINDOW`], then a count of the rest.
struct DropLog {
    window: Instant,
    shown: u32,
    hidden: u64,
}

impl DropLog {
    fn new() -> Self {
        DropLog {
            window: Instant::now(),
            shown: 0,
            hidden: 0,
        }
    }

    fn log(&mut self, lines: Vec<String>) {
        let now = Instant::now();
        if now >= self.window + DROPPED_WINDOW {
            self.flush();
            self.window = now;
            self.shown = 0;
        }
        for line in lines {
            if self.shown < DROPPED_SHOWN {
                eprintln!("staleguard mcp: {line}");
                self.shown += 1;
            } else {
                self.hidden += 1;
            }
        }
    }

    fn flush(&mut self) {
        if self.hidden > 0 {
            eprintln!(
                "staleguard mcp: dropped {} more lines from the server that were no JSON-RPC message (at most {DROPPED_SHOWN} are shown every {} s)",
                self.hidden,
                DROPPED_WINDOW.as_secs()
            );
            self.hidden = 0;
        }
    }
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

/// Writes lines to the server until the relay has no more (the client closed its side) or
/// the server stops reading; then its input is closed.
async fn write_lines(mut pipe: ChildStdin, mut lines: mpsc::UnboundedReceiver<Vec<u8>>) {
    while let Some(line) = lines.recv().await {
        if write_line(&mut pipe, &line).await.is_err() {
            return;
        }
    }
}

async fn write_line(to: &mut (impl AsyncWriteExt + Unpin), line: &[u8]) -> std::io::Result<()> {
    to.write_all(line).await?;
    to.write_all(b"\n").await?;
    to.flush().await
}

/// How the server ended, for the client's errors and the log: "exited with status 3", "was
/// killed by signal 9 (SIGKILL)".
fn describe(end: &End) -> String {
    let status = match end {
        End::Exited(status) => status,
        End::OutputClosed => {
            return "closed its standard output and did not exit (it was stopped)".into()
        }
    };
    if let Some(code) = status.code() {
        return format!("exited with status {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return match signal_name(signal) {
                Some(name) => format!("was killed by signal {signal} ({name})"),
                None => format!("was killed by signal {signal}"),
            };
        }
    }
    "ended".into()
}

fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return None,
    })
}

fn exit_code(status: ExitStatus) -> i32 {
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
