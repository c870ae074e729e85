//! `hlomem explain`.

use std::io::Write;
use std::path::PathBuf;

use hlomem::oom;
use hlomem::render::{self, ExplainFormat, RenderOptions};
use hlomem::report::explain::ExplainReport;

use super::stdin::read_stdin;
use super::{EXIT_INPUT_ERROR, EXIT_OK};

pub fn run(
    input: Option<PathBuf>,
    dump: Option<PathBuf>,
    format: ExplainFormat,
    options: RenderOptions,
    stderr_color: bool,
) -> u8 {
    let mut stderr = std::io::stderr().lock();
    let (name, bytes) = match input.as_deref() {
        None => ("standard input".to_string(), read_stdin("the message")),
        Some(p) if p.as_os_str() == "-" => {
            ("standard input".to_string(), read_stdin("the message"))
        }
        Some(p) => (
            p.display().to_string(),
            std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display())),
        ),
    };
    let bytes = match bytes {
        Ok(b) => b,
        Err(e) => {
            let _ = writeln!(stderr, "error: {e}");
            return EXIT_INPUT_ERROR;
        }
    };
    // Pasted logs are not always clean UTF-8; the message itself is ASCII.
    let text = String::from_utf8_lossy(&bytes);
    let log = oom::read_log(&text);
    let Some(lead) = oom::lead_index(&log.messages) else {
        // Said first: a binary or compressed file is the likelier mistake.
        let not_text = std::str::from_utf8(&bytes).err().map_or(String::new(), |e| {
            format!(
                "\n  {name} is not UTF-8 text (first bad byte at offset {}): a binary or compressed file?",
                e.valid_up_to()
            )
        });
        let _ = writeln!(
            stderr,
            "error: no out-of-memory message found in {name}{not_text}\n  looked for: {}\n  (hlomem explains XLA's messages; paste the whole error, tracebacks and log lines are fine)",
            oom::LOOKED_FOR
        );
        return EXIT_INPUT_ERROR;
    };
    // The dump is linked to the leading message only; every message is
    // explained, in the order they appear, with what the log around says.
    let links = match dump {
        Some(dir) => match hlomem::pipeline::link_dump(&log.messages[lead], &dir) {
            Ok(links) => Some((lead, links)),
            Err(e) => {
                let _ = writeln!(stderr, "{}", e.render(stderr_color));
                return EXIT_INPUT_ERROR;
            }
        },
        None => None,
    };
    let explanations = oom::explain_log(&log, links);
    let Some(report) = ExplainReport::of_log(&log.messages, explanations) else {
        return EXIT_INPUT_ERROR;
    };
    let mut stdout = std::io::stdout().lock();
    if let Err(e) =
        render::render_explain(&report, format, options, &mut stdout).and_then(|_| stdout.flush())
    {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            let _ = writeln!(stderr, "error: cannot write output: {e}");
            return EXIT_INPUT_ERROR;
        }
    }
    EXIT_OK
}
