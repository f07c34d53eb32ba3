//! `staleguard project` as a whole process, on the same 10 MB request as the core's
//! `projection` bench, against a floor: a process that reads the file, validates it with
//! serde_json and writes the bytes back to standard output. Start-up, reading, writing and
//! exit are in both, so the ratios are what a user of the command sees.
//!
//! The floor is this executable itself, run again as `whole_process --floor FILE`.
//!
//! The command is `release/staleguard` of the target directory (`CARGO_TARGET_DIR` when set,
//! else the workspace's `target`): a bench cannot name the bin target as a dependency, so it
//! runs whatever binary is there. `scripts/bench` runs `cargo build --release -p
//! staleguard-cli` first, so that it is this build.
//!
//! Each round runs the floor, `staleguard project FILE` with the defaults (evidence and
//! progress on), with projection alone (`BROWSER_EVIDENCE_RETENTION=off
//! BROWSER_PROGRESS_TRACKING=off`) and with the live page lean (`STALEGUARD_LIVE_PAGE=lean`),
//! interleaved so that machine noise hits them all alike.
//! `-- --rounds N` sets the number of rounds (default 15). `-- --against PATH` runs another
//! `staleguard` binary (an older build, say) in the same rounds, for before and after figures
//! measured side by side.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use request::build_request;

#[path = "../../staleguard/benches/support/request.rs"]
mod request;

const DEFAULT_ROUNDS: usize = 15;

/// The floor process: read the file, validate it, write its bytes to standard output.
fn floor(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).expect("the request is valid JSON");
    let mut out = std::io::stdout().lock();
    out.write_all(&bytes)
        .and_then(|()| out.flush())
        .expect("write standard output");
}

/// `release/staleguard` in the target directory `CARGO_TARGET_DIR` names (absolute), else
/// this workspace's `target`: the one `cargo build --release -p staleguard-cli` wrote.
fn staleguard_binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let path = target.join("release/staleguard");
    if !path.is_file() {
        panic!(
            "{} is missing: run `cargo build --release -p staleguard-cli` first",
            path.display()
        );
    }
    path
}

/// The three commands of a round, in the order they run.
struct Commands {
    request: PathBuf,
    /// A directory without a `staleguard.toml`, where the children run.
    dir: PathBuf,
    /// This workspace's binary, then the one of `--against`, if any.
    binaries: Vec<PathBuf>,
}

/// A command of a round; the projections name their binary by its place in
/// [`Commands::binaries`].
#[derive(Clone, Copy)]
enum Run {
    Floor,
    Defaults(usize),
    ProjectionAlone(usize),
    Lean(usize),
}

impl Commands {
    fn command(&self, run: Run) -> Command {
        let mut c = match run {
            Run::Floor => {
                let mut c = Command::new(std::env::current_exe().expect("this executable"));
                c.arg("--floor");
                c
            }
            Run::Defaults(b) | Run::ProjectionAlone(b) | Run::Lean(b) => {
                let mut c = Command::new(&self.binaries[b]);
                c.arg("project");
                // The defaults: no setting from the environment of whoever runs the bench.
                for (name, _) in std::env::vars_os() {
                    let n = name.to_string_lossy();
                    if n.starts_with("BROWSER_") || n.starts_with("STALEGUARD_") {
                        c.env_remove(&name);
                    }
                }
                match run {
                    Run::ProjectionAlone(_) => {
                        c.env("BROWSER_EVIDENCE_RETENTION", "off")
                            .env("BROWSER_PROGRESS_TRACKING", "off");
                    }
                    Run::Lean(_) => {
                        c.env("STALEGUARD_LIVE_PAGE", "lean");
                    }
                    _ => {}
                }
                c
            }
        };
        c.arg(&self.request)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit());
        c
    }

    /// Seconds from spawn to exit, with standard output written to /dev/null.
    fn time(&self, run: Run) -> f64 {
        let sink = File::create("/dev/null").expect("open /dev/null");
        let mut c = self.command(run);
        c.stdout(Stdio::from(sink));
        let started = Instant::now();
        let status = c.status().unwrap_or_else(|e| panic!("spawn {c:?}: {e}"));
        let elapsed = started.elapsed().as_secs_f64();
        assert!(status.success(), "{c:?} failed: {status}");
        elapsed
    }

    /// One run with standard output captured: what the command writes.
    fn output(&self, run: Run) -> Vec<u8> {
        let mut c = self.command(run);
        let out = c.output().unwrap_or_else(|e| panic!("spawn {c:?}: {e}"));
        assert!(out.status.success(), "{c:?} failed: {}", out.status);
        out.stdout
    }
}

/// Removes the request's directory, also when a run panics.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn median(mut s: Vec<f64>) -> f64 {
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

fn ratios(rounds: usize, against: Option<PathBuf>) {
    let mut binaries = vec![staleguard_binary()];
    binaries.extend(against);
    let body = build_request();
    let dir = std::env::temp_dir().join(format!("staleguard-whole-process-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let _cleanup = TempDir(dir.clone());
    let request = dir.join("request.json");
    std::fs::write(&request, &body).unwrap_or_else(|e| panic!("{}: {e}", request.display()));
    let commands = Commands {
        request,
        dir,
        binaries,
    };

    // One run of each, output kept: checks what is timed, and warms the page cache.
    let copied = commands.output(Run::Floor);
    assert!(copied == body.as_bytes(), "the floor wrote other bytes");
    let runs = [Run::Defaults(0), Run::ProjectionAlone(0), Run::Lean(0)];
    let [defaults_bytes, alone_bytes, lean_bytes] = runs.map(|run| {
        let out = commands.output(run);
        serde_json::from_slice::<serde::de::IgnoredAny>(&out).expect("projection is JSON");
        out.len()
    });

    let mut runs = vec![Run::Floor];
    for b in 0..commands.binaries.len() {
        runs.extend([Run::Defaults(b), Run::ProjectionAlone(b), Run::Lean(b)]);
    }
    let mut samples = vec![Vec::new(); runs.len()];
    for _ in 0..rounds {
        for (run, s) in runs.iter().zip(samples.iter_mut()) {
            s.push(commands.time(*run));
        }
    }
    let medians: Vec<f64> = samples.into_iter().map(median).collect();
    let f = medians[0];
    println!(
        "\nwhole process, median of {rounds} interleaved runs, {} bytes, {} -> {defaults_bytes} bytes (defaults), {alone_bytes} bytes (projection alone), {lean_bytes} bytes (lean):",
        body.len(),
        body.len()
    );
    println!("  floor (read, validate, write) {:>8.2} ms", f * 1e3);
    for (b, binary) in commands.binaries.iter().enumerate() {
        let (d, p, l) = (medians[1 + 3 * b], medians[2 + 3 * b], medians[3 + 3 * b]);
        if b > 0 {
            println!("  against {}:", binary.display());
        }
        println!(
            "  project, defaults             {:>8.2} ms   defaults / floor         = {:.2}",
            d * 1e3,
            d / f
        );
        println!(
            "  project, projection alone     {:>8.2} ms   projection alone / floor = {:.2}",
            p * 1e3,
            p / f
        );
        println!(
            "  project, live page lean       {:>8.2} ms   lean / floor             = {:.2}",
            l * 1e3,
            l / f
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `--floor FILE`: this process is the floor.
    if let Some(i) = args.iter().position(|a| a == "--floor") {
        let path = args.get(i + 1).expect("--floor FILE");
        floor(Path::new(path));
        return;
    }
    // Cargo passes `--bench`; other arguments are ignored.
    let rounds = match args.iter().position(|a| a == "--rounds") {
        Some(i) => args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .filter(|&n: &usize| n > 0)
            .expect("--rounds N, N at least 1"),
        None => DEFAULT_ROUNDS,
    };
    let against = args.iter().position(|a| a == "--against").map(|i| {
        let path = PathBuf::from(args.get(i + 1).expect("--against PATH"));
        assert!(path.is_file(), "{}: no such binary", path.display());
        path
    });
    ratios(rounds, against);
}
