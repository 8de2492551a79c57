use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;

const ROOT: &str = "/work/repo";

fn norm(raw: &str) -> Result<String, PathError> {
    TargetPath::normalize(ROOT, raw).map(|p| p.0)
}

#[test]
fn canonical_spellings() {
    for (raw, want) in [
        ("docs/a.md", "docs/a.md"),
        ("./docs//a.md", "docs/a.md"),
        ("docs/./x/../a.md", "docs/a.md"),
        ("docs/", "docs"),
        ("/work/repo/docs/a.md", "docs/a.md"),
        ("/work/repo//docs", "docs"),
        ("a/b/c/../../d", "a/d"),
        ("README.md", "README.md"),
        ("ünïcode/ファイル.md", "ünïcode/ファイル.md"),
    ] {
        assert_eq!(norm(raw), Ok(want.to_owned()), "{raw:?}");
    }
}

#[test]
fn refusals() {
    use PathError as E;
    type Expect = fn(&PathError) -> bool;
    let cases: &[(&str, Expect)] = &[
        ("", |e| *e == E::Empty),
        (".", |e| *e == E::Root),
        ("docs/..", |e| *e == E::Root),
        ("/work/repo", |e| *e == E::Root),
        ("..", |e| matches!(e, E::Escapes(_))),
        ("docs/../../etc/passwd", |e| matches!(e, E::Escapes(_))),
        ("/etc/passwd", |e| matches!(e, E::Outside(_))),
        ("/work/repo-evil/x", |e| matches!(e, E::Outside(_))),
        ("/work/rep", |e| matches!(e, E::Outside(_))),
        ("docs\\..\\..\\x", |e| *e == E::Backslash),
        ("docs/a\0.md", |e| *e == E::Nul),
        ("docs/a\n.md", |e| *e == E::Control(0x0a)),
        ("docs/\u{1b}[31m", |e| *e == E::Control(0x1b)),
        ("~/.ssh/id_ed25519", |e| matches!(e, E::Tilde(_))),
        ("~root/x", |e| matches!(e, E::Tilde(_))),
        ("$HOME/x", |e| matches!(e, E::Dollar(_))),
        ("docs/${X}", |e| matches!(e, E::Dollar(_))),
        ("docs./a.md", |e| matches!(e, E::TrailingDotOrSpace(_))),
        ("docs /a.md", |e| matches!(e, E::TrailingDotOrSpace(_))),
        ("docs/a.md.", |e| matches!(e, E::TrailingDotOrSpace(_))),
        ("do\u{200b}cs/a.md", |e| matches!(e, E::InvisibleChar(_))),
        ("docs/\u{202e}dm.a", |e| matches!(e, E::InvisibleChar(_))),
    ];
    for (raw, want) in cases {
        let got = norm(raw);
        assert!(matches!(&got, Err(e) if want(e)), "{raw:?} gave {got:?}");
    }
    assert_eq!(norm(&"a/".repeat(MAX_PATH_BYTES)), Err(E::TooLong));
    assert_eq!(norm(&"a/".repeat(MAX_DEPTH + 1)), Err(E::TooDeep));
    assert!(matches!(
        norm(&"a".repeat(MAX_SEGMENT_BYTES + 1)),
        Err(E::SegmentTooLong(_))
    ));
}

/// Outside testing round 6 (R6-B): configuration that build tools, interpreters, direnv and
/// agents load from the working directory, generated at the root, nested, and in mixed case.
#[test]
fn round_6_more_exec_and_agent_configuration_is_protected() {
    let exec = [
        ".mvn/extensions.xml",
        ".mvn/jvm.config",
        "gradle.properties",
        "gradle/wrapper/gradle-wrapper.properties",
        ".sbtopts",
        ".jvmopts",
        "Directory.Build.props",
        "Directory.Build.targets",
        "Directory.Packages.props",
        "global.json",
        "NuGet.Config",
        ".Rprofile",
        ".Renviron",
        ".ghci",
        ".irbrc",
        ".pryrc",
        ".iex.exs",
        ".erlang",
        ".ocamlinit",
        ".octaverc",
        ".envrc.local",
        ".direnv/x",
        ".ycm_extra_conf.py",
        ".dir-locals.el",
        ".lvimrc",
        ".gitpod.yml",
        // Round 7.
        "lefthook.yaml",
        ".lefthook.yaml",
        "lefthook.json",
        "lefthook.toml",
        "lefthook-local.yml",
        ".lefthook-local.yaml",
        ".lefthook/pre-commit/a.sh",
        ".lefthook-local/x",
        "mise/config.toml",
        ".mise.local.toml",
        "mise.local.toml",
        ".overcommit.yml",
        ".simple-git-hooks.json",
        ".lintstagedrc",
        "lint-staged.config.js",
        "commitlint.config.js",
        "flake.nix",
        "shell.nix",
        "devenv.nix",
        "devenv.yaml",
        "devbox.json",
        ".idx/dev.nix",
        ".replit",
        "cloudbuild.yaml",
        "buildspec.yml",
        ".tekton/p.yaml",
        "CODEOWNERS",
        ".github/CODEOWNERS",
        // Round 8.
        ".openhands/setup.sh",
        ".openhands_instructions",
        ".bazeliskrc",
        ".flox/env/manifest.toml",
        "pixi.toml",
        "bin/hermit.hcl",
        "bin/activate-hermit",
        ".ddev/config.yaml",
        ".lando.yml",
        ".rtx.toml",
        "mise.lock",
        "netlify.toml",
        "vercel.json",
        "codemagic.yaml",
        ".gitpod.Dockerfile",
        ".gitpod/a.yml",
        "action.yml",
        "app.code-workspace",
        ".fleet/run.json",
        ".theia/tasks.json",
        "x.sublime-project",
        ".huskyrc",
        ".huskyrc.json",
        ".lfsconfig",
        ".env",
        ".env.local",
    ];
    let agent = [
        ".amazonq/mcp.json",
        ".kiro/settings/mcp.json",
        "opencode.json",
        ".opencode/agent.md",
        ".qwen/settings.json",
        ".crush.json",
        ".clinerules",
        ".clinerules/a.md",
        ".junie/guidelines.md",
        ".goosehints",
        ".agents/a.md",
        ".rules",
        ".github/instructions/a.instructions.md",
        ".github/prompts/p.prompt.md",
        ".github/chatmodes/c.chatmode.md",
        // Round 7.
        "CLAUDE.local.md",
        "AGENT.md",
        "AGENTS.local.md",
        "QWEN.md",
        "CRUSH.md",
        "WARP.md",
        ".github/agents/a.md",
        ".roomodes",
        ".kilocode/rules/a.md",
        ".kilocodemodes",
        ".amp/settings.json",
        ".augment/x",
        ".augment-guidelines",
        ".trae/project_rules.md",
        ".factory/droids/a.md",
        ".qoder/rules/a.md",
        ".zencoder/rules/a.md",
        ".void/rules/a.md",
        ".continuerc.json",
        ".opencode.json",
        "mcp.json",
        ".codebuddy/a.md",
        ".tabnine/guidelines/a.md",
        ".cody/a.json",
        ".aider.conf.yaml",
        ".clineignore",
    ];
    for (names, want) in [
        (&exec[..], Protected::ExecConfig),
        (&agent[..], Protected::AgentConfig),
    ] {
        for name in names {
            for path in [
                (*name).to_owned(),
                format!("pkg/sub/{name}"),
                name.to_ascii_uppercase(),
                format!("a/{}", name.to_ascii_lowercase()),
            ] {
                let got = TargetPath::normalize(ROOT, &path).unwrap().protected();
                assert_eq!(got, Some(want), "{path}");
            }
        }
    }
    // Ordinary sources next to them stay writable.
    for path in [
        "gradle/build.gradle.kts",
        "src/Directory.cs",
        "docs/rules.md",
        "prompts/a.md",
    ] {
        assert_eq!(
            TargetPath::normalize(ROOT, path).unwrap().protected(),
            None,
            "{path}"
        );
    }
}

#[test]
fn under_is_segment_wise() {
    let p = |s| TargetPath::normalize(ROOT, s).unwrap();
    assert!(p("docs/a.md").is_under(&p("docs")));
    assert!(p("docs").is_under(&p("docs")));
    assert!(!p("docs-evil/a.md").is_under(&p("docs")));
    assert!(!p("docsx").is_under(&p("docs")));
}

#[test]
fn protected_areas_in_any_case() {
    let p = |s| TargetPath::normalize(ROOT, s).unwrap().protected();
    assert_eq!(p(".craik/keys/signing.pem"), Some(Protected::CraikState));
    assert_eq!(p(".git/hooks/pre-commit"), Some(Protected::Git));
    assert_eq!(p(".GIT/config"), Some(Protected::Git));
    assert_eq!(p(".Git"), Some(Protected::Git));
    assert_eq!(p("docs/../.git/config"), Some(Protected::Git));
    assert_eq!(p(".claude/settings.json"), Some(Protected::AgentConfig));
    assert_eq!(p("AGENTS.md"), Some(Protected::AgentConfig));
    assert_eq!(p("sub/dir/claude.md"), Some(Protected::AgentConfig));
    assert_eq!(
        p(".github/copilot-instructions.md"),
        Some(Protected::AgentConfig)
    );
    // Issue 11 item 5: more code-running config, and state at any depth.
    assert_eq!(p(".github/workflows/ci.yml"), Some(Protected::ExecConfig));
    assert_eq!(p(".GitHub/Workflows/x.yaml"), Some(Protected::ExecConfig));
    assert_eq!(p(".envrc"), Some(Protected::ExecConfig));
    assert_eq!(p("sub/.envrc"), Some(Protected::ExecConfig));
    assert_eq!(p(".vscode/tasks.json"), Some(Protected::ExecConfig));
    assert_eq!(
        p("vendor/lib/.git/hooks/post-checkout"),
        Some(Protected::Git)
    );
    assert_eq!(p("vendor/.GIT"), Some(Protected::Git));
    assert_eq!(
        p("a/b/.craik/keys/signing.key.pem"),
        Some(Protected::CraikState)
    );
    assert_eq!(p(".github/dependabot.yml"), None);
    assert_eq!(p("docs/workflows/ci.yml"), None);
    assert_eq!(p("docs/git/notes.md"), None);
    assert_eq!(p(".gitignore"), None);
    assert_eq!(p("README.md"), None);
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(".".to_owned()),
        Just("..".to_owned()),
        Just(String::new()),
        Just(".git".to_owned()),
        "[a-zA-Z0-9_.~$ -]{1,6}",
        "\\PC{1,3}",
    ]
}

fn raw_path() -> impl Strategy<Value = String> {
    (any::<bool>(), prop::collection::vec(segment(), 0..12)).prop_map(|(absolute, segs)| {
        let joined = segs.join("/");
        if absolute {
            format!("{ROOT}/{joined}")
        } else {
            joined
        }
    })
}

proptest! {
    /// Accepted paths are canonical: no `.`/`..`/empty segments, no leading or trailing `/`,
    /// and normalising them again changes nothing.
    #[test]
    fn accepted_paths_are_canonical_and_idempotent(raw in raw_path()) {
        if let Ok(p) = TargetPath::normalize(ROOT, &raw) {
            let s = p.as_str();
            prop_assert!(!s.is_empty() && !s.starts_with('/') && !s.ends_with('/'));
            prop_assert!(p.segments().all(|seg| !seg.is_empty() && seg != "." && seg != ".."));
            prop_assert!(!s.contains('\\') && !s.contains('\0') && !s.contains('$'));
            prop_assert_eq!(TargetPath::normalize(ROOT, s), Ok(p.clone()));
            prop_assert_eq!(TargetPath::normalize(ROOT, &format!("{ROOT}/{s}")), Ok(p));
        }
    }

    /// A path never resolves above the root: replaying the raw segments on a stack never
    /// underflows when the kernel accepts.
    #[test]
    fn accepted_paths_never_climb_above_the_root(raw in raw_path()) {
        if TargetPath::normalize(ROOT, &raw).is_ok() {
            let rel = raw.strip_prefix(ROOT).unwrap_or(&raw);
            let mut depth: i64 = 0;
            for seg in rel.split('/') {
                match seg {
                    "" | "." => {}
                    ".." => { depth -= 1; prop_assert!(depth >= 0); }
                    _ => depth += 1,
                }
            }
        }
    }

    /// Any case spelling of `.git` or `.craik` at the top is protected.
    #[test]
    fn protection_ignores_case(mask in prop::collection::vec(any::<bool>(), 6), rest in "[a-z]{1,8}") {
        for base in [".git", ".craik"] {
            let spelled: String = base.chars().zip(mask.iter().cycle())
                .map(|(c, up)| if *up { c.to_ascii_uppercase() } else { c })
                .collect();
            let p = TargetPath::normalize(ROOT, &format!("{spelled}/{rest}")).unwrap();
            prop_assert!(p.protected().is_some(), "{}", p);
        }
    }
}
