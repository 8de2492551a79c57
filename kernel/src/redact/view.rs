//! A second reading of (canonical) text for the secret rules, in which what only spells a
//! token differently is undone, with every byte of it traced back to the text: a finding in
//! the view is replaced in the text itself, over exactly the bytes that spelled it. It reads;
//! it never decides what is a secret (`rules.rs`) nor replaces it (`redact.rs`).
//!
//! Undone in the view (each a unit of the text read as one character):
//! - a run of tabs between two non-whitespace characters (a tab pushed into a token) is left
//!   out; the text itself is also scanned, so `Bearer\tTOKEN` still reads as two words;
//! - a JSON escape of a printable ASCII character (`\u005f`, `\/`); an escaped backslash
//!   (`\\u005f`) is not an escape;
//! - an HTML character reference to a printable ASCII character: decimal `&#95;`, hex
//!   `&#x5f;`, and the named `&lowbar; &period; &sol; &plus; &equals; &colon; &amp; &quot;
//!   &apos;`;
//! - a Cyrillic or Greek letter that looks like a Latin one (`р` for `p`), when an ASCII letter
//!   or digit is next to it: one look-alike in an ASCII token; words of those scripts are
//!   left alone.
//!
//! Not undone (written down in SECURITY.md): a token split by a space or a line break (two
//! visible pieces; joining lines would join unrelated words everywhere), look-alikes beyond
//! the table here (the full Unicode confusables skeleton), fullwidth forms, `&#` references
//! without `;`, percent-, base64- or hex-encoding (the rules' own business, see `rules.rs`).

use std::ops::Range;

/// One unit of the text read differently in the view.
#[derive(Debug, Clone, Copy)]
struct Edit {
    /// Where its reading starts in the view.
    view: usize,
    /// How many bytes it reads as in the view (0 or 1: one ASCII character).
    view_len: usize,
}

/// The view of a text, and how to trace a view span back to it.
#[derive(Debug)]
pub(crate) struct View {
    pub(crate) text: String,
    edits: Vec<Edit>,
    /// `shift[k]`: bytes the first `k` edits take in the text beyond what they read as.
    shift: Vec<usize>,
}

/// The named HTML references read here, and the character each stands for.
const NAMED: [(&str, char); 9] = [
    ("lowbar", '_'),
    ("period", '.'),
    ("sol", '/'),
    ("plus", '+'),
    ("equals", '='),
    ("colon", ':'),
    ("amp", '&'),
    ("quot", '"'),
    ("apos", '\''),
];

/// Cyrillic and Greek letters drawn like a Latin letter in common fonts.
const LOOK_ALIKES: [(char, char); 44] = [
    ('а', 'a'),
    ('е', 'e'),
    ('о', 'o'),
    ('р', 'p'),
    ('с', 'c'),
    ('у', 'y'),
    ('х', 'x'),
    ('і', 'i'),
    ('ј', 'j'),
    ('ѕ', 's'),
    ('һ', 'h'),
    ('ԁ', 'd'),
    ('ԛ', 'q'),
    ('ԝ', 'w'),
    ('А', 'A'),
    ('В', 'B'),
    ('Е', 'E'),
    ('К', 'K'),
    ('М', 'M'),
    ('Н', 'H'),
    ('О', 'O'),
    ('Р', 'P'),
    ('С', 'C'),
    ('Т', 'T'),
    ('Х', 'X'),
    ('І', 'I'),
    ('Ј', 'J'),
    ('Ѕ', 'S'),
    ('Α', 'A'),
    ('Β', 'B'),
    ('Ε', 'E'),
    ('Ζ', 'Z'),
    ('Η', 'H'),
    ('Ι', 'I'),
    ('Κ', 'K'),
    ('Μ', 'M'),
    ('Ν', 'N'),
    ('Ο', 'O'),
    ('Ρ', 'P'),
    ('Τ', 'T'),
    ('Υ', 'Y'),
    ('Χ', 'X'),
    ('ο', 'o'),
    ('ν', 'v'),
];

/// An ASCII letter, digit, `_` or `-`: what tokens are made of.
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn look_alike(c: char) -> Option<char> {
    LOOK_ALIKES.iter().find(|(l, _)| *l == c).map(|(_, a)| *a)
}

/// How far a look-alike letter looks past the look-alikes around it for ASCII token text
/// (longer runs of look-alikes are a word of their script, and the walk stays linear).
const LOOK_ALIKE_RUN: usize = 64;

/// The next byte at or after `from` that can start a unit: a tab, a backslash, an `&`, or
/// (in non-ASCII text) the lead byte of a Greek or Cyrillic letter (0xCE..=0xD4).
fn next_candidate(bytes: &[u8], from: usize, ascii: bool) -> Option<usize> {
    let rest = bytes.get(from..)?;
    let at = if ascii {
        memchr::memchr3(b'\t', b'\\', b'&', rest)?
    } else {
        rest.iter()
            .position(|b| matches!(b, b'\t' | b'\\' | b'&' | 0xCE..=0xD4))?
    };
    Some(from + at)
}

/// The unit starting at byte `at` (a char boundary) of `text`, if one does: how many bytes
/// it is, and what it reads as (`None`: left out).
fn unit(text: &str, at: usize) -> Option<(usize, Option<char>)> {
    let (before, rest) = (text.get(..at)?, text.get(at..)?);
    let c = rest.chars().next()?;
    match c {
        '\t' => {
            let run = rest.bytes().take_while(|b| *b == b'\t').count();
            let next = rest.get(run..).and_then(|r| r.chars().next());
            let glued = before
                .chars()
                .next_back()
                .is_some_and(|p| !p.is_whitespace())
                && next.is_some_and(|n| !n.is_whitespace());
            glued.then_some((run, None))
        }
        '\\' => json_escape(rest).map(|(len, ch)| (len, Some(ch))),
        '&' => html_reference(rest).map(|(len, ch)| (len, Some(ch))),
        c => {
            let ascii = look_alike(c)?;
            // Past the look-alikes around it: ASCII token text on either side.
            let outside = |n: &char| look_alike(*n).is_none();
            let left = before.chars().rev().take(LOOK_ALIKE_RUN).find(outside);
            let right = rest.chars().skip(1).take(LOOK_ALIKE_RUN).find(outside);
            [left, right]
                .iter()
                .flatten()
                .any(|n| is_token_char(*n))
                .then_some((c.len_utf8(), Some(ascii)))
        }
    }
}

impl View {
    /// The view of `text`; `None` when it would be `text` itself. Costs a `memchr` scan of
    /// ASCII text in which no tab, backslash or `&` starts a unit.
    pub(crate) fn of(text: &str) -> Option<View> {
        let bytes = text.as_bytes();
        let ascii = text.is_ascii();
        let mut units: Vec<(usize, usize, Option<char>)> = Vec::new();
        let mut from = 0;
        while let Some(at) = next_candidate(bytes, from, ascii) {
            match unit(text, at) {
                Some((len, read)) => {
                    units.push((at, len, read));
                    from = at + len;
                }
                // `\\`: an escaped backslash; the second starts no escape.
                None if bytes.get(at..at + 2) == Some(b"\\\\") => from = at + 2,
                None => from = at + 1,
            }
        }
        if units.is_empty() {
            return None;
        }
        let mut view = String::with_capacity(text.len());
        let mut edits = Vec::with_capacity(units.len());
        let mut shift = Vec::with_capacity(units.len() + 1);
        shift.push(0);
        let mut total = 0;
        let mut copied = 0;
        for (at, len, read) in units {
            view.push_str(text.get(copied..at)?);
            edits.push(Edit {
                view: view.len(),
                view_len: read.map_or(0, char::len_utf8),
            });
            if let Some(r) = read {
                view.push(r);
            }
            total += len - read.map_or(0, char::len_utf8);
            shift.push(total);
            copied = at + len;
        }
        view.push_str(text.get(copied..)?);
        Some(View {
            text: view,
            edits,
            shift,
        })
    }

    /// The bytes of the text that spell view span `span`: every unit read inside it, whole.
    pub(crate) fn original(&self, span: &Range<usize>) -> Range<usize> {
        // Start: the units ending at or before it (a left-out tab run just before it too).
        let k = self
            .edits
            .partition_point(|e| e.view + e.view_len <= span.start);
        let start = span.start + self.shift.get(k).copied().unwrap_or(0);
        // End: the units ending at or before it, but not a left-out tab run just after it.
        let mut k = self
            .edits
            .partition_point(|e| e.view + e.view_len <= span.end);
        while k > 0
            && self
                .edits
                .get(k - 1)
                .is_some_and(|e| e.view_len == 0 && e.view == span.end)
        {
            k -= 1;
        }
        let end = span.end + self.shift.get(k).copied().unwrap_or(0);
        start..end
    }
}

/// A JSON escape of a printable ASCII character at the start of `s`: its length and character.
fn json_escape(s: &str) -> Option<(usize, char)> {
    let b = s.as_bytes();
    match b.get(1)? {
        b'/' => Some((2, '/')),
        b'u' => {
            let hex = s.get(2..6)?;
            let ch = char::from_u32(u32::from_str_radix(hex, 16).ok()?)?;
            (hex.bytes().all(|b| b.is_ascii_hexdigit()) && ch.is_ascii_graphic()).then_some((6, ch))
        }
        _ => None,
    }
}

/// An HTML character reference to a printable ASCII character at the start of `s`.
fn html_reference(s: &str) -> Option<(usize, char)> {
    let end = s.bytes().take(12).position(|b| b == b';')?;
    let body = s.get(1..end)?;
    let ch = if let Some(num) = body.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                u32::from_str_radix(hex, 16).ok()?
            }
            None if !num.is_empty() && num.bytes().all(|b| b.is_ascii_digit()) => {
                num.parse().ok()?
            }
            _ => return None,
        };
        char::from_u32(code)?
    } else {
        NAMED.iter().find(|(n, _)| *n == body).map(|(_, c)| *c)?
    };
    ch.is_ascii_graphic().then_some((end + 1, ch))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traced(text: &str, find: &str) -> String {
        let v = View::of(text).unwrap();
        let at = v.text.find(find).unwrap();
        text[v.original(&(at..at + find.len()))].to_owned()
    }

    #[test]
    fn plain_text_has_no_view() {
        assert!(View::of("nothing to read twice: a \\n b & c \tat the start\t").is_none());
        assert!(View::of("Привет, мир").is_none());
    }

    #[test]
    fn spans_trace_back_to_every_byte_that_spelled_them() {
        let t = "x=AKIA\t\tUJZ\tD end\tnext";
        assert_eq!(View::of(t).unwrap().text, "x=AKIAUJZD endnext");
        assert_eq!(traced(t, "AKIAUJZD"), "AKIA\t\tUJZ\tD");
        assert_eq!(traced(t, "UJZ"), "UJZ");
        let t = r#"{"k":"sk\u002dant\u005fx\/y \\u005f"}"#;
        assert_eq!(View::of(t).unwrap().text, r#"{"k":"sk-ant_x/y \\u005f"}"#);
        assert_eq!(traced(t, "sk-ant_x/"), r"sk\u002dant\u005fx\/");
        assert_eq!(traced(t, "-ant"), r"\u002dant");
        let t = "ghp&#95;abc&#x2D;d&lowbar;e &notareference; &#0; &#128512;";
        assert_eq!(
            View::of(t).unwrap().text,
            "ghp_abc-d_e &notareference; &#0; &#128512;"
        );
        assert_eq!(traced(t, "_abc-d_"), "&#95;abc&#x2D;d&lowbar;");
        let t = "sk-рroj-abc Привет github_раt_x ОК";
        assert_eq!(
            View::of(t).unwrap().text,
            "sk-proj-abc Привет github_pat_x ОК"
        );
        assert_eq!(traced(t, "proj"), "рroj");
        assert_eq!(traced(t, "_pat_"), "_раt_");
    }
}
