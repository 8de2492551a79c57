//! The solver's guards: version check and canaries refuse a solver that answers wrong.

use std::os::unix::fs::PermissionsExt;

use craik_prove::{ProveError, SolverConfig};

use crate::Loaded;

/// A fake solver script (a committed-style fixture written to a temp dir).
fn fake(dir: &std::path::Path, name: &str, body: &str) -> SolverConfig {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    SolverConfig::discover(Some(path), None, None).unwrap()
}

#[test]
fn a_solver_that_answers_unsat_to_everything_fails_the_sat_canary() {
    let dir = tempfile::tempdir().unwrap();
    let always_unsat = r#"while read -r line; do case "$line" in *get-info*) echo '(:version "1.3.1")';; *check-sat*) echo unsat;; esac; done"#;
    let config = fake(dir.path(), "unsat", always_unsat);
    let b = Loaded::embedded();
    let e = craik_prove::never_errors(b.side(), &[], &config).unwrap_err();
    let ProveError::SolverUnavailable(text) = e else {
        panic!("{e:?}")
    };
    assert!(text.contains("known-SAT canary"), "{text}");
}

#[test]
fn a_solver_that_answers_sat_to_everything_fails_the_unsat_canary() {
    let dir = tempfile::tempdir().unwrap();
    let always_sat = r#"while read -r line; do case "$line" in *get-info*) echo '(:version "1.3.1")';; *check-sat*) echo sat;; esac; done"#;
    let config = fake(dir.path(), "sat", always_sat);
    let b = Loaded::embedded();
    let e = craik_prove::never_errors(b.side(), &[], &config).unwrap_err();
    assert!(
        matches!(&e, ProveError::SolverUnavailable(t) if t.contains("known-UNSAT canary")),
        "{e:?}"
    );
}

#[test]
fn another_cvc5_version_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let old = r#"while read -r line; do case "$line" in *get-info*) echo '(:version "1.0.3")';; esac; done"#;
    let config = fake(dir.path(), "old", old);
    let b = Loaded::embedded();
    let e = craik_prove::never_errors(b.side(), &[], &config).unwrap_err();
    assert!(
        matches!(&e, ProveError::SolverUnavailable(t) if t.contains("`1.0.3`") && t.contains("--allow-solver-version")),
        "{e:?}"
    );
}

#[test]
fn a_solver_that_dies_is_reported_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let config = fake(dir.path(), "dies", "exit 3");
    let b = Loaded::embedded();
    let e = craik_prove::never_errors(b.side(), &[], &config).unwrap_err();
    assert!(matches!(e, ProveError::SolverUnavailable(_)), "{e:?}");
}

#[test]
fn the_real_solver_passes_the_canaries() {
    let Some(config) = crate::solver() else {
        return;
    };
    let b = Loaded::embedded();
    let r = craik_prove::never_errors(b.side(), &[], &config).unwrap();
    assert!(r.solver.version.starts_with("1.3.1"), "{:?}", r.solver);
    assert_eq!(r.solver.canaries.len(), 4, "{:?}", r.solver.canaries);
    assert!(!r.solver.version_override);
}

#[test]
fn a_solver_that_hangs_is_stopped_and_killed() {
    let dir = tempfile::tempdir().unwrap();
    // Answers the version and the raw canaries, then never answers: the first symcc query
    // (a canary in the next process) hangs.
    let marker = dir.path().join("pids");
    let count = dir.path().join("count");
    let body = format!(
        r#"echo $$ >> {m}
while read -r line; do case "$line" in *get-info*) echo '(:version "1.3.1")';; *check-sat*) echo x >> {c}; n=$(wc -l < {c}); if [ $n = 1 ]; then echo unsat; elif [ $n = 2 ]; then echo sat; else exec sleep 600; fi;; esac; done"#,
        m = marker.display(),
        c = count.display()
    );
    let mut config = fake(dir.path(), "hangs", &body);
    config.per_query = std::time::Duration::from_secs(1);
    let b = Loaded::embedded();
    let started = std::time::Instant::now();
    let e = craik_prove::never_errors(b.side(), &[], &config).unwrap_err();
    assert!(
        matches!(&e, ProveError::SolverUnavailable(t) if t.contains("no answer to the canaries within 11 s")),
        "{e:?}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(40));
    // Every solver process it started is gone (killed on drop).
    std::thread::sleep(std::time::Duration::from_millis(300));
    for pid in std::fs::read_to_string(&marker).unwrap().lines() {
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ");
        assert!(!alive, "solver process {pid} survived");
    }
}
