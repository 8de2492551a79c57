use craik_kernel::{Decision, DenyKind, GrantSet, Mode};
use serde_json::json;

use crate::{bundle, docs_grant, grants, options, request};

fn decide(grants_json: serde_json::Value, req: serde_json::Value) -> craik_kernel::Verdict {
    let b = bundle();
    let g = grants(&b, grants_json);
    b.decide(&g, &request(req), &options())
}

#[test]
fn strict_reads_are_allowed_by_the_profile() {
    let v = decide(
        json!([]),
        json!({"capability": "repo.read", "target": "src/lib.rs", "operation": "read"}),
    );
    assert_eq!(v.decision, Decision::Allow, "{v:?}");
    assert_eq!(v.determining, ["strict.read"]);
}

#[test]
fn strict_granted_docs_write_needs_approval() {
    let v = decide(
        docs_grant(),
        json!({"capability": "repo.write.docs", "target": "docs/guide.md"}),
    );
    assert_eq!(v.decision, Decision::RequiresApproval, "{v:?}");
    assert_eq!(v.determining, ["approval.strict.side-effects"]);
    assert_eq!(v.grants, ["grant_docs_write"]);
}

#[test]
fn exclusion_wins_and_is_case_insensitive() {
    for target in ["docs/adr/0001.md", "DOCS/ADR/0001.md", "docs/Adr/x.md"] {
        let v = decide(
            docs_grant(),
            json!({"capability": "repo.write.docs", "target": target}),
        );
        assert_eq!(v.decision, Decision::Deny, "{target}: {v:?}");
        assert_eq!(v.deny_kind, Some(DenyKind::NotPermitted), "{target}");
    }
    let v = decide(
        docs_grant(),
        json!({"capability": "repo.write.docs", "target": "docs/adr/0001.md"}),
    );
    assert_eq!(
        v.grant_notes,
        ["grant_docs_write: `docs/adr/0001.md` is excluded by `docs/adr/**`"]
    );
}

#[test]
fn no_grant_is_not_permitted_and_forbid_is_forbidden() {
    let v = decide(
        json!([]),
        json!({"capability": "repo.write.docs", "target": "docs/guide.md"}),
    );
    assert_eq!(v.deny_kind, Some(DenyKind::NotPermitted));
    assert!(v.determining.is_empty());
    let v = decide(
        docs_grant(),
        json!({"capability": "git.force_push", "target": "origin"}),
    );
    assert_eq!(v.deny_kind, Some(DenyKind::ForbiddenBy));
    assert_eq!(v.determining, ["base.deny.force-push"]);
}

#[test]
fn automation_turns_approval_into_deny() {
    let v = decide(
        docs_grant(),
        json!({"capability": "repo.write.docs", "target": "docs/guide.md", "profile": "automation"}),
    );
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.deny_kind, Some(DenyKind::ApprovalUnavailable));
}

#[test]
fn approval_binds_to_the_exact_request() {
    let b = bundle();
    let g = grants(&b, docs_grant());
    let mut req = request(json!({"capability": "repo.write.docs", "target": "docs/guide.md"}));
    let hash = b.decide(&g, &req, &options()).request_hash;
    let approval = |hash: &str, by: &str| {
        serde_json::from_value::<craik_kernel::Approval>(json!({
        "id": "approval_1", "request_hash": hash, "approved_by": by, "profile": "strict", "task_id": "task_docs"
    })).unwrap()
    };
    req.approvals = vec![approval(&hash, "user:alice")];
    let v = b.decide(&g, &req, &options());
    assert_eq!(v.decision, Decision::Allow, "{v:?}");
    assert_eq!(v.approval.as_deref(), Some("approval_1"));

    // The same approval does not cover another target, nor the runner approving itself.
    let mut other = req.clone();
    other.target = Some("docs/other.md".into());
    assert_eq!(
        b.decide(&g, &other, &options()).decision,
        Decision::RequiresApproval
    );
    req.approvals = vec![approval(&hash, "runner_fixture")];
    assert_eq!(
        b.decide(&g, &req, &options()).decision,
        Decision::RequiresApproval
    );
    req.approvals = vec![approval(&hash, "user:")];
    assert_eq!(
        b.decide(&g, &req, &options()).decision,
        Decision::RequiresApproval
    );
}

#[test]
fn unknown_capability_and_unsafe_targets_are_invalid_requests() {
    for req in [
        json!({"capability": "repo.write.everything", "target": "x"}),
        json!({"capability": "repo.write.docs", "target": "../etc/passwd"}),
        json!({"capability": "repo.write.docs", "target": "/etc/passwd"}),
        json!({"capability": "repo.write.docs", "target": "docs\\guide.md"}),
        json!({"capability": "repo.write.docs"}),
        json!({"capability": "shell.test", "target": ""}),
    ] {
        let v = decide(docs_grant(), req.clone());
        assert_eq!(v.decision, Decision::Deny, "{req}");
        assert_eq!(v.deny_kind, Some(DenyKind::InvalidRequest), "{req}: {v:?}");
    }
}

#[test]
fn shadow_mode_reports_without_changing_the_verdict() {
    let b = bundle();
    let mut opts = options();
    opts.mode = Mode::Shadow;
    let v = b.decide(
        &GrantSet::default(),
        &request(json!({"capability": "repo.write.docs", "target": "docs/x.md"})),
        &opts,
    );
    assert_eq!(v.mode, Mode::Shadow);
    assert_eq!(v.decision, Decision::Deny);
}

/// The runner's matrix can only make a verdict stricter: unsupported denies before policy,
/// prompt-handoff turns an Allow into review (a deny under automation), and an approval bound
/// to the exact request lets a reviewed prompt-handoff action through.
#[test]
fn the_runner_matrix_only_tightens() {
    use craik_kernel::RunnerSupport;
    let b = bundle();
    let read = json!({"capability": "repo.read", "target": "README.md", "operation": "read"});
    for profile in ["strict", "trusted-local", "automation"] {
        let mut req = read.clone();
        req["profile"] = json!(profile);
        let r = request(req);
        let g = GrantSet::compile(&b, &[]).unwrap();
        let plain = b.decide(&g, &r, &options());
        assert_eq!(plain.decision, Decision::Allow, "{profile}");
        let supported = b.decide_for_runner(&g, &r, &options(), RunnerSupport::Supported);
        assert_eq!(supported, plain, "{profile}");
        let unsupported = b.decide_for_runner(&g, &r, &options(), RunnerSupport::Unsupported);
        assert_eq!(unsupported.decision, Decision::Deny, "{profile}");
        assert_eq!(unsupported.determining, ["runner.unsupported"]);
        assert!(!unsupported.request_hash.is_empty());
        let handoff = b.decide_for_runner(&g, &r, &options(), RunnerSupport::PromptHandoff);
        let expected = if profile == "automation" {
            Decision::Deny
        } else {
            Decision::RequiresApproval
        };
        assert_eq!(handoff.decision, expected, "{profile}: {handoff:?}");
        assert_eq!(handoff.determining, ["runner.prompt-handoff"]);
        if profile != "automation" {
            // An approval bound to this exact request lets it through.
            let mut approved = r.clone();
            approved.approvals = vec![craik_kernel::Approval {
                id: "approval_1".into(),
                request_hash: handoff.request_hash.clone(),
                approved_by: "user:alice".into(),
                profile: r.profile,
                task_id: r.task_id.clone(),
                expires_at: None,
                used: false,
            }];
            let v = b.decide_for_runner(&g, &approved, &options(), RunnerSupport::PromptHandoff);
            assert_eq!(v.decision, Decision::Allow, "{profile}: {v:?}");
            assert_eq!(v.approval.as_deref(), Some("approval_1"));
        }
    }
    // A deny stays a deny whatever the matrix says.
    let r = request(json!({"capability": "repo.write.adr", "target": "docs/adr/1.md"}));
    let g = GrantSet::compile(&b, &[]).unwrap();
    for support in [
        RunnerSupport::Supported,
        RunnerSupport::PromptHandoff,
        RunnerSupport::Unsupported,
    ] {
        assert_eq!(
            b.decide_for_runner(&g, &r, &options(), support).decision,
            Decision::Deny
        );
    }
}

#[test]
fn matrix_support_lookup_takes_the_most_specific_entry() {
    use craik_kernel::RunnerSupport;
    let m: craik_contracts::RunnerCapabilityMatrix = serde_json::from_value(json!({
        "runner": {"id": "runner_x", "name": "x", "adapter": "x", "adapter_version": "1", "mode": "live"},
        "trust": {"level": "low", "boundary": "b"},
        "capabilities": [
            {"name": "repo.write", "support": "prompt-handoff"},
            {"name": "repo.write.code", "support": "unsupported"},
            {"name": "shell.test", "support": "supported"}
        ]
    }))
    .unwrap();
    assert_eq!(
        RunnerSupport::of(&m, "repo.write.docs"),
        RunnerSupport::PromptHandoff
    );
    assert_eq!(
        RunnerSupport::of(&m, "repo.write.code"),
        RunnerSupport::Unsupported
    );
    assert_eq!(
        RunnerSupport::of(&m, "shell.test"),
        RunnerSupport::Supported
    );
    assert_eq!(
        RunnerSupport::of(&m, "shell.execute"),
        RunnerSupport::Unsupported
    );
    assert_eq!(
        RunnerSupport::of(&m, "repo.writer"),
        RunnerSupport::Unsupported,
        "prefix is by segment"
    );
}

#[test]
fn intent_stops_are_told_apart_from_denials() {
    let b = bundle();
    let g = GrantSet::compile(&b, &[]).unwrap();
    let intent = json!({"in_scope": ["docs/"], "out_of_scope": ["src/"], "stop_conditions": []});
    let out_of_scope = request(
        json!({"capability": "repo.read", "target": "src/lib.rs", "operation": "read", "intent": intent}),
    );
    let v = b.decide(&g, &out_of_scope, &options());
    assert_eq!(v.decision, Decision::Deny, "{v:?}");
    assert!(v.is_intent_stop(), "{v:?}");
    // An ADR write out of scope is forbidden by the immutable policy too: a denial, not a stop.
    let adr = request(
        json!({"capability": "repo.write.adr", "target": "src/adr/1.md", "intent": intent}),
    );
    let v = b.decide(&g, &adr, &options());
    assert_eq!(v.decision, Decision::Deny);
    assert!(!v.is_intent_stop(), "{v:?}");
    let allowed =
        request(json!({"capability": "repo.read", "target": "docs/a.md", "operation": "read"}));
    assert!(!b.decide(&g, &allowed, &options()).is_intent_stop());
}

/// Issue 18 item 7: a command off its program's allow-list needs a person's approval (strict,
/// trusted-local, custom) and is denied in automation, where nobody can approve; the verdict
/// names the argument that was not on the list. Commands on the list run under the grant.
#[test]
fn issue_18_unvetted_commands_need_approval_and_say_why() {
    let tools = json!([{
        "id": "grant_tools",
        "task_id": "task_docs",
        "capability": "shell.test",
        "target": {"paths": ["git", "find", "tar", "cargo test"]},
        "operations": ["execute"],
        "expires_at": "2026-11-21T00:00:00Z",
        "reason": "r",
        "approved_by": "user:maintainer"
    }]);
    // Known escape hatches: denied outright under every profile, approval or not.
    for line in [
        "git grep -Ocat x",
        "git rebase -x sh",
        "find . -files0-from f",
        "tar -T list -cf a.tar",
        "cargo test --config x",
    ] {
        for profile in ["strict", "trusted-local", "custom", "automation"] {
            let v = decide(
                tools.clone(),
                json!({"capability": "shell.test", "target": line, "operation": "execute",
                       "profile": profile}),
            );
            assert_eq!(v.decision, Decision::Deny, "{line} under {profile}: {v:?}");
            assert_eq!(
                v.determining,
                vec!["base.command.wrapper".to_owned()],
                "{line}"
            );
        }
    }
    // Unknown (not known safe, not known bad): held for a person, who sees why.
    for (line, because) in [
        ("git gc", "`git gc` is not on git's allow-list"),
        ("git stash", "`git stash` is not on git's allow-list"),
    ] {
        for profile in ["strict", "trusted-local", "custom", "automation"] {
            let v = decide(
                tools.clone(),
                json!({"capability": "shell.test", "target": line, "operation": "execute",
                       "profile": profile}),
            );
            assert!(
                v.determining
                    .iter()
                    .any(|d| d == "approval.command.unvetted"),
                "{line} under {profile}: {v:?}"
            );
            assert!(
                v.reasons.iter().any(|r| r == because),
                "{line} under {profile}: {:?}",
                v.reasons
            );
            if profile == "automation" {
                assert_eq!(v.decision, Decision::Deny, "{line}: {v:?}");
                assert_eq!(v.deny_kind, Some(DenyKind::ApprovalUnavailable), "{line}");
            } else {
                assert_eq!(
                    v.decision,
                    Decision::RequiresApproval,
                    "{line} under {profile}"
                );
            }
        }
    }
    for line in [
        "git diff --check",
        "git status --short",
        "find . -name x.rs",
        "tar -xzf a.tar",
        "cargo test --color=always",
    ] {
        let v = decide(
            tools.clone(),
            json!({"capability": "shell.test", "target": line, "operation": "execute",
                   "profile": "trusted-local"}),
        );
        assert_eq!(v.decision, Decision::Allow, "{line}: {v:?}");
        assert_eq!(v.determining, ["grant.grant_tools"], "{line}");
        assert_eq!(v.reasons.len(), 1, "{line}: {:?}", v.reasons);
    }
    // A wrapper stays a deny whatever the profile; the unvetted reason is not shown there.
    let v = decide(
        json!([]),
        json!({"capability": "shell.test", "target": "nvim x", "operation": "execute",
               "profile": "trusted-local"}),
    );
    assert_eq!(v.determining, ["base.command.wrapper"], "{v:?}");
}

/// Issue 19: a project grant applies only bound to a task of its project; unbound it permits
/// nothing (its principal is no task), and binding it to another project's task is refused.
#[test]
fn issue_19_project_grants_apply_only_bound_to_a_task_of_their_project() {
    let b = bundle();
    let mut project: serde_json::Value = docs_grant();
    let g = &mut project[0];
    g.as_object_mut().unwrap().remove("task_id");
    g["project_id"] = serde_json::json!("project_docs");
    let grant: craik_contracts::CapabilityGrant =
        serde_json::from_value(project[0].clone()).unwrap();
    let write = request(json!({"capability": "repo.write.docs", "target": "docs/guide.md"}));
    // Unbound: compiles (for review) to a principal no task id can be, and applies to nothing.
    let unbound = GrantSet::compile(&b, std::slice::from_ref(&grant)).unwrap();
    let compiled = unbound.all().next().unwrap();
    assert!(
        compiled
            .cedar
            .contains("principal in Craik::Task::\"project_docs:*\""),
        "{}",
        compiled.cedar
    );
    let v = b.decide(&unbound, &write, &options());
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.deny_kind, Some(DenyKind::NotPermitted));
    // Bound to a task of its project: exactly what the task grant allows (approval under
    // strict), naming the same grant.
    let bound = craik_kernel::bind_project_grant(&grant, "task_docs", "project_docs").unwrap();
    assert_eq!(bound.task_id.as_deref(), Some("task_docs"));
    let set = GrantSet::compile(&b, std::slice::from_ref(&bound)).unwrap();
    let v = b.decide(&set, &write, &options());
    assert_eq!(v.decision, Decision::RequiresApproval, "{v:?}");
    assert_eq!(v.grants, vec!["grant_docs_write".to_owned()]);
    assert_eq!(
        v,
        decide(
            docs_grant(),
            json!({"capability": "repo.write.docs", "target": "docs/guide.md"})
        )
    );
    // Another project's task, or a task grant for another task: refused, naming both.
    let err = craik_kernel::bind_project_grant(&grant, "task_docs", "project_other").unwrap_err();
    assert!(
        err.contains("a project grant for `project_docs`, but the task `task_docs` belongs to `project_other`"),
        "{err}"
    );
    let task_grant: craik_contracts::CapabilityGrant =
        serde_json::from_value(docs_grant()[0].clone()).unwrap();
    let err =
        craik_kernel::bind_project_grant(&task_grant, "task_else", "project_docs").unwrap_err();
    assert!(
        err.contains("its task_id `task_docs` is not the task's `task_else`"),
        "{err}"
    );
    // A task grant re-serialises without `project_id` (existing grant hashes do not move).
    let text = serde_json::to_string(&task_grant).unwrap();
    assert!(!text.contains("project_id"), "{text}");
}

/// Issue 19 item 5: `decide_traced` gives the same verdict as `decide`, and for each permit
/// that could apply whether it matched and which part did not hold.
#[test]
fn issue_19_trace_names_the_clause_that_did_not_hold() {
    let b = bundle();
    let g = grants(&b, docs_grant());
    for (target, matched, why) in [
        ("docs/guide.md", true, ""),
        (
            "docs/adr/1.md",
            false,
            "`unless { resource.fold like \"docs/adr/*\" }` excludes it",
        ),
        (
            "src/lib.rs",
            false,
            // As Cedar prints it back (parenthesised).
            "`when { (resource in Craik::Dir::\"docs\") || (resource.path == \"README.md\") }` is false",
        ),
    ] {
        let req = request(json!({"capability": "repo.write.docs", "target": target}));
        let (verdict, trace) = b.decide_traced(&g, &req, &options());
        assert_eq!(verdict, b.decide(&g, &req, &options()), "{target}");
        assert_eq!(trace.len(), 1, "{target}: {trace:?}");
        assert_eq!(trace[0].id, "grant.grant_docs_write");
        assert_eq!(
            (trace[0].matched, trace[0].why.as_str()),
            (matched, why),
            "{target}"
        );
    }
    // An expired grant: the expiry clause is named.
    let mut late = options();
    late.now = time::macros::datetime!(2026-11-22 00:00 UTC);
    let req = request(json!({"capability": "repo.write.docs", "target": "docs/guide.md"}));
    let (_, trace) = b.decide_traced(&g, &req, &late);
    assert_eq!(
        trace[0].why,
        "`when { context.now < datetime(\"2026-11-21T00:00:00.000Z\") }` is false"
    );
}

/// Issue 19 item 5: the held permit is reported, and a grant's reason replaces its id.
#[test]
fn issue_19_permitted_by_and_grant_reasons() {
    let held = decide(
        docs_grant(),
        json!({"capability": "repo.write.docs", "target": "docs/guide.md"}),
    );
    assert_eq!(held.permitted_by, ["grant.grant_docs_write"]);
    let allowed = decide(
        docs_grant(),
        json!({"capability": "repo.write.docs", "target": "docs/guide.md", "profile": "trusted-local"}),
    );
    assert_eq!(allowed.decision, Decision::Allow, "{allowed:?}");
    assert!(allowed.permitted_by.is_empty());
    assert_eq!(
        allowed.reasons,
        ["grant `grant_docs_write` approved by user:maintainer: Documentation reconciliation."]
    );
}

/// Issue 19 item 5: a command's path arguments and `context.now` reach Cedar; a forbid on a
/// directory catches a bare word, traversal and option values, not a look-alike prefix.
#[test]
fn issue_19_command_paths_and_datetime_now() {
    let (schema, mut files) = crate::sources();
    files.push(craik_kernel::SourceFile::new(
        "custom/x.cedar",
        "@id(\"x.scripts\")\n@reason(\"x\")\nforbid (principal, action in Craik::Action::\"shell\", resource)\nwhen { resource.dirs.contains(Craik::Dir::\"scripts\") };\n\n\
         @id(\"x.after\")\n@reason(\"x\")\nforbid (principal, action == Craik::Action::\"shell.test\", resource)\nwhen { context.now > datetime(\"2026-11-20T10:00:00Z\") };\n",
    ));
    let b = craik_kernel::Bundle::load(&schema, &files).unwrap();
    let g = grants(
        &b,
        json!([{"id": "grant_ls", "task_id": "task_docs", "capability": "shell.execute",
                "target": {"paths": ["ls"]}, "operations": ["execute"], "reason": "r", "approved_by": "user:x"},
               {"id": "grant_t", "task_id": "task_docs", "capability": "shell.test",
                "target": {"paths": ["cargo test"]}, "operations": ["execute"], "reason": "r", "approved_by": "user:x"}]),
    );
    let run = |argv: &[&str], cap: &str, opts: &craik_kernel::DecideOptions| {
        let req = request(
            json!({"capability": cap, "argv": argv, "operation": "execute", "profile": "trusted-local"}),
        );
        b.decide(&g, &req, opts)
    };
    for argv in [
        &["ls", "scripts"][..],
        &["ls", "./scripts//"],
        &["ls", "docs/../scripts/a"],
        &["ls", "/workspace/scripts"],
        &["ls", "--dir=scripts/x"],
    ] {
        let v = run(argv, "shell.execute", &options());
        assert_eq!(v.determining, ["x.scripts"], "{argv:?}: {v:?}");
    }
    for argv in [&["ls", "scripts-old"][..], &["ls", "src/scripts"], &["ls"]] {
        let v = run(argv, "shell.execute", &options());
        assert_eq!(v.decision, Decision::Allow, "{argv:?}: {v:?}");
    }
    // `now` is compared to the millisecond.
    assert_eq!(
        run(&["cargo", "test"], "shell.test", &options()).decision,
        Decision::Allow
    );
    let mut later = options();
    later.now = time::macros::datetime!(2026-11-20 10:00:00.001 UTC);
    assert_eq!(
        run(&["cargo", "test"], "shell.test", &later).determining,
        ["x.after"]
    );
}

/// Issue 30 item 7: an envelope entry naming no declared capability (inside an open family:
/// `repo.write.doc`, `shell.tes`) matches nothing; every decision denies while it is there —
/// under trusted-local, where the docs write would otherwise be allowed.
#[test]
fn issue_30_an_undeclared_envelope_entry_denies_every_request() {
    for (field, entry) in [
        ("approval_required", "repo.write.doc"),
        ("approval_required", "shell.tes"),
        ("denied_capabilities", "repo.write.docs2"),
        ("allowed_capabilities", "repo"),
    ] {
        let mut envelope = json!({"allowed": [], "denied": [], "approval_required": []});
        let key = match field {
            "approval_required" => "approval_required",
            "denied_capabilities" => "denied",
            _ => "allowed",
        };
        envelope[key] = json!([entry]);
        let ok = entry == "repo";
        let v = decide(
            docs_grant(),
            json!({"capability": "repo.write.docs", "target": "docs/guide.md",
                   "profile": "trusted-local", "envelope": envelope}),
        );
        if ok {
            assert_ne!(
                v.determining,
                ["envelope.undeclared-entry"],
                "{entry}: {v:?}"
            );
        } else {
            assert_eq!(v.decision, Decision::Deny, "{entry}: {v:?}");
            assert_eq!(v.determining, ["envelope.undeclared-entry"], "{entry}");
            assert!(v.reasons[0].contains(entry), "{:?}", v.reasons);
        }
    }
}
