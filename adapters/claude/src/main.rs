//! `craik-adapter-claude [--fixture SCENARIO.json] [--cli PATH]`: Claude as a prompt-handoff runner
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
        handoff::Cli::Claude,
        include_str!("../../../runners/claude.json"),
        &args,
    ) {
        Ok(mut runner) => serve::serve(&mut runner),
        Err(why) => {
            #[allow(
                clippy::print_stderr,
                reason = "the host captures stderr as diagnostics"
            )]
            {
                eprintln!("craik-adapter-claude: {why}");
            }
            std::process::ExitCode::from(2)
        }
    }
}
