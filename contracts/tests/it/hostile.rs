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

/// Issue 21 item 4: a `model_step` report's bounds hold exactly at their edges, and the JSON
/// form refuses what the type cannot hold (negative counts, unknown fields).
#[test]
fn issue_21_model_step_reports_are_bounded_at_their_edges() {
    use craik_contracts::channel::{
        EventNotification, MAX_MODEL_STEP_TEXT, MAX_MODEL_STEP_TOKENS, ModelStepOutcome,
        ModelStepReport,
    };
    let ok = ModelStepReport {
        provider: "openai-responses".into(),
        model: "gpt-4.1".into(),
        endpoint_host: "api.openai.com:443".into(),
        request_sha256: format!("sha256:{}", "0f".repeat(32)),
        response_id: Some("resp_1".into()),
        input_tokens: Some(MAX_MODEL_STEP_TOKENS - 1),
        output_tokens: Some(1),
        total_tokens: Some(MAX_MODEL_STEP_TOKENS),
        latency_ms: 0,
        retries: 0,
        streamed: true,
        outcome: ModelStepOutcome::Ok,
    };
    assert_eq!(ok.problem(), None);
    let with = |f: &dyn Fn(&mut ModelStepReport)| {
        let mut r = ok.clone();
        f(&mut r);
        r.problem()
    };
    // One past the ceiling; a total that is not the sum (or would overflow).
    assert!(
        with(&|r| {
            r.output_tokens = Some(2);
            r.total_tokens = Some(MAX_MODEL_STEP_TOKENS + 1);
        })
        .unwrap()
        .starts_with("total_tokens 10000001 is above the ceiling")
    );
    assert!(
        with(&|r| r.total_tokens = Some(MAX_MODEL_STEP_TOKENS - 1))
            .unwrap()
            .contains("is not input_tokens")
    );
    assert!(
        with(&|r| {
            r.input_tokens = Some(u64::MAX);
            r.output_tokens = Some(1);
            r.total_tokens = Some(0);
        })
        .is_some()
    );
    // Issue 30: unknown usage is all three `null`, never a mix.
    assert_eq!(
        with(&|r| {
            r.input_tokens = None;
            r.output_tokens = None;
            r.total_tokens = None;
        }),
        None
    );
    for k in 0..3 {
        assert!(
            with(&|r| match k {
                0 => r.input_tokens = None,
                1 => r.output_tokens = None,
                _ => r.total_tokens = None,
            })
            .unwrap()
            .contains("all known or all `null`"),
            "{k}"
        );
    }
    // Strings: empty, too long, a URL, a space, a bad digest.
    assert!(with(&|r| r.model = String::new()).is_some());
    assert!(with(&|r| r.model = "m".repeat(MAX_MODEL_STEP_TEXT)).is_none());
    assert!(with(&|r| r.model = "m".repeat(MAX_MODEL_STEP_TEXT + 1)).is_some());
    assert!(with(&|r| r.model = "gpt 4".into()).is_some());
    assert!(with(&|r| r.endpoint_host = "https://api.openai.com".into()).is_some());
    assert!(with(&|r| r.endpoint_host = "user@api.openai.com".into()).is_some());
    assert!(with(&|r| r.provider = "OpenAI".into()).is_some());
    assert!(with(&|r| r.request_sha256 = format!("sha256:{}", "0F".repeat(32))).is_some());
    assert!(with(&|r| r.response_id = Some("resp\n1".into())).is_some());
    assert!(with(&|r| r.retries = 101).is_some());
    assert!(with(&|r| r.latency_ms = 86_400_001).is_some());
    // The wire form: negative counts and unknown fields never parse.
    let line = |report: serde_json::Value| {
        serde_json::from_value::<EventNotification>(serde_json::json!({
            "method": "event",
            "params": {"request": 1, "kind": "model_step", "model_step": report}
        }))
    };
    let good = serde_json::to_value(&ok).unwrap();
    assert!(line(good.clone()).is_ok());
    let mut negative = good.clone();
    negative["output_tokens"] = serde_json::json!(-1);
    assert!(line(negative).is_err());
    let mut unknown = good;
    unknown["cost_usd"] = serde_json::json!(1);
    assert!(line(unknown).is_err());
}
