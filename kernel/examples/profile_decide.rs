//! Runs one decision many times, for profilers (`valgrind --tool=callgrind`).
#![allow(clippy::unwrap_used, clippy::print_stdout, reason = "profiling helper")]

use craik_kernel::{Bundle, DecideOptions, GrantSet, Mode, SourceFile};

// The `craik` binary's allocator, so the profile is the one users run.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../policies");
    let schema = SourceFile::new(
        "schema.cedarschema",
        std::fs::read_to_string(format!("{root}/schema.cedarschema")).unwrap(),
    );
    let mut files = Vec::new();
    for dir in ["base", "profiles", "approvals"] {
        for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
            let path = entry.unwrap().path();
            files.push(SourceFile::new(
                path.display().to_string(),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
    let bundle = Bundle::load(&schema, &files).unwrap();
    // Optional second argument: that many unrelated grants (500 other tasks), as the bench.
    let unrelated: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    let mut list = vec![serde_json::json!({
        "id": "grant_bench", "task_id": "task_bench", "capability": "repo.write.docs",
        "target": {"paths": ["docs/**"], "exclude": ["docs/adr/**"]}, "operations": ["write"],
        "reason": "bench", "approved_by": "user:bench"
    })];
    for i in 0..unrelated {
        list.push(serde_json::json!({
            "id": format!("grant_{i}"), "task_id": format!("task_{}", i % 500),
            "capability": "repo.write.docs",
            "target": {"paths": [format!("area{i}/**")], "exclude": []}, "operations": ["write"],
            "reason": "bench", "approved_by": "user:bench"
        }));
    }
    let grants: Vec<craik_contracts::CapabilityGrant> =
        serde_json::from_value(serde_json::Value::Array(list)).unwrap();
    let set = GrantSet::compile(&bundle, &grants).unwrap();
    let request = serde_json::from_value(serde_json::json!({
        "runner": {"id": "runner_bench"}, "task_id": "task_bench", "capability": "repo.write.docs",
        "target": "docs/guide/intro.md", "operation": "write", "profile": "trusted-local", "iteration": 1
    }))
    .unwrap();
    let options = DecideOptions {
        now: time::OffsetDateTime::UNIX_EPOCH,
        workspace_root: "/w".into(),
        mode: Mode::Enforce,
        immutable: craik_kernel::ImmutablePaths::default(),
    };
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let start = std::time::Instant::now();
    let mut allowed = 0;
    for _ in 0..n {
        if bundle.decide(&set, &request, &options).decision == craik_kernel::Decision::Allow {
            allowed += 1;
        }
    }
    println!(
        "{n} decisions ({allowed} allowed) in {:?}: {:.2} µs each",
        start.elapsed(),
        start.elapsed().as_secs_f64() * 1e6 / n as f64
    );
}
