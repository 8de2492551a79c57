//! The SMT solver: finding it, starting it (killed on drop), checking its version, and the
//! canaries every proof run answers before it may report anything.
//!
//! It must not decide anything about policies: it only hands symcc a process that answered
//! the canaries right.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use cedar_policy::{Policy, PolicySet, RequestEnv, Schema};
use cedar_policy_symcc::solver::{Decision, LocalSolver, Solver};
use cedar_policy_symcc::{CedarSymCompiler, CompiledPolicySet};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::ProveError;

/// The cvc5 version cedar-policy-symcc 0.8.1 documents and its CI runs.
pub const SOLVER_VERSION: &str = "1.3.1";

/// The environment variable naming the solver (symcc's own convention).
pub const SOLVER_ENV: &str = "CVC5";

/// Where the solver comes from and how long a query may take.
#[derive(Debug, Clone)]
pub struct SolverConfig {
    /// An executable speaking `cvc5 --lang smt` on stdin/stdout.
    pub program: PathBuf,
    /// Per-query limit given to cvc5 (`--tlimit-per`), and the wall limit Craik allows a query
    /// before it kills the process.
    pub per_query: Duration,
    /// Accept a solver that reports another version (the report says so).
    pub allow_version: bool,
}

impl SolverConfig {
    /// `flag` (`--solver PATH`), else `$CVC5` (`env`), else `cvc5` on `path_var`.
    /// `Err` names every place looked at (exit 7 in the CLI).
    pub fn discover(
        flag: Option<PathBuf>,
        env: Option<std::ffi::OsString>,
        path_var: Option<std::ffi::OsString>,
    ) -> Result<Self, ProveError> {
        let program = if let Some(p) = flag {
            p
        } else if let Some(p) = env.filter(|p| !p.is_empty()) {
            PathBuf::from(p)
        } else {
            path_var
                .iter()
                .flat_map(std::env::split_paths)
                .map(|d| d.join("cvc5"))
                .find(|p| p.is_file())
                .ok_or_else(|| {
                    ProveError::SolverUnavailable(format!(
                        "no solver: --solver not given, ${SOLVER_ENV} not set, no `cvc5` on PATH; install cvc5 {SOLVER_VERSION} (or `python3 -m pip install cvc5=={SOLVER_VERSION}` and set {SOLVER_ENV}=tools/cvc5-pywheel)"
                    ))
                })?
        };
        if !program.is_file() {
            return Err(ProveError::SolverUnavailable(format!(
                "solver `{}` does not exist or is not a file; install cvc5 {SOLVER_VERSION} (or set {SOLVER_ENV}=tools/cvc5-pywheel after `python3 -m pip install cvc5=={SOLVER_VERSION}`)",
                program.display()
            )));
        }
        Ok(Self {
            program,
            per_query: Duration::from_secs(60),
            allow_version: false,
        })
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args([
            "--lang".to_owned(),
            "smt".to_owned(),
            format!("--tlimit-per={}", self.per_query.as_millis()),
        ])
        .kill_on_drop(true);
        cmd
    }

    /// The solver's `(get-info :version)`, from a short-lived process.
    pub(crate) async fn version(&self) -> Result<String, ProveError> {
        let unavailable = |why: String| {
            ProveError::SolverUnavailable(format!("solver `{}`: {why}", self.program.display()))
        };
        let mut child = self
            .command()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| unavailable(format!("cannot start: {e}")))?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| unavailable("no stdin".into()))?;
        let mut stdout = child
            .stdout
            .take()
            .ok_or_else(|| unavailable("no stdout".into()))?;
        let talk = async {
            stdin
                .write_all(b"(get-info :version)\n(exit)\n")
                .await
                .map_err(|e| unavailable(format!("cannot write: {e}")))?;
            drop(stdin);
            let mut out = Vec::new();
            let mut limited = (&mut stdout).take(4096);
            limited
                .read_to_end(&mut out)
                .await
                .map_err(|e| unavailable(format!("cannot read: {e}")))?;
            Ok::<_, ProveError>(String::from_utf8_lossy(&out).into_owned())
        };
        let out = tokio::time::timeout(Duration::from_secs(20), talk)
            .await
            .map_err(|_| unavailable("no answer to `(get-info :version)` within 20 s".into()))??;
        let _ = child.kill().await;
        parse_version(&out).ok_or_else(|| {
            unavailable(format!(
                "unrecognised answer to `(get-info :version)`: `{}`",
                out.trim().chars().take(120).collect::<String>()
            ))
        })
    }

    /// A fresh solver process behind symcc's compiler.
    pub(crate) fn start(&self) -> Result<CedarSymCompiler<LocalSolver>, ProveError> {
        let solver = LocalSolver::from_command(&mut self.command()).map_err(|e| {
            ProveError::SolverUnavailable(format!(
                "solver `{}`: cannot start: {e}",
                self.program.display()
            ))
        })?;
        CedarSymCompiler::new(solver).map_err(|e| ProveError::Solver(e.to_string()))
    }
}

/// `(:version "1.3.1-modified")` → `1.3.1-modified`.
pub(crate) fn parse_version(out: &str) -> Option<String> {
    let rest = out.split(":version").nth(1)?;
    let start = rest.find('"')? + 1;
    let tail = rest.get(start..)?;
    let end = tail.find('"')?;
    tail.get(..end).map(str::to_owned)
}

/// Whether `version` is the documented one (`1.3.1`, optionally with a `-suffix`).
pub(crate) fn version_ok(version: &str) -> bool {
    version == SOLVER_VERSION
        || version
            .strip_prefix(SOLVER_VERSION)
            .is_some_and(|rest| rest.starts_with('-'))
}

/// What the canaries found; a report carries it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SolverCheck {
    pub program: String,
    pub version: String,
    /// True when the version is not the documented one and `--allow-solver-version` let it run.
    pub version_override: bool,
    pub canaries: Vec<String>,
}

/// Raw SMT-LIB canaries: a known-UNSAT and a known-SAT query.
async fn raw(
    compiler: &mut CedarSymCompiler<LocalSolver>,
    script: &str,
) -> Result<Decision, ProveError> {
    let solver = compiler.solver_mut();
    solver
        .smtlib_input()
        .write_all(script.as_bytes())
        .await
        .map_err(|e| ProveError::SolverUnavailable(format!("canary: cannot write: {e}")))?;
    solver
        .check_sat()
        .await
        .map_err(|e| ProveError::SolverUnavailable(format!("canary: {e}")))
}

/// Runs every canary; `Err(SolverUnavailable)` names the one answered wrong.
pub(crate) async fn canaries(
    config: &SolverConfig,
    schema: &Schema,
) -> Result<SolverCheck, ProveError> {
    let version = config.version().await?;
    let version_override = !version_ok(&version);
    if version_override && !config.allow_version {
        return Err(ProveError::SolverUnavailable(format!(
            "solver `{}` is cvc5 `{version}`, cedar-policy-symcc 0.8.1 is checked against {SOLVER_VERSION}; install {SOLVER_VERSION} or pass --allow-solver-version",
            config.program.display()
        )));
    }
    let limit = config.per_query + Duration::from_secs(10);
    let done = tokio::time::timeout(limit, answers(config, schema))
        .await
        .map_err(|_| {
            ProveError::SolverUnavailable(format!(
                "solver `{}`: no answer to the canaries within {} s; it was stopped",
                config.program.display(),
                limit.as_secs()
            ))
        })??;
    Ok(SolverCheck {
        program: config.program.display().to_string(),
        version,
        version_override,
        canaries: done,
    })
}

/// The canaries' answers (each process is killed when dropped, on a timeout too).
async fn answers(config: &SolverConfig, schema: &Schema) -> Result<Vec<String>, ProveError> {
    let mut compiler = config.start()?;
    let wrong = |name: &str, got: String| {
        ProveError::SolverUnavailable(format!(
            "solver `{}` failed the {name} canary ({got}); its answers cannot be trusted",
            config.program.display()
        ))
    };
    let mut done = Vec::new();
    match raw(&mut compiler, "(reset)\n(set-logic ALL)\n(assert false)\n").await? {
        Decision::Unsat => done.push("raw known-UNSAT: unsat".to_owned()),
        other => return Err(wrong("known-UNSAT", format!("{other:?}"))),
    }
    let sat = "(reset)\n(set-logic ALL)\n(declare-const x (_ BitVec 64))\n(assert (bvslt x #x0000000000000000))\n";
    match raw(&mut compiler, sat).await? {
        Decision::Sat => done.push("raw known-SAT: sat".to_owned()),
        other => return Err(wrong("known-SAT", format!("{other:?}"))),
    }
    let mut compiler = config.start()?;
    symcc_canaries(&mut compiler, schema, &mut done, &wrong).await?;
    Ok(done)
}

/// Canaries through symcc on Craik's own schema: a counterexample must decode to the exact
/// string asked for (SAT with a model), and a set must be equivalent to itself (UNSAT).
async fn symcc_canaries(
    compiler: &mut CedarSymCompiler<LocalSolver>,
    schema: &Schema,
    done: &mut Vec<String>,
    wrong: &dyn Fn(&str, String) -> ProveError,
) -> Result<(), ProveError> {
    let env = schema
        .request_envs()
        .find(|e| e.action().id().unescaped() == "repo.read")
        .ok_or_else(|| ProveError::Internal("the schema has no `repo.read` action".into()))?;
    let set = canary_set()?;
    let compiled = compile(&set, &env, schema)?;
    let cex = compiler
        .check_always_denies_with_counterexample_opt(&compiled)
        .await
        .map_err(|e| wrong("known-SAT (symcc)", e.to_string()))?;
    let path = cex.as_ref().and_then(|env| {
        let uid = env.request.resource()?;
        match env.entities.get(uid)?.attr("path")? {
            Ok(cedar_policy::EvalResult::String(s)) => Some(s),
            _ => None,
        }
    });
    if path.as_deref() != Some("canary/x") {
        return Err(wrong(
            "known-SAT (symcc)",
            format!("counterexample path {path:?}, expected \"canary/x\""),
        ));
    }
    done.push("symcc known-SAT: counterexample decodes to resource.path \"canary/x\"".into());
    let same = compiler
        .check_equivalent_opt(&compiled, &compiled)
        .await
        .map_err(|e| wrong("known-UNSAT (symcc)", e.to_string()))?;
    if !same {
        return Err(wrong(
            "known-UNSAT (symcc)",
            "a set is not equivalent to itself".into(),
        ));
    }
    done.push("symcc known-UNSAT: a set is equivalent to itself".into());
    Ok(())
}

fn canary_set() -> Result<PolicySet, ProveError> {
    let text = r#"permit (principal, action == Craik::Action::"repo.read", resource is Craik::Path) when { resource.path == "canary/x" };"#;
    let policy = Policy::parse(Some(cedar_policy::PolicyId::new("prove.canary")), text)
        .map_err(|e| ProveError::Internal(format!("canary policy: {e}")))?;
    PolicySet::from_policies([policy]).map_err(|e| ProveError::Internal(format!("canary: {e}")))
}

pub(crate) fn compile(
    set: &PolicySet,
    env: &RequestEnv,
    schema: &Schema,
) -> Result<CompiledPolicySet, ProveError> {
    CompiledPolicySet::compile(set, env, schema).map_err(|e| {
        ProveError::Compile(format!(
            "{} on {}: {e}",
            env.action().id().unescaped(),
            env.resource()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_and_checked() {
        assert_eq!(
            parse_version("(:version \"1.3.1-modified\")\n").as_deref(),
            Some("1.3.1-modified")
        );
        assert_eq!(parse_version("unsupported\n"), None);
        assert!(version_ok("1.3.1"));
        assert!(version_ok("1.3.1-modified"));
        assert!(!version_ok("1.3.10"));
        assert!(!version_ok("1.0.3"));
    }

    #[test]
    fn discovery_without_a_solver_names_the_fix() {
        let e = SolverConfig::discover(None, None, Some("/nonexistent".into())).unwrap_err();
        let ProveError::SolverUnavailable(text) = e else {
            panic!("{e:?}")
        };
        assert!(text.contains("pip install cvc5==1.3.1"), "{text}");
        let e = SolverConfig::discover(None, Some("/nonexistent/cvc5".into()), None).unwrap_err();
        assert!(matches!(e, ProveError::SolverUnavailable(t) if t.contains("/nonexistent/cvc5")));
    }
}
