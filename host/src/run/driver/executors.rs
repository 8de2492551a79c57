//! The side-effect executors: reads, writes and patches inside the workspace, and confined
//! commands; each outcome receipted.

use std::path::Path;

use super::*;
use crate::run::{manifest, precommand};

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
        // The executor comes from the pair the kernel decided, never from the label alone.
        let effect = Effect::of(&p.capability, &p.operation);
        // A file effect always has a target here: the shape check refuses one without before
        // the kernel decides (`Host::shape_problem`). Broken, the run stops, loudly.
        let rel = match (&target, effect) {
            (Some(t), _) => t.as_str().to_owned(),
            (None, Some(Effect::ReadFile | Effect::WriteFile | Effect::PatchFile)) => {
                return Err(Error::internal(format!(
                    "{}: a file action without a target reached its executor",
                    action.id
                )));
            }
            (None, _) => String::new(),
        };
        if verdict.decision != Decision::Allow {
            return self.outcome_receipt(action, false, "not allowed; not executed", None);
        }
        // What has a signed outcome is never performed again, whatever the events say
        // (issue 31 item 2): events lost past the crash model re-ask a step, and its actions
        // come back under the ids the journal already holds outcomes for.
        if let Some(done) = self
            .receipts_by_action
            .get(&action.id)
            .and_then(|rs| {
                rs.iter()
                    .rev()
                    .find(|r| r.decided_by.kind == DecidedByKind::Outcome)
            })
            .map(|r| r.id.clone())
        {
            let why = format!(
                "not executed: {} already has a signed outcome ({done}); the run's events lost steps its journal signs, and what was performed is never performed again",
                action.id
            );
            return self.outcome_receipt(action, false, &why, None);
        }
        match effect {
            Some(Effect::ReadFile) => self.read_file(action, &rel),
            Some(effect @ (Effect::WriteFile | Effect::PatchFile)) => {
                self.write_file(action, &rel, effect == Effect::PatchFile)
            }
            Some(Effect::Execute) => self.run_command(action, &verdict.grants),
            Some(Effect::CreateFile | Effect::DeleteFile | Effect::External) | None => {
                self.outcome_receipt(action, false, "no executor", None)
            }
        }
    }

    /// The write-ahead record that `action` starts now (with a file's hashes before and
    /// after, so recovery can tell whether a write landed). For a side effect (`durable`) it
    /// is a group commit: the decision receipt, then this event, durable before the effect
    /// starts. A read's is left to the next commit: lost, the read is decided again, and
    /// nothing it returned has reached the runner (`Host::step` commits first).
    fn executing_event(
        &mut self,
        action: &ActionRecord,
        pre: Option<String>,
        post: Option<String>,
        durable: bool,
    ) -> Result<(), Error> {
        let starting = crate::ledger::Starting {
            action: action.id.clone(),
            pre: pre.clone(),
            post: post.clone(),
            findings: None,
        };
        let event = Event::Executing {
            at: ts(self.clock.now()),
            action: action.id.clone(),
            pre,
            post,
        };
        if durable {
            self.event(&event)?;
            // The ledger records the journal up to this decision before the effect starts
            // (outside testing round 14: a run killed mid-way, its journal cut back to its
            // first receipt, performed its signed side effects again on resume): a journal
            // put back or cut behind it is never continued. It names the effect, so recovery
            // knows it started though `events.jsonl` lose the event (round 17 N1).
            self.ledger_checkpoint("executing", Some(&starting))
        } else {
            self.event_lazy(&event)
        }
    }

    /// Reads a workspace file; the receipt names its size, the run output holds its redacted
    /// text (at most 16 KiB).
    fn read_file(&mut self, action: &ActionRecord, rel: &str) -> Result<(), Error> {
        self.executing_event(action, None, None, false)?;
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
        if let Some(why) = manifest::layout_refusal(&self.workspace.root, rel) {
            let why = format!("refused: `{}`: {why}", craik_contracts::Truncated(rel));
            return self.outcome_receipt(action, false, &why, None);
        }
        if let Some(because) = self.git_named(rel) {
            let why = format!("refused: `{}`: {because}", craik_contracts::Truncated(rel));
            return self.outcome_receipt(action, false, &why, None);
        }
        let pre = match self.workspace.state(rel) {
            Ok(s) => s,
            Err(e) => {
                return self.outcome_receipt(action, false, &format!("refused: {e}"), None);
            }
        };
        let new_text = if patch {
            let edited = match self.workspace.read_text(rel) {
                Ok(text) => exec::apply_edits(&text, &p.edits).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match edited {
                Ok(t) => t,
                Err(e) => {
                    return self.outcome_receipt(
                        action,
                        false,
                        &format!("patch failed: {e}"),
                        None,
                    );
                }
            }
        } else {
            // The shape check refuses a `write` without content (`Host::shape_problem`).
            p.content.clone().ok_or_else(|| {
                Error::internal(format!(
                    "{}: a write without content reached its executor",
                    action.id
                ))
            })?
        };
        let post = exec::digest(new_text.as_bytes());
        self.executing_event(
            action,
            pre.hash().map(str::to_owned),
            Some(post.clone()),
            true,
        )?;
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
            Err(e @ exec::WriteError::Uncertain { .. }) => {
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

    /// Runs a command confined (fresh HOME and TMPDIR, removed after; writes only its write
    /// scope); the receipt names its exit, its confinement and every file it created, changed
    /// or removed. A change outside the scope or to a protected path fails the step and is
    /// undone.
    fn run_command(&mut self, action: &ActionRecord, grants: &[String]) -> Result<(), Error> {
        let p = &action.proposed;
        // The shape check refuses a command without argv (`Host::shape_problem`).
        let argv = p.argv.clone().filter(|a| !a.is_empty()).ok_or_else(|| {
            Error::internal(format!(
                "{}: a command without argv reached its executor",
                action.id
            ))
        })?;
        let plan = match self.command_env(grants) {
            Ok(plan) => plan,
            Err(e) => {
                let why = format!("not run: confinement: {e}");
                return self.outcome_receipt(action, false, &why, None);
            }
        };
        let env = &plan.env;
        let confinement = env.sandbox.describe();
        // What the command is checked against is durable before it starts (issue 31 item 2):
        // killed while it runs, `runs recover` diffs the workspace against it and puts back
        // what it may not change. Not persisted, the command does not run (fail closed).
        if let Err(e) = self.persist_precommand(action, &plan) {
            let why = format!(
                "not run: its pre-command record could not be made durable: {e}; confinement: {confinement}"
            );
            return self.outcome_receipt(action, false, &why, None);
        }
        self.executing_event(action, None, None, true)?;
        // Never past the wall-clock budget (at least a second, so a command can start).
        let left = self
            .machine
            .wall_clock_left(self.clock.now())
            .map(|d| d.unsigned_abs().max(Duration::from_secs(1)));
        let timeout = p
            .timeout_ms
            .map_or(exec::MAX_TIMEOUT, Duration::from_millis)
            .min(left.unwrap_or(exec::MAX_TIMEOUT));
        let root = self.workspace.root.clone();
        // What the check after the command finds is persisted (signed, durable) before
        // anything is undone when something must be: an undo a crash cuts short is finished
        // from it by `runs recover`. Not persisted, the undo still runs (the outcome, signed
        // right after, names it); only that crash window loses the finer record.
        let mut persist =
            |changes: &[manifest::FileChange]| self.persist_findings(&action.id, changes);
        let (ran, changes) = plan.run_checked(&root, &mut persist, || {
            let ran = exec::run_command(&argv, &root, timeout, env);
            // What the command left in its HOME and TMPDIR dies with it.
            for dir in [&env.home, &env.tmp] {
                let _ = crate::fsio::empty_dir(dir);
            }
            ran
        });
        let done = match ran {
            Ok(done) => done,
            // Which of the two is the error's type, never its text (issue 30 item 1).
            Err(e) if e.ran() => {
                let why = format!("ran, then failed: {e}; confinement: {confinement}");
                return self.command_outcome(action, false, &why, None, &changes);
            }
            Err(e) => {
                let why = format!("not run: {e}; confinement: {confinement}");
                return self.command_outcome(action, false, &why, None, &changes);
            }
        };
        self.crash.point();
        let ok = done.exit_code == Some(0) && !done.timed_out;
        let capture = format!("{}{}", done.stdout, done.stderr);
        let shown = match redact_checked(&capture) {
            Ok(r) => r.text,
            Err(what) => format!("[withheld: the output held {what}]"),
        };
        let summary = if let (true, Some(signal)) = (done.timed_out, crate::confine::interrupted())
        {
            format!(
                "{} was killed with every process it started: the run was interrupted by {}",
                done.program,
                crate::confine::signal_name(signal)
            )
        } else if done.timed_out {
            format!(
                "{} timed out; it was killed with every process it started",
                done.program
            )
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
        let read_only = &plan.check.protected_in_scope;
        let summary = if !ok && !read_only.is_empty() {
            format!(
                "{summary}; read-only inside its write scope (protected: an ADR, agent or git configuration, a hook; writes there fail with `Permission denied`/`Read-only file system`): {}{}; confinement: {confinement}",
                read_only
                    .iter()
                    .take(5)
                    .map(|p| format!("`{}`", craik_contracts::Truncated(p)))
                    .collect::<Vec<_>>()
                    .join(", "),
                if read_only.len() > 5 {
                    format!(" and {} more", read_only.len() - 5)
                } else {
                    String::new()
                }
            )
        } else {
            format!("{summary}; confinement: {confinement}")
        };
        self.command_outcome(action, ok, &summary, Some(shown), &changes)
    }

    /// The outcome of a command with the files it changed: any forbidden change fails it
    /// and is named (with whether it was undone).
    fn command_outcome(
        &mut self,
        action: &ActionRecord,
        ok: bool,
        summary: &str,
        output: Option<String>,
        changes: &Result<Vec<manifest::FileChange>, SettleError>,
    ) -> Result<(), Error> {
        let of = self.outcome_of(action)?;
        self.command_outcome_signed(&of, ok, summary, output, changes)
            .map(drop)
    }

    /// [`Self::command_outcome`], returning the summary it signed.
    fn command_outcome_signed(
        &mut self,
        of: &OutcomeOf,
        ok: bool,
        summary: &str,
        output: Option<String>,
        changes: &Result<Vec<manifest::FileChange>, SettleError>,
    ) -> Result<String, Error> {
        let (ok, summary, files) = match changes {
            Ok(changes) => {
                let bad: Vec<String> = changes
                    .iter()
                    .filter_map(|c| {
                        let why = c.forbidden.as_ref()?;
                        let restored = match &c.restored {
                            Some(Ok(())) => "restored".to_owned(),
                            Some(Err(e)) => format!("NOT restored: {e}"),
                            None => "NOT restored".to_owned(),
                        };
                        Some(format!(
                            "{} `{}` ({why}; {restored})",
                            c.change.as_str(),
                            craik_contracts::Truncated(&c.path)
                        ))
                    })
                    .collect();
                let summary = if bad.is_empty() {
                    format!("{summary}; files: {} changed", changes.len())
                } else {
                    format!("FORBIDDEN WRITES: {}; {summary}", bad.join(", "))
                };
                (ok && bad.is_empty(), summary, manifest_metadata(changes))
            }
            Err(e) => (
                false,
                format!("{summary}; the workspace could not be checked after the command: {e}"),
                Vec::new(),
            ),
        };
        let mut metadata = Object::new();
        metadata
            .0
            .insert("files".into(), serde_json::Value::Array(files));
        self.signed_outcome(of, ok, &summary, output, metadata)?;
        // A command's outcome cannot be read back from the workspace the way a file write's
        // can (its bytes): lost to a power loss, the command would be uncertain and the run
        // blocked. So it is made durable now, not at the next commit.
        self.sync_journal()?;
        // Signed and durable: its pre-command record has served.
        self.drop_precommand(&of.action);
        Ok(summary)
    }

    /// Persists what `plan` checks the command of `action` against (durably, atomically),
    /// signed with the run's key: [`crate::run::precommand`].
    fn persist_precommand(
        &mut self,
        action: &ActionRecord,
        plan: &CommandPlan,
    ) -> Result<(), PersistError> {
        let name = precommand::name(&action.id)
            .ok_or_else(|| precommand::PrecommandError::Name(action.id.clone()))?;
        let check = &plan.check;
        let bytes = precommand::encode(
            &self.inputs.run_id,
            &action.id,
            &check.scopes,
            &check.immutable,
            &check.before,
            &check.pre,
            &self.signer,
        )?;
        self.dir.replace(&name, &bytes, true)?;
        self.crash.synced(2);
        self.crash.point();
        Ok(())
    }

    /// Removes `action`'s pre-command record, best effort: one left behind is removed by the
    /// next recovery, which finds the action's outcome signed.
    pub(super) fn drop_precommand(&mut self, action: &str) {
        for name in [precommand::name(action), precommand::findings_name(action)]
            .into_iter()
            .flatten()
        {
            let _ = std::fs::remove_file(self.dir.file(&name));
        }
    }

    /// A command of `action` was running when the process stopped (started, no outcome):
    /// the workspace is checked against its persisted pre-command record — forbidden changes
    /// undone (protected files put back from their pre-images, plants removed) — and the
    /// outcome, failed and uncertain (its exit is unknown), names every change it made; it is
    /// never run again. Without a record that verifies, what it changed is unknown, and the
    /// outcome says why. The record is removed once the outcome is signed.
    /// Persists what the check after a command found (signed, durable) before anything is
    /// undone, when something must be: an undo a crash cuts short is finished from it by
    /// `runs recover`. Not persisted, the undo still runs (the outcome, signed right after,
    /// names it); only that crash window loses the finer record.
    /// The findings' `sha256:` is then recorded by the home ledger (a `ledger.run_checkpoint`,
    /// why `undoing`): deleted afterwards, recovery knows they existed and says so (outside
    /// testing round 17b M5: a deleted `.found` hid what a killed recovery had undone).
    fn persist_findings(&mut self, action: &str, changes: &[manifest::FileChange]) {
        if !changes.iter().any(|c| c.forbidden.is_some()) {
            return;
        }
        let Some(name) = precommand::findings_name(action) else {
            return;
        };
        let Ok(bytes) =
            precommand::encode_findings(&self.inputs.run_id, action, changes, &self.signer)
        else {
            return;
        };
        if self.dir.replace(&name, &bytes, true).is_err() {
            return;
        }
        let starting = crate::ledger::Starting {
            action: action.to_owned(),
            pre: None,
            post: None,
            findings: Some(exec::digest(&bytes)),
        };
        if let Err(e) = self.ledger_checkpoint("undoing", Some(&starting)) {
            self.notes.push(format!(
                "{action}: its check's findings were persisted, but the home ledger could not record them: {e}"
            ));
        }
    }

    /// The findings the home ledger records `action`'s check persisted (their `sha256:`)
    /// that the findings file here (`present`, its bytes) does not account for: the file
    /// missing, or another one, or more than one recorded — a check writes its findings once
    /// and a recovery uses them, so a second record means the first was deleted or replaced
    /// (outside testing round r31d P4: a recovery killed after writing new findings had
    /// laundered the deleted ones). Recovery says so in the outcome.
    fn findings_lost(&self, action: &str, present: Option<&[u8]>) -> Result<Option<String>, Error> {
        let record = crate::ledger::run_record(&self.home.root, &self.keys, &self.inputs.run_id)?;
        let recorded: Vec<String> = record
            .map(|r| r.starting)
            .into_iter()
            .flatten()
            .filter(|s| s.action == action)
            .filter_map(|s| s.findings)
            .collect();
        let accounted = match (present, recorded.as_slice()) {
            (_, []) => true,
            (Some(bytes), [one]) => crate::run::exec::digest(bytes) == *one,
            _ => false,
        };
        Ok((!accounted).then(|| recorded.join(", ")))
    }

    pub(super) fn recover_command(&mut self, of: &OutcomeOf) -> Result<String, Error> {
        // What it left in its HOME and TMPDIR goes (the directories are the run's).
        let base = self.dir.root().join("sandbox");
        for dir in [base.join("home"), base.join("tmp")] {
            if dir.is_dir() {
                let _ = crate::fsio::empty_dir(&dir);
            }
        }
        let uncertain = "uncertain: the process stopped while this ran; it is never re-run blindly";
        let name = precommand::name(&of.action).unwrap_or_default();
        let record: Result<Option<precommand::Record>, PersistError> = if name.is_empty() {
            Err(precommand::PrecommandError::Name(of.action.clone()).into())
        } else {
            match self.dir.read_bytes(&name) {
                Ok(Some(bytes)) => {
                    precommand::decode(&bytes, &self.inputs.run_id, &of.action, &self.keys)
                        .map(Some)
                        .map_err(PersistError::from)
                }
                Ok(None) => Ok(None),
                Err(e) => Err(e.into()),
            }
        };
        let summary = match record {
            Ok(Some(record)) => {
                let root = self.workspace.root.clone();
                // The check after the command had found what it changed and begun to undo it:
                // that undo is finished from its findings (what it writes comes from the signed
                // record only), and the outcome names what the command did.
                let found_name = precommand::findings_name(&of.action);
                let found_bytes = found_name
                    .as_ref()
                    .and_then(|n| self.dir.read_bytes(n).ok().flatten());
                let lost = self.findings_lost(&of.action, found_bytes.as_deref())?;
                let found = found_bytes.map(|bytes| {
                    precommand::decode_findings(&bytes, &self.inputs.run_id, &of.action, &self.keys)
                });
                let (changes, how) = match found {
                    Some(Ok(mut changes)) => {
                        manifest::unlock_dirs(&root);
                        manifest::undo(&root, &record.before, &mut changes, &record.pre);
                        let finished = "it had ended and the check after it had begun; that check was finished from its persisted findings";
                        let how = match &lost {
                            Some(recorded) => format!(
                                "TAMPERED OR LOST: the home ledger records findings of the check after it ({recorded}) that `{}` does not account for (deleted or replaced), so what was undone before this recovery cannot all be named: check the workspace by hand; {finished}",
                                found_name.as_deref().map_or_else(
                                    || "its findings file".to_owned(),
                                    |n| self.dir.file(n).display().to_string()
                                )
                            ),
                            None => finished.to_owned(),
                        };
                        (Ok(changes), how)
                    }
                    found => {
                        let check = Check {
                            protected_in_scope: Vec::new(),
                            scopes: record.scopes,
                            immutable: record.immutable,
                            before: record.before,
                            pre: record.pre,
                        };
                        let how = match (found, lost) {
                            (Some(Err(e)), _) => format!(
                                "its persisted findings cannot be used ({e}); the workspace was checked against its pre-command manifest"
                            ),
                            (_, Some(recorded)) => format!(
                                "TAMPERED OR LOST: the home ledger records that the check after it persisted its findings ({recorded}) before undoing anything, but `{}` is missing or another, so what was undone before this recovery cannot be named: check the workspace by hand; the workspace was checked against its pre-command manifest",
                                found_name.as_deref().map_or_else(
                                    || "its findings file".to_owned(),
                                    |n| self.dir.file(n).display().to_string()
                                )
                            ),
                            _ => "the workspace was checked against its pre-command manifest"
                                .to_owned(),
                        };
                        // Found, persisted, then undone, as after a command the driver ran
                        // (outside testing round 17 N7: a recovery killed mid-undo left out
                        // of the outcome what it had already undone).
                        let mut persist = |changes: &[manifest::FileChange]| {
                            self.persist_findings(&of.action, changes);
                        };
                        (check.settle(&root, &mut persist), how)
                    }
                };
                let summary = format!("{uncertain}; {how}");
                self.command_outcome_signed(of, false, &summary, None, &changes)?
            }
            // Nothing to check the workspace against: the outcome says why, signed. The record
            // is written, durably, before every command starts (before its `executing` event):
            // missing now, it was deleted or lost (outside testing round 16: deleting it hid
            // what a killed command planted).
            unusable => {
                let shown = self.dir.file(&name).display().to_string();
                let summary = match &unusable {
                    Ok(_) => format!(
                        "{uncertain}; TAMPERED OR LOST: its pre-command record `{shown}` is missing, though it is written before every command starts, so what the command changed cannot be checked or undone: check the workspace by hand"
                    ),
                    Err(why) => format!(
                        "{uncertain}; its pre-command manifest `{shown}` cannot be used ({why}), so what it changed is unknown"
                    ),
                };
                self.signed_outcome(of, false, &summary, None, Object::new())?;
                self.sync_journal()?;
                if unusable.is_err() {
                    self.drop_precommand(&of.action);
                }
                summary
            }
        };
        Ok(summary)
    }

    /// A command's sandbox and the workspace manifest it is checked against: it reads the
    /// system allow-lists and the workspace, writes only its write scope (carved around every
    /// protected path) and its own HOME and TMPDIR, empty when it starts (under the run
    /// directory, outside the workspace), never Craik's home, and creates no socket. Landlock is required outside
    /// `trusted-local`; a sandbox that cannot be built refuses the command under every profile.
    pub(super) fn command_env(&self, grants: &[String]) -> Result<CommandPlan, PlanError> {
        let root = self.workspace.root.clone();
        let root_text = self.workspace_root();
        let scopes = self.write_scopes(grants, &root_text)?;
        // Write roots Craik makes itself exist before the manifest is taken: they are not the
        // command's doing (outside testing: Craik's own `mkdir target/debug` was signed as
        // the command's forbidden write, and undone with the command's output).
        for scope in &scopes {
            if let manifest::Scope::Under(dir) = scope {
                exec::make_dirs(&root, dir)?;
            }
        }
        let before = manifest::Manifest::scan(&root)?;
        let marked = manifest::marked_dirs(&root, &[&before]);
        let immutable = self.with_git_named(&root, &before, &marked);
        let pre = manifest::Preimages::take(&root, &before, &immutable);
        // The same two directories for every command of the run, emptied before and after
        // each (the directories themselves stay: the sandbox of the next command with the same
        // grants is then the same, and its Landlock ruleset and mount namespace are reused;
        // see `confine`).
        let base = self.dir.root().join("sandbox");
        let (home, tmp) = (base.join("home"), base.join("tmp"));
        for dir in [&home, &tmp] {
            crate::fsio::empty_dir(dir).map_err(|source| PlanError::Scratch {
                dir: dir.clone(),
                source,
            })?;
        }
        // Kept out of every grant: Craik's home, every protected path present, and the
        // protected names at the root even when absent (so nothing can create them).
        // Hidden from every command: Craik's home (but the way to an example workspace and
        // the command's scratch directories) and the credential files of its toolchains.
        // Read-only: every protected path present, and the protected names at the root even
        // when absent (so nothing can create them).
        let toolchains = &self.inputs.toolchains;
        let mut hidden = crate::confine::keep_out_of_home(
            &self.home.root,
            &[root.clone(), home.clone(), tmp.clone()],
        )
        .map_err(crate::confine::ConfineError::Plan)?;
        hidden.extend(toolchains.iter().flat_map(|t| t.credentials()));
        // A Craik home left inside the workspace (`.craik/` at any depth: keys, journals) is
        // hidden, not just read-only: a read oracle (`grep -q`) would leak its key (found by
        // outside testing).
        hidden.extend(
            before
                .protected(&immutable)
                .iter()
                .filter(|p| {
                    p.components()
                        .any(|c| c.as_os_str().eq_ignore_ascii_case(".craik"))
                })
                .map(|p| root.join(p)),
        );
        let mut read_only: Vec<PathBuf> = before
            .protected(&immutable)
            .iter()
            .map(|p| root.join(p))
            .collect();
        read_only.extend(manifest::PROTECTED_NAMES.iter().map(|n| root.join(n)));
        // Directories protected by what they hold (a bare git repository under any name, a
        // Craik task directory) are read-only too, not only checked afterwards (outside
        // testing: a pack over the pre-image limit and a `chmod 777` could not be undone).
        read_only.extend(marked.iter().map(|(dir, _)| root.join(dir)));
        // Files hard-linked outside the workspace (a pnpm store) in the write scope are
        // read-only too: written in place they would write outside (outside testing).
        let protected = |rel: &Path| {
            manifest::is_protected(&manifest::shown(rel), &immutable)
                || marked
                    .iter()
                    .any(|(dir, _)| rel.starts_with(dir) && rel != dir)
        };
        let mut linked_files = before.linked_outside();
        linked_files.extend(before.linked_to_protected(protected));
        linked_files.sort();
        linked_files.dedup();
        let linked: Vec<PathBuf> = linked_files
            .into_iter()
            .filter(|rel| {
                let shown = manifest::shown(rel);
                scopes.iter().any(|s| s.holds(&shown))
                    && !read_only.iter().any(|p| root.join(rel).starts_with(p))
            })
            .collect();
        if let Some(first) = linked.get(manifest::MAX_LINKED_OUTSIDE) {
            return Err(PlanError::Linked {
                count: linked.len(),
                first: manifest::shown(first),
            });
        }
        read_only.extend(linked.iter().map(|rel| root.join(rel)));
        let keep_out = crate::confine::Limits { hidden, read_only };
        let mut read = vec![root.clone()];
        read.extend(toolchains.iter().flat_map(|t| t.read.iter().cloned()));
        let mut write = Vec::new();
        for scope in &scopes {
            match scope {
                manifest::Scope::All => write.push(root.clone()),
                manifest::Scope::Under(dir) => write.push(root.join(dir)),
                manifest::Scope::File(file) => {
                    if root.join(file).exists() {
                        write.push(root.join(file));
                    }
                }
            }
        }
        let sandbox = crate::confine::Sandbox::for_profile(
            read,
            write,
            vec![home.clone(), tmp.clone()],
            &keep_out,
            crate::confine::Network::None,
            self.inputs.profile == PolicyProfile::TrustedLocal,
        )?;
        Ok(CommandPlan {
            check: std::sync::Arc::new(Check {
                protected_in_scope: before
                    .protected(&immutable)
                    .iter()
                    .map(|p| manifest::shown(p))
                    .filter(|shown| scopes.iter().any(|s| s.holds(shown)))
                    .collect(),
                scopes,
                immutable,
                before,
                pre,
            }),
            env: exec::CommandEnv {
                sandbox,
                home,
                tmp,
                path: self.command_path(),
                vars: toolchains
                    .iter()
                    .flat_map(|t| t.env.iter().cloned())
                    .collect(),
            },
        })
    }

    /// Whether what the operator's git runs or reads ([`gitconfig`](crate::run::gitconfig):
    /// hooks and their link targets, includes, an alias's or a filter's script), as git itself
    /// says, covers `rel` (or a directory holding it): why a runner's file write there is refused.
    /// When git cannot say, every path is covered (fail closed).
    fn git_named(&self, rel: &str) -> Option<String> {
        let survey = crate::run::gitconfig::Survey::of(
            &self.workspace.root,
            Vec::new(),
            &crate::run::gitconfig::GitEnv::from_process(),
        );
        if let Some(e) = survey.unread.first() {
            return Some(format!(
                "git could not say what it runs here ({e}); every workspace path is protected"
            ));
        }
        survey.covers(rel).then(|| {
            "git runs or reads it (a hook, a link to one, or a file a git configuration of the repository or the operator names)".to_owned()
        })
    }

    /// The run's immutable paths for commands plus every workspace path the operator's git
    /// runs or reads ([`gitconfig`](crate::run::gitconfig)), asked of git for the workspace's
    /// repository and every git directory the manifest shows: a command that rewrote one would
    /// run unconfined at the operator's next `git commit` (outside testing round 7, issue 30).
    /// Everything, when git cannot say.
    fn with_git_named(
        &self,
        root: &Path,
        before: &manifest::Manifest,
        marked: &[(PathBuf, &str)],
    ) -> craik_kernel::ImmutablePaths {
        crate::run::gitconfig::Survey::of(
            root,
            before.git_config_files(root, marked),
            &crate::run::gitconfig::GitEnv::from_process(),
        )
        .immutable(&self.command_immutable)
    }

    /// The write scope of a command allowed by `grants`: what those grants name, else the
    /// profile's default (`trusted-local`: the workspace but protected paths; otherwise
    /// nothing).
    fn write_scopes(
        &self,
        grants: &[String],
        root: &str,
    ) -> Result<Vec<manifest::Scope>, manifest::ScopeError> {
        let named: Vec<&String> = self
            .inputs
            .grants
            .iter()
            .filter(|g| grants.contains(&g.id))
            .flat_map(|g| g.target.writes.iter())
            .collect();
        if named.is_empty() {
            return Ok(if self.inputs.profile == PolicyProfile::TrustedLocal {
                vec![manifest::Scope::All]
            } else {
                Vec::new()
            });
        }
        named
            .into_iter()
            .map(|p| manifest::Scope::parse(root, p))
            .collect()
    }

    /// The PATH commands of this run get: its toolchains' entries, then the fixed one.
    pub(super) fn command_path(&self) -> String {
        crate::confine::toolchains::search_path(&self.inputs.toolchains, exec::SAFE_PATH)
    }

    /// What a command resolves to here: `program <real path>, cwd <workspace>`.
    pub(super) fn command_identity(&self, argv: &[String]) -> String {
        let program = argv.first().map_or_else(
            || Err("empty argv".to_owned()),
            |p| {
                exec::resolve_program_on(p, &self.workspace.root, &self.command_path())
                    .map_err(|e| e.to_string())
            },
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
        self.outcome_receipt_with(action, ok, summary, output, Object::new())
    }

    /// An outcome receipt whose signed result carries `metadata` (a command's file changes).
    pub(super) fn outcome_receipt_with(
        &mut self,
        action: &ActionRecord,
        ok: bool,
        summary: &str,
        output: Option<String>,
        metadata: Object,
    ) -> Result<(), Error> {
        let of = self.outcome_of(action)?;
        self.signed_outcome(&of, ok, summary, output, metadata)
    }

    /// What the outcome of proposed `action` is bound to: the request it hashes to now.
    /// A request the kernel refused as invalid (a target that is no workspace path) has no
    /// hash: its decision signed the empty one (the kernel's refusal sets none), and its
    /// outcome binds the same — the defined encoding, not a default standing in for a value.
    pub(super) fn outcome_of(&self, action: &ActionRecord) -> Result<OutcomeOf, Error> {
        let request = self.decision_request(action, Vec::new());
        #[allow(
            clippy::manual_unwrap_or_default,
            reason = "the empty hash is the signed encoding of an invalid request, spelled out"
        )]
        let hash = match craik_kernel::request_hash(&self.bundle, &request, &self.workspace_root())
        {
            Ok(hash) => hash,
            Err(_) => String::new(),
        };
        Ok(OutcomeOf {
            action: action.id.clone(),
            label: action.proposed.id.clone(),
            capability: action.proposed.capability.clone(),
            target: target_text(action),
            request_hash: hash,
        })
    }

    /// Signs the outcome of `of` (durable at the next commit: before the runner is asked
    /// anything, `Host::step`) and records it.
    pub(super) fn signed_outcome(
        &mut self,
        of: &OutcomeOf,
        ok: bool,
        summary: &str,
        output: Option<String>,
        metadata: Object,
    ) -> Result<(), Error> {
        let status = if ok {
            ReceiptStatus::Passed
        } else {
            ReceiptStatus::Failed
        };
        // What the runner is shown of it (a read's text, a command's output) is bound by
        // digest: recovery shows it again only as signed (outside testing round r31f O1).
        let mut metadata = metadata;
        if let Some(text) = &output {
            metadata
                .0
                .insert(OUTPUT_SHA256.into(), json!(exec::digest(text.as_bytes())));
        }
        let draft = ReceiptDraft {
            task_id: self.inputs.task.id.clone(),
            actor: self.runner_ref().id,
            capability: of.capability.clone(),
            target: of.target.clone(),
            policy_profile: self.inputs.profile,
            fail_open: false,
            reason: format!("outcome of {}", of.action),
            result: ReceiptResult {
                metadata,
                ..result(status, summary)
            },
            redacted: true,
            policy_set: self.bundle.hash().to_owned(),
            request_hash: of.request_hash.clone(),
            decision: Decision::Allow,
            determining_policies: Vec::new(),
            decided_by: DecidedBy {
                kind: DecidedByKind::Outcome,
                by: String::new(),
            },
            mode: self.mode(),
            action: Some(of.action.clone()),
        };
        let receipt = self.receipt_lazy(draft)?;
        self.record_outcome(Outcome {
            action: of.action.clone(),
            label: of.label.clone(),
            decision: "allow".into(),
            ok,
            summary: summary.to_owned(),
            output,
            receipt,
        })
    }

    /// Records an outcome (its event durable at the next commit; lost, recovery restores it
    /// from its receipt).
    pub(super) fn record_outcome(&mut self, outcome: Outcome) -> Result<(), Error> {
        self.event_lazy(&Event::Outcome {
            at: ts(self.clock.now()),
            outcome: outcome.clone(),
        })?;
        self.pending.retain(|a| a.id != outcome.action);
        self.outcomes.push(outcome.clone());
        self.all_outcomes.push(outcome);
        Ok(())
    }
}

/// The outcome metadata binding what the runner is shown of an outcome.
pub(super) const OUTPUT_SHA256: &str = "output_sha256";

/// What an outcome receipt is bound to: the action, the runner's label for it, and the
/// capability, target and request hash its decision signed.
#[derive(Debug, Clone)]
pub(super) struct OutcomeOf {
    pub(super) action: String,
    pub(super) label: String,
    pub(super) capability: String,
    pub(super) target: String,
    pub(super) request_hash: String,
}

impl OutcomeOf {
    /// Bound to `decision`, the signed decision of `action` (recovery from receipts alone,
    /// where no proposal is believed): its capability, target and request hash.
    pub(super) fn decided(action: &str, decision: &ReceiptPayload) -> Self {
        Self {
            action: action.to_owned(),
            label: action.to_owned(),
            capability: decision.capability.clone(),
            target: decision.target.clone(),
            request_hash: decision.request_hash.clone(),
        }
    }
}

/// Why a command's pre-command record could not be made durable (the command is not run),
/// or read back after a crash (what it changed is unknown).
#[derive(Debug, thiserror::Error)]
pub(super) enum PersistError {
    #[error(transparent)]
    Record(#[from] precommand::PrecommandError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Why a command's sandbox or workspace check could not be prepared: the command is not run.
#[derive(Debug, thiserror::Error)]
pub(super) enum PlanError {
    #[error(transparent)]
    Scope(#[from] manifest::ScopeError),
    #[error(transparent)]
    ScopeDir(#[from] exec::ScopeDirError),
    #[error(transparent)]
    Workspace(#[from] manifest::ManifestError),
    #[error("{}: {source}", dir.display())]
    Scratch {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the write scope holds {count} files hard-linked to files outside the workspace or to protected files (e.g. `{first}`), more than the {max} a sandbox keeps read-only; a command could write through them: copy them (pnpm: `package-import-method=copy`) or narrow the write grant",
        max = manifest::MAX_LINKED_OUTSIDE
    )]
    Linked { count: usize, first: String },
    #[error(transparent)]
    Confine(#[from] crate::confine::ConfineError),
}

/// The workspace could not be walked after a command: the forbidden entries found by a
/// sweep instead were undone (or not), and the step fails.
#[derive(Debug)]
pub(super) struct SettleError {
    why: manifest::ManifestError,
    undone: Vec<String>,
    failed: Vec<String>,
}

impl std::fmt::Display for SettleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}; swept instead: {} forbidden entries undone",
            self.why,
            self.undone.len()
        )?;
        let shown: Vec<String> = self
            .undone
            .iter()
            .take(20)
            .map(|u| format!("`{}`", craik_contracts::Truncated(u)))
            .collect();
        if !shown.is_empty() {
            write!(f, ": {}", shown.join(", "))?;
        }
        if !self.failed.is_empty() {
            let failed: Vec<&str> = self.failed.iter().take(20).map(String::as_str).collect();
            write!(f, "; NOT undone: {}", failed.join(", "))?;
        }
        Ok(())
    }
}

pub(super) struct CommandPlan {
    pub(super) env: exec::CommandEnv,
    check: std::sync::Arc<Check>,
}

/// What a command's changes are checked against (shared with the exit handler while the
/// command runs).
struct Check {
    /// Protected paths inside the write scope: read-only in the sandbox, so a command that
    /// writes there fails — said in its outcome (issue 30: `touch` of an ADR failed in the
    /// sandbox without saying why).
    protected_in_scope: Vec<String>,
    scopes: Vec<manifest::Scope>,
    immutable: craik_kernel::ImmutablePaths,
    before: manifest::Manifest,
    pre: manifest::Preimages,
}

impl CommandPlan {
    /// Runs `command` with the check registered for an interrupted Craik: a SIGTERM, SIGINT or
    /// SIGHUP while the command runs kills it, then checks the workspace and undoes what is
    /// forbidden before Craik exits (outside testing: a command that planted and then slept
    /// until the operator's Ctrl-C kept its plant). Then settles here, the check unregistered
    /// only when that is done, so an interrupt during it waits for it.
    fn run_checked<T>(
        &self,
        root: &Path,
        persist: &mut dyn FnMut(&[manifest::FileChange]),
        command: impl FnOnce() -> T,
    ) -> (T, Result<Vec<manifest::FileChange>, SettleError>) {
        let check = std::sync::Arc::clone(&self.check);
        let at = root.to_path_buf();
        let scratch = [self.env.home.clone(), self.env.tmp.clone()];
        crate::confine::set_exit_check(Some(Box::new(move || {
            // What the command left in its HOME and TMPDIR goes too (outside testing: an
            // interrupted command's files stayed in the run directory).
            for dir in &scratch {
                let _ = crate::fsio::empty_dir(dir);
            }
            match check.settle(&at, &mut |_| {}) {
                Ok(changes) => format!(
                    "the workspace was checked: {} change(s), {} forbidden and undone",
                    changes.len(),
                    changes.iter().filter(|c| c.forbidden.is_some()).count()
                ),
                Err(e) => format!("the workspace could not be checked: {e}"),
            }
        })));
        let out = command();
        let settled = crate::confine::while_exit_check_held(|| self.check.settle(root, persist));
        (out, settled)
    }
}

impl Check {
    /// What the command changed, forbidden changes undone — after `persist` was given what
    /// was found.
    fn settle(
        &self,
        root: &Path,
        persist: &mut dyn FnMut(&[manifest::FileChange]),
    ) -> Result<Vec<manifest::FileChange>, SettleError> {
        manifest::unlock_dirs(root);
        let after = match manifest::Manifest::scan(root) {
            Ok(after) => after,
            Err(why) => {
                // Fail closed, and still undo: a command must not switch the restore off by
                // making the check impossible.
                let (undone, failed) = manifest::sweep_forbidden(
                    root,
                    &self.before,
                    &self.scopes,
                    &self.immutable,
                    &self.pre,
                );
                return Err(SettleError {
                    why,
                    undone,
                    failed,
                });
            }
        };
        let mut changes = manifest::findings(
            root,
            &self.before,
            &after,
            &self.scopes,
            &self.immutable,
            &self.pre,
        );
        persist(&changes);
        manifest::undo(root, &self.before, &mut changes, &self.pre);
        Ok(changes)
    }
}

/// The signed list of a command's file changes: path, change, `sha256` of a file after it,
/// and for a forbidden one why and whether it was undone.
fn manifest_metadata(changes: &[manifest::FileChange]) -> Vec<serde_json::Value> {
    changes
        .iter()
        .map(|c| {
            let mut o = serde_json::Map::new();
            o.insert("path".into(), c.path.clone().into());
            o.insert("change".into(), c.change.as_str().into());
            if let Some(h) = &c.sha256 {
                o.insert("sha256".into(), h.clone().into());
            }
            if let Some(why) = &c.forbidden {
                o.insert("forbidden".into(), why.clone().into());
                o.insert("restored".into(), matches!(c.restored, Some(Ok(()))).into());
            }
            serde_json::Value::Object(o)
        })
        .collect()
}
