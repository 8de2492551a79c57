//! Editing a `runners.toml` (`craik runners add|remove`) with its comments and layout kept.
//! The caller checks the result with [`super::Registry::load_with`] before writing it.

use std::path::PathBuf;

/// One `[runner.ID]` table as `craik runners add` writes it (strings as given; the registry
/// load checks them).
#[derive(Debug, Default, Clone)]
pub struct NewEntry {
    pub id: String,
    pub backend: String,
    pub name: Option<String>,
    pub command: Option<String>,
    pub args: Vec<String>,
    pub scenario_arg: Option<String>,
    pub adapter: Option<String>,
    pub api: Option<String>,
    pub model: Option<String>,
    /// `cli`: the model endpoint, the key's variable, further allowed CLI flags.
    pub endpoint: Option<String>,
    pub key_env: Option<String>,
    pub cli_args: Vec<String>,
    pub package: Option<String>,
    pub version: Option<String>,
    pub source: Option<PathBuf>,
    pub install: Option<String>,
    pub matrix: Option<String>,
    /// An inline matrix: its trust, and `CAPABILITY=SUPPORT` pairs.
    pub trust: Option<String>,
    pub support: Vec<String>,
    pub env: Vec<String>,
    pub read: Vec<PathBuf>,
}

fn parse(text: &str) -> Result<toml_edit::DocumentMut, String> {
    text.parse()
        .map_err(|e: toml_edit::TomlError| craik_contracts::one_line(e.message()))
}

/// `text` with `entry` added (replacing one of the same id only with `force`).
pub fn add_to_text(text: &str, entry: &NewEntry, force: bool) -> Result<String, String> {
    let mut doc = parse(text)?;
    let runners = doc
        .entry("runner")
        .or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        })
        .as_table_mut()
        .ok_or("`runner` is not a table")?;
    if runners.contains_key(&entry.id) && !force {
        return Err(format!(
            "runner `{}` exists (replace it with --force, or `craik runners remove {}`)",
            entry.id, entry.id
        ));
    }
    let list = |v: &[String]| {
        let mut arr = toml_edit::Array::new();
        for x in v {
            arr.push(x.as_str());
        }
        toml_edit::value(arr)
    };
    let mut t = toml_edit::Table::new();
    if let Some(v) = &entry.name {
        t.insert("name", toml_edit::value(v));
    }
    t.insert("backend", toml_edit::value(&entry.backend));
    for (k, v) in [
        ("command", &entry.command),
        ("scenario_arg", &entry.scenario_arg),
        ("adapter", &entry.adapter),
        ("api", &entry.api),
        ("model", &entry.model),
        ("endpoint", &entry.endpoint),
        ("key_env", &entry.key_env),
        ("package", &entry.package),
        ("version", &entry.version),
        ("install", &entry.install),
        ("matrix", &entry.matrix),
    ] {
        if let Some(v) = v {
            t.insert(k, toml_edit::value(v));
        }
    }
    if let Some(src) = &entry.source {
        t.insert("source", toml_edit::value(src.display().to_string()));
    }
    if !entry.args.is_empty() {
        t.insert("args", list(&entry.args));
    }
    if !entry.cli_args.is_empty() {
        t.insert("cli_args", list(&entry.cli_args));
    }
    if !entry.env.is_empty() {
        t.insert("env", list(&entry.env));
    }
    if !entry.read.is_empty() {
        let read: Vec<String> = entry.read.iter().map(|p| p.display().to_string()).collect();
        t.insert("read", list(&read));
    }
    match &entry.trust {
        Some(trust) => {
            let mut caps = toml_edit::Table::new();
            caps.insert("trust", toml_edit::value(trust));
            let mut support = toml_edit::InlineTable::new();
            for pair in &entry.support {
                let (cap, level) = pair.split_once('=').ok_or_else(|| {
                    format!(
                        "--support `{}`: expected CAPABILITY=SUPPORT",
                        craik_contracts::one_line(pair)
                    )
                })?;
                support.insert(cap, level.into());
            }
            caps.insert("support", toml_edit::value(support));
            t.insert("capabilities", toml_edit::Item::Table(caps));
        }
        None if !entry.support.is_empty() => {
            return Err("--support needs --trust (an inline matrix)".into());
        }
        None => {}
    }
    runners.insert(&entry.id, toml_edit::Item::Table(t));
    Ok(doc.to_string())
}

/// `text` without runner `id`; `None` when it has no such runner.
pub fn remove_from_text(text: &str, id: &str) -> Result<Option<String>, String> {
    let mut doc = parse(text)?;
    let removed = doc
        .get_mut("runner")
        .and_then(toml_edit::Item::as_table_mut)
        .and_then(|t| t.remove(id))
        .is_some();
    Ok(removed.then(|| doc.to_string()))
}
