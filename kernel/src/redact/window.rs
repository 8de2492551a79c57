//! Where a rule without a literal prefix can match, so that its pattern is run over windows of
//! the text instead of all of it: the literals one of which every match must hold (its
//! *anchor*), and how far a match can reach on either side of one. It narrows where a rule is
//! run; it never decides what is a secret (`rules.rs`) nor replaces it (`redact.rs`).
//!
//! Why: a pattern like gitleaks' `generic-api-key` (`[\w.-]{0,50}?(?:access|auth|...|token)…`)
//! gives the search engine no literal to skip ahead with, so it steps through every byte of
//! the text (about 2 ms per MiB each); most texts hold a few dozen places where such a rule
//! could match at all.
//!
//! How, and why it finds exactly what a scan of the whole text finds:
//! - The pattern is read as a sequence of elements (its top-level concatenation; capture
//!   groups only name parts and are looked through). One part of it — an element, or a run
//!   of elements of one character each, like the five of `(?i)token` — is the anchor: it
//!   has a finite set of prefix literals of at least [`MIN_LITERAL`] bytes (`regex-syntax`'s
//!   extractor), so every match of the part starts with one of them, and every match of the
//!   pattern holds one where the part starts. When the literals are exact (the part is an
//!   alternation of words), a match of the part *is* one of the literals found there.
//! - The literals are looked for ASCII-case-insensitively (`literals.rs`). Before extraction,
//!   a class whose every character is one ASCII letter in some case (what `(?i)` makes of a
//!   letter) is read as that letter in lower case, so `(?i)token` has one literal, not 48.
//!   That reading misses two characters: Unicode's `(?i)` also folds `ſ` (U+017F) into `s`
//!   and `K` (Kelvin sign, U+212A) into `k`, which an ASCII-case-insensitive search does not.
//!   [`FOLD_HAZARDS`] are looked for in the same pass; a text holding either is scanned
//!   whole by every rule (`rules.rs`), as before windows existed.
//! - Around an occurrence at `p`, a match starts no earlier than the elements before the
//!   anchor can reach backwards from `p`, and ends no later than the elements from the
//!   anchor on can reach forwards. An element's match is no longer than its maximum length
//!   (in bytes, when it has one) and is made of the characters it can match only, so it ends
//!   before the first other character: it reaches the nearer of the two. Each element starts
//!   where the one before it ends, at or before the bound found for it, and both bounds are
//!   monotone in where the element starts, so the steps together bound the whole match.
//! - Going forwards, the earliest place each element can start is kept too: an element that
//!   matches at least `min` bytes needs `min` of its characters in a row starting between
//!   the earliest and the latest place. Where none are, no match holds this occurrence, and
//!   it gets no window; nor does one shorter than the pattern's shortest match.
//! - The bounds grow with `p`, so each run of characters is walked about once for all the
//!   occurrences (the cost is about linear in the text).
//! - The windows are merged (those less than [`COALESCE`] bytes apart too: the text between
//!   them holds no match, so searching it changes nothing), and the rule's leftmost-first
//!   search runs in each of them over the whole text (`regex_automata`'s `Input::span`:
//!   look-around assertions like `\b`, `$` and `\z` see the text on both sides of a window,
//!   as in a scan of the whole text). Every match lies inside one window; the search in a
//!   window finds the leftmost match starting at or after where it starts, and no match can
//!   start between windows, so the windows' matches, in order, are the whole scan's matches:
//!   the same starts, and the same ends, since a window holds every match its leftmost start
//!   has (a leftmost-first engine picks among the same candidates). Matches are never empty
//!   (the anchor's literals are not), so the iterators' empty-match rules never apply.
//!
//! The oracle is the full scan itself: `rules.rs` tests compare both on generated texts.

use std::ops::Range;

use regex_syntax::hir::literal::Extractor;
use regex_syntax::hir::{Class, ClassBytes, ClassUnicode, Hir, HirKind};

/// An anchor's literals are at least this long (bytes): shorter ones occur nearly everywhere.
pub(crate) const MIN_LITERAL: usize = 3;

/// Characters that Unicode's case-insensitive matching reads as an ASCII letter and that an
/// ASCII-case-insensitive literal search does not find (module docs). A test checks this
/// list against `regex-syntax`'s case folding tables.
pub(crate) const FOLD_HAZARDS: [&str; 2] = ["\u{17F}", "\u{212A}"];

/// The characters one element's matches are made of.
#[derive(Debug, Clone)]
struct CharSet {
    ascii: [bool; 128],
    /// Non-ASCII ranges (inclusive).
    other: Vec<(char, char)>,
}

impl CharSet {
    fn empty() -> CharSet {
        CharSet {
            ascii: [false; 128],
            other: Vec::new(),
        }
    }

    /// Whether the character at byte `at` (a char boundary) is in the set, and its length;
    /// `None` at the end of the text.
    fn at(&self, text: &str, at: usize) -> Option<(bool, usize)> {
        let b = *text.as_bytes().get(at)?;
        if b.is_ascii() {
            return Some((self.ascii.get(usize::from(b)).copied().unwrap_or(false), 1));
        }
        let c = text.get(at..)?.chars().next()?;
        Some((self.contains(c), c.len_utf8()))
    }

    /// The same for the character that ends at byte `at`; `None` at the start of the text.
    fn before(&self, text: &str, at: usize) -> Option<(bool, usize)> {
        let b = *text.as_bytes().get(at.checked_sub(1)?)?;
        if b.is_ascii() {
            return Some((self.ascii.get(usize::from(b)).copied().unwrap_or(false), 1));
        }
        let c = text.get(..at)?.chars().next_back()?;
        Some((self.contains(c), c.len_utf8()))
    }

    fn contains(&self, c: char) -> bool {
        match self.ascii.get(c as usize) {
            Some(a) => *a,
            None => self.other.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)),
        }
    }

    fn add_range(&mut self, lo: char, hi: char) {
        for b in (lo as u32)..=(hi as u32).min(127) {
            if let Some(a) = self.ascii.get_mut(b as usize) {
                *a = true;
            }
        }
        if (hi as u32) > 127 {
            self.other.push((lo.max('\u{80}'), hi));
        }
    }

    /// Adds every character a match of `hir` can hold; `None` if that cannot be said in
    /// characters (a byte class reaching past ASCII).
    fn add(&mut self, hir: &Hir) -> Option<()> {
        match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => {}
            HirKind::Literal(lit) => {
                for c in std::str::from_utf8(&lit.0).ok()?.chars() {
                    self.add_range(c, c);
                }
            }
            HirKind::Class(Class::Unicode(class)) => {
                for r in class.ranges() {
                    self.add_range(r.start(), r.end());
                }
            }
            HirKind::Class(Class::Bytes(class)) => {
                for r in class.ranges() {
                    if r.end() > 0x7f {
                        return None;
                    }
                    self.add_range(char::from(r.start()), char::from(r.end()));
                }
            }
            HirKind::Repetition(rep) => self.add(&rep.sub)?,
            HirKind::Capture(cap) => self.add(&cap.sub)?,
            HirKind::Concat(subs) | HirKind::Alternation(subs) => {
                for s in subs {
                    self.add(s)?;
                }
            }
        }
        Some(())
    }
}

/// How far one element's match reaches from where it starts (or, before the anchor, back
/// from where it ends): no further than its maximum length, and no further than the run of
/// the characters it is made of. At least one of the two is known.
#[derive(Debug, Clone)]
struct Reach {
    /// At most this many bytes.
    bytes: Option<usize>,
    /// To the end of the run of these characters.
    run: Option<CharSet>,
    /// At least this many bytes.
    min: usize,
}

/// Where a rule's matches can be: its anchor's literals and the reach of its elements.
// INVARIANT: windows are asked for only for texts without a fold hazard (`rules.rs`).
#[derive(Debug, Clone)]
pub(crate) struct Anchor {
    /// ASCII-lowercased; every match holds one (read ASCII-case-insensitively, in a text
    /// without [`FOLD_HAZARDS`]) where its anchor element starts.
    pub(crate) literals: Vec<Vec<u8>>,
    /// The elements before the anchor part, nearest first.
    before: Vec<Reach>,
    /// The anchor part and the elements after it; only those after it when `exact`.
    after: Vec<Reach>,
    /// The literals are all the anchor part can match (`(?:token|secret)`, `(?i)adafruit`),
    /// not only how its matches start: a match of the part is one of the literals found
    /// where it starts.
    exact: bool,
    /// The pattern's shortest match (bytes): a window shorter than this holds none.
    min_len: usize,
}

/// Windows this close (bytes) are searched as one: a search costs about as much to start as
/// to step through this many bytes. The text between them is searched too, which finds
/// nothing more (every match is inside a window) and changes no match.
const COALESCE: usize = 48;

/// The anchor of the pattern whose syntax is `hir`, if it has one (module docs); `None`
/// leaves the rule scanned over the whole text.
pub(crate) fn anchor(hir: &Hir) -> Option<Anchor> {
    let mut elements = Vec::new();
    flatten(hir, &mut elements);
    let folded: Vec<Hir> = elements.iter().map(|e| fold(e)).collect();
    // Where the literals start, and which: the candidate with the longest shortest literal,
    // then the fewest literals. Candidates are first the pattern's parts — a run of elements
    // that are one character each once folded (`(?i)token` is five such elements), or one
    // other element (an alternation) —, else (a literal that only a longer stretch makes
    // long enough) the pattern's rest from an element on.
    let is_char = |i: usize| {
        folded
            .get(i)
            .is_some_and(|h| matches!(h.kind(), HirKind::Literal(_)))
    };
    let mut parts = Vec::new();
    let mut i = 0;
    while i < folded.len() {
        let mut j = i + 1;
        if is_char(i) {
            while is_char(j) {
                j += 1;
            }
        }
        parts.push(i..j);
        i = j;
    }
    let rests = (0..folded.len()).map(|i| i..folded.len()).collect();
    let mut best: Option<(Range<usize>, Vec<Vec<u8>>, bool)> = None;
    for candidates in [parts, rests] {
        for range in candidates {
            let Some((lits, exact)) = folded
                .get(range.clone())
                .and_then(|part| literals(&Hir::concat(part.to_vec())))
            else {
                continue;
            };
            let shortest = lits.iter().map(Vec::len).min().unwrap_or(0);
            let better = best.as_ref().is_none_or(|(_, b, _)| {
                let b_shortest = b.iter().map(Vec::len).min().unwrap_or(0);
                (shortest, std::cmp::Reverse(lits.len())) > (b_shortest, std::cmp::Reverse(b.len()))
            });
            if better {
                best = Some((range, lits, exact));
            }
        }
        if best.is_some() {
            break;
        }
    }
    let (range, literals, exact) = best?;
    let at = range.start;
    // Exact literals are all the anchor part can match: the walk forwards starts where the
    // literal found ends, with the elements after the part.
    let from = if exact { range.end } else { at };
    let reach = |e: &&Hir| -> Option<Reach> {
        let bytes = e.properties().maximum_len();
        let min = e.properties().minimum_len().unwrap_or(0);
        let mut set = CharSet::empty();
        let run = set.add(e).map(|()| set);
        (bytes.is_some() || run.is_some()).then_some(Reach { bytes, run, min })
    };
    let before = elements
        .get(..at)?
        .iter()
        .rev()
        .map(reach)
        .collect::<Option<Vec<_>>>()?;
    let after = elements
        .get(from..)?
        .iter()
        .map(reach)
        .collect::<Option<Vec<_>>>()?;
    Some(Anchor {
        literals,
        before,
        after,
        exact,
        min_len: hir.properties().minimum_len().unwrap_or(0),
    })
}

/// The pattern's top-level concatenation, capture groups looked through.
fn flatten<'h>(hir: &'h Hir, out: &mut Vec<&'h Hir>) {
    match hir.kind() {
        HirKind::Concat(subs) => {
            for s in subs {
                flatten(s, out);
            }
        }
        HirKind::Capture(cap) => flatten(&cap.sub, out),
        _ => out.push(hir),
    }
}

/// The prefix literals of `folded` (a folded pattern), ASCII-lowercased and deduplicated,
/// when they are a finite set of literals of at least [`MIN_LITERAL`] bytes; and whether they
/// are exact (every match of `folded` is one of them, not only starts with one).
fn literals(folded: &Hir) -> Option<(Vec<Vec<u8>>, bool)> {
    let seq = Extractor::new().extract(folded);
    let exact = seq.is_exact();
    let mut lits: Vec<Vec<u8>> = seq
        .literals()?
        .iter()
        .map(|l| l.as_bytes().to_ascii_lowercase())
        .collect();
    if lits.is_empty() || lits.iter().any(|l| l.len() < MIN_LITERAL) {
        return None;
    }
    lits.sort();
    lits.dedup();
    Some((lits, exact))
}

/// `hir` with every class whose characters are all one ASCII letter in some case (and
/// `ſ`/`K`, which `(?i)` adds to `s`/`k`) replaced by that letter in lower case.
fn fold(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Class(Class::Unicode(class)) => {
            folded_letter_unicode(class).map_or_else(|| hir.clone(), |b| Hir::literal([b]))
        }
        HirKind::Class(Class::Bytes(class)) => {
            folded_letter_bytes(class).map_or_else(|| hir.clone(), |b| Hir::literal([b]))
        }
        HirKind::Repetition(rep) => {
            let mut rep = rep.clone();
            rep.sub = Box::new(fold(&rep.sub));
            Hir::repetition(rep)
        }
        HirKind::Capture(cap) => {
            let mut cap = cap.clone();
            cap.sub = Box::new(fold(&cap.sub));
            Hir::capture(cap)
        }
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(fold).collect()),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(fold).collect()),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Look(_) => hir.clone(),
    }
}

/// The ASCII letter (lower case) every character of `class` is a case of, if there is one.
fn folded_letter_unicode(class: &ClassUnicode) -> Option<u8> {
    let mut letter = None;
    let mut count = 0u32;
    for r in class.ranges() {
        count += u32::from(r.end()) - u32::from(r.start()) + 1;
        if count > 4 {
            return None;
        }
        for c in r.start()..=r.end() {
            let l = match c {
                '\u{17F}' => b's',
                '\u{212A}' => b'k',
                c if c.is_ascii_alphabetic() => c.to_ascii_lowercase() as u8,
                _ => return None,
            };
            if letter.is_some_and(|x| x != l) {
                return None;
            }
            letter = Some(l);
        }
    }
    letter
}

fn folded_letter_bytes(class: &ClassBytes) -> Option<u8> {
    let mut letter = None;
    for r in class.ranges() {
        for b in r.start()..=r.end() {
            if !b.is_ascii_alphabetic() || letter.is_some_and(|x| x != b.to_ascii_lowercase()) {
                return None;
            }
            letter = Some(b.to_ascii_lowercase());
        }
    }
    letter
}

/// The last run one walk found: `text[start..end]` is all the set's characters, and the run
/// goes no further (forwards: `end` is where it stops; backwards: `start` is where it
/// begins).
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    valid: bool,
    start: usize,
    end: usize,
}

impl Anchor {
    /// The merged windows of `text` that hold every match of the rule, given every
    /// occurrence of its literals (where one starts, and its length; sorted). About linear
    /// in the text: the bounds grow with the start, and each run is walked about once.
    pub(crate) fn windows(&self, text: &str, starts: &[(usize, usize)]) -> Vec<Range<usize>> {
        let mut back = vec![Seen::default(); self.before.len()];
        let mut fwd = vec![Seen::default(); self.after.len()];
        let mut runs = vec![Earliest::default(); self.after.len()];
        let mut out: Vec<Range<usize>> = Vec::new();
        for (k, &(p, len)) in starts.iter().enumerate() {
            // The literals found at `p` come shortest first; all are taken at the last.
            if starts.get(k + 1).is_some_and(|(next, _)| *next == p) {
                continue;
            }
            let shortest = starts
                .get(..k)
                .unwrap_or(&[])
                .iter()
                .rev()
                .take_while(|(q, _)| *q == p)
                .last()
                .map_or(len, |(_, l)| *l);
            // Where the next element can start: from `first` (no earlier) to `hi` (no
            // later). The anchor part starts at `p`; when its literals are exact, it ends
            // after one of those found there.
            let mut first = p.min(text.len());
            let mut hi = first;
            if self.exact {
                first = ceil_boundary(text, p + shortest);
                hi = ceil_boundary(text, p + len);
            }
            let mut possible = true;
            for ((reach, seen), found) in self.after.iter().zip(&mut fwd).zip(&mut runs) {
                if reach.min > 0
                    && let Some(set) = &reach.run
                {
                    // A match of it is a run of at least `min` bytes of its characters,
                    // starting between `first` and `hi`.
                    match found.first_run(text, first, hi, set, reach.min) {
                        Some(at) => first = at + reach.min,
                        None => {
                            possible = false;
                            break;
                        }
                    }
                }
                let by_len = reach
                    .bytes
                    .map_or(text.len(), |n| ceil_boundary(text, hi.saturating_add(n)));
                let by_run = reach
                    .run
                    .as_ref()
                    .map_or(text.len(), |s| run_end(text, hi, s, seen));
                hi = by_len.min(by_run);
                if first > hi {
                    possible = false;
                    break;
                }
            }
            if !possible {
                continue;
            }
            let mut lo = p.min(text.len());
            for (reach, seen) in self.before.iter().zip(back.iter_mut()) {
                let by_len = reach
                    .bytes
                    .map_or(0, |n| floor_boundary(text, lo.saturating_sub(n)));
                let by_run = reach
                    .run
                    .as_ref()
                    .map_or(0, |s| run_start(text, lo, s, seen));
                lo = by_len.max(by_run);
            }

            // Too short to hold a match (every match holding this occurrence is inside it).
            if hi - lo < self.min_len {
                continue;
            }
            match out.last_mut() {
                Some(last) if lo >= last.start && lo <= last.end.saturating_add(COALESCE) => {
                    last.end = last.end.max(hi);
                }
                _ => out.push(lo..hi),
            }
        }
        // Sorted already when `starts` is; merged again in case it is not.
        super::rules::merge(out)
    }
}

pub(crate) fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

pub(crate) fn ceil_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// The last answer of [`first_run`] for one element: asked for `from..=to`, it was `at`.
#[derive(Debug, Clone, Copy, Default)]
struct Earliest {
    valid: bool,
    from: usize,
    to: usize,
    at: Option<usize>,
}

impl Earliest {
    /// [`first_run`], from the last answer when it holds. That answer is the first place
    /// between its `from` and `to` where `min` bytes of the set's characters follow, so no
    /// place before it qualifies, and none at all up to its `to` when there was none: a later
    /// `from` gets the same answer when it is still in range.
    fn first_run(
        &mut self,
        text: &str,
        from: usize,
        to: usize,
        set: &CharSet,
        min: usize,
    ) -> Option<usize> {
        if self.valid && from >= self.from {
            match self.at {
                Some(at) if at >= from && at <= to => return Some(at),
                None if to <= self.to => return None,
                _ => {}
            }
        }
        let at = first_run(text, from, to, set, min);
        *self = Earliest {
            valid: true,
            from,
            to,
            at,
        };
        at
    }
}

/// The first place between `from` and `to` (char boundaries) where at least `min` bytes of
/// `set`'s characters follow, if there is one.
fn first_run(text: &str, from: usize, to: usize, set: &CharSet, min: usize) -> Option<usize> {
    let mut run: Option<usize> = None;
    let mut at = from;
    while let Some((inside, len)) = set.at(text, at) {
        if inside {
            let start = *run.get_or_insert(at);
            if at + len - start >= min {
                return Some(start);
            }
        } else {
            // A run starting after `to` would start after this character.
            if at >= to {
                return None;
            }
            run = None;
        }
        at += len;
    }
    None
}

/// The end of the run of `set`'s characters starting at `at` (a char boundary). `seen`: the
/// last run found, `start..end`; a start inside it has the same end.
fn run_end(text: &str, at: usize, set: &CharSet, seen: &mut Seen) -> usize {
    if seen.valid && (seen.start..=seen.end).contains(&at) {
        return seen.end;
    }
    let mut end = at;
    while let Some((true, len)) = set.at(text, end) {
        end += len;
    }
    *seen = Seen {
        valid: true,
        start: at,
        end,
    };
    end
}

/// The start of the run of `set`'s characters ending at `at` (a char boundary). `seen`: the
/// last run found, `start..end` (`start` where the run begins, `end` where it was asked for);
/// a later `at` whose text back to `end` is all in the set has the same start.
fn run_start(text: &str, at: usize, set: &CharSet, seen: &mut Seen) -> usize {
    if seen.valid && (seen.start..=seen.end).contains(&at) {
        return seen.start;
    }
    let floor = if seen.valid && seen.end <= at {
        seen.end
    } else {
        0
    };
    let mut start = at;
    while start > floor {
        match set.before(text, start) {
            Some((true, len)) => start -= len,
            _ => break,
        }
    }
    if start == floor && seen.valid && floor == seen.end {
        start = seen.start;
    }
    *seen = Seen {
        valid: true,
        start,
        end: at,
    };
    start
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(p: &str) -> Hir {
        regex_syntax::ParserBuilder::new().build().parse(p).unwrap()
    }

    #[test]
    fn case_insensitive_letters_fold_to_one_literal() {
        let a = anchor(&parse(
            r"(?i)[a-z0-9]{0,5}?(?:token|pass(?:word)?)[ \t]*=\s*(\S+)",
        ))
        .unwrap();
        assert_eq!(
            a.literals,
            vec![b"pass".to_vec(), b"password".to_vec(), b"token".to_vec()]
        );
        let a = anchor(&parse(
            r"(?i)[\w.-]{0,50}?(?:adafruit)(?:[ \t\w.-]{0,20})=(\S+)",
        ))
        .unwrap();
        assert_eq!(a.literals, vec![b"adafruit".to_vec()]);
        // A literal only a longer stretch makes long enough.
        let a = anchor(&parse(r"x-[ab]c=(\S+)")).unwrap();
        assert_eq!(a.literals, vec![b"x-ac=".to_vec(), b"x-bc=".to_vec()]);
        // A class of several letters is not one letter: no literal, no anchor.
        assert!(anchor(&parse(r"[a-f]+=\S+")).is_none());
        // Literals shorter than MIN_LITERAL anchor nothing.
        assert!(anchor(&parse(r"(?i)[a-z]*(?:ab|cd)[a-z]+")).is_none());
    }

    /// Unicode `(?i)` adds to an ASCII letter's class only characters in FOLD_HAZARDS: a
    /// literal search that reads ASCII case-insensitively misses nothing else.
    #[test]
    fn only_the_fold_hazards_fold_into_ascii_letters() {
        for l in ('a'..='z').chain('A'..='Z') {
            let hir = parse(&format!("(?i){l}"));
            let HirKind::Class(Class::Unicode(class)) = hir.kind() else {
                panic!("{l}: {hir:?}");
            };
            for r in class.ranges() {
                for c in r.start()..=r.end() {
                    assert!(
                        c.is_ascii() || FOLD_HAZARDS.contains(&c.to_string().as_str()),
                        "{l} folds {c:?}"
                    );
                }
            }
        }
    }

    /// An exact anchor part ends after one of the literals found where it starts, the
    /// shortest too: here the match is `tok` then `e1`, though `toke` starts there as well.
    #[test]
    fn an_exact_anchor_ends_after_any_literal_found_there() {
        let a = anchor(&parse(r"(?:tok|toke)e[0-9]")).unwrap();
        assert!(a.exact);
        assert_eq!(a.windows("toke1", &[(0, 3), (0, 4)]), vec![0..5]);
        assert_eq!(a.windows("tokee1", &[(0, 3), (0, 4)]), vec![0..6]);
        assert!(a.windows("tok1", &[(0, 3)]).is_empty());
    }

    #[test]
    fn windows_reach_across_runs_and_bounds() {
        let a = anchor(&parse(r"(?:[a-z0-9]+[-_])*(?:key)\s*=\s*([^\s,]+)")).unwrap();
        let text = "x, my-long_api-key   =  value123,rest";
        let p = text.find("key").unwrap();
        let w = a.windows(text, &[(p, 3)]);
        // Back over the run of `[a-z0-9_-]`, forwards over bounded parts and runs.
        assert_eq!(&text[w[0].clone()], "my-long_api-key   =  value123");
    }
}
