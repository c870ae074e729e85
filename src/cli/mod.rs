//! The command line. Only this module sees the terminal, environment
//! variables and exit codes; the library never prints.
//!
//! Exit codes: 0 ok; 1 a check failed (`--verify` found a disagreement with
//! XLA; budgets in later releases); 2 usage or input error (unreadable file,
//! parse error).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod explain;
use hlomem::render::{self, Format, RenderOptions};

/// Static memory analysis of XLA HLO dumps.
#[derive(Debug, Parser)]
#[command(name = "hlomem", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// When to use colors: auto uses them only on a terminal and never with NO_COLOR.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Summarize HLO modules: memory XLA will need, the live peak, parameters and outputs.
    Analyze {
        /// HLO text files (`*after_optimizations.txt` from XLA_FLAGS=--xla_dump_to=DIR).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Also read XLA's own reports beside each HLO file (`-buffer-assignment.txt`,
        /// `-buffer-assignment-values.txt`, `-live-range.txt`) and list every number
        /// where hlomem and XLA disagree; exit 1 if any does.
        #[arg(long)]
        verify: bool,
    },
    /// Print the long explanation of a finding code (HM001...), or list them all.
    ExplainCode {
        /// A code (`HM001`) or name (`not-donated`); nothing lists every code.
        code: Option<String>,
    },
    /// Explain an out-of-memory message in plain words, with what to try.
    Explain {
        /// A file with the message (a traceback or log is fine); `-` or nothing reads standard input.
        input: Option<PathBuf>,
        /// An XLA dump folder of the program that failed: links the message's buffers
        /// to instructions, arguments and source lines.
        #[arg(long, value_name = "DIR")]
        dump: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

pub const EXIT_OK: u8 = 0;
pub const EXIT_OVER_THRESHOLD: u8 = 1;
pub const EXIT_INPUT_ERROR: u8 = 2;

pub fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // clap uses 0 for --help/--version and 2 for usage errors, as we do.
            return ExitCode::from(if e.use_stderr() {
                EXIT_INPUT_ERROR
            } else {
                EXIT_OK
            });
        }
    };
    let stdout_color = use_color(cli.color, std::io::stdout().is_terminal());
    let stderr_color = use_color(cli.color, std::io::stderr().is_terminal());
    match cli.command {
        Command::ExplainCode { code } => explain_code(code.as_deref()),
        Command::Explain {
            input,
            dump,
            format,
        } => explain::run(
            input,
            dump,
            format,
            RenderOptions {
                color: stdout_color,
            },
            stderr_color,
        ),
        Command::Analyze {
            paths,
            format,
            verify,
        } => {
            let report = hlomem::analyze_paths(&paths, hlomem::AnalyzeOptions { verify });
            let mut stderr = std::io::stderr().lock();
            for error in &report.errors {
                let _ = writeln!(stderr, "{}", error.error.render(stderr_color));
            }
            let failed = !report.errors.is_empty();
            // A lone file that failed prints no report at all: nothing that looks like a result.
            if !(failed && report.modules.is_empty()) || format == Format::Json {
                let mut stdout = std::io::stdout().lock();
                let options = RenderOptions {
                    color: stdout_color,
                };
                if let Err(e) = render::render(&report, format, options, &mut stdout)
                    .and_then(|_| stdout.flush())
                {
                    if e.kind() != std::io::ErrorKind::BrokenPipe {
                        let _ = writeln!(stderr, "error: cannot write output: {e}");
                        return ExitCode::from(EXIT_INPUT_ERROR);
                    }
                }
            }
            let disagrees = report
                .modules
                .iter()
                .any(|m| m.verification.as_ref().is_some_and(|v| !v.agrees()));
            ExitCode::from(if failed {
                EXIT_INPUT_ERROR
            } else if disagrees {
                EXIT_OVER_THRESHOLD
            } else {
                EXIT_OK
            })
        }
    }
}

fn explain_code(code: Option<&str>) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match code {
        None => {
            for rule in hlomem::findings::CODES {
                let _ = writeln!(stdout, "{}  {:<24} {}", rule.code, rule.name, rule.summary);
            }
            ExitCode::from(EXIT_OK)
        }
        Some(code) => match hlomem::findings::rule(code) {
            Some(rule) => {
                let _ = write!(stdout, "{}", rule.doc);
                ExitCode::from(EXIT_OK)
            }
            None => {
                let known: Vec<&str> = hlomem::findings::CODES.iter().map(|r| r.code).collect();
                eprintln!(
                    "error: no finding code {code:?}; known codes: {}",
                    known.join(", ")
                );
                ExitCode::from(EXIT_INPUT_ERROR)
            }
        },
    }
}

fn use_color(choice: ColorChoice, is_terminal: bool) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_valid() {
        super::Cli::command().debug_assert();
    }
}
