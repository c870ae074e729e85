//! `--format github`: GitHub Actions workflow commands, which the Actions UI
//! shows as annotations on the run and on the files.

use std::io::{self, Write};

use super::sized;
use crate::analysis::ChipFigures;
use crate::report::Report;

/// Workflow-command values escape `%`, CR and LF (and `,`/`:` in properties).
fn escape(text: &str, property: bool) -> String {
    let mut s = text
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A");
    if property {
        s = s.replace(':', "%3A").replace(',', "%2C");
    }
    s
}

pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    for m in report.largest_first() {
        let file = escape(&m.file, true);
        let by_chip = |of: fn(&ChipFigures) -> u64| {
            sized(of(&m.memory.figures()), !m.memory.depends_on_chip(of))
        };
        writeln!(
            out,
            "::notice file={file},title={}::{}: total {}, temp {}, arguments {}, outputs {} (aliased {})",
            escape(&format!("hlomem {}", m.key), true),
            escape(&m.name, false),
            sized(m.memory.total_bytes, m.memory.total_exact),
            sized(m.memory.temp_bytes, m.memory.temp_exact()),
            by_chip(|f| f.argument_bytes),
            by_chip(|f| f.output_bytes),
            by_chip(|f| f.alias_bytes)
        )?;
        for f in &m.findings {
            let level = match f.severity {
                crate::findings::Severity::Warning => "warning",
                crate::findings::Severity::Info => "notice",
            };
            writeln!(
                out,
                "::{level} file={file},title={}::{}",
                escape(&format!("{} {} in {}", f.code, f.name, m.key), true),
                escape(&format!("{} Fix: {}", f.message, f.fix), false)
            )?;
        }
    }
    for e in &report.errors {
        let mut props = format!("file={}", escape(&e.file, true));
        if let (Some(l), Some(c)) = (e.line, e.column) {
            props.push_str(&format!(",line={l},col={c}"));
        }
        writeln!(
            out,
            "::error {props},title=hlomem: cannot read::{}",
            escape(&e.message, false)
        )?;
    }
    Ok(())
}
