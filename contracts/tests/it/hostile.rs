//! Arbitrary and mutated bytes never panic the decoder, and every problem it reports fits on
//! one line with no control characters.

use craik_contracts::{Kind, decode_document};
use proptest::prelude::*;

use crate::upstream_fixtures;

fn assert_one_line(doc: &craik_contracts::Document) -> Result<(), TestCaseError> {
    let problems = doc.error.iter().chain(
        doc.records
            .iter()
            .flat_map(|r| r.outcome.as_ref().err().into_iter().flatten()),
    );
    for p in problems {
        let shown = p.to_string();
        prop_assert!(
            !shown.chars().any(char::is_control),
            "control char in {shown:?}"
        );
        prop_assert!(!shown.is_empty());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let doc = decode_document(&bytes, None);
        assert_one_line(&doc)?;
        for kind in [Kind::TaskRequest, Kind::CaseFile] {
            assert_one_line(&decode_document(&bytes, Some(kind)))?;
        }
    }

    #[test]
    fn mutated_reference_payloads_never_panic(
        which in 0..Kind::ALL.len(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let kind = Kind::ALL[which];
        let mut bytes = serde_json::to_vec_pretty(&upstream_fixtures()[kind.schema_name()]).unwrap();
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        assert_one_line(&decode_document(&bytes, None))?;
    }
}
