//! `craik keys generate|show|rotate`: the receipt signing key on disk (`craik_host::keys`).

use std::path::Path;

use craik_kernel::key_id_of;
use serde::Serialize;

pub(crate) use craik_host::keys::{
    create_pair, default_public, fingerprint, read_public, read_signer,
};

use crate::exit::{Exit, Failure};
use crate::output::{Format, Out};

#[derive(Serialize)]
struct Shown {
    key_id: String,
    fingerprint: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    private_key: Option<String>,
    public_key: String,
}

pub(crate) fn generate(out: &mut Out, format: Format, dir: &Path) -> Result<Exit, Failure> {
    let (private, public, public_bytes) = create_pair(dir)?;
    let shown = Shown {
        key_id: key_id_of(&public_bytes),
        fingerprint: fingerprint(&public_bytes),
        private_key: Some(private.display().to_string()),
        public_key: public.display().to_string(),
    };
    match format {
        Format::Human => {
            out.line(format_args!(
                "private key {} (mode 0600)",
                private.display()
            ))?;
            out.line(format_args!("public key  {}", public.display()))?;
            out.line(format_args!("key id      {}", shown.key_id))?;
            out.line(format_args!("fingerprint {}", shown.fingerprint))?;
        }
        Format::Json | Format::Junit => out.json(&shown)?,
    }
    Ok(Exit::Ok)
}

pub(crate) fn show(out: &mut Out, format: Format, file: &Path) -> Result<Exit, Failure> {
    let public = read_public(file)?;
    let shown = Shown {
        key_id: key_id_of(&public),
        fingerprint: fingerprint(&public),
        private_key: None,
        public_key: file.display().to_string(),
    };
    match format {
        Format::Human => {
            out.line(format_args!("key id      {}", shown.key_id))?;
            out.line(format_args!("fingerprint {}", shown.fingerprint))?;
        }
        Format::Json | Format::Junit => out.json(&shown)?,
    }
    Ok(Exit::Ok)
}

/// `craik keys rotate`: a new signing key for the home, the hand-over recorded in its ledger.
pub(crate) fn rotate(
    out: &mut Out,
    format: Format,
    home: &Path,
    (by, reason): (&str, &str),
) -> Result<Exit, Failure> {
    let home = craik_host::run::store::Home::new(home);
    let done = craik_host::ledger::rotate(&home, by, reason, time::OffsetDateTime::now_utc())?;
    match format {
        Format::Human => {
            if done.resumed {
                out.line(format_args!("finished an interrupted rotation"))?;
            }
            out.line(format_args!(
                "retired   {} (public key kept: {})",
                done.retired,
                done.retired_public.display()
            ))?;
            out.line(format_args!("now signs {}", done.key))?;
            out.line(format_args!(
                "recorded in {} (the hand-over signed by the retired key)",
                home.root.join(craik_host::ledger::LEDGER_NAME).display()
            ))?;
        }
        Format::Json | Format::Junit => out.json(&done)?,
    }
    Ok(Exit::Ok)
}
