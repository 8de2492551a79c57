//! Any bytes: the contract decoder returns records or located problems, never panics, and
//! every problem prints on one line.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let doc = craik_contracts::decode_document(data, None);
    let problems = doc
        .error
        .iter()
        .chain(doc.records.iter().flat_map(|r| r.outcome.as_ref().err().into_iter().flatten()));
    for problem in problems {
        assert!(!problem.to_string().chars().any(char::is_control));
    }
});
