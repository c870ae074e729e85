use std::process::ExitCode;

fn main() -> ExitCode {
    hlomem_cli::run()
}

#[path = "cli/mod.rs"]
mod hlomem_cli;
