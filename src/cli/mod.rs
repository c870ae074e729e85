//! The command line. Only this module sees the terminal, environment
//! variables and exit codes; the library never prints.
//!
//! Exit codes: 0 ok; 1 a check failed (`check` over budget or a forbidden
//! finding, `diff --fail-over` exceeded, `--verify` found a disagreement with
//! XLA, `fits`: it does not fit); 2 usage or input error (unreadable file, parse error).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hlomem::render::RenderOptions;

use self::args::{
    AnalyzeFormatArg, BackendArg, DocumentArg, ExplainFormatArg, FitsFormatArg, GateFormatArg,
    InterfaceArg, LibtpuArg, TargetsFormatArg, TpuArg,
};

mod analyze;
mod args;
mod explain;
mod fits;
mod gate;
mod stdin;

/// Static memory analysis of XLA HLO dumps.
#[derive(Debug, Parser)]
#[command(
    name = "hlomem",
    version,
    about,
    long_about = None,
    after_help = "Exit codes: 0 ok; 1 a check failed (check over budget or a --fail-on finding, diff --fail-over \
                  exceeded, analyze --verify disagreed with XLA, fits: it does not); 2 usage or input error."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// When to use colors: auto uses them only on a terminal and never with NO_COLOR.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
    /// Whose settings the words name: the Python package passes `python`, so
    /// that a note says what to do in Python, not which flag to pass.
    #[arg(long, global = true, value_enum, default_value_t = InterfaceArg::Cli, hide = true)]
    interface: InterfaceArg,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// What `analyze`, `check` and `diff` read and how they show it.
#[derive(Debug, clap::Args)]
pub struct Selection {
    /// Only modules whose dump name or module name matches (e.g. `*train_step*`).
    #[arg(long, value_name = "GLOB")]
    module: Option<String>,
    /// Apply this backend's memory rules instead of the one the module text shows
    /// (tiled layouts mean TPU; GPU and CPU leave their names in backend configs and
    /// custom calls; a module with no sign of either gets CPU rules).
    #[arg(long, value_enum, value_name = "BACKEND")]
    backend: Option<BackendArg>,
    /// The TPU chip, which sizes tuple tables, when the dump folder does not name it
    /// (its `*.target_arguments.txt`); v5e's rules are used when neither says.
    #[arg(long, value_enum, value_name = "CHIP")]
    tpu: Option<TpuArg>,
    /// The libtpu release that compiled a TPU module (`pip show libtpu`: 0.0.42.1,
    /// 0.0.52), when its text does not show it: the same text can take other HBM
    /// under 0.0.42's and 0.0.52's rules, and without it a figure that differs
    /// is "about", with both. Another release's rules are not known: as unnamed.
    #[arg(long, value_name = "VERSION", value_parser = args::libtpu_version)]
    libtpu: Option<LibtpuArg>,
    /// Parse every fusion body at load. By default a fusion's body is parsed
    /// when the accounting or a report reads it, and the others get a
    /// structural check only (balanced brackets, one instruction per line,
    /// names defined once); `--strict` refuses any line the grammar refuses.
    #[arg(long)]
    strict: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Memory XLA will need for each module of a dump: totals, the live peak,
    /// findings, parameters and outputs.
    Analyze {
        /// Dump folders (XLA_FLAGS=--xla_dump_to=DIR) or HLO text files; `-` reads
        /// HLO text (`compiled.as_text()`) from standard input.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        selection: Selection,
        #[arg(long, value_enum, default_value_t = AnalyzeFormatArg::Text)]
        format: AnalyzeFormatArg,
        /// With several modules: how many of the largest to show in detail.
        #[arg(long, default_value_t = 3, value_name = "N")]
        top: usize,
        /// List everything in the text and Markdown reports: every group at the
        /// peak, the buffers themselves, every finding and detail, parameters and
        /// outputs (JSON always has everything).
        #[arg(long, short = 'v')]
        verbose: bool,
        /// Also read XLA's own reports beside each HLO file (`-buffer-assignment.txt`,
        /// `-buffer-assignment-values.txt`, `-live-range.txt`) and list every number
        /// where hlomem and XLA disagree; exit 1 if any does.
        #[arg(long)]
        verify: bool,
        /// Also write a self-contained HTML report (a chart of memory over the
        /// schedule, the buffers at the peak, the findings) to FILE.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Also write the largest module's memory chart as an SVG to FILE.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// One device's memory, drawn as a line on the HTML and SVG charts
        /// (`16GiB`, `80GB`, bytes, as `check --budget` takes it; `check` fails a
        /// module over it).
        #[arg(long, value_name = "SIZE")]
        budget: Option<String>,
    },
    /// Fail (exit 1) when a module needs more memory than a budget, or has findings
    /// that must not appear.
    Check {
        /// Dump folders or HLO text files; `-` reads HLO text from standard input.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// One device's memory: `16GiB` (or `16G`: powers of 1024), `80GB` (powers
        /// of 1000), `1.5TiB` or bytes. SPMD modules are compared per device.
        #[arg(long, value_name = "SIZE")]
        budget: Option<String>,
        /// The budget is the whole program's memory over all its devices: SPMD
        /// modules count their per-device memory times their devices.
        #[arg(long)]
        whole_program: bool,
        /// Budgets are per device already; kept so that older scripts still run.
        #[arg(long, hide = true, conflicts_with = "whole_program")]
        per_device: bool,
        /// Finding codes or names that fail the check (e.g. `HM003` or `donation-copied`); none by
        /// default. A finding reported below its rule's severity (an HM003 copy every donated
        /// training step makes: `info`, "expected") never fails it.
        #[arg(long, value_name = "CODE", num_args = 1..)]
        fail_on: Vec<String>,
        #[command(flatten)]
        selection: Selection,
        #[arg(long, value_enum, default_value_t = GateFormatArg::Text)]
        format: GateFormatArg,
    },
    /// What changed between two dumps of the same program: totals, what holds the
    /// peak (by source line and role), findings.
    Diff {
        /// The dump (folder or file) before the change; `-` reads HLO text from
        /// standard input.
        old: PathBuf,
        /// The dump after the change (or `-`).
        new: PathBuf,
        /// Fail (exit 1) when a module's total grew by more than this (`100MiB`, `100M`, bytes;
        /// 0: any growth).
        #[arg(long, value_name = "SIZE")]
        fail_over: Option<String>,
        /// Also list every changed group and every buffer new or grown at the peak.
        #[arg(long, short = 'v')]
        verbose: bool,
        #[command(flatten)]
        selection: Selection,
        #[arg(long, value_enum, default_value_t = GateFormatArg::Text)]
        format: GateFormatArg,
    },
    /// Explain an out-of-memory message in plain words, with what to try.
    Explain {
        /// A file with the message (a traceback or log is fine); `-` or nothing reads standard input.
        input: Option<PathBuf>,
        /// An XLA dump folder of the program that failed: links the message's buffers
        /// to instructions, arguments and source lines.
        #[arg(long, value_name = "DIR")]
        dump: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = ExplainFormatArg::Text)]
        format: ExplainFormatArg,
    },
    /// The devices `hlomem.compile_for` compiles for without having them: one
    /// device's memory and what a program may use of it. With TARGET, that one.
    Targets {
        /// A target (`tpu-v5e:2x2`, `h100`, `h100:1x1x8`) or the path of a GPU
        /// target config (`GpuTargetConfigProto` text, `l40s.txtpb`).
        #[arg(value_name = "TARGET")]
        target: Option<String>,
        #[command(flatten)]
        gpu: fits::GpuArgs,
        #[arg(long, value_enum, default_value_t = TargetsFormatArg::Text)]
        format: TargetsFormatArg,
    },
    /// Whether a program fits on one device of a target, or within a budget, and
    /// why: exit 1 when it does not. Its figures are a module's (FILE: hlomem's
    /// count, and XLA's own from the buffer-assignment report beside it, which
    /// decides) or given (--needs, --xla-needs).
    Fits {
        /// An optimized HLO file of an XLA dump (`*after_optimizations.txt`), or a
        /// dump folder holding one module.
        #[arg(value_name = "FILE", required_unless_present = "needs")]
        path: Option<PathBuf>,
        /// A target (`tpu-v5e:2x2`, `h100`, `h100:1x1x8`; `hlomem targets` lists
        /// them) or the path of a GPU target config.
        #[arg(long, value_name = "TARGET", required_unless_present = "budget")]
        target: Option<String>,
        /// Instead of a target, one device's memory, as `check --budget` takes it
        /// (`16GiB`, `80GB`, bytes); a TPU module's chip is then its dump
        /// folder's, else v5e's.
        #[arg(long, value_name = "SIZE", conflicts_with = "target")]
        budget: Option<String>,
        /// The device memory the program needs, by hlomem's count (`check`'s
        /// figure per device: `12GiB`, bytes); with FILE and --refused, the
        /// compiler's own figure (the larger of it and the module's decides).
        #[arg(long, value_name = "SIZE")]
        needs: Option<String>,
        /// XLA's own figure for the same memory (the buffer assignment's total
        /// of the device's memory space), which decides when given.
        #[arg(long, value_name = "SIZE", conflicts_with = "path")]
        xla_needs: Option<String>,
        /// The target's compiler refused the program for memory: it needs at
        /// least what the figures say, and does not fit.
        #[arg(long)]
        refused: bool,
        /// The compiler's error, when the compile stopped after XLA had assigned
        /// buffers: the figures are that module's.
        #[arg(long, value_name = "ERROR")]
        unfinished: Option<String>,
        #[command(flatten)]
        gpu: fits::GpuArgs,
        #[arg(long, value_enum, default_value_t = FitsFormatArg::Text)]
        format: FitsFormatArg,
    },
    /// Print the JSON Schema of a command's `--format json` output.
    Schema {
        #[arg(value_enum)]
        command: DocumentArg,
    },
    /// Print the long explanation of a finding code (HM001...), or list them all.
    ExplainCode {
        /// A code (`HM001`) or name (`not-donated`); nothing lists every code.
        code: Option<String>,
    },
}

pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILED_CHECK: u8 = 1;
pub const EXIT_INPUT_ERROR: u8 = 2;

/// What every command knows about the terminal.
#[derive(Debug, Clone, Copy)]
pub struct Terminal {
    pub stdout_color: bool,
    pub stderr_color: bool,
    /// A progress bar may be drawn on stderr.
    pub progress: bool,
    /// Whose settings notes and reports name (`--tpu`, or Python's terms).
    pub interface: hlomem::chip::Interface,
}

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
    let term = Terminal {
        stdout_color: use_color(cli.color, std::io::stdout().is_terminal()),
        stderr_color: use_color(cli.color, std::io::stderr().is_terminal()),
        progress: std::io::stderr().is_terminal(),
        interface: cli.interface.into(),
    };
    let code = match cli.command {
        Command::Analyze {
            paths,
            selection,
            format,
            top,
            verbose,
            verify,
            html,
            svg,
            budget,
        } => analyze::run(
            &paths,
            &selection,
            analyze::Extras {
                format: format.into(),
                top,
                verbose,
                verify,
                html,
                svg,
                budget,
            },
            term,
        ),
        Command::Check {
            paths,
            budget,
            whole_program,
            per_device: _,
            fail_on,
            selection,
            format,
        } => gate::check(
            &paths,
            gate::CheckArgs {
                budget: budget.as_deref(),
                whole_program,
                fail_on: &fail_on,
            },
            &selection,
            format.into(),
            term,
        ),
        Command::Diff {
            old,
            new,
            fail_over,
            verbose,
            selection,
            format,
        } => gate::diff(
            &old,
            &new,
            fail_over.as_deref(),
            verbose,
            &selection,
            format.into(),
            term,
        ),
        Command::Explain {
            input,
            dump,
            format,
        } => explain::run(
            input,
            dump,
            format.into(),
            RenderOptions {
                color: term.stdout_color,
                top: 1,
                verbose: false,
                interface: term.interface,
            },
            term.stderr_color,
        ),
        Command::ExplainCode { code } => explain_code(code.as_deref()),
        Command::Targets {
            target,
            gpu,
            format,
        } => fits::targets(target.as_deref(), &gpu, format.into(), term.interface),
        Command::Fits {
            path,
            target,
            budget,
            needs,
            xla_needs,
            refused,
            unfinished,
            gpu,
            format,
        } => fits::fits(
            &gpu,
            fits::FitsArgs {
                target,
                budget,
                path,
                needs,
                xla_needs,
                refused,
                unfinished,
            },
            format.into(),
            term.interface,
        ),
        Command::Schema { command } => {
            let document: hlomem::schema::Document = command.into();
            let schema = document.schema();
            match write_out(|out| {
                serde_json::to_writer_pretty(&mut *out, &schema)?;
                writeln!(out)
            }) {
                Ok(()) => EXIT_OK,
                Err(code) => code,
            }
        }
    };
    ExitCode::from(code)
}

fn explain_code(code: Option<&str>) -> u8 {
    let mut stdout = std::io::stdout().lock();
    match code {
        None => {
            for rule in hlomem::findings::CODES {
                let _ = writeln!(stdout, "{}  {:<24} {}", rule.code, rule.name, rule.summary);
            }
            EXIT_OK
        }
        Some(code) => match hlomem::findings::rule(code) {
            Some(rule) => {
                let _ = write!(stdout, "{}", rule.doc);
                EXIT_OK
            }
            None => {
                let known: Vec<&str> = hlomem::findings::CODES.iter().map(|r| r.code).collect();
                eprintln!(
                    "error: no finding code {code:?}; known codes: {}",
                    known.join(", ")
                );
                EXIT_INPUT_ERROR
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

/// Writes rendered output, ignoring a closed pipe (`hlomem ... | head`).
pub fn write_out(render: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<(), u8> {
    // Standard output is line-buffered: a JSON report of a big module is
    // hundreds of thousands of lines, each its own write without this buffer.
    let mut stdout = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    match render(&mut stdout).and_then(|_| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => {
            eprintln!("error: cannot write output: {e}");
            Err(EXIT_INPUT_ERROR)
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
