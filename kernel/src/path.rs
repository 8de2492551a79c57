//! Normalising the targets runners name, before any policy matches them.
//!
//! Owns: turning a raw path string into one canonical workspace-relative spelling, refusing
//! every spelling whose meaning depends on the platform, the shell or the filesystem; and
//! classifying protected areas. Must not: touch the filesystem (symlinks are the host's job at
//! open time), or guess. When in doubt, refuse: a refused path is a denied step, never an
//! allowed one.

use std::fmt;

use craik_contracts::Truncated;

/// Longest accepted raw path, in bytes.
pub const MAX_PATH_BYTES: usize = 2048;
/// Longest accepted segment, in bytes (the common filesystem limit).
pub const MAX_SEGMENT_BYTES: usize = 255;
/// Deepest accepted normalised path, in segments.
pub const MAX_DEPTH: usize = 64;

/// A canonical workspace-relative path: `/`-separated, no empty, `.` or `..` segments, no
/// leading or trailing `/`, never empty (the workspace root itself is `.` and is refused).
///
/// INVARIANT: every value was produced by [`TargetPath::normalize`], so it satisfies the
/// above and re-normalising it yields itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TargetPath(String);

/// Why a target was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("empty path")]
    Empty,
    #[error("path is longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
    #[error("segment `{0}` is longer than {MAX_SEGMENT_BYTES} bytes")]
    SegmentTooLong(String),
    #[error("path is deeper than {MAX_DEPTH} segments")]
    TooDeep,
    #[error("path contains a NUL byte")]
    Nul,
    #[error("path contains control character U+{0:04X}")]
    Control(u32),
    #[error("path contains a backslash; use `/` as the only separator")]
    Backslash,
    #[error("absolute path `{0}` is outside the workspace")]
    Outside(String),
    #[error("path `{0}` climbs out of the workspace with `..`")]
    Escapes(String),
    #[error("path names the workspace root itself")]
    Root,
    #[error("segment `{0}` starts with `~`, which a shell would expand")]
    Tilde(String),
    #[error("segment `{0}` contains `$`, which a shell would expand")]
    Dollar(String),
    #[error("segment `{0}` ends with a dot or a space, which some filesystems drop")]
    TrailingDotOrSpace(String),
    #[error("segment `{0}` contains a Unicode format or bidirectional control character")]
    InvisibleChar(String),
}

impl TargetPath {
    /// Normalises `raw` against the absolute `workspace_root` (itself written with `/`
    /// separators, no trailing `/`).
    ///
    /// Relative paths are taken relative to the root; absolute paths must lie under it.
    /// `.` and empty segments (`a//b`) are dropped, `..` pops a segment and may never climb
    /// above the root, a trailing `/` is dropped.
    pub fn normalize(workspace_root: &str, raw: &str) -> Result<Self, PathError> {
        if raw.is_empty() {
            return Err(PathError::Empty);
        }
        if raw.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong);
        }
        if let Some(c) = raw.chars().find(|c| c.is_control()) {
            return Err(if c == '\0' {
                PathError::Nul
            } else {
                PathError::Control(u32::from(c))
            });
        }
        if raw.contains('\\') {
            return Err(PathError::Backslash);
        }
        let relative = if raw.starts_with('/') {
            let root = workspace_root.trim_end_matches('/');
            match raw.strip_prefix(root) {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
                _ => return Err(PathError::Outside(Truncated(raw).to_string())),
            }
        } else {
            raw
        };

        let mut segments: Vec<&str> = Vec::new();
        for segment in relative.split('/') {
            match segment {
                "" | "." => {}
                ".." => {
                    if segments.pop().is_none() {
                        return Err(PathError::Escapes(Truncated(raw).to_string()));
                    }
                }
                s => {
                    check_segment(s)?;
                    segments.push(s);
                }
            }
        }
        if segments.is_empty() {
            return Err(PathError::Root);
        }
        if segments.len() > MAX_DEPTH {
            return Err(PathError::TooDeep);
        }
        Ok(Self(segments.join("/")))
    }

    /// The canonical spelling.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The segments, outermost first.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }

    /// True when `self` is `dir` or lies under it, segment-wise: `docs-evil/x` is not under
    /// `docs`.
    pub fn is_under(&self, dir: &TargetPath) -> bool {
        self.0 == dir.0
            || (self.0.starts_with(&dir.0) && self.0.as_bytes().get(dir.0.len()) == Some(&b'/'))
    }

    /// The protected area this path falls in, if any. Matching is ASCII case-insensitive,
    /// because on case-insensitive filesystems `.GIT/config` is `.git/config`.
    pub fn protected(&self) -> Option<Protected> {
        let lower = self.0.to_ascii_lowercase();
        let whole = lower.as_str();
        // Craik's state and git internals at any depth (a nested checkout's `.git/` runs
        // hooks as well as the top one; a `.craik/` anywhere is some Craik's home).
        // Craik's own configuration and what `craik task new`/`grants new` write, at any depth
        // (craik looks for `craik.toml` from the working directory up): a command that rewrote
        // it could unpin policies, plant a permit or drop the immutable paths for the
        // operator's next run (found by outside testing).
        if lower
            .split('/')
            .any(|s| s == ".craik" || CRAIK_INPUT_NAMES.contains(&s))
        {
            return Some(Protected::CraikState);
        }
        if lower.split('/').any(|s| s == ".git") {
            return Some(Protected::Git);
        }
        // CI workflows and actions at any depth (a nested repository's run in its own CI:
        // outside testing round 5).
        let segments: Vec<&str> = lower.split('/').collect();
        let under_github = |names: &[&str]| {
            segments
                .windows(2)
                .any(|w| matches!(w, [a, b] if *a == ".github" && names.contains(b)))
        };
        if under_github(&["workflows", "actions"])
            || segments.iter().any(|s| EXEC_CONFIG_NAMES.contains(s))
            || segments
                .iter()
                .any(|s| EXEC_CONFIG_SUFFIXES.iter().any(|x| s.ends_with(x)))
        {
            return Some(Protected::ExecConfig);
        }
        if under_github(&[
            "copilot-instructions.md",
            "instructions",
            "prompts",
            "chatmodes",
            "agents",
        ]) {
            return Some(Protected::AgentConfig);
        }
        match () {
            // Agent configuration at any depth: a nested `.claude/settings.json` or `.mcp.json`
            // steers an agent started in that directory as much as a top-level one.
            () if lower.split('/').any(|seg| AGENT_CONFIG_DIRS.contains(&seg)) => {
                Some(Protected::AgentConfig)
            }
            () if AGENT_CONFIG_FILES.contains(&whole)
                || AGENT_CONFIG_FILES
                    .iter()
                    .any(|f| !f.contains('/') && lower.rsplit('/').next() == Some(*f)) =>
            {
                Some(Protected::AgentConfig)
            }
            _ => {
                let last = lower.rsplit('/').next().unwrap_or_default();
                // Nested instruction files steer agents as much as top-level ones.
                AGENT_INSTRUCTION_NAMES
                    .contains(&last)
                    .then_some(Protected::AgentConfig)
            }
        }
    }
}

/// The project's immutable paths: globs over workspace-relative paths (`docs/adr/**`),
/// matched ASCII case-insensitively like the protected areas. No write capability reaches a
/// path they cover, whatever its label and whatever a grant names; no command may change one.
#[derive(Debug, Clone, Default)]
pub struct ImmutablePaths {
    globs: Vec<String>,
    set: Option<std::sync::Arc<globset::GlobSet>>,
    /// `P` of every `P/**` glob (lowercase): the directory itself is covered too.
    dirs: Vec<String>,
}

impl ImmutablePaths {
    /// The glob covering exactly the workspace-relative `rel` (and, for a directory,
    /// everything under it): glob metacharacters in the name match themselves.
    pub fn glob_for(rel: &str, dir: bool) -> String {
        let exact = globset::escape(rel);
        if dir { format!("{exact}/**") } else { exact }
    }

    /// Compiles `globs`; each must be relative, without `.`/`..` components, and valid.
    pub fn new(globs: &[String]) -> Result<Self, String> {
        if globs.is_empty() {
            return Ok(Self::default());
        }
        let mut builder = globset::GlobSetBuilder::new();
        let mut dirs = Vec::new();
        for glob in globs {
            if glob.is_empty() || glob.starts_with('/') {
                return Err(format!(
                    "immutable path `{glob}`: a path relative to the workspace root"
                ));
            }
            if glob.split('/').any(|p| p == ".." || p == ".") {
                return Err(format!(
                    "immutable path `{glob}`: no `.` or `..` components"
                ));
            }
            let compiled = globset::GlobBuilder::new(glob)
                .literal_separator(true)
                .case_insensitive(true)
                .build()
                .map_err(|e| format!("immutable path `{glob}`: {e}"))?;
            builder.add(compiled);
            if let Some(dir) = glob.strip_suffix("/**") {
                dirs.push(dir.to_ascii_lowercase());
            }
        }
        let set = builder.build().map_err(|e| e.to_string())?;
        Ok(Self {
            globs: globs.to_vec(),
            set: Some(std::sync::Arc::new(set)),
            dirs,
        })
    }

    /// Every path: the fail-closed stand-in for globs that cannot be compiled.
    pub fn everything() -> Self {
        let mut builder = globset::GlobSetBuilder::new();
        if let Ok(all) = globset::Glob::new("**") {
            builder.add(all);
        }
        Self {
            globs: vec!["**".into()],
            set: builder.build().ok().map(std::sync::Arc::new),
            dirs: vec![String::new()],
        }
    }

    /// The globs, as given.
    pub fn globs(&self) -> &[String] {
        &self.globs
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.globs.is_empty()
    }

    /// Whether the workspace-relative path `rel` is immutable (a `P/**` glob covers `P`).
    pub fn covers(&self, rel: &str) -> bool {
        let Some(set) = &self.set else {
            return false;
        };
        let lower = rel.to_ascii_lowercase();
        set.is_match(&lower) || self.dirs.contains(&lower)
    }
}

impl fmt::Display for TargetPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Areas no grant reaches unless a policy names them explicitly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protected {
    /// `.craik/`: journals, receipts, approvals, keys.
    CraikState,
    /// `.git/`: hooks and config execute code.
    Git,
    /// Files and directories that instruct or configure coding agents.
    AgentConfig,
    /// Configuration that runs code on someone else's machine or shell: CI workflows
    /// (`.github/workflows/`), direnv's `.envrc`, editor tasks (`.vscode/`).
    ExecConfig,
    /// The project's immutable paths ([`ImmutablePaths`]): no grant unlocks them.
    Immutable,
}

impl Protected {
    /// Name used in reasons and receipts.
    pub const fn name(self) -> &'static str {
        match self {
            Self::CraikState => "craik-state",
            Self::Git => "git",
            Self::AgentConfig => "agent-config",
            Self::ExecConfig => "exec-config",
            Self::Immutable => "immutable",
        }
    }
}

/// Names (at any depth, lowercase) of Craik's own inputs kept in a repository.
const CRAIK_INPUT_NAMES: &[&str] = &[
    "craik.toml",
    ".craik-tasks",
    ".craik-grants",
    "runners.toml",
];

/// Name endings (lowercase) of editor project files that define tasks run on open.
const EXEC_CONFIG_SUFFIXES: &[&str] = &[".code-workspace", ".sublime-project"];

/// Names (at any depth, lowercase) of configuration that executes code when a person or a
/// tool enters the directory, opens it, commits, builds or runs CI in it: direnv, editor and
/// devcontainer settings, git hooks managers and attributes, CI definitions, toolchain pins
/// (a `rust-toolchain.toml` `path` runs any binary), package-manager and cargo configuration.
const EXEC_CONFIG_NAMES: &[&str] = &[
    ".envrc",
    ".vscode",
    ".devcontainer",
    ".husky",
    ".githooks",
    ".gitattributes",
    ".gitmodules",
    ".gitlab-ci.yml",
    ".pre-commit-config.yaml",
    ".pre-commit-hooks.yaml",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".cargo",
    ".config",
    ".idea",
    ".circleci",
    ".buildkite",
    ".gitlab",
    ".travis.yml",
    ".drone.yml",
    "jenkinsfile",
    "azure-pipelines.yml",
    "bitbucket-pipelines.yml",
    "rust-toolchain",
    "rust-toolchain.toml",
    "mise.toml",
    ".mise.toml",
    ".tool-versions",
    ".pnpmfile.cjs",
    "lefthook.yml",
    ".lefthook.yml",
    "lefthook.yaml",
    ".lefthook.yaml",
    "lefthook.json",
    ".lefthook.json",
    "lefthook.toml",
    ".lefthook.toml",
    "lefthook-local.yml",
    "lefthook-local.yaml",
    ".lefthook-local.yml",
    ".lefthook-local.yaml",
    ".lefthook",
    ".lefthook-local",
    // Other git-hook managers and what they run at commit time.
    ".overcommit.yml",
    ".simple-git-hooks.json",
    ".simple-git-hooks.js",
    "simple-git-hooks.json",
    ".lintstagedrc",
    ".lintstagedrc.json",
    ".lintstagedrc.yaml",
    ".lintstagedrc.yml",
    ".lintstagedrc.js",
    ".lintstagedrc.mjs",
    ".lintstagedrc.cjs",
    "lint-staged.config.js",
    "lint-staged.config.mjs",
    "lint-staged.config.cjs",
    "commitlint.config.js",
    "commitlint.config.cjs",
    "commitlint.config.mjs",
    "commitlint.config.ts",
    ".commitlintrc",
    ".commitlintrc.json",
    ".commitlintrc.js",
    ".commitlintrc.yml",
    ".commitlintrc.yaml",
    // What direnv's `use flake` / `use nix` and devenv/devbox evaluate (direnv re-checks
    // only `.envrc` itself).
    "flake.nix",
    "flake.lock",
    "shell.nix",
    "default.nix",
    "devenv.nix",
    "devenv.yaml",
    "devenv.lock",
    "devbox.json",
    ".idx",
    ".replit",
    "replit.nix",
    // mise's other spellings.
    "mise",
    ".mise",
    "mise.local.toml",
    ".mise.local.toml",
    // More CI definitions and review gates.
    "cloudbuild.yaml",
    "cloudbuild.yml",
    "buildspec.yml",
    "buildspec.yaml",
    ".tekton",
    "codeowners",
    // Round 8: agents' auto-run files, dev environments that run commands, deploy and CI
    // definitions, IDE tasks, hook and git configuration, dotenv files shells load.
    ".openhands",
    ".openhands_instructions",
    ".bazeliskrc",
    ".flox",
    "pixi.toml",
    "hermit.hcl",
    "activate-hermit",
    ".ddev",
    ".lando.yml",
    ".lando.yaml",
    ".rtx.toml",
    "mise.lock",
    "netlify.toml",
    "vercel.json",
    "codemagic.yaml",
    ".gitpod.dockerfile",
    ".gitpod",
    "action.yml",
    "action.yaml",
    ".fleet",
    ".theia",
    ".huskyrc",
    ".huskyrc.json",
    ".huskyrc.js",
    ".lfsconfig",
    ".env",
    ".env.local",
    // Other version control systems' repositories (hooks, config that runs programs).
    ".hg",
    ".jj",
    ".sl",
    ".svn",
    // Debuggers, editors and tools that load a file from the working directory.
    ".gdbinit",
    ".lldbinit",
    ".exrc",
    ".nvimrc",
    ".nvim.lua",
    ".pylintrc",
    "bunfig.toml",
    ".bazelrc",
    ".pdbrc",
    ".vimrc",
    ".gvimrc",
    ".zed",
    // A devcontainer file's `initializeCommand` runs on the host; more CI definitions.
    ".devcontainer.json",
    ".forgejo",
    ".gitea",
    ".woodpecker",
    ".woodpecker.yml",
    ".woodpecker.yaml",
    ".cirrus.yml",
    "appveyor.yml",
    ".appveyor.yml",
    ".semaphore",
    ".gitpod.yml",
    // Build tools that load their configuration (JVM options, extensions, distributions,
    // MSBuild targets, SDK pins) from the project: each can name a program to run.
    ".mvn",
    "gradle.properties",
    "gradle-wrapper.properties",
    ".sbtopts",
    ".jvmopts",
    "directory.build.props",
    "directory.build.targets",
    "directory.build.rsp",
    "directory.packages.props",
    "global.json",
    "nuget.config",
    // Interpreter and REPL start-up files read from the working directory.
    ".rprofile",
    ".renviron",
    ".ghci",
    ".irbrc",
    ".pryrc",
    ".iex.exs",
    ".erlang",
    ".ocamlinit",
    ".octaverc",
    ".ycm_extra_conf.py",
    ".dir-locals.el",
    ".dir-locals-2.el",
    ".lvimrc",
    // direnv's other inputs.
    ".envrc.local",
    ".direnv",
];

/// Top-level directories of agent configuration (lowercase).
const AGENT_CONFIG_DIRS: &[&str] = &[
    ".claude",
    ".codex",
    ".gemini",
    ".cursor",
    ".aider",
    ".continue",
    ".windsurf",
    ".roo",
    ".amazonq",
    ".kiro",
    ".opencode",
    ".qwen",
    ".junie",
    ".agents",
    ".clinerules",
    ".goosehints",
    ".crush",
    ".kilocode",
    ".amp",
    ".augment",
    ".trae",
    ".factory",
    ".qoder",
    ".zencoder",
    ".void",
    ".codebuddy",
    ".tabnine",
    ".cody",
];

/// Top-level files of agent configuration (lowercase, workspace-relative).
const AGENT_CONFIG_FILES: &[&str] = &[
    ".github/copilot-instructions.md",
    ".cursorrules",
    ".windsurfrules",
    ".aider.conf.yml",
    ".mcp.json",
    "opencode.json",
    "opencode.jsonc",
    ".crush.json",
    "crush.json",
    ".rules",
    ".roomodes",
    ".kilocodemodes",
    ".augment-guidelines",
    ".continuerc.json",
    ".opencode.json",
    "mcp.json",
    ".aider.conf.yaml",
    ".aider.model.settings.yml",
    ".aider.model.metadata.json",
    ".clineignore",
];

/// Instruction files at any depth (lowercase).
const AGENT_INSTRUCTION_NAMES: &[&str] = &[
    "agents.md",
    "claude.md",
    "gemini.md",
    "agents.override.md",
    "agents.local.md",
    "agent.md",
    "claude.local.md",
    "qwen.md",
    "crush.md",
    "warp.md",
];

pub(crate) fn check_segment(s: &str) -> Result<(), PathError> {
    if s.len() > MAX_SEGMENT_BYTES {
        return Err(PathError::SegmentTooLong(Truncated(s).to_string()));
    }
    if s.starts_with('~') {
        return Err(PathError::Tilde(Truncated(s).to_string()));
    }
    if s.contains('$') {
        return Err(PathError::Dollar(Truncated(s).to_string()));
    }
    if s.ends_with('.') || s.ends_with(' ') {
        return Err(PathError::TrailingDotOrSpace(Truncated(s).to_string()));
    }
    if s.chars().any(is_invisible) {
        return Err(PathError::InvisibleChar(Truncated(s).to_string()));
    }
    Ok(())
}

/// Zero-width and bidirectional formatting characters: they make two different paths print
/// the same way in a review.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{feff}' | '\u{00ad}'
    )
}

#[cfg(test)]
mod tests;
