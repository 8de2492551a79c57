//! Runs one decision many times, for profilers (`valgrind --tool=callgrind`).
#![allow(clippy::unwrap_used, clippy::print_stdout, reason = "profiling helper")]

use craik_kernel::{Bundle, DecideOptions, GrantSet, Mode, SourceFile};

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
    let grants: Vec<craik_contracts::CapabilityGrant> =
        serde_json::from_value(serde_json::json!([{
            "id": "grant_bench", "task_id": "task_bench", "capability": "repo.write.docs",
            "target": {"paths": ["docs/**"], "exclude": ["docs/adr/**"]}, "operations": ["write"],
            "reason": "bench", "approved_by": "user:bench"
        }]))
        .unwrap();
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
