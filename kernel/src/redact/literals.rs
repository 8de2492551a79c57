//! The one pass over a text that finds every occurrence of the rules' literals (keywords,
//! anchor literals, fold hazards), ASCII-case-insensitively: `aho-corasick`'s DFA, stepped here
//! over four parts of the text at once. It finds; what an occurrence means is `rules.rs`'s.
//!
//! Why by hand: a DFA step is one table load that waits on the state the step before loaded,
//! so one walk over the text takes the load latency per byte (~1.7 ms per MiB here, whatever
//! the automaton). Four walks over four parts of the text are independent, and the processor
//! overlaps them.
//!
//! Exact: each part is walked from its start in the unanchored start state, and on past its
//! end by the longest literal less one byte, so every occurrence that starts in a part ends
//! inside its walk; an automaton walked over a range reports exactly the occurrences inside
//! it (that is what an overlapping search is). An occurrence is reported by the part it
//! starts in only, so once. The tests compare this with `aho-corasick`'s own overlapping
//! search.

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::dfa::DFA;
use aho_corasick::{Anchored, MatchKind, StartKind};

/// Texts shorter than this are walked in one part.
const SPLIT_MIN: usize = 4096;

/// The literal automaton and each literal's length.
#[derive(Debug)]
pub(crate) struct Literals {
    dfa: DFA,
    lens: Vec<usize>,
    longest: usize,
}

impl Literals {
    /// The automaton of `patterns` (matched ASCII-case-insensitively).
    pub(crate) fn new(patterns: &[Vec<u8>]) -> Result<Literals, aho_corasick::BuildError> {
        let dfa = DFA::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .start_kind(StartKind::Unanchored)
            .prefilter(false)
            .build(patterns)?;
        let lens: Vec<usize> = patterns.iter().map(Vec::len).collect();
        let longest = lens.iter().copied().max().unwrap_or(0);
        Ok(Literals { dfa, lens, longest })
    }

    /// The number of parts [`Literals::each`] walks at once (written out four times below).
    pub(crate) const PARTS: usize = 4;

    /// Calls `found(start, pattern, part)` for every occurrence in `text`. Each part's
    /// occurrences come in the order they end (those that end at one place in no particular
    /// order), the parts' interleaved; part `j`'s all start before part `j + 1`'s.
    pub(crate) fn each(&self, text: &[u8], mut found: impl FnMut(usize, usize, usize)) {
        let Ok(start) = self.dfa.start_state(Anchored::No) else {
            return;
        };
        let n = text.len();
        if n < SPLIT_MIN || self.longest == 0 {
            self.walk(text, 0, n, n, start, &mut |at, p| found(at, p, 0));
            return;
        }
        let part = n.div_ceil(Self::PARTS);
        let tail = self.longest - 1;
        // Part j: occurrences starting in [j*part, (j+1)*part), walked to `end(j)`.
        let begin = |j: usize| (j * part).min(n);
        let end = |j: usize| ((j + 1) * part + tail).min(n);
        let limit = |j: usize| ((j + 1) * part).min(n);
        // The walk every part has (the last part is the shortest), four at a time.
        let common = (0..Self::PARTS)
            .map(|j| end(j) - begin(j))
            .min()
            .unwrap_or(0);
        let lane = |j: usize| text.get(begin(j)..begin(j) + common).unwrap_or(&[]);
        let dfa = &self.dfa;
        let (mut s0, mut s1, mut s2, mut s3) = (start, start, start, start);
        let mut check = |s: StateID, j: usize, i: usize| {
            if dfa.is_special(s) && dfa.is_match(s) {
                self.report(s, begin(j) + i + 1, limit(j), &mut |at, p| found(at, p, j));
            }
        };
        for (i, (((&b0, &b1), &b2), &b3)) in lane(0)
            .iter()
            .zip(lane(1))
            .zip(lane(2))
            .zip(lane(3))
            .enumerate()
        {
            s0 = dfa.next_state(Anchored::No, s0, b0);
            s1 = dfa.next_state(Anchored::No, s1, b1);
            s2 = dfa.next_state(Anchored::No, s2, b2);
            s3 = dfa.next_state(Anchored::No, s3, b3);
            // Special (a match) is rare: one branch for the four most of the time.
            if dfa.is_special(s0) | dfa.is_special(s1) | dfa.is_special(s2) | dfa.is_special(s3) {
                check(s0, 0, i);
                check(s1, 1, i);
                check(s2, 2, i);
                check(s3, 3, i);
            }
        }
        for (j, s) in [s0, s1, s2, s3].into_iter().enumerate() {
            self.walk(
                text,
                begin(j) + common,
                end(j),
                limit(j),
                s,
                &mut |at, p| {
                    found(at, p, j);
                },
            );
        }
    }

    /// Walks `text[from..to]` from state `sid`, reporting occurrences starting before `limit`.
    fn walk(
        &self,
        text: &[u8],
        from: usize,
        to: usize,
        limit: usize,
        mut sid: StateID,
        found: &mut impl FnMut(usize, usize),
    ) {
        for (i, &b) in text.get(from..to).unwrap_or(&[]).iter().enumerate() {
            sid = self.dfa.next_state(Anchored::No, sid, b);
            if self.dfa.is_special(sid) && self.dfa.is_match(sid) {
                self.report(sid, from + i + 1, limit, found);
            }
        }
    }

    /// The occurrences ending at `end` in match state `sid` that start before `limit`.
    fn report(&self, sid: StateID, end: usize, limit: usize, found: &mut impl FnMut(usize, usize)) {
        for k in 0..self.dfa.match_len(sid) {
            let p = self.dfa.match_pattern(sid, k).as_usize();
            let start = end - self.lens.get(p).copied().unwrap_or(0);
            if start < limit {
                found(start, p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aho_corasick::AhoCorasick;
    use proptest::prelude::*;

    /// Occurrences: where one starts, and its pattern.
    type Occurrences = Vec<(usize, usize)>;

    fn both(patterns: &[Vec<u8>], text: &[u8]) -> (Occurrences, Occurrences) {
        let lits = Literals::new(patterns).unwrap();
        let mut got = Vec::new();
        lits.each(text, |s, p, _| got.push((s, p)));
        got.sort_unstable();
        let ac = aho_corasick::AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .build(patterns)
            .unwrap();
        let ac: &AhoCorasick = &ac;
        let mut want: Vec<(usize, usize)> = ac
            .find_overlapping_iter(text)
            .map(|m| (m.start(), m.pattern().as_usize()))
            .collect();
        want.sort_unstable();
        (got, want)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Four parts walked at once find exactly what one overlapping search finds, also
        /// occurrences across the parts' borders.
        #[test]
        fn parts_find_what_one_search_finds(
            text in prop::collection::vec(prop::sample::select(b"abAB-_ x".to_vec()), 0..20_000),
            patterns in prop::collection::vec(
                prop::collection::vec(prop::sample::select(b"abAB-_".to_vec()), 1..9),
                1..12,
            ),
        ) {
            let (got, want) = both(&patterns, &text);
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn an_occurrence_across_a_border_is_found_once() {
        let mut text = vec![b'.'; 3 * SPLIT_MIN];
        let part = text.len().div_ceil(4);
        let secret = b"PassWord";
        text[part - 4..part + 4].copy_from_slice(secret);
        let (got, want) = both(&[b"password".to_vec(), b"word".to_vec()], &text);
        assert_eq!(got, vec![(part - 4, 0), (part, 1)]);
        assert_eq!(got, want);
    }
}
