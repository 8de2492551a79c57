//! End-to-end tests of the `craik` binary: each runs the real binary in a temp directory or on
//! committed inputs and asserts exit code and output.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "integration tests fail loudly by design"
)]

mod adapters;
mod audit;
mod backends;
mod boundary;
mod case;
mod config;
mod contracts;
mod crash;
mod decisions;
mod interop;
mod ledger;
mod modelsteps;
mod pinned;
mod policy;
mod progress;
mod prompt;
mod prove;
mod provider;
mod receipts;
mod registry;
mod runs;
mod sandbox;
mod scaffold;
mod schema;
mod secrets;
mod signals;

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;

/// Builds the adapter binaries (other packages of the workspace) into the same target
/// directory as `craik`, once per test run: `cargo test` builds only test harnesses of other
/// packages, and `craik` looks for its adapters beside itself.
pub fn ensure_adapters() {
    static BUILT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let result = BUILT.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let exe = assert_cmd::cargo::cargo_bin("craik");
        let release = exe.components().any(|c| c.as_os_str() == "release");
        let mut cmd = std::process::Command::new(cargo);
        cmd.current_dir(repo_root())
            .args(["build", "--locked", "--quiet"]);
        for name in ["fixture", "codex", "claude", "gemini", "provider"] {
            cmd.args(["-p", &format!("craik-adapter-{name}")]);
        }
        if release {
            cmd.arg("--release");
        }
        match cmd.status() {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!("building the adapters failed: {s}")),
            Err(e) => Err(format!("cannot run cargo to build the adapters: {e}")),
        }
    });
    if let Err(why) = result {
        panic!("{why}");
    }
}

/// The run id `craik run` prints first (`run run_…: status — reason`).
pub fn run_id_of(stdout: &[u8]) -> String {
    String::from_utf8_lossy(stdout)
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .trim_end_matches(':')
        .to_owned()
}

/// `craik`, with no project configuration (a `craik.toml` above the checkout must not change
/// what the tests see; `tests/it/config.rs` sets its own).
pub fn craik() -> Command {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let mut cmd = Command::cargo_bin("craik").expect("craik binary is built");
    cmd.env("CRAIK_CONFIG", "none");
    // A state directory of its own that does not exist (a test that needs one sets it): the
    // operator's real `~/.local/state/craik`, if this machine has one, never leaks in as the
    // default home or the default trusted key.
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    cmd.env(
        "XDG_STATE_HOME",
        std::env::temp_dir().join(format!("craik-it-state-{}-{n}", std::process::id())),
    );
    cmd
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// The reference implementation's payloads, copied into the repository (provenance in
/// `contracts/tests/fixtures/upstream/PROVENANCE.md`).
pub fn upstream_fixture_file() -> PathBuf {
    repo_root().join("contracts/tests/fixtures/upstream/contracts_v0_1.json")
}

/// Exit code, stdout and stderr as one reviewable text.
pub fn transcript(output: &Output) -> String {
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        output
            .status
            .code()
            .map_or("signal".into(), |c| c.to_string()),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

pub fn run_in(dir: &Path, args: &[&str]) -> Output {
    craik()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("craik runs")
}
