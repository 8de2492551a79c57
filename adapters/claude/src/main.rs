//! `craik-adapter-claude [--fixture SCENARIO.json] [--cli PATH]`: Claude as a prompt-handoff runner
//! over craik.channel/1 (docs/protocol.md). See `adapters/common/handoff.rs`.

#[path = "../../common/answer.rs"]
mod answer;
#[path = "../../common/handoff.rs"]
mod handoff;
#[path = "../../common/serve.rs"]
mod serve;

fn main() -> std::process::ExitCode {
    handoff::main(
        "craik-adapter-claude",
        handoff::Cli::Claude,
        include_str!("../../../runners/claude.json"),
    )
}
