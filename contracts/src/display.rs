//! Rendering user-supplied text inside one-line diagnostics.
//!
//! Every message that quotes input goes through here, so a hostile value can neither break the
//! one-line-per-problem rule (newlines, control characters, terminal escapes) nor flood the
//! terminal (length cap).

use std::fmt;

/// Longest quoted value, in characters, before it is cut with `…`.
pub(crate) const MAX_QUOTED_CHARS: usize = 80;

/// Displays a string with control characters escaped and its length capped.
#[derive(Debug, Clone, Copy)]
pub struct Truncated<'a>(pub &'a str);

impl fmt::Display for Truncated<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut chars = self.0.chars();
        for c in chars.by_ref().take(MAX_QUOTED_CHARS) {
            write_escaped(f, c)?;
        }
        if chars.next().is_some() {
            f.write_str("…")?;
        }
        Ok(())
    }
}

/// Escapes control characters (including newlines and ESC) in a whole message, keeping it on
/// one line; does not truncate.
pub fn one_line(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for c in message.chars() {
        // Writing to a String cannot fail.
        let _ = write_escaped(&mut out, c);
    }
    out
}

fn write_escaped(w: &mut impl fmt::Write, c: char) -> fmt::Result {
    match c {
        '\n' => w.write_str("\\n"),
        '\r' => w.write_str("\\r"),
        '\t' => w.write_str("\\t"),
        c if c.is_control() || is_bidi_control(c) => write!(w, "\\u{{{:x}}}", u32::from(c)),
        c => w.write_char(c),
    }
}

/// Bidirectional overrides can make a diagnostic read differently from what it says.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_and_caps_length() {
        assert_eq!(one_line("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
        assert_eq!(one_line("x\u{202e}y"), "x\\u{202e}y");
        let long = "é".repeat(100);
        let shown = Truncated(&long).to_string();
        assert_eq!(shown.chars().count(), MAX_QUOTED_CHARS + 1);
        assert!(shown.ends_with('…'));
        assert_eq!(Truncated("short").to_string(), "short");
    }
}
