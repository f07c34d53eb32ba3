//! Projection of a 10 MB request built from real recorded observations, against three
//! baselines over the same bytes: a serde_json validation pass (`IgnoredAny`), a
//! `serde_json::Value` parse and serialise, and a plain copy.
//!
//! Criterion measures each; then a side-by-side run, interleaved so that machine noise hits
//! all four alike, prints the ratios.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use request::build_request;
use serde_json::Value;
use staleguard::internal::progress::replayed;
use staleguard::{Config, RequestFormat};

#[path = "support/request.rs"]
mod request;

/// Projection alone: what the 3x target is about.
fn config() -> Config {
    Config {
        browser_history_compaction: true,
        evidence_retention: Some(false),
        progress_tracking: Some(false),
        ..Config::default()
    }
}

/// The whole pipeline: projection, evidence and progress, as the defaults have it.
fn config_full() -> Config {
    Config {
        browser_history_compaction: true,
        ..Config::default()
    }
}

fn project(body: &str) -> usize {
    project_under(body, &config())
}

fn project_full(body: &str) -> usize {
    project_under(body, &config_full())
}

/// `body` projected alone (the ratios' and the dump's projection).
fn projected(body: &str) -> staleguard::Projection {
    let options = staleguard::Options::default();
    staleguard::project(body, RequestFormat::OpenAiChat, &config(), options).expect("projects")
}

/// The length of `body` projected under `config`, without a memo.
fn project_under(body: &str, config: &Config) -> usize {
    let options = staleguard::Options::default();
    staleguard::project(body, RequestFormat::OpenAiChat, config, options)
        .map(|p| p.body.len())
        .unwrap_or(0)
}

/// The whole pipeline with a memo that has seen the request before (the proxy on the next
/// turn of a session).
fn project_warm(body: &str) -> usize {
    static MEMO: std::sync::OnceLock<staleguard::Memo> = std::sync::OnceLock::new();
    let options = staleguard::Options {
        memo: Some(MEMO.get_or_init(staleguard::Memo::default)),
        ..staleguard::Options::default()
    };
    staleguard::project(body, RequestFormat::OpenAiChat, &config_full(), options)
        .map(|p| p.body.len())
        .unwrap_or(0)
}

fn validate(body: &str) -> usize {
    serde_json::from_str::<serde::de::IgnoredAny>(body)
        .map(|_| body.len())
        .unwrap_or(0)
}

fn value_round_trip(body: &str) -> usize {
    serde_json::from_str::<Value>(body)
        .map(|v| v.to_string().len())
        .unwrap_or(0)
}

fn copy(body: &str) -> usize {
    black_box(body.to_string()).len()
}

fn bench(c: &mut Criterion) {
    let body = build_request();
    let mut group = c.benchmark_group("10MB");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(4));
    group.bench_function("project", |b| b.iter(|| project(black_box(&body))));
    group.bench_function("project_evidence_progress", |b| {
        b.iter(|| project_full(black_box(&body)))
    });
    group.bench_function("validate_ignored_any", |b| {
        b.iter(|| validate(black_box(&body)))
    });
    group.bench_function("value_round_trip", |b| {
        b.iter(|| value_round_trip(black_box(&body)))
    });
    group.bench_function("copy", |b| b.iter(|| copy(black_box(&body))));
    group.finish();
}

/// Median seconds of each function, measured interleaved in one run.
fn side_by_side(body: &str, rounds: usize) -> [f64; 6] {
    let fns: [fn(&str) -> usize; 6] = [
        project,
        validate,
        value_round_trip,
        copy,
        project_full,
        project_warm,
    ];
    let mut samples: [Vec<f64>; 6] = Default::default();
    for _ in 0..rounds {
        for (f, s) in fns.iter().zip(samples.iter_mut()) {
            let t = Instant::now();
            black_box(f(black_box(body)));
            s.push(t.elapsed().as_secs_f64());
        }
    }
    samples.map(|mut s| {
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    })
}

fn ratios() {
    let body = build_request();
    let projected = projected(&body);
    let results = projected.report().results.len();
    let [p, v, r, c, full, warm] = side_by_side(&body, 31);
    println!("\nside by side, median of 31 interleaved runs, {} bytes, {results} browser results, {} collapsed, {} -> {} bytes:",
        body.len(), projected.report().collapsed(), body.len(), projected.body.len());
    println!("  project          {:>8.2} ms", p * 1e3);
    println!(
        "  validate         {:>8.2} ms   project / validate = {:.2}",
        v * 1e3,
        p / v
    );
    println!(
        "  Value round trip {:>8.2} ms   project / Value    = {:.2}",
        r * 1e3,
        p / r
    );
    println!(
        "  copy             {:>8.2} ms   project / copy     = {:.2}",
        c * 1e3,
        p / c
    );
    println!(
        "  with evidence and progress {:>8.2} ms   / validate = {:.2}   / Value = {:.2}",
        full * 1e3,
        full / v,
        full / r
    );
    println!(
        "  the same, memo warm         {:>8.2} ms   / validate = {:.2}   / Value = {:.2}",
        warm * 1e3,
        warm / v,
        warm / r
    );
}

fn dump(dir: &Path) {
    let body = build_request();
    let projected = projected(&body);
    std::fs::create_dir_all(dir).expect("dump dir");
    std::fs::write(dir.join("request.json"), &body).expect("write request");
    std::fs::write(dir.join("projected.json"), &projected.body).expect("write projection");
    std::fs::write(dir.join("report.txt"), format!("{:#?}", projected.report()))
        .expect("write report");
}

criterion_group!(benches, bench);

/// One stage of the pipeline over a whole transcript.
type Stage = fn(&staleguard::internal::transcript::Transcript<'_>) -> usize;

fn main() {
    // `--profile-project` runs only projection, for a profiler.
    if std::env::args().any(|a| a == "--profile-project") {
        let body = build_request();
        if std::env::args().any(|a| a == "--warm") {
            for _ in 0..20 {
                black_box(project_warm(&body));
            }
            return;
        }
        let full = std::env::args().any(|a| a == "--full");
        // `--evidence-only`: the projection with evidence and without progress.
        if std::env::args().any(|a| a == "--evidence-only") {
            let config = Config {
                progress_tracking: Some(false),
                ..config_full()
            };
            for _ in 0..3 {
                black_box(
                    staleguard::project(
                        &body,
                        RequestFormat::OpenAiChat,
                        &config,
                        staleguard::Options::default(),
                    )
                    .map(|p| p.body.len())
                    .ok(),
                );
            }
            return;
        }
        for _ in 0..if full { 3 } else { 20 } {
            black_box(if full {
                project_full(&body)
            } else {
                project(&body)
            });
        }
        return;
    }
    // `--profile-progress` runs full progress tracking, then the counting session, on the
    // whole request.
    if std::env::args().any(|a| a == "--profile-progress") {
        let body = build_request();
        let transcript = staleguard::internal::adapter::read_transcript(&body).expect("request");
        let stages: [(&str, Stage); 2] = [
            ("progress::track", |t| {
                replayed(t, &config_full(), false).progress().steps.len()
            }),
            ("progress::steps", |t| {
                replayed(t, &config_full(), true).progress().steps.len()
            }),
        ];
        for (name, stage) in stages {
            let started = std::time::Instant::now();
            for _ in 0..5 {
                black_box(stage(&transcript));
            }
            let ms = started.elapsed().as_secs_f64() * 200.0;
            eprintln!("{name}: {ms:.1} ms a run");
        }
        return;
    }
    // `--dump DIR` writes the request, its projection and the report, to compare the
    // output of two builds byte for byte.
    if let Some(dir) = std::env::args().skip_while(|a| a != "--dump").nth(1) {
        dump(Path::new(&dir));
        return;
    }
    // `cargo bench -- --ratios-only` skips criterion's long runs.
    if !std::env::args().any(|a| a == "--ratios-only") {
        benches();
        Criterion::default().configure_from_args().final_summary();
    }
    ratios();
}
