//! The canonical form of text that leaves Craik, made before its secrets are looked for: what
//! a terminal or a model reads, with nothing invisible left in it. It removes; it never finds
//! secrets (`rules.rs`) nor replaces them (`redact.rs`).
//!
//! Kept: every printable character, `\n` and `\t`. Everything else is an allow-list miss:
//! - ANSI/VT escape sequences (ESC or C1 introduced): CSI (`ESC [` … final byte), OSC, DCS,
//!   SOS, PM and APC strings (to BEL, ST or the end of the line), and every other `ESC`
//!   sequence (intermediates, then one final byte) are removed whole;
//! - a backspace removes the character before it on its line, as a terminal's overstrike
//!   shows it (`_\bX` reads `X`; `AKIA\bQ` cannot hide a `Q` from the rules);
//! - a carriage return becomes a line break (`\r\n` one line break): what it overwrote on a
//!   terminal stays readable as a line of its own;
//! - every other control character (C0, DEL, C1) is removed;
//! - Unicode format characters (general category Cf: zero-width space and joiners, bidi
//!   controls and isolates, soft hyphen, BOM, tags) and the other default-ignorable code
//!   points (variation selectors, Hangul fillers, combining grapheme joiner) are removed:
//!   they draw nothing, so a token they split is read whole, and bidi controls shown to a
//!   person can reorder what is displayed.
//!
//! The removed sets are Unicode properties taken from `regex-syntax`'s tables (the same
//! Unicode version the rules match with), not a hand-kept list.
//!
//! What this costs a reader: colours, hyperlink targets of OSC 8 links, zero-width joins in
//! emoji sequences and some scripts (ZWJ/ZWNJ). Nothing a reader needs to follow a run.

use std::borrow::Cow;
use std::sync::OnceLock;

use regex_syntax::hir::{Class, HirKind};

const ESC: char = '\u{1b}';
const BEL: char = '\u{7}';
const BS: char = '\u{8}';
/// C1 introducers: CSI, and the string controls OSC, DCS, SOS, PM, APC; ST ends a string.
const C1_CSI: char = '\u{9b}';
const C1_STRINGS: [char; 5] = ['\u{9d}', '\u{90}', '\u{98}', '\u{9e}', '\u{9f}'];
const C1_ST: char = '\u{9c}';

/// The code points removed outright: controls (Cc) but `\n` and `\t` (and `\r`, backspace,
/// ESC and the C1 introducers, which are parsed first), format characters (Cf), and the
/// other default-ignorable code points. Sorted, disjoint; `None` if the tables could not be
/// built (the caller fails closed).
fn invisible() -> Option<&'static [(char, char)]> {
    static TABLE: OnceLock<Option<Vec<(char, char)>>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            let hir = regex_syntax::ParserBuilder::new()
                .build()
                .parse(r"[[\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}]--[\n\t]]")
                .ok()?;
            match hir.kind() {
                HirKind::Class(Class::Unicode(c)) => {
                    Some(c.ranges().iter().map(|r| (r.start(), r.end())).collect())
                }
                _ => None,
            }
        })
        .as_deref()
}

fn is_invisible(table: &[(char, char)], c: char) -> bool {
    let i = table.partition_point(|&(_, end)| end < c);
    table.get(i).is_some_and(|&(start, _)| start <= c)
}

/// `text` in canonical form, and how many sequences or characters were removed or changed
/// (0: `text` itself, borrowed). `None` if the Unicode tables could not be built.
pub(crate) fn canonical(text: &str) -> Option<(Cow<'_, str>, usize)> {
    // Fast path: printable ASCII, `\n` and `\t` only. Most text is this; it costs one scan,
    // in chunks without an early exit so that it vectorises (~20× faster than `all`).
    if text.as_bytes().chunks(64).all(|chunk| {
        !chunk.iter().fold(false, |odd, &b| {
            odd | ((b < 0x20) & (b != b'\n') & (b != b'\t')) | (b >= 0x7f)
        })
    }) {
        return Some((Cow::Borrowed(text), 0));
    }
    let table = invisible()?;
    if !text.contains([ESC, BS, '\r', C1_CSI]) && !text.chars().any(|c| is_invisible(table, c)) {
        return Some((Cow::Borrowed(text), 0));
    }
    let mut out = String::with_capacity(text.len());
    let mut changed = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ESC => {
                changed += 1;
                match chars.peek() {
                    Some('[') => {
                        chars.next();
                        skip_csi(&mut chars);
                    }
                    Some(']' | 'P' | 'X' | '^' | '_') => {
                        chars.next();
                        skip_string(&mut chars);
                    }
                    Some(&n) if ('\u{20}'..='\u{2f}').contains(&n) => {
                        // nF: intermediates, then one final byte.
                        while chars
                            .next_if(|c| ('\u{20}'..='\u{2f}').contains(c))
                            .is_some()
                        {}
                        chars.next_if(|c| ('\u{30}'..='\u{7e}').contains(c));
                    }
                    Some(&n) if ('\u{30}'..='\u{7e}').contains(&n) => {
                        // Fp, Fe, Fs: one final byte (`ESC 7`, `ESC M`, `ESC =`).
                        chars.next();
                    }
                    // A lone ESC: removed alone.
                    _ => {}
                }
            }
            C1_CSI => {
                changed += 1;
                skip_csi(&mut chars);
            }
            c if C1_STRINGS.contains(&c) => {
                changed += 1;
                skip_string(&mut chars);
            }
            BS => {
                changed += 1;
                if out.chars().next_back().is_some_and(|p| p != '\n') {
                    out.pop();
                }
            }
            '\r' => {
                changed += 1;
                if chars.peek() != Some(&'\n') {
                    out.push('\n');
                }
            }
            c if is_invisible(table, c) => changed += 1,
            c => out.push(c),
        }
    }
    Some((Cow::Owned(out), changed))
}

/// The rest of a CSI sequence: parameter bytes, intermediate bytes, one final byte. A byte
/// outside those ends it (and is kept).
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while chars
        .next_if(|c| ('\u{30}'..='\u{3f}').contains(c))
        .is_some()
    {}
    while chars
        .next_if(|c| ('\u{20}'..='\u{2f}').contains(c))
        .is_some()
    {}
    chars.next_if(|c| ('\u{40}'..='\u{7e}').contains(c));
}

/// The rest of an OSC/DCS/SOS/PM/APC string, through its terminator (BEL, `ESC \` or C1 ST).
/// A line break ends it too and is kept: a stray introducer hides at most the rest of its
/// line, as it would on a terminal until the next output.
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next_if(|c| *c != '\n') {
        match c {
            BEL | C1_ST => return,
            ESC => {
                chars.next_if_eq(&'\\');
                return;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        canonical(s).unwrap().0.into_owned()
    }

    #[test]
    fn plain_text_is_borrowed() {
        let s = "ok\tfine\nnext line é 😀 Привет";
        let (c, n) = canonical(s).unwrap();
        assert!(matches!(c, Cow::Borrowed(_)));
        assert_eq!(n, 0);
    }

    #[test]
    fn escapes_controls_and_format_characters_go() {
        assert_eq!(canon("AKIA\x1b[m\x1b[KUJZ\x1b[01;31mX\x1b[0m"), "AKIAUJZX");
        assert_eq!(canon("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x07b"), "alinkb");
        assert_eq!(canon("a\x1b]0;title\nb"), "a\nb");
        assert_eq!(canon("a\x1b(Bb\x1b7c\x1bMd\x1b"), "abcd");
        assert_eq!(canon("a\u{9b}31mb\u{9d}x\u{9c}c"), "abc");
        assert_eq!(canon("a\0b\u{7f}c\u{85}d\u{1}e"), "abcde");
        assert_eq!(
            canon("a\u{200b}b\u{ad}c\u{feff}d\u{202e}e\u{2066}f\u{e0041}g\u{fe0f}h\u{3164}i"),
            "abcdefghi"
        );
        assert_eq!(canon("AKIAQ\u{8}U_\u{8}X\n\u{8}y"), "AKIAUX\ny");
        assert_eq!(canon("one\r\ntwo\rthree"), "one\ntwo\nthree");
        assert_eq!(canon("tab\tkept\n"), "tab\tkept\n");
    }
}
