//! The side-effect executors: reads, writes and patches inside the workspace, and confined
//! commands; each outcome receipted.

use super::*;

impl Host {
    /// Performs an allowed action, write-ahead: the decision receipt is already on disk.
    pub(super) fn execute(
        &mut self,
        action: &ActionRecord,
        verdict: &Verdict,
    ) -> Result<(), Error> {
        let p = action.proposed.clone();
        let root = self.workspace_root();
        let target = match p.target.as_deref().map(|t| TargetPath::normalize(&root, t)) {
            Some(Ok(t)) => Some(t),
            Some(Err(e)) => {
                return self.outcome_receipt(action, false, &format!("refused target: {e}"), None);
            }
            None => None,
        };
        let rel = target
            .as_ref()
            .map(|t| t.as_str().to_owned())
            .unwrap_or_default();
        // The executor comes from the pair the kernel decided, never from the label alone.
        let effect = Effect::of(&p.capability, &p.operation);
        if verdict.decision != Decision::Allow {
            return self.outcome_receipt(action, false, "not allowed; not executed", None);
        }
        match effect {
            Some(Effect::ReadFile) => self.read_file(action, &rel),
            Some(effect @ (Effect::WriteFile | Effect::PatchFile)) => {
                self.write_file(action, &rel, effect == Effect::PatchFile)
            }
            Some(Effect::Execute) => self.run_command(action),
            Some(Effect::CreateFile | Effect::DeleteFile | Effect::External) | None => {
                self.outcome_receipt(action, false, "no executor", None)
            }
        }
    }

    /// The write-ahead record that `action` starts now (with a file's hashes before and
    /// after, so recovery can tell whether a write landed).
    fn executing_event(
        &mut self,
        action: &ActionRecord,
        pre: Option<String>,
        post: Option<String>,
    ) -> Result<(), Error> {
        self.event(&Event::Executing {
            at: ts(self.clock.now()),
            action: action.id.clone(),
            pre,
            post,
        })
    }

    /// Reads a workspace file; the receipt names its size, the run output holds its redacted
    /// text (at most 16 KiB).
    fn read_file(&mut self, action: &ActionRecord, rel: &str) -> Result<(), Error> {
        self.executing_event(action, None, None)?;
        match self.workspace.read_text(rel) {
            Ok(text) => {
                let shown = match redact_checked(&text) {
                    Ok(r) => r.text,
                    Err(what) => format!("[withheld: the file holds {what}]"),
                };
                let shown: String = shown.chars().take(16 * 1024).collect();
                let summary = format!("read {rel} ({} bytes)", text.len());
                self.outcome_receipt(action, true, &summary, Some(shown))
            }
            Err(e) => self.outcome_receipt(action, false, &format!("read failed: {e}"), None),
        }
    }

    /// Writes (or patches) a workspace file, write-ahead: the `executing` event names the
    /// hashes before and after, so recovery can tell whether the write landed.
    fn write_file(&mut self, action: &ActionRecord, rel: &str, patch: bool) -> Result<(), Error> {
        let p = &action.proposed;
        let pre = match self.workspace.state(rel) {
            Ok(s) => s,
            Err(e) => {
                return self.outcome_receipt(action, false, &format!("refused: {e}"), None);
            }
        };
        let new_text = if patch {
            self.workspace
                .read_text(rel)
                .and_then(|t| exec::apply_edits(&t, &p.edits))
        } else {
            Ok(p.content.clone().unwrap_or_default())
        };
        let new_text = match new_text {
            Ok(t) => t,
            Err(e) => {
                return self.outcome_receipt(action, false, &format!("patch failed: {e}"), None);
            }
        };
        let post = exec::digest(new_text.as_bytes());
        self.executing_event(action, pre.hash().map(str::to_owned), Some(post.clone()))?;
        match self.workspace.write(rel, new_text.as_bytes(), &action.id) {
            Ok(()) => {
                self.crash.synced(2);
                self.crash.point();
                let verb = if pre == FileState::Missing {
                    "created"
                } else {
                    "updated"
                };
                let summary = format!("{verb} {rel} ({} bytes, {post})", new_text.len());
                self.outcome_receipt(action, true, &summary, None)
            }
            Err(e) if e.starts_with(exec::UNCERTAIN_PREFIX) => {
                // Not "write failed": the rename happened. Check the bytes now and record
                // what is true: written, durability uncertain.
                let landed = self.workspace.state(rel).ok();
                let ok = landed.as_ref().and_then(FileState::hash) == Some(post.as_str());
                let summary = if ok {
                    format!("wrote {rel} ({post}), but {e}")
                } else {
                    format!("write of {rel} uncertain: {e}; the file does not hold {post}")
                };
                self.outcome_receipt(action, ok, &summary, None)
            }
            Err(e) => self.outcome_receipt(action, false, &format!("write failed: {e}"), None),
        }
    }

    /// Runs a command confined (fresh HOME and TMPDIR, removed after); the receipt names its
    /// exit and its confinement, the run output its redacted output.
    fn run_command(&mut self, action: &ActionRecord) -> Result<(), Error> {
        let p = &action.proposed;
        let argv = p.argv.clone().unwrap_or_default();
        let env = match self.command_env(&action.id) {
            Ok(env) => env,
            Err(e) => {
                let why = format!("not run: confinement: {e}");
                return self.outcome_receipt(action, false, &why, None);
            }
        };
        let confinement = env.sandbox.describe();
        self.executing_event(action, None, None)?;
        let timeout = p
            .timeout_ms
            .map_or(exec::MAX_TIMEOUT, Duration::from_millis);
        let ran = exec::run_command(&argv, &self.workspace.root, timeout, &env);
        // The command's HOME and TMPDIR die with it.
        let _ = std::fs::remove_dir_all(env.home.parent().unwrap_or(&env.home));
        let done = match ran {
            Ok(done) => done,
            Err(e) => {
                let why = format!("not run: {e}; confinement: {confinement}");
                return self.outcome_receipt(action, false, &why, None);
            }
        };
        self.crash.point();
        let ok = done.exit_code == Some(0) && !done.timed_out;
        let capture = format!("{}{}", done.stdout, done.stderr);
        let shown = match redact_checked(&capture) {
            Ok(r) => r.text,
            Err(what) => format!("[withheld: the output held {what}]"),
        };
        let summary = if done.timed_out {
            format!("{} timed out; its process group was killed", done.program)
        } else {
            format!(
                "{} exited {}{}",
                done.program,
                done.exit_code.map_or("by signal".into(), |c| c.to_string()),
                if done.truncated {
                    " (output truncated)"
                } else {
                    ""
                }
            )
        };
        let summary = format!("{summary}; confinement: {confinement}");
        self.outcome_receipt(action, ok, &summary, Some(shown))
    }

    /// A command's sandbox: it reads the system paths and the workspace, writes only the
    /// workspace and its own fresh HOME and TMPDIR (under the run directory, outside the
    /// workspace), never Craik's home otherwise, and has no network (no shell capability is a
    /// network one). Required outside `trusted-local`.
    pub(super) fn command_env(&self, action_id: &str) -> Result<exec::CommandEnv, String> {
        let base = self.dir.root().join("sandbox").join(action_id);
        let _ = std::fs::remove_dir_all(&base);
        let (home, tmp) = (base.join("home"), base.join("tmp"));
        for dir in [&home, &tmp] {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let sandbox = crate::confine::Sandbox::for_profile(
            Vec::new(),
            vec![self.workspace.root.clone(), home.clone(), tmp.clone()],
            Some(&self.home.root),
            false,
            self.inputs.profile == PolicyProfile::TrustedLocal,
        )?;
        Ok(exec::CommandEnv { sandbox, home, tmp })
    }

    /// What a command resolves to here: `program <real path>, cwd <workspace>`.
    pub(super) fn command_identity(&self, argv: &[String]) -> String {
        let program = argv.first().map_or_else(
            || Err("empty argv".to_owned()),
            |p| exec::resolve_program(p, &self.workspace.root),
        );
        match program {
            Ok(path) => format!(
                "program {}, cwd {}",
                path.display(),
                self.workspace.root.display()
            ),
            Err(e) => format!(
                "program unresolved ({e}), cwd {}",
                self.workspace.root.display()
            ),
        }
    }

    pub(super) fn outcome_receipt(
        &mut self,
        action: &ActionRecord,
        ok: bool,
        summary: &str,
        output: Option<String>,
    ) -> Result<(), Error> {
        let request = self.decision_request(action, Vec::new());
        let hash = craik_kernel::request_hash(&self.bundle, &request, &self.workspace_root())
            .unwrap_or_default();
        let status = if ok {
            ReceiptStatus::Passed
        } else {
            ReceiptStatus::Failed
        };
        let draft = ReceiptDraft {
            task_id: self.inputs.task.id.clone(),
            actor: self.runner_ref().id,
            capability: action.proposed.capability.clone(),
            target: target_text(action),
            policy_profile: self.inputs.profile,
            fail_open: false,
            reason: format!("outcome of {}", action.id),
            result: result(status, summary),
            redacted: true,
            policy_set: self.bundle.hash().to_owned(),
            request_hash: hash,
            decision: Decision::Allow,
            determining_policies: Vec::new(),
            decided_by: DecidedBy {
                kind: DecidedByKind::Outcome,
                by: String::new(),
            },
            mode: self.mode(),
            action: Some(action.id.clone()),
        };
        let receipt = self.receipt(draft)?;
        self.record_outcome(Outcome {
            action: action.id.clone(),
            label: action.proposed.id.clone(),
            decision: "allow".into(),
            ok,
            summary: summary.to_owned(),
            output,
            receipt,
        })
    }

    pub(super) fn record_outcome(&mut self, outcome: Outcome) -> Result<(), Error> {
        self.event(&Event::Outcome {
            at: ts(self.clock.now()),
            outcome: outcome.clone(),
        })?;
        self.pending.retain(|a| a.id != outcome.action);
        self.outcomes.push(outcome.clone());
        self.all_outcomes.push(outcome);
        Ok(())
    }
}
