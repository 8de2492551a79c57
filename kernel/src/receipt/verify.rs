//! Offline verification of a journal's bytes with only the trusted public keys.
//!
//! Order per line: frame (newline-terminated), envelope shape, key, signature over the DSSE
//! encoding (`verify_strict`), and only then the payload it covers. Then the chain: `seq`
//! contiguous from 0, `prev` linking each receipt to the last, timestamps non-decreasing, one
//! run id, checkpoints whose size, last hash and RFC 9162 root match what came before, and a
//! final checkpoint last. The first failure is reported precisely; nothing is repaired.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature as DalekSignature, VerifyingKey};
use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::receipt::dsse::{CHECKPOINT_PAYLOAD_TYPE, RECEIPT_PAYLOAD_TYPE, pae};
use crate::receipt::merkle::MerkleRange;
use crate::receipt::payload::{
    Checkpoint, DecidedByKind, MAX_SAFE_INTEGER, ReceiptPayload, check_json_numbers, raw_hash,
    receipt_hash,
};
use crate::receipt::signer::KeyRing;

/// The first thing wrong with a journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// 1-based line.
    pub line: usize,
    /// The receipt's sequence number, when the line is a readable receipt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// What failed, short (`signature`, `seq`, `prev`, `checkpoint`, `torn line`, ...).
    pub what: String,
    /// Why, one line.
    pub why: String,
}

/// What verification found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub receipts: u64,
    pub checkpoints: u64,
    /// The journal ends with a final checkpoint.
    pub closed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Hash of the last valid receipt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_hash: Option<String>,
    /// The first failure; `None` means valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// The keys that signed the lines read, each once, in order of first use (a home's
    /// journals are each signed by one key: the one its ledger names for it).
    #[serde(skip)]
    pub key_ids: Vec<String>,
}

impl Report {
    /// True when nothing failed.
    pub fn is_valid(&self) -> bool {
        self.failure.is_none()
    }
}

struct State<'a> {
    keys: &'a KeyRing,
    policy_set: Option<&'a str>,
    report: Report,
    prev: Option<String>,
    tree: MerkleRange,
    last_time: Option<OffsetDateTime>,
    run_id: Option<String>,
}

/// How to verify.
#[derive(Debug, Clone, Copy)]
pub struct VerifyOptions<'a> {
    /// When given, every receipt's `policy_set` must equal it.
    pub policy_set: Option<&'a str>,
    /// Threads for signature checks. The default, 1, checks on the calling thread only (a
    /// library must not start threads unasked); `craik receipts verify` and `craik audit`
    /// pass every core the process may use. The verdict is the same for any count (tested).
    pub threads: usize,
    /// Check signatures in batches (keys were refused at load if weak); a failed batch is
    /// re-checked one by one with `verify_strict` to name the bad receipt.
    pub batch: bool,
    /// Accept a journal without a final checkpoint (a run that is parked or still going).
    pub allow_open: bool,
}

impl Default for VerifyOptions<'_> {
    fn default() -> Self {
        Self {
            policy_set: None,
            threads: 1,
            batch: true,
            allow_open: false,
        }
    }
}

/// Lines checked per window: signatures of a window are checked (in parallel) before its
/// payloads are parsed in order.
const WINDOW: usize = 4096;

/// Verifies a whole journal. `policy_set`, when given, must equal every receipt's.
pub fn verify_journal(bytes: &[u8], keys: &KeyRing, policy_set: Option<&str>) -> Report {
    verify_journal_with(
        bytes,
        keys,
        VerifyOptions {
            policy_set,
            ..VerifyOptions::default()
        },
        &mut |_, _| {},
    )
}

/// [`verify_journal`] with options, calling `progress` with the lines and bytes done after
/// each chunk.
pub fn verify_journal_with(
    bytes: &[u8],
    keys: &KeyRing,
    options: VerifyOptions<'_>,
    progress: &mut dyn FnMut(usize, usize),
) -> Report {
    let mut verifier = Verifier::new(keys, options);
    let mut done = 0;
    let mut rest = bytes;
    while !rest.is_empty() {
        // Cut at a line's end: every line is then read where it lies, never copied.
        let cut = if rest.len() <= CHUNK {
            rest.len()
        } else {
            rest.get(..CHUNK)
                .and_then(|c| memchr::memrchr(b'\n', c))
                .map_or(CHUNK, |i| i + 1)
        };
        let (chunk, tail) = rest.split_at(cut);
        rest = tail;
        done += chunk.len();
        if !verifier.feed(chunk) {
            break;
        }
        progress(verifier.lines(), done);
    }
    verifier.finish()
}

/// [`verify_journal_with`] of a journal that may still be open (a run going on, parked or
/// cut short): everything but the final checkpoint checked, no progress reported.
pub fn verify_open_journal(bytes: &[u8], keys: &KeyRing) -> Report {
    verify_journal_with(
        bytes,
        keys,
        VerifyOptions {
            allow_open: true,
            ..VerifyOptions::default()
        },
        &mut |_, _| {},
    )
}

/// Bytes handed to the verifier at a time by [`verify_journal_with`].
const CHUNK: usize = 8 * 1024 * 1024;

/// Streaming verification: feed a journal's bytes in any chunks, then [`Verifier::finish`].
/// Memory stays at one window of lines plus one chunk, whatever the journal's size; the
/// verdict is the same as verifying the whole byte string at once.
pub struct Verifier<'a> {
    /// Called with each receipt once it (and every line before it) verified.
    visit: Option<Visitor<'a>>,
    state: Option<State<'a>>,
    failed: Option<Report>,
    options: VerifyOptions<'a>,
    pending: Vec<u8>,
    line_no: usize,
    /// Message buffers of lines already checked, for the next window's lines.
    spare: Vec<Vec<u8>>,
}

/// What [`Verifier::visiting`] calls: the line number and the verified receipt.
type Visitor<'a> = Box<dyn FnMut(usize, &ReceiptPayload) + 'a>;

impl std::fmt::Debug for Verifier<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("line", &self.line_no)
            .finish_non_exhaustive()
    }
}

impl<'a> Verifier<'a> {
    /// A verifier trusting `keys`.
    pub fn new(keys: &'a KeyRing, options: VerifyOptions<'a>) -> Self {
        let state = State {
            keys,
            policy_set: options.policy_set,
            report: Report::default(),
            prev: None,
            tree: MerkleRange::new(),
            last_time: None,
            run_id: None,
        };
        let mut verifier = Self {
            visit: None,
            state: Some(state),
            failed: None,
            options,
            pending: Vec::new(),
            line_no: 0,
            spare: Vec::new(),
        };
        if keys.is_empty() {
            verifier.fail(0, None, "keys", "no trusted public key given".into());
        }
        verifier
    }

    /// Calls `visit` with each receipt (its 1-based line and payload) as soon as it and every
    /// line before it verified, in order: a reader that explains a journal gets exactly the
    /// verified receipts without parsing them again. Nothing is called for a line that fails
    /// or for any line after it.
    #[must_use]
    pub fn visiting(mut self, visit: impl FnMut(usize, &ReceiptPayload) + 'a) -> Self {
        self.visit = Some(Box::new(visit));
        self
    }

    /// Lines framed so far.
    pub fn lines(&self) -> usize {
        self.line_no
    }

    fn fail(&mut self, line: usize, seq: Option<u64>, what: &str, why: String) {
        if let Some(state) = self.state.take() {
            self.failed = Some(state.fail(line, seq, what, why));
        }
    }

    /// Feeds the next bytes; `false` once a failure is found (feed no more).
    pub fn feed(&mut self, chunk: &[u8]) -> bool {
        if self.state.is_none() {
            return false;
        }
        if self.pending.is_empty() {
            // Lines straight from the chunk; only an unfinished last line is kept.
            let (used, ok) = self.frame(chunk, false);
            if ok {
                self.pending
                    .extend_from_slice(chunk.get(used..).unwrap_or_default());
            }
            return ok;
        }
        self.pending.extend_from_slice(chunk);
        self.drain(false)
    }

    /// Checks every full window of complete lines kept (every complete line, `at_end`).
    fn drain(&mut self, at_end: bool) -> bool {
        let data = std::mem::take(&mut self.pending);
        let (used, ok) = self.frame(&data, at_end);
        self.pending = data;
        self.pending.drain(..used.min(self.pending.len()));
        ok
    }

    /// Checks every full window of complete lines of `data` (every complete line, `at_end`);
    /// returns how many bytes it consumed and `false` once a failure is found.
    fn frame(&mut self, data: &[u8], at_end: bool) -> (usize, bool) {
        let mut base = 0;
        loop {
            let pending = data.get(base..).unwrap_or_default();
            let mut ends = Vec::with_capacity(WINDOW);
            let mut start = 0;
            while ends.len() < WINDOW {
                match pending
                    .get(start..)
                    .and_then(|rest| memchr::memchr(b'\n', rest))
                {
                    Some(i) => {
                        ends.push(start + i);
                        start += i + 1;
                    }
                    None => break,
                }
            }
            if ends.is_empty() || (ends.len() < WINDOW && !at_end) {
                return (base, true);
            }
            let Some(state) = self.state.as_mut() else {
                return (base, false);
            };
            // Frame the window: stop at the first line that cannot even be prepared.
            let mut window: Vec<(usize, Result<Prepared, LineError>)> =
                Vec::with_capacity(ends.len());
            let mut from = 0;
            for &end in &ends {
                self.line_no += 1;
                let line = pending.get(from..end).unwrap_or_default();
                from = end + 1;
                // Message buffers are kept from window to window: freed and allocated
                // again, the allocator handed their pages back to the OS between windows and
                // faulted them in again (issue 20: a fifth of verification's CPU time).
                let buffer = self.spare.pop().unwrap_or_default();
                let prepared = state.prepare(line, buffer);
                let stop = prepared.is_err();
                window.push((self.line_no, prepared));
                if stop {
                    break;
                }
            }
            let checked = check_signatures(&window, self.options);
            for ((n, prepared), signature_ok) in window.into_iter().zip(checked) {
                let Some(state) = self.state.as_mut() else {
                    return (base, false);
                };
                if state.report.closed {
                    self.fail(
                        n,
                        None,
                        "after close",
                        "an entry follows the final checkpoint".into(),
                    );
                    return (base, false);
                }
                let item = match prepared {
                    Ok(item) => item,
                    Err((seq, what, why)) => {
                        self.fail(n, seq, what, why);
                        return (base, false);
                    }
                };
                if !signature_ok {
                    self.fail(
                        n,
                        None,
                        "signature",
                        "signature does not verify over the payload".into(),
                    );
                    return (base, false);
                }
                let finished = state.finish(&item);
                self.spare.push(item.message);
                match finished {
                    Ok(Some(receipt)) => {
                        if let Some(visit) = self.visit.as_mut() {
                            visit(n, &receipt);
                        }
                    }
                    Ok(None) => {}
                    Err((seq, what, why)) => {
                        self.fail(n, seq, what, why);
                        return (base, false);
                    }
                }
            }
            base += from;
        }
    }

    /// The verdict on everything fed.
    pub fn finish(mut self) -> Report {
        if self.state.is_some() {
            self.drain(true);
        }
        if let Some(report) = self.failed.take() {
            return report;
        }
        if !self.pending.is_empty() {
            let n = self.line_no + 1;
            let len = self.pending.len();
            self.fail(n, None, "torn line", format!(
                "last line has {len} bytes and no newline: an append was cut short (crash?); the journal is not repaired"
            ));
            return self.failed.take().unwrap_or_default();
        }
        if self.line_no == 0 {
            self.fail(0, None, "empty", "the journal has no entries".into());
            return self.failed.take().unwrap_or_default();
        }
        let (closed, receipts) = self
            .state
            .as_ref()
            .map(|s| (s.report.closed, s.report.receipts))
            .unwrap_or_default();
        if !closed && !self.options.allow_open {
            let n = self.line_no;
            self.fail(n, None, "not closed", format!("journal not closed: no final checkpoint after {receipts} receipts (truncated, or the run is still going)"));
            return self.failed.take().unwrap_or_default();
        }
        self.state.map(|s| s.report).unwrap_or_default()
    }
}

/// A line whose envelope is well-formed and whose key is trusted, ready for its signature.
struct Prepared {
    payload_type: String,
    /// Where the payload starts in `message` (the PAE ends with it).
    payload_at: usize,
    keyid: String,
    key: VerifyingKey,
    message: Vec<u8>,
    signature: DalekSignature,
}

/// A journal line's DSSE envelope, read in place: its strings borrow from the line (they
/// hold no escapes in the one compact form; one that does is copied, and then refused as not
/// compact or not base64). Issue 20: copying every payload was a measurable share of
/// verification.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeRef<'a> {
    #[serde(rename = "payloadType", borrow)]
    payload_type: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    payload: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    signatures: Vec<SignatureRef<'a>>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SignatureRef<'a> {
    #[serde(borrow)]
    keyid: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    sig: std::borrow::Cow<'a, str>,
}

/// Whether `line` is `envelope` as `serde_json::to_vec` writes it (fields in order, no
/// whitespace), compared without serialising the payload: its text, canonical base64 (checked
/// first), needs no escaping, so it is compared in place (issue 20: re-serialising every line
/// was a measurable share of verification). `tests::the_compact_form_is_serde_json` holds the
/// two equal.
fn is_compact_form(envelope: &EnvelopeRef<'_>, line: &[u8]) -> bool {
    let json = |text: &str| serde_json::to_vec(text).unwrap_or_default();
    let mut head = b"{\"payloadType\":".to_vec();
    head.extend_from_slice(&json(&envelope.payload_type));
    head.extend_from_slice(b",\"payload\":\"");
    let mut tail = b"\",\"signatures\":[".to_vec();
    for (i, signature) in envelope.signatures.iter().enumerate() {
        if i > 0 {
            tail.push(b',');
        }
        tail.extend_from_slice(b"{\"keyid\":");
        tail.extend_from_slice(&json(&signature.keyid));
        tail.extend_from_slice(b",\"sig\":");
        tail.extend_from_slice(&json(&signature.sig));
        tail.push(b'}');
    }
    tail.extend_from_slice(b"]}");
    let payload = envelope.payload.as_bytes();
    envelope
        .payload
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=')
        && line.len() == head.len() + payload.len() + tail.len()
        && line.starts_with(&head)
        && line.ends_with(&tail)
        && line.get(head.len()..line.len() - tail.len()) == Some(payload)
}

impl Prepared {
    /// The signed payload bytes.
    fn payload(&self) -> &[u8] {
        self.message.get(self.payload_at..).unwrap_or_default()
    }
}

#[cfg(test)]
fn pae_decoded(payload_type: &str, payload_b64: &str) -> Result<(Vec<u8>, usize), String> {
    pae_decoded_into(payload_type, payload_b64, Vec::new())
}

/// The DSSE pre-authentication encoding of `payload_type` and the payload that `payload_b64`
/// (standard base64) encodes, and where the payload starts in it: what [`pae`] makes, with the
/// payload decoded straight into place, in `message` (cleared first: a buffer kept from an
/// earlier line).
fn pae_decoded_into(
    payload_type: &str,
    payload_b64: &str,
    mut message: Vec<u8>,
) -> Result<(Vec<u8>, usize), String> {
    let b64 = payload_b64.as_bytes();
    let padding = b64.iter().rev().take_while(|&&b| b == b'=').count();
    let expected = (b64.len() / 4 * 3).saturating_sub(padding);
    message.clear();
    message.extend_from_slice(&pae(payload_type, &[]));
    // `pae` of an empty payload ends in "0 "; this payload's length goes there instead.
    message.truncate(message.len().saturating_sub(2));
    message.extend_from_slice(expected.to_string().as_bytes());
    message.push(b' ');
    let at = message.len();
    message.reserve(expected);
    STANDARD
        .decode_vec(b64, &mut message)
        .map_err(|e| e.to_string())?;
    if message.len() - at != expected {
        // Not the length the text's size promised: build it the plain way.
        let payload = message.split_off(at);
        let message = pae(payload_type, &payload);
        let at = message.len() - payload.len();
        return Ok((message, at));
    }
    Ok((message, at))
}

/// Checks every prepared line's signature, in `threads` parallel chunks, batched when asked.
fn check_signatures(
    window: &[(usize, Result<Prepared, LineError>)],
    options: VerifyOptions<'_>,
) -> Vec<bool> {
    let items: Vec<Option<&Prepared>> = window.iter().map(|(_, p)| p.as_ref().ok()).collect();
    let threads = options.threads.max(1);
    let chunk = items.len().div_ceil(threads).max(1);
    let mut parts = items.chunks(chunk);
    // The first part is checked on this thread (with one thread, no thread is started: a new
    // thread's allocator pages were faulted in afresh for every window — issue 20).
    let first = parts.next().unwrap_or_default();
    let mut results = Vec::with_capacity(items.len());
    std::thread::scope(|scope| {
        // A thread that cannot be started (a process or thread limit, memory: `bench audit`
        // died with "failed to spawn thread" under load, issue 31 item 5) is no failure: its
        // part is checked on this thread instead. Fewer threads, the same verdict.
        let handles: Vec<_> = parts
            .map(|part| match spawn_checker(scope, part, options.batch) {
                Ok(handle) => Checked::Thread(part.len(), handle),
                Err(_) => Checked::Here(part, options.batch),
            })
            .collect();
        results.extend(check_chunk(first, options.batch));
        for checked in handles {
            match checked {
                Checked::Thread(len, handle) => {
                    // A panicking verifier thread verifies nothing: its lines stay `false`.
                    let part = handle.join().unwrap_or_else(|_| vec![false; len]);
                    results.extend(part.into_iter().chain(std::iter::repeat(false)).take(len));
                }
                Checked::Here(part, batch) => results.extend(check_chunk(part, batch)),
            }
        }
    });
    results
}

/// A part of a window: checked by a thread of its own, or (none could be started) here.
enum Checked<'scope, 'a> {
    Thread(usize, std::thread::ScopedJoinHandle<'scope, Vec<bool>>),
    Here(&'a [Option<&'a Prepared>], bool),
}

/// Starts a thread checking `part`; an error when the OS refuses one.
fn spawn_checker<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    part: &'env [Option<&'env Prepared>],
    batch: bool,
) -> std::io::Result<std::thread::ScopedJoinHandle<'scope, Vec<bool>>> {
    #[cfg(test)]
    if tests::REFUSE_THREADS.with(std::cell::Cell::get) {
        return Err(std::io::Error::other("thread refused (test)"));
    }
    std::thread::Builder::new()
        .name("craik-verify".into())
        .spawn_scoped(scope, move || check_chunk(part, batch))
}

/// Whether a signature may be checked in a batch: its `R` is a canonical encoding of a point of
/// the prime-order subgroup other than a small-order one (the identity included), as the key
/// is. For such points the batch equation (cofactored) and `verify_strict`'s (cofactorless,
/// refusing small-order `R` and keys) accept exactly the same signatures; any other signature
/// is checked alone with `verify_strict`, so the verdict on a line never depends on the lines
/// batched with it (issue 31 item 5: an identity-point `R` was accepted or refused depending on
/// its batch).
fn batchable(p: &Prepared) -> bool {
    use curve25519_dalek::edwards::CompressedEdwardsY;
    let prime_order = |bytes: [u8; 32]| {
        CompressedEdwardsY(bytes).decompress().is_some_and(|point| {
            point.compress().to_bytes() == bytes
                && !point.is_small_order()
                && point.is_torsion_free()
        })
    };
    // The key was checked the same way when the ring took it (`KeyRing::add`).
    prime_order(p.signature.r_bytes().to_owned())
}

fn check_chunk(part: &[Option<&Prepared>], batch: bool) -> Vec<bool> {
    let strict = |p: &Prepared| p.key.verify_strict(&p.message, &p.signature).is_ok();
    let present: Vec<&Prepared> = part
        .iter()
        .flatten()
        .copied()
        .filter(|p| batchable(p))
        .collect();
    if present.len() < part.iter().flatten().count() {
        // Some line cannot be batched: every line is checked alone.
        return part.iter().map(|p| p.is_some_and(strict)).collect();
    }
    if batch && present.len() > 1 {
        let messages: Vec<&[u8]> = present.iter().map(|p| p.message.as_slice()).collect();
        let signatures: Vec<DalekSignature> = present.iter().map(|p| p.signature).collect();
        let keys: Vec<VerifyingKey> = present.iter().map(|p| p.key).collect();
        if ed25519_dalek::verify_batch(&messages, &signatures, &keys).is_ok() {
            return part.iter().map(Option::is_some).collect();
        }
    }
    part.iter().map(|p| p.is_some_and(strict)).collect()
}

type LineError = (Option<u64>, &'static str, String);

/// The `decided_by` forms docs/receipts.md allows: an approval names a `user:` approver
/// (`user:NAME via APPROVAL_ID` when it unlocked a run's action), an operator decision its
/// `user:` operator; every other kind has an
/// empty `by`; a default decision is a deny by no policy.
fn decided_by_form(r: &ReceiptPayload) -> Result<(), String> {
    let by = &r.decided_by.by;
    let ok = match r.decided_by.kind {
        DecidedByKind::Approval | DecidedByKind::Operator => by.starts_with("user:"),
        DecidedByKind::Default => {
            by.is_empty()
                && r.decision == crate::Decision::Deny
                && r.determining_policies.is_empty()
        }
        DecidedByKind::Policy | DecidedByKind::Kernel | DecidedByKind::Outcome => by.is_empty(),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "kind `{:?}` with by `{}` and decision `{:?}` is not a form the spec allows",
            r.decided_by.kind,
            craik_contracts::Truncated(by),
            r.decision
        ))
    }
}

/// A signed payload parsed, once its signature verified: JSON holding no float and no integer
/// outside ±(2^53−1), in its one canonical form (RFC 8785).
fn canonical_payload(payload: &[u8]) -> Result<serde_json::Value, LineError> {
    let json: serde_json::Value = serde_json::from_slice(payload)
        .map_err(|e| (None, "payload", format!("signed payload is not JSON: {e}")))?;
    check_json_numbers(&json, "$").map_err(|e| (None, "payload", e))?;
    // The signed bytes must be the one canonical form (RFC 8785) of what they say: no
    // other spelling, no duplicate key (a duplicate never survives re-canonicalisation),
    // so two readers can never disagree about a signed payload.
    // Fast path: the canonical writer's bytes equal the payload. Otherwise `serde_jcs`
    // has the last word (and the error to give), as before.
    let mut canonical = Vec::with_capacity(payload.len());
    let fast = crate::receipt::payload::write_canonical(&json, &mut canonical).is_ok()
        && canonical == payload;
    match if fast {
        Ok(canonical)
    } else {
        serde_jcs::to_vec(&json)
    } {
        Ok(canonical) if canonical == payload => {}
        Ok(_) => {
            return Err((
                    None,
                    "payload",
                    "signed payload is not canonical JSON (RFC 8785): key order, spacing, escapes or a duplicate key differ from its one canonical form".into(),
                ));
        }
        Err(e) => return Err((None, "payload", format!("cannot canonicalise: {e}"))),
    }
    Ok(json)
}

/// One checkpoint line kept apart from its journal — what a witness keeps of a journal it has
/// seen (docs/receipts.md, "Witnesses"): the line is a DSSE envelope in its one compact form,
/// of a checkpoint, signed (`verify_strict`) by a key in `keys`, whose payload is canonical
/// and a `craik.receipt_checkpoint` 0.1.0 naming that key, with an RFC 3339 UTC `created_at`.
/// Nothing about the journal it came from is checked here: the caller proves that a verified
/// journal extends the tree it signs.
pub fn open_checkpoint_line(line: &[u8], keys: &KeyRing) -> Result<Checkpoint, Failure> {
    let mut state = State {
        keys,
        policy_set: None,
        report: Report::default(),
        prev: None,
        tree: MerkleRange::new(),
        last_time: None,
        run_id: None,
    };
    let fail = |(seq, what, why): LineError| Failure {
        line: 1,
        seq,
        what: what.to_owned(),
        why: craik_contracts::one_line(&why),
    };
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    if line.contains(&b'\n') {
        return Err(fail((None, "envelope", "more than one line".into())));
    }
    let item = state.prepare(line, Vec::new()).map_err(fail)?;
    if item.payload_type != CHECKPOINT_PAYLOAD_TYPE {
        return Err(fail((
            None,
            "payload",
            format!(
                "payload type `{}`, not a checkpoint's",
                craik_contracts::Truncated(&item.payload_type)
            ),
        )));
    }
    if item
        .key
        .verify_strict(&item.message, &item.signature)
        .is_err()
    {
        return Err(fail((
            None,
            "signature",
            "signature does not verify over the payload".into(),
        )));
    }
    let json = canonical_payload(item.payload()).map_err(fail)?;
    let cp: Checkpoint = serde_json::from_value(json)
        .map_err(|e| fail((None, "checkpoint", format!("not a checkpoint: {e}"))))?;
    if cp.schema != "craik.receipt_checkpoint" || cp.version != craik_contracts::CONTRACT_VERSION {
        return Err(fail((
            None,
            "checkpoint",
            format!(
                "schema `{}` version `{}`, expected craik.receipt_checkpoint 0.1.0",
                cp.schema, cp.version
            ),
        )));
    }
    if cp.key_id != item.keyid {
        return Err(fail((
            None,
            "key_id",
            format!(
                "checkpoint names key `{}` but was signed by `{}`",
                cp.key_id, item.keyid
            ),
        )));
    }
    state.time(&cp.created_at, None).map_err(fail)?;
    if crate::receipt::proof::parse_digest(&cp.root_hash).is_none() {
        return Err(fail((
            None,
            "checkpoint",
            format!("root_hash `{}` is not sha256:<64 hex>", cp.root_hash),
        )));
    }
    Ok(cp)
}

impl State<'_> {
    fn fail(mut self, line: usize, seq: Option<u64>, what: &str, why: String) -> Report {
        self.report.failure = Some(Failure {
            line,
            seq,
            what: what.to_owned(),
            why: craik_contracts::one_line(&why),
        });
        self.report
    }

    fn prepare(&self, line: &[u8], buffer: Vec<u8>) -> Result<Prepared, LineError> {
        let envelope: EnvelopeRef<'_> = serde_json::from_slice(line)
            .map_err(|e| (None, "envelope", format!("not a DSSE envelope: {e}")))?;
        let [signature] = envelope.signatures.as_slice() else {
            return Err((
                None,
                "envelope",
                format!(
                    "expected exactly one signature, found {}",
                    envelope.signatures.len()
                ),
            ));
        };
        let key = self.keys.get(&signature.keyid).ok_or_else(|| {
            (
                None,
                "signature",
                format!(
                    "signed by key `{}`, which is not among the trusted keys",
                    craik_contracts::Truncated(&signature.keyid)
                ),
            )
        })?;
        // The PAE message is built around the payload, decoded straight into place: one buffer
        // and no copy per line (issue 20: allocation and copies were a measurable share of
        // verification).
        let (message, payload_at) =
            pae_decoded_into(&envelope.payload_type, &envelope.payload, buffer)
                .map_err(|e| (None, "envelope", format!("payload is not base64: {e}")))?;
        let sig = STANDARD
            .decode(signature.sig.as_bytes())
            .map_err(|e| (None, "signature", format!("signature is not base64: {e}")))?;
        let sig: [u8; 64] = sig.try_into().map_err(|v: Vec<u8>| {
            (
                None,
                "signature",
                format!("signature is {} bytes, expected 64", v.len()),
            )
        })?;
        // The line is the envelope's one compact form (the writer's): no whitespace, fields in
        // order, canonical padded base64. Another spelling of the same envelope is refused, so
        // the bytes an auditor hashes or diffs are the bytes that were written.
        // `STANDARD` decodes canonical base64 only (padding required, no trailing bits, no
        // whitespace): a payload that decoded is its one encoding (`tests::
        // only_canonical_base64_decodes`).
        if !is_compact_form(&envelope, line) {
            return Err((
                None,
                "envelope",
                "the line is not the envelope's compact form (whitespace, field order, a CR, or non-canonical base64)".into(),
            ));
        }
        Ok(Prepared {
            payload_type: envelope.payload_type.into_owned(),
            payload_at,
            keyid: signature.keyid.clone().into_owned(),
            key: *key,
            message,
            signature: DalekSignature::from_bytes(&sig),
        })
    }

    /// A line whose signature verified: only now is its payload parsed.
    fn finish(&mut self, item: &Prepared) -> Result<Option<ReceiptPayload>, LineError> {
        let json = canonical_payload(item.payload())?;
        if !self.report.key_ids.contains(&item.keyid) {
            self.report.key_ids.push(item.keyid.clone());
        }
        match item.payload_type.as_str() {
            RECEIPT_PAYLOAD_TYPE => self.receipt(json, item.payload(), &item.keyid).map(Some),
            CHECKPOINT_PAYLOAD_TYPE => self.checkpoint(json, &item.keyid).map(|()| None),
            other => Err((
                None,
                "payload",
                format!(
                    "unknown payload type `{}`",
                    craik_contracts::Truncated(other)
                ),
            )),
        }
    }
    fn time(&mut self, text: &str, seq: Option<u64>) -> Result<(), LineError> {
        let at = OffsetDateTime::parse(text, &Rfc3339)
            .map_err(|e| (seq, "created_at", format!("`{text}` is not RFC 3339: {e}")))?;
        if !text.ends_with('Z') {
            return Err((
                seq,
                "created_at",
                format!("`{text}` is not UTC (RFC 3339 with `Z`)"),
            ));
        }
        if let Some(last) = self.last_time.filter(|last| at < *last) {
            return Err((
                seq,
                "created_at",
                format!(
                    "`{text}` is before the previous entry ({})",
                    last.format(&Rfc3339).unwrap_or_default()
                ),
            ));
        }
        self.last_time = Some(at);
        Ok(())
    }

    fn run(&mut self, run_id: &str, seq: Option<u64>) -> Result<(), LineError> {
        match &self.run_id {
            Some(first) if first != run_id => Err((
                seq,
                "run_id",
                format!("`{run_id}` differs from the journal's `{first}`"),
            )),
            Some(_) => Ok(()),
            None => {
                self.run_id = Some(run_id.to_owned());
                self.report.run_id = Some(run_id.to_owned());
                Ok(())
            }
        }
    }

    fn receipt(
        &mut self,
        json: serde_json::Value,
        payload: &[u8],
        keyid: &str,
    ) -> Result<ReceiptPayload, LineError> {
        let receipt: ReceiptPayload = serde_json::from_value(json)
            .map_err(|e| (None, "payload", format!("not a receipt: {e}")))?;
        let seq = Some(receipt.seq);
        if receipt.schema != "craik.capability_receipt"
            || receipt.version != craik_contracts::CONTRACT_VERSION
        {
            return Err((
                seq,
                "payload",
                format!(
                    "schema `{}` version `{}`, expected craik.capability_receipt 0.1.0",
                    receipt.schema, receipt.version
                ),
            ));
        }
        if receipt.key_id != keyid {
            return Err((
                seq,
                "key_id",
                format!(
                    "payload names key `{}` but the envelope was signed by `{keyid}`",
                    receipt.key_id
                ),
            ));
        }
        let expected = self.report.receipts;
        if receipt.seq != expected || receipt.seq > MAX_SAFE_INTEGER {
            return Err((
                seq,
                "seq",
                format!(
                    "seq {} where {expected} was expected (a receipt is missing, duplicated or reordered)",
                    receipt.seq
                ),
            ));
        }
        if receipt.prev != self.prev {
            return Err((
                seq,
                "prev",
                format!(
                    "prev {} does not name the previous receipt {}",
                    receipt.prev.as_deref().unwrap_or("null"),
                    self.prev.as_deref().unwrap_or("null")
                ),
            ));
        }
        self.run(&receipt.run_id, seq)?;
        let id = format!(
            "receipt_{}_{}",
            receipt.run_id.trim_start_matches("run_"),
            receipt.seq
        );
        if receipt.id != id {
            return Err((
                seq,
                "id",
                format!("id `{}` where `{id}` was expected", receipt.id),
            ));
        }
        decided_by_form(&receipt).map_err(|why| (seq, "decided_by", why))?;
        self.time(&receipt.created_at, seq)?;
        if let Some(expected) = self.policy_set.filter(|p| *p != receipt.policy_set) {
            return Err((
                seq,
                "policy_set",
                format!(
                    "receipt was decided under policy set {}, not {expected}",
                    receipt.policy_set
                ),
            ));
        }
        // One SHA-256 for both: the leaf data is the receipt hash's 32 bytes.
        let raw = raw_hash(payload);
        let hash = format!("sha256:{}", crate::policy::hex(&raw));
        debug_assert_eq!(hash, receipt_hash(payload));
        self.tree.push(&raw);
        self.prev = Some(hash.clone());
        self.report.last_hash = Some(hash);
        self.report.receipts += 1;
        Ok(receipt)
    }

    fn checkpoint(&mut self, json: serde_json::Value, keyid: &str) -> Result<(), LineError> {
        let cp: Checkpoint = serde_json::from_value(json)
            .map_err(|e| (None, "checkpoint", format!("not a checkpoint: {e}")))?;
        if cp.schema != "craik.receipt_checkpoint"
            || cp.version != craik_contracts::CONTRACT_VERSION
        {
            return Err((
                None,
                "checkpoint",
                format!(
                    "schema `{}` version `{}`, expected craik.receipt_checkpoint 0.1.0",
                    cp.schema, cp.version
                ),
            ));
        }
        if cp.key_id != keyid {
            return Err((
                None,
                "key_id",
                format!(
                    "checkpoint names key `{}` but was signed by `{keyid}`",
                    cp.key_id
                ),
            ));
        }
        self.run(&cp.run_id, None)?;
        self.time(&cp.created_at, None)?;
        if cp.index != self.report.checkpoints {
            return Err((
                None,
                "checkpoint",
                format!(
                    "checkpoint index {} where {} was expected (a checkpoint is missing or duplicated)",
                    cp.index, self.report.checkpoints
                ),
            ));
        }
        if cp.tree_size != self.report.receipts {
            return Err((
                None,
                "checkpoint",
                format!(
                    "tree size {} but {} receipts precede it",
                    cp.tree_size, self.report.receipts
                ),
            ));
        }
        if cp.last_receipt_hash != self.prev {
            return Err((
                None,
                "checkpoint",
                "last receipt hash does not match the receipt before it".into(),
            ));
        }
        let root = format!("sha256:{}", crate::policy::hex(&self.tree.root()));
        if cp.root_hash != root {
            return Err((
                None,
                "checkpoint",
                format!(
                    "Merkle root {} does not match the receipts ({root})",
                    cp.root_hash
                ),
            ));
        }
        self.report.checkpoints += 1;
        self.report.closed = cp.is_final;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::dsse::Envelope;

    thread_local! {
        /// Set by a test: no verifier thread can be started from this thread (as under a
        /// process or thread limit).
        pub(super) static REFUSE_THREADS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// A closed journal of `n` receipts signed by a fixed test key, a checkpoint every 8.
    fn journal_of(n: u64, signer: &crate::Ed25519Signer) -> Vec<u8> {
        use craik_contracts::{Object, PolicyProfile, ReceiptResult, ReceiptStatus};
        let mut writer = crate::JournalWriter::new("run_threads", 8);
        let at = time::macros::datetime!(2026-11-20 10:00 UTC);
        let mut out = Vec::new();
        for i in 0..n {
            let draft = crate::ReceiptDraft {
                task_id: "task_t".into(),
                actor: "runner_fixture".into(),
                capability: "repo.read".into(),
                target: format!("docs/{i}.md"),
                policy_profile: PolicyProfile::Strict,
                fail_open: false,
                reason: "r".into(),
                result: ReceiptResult {
                    status: ReceiptStatus::Passed,
                    summary: "s".into(),
                    metadata: Object::new(),
                },
                redacted: true,
                policy_set: "sha256:00".into(),
                request_hash: String::new(),
                decision: crate::Decision::Allow,
                determining_policies: Vec::new(),
                decided_by: crate::DecidedBy {
                    kind: DecidedByKind::Policy,
                    by: String::new(),
                },
                mode: crate::Mode::Enforce,
                action: None,
            };
            out.extend(writer.append(draft, at, signer).unwrap());
        }
        out.extend(writer.close(at, signer).unwrap());
        out
    }

    /// Issue 31 item 5: verifiers degrade to fewer threads rather than fail. With no thread
    /// to be had, verification with any thread count checks every part on the calling thread
    /// and reaches the same report as one thread — on a valid journal and on one whose line
    /// 30 was changed.
    #[test]
    fn no_thread_to_be_had_means_fewer_threads_and_the_same_verdict() {
        let signer = crate::Ed25519Signer::from_seed(&[0x31; 32]);
        let mut ring = KeyRing::new();
        ring.add(&crate::Signer::public_key(&signer)).unwrap();
        let good = journal_of(40, &signer);
        let mut bad_lines: Vec<Vec<u8>> = good.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
        let line = &mut bad_lines[29];
        let at = line.windows(10).position(|w| w == b"\"payload\":").unwrap() + 20;
        line[at] = if line[at] == b'A' { b'B' } else { b'A' };
        let bad = bad_lines.join(&b'\n');
        for bytes in [&good, &bad] {
            let verify = |threads| {
                verify_journal_with(
                    bytes,
                    &ring,
                    VerifyOptions {
                        threads,
                        ..VerifyOptions::default()
                    },
                    &mut |_, _| {},
                )
            };
            let reference = verify(1);
            REFUSE_THREADS.with(|r| r.set(true));
            let refused: Vec<Report> = [2, 4, 16].into_iter().map(verify).collect();
            REFUSE_THREADS.with(|r| r.set(false));
            for report in refused {
                assert_eq!(report, reference);
            }
        }
        assert!(verify_journal(&good, &ring, None).is_valid());
        let failure = verify_journal(&bad, &ring, None).failure.unwrap();
        assert_eq!((failure.line, failure.what.as_str()), (30, "signature"));
    }

    /// Issue 20: the message built around the decoded payload is the plain `pae` of it, for
    /// every length (padding 0, 1 and 2) and an empty payload.
    #[test]
    fn pae_decoded_is_pae() {
        for len in 0..70usize {
            let payload: Vec<u8> = (0..len).map(|i| (i * 37 % 256) as u8).collect();
            let b64 = STANDARD.encode(&payload);
            let (message, at) = pae_decoded(RECEIPT_PAYLOAD_TYPE, &b64).unwrap();
            assert_eq!(message, pae(RECEIPT_PAYLOAD_TYPE, &payload), "{len}");
            assert_eq!(message.get(at..).unwrap(), payload.as_slice(), "{len}");
        }
        assert!(pae_decoded(RECEIPT_PAYLOAD_TYPE, "abc").is_err());
        assert!(pae_decoded(RECEIPT_PAYLOAD_TYPE, "ab=c").is_err());
    }

    /// What lets `prepare` skip re-encoding a payload: `STANDARD` decodes only the one
    /// canonical encoding of any bytes.
    #[test]
    fn only_canonical_base64_decodes() {
        for bytes in [&b""[..], b"a", b"ab", b"abc", b"abcd", &[0xff; 7]] {
            let text = STANDARD.encode(bytes);
            assert_eq!(STANDARD.decode(&text).unwrap(), bytes);
        }
        // Trailing bits set, padding missing or extra, whitespace, URL-safe letters.
        for text in [
            "YR==", "YWJ", "YQ", "YQ===", "YW Jj", "YWJj\n", "_-8=", "YQ==",
        ] {
            let decoded = STANDARD.decode(text);
            assert!(
                decoded.as_ref().is_err() || STANDARD.encode(decoded.as_ref().unwrap()) == text,
                "{text:?}"
            );
        }
        assert!(STANDARD.decode("YR==").is_err());
        assert!(STANDARD.decode("YQ").is_err());
    }

    /// Issue 20: the in-place compact-form check agrees with `serde_json::to_vec`, and refuses
    /// any other spelling.
    #[test]
    fn the_compact_form_is_serde_json() {
        let mut envelopes = vec![
            Envelope::new(RECEIPT_PAYLOAD_TYPE, b"{\"a\":1}", "sha256:ab", &[7u8; 64]),
            Envelope::new("odd \"type\"\n\u{1}é", b"", "key\\id", &[0u8; 64]),
        ];
        let mut two = envelopes[0].clone();
        two.signatures.push(two.signatures[0].clone());
        envelopes.push(two);
        let mut none = envelopes[0].clone();
        none.signatures.clear();
        envelopes.push(none);
        for envelope in &envelopes {
            let line = serde_json::to_vec(envelope).unwrap();
            let envelope: EnvelopeRef<'_> = serde_json::from_slice(&line).unwrap();
            let envelope = &envelope;
            assert!(is_compact_form(envelope, &line), "{envelope:?}");
            let spaced = String::from_utf8(line.clone())
                .unwrap()
                .replacen(':', ": ", 1);
            assert!(!is_compact_form(envelope, spaced.as_bytes()));
            let mut longer = line.clone();
            longer.push(b' ');
            assert!(!is_compact_form(envelope, &longer));
            let mut shorter = line.clone();
            shorter.pop();
            assert!(!is_compact_form(envelope, &shorter));
        }
    }
}
