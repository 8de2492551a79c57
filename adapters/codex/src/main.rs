//! `craik-adapter-codex [--fixture SCENARIO.json] [--cli PATH]`: Codex as a prompt-handoff runner
//! over craik.channel/1 (docs/protocol.md). See `adapters/common/handoff.rs`.

#[path = "../../common/answer.rs"]
mod answer;
#[path = "../../common/handoff.rs"]
mod handoff;
#[path = "../../common/serve.rs"]
mod serve;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match handoff::Handoff::from_args(
        handoff::Cli::Codex,
        include_str!("../../../runners/codex.json"),
        &args,
    ) {
        Ok(mut runner) => serve::serve(&mut runner),
        Err(why) => {
            #[allow(
                clippy::print_stderr,
                reason = "the host captures stderr as diagnostics"
            )]
            {
                eprintln!("craik-adapter-codex: {why}");
            }
            std::process::ExitCode::from(2)
        }
    }
}
