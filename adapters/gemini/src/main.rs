//! `craik-adapter-gemini [--fixture SCENARIO.json] [--cli PATH]`: Gemini as a prompt-handoff runner
//! over craik.channel/1 (docs/protocol.md). See `adapters/common/handoff.rs`.

#[path = "../../common/answer.rs"]
mod answer;
#[path = "../../common/handoff.rs"]
mod handoff;
#[path = "../../common/serve.rs"]
mod serve;

fn main() -> std::process::ExitCode {
    handoff::main(
        "craik-adapter-gemini",
        handoff::Cli::Gemini,
        include_str!("../../../runners/gemini.json"),
    )
}
