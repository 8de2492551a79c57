//! `decide` with 100 profile policies and 0, 1 000 and 10 000 active grants, sliced (the
//! kernel's way) against the naive baseline (every policy and grant in one Cedar set), in the
//! same run. Prints a ratio table at the end.
//!
//! Run: `cargo bench -p craik-kernel --bench decide`

#![allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::print_stdout,
    reason = "benchmark setup fails loudly; the report is the output"
)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use craik_contracts::CapabilityGrant;
use craik_kernel::{Bundle, DecideOptions, Decision, DecisionRequest, GrantSet, Mode, SourceFile};
use criterion::{BenchmarkId, Criterion, criterion_group};
use time::macros::datetime;

const GRANT_COUNTS: [usize; 3] = [0, 1_000, 10_000];

/// Per-iteration times of every sample, by (approach, grants).
static SAMPLES: Mutex<BTreeMap<(String, usize), Vec<f64>>> = Mutex::new(BTreeMap::new());

// The `craik` binary's allocator, so the numbers are the ones users get.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn bundle() -> Bundle {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../policies");
    let schema = SourceFile::new(
        "schema.cedarschema",
        std::fs::read_to_string(format!("{root}/schema.cedarschema")).unwrap(),
    );
    let mut files = Vec::new();
    for dir in ["base", "profiles", "approvals"] {
        let mut names: Vec<_> = std::fs::read_dir(format!("{root}/{dir}"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for path in names {
            files.push(SourceFile::new(
                path.display().to_string(),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
    let base = bundle_len(&schema, &files);
    // Pad to 100 profile policies with ones that are evaluated but never match.
    let capabilities = [
        "repo.read",
        "repo.write.docs",
        "repo.write.code",
        "shell.test",
        "memory.write",
        "git.commit",
        "net.fetch",
    ];
    let mut extra = String::new();
    for i in 0..(100 - base) {
        let cap = capabilities[i % capabilities.len()];
        let effect = if i % 3 == 0 { "forbid" } else { "permit" };
        extra.push_str(&format!(
            "@id(\"bench.p{i}\")\n@reason(\"padding\")\n{effect} (principal, action == Craik::Action::\"{cap}\", resource)\nwhen {{ context.profile == \"bench-{i}\" && context.iteration > {i} }};\n"
        ));
    }
    files.push(SourceFile::new("bench/padding.cedar", extra));
    let bundle = Bundle::load(&schema, &files).unwrap();
    assert_eq!(bundle.policies().count(), 100);
    bundle
}

fn bundle_len(schema: &SourceFile, files: &[SourceFile]) -> usize {
    Bundle::load(schema, files).unwrap().policies().count()
}

fn grants(bundle: &Bundle, n: usize) -> GrantSet {
    let capabilities = [
        "repo.write.docs",
        "repo.write.code",
        "repo.read",
        "shell.test",
    ];
    let mut list: Vec<CapabilityGrant> = (0..n)
        .map(|i| {
            let cap = capabilities[i % capabilities.len()];
            let (paths, exclude) = if cap.starts_with("shell") { (vec![format!("tool{i} run")], vec![format!("tool{i} run --unsafe")]) } else { (vec![format!("area{i}/**"), format!("file{i}.md")], vec![format!("area{i}/secret/**")]) };
            serde_json::from_value(serde_json::json!({
                "id": format!("grant_{i}"), "task_id": format!("task_{}", i % 500), "capability": cap,
                "target": {"paths": paths, "exclude": exclude},
                "operations": ["read", "write"], "expires_at": "2027-01-01T00:00:00Z",
                "reason": "bench", "approved_by": "user:bench"
            }))
            .unwrap()
        })
        .collect();
    // The grant the benchmarked request uses.
    list.push(
        serde_json::from_value(serde_json::json!({
            "id": "grant_bench", "task_id": "task_bench", "capability": "repo.write.docs",
            "target": {"paths": ["docs/**"], "exclude": ["docs/adr/**"]}, "operations": ["write"],
            "reason": "bench", "approved_by": "user:bench"
        }))
        .unwrap(),
    );
    GrantSet::compile(bundle, &list).unwrap()
}

fn request() -> DecisionRequest {
    serde_json::from_value(serde_json::json!({
        "runner": {"id": "runner_bench", "trust": "medium", "mode": "fixture"},
        "task_id": "task_bench", "capability": "repo.write.docs", "target": "docs/guide/intro.md",
        "operation": "write", "profile": "trusted-local", "iteration": 1
    }))
    .unwrap()
}

fn record(approach: &str, n: usize, iters: u64, elapsed: Duration) {
    let per = elapsed.as_secs_f64() / iters.max(1) as f64;
    SAMPLES
        .lock()
        .unwrap()
        .entry((approach.to_owned(), n))
        .or_default()
        .push(per);
}

fn bench(c: &mut Criterion) {
    let bundle = bundle();
    let options = DecideOptions {
        now: datetime!(2026-11-20 10:00 UTC),
        workspace_root: "/w".into(),
        mode: Mode::Enforce,
        immutable: craik_kernel::ImmutablePaths::default(),
    };
    let req = request();
    let mut group = c.benchmark_group("decide");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_secs(1));
    for n in GRANT_COUNTS {
        let set = grants(&bundle, n);
        let naive = bundle.naive(&set);
        let sliced_verdict = bundle.decide(&set, &req, &options);
        let naive_verdict = bundle.decide_naive(&naive, &set, &req, &options);
        assert_eq!(
            sliced_verdict.decision,
            Decision::Allow,
            "{sliced_verdict:?}"
        );
        assert_eq!(sliced_verdict, naive_verdict, "slicing changed the verdict");
        group.bench_with_input(BenchmarkId::new("sliced", n), &n, |b, &n| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(bundle.decide(&set, black_box(&req), &options));
                }
                let elapsed = start.elapsed();
                record("sliced", n, iters, elapsed);
                elapsed
            });
        });
        group.bench_with_input(BenchmarkId::new("naive", n), &n, |b, &n| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(bundle.decide_naive(&naive, &set, black_box(&req), &options));
                }
                let elapsed = start.elapsed();
                record("naive", n, iters, elapsed);
                elapsed
            });
        });
    }
    group.finish();
    flatness(&bundle, &req, &options);

    // A 10 000-request suite (every profile, seven capabilities, 210 grants over 50 tasks),
    // as `craik policy test` decides it: the whole suite per iteration.
    let capabilities = [
        ("repo.read", "read"),
        ("repo.write.docs", "write"),
        ("repo.write.code", "write"),
        ("shell.test", "execute"),
        ("memory.propose", "write"),
        ("git.push", "write"),
        ("net.fetch", "read"),
    ];
    let profiles = ["strict", "trusted-local", "automation", "custom"];
    let suite_grants: Vec<CapabilityGrant> = (0..210)
        .map(|i| {
            let cap = capabilities[i % capabilities.len()].0;
            let target = if cap.starts_with("repo") {
                serde_json::json!({"paths": [format!("area{i}/**"), "README.md"], "exclude": [format!("area{i}/secret/**")]})
            } else if cap.starts_with("shell") {
                serde_json::json!({"paths": ["cargo test"]})
            } else {
                serde_json::json!({})
            };
            serde_json::from_value(serde_json::json!({
                "id": format!("grant_{i}"), "task_id": format!("task_{}", i % 50), "capability": cap, "target": target,
                "operations": ["read", "write", "execute"], "reason": "bench", "approved_by": "user:bench"
            }))
            .unwrap()
        })
        .collect();
    let set = GrantSet::compile(&bundle, &suite_grants).unwrap();
    let naive = bundle.naive(&set);
    let requests: Vec<DecisionRequest> = (0..10_000usize)
        .map(|n| {
            let (cap, op) = capabilities[n % capabilities.len()];
            let target = match cap.split('.').next().unwrap() {
                "repo" => format!("area{}/x/y.md", n % 210),
                "shell" => "cargo test -q".to_owned(),
                "memory" => "team".to_owned(),
                "git" => "origin".to_owned(),
                _ => "https://example.org/".to_owned(),
            };
            serde_json::from_value(serde_json::json!({
                "runner": {"id": "runner_bench"}, "task_id": format!("task_{}", (n * 7) % 50), "capability": cap,
                "target": target, "operation": op, "profile": profiles[(n / 7) % profiles.len()]
            }))
            .unwrap()
        })
        .collect();
    for r in requests.iter().step_by(97) {
        assert_eq!(
            bundle.decide(&set, r, &options),
            bundle.decide_naive(&naive, &set, r, &options)
        );
    }
    let mut suite = c.benchmark_group("suite_10k");
    suite
        .sample_size(10)
        .measurement_time(Duration::from_secs(8))
        .warm_up_time(Duration::from_secs(1));
    suite.bench_function("sliced", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                for r in &requests {
                    black_box(bundle.decide(&set, r, &options));
                }
            }
            let elapsed = start.elapsed();
            record("suite-sliced", 10_000, iters, elapsed);
            elapsed
        });
    });
    suite.bench_function("naive", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                for r in &requests {
                    black_box(bundle.decide_naive(&naive, &set, r, &options));
                }
            }
            let elapsed = start.elapsed();
            record("suite-naive", 10_000, iters, elapsed);
            elapsed
        });
    });
    suite.finish();
}

/// The decision's cost in the number of unrelated grants, as ratios to the 0-grant cost
/// measured interleaved in the same rounds (so a background load changing during the run
/// weighs on every count alike): batches of 500 decisions per grant count, the order rotated
/// every round, 41 rounds; medians of the per-decision times.
fn flatness(bundle: &Bundle, req: &DecisionRequest, options: &DecideOptions) {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    // The 0-grant cost before the larger sets exist: what the heap they occupy costs a
    // decision that never reads them (the sequential figures above include it).
    let alone = grants(bundle, 0);
    let mut fresh: Vec<f64> = (0..41)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..500 {
                black_box(bundle.decide(&alone, black_box(req), options));
            }
            start.elapsed().as_secs_f64() / 500.0
        })
        .collect();
    let fresh = median(&mut fresh);
    let sets: Vec<(usize, GrantSet)> = GRANT_COUNTS
        .iter()
        .map(|&n| (n, grants(bundle, n)))
        .collect();
    let mut per: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for round in 0..41 {
        for k in 0..sets.len() {
            let (n, set) = &sets[(round + k) % sets.len()];
            let start = Instant::now();
            for _ in 0..500 {
                black_box(bundle.decide(set, black_box(req), options));
            }
            per.entry(*n)
                .or_default()
                .push(start.elapsed().as_secs_f64() / 500.0);
        }
    }
    let base = median(per.get_mut(&0).unwrap());
    println!("\ndecide, interleaved: median per decision and ratio to 0 grants (target ≤ 1.10x)");
    for (n, times) in &mut per {
        let m = median(times);
        println!("{n:>8} grants  {:>8.2}µs  {:>6.2}x", m * 1e6, m / base);
    }
    println!(
        "       0 grants  {:>8.2}µs  {:>6.2}x  (before the larger sets were built)",
        fresh * 1e6,
        fresh / base
    );
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn report() {
    let mut samples = SAMPLES.lock().unwrap();
    if samples.is_empty() {
        return;
    }
    println!("\ndecide: median time per decision (100 profile policies)");
    println!(
        "{:>8}  {:>12}  {:>12}  {:>10}",
        "grants", "sliced", "naive", "naive/sliced"
    );
    for n in GRANT_COUNTS {
        let sliced = samples
            .get_mut(&("sliced".to_owned(), n))
            .map(|v| median(v));
        let naive = samples.get_mut(&("naive".to_owned(), n)).map(|v| median(v));
        if let (Some(s), Some(nv)) = (sliced, naive) {
            println!(
                "{n:>8}  {:>10.2}µs  {:>10.2}µs  {:>9.1}x",
                s * 1e6,
                nv * 1e6,
                nv / s
            );
        }
    }
    let sliced = samples
        .get_mut(&("suite-sliced".to_owned(), 10_000))
        .map(|v| median(v));
    let naive = samples
        .get_mut(&("suite-naive".to_owned(), 10_000))
        .map(|v| median(v));
    if let (Some(s), Some(nv)) = (sliced, naive) {
        println!(
            "\nsuite of 10 000 decisions (210 grants): sliced {:.0} ms, naive {:.0} ms, {:.1}x",
            s * 1e3,
            nv * 1e3,
            nv / s
        );
    }
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    report();
}
