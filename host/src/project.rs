//! The project profile: where a project's repository is, its docs paths, immutable paths and
//! what case files look at. Read from the repository's `craik.toml` (`[project]`) or from a
//! `craik.project_profile` file (an example's `project_profile.json`), validated against the
//! repository on disk, and hashed: its sha256 is signed into every run's `run.inputs`.
//!
//! Path entries are globs over paths relative to the repository root (`docs/**`), or, as the
//! contract's examples write them, a directory with a trailing `/` (`docs/` = `docs/**`) or a
//! plain path (a file, or a directory and everything under it).

use std::path::{Path, PathBuf};

use craik_contracts::{
    DocsProfile, MemoryBackend, MemoryProfile, MemoryScope, ProjectProfile, RepoProfile, RepoType,
};
use serde::Serialize;

use crate::Error;
use crate::case::scan::Tree;
use crate::config::Loaded;

/// What case files look at and never look at (globs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Discovery {
    pub include: Vec<String>,
    pub exclude: Vec<String>,
}

/// Where a profile came from, for errors naming the file and field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `craik.toml`'s `[project]`.
    Toml,
    /// A `craik.project_profile` document.
    File,
    /// None declared: a run's workspace with its README and docs (never validated, never
    /// signed as a profile).
    Implicit,
}

/// A project profile, resolved.
#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    /// The contract, as the file says it (`repo.local_path` as written, relative or not).
    pub profile: ProjectProfile,
    pub discovery: Discovery,
    /// The repository root (absolute).
    #[serde(skip)]
    pub root: PathBuf,
    /// The file it came from.
    #[serde(skip)]
    pub file: PathBuf,
    #[serde(skip)]
    pub source: Source,
}

/// A profile entry compiled: what it matches.
#[derive(Debug, Clone)]
pub struct Specs {
    entries: Vec<globset::GlobMatcher>,
    /// Each entry's own `P/**` matcher for a plain path `P` (a directory).
    under: Vec<Option<globset::GlobMatcher>>,
}

impl Specs {
    /// Compiles `entries`; the error is (index, why).
    pub fn new(entries: &[String]) -> Result<Self, (usize, String)> {
        let mut out = Self {
            entries: Vec::new(),
            under: Vec::new(),
        };
        for (i, raw) in entries.iter().enumerate() {
            let globs = Self::globs_of(raw);
            let (glob, under) = globs
                .split_first()
                .ok_or_else(|| (i, "an empty entry".to_owned()))?;
            out.entries
                .push(crate::config::workspace_glob(glob).map_err(|why| (i, why))?);
            out.under.push(
                under
                    .first()
                    .map(|u| crate::config::workspace_glob(u).map_err(|why| (i, why)))
                    .transpose()?,
            );
        }
        Ok(out)
    }

    /// The globs one entry stands for: `DIR/` is `DIR/**`; a glob is itself; a plain path `P`
    /// is `P` and, should it be a directory, `P/**`.
    pub fn globs_of(raw: &str) -> Vec<String> {
        let trimmed = raw.strip_suffix('/').unwrap_or(raw);
        if raw.ends_with('/') {
            vec![format!("{trimmed}/**")]
        } else if raw.contains(['*', '?', '[', ']', '{', '}']) {
            vec![raw.to_owned()]
        } else {
            vec![raw.to_owned(), format!("{trimmed}/**")]
        }
    }

    /// The first entry matching the relative path `rel`.
    pub fn matching(&self, rel: &str) -> Option<usize> {
        self.entries
            .iter()
            .zip(&self.under)
            .position(|(m, u)| m.is_match(rel) || u.as_ref().is_some_and(|u| u.is_match(rel)))
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl Profile {
    /// The profile `craik.toml` describes: `[project]`'s id (else one from the directory's
    /// name), `repository` (default: the file's directory), docs and immutable paths and the
    /// discovery globs.
    pub fn from_config(loaded: &Loaded) -> Self {
        let p = &loaded.config.project;
        let written = p.repository.clone().unwrap_or_else(|| PathBuf::from("."));
        let root = crate::fsio::lexical(&loaded.resolve(&written));
        let id =
            p.id.clone()
                .unwrap_or_else(|| crate::config::project_id_for(&loaded.dir));
        let name = root
            .file_name()
            .map_or_else(|| id.clone(), |n| n.to_string_lossy().into_owned());
        Self {
            profile: ProjectProfile {
                schema: Default::default(),
                version: Default::default(),
                id,
                name: craik_contracts::one_line(&name),
                repo: RepoProfile {
                    repo_type: RepoType::Git,
                    local_path: written.display().to_string(),
                    remote: None,
                    default_branch: "main".into(),
                },
                docs: DocsProfile {
                    paths: p.docs_paths.clone(),
                    immutable_paths: p.immutable_paths.clone(),
                },
                memory: MemoryProfile {
                    backend: MemoryBackend::Local,
                    scope: MemoryScope::Team,
                },
                policies: Vec::new(),
            },
            discovery: Discovery {
                include: p.discovery_include.clone(),
                exclude: p.discovery_exclude.clone(),
            },
            root,
            file: loaded.path.clone(),
            source: Source::Toml,
        }
    }

    /// A `craik.project_profile` document; its repository is `repo.local_path`, relative to
    /// the file's directory. Case files look at everything in it.
    pub fn from_file(path: &Path) -> Result<Self, Error> {
        let bytes = crate::fsio::read_bounded(path, 1 << 20)
            .map_err(|e| Error::usage(format!("{}: {e}", path.display())))?;
        let profile = craik_contracts::decode_single::<ProjectProfile>(&bytes).map_err(|p| {
            let mut lines = p.into_iter().map(|q| format!("{}: {q}", path.display()));
            let first = lines.next().unwrap_or_default();
            Error::invalid(first, lines.collect())
        })?;
        let dir = std::path::absolute(path)
            .map_err(|e| Error::usage(format!("{}: {e}", path.display())))?
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("/"));
        let root = crate::fsio::lexical(&dir.join(&profile.repo.local_path));
        Ok(Self {
            profile,
            discovery: Discovery {
                include: Vec::new(),
                exclude: Vec::new(),
            },
            root,
            file: path.to_owned(),
            source: Source::File,
        })
    }

    /// The profile of a run with none declared: its workspace `root` as the repository,
    /// `README.md` and `docs/` as docs paths where they exist, the run's immutable paths.
    pub fn implicit(root: &Path, project_id: &str, immutable: &[String]) -> Self {
        let mut paths = Vec::new();
        if std::fs::symlink_metadata(root.join("README.md")).is_ok_and(|m| m.is_file()) {
            paths.push("README.md".to_owned());
        }
        if std::fs::symlink_metadata(root.join("docs")).is_ok_and(|m| m.is_dir()) {
            paths.push("docs/".to_owned());
        }
        Self {
            profile: ProjectProfile {
                schema: Default::default(),
                version: Default::default(),
                id: project_id.to_owned(),
                name: project_id.to_owned(),
                repo: RepoProfile {
                    repo_type: RepoType::Git,
                    local_path: ".".into(),
                    remote: None,
                    default_branch: "main".into(),
                },
                docs: DocsProfile {
                    paths,
                    immutable_paths: immutable.to_vec(),
                },
                memory: MemoryProfile {
                    backend: MemoryBackend::Local,
                    scope: MemoryScope::Team,
                },
                policies: Vec::new(),
            },
            discovery: Discovery {
                include: Vec::new(),
                exclude: Vec::new(),
            },
            root: crate::fsio::lexical(
                &std::path::absolute(root).unwrap_or_else(|_| root.to_owned()),
            ),
            file: PathBuf::from("(no project profile)"),
            source: Source::Implicit,
        }
    }

    /// `sha256:` of the profile's canonical JSON (the contract and the discovery globs): what
    /// `run.inputs` signs as `project_profile_sha256`.
    pub fn digest(&self) -> Result<crate::digest::Digest, String> {
        crate::digest::Digest::of_canonical(self)
    }

    /// The name of a field as the profile's file spells it.
    pub fn field(&self, what: Field, i: usize) -> String {
        let name = match (self.source, what) {
            (Source::Toml, Field::Repo) => return "project.repository".into(),
            (Source::File, Field::Repo) => return "repo.local_path".into(),
            (Source::Implicit, Field::Repo) => return "workspace".into(),
            (Source::Toml, Field::Docs) => "project.docs_paths",
            (Source::Toml, Field::Immutable) => "project.immutable_paths",
            (Source::Toml, Field::Include) => "project.discovery_include",
            (Source::Toml, Field::Exclude) => "project.discovery_exclude",
            (Source::File, Field::Docs) => "docs.paths",
            (Source::File, Field::Immutable) => "docs.immutable_paths",
            (Source::File, Field::Include | Field::Exclude) => "discovery",
            (Source::Implicit, _) => "implicit profile",
        };
        format!("{name}[{i}]")
    }

    fn bad(&self, field: &str, value: &str, why: &str) -> Error {
        Error::invalid(
            format!(
                "{}: {field} `{}`: {why}",
                self.file.display(),
                craik_contracts::Truncated(value)
            ),
            Vec::new(),
        )
    }

    /// The compiled entries: (docs, immutable, include, exclude); a bad glob is an error
    /// naming the file, field and value.
    pub fn specs(&self) -> Result<(Specs, Specs, Specs, Specs), Error> {
        let compile = |what: Field, list: &[String]| {
            Specs::new(list).map_err(|(i, why)| {
                self.bad(
                    &self.field(what, i),
                    list.get(i).map_or("", String::as_str),
                    &why,
                )
            })
        };
        Ok((
            compile(Field::Docs, &self.profile.docs.paths)?,
            compile(Field::Immutable, &self.profile.docs.immutable_paths)?,
            compile(Field::Include, &self.discovery.include)?,
            compile(Field::Exclude, &self.discovery.exclude)?,
        ))
    }

    /// What must hold of the profile whatever the repository holds: the root is a directory,
    /// the globs compile, and no docs path leads out of the repository through a link.
    pub fn check_structure(&self) -> Result<(), Error> {
        let repo_field = self.field(Field::Repo, 0);
        match std::fs::symlink_metadata(&self.root) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(self.bad(
                    &repo_field,
                    &self.profile.repo.local_path,
                    "not a directory (a link is not followed)",
                ));
            }
            Err(e) => {
                return Err(self.bad(&repo_field, &self.profile.repo.local_path, &e.to_string()));
            }
        }
        self.specs()?;
        for (i, entry) in self.profile.docs.paths.iter().enumerate() {
            // Every existing component of the literal part must be a real directory or file
            // of the repository: a link there could lead anywhere.
            let mut at = self.root.clone();
            for part in entry.split('/') {
                if part.is_empty() || part.contains(['*', '?', '[', ']', '{', '}']) {
                    break;
                }
                at.push(part);
                match std::fs::symlink_metadata(&at) {
                    Ok(m) if m.file_type().is_symlink() => {
                        return Err(self.bad(
                            &self.field(Field::Docs, i),
                            entry,
                            "leads through a symbolic link, possibly outside the repository (links are never followed)",
                        ));
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }
        Ok(())
    }

    /// What a complete check finds against the repository on disk and its walk `tree`
    /// (structure already checked): no git repository, a docs path or discovery glob
    /// matching no file. Each is one line naming the file, field and value.
    pub fn findings(&self, tree: &Tree, git: Result<&Path, &str>) -> Vec<String> {
        let mut out = Vec::new();
        if let Err(why) = git {
            out.push(format!(
                "{}: {} `{}`: no git repository ({})",
                self.file.display(),
                self.field(Field::Repo, 0),
                craik_contracts::Truncated(&self.profile.repo.local_path),
                craik_contracts::one_line(why)
            ));
        }
        let Ok((docs, _, include, _)) = self.specs() else {
            return out;
        };
        if tree.skipped.truncated {
            // A glob may match beyond what a truncated walk saw: nothing to say.
            return out;
        }
        for (what, specs, list) in [
            (Field::Docs, &docs, &self.profile.docs.paths),
            (Field::Include, &include, &self.discovery.include),
        ] {
            let mut hit = vec![false; list.len()];
            for rel in tree.files.keys() {
                for (i, (m, u)) in specs.entries.iter().zip(&specs.under).enumerate() {
                    if (m.is_match(rel) || u.as_ref().is_some_and(|u| u.is_match(rel)))
                        && let Some(h) = hit.get_mut(i)
                    {
                        *h = true;
                    }
                }
            }
            for (i, found) in hit.iter().enumerate() {
                if !found {
                    out.push(format!(
                        "{}: {} `{}`: matches no file in the repository",
                        self.file.display(),
                        self.field(what, i),
                        craik_contracts::Truncated(list.get(i).map_or("", String::as_str))
                    ));
                }
            }
        }
        out
    }

    /// Structure and findings: the first problem as an error (`craik project show`,
    /// `craik case build`).
    pub fn validate(&self) -> Result<Tree, Error> {
        self.check_structure()?;
        let tree =
            crate::case::scan::walk(&self.root, crate::case::scan::MAX_ENTRIES).map_err(|why| {
                self.bad(
                    &self.field(Field::Repo, 0),
                    &self.profile.repo.local_path,
                    &why,
                )
            })?;
        let git = crate::case::git::toplevel(&self.root);
        let findings = self.findings(&tree, git.as_deref().map_err(String::as_str));
        let mut lines = findings.into_iter();
        match lines.next() {
            Some(first) => Err(Error::invalid(first, lines.collect())),
            None => Ok(tree),
        }
    }
}

/// The fields of a profile, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Repo,
    Docs,
    Immutable,
    Include,
    Exclude,
}

/// The profile that applies to a task: a task directory's `project_profile.json`, else
/// `craik.toml`'s `[project]`; `None` when there is neither.
pub fn for_task(task: &Path, config: Option<&Loaded>) -> Result<Option<Profile>, Error> {
    let dir = if task.is_dir() { Some(task) } else { None };
    if let Some(file) = dir.map(|d| d.join(PROFILE_FILE)).filter(|f| f.is_file()) {
        return Profile::from_file(&file).map(Some);
    }
    Ok(config.map(Profile::from_config))
}

/// The file name of a profile beside a task (as in `examples/`).
pub const PROFILE_FILE: &str = "project_profile.json";
