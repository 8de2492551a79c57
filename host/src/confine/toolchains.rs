//! Toolchains a governed command may use: presets that name the roots it reads (never their
//! credential files), the PATH entries it runs from and the variables that point tools at
//! them, resolved once when a run starts and signed into its inputs.
//!
//! Commands get a fresh, empty `HOME`, so a tool that looks for its installation under `~`
//! (`~/.cargo`, `~/.rustup`, `~/.nvm`, `~/.pyenv`, `~/.local`) is pointed at the operator's by
//! variable (`CARGO_HOME`, `RUSTUP_HOME`, `NVM_DIR`, `PYENV_ROOT`, `PYTHONUSERBASE`). The roots
//! are granted read-only: a command cannot install into them or change a toolchain.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The presets `--toolchain` accepts.
pub const PRESETS: &[&str] = &["rust", "node", "python", "local-bin"];

/// Names never readable inside a toolchain root (registry tokens, publish credentials, SSH
/// and cloud keys, CLI logins), kept out by the sandbox wherever a root holds them.
pub const CREDENTIALS: &[&str] = &[
    "credentials",
    "credentials.toml",
    ".credentials.toml",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pypirc",
    ".netrc",
    ".git-credentials",
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".docker",
    ".kube",
    ".config",
    "gh",
    "hosts.yml",
    "auth.json",
    ".pgpass",
    "pip.conf",
    "pip.ini",
    "npmrc",
    "config.toml",
    "config",
    "_netrc",
    "netrc",
    ".env",
    // A Craik home's signing key, wherever a readable tree holds one (an adapter installed
    // in `/opt/craik/bin` beside `/opt/craik/var` read that home's key; outside testing).
    "signing.key.pem",
];

/// Directories a credential search does not enter: downloaded sources, caches, installed
/// toolchains and libraries (content, not configuration).
const NOT_SEARCHED: &[&str] = &[
    "src",
    "cache",
    "index",
    "checkouts",
    "db",
    "toolchains",
    "lib",
    "lib64",
    "share",
    "include",
    "node_modules",
    "site-packages",
    "man",
    "doc",
    "downloads",
    "tmp",
];

/// How deep a credential search goes below a root (`versions/node/v22/etc/npmrc` is 5).
const SEARCH_DEPTH: usize = 6;

/// Credential files and directories anywhere in `root` (names matched case-insensitively
/// against [`CREDENTIALS`]), outside the content trees of [`NOT_SEARCHED`]; links are never
/// followed.
pub fn find_credentials(root: &Path) -> Vec<PathBuf> {
    search_credentials(root, true)
}

/// Credential files that lie in system trees or toolchain roots named by the environment
/// (`/usr/local`, `/opt`, `CARGO_HOME`, `RUSTUP_HOME`, `NVM_DIR`, `PYENV_ROOT`): kept out of
/// every sandbox, whatever toolchains it was given, since system trees are readable to every
/// confined process (an official Rust image keeps `credentials.toml` in
/// `/usr/local/cargo`). Exact names of [`CREDENTIALS`] only there (a system tree is full of
/// programs called `git-credential-*`). Searched once per process.
pub fn ambient_credentials() -> &'static [PathBuf] {
    static FOUND: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    FOUND.get_or_init(|| {
        let mut roots: Vec<PathBuf> = vec!["/usr/local".into(), "/opt".into()];
        for var in ["CARGO_HOME", "RUSTUP_HOME", "NVM_DIR", "PYENV_ROOT"] {
            if let Some(dir) = std::env::var_os(var).map(PathBuf::from)
                && dir.is_absolute()
            {
                roots.push(dir);
            }
        }
        let mut found: Vec<PathBuf> = roots
            .iter()
            .filter_map(|r| r.canonicalize().ok())
            .flat_map(|r| search_credentials(&r, false))
            .collect();
        found.sort();
        found.dedup();
        found
    })
}

fn search_credentials(root: &Path, worded_names: bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![(root.to_path_buf(), 0_usize)];
    let mut seen = 0_usize;
    while let Some((dir, depth)) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            seen += 1;
            if seen > 200_000 {
                return found;
            }
            let name = entry.file_name().to_string_lossy().to_ascii_lowercase();
            let path = entry.path();
            // Exact names, and anything spelled from a credential word (`credentials.toml~`,
            // `credentials.toml.bak`, `.credentials`, `token`, `auth.json.old`).
            let worded = [
                "credential",
                "token",
                "secret",
                "passw",
                "auth",
                ".netrc",
                "npmrc",
                "pypirc",
            ]
            .iter()
            .any(|w| name.contains(w));
            // A Craik home (`<home>/keys/signing.key.pem`): the whole home, journals and
            // approvals too, not just its key.
            if name == "signing.key.pem"
                && let Some(keys) = path.parent().filter(|k| k.ends_with("keys"))
                && let Some(home) = keys.parent().filter(|h| *h != root)
            {
                found.push(home.to_path_buf());
                continue;
            }
            if CREDENTIALS.contains(&name.as_str()) || (worded_names && worded) {
                found.push(path);
                continue;
            }
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && depth + 1 < SEARCH_DEPTH && !NOT_SEARCHED.contains(&name.as_str()) {
                todo.push((path, depth + 1));
            }
        }
    }
    found.sort();
    found
}

/// A toolchain as resolved for a run: what its commands read, run from and are told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Toolchain {
    /// The preset's name, or `read` for an operator's `--command-read` path.
    pub name: String,
    /// Roots readable by commands (credentials inside them kept out).
    pub read: Vec<PathBuf>,
    /// Directories put before the fixed PATH, in order.
    pub path: Vec<PathBuf>,
    /// Variables set for commands.
    pub env: Vec<(String, String)>,
    /// Credential files found inside the roots when the run started (kept out of reach).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<PathBuf>,
}

impl Toolchain {
    /// The credential paths inside this toolchain's roots, to keep out of every grant.
    pub fn credentials(&self) -> Vec<PathBuf> {
        self.read
            .iter()
            .flat_map(|root| CREDENTIALS.iter().map(move |c| root.join(c)))
            .chain(self.hidden.iter().cloned())
            .collect()
    }

    /// Records the credential files inside this toolchain's roots.
    fn with_credentials_found(mut self) -> Self {
        self.hidden = self.read.iter().flat_map(|r| find_credentials(r)).collect();
        self
    }
}

/// Resolves a preset against the operator's environment (`var`) and home directory.
pub fn preset(
    name: &str,
    user_home: Option<&Path>,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Toolchain, String> {
    let under_home = |rel: &str| user_home.map(|h| h.join(rel));
    let dir = |key: &str, default: &str| -> Option<PathBuf> {
        var(key)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| under_home(default))
            .and_then(|p| p.canonicalize().ok())
            .filter(|p| p.is_dir())
    };
    let text = |p: &Path| p.to_string_lossy().into_owned();
    let mut tc = Toolchain {
        name: name.to_owned(),
        read: Vec::new(),
        path: Vec::new(),
        env: Vec::new(),
        hidden: Vec::new(),
    };
    match name {
        "rust" => {
            let cargo = dir("CARGO_HOME", ".cargo");
            let rustup = dir("RUSTUP_HOME", ".rustup");
            if cargo.is_none() && rustup.is_none() {
                return Err("toolchain `rust`: neither CARGO_HOME/~/.cargo nor RUSTUP_HOME/~/.rustup exists".into());
            }
            if let Some(cargo) = cargo {
                tc.path.push(cargo.join("bin"));
                tc.env.push(("CARGO_HOME".into(), text(&cargo)));
                tc.read.push(cargo);
            }
            if let Some(rustup) = rustup {
                tc.env.push(("RUSTUP_HOME".into(), text(&rustup)));
                tc.read.push(rustup);
            }
            // Nothing to fetch: the sandbox has no network.
            tc.env.push(("CARGO_NET_OFFLINE".into(), "true".into()));
        }
        "node" => {
            if let Some(nvm) = dir("NVM_DIR", ".nvm") {
                let mut bins: Vec<PathBuf> = std::fs::read_dir(nvm.join("versions/node"))
                    .into_iter()
                    .flatten()
                    .filter_map(Result::ok)
                    .map(|e| e.path().join("bin"))
                    .filter(|p| p.is_dir())
                    .collect();
                bins.sort();
                bins.reverse();
                tc.path.extend(bins);
                tc.env.push(("NVM_DIR".into(), text(&nvm)));
                tc.read.push(nvm);
            }
            // npm's cache and logs go to the command's fresh HOME.
            tc.env
                .push(("NPM_CONFIG_UPDATE_NOTIFIER".into(), "false".into()));
            tc.env.push(("NPM_CONFIG_FUND".into(), "false".into()));
            tc.env.push(("NPM_CONFIG_AUDIT".into(), "false".into()));
        }
        "python" => {
            if let Some(pyenv) = dir("PYENV_ROOT", ".pyenv") {
                tc.path.push(pyenv.join("shims"));
                tc.path.push(pyenv.join("bin"));
                tc.env.push(("PYENV_ROOT".into(), text(&pyenv)));
                tc.read.push(pyenv);
            }
            if let Some(local) = dir("PYTHONUSERBASE", ".local") {
                // User site-packages (`pip install --user`), not the whole of `~/.local`.
                let lib = local.join("lib");
                if lib.is_dir() {
                    tc.read.push(lib);
                    tc.env.push(("PYTHONUSERBASE".into(), text(&local)));
                }
            }
            tc.env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
        }
        "local-bin" => {
            let bin = dir("", ".local/bin")
                .ok_or("toolchain `local-bin`: ~/.local/bin does not exist")?;
            tc.path.push(bin.clone());
            tc.read.push(bin);
        }
        other => {
            return Err(format!(
                "unknown toolchain `{other}`; presets: {}",
                PRESETS.join(", ")
            ));
        }
    }
    Ok(tc.with_credentials_found())
}

/// An operator's extra read root for commands (`--command-read PATH`).
pub fn extra_read(path: &Path) -> Result<Toolchain, String> {
    let real = path
        .canonicalize()
        .map_err(|e| format!("--command-read `{}`: {e}", path.display()))?;
    if super::rules::too_broad(&real) {
        return Err(format!(
            "--command-read `{}` is too broad (it holds home directories or your HOME); name the directory the tool lives in",
            real.display()
        ));
    }
    Ok(Toolchain {
        name: "read".into(),
        read: vec![real],
        path: Vec::new(),
        env: Vec::new(),
        hidden: Vec::new(),
    }
    .with_credentials_found())
}

/// The PATH commands run with: the toolchains' entries, then the fixed one.
pub fn search_path(toolchains: &[Toolchain], fixed: &str) -> String {
    let mut parts: Vec<String> = toolchains
        .iter()
        .flat_map(|t| t.path.iter().map(|p| p.to_string_lossy().into_owned()))
        .filter(|p| !p.contains(':'))
        .collect();
    parts.push(fixed.to_owned());
    parts.join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_point_at_the_operators_roots_and_keep_credentials_out() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
        std::fs::create_dir_all(home.join(".rustup")).unwrap();
        let none = |_: &str| None;
        let rust = preset("rust", Some(&home), &none).unwrap();
        assert_eq!(rust.read, vec![home.join(".cargo"), home.join(".rustup")]);
        assert_eq!(rust.path, vec![home.join(".cargo/bin")]);
        assert!(
            rust.credentials()
                .contains(&home.join(".cargo/credentials.toml"))
        );
        assert!(preset("nope", Some(&home), &none).is_err());
        assert!(preset("local-bin", Some(&home), &none).is_err());
        assert!(extra_read(Path::new("/")).is_err());
        assert_eq!(
            search_path(&[rust], "/usr/bin"),
            format!("{}:/usr/bin", home.join(".cargo/bin").display())
        );
    }

    #[test]
    fn issue_18_a_craik_home_inside_a_root_is_kept_out_whole() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("var/craik/keys")).unwrap();
        std::fs::create_dir_all(root.join("var/craik/runs/r1")).unwrap();
        std::fs::write(root.join("var/craik/keys/signing.key.pem"), "k").unwrap();
        std::fs::create_dir_all(root.join("bin")).unwrap();
        let found = find_credentials(root);
        assert!(found.contains(&root.join("var/craik")), "{found:?}");
        assert!(!found.iter().any(|f| f.starts_with(root.join("bin"))));
    }
}
