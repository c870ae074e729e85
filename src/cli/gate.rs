//! `hlomem check` and `hlomem diff`.

use std::path::{Path, PathBuf};

use hlomem::gate;
use hlomem::render::{self, GateFormat, RenderOptions};

use super::analyze::load;
use super::{write_out, Selection, Terminal, EXIT_FAILED_CHECK, EXIT_INPUT_ERROR, EXIT_OK};

/// A size option: `parse` is `parse_size` (a budget) or `parse_bytes` (a
/// limit that may be 0).
fn size_arg(name: &str, text: &str, parse: fn(&str) -> Result<u64, String>) -> Result<u64, u8> {
    parse(text).map_err(|e| {
        eprintln!("error: {name}: {e}");
        EXIT_INPUT_ERROR
    })
}

/// `check`'s own options.
pub struct CheckArgs<'a> {
    pub budget: Option<&'a str>,
    pub whole_program: bool,
    pub fail_on: &'a [String],
}

pub fn check(
    paths: &[PathBuf],
    args: CheckArgs,
    selection: &Selection,
    format: GateFormat,
    term: Terminal,
) -> u8 {
    let CheckArgs {
        budget,
        whole_program,
        fail_on,
    } = args;
    if budget.is_none() && fail_on.is_empty() {
        eprintln!("error: give --budget SIZE, --fail-on CODE, or both");
        return EXIT_INPUT_ERROR;
    }
    for code in fail_on {
        if hlomem::findings::rule(code).is_none() {
            eprintln!(
                "error: --fail-on {code:?} is not a finding code (see `hlomem explain-code`)"
            );
            return EXIT_INPUT_ERROR;
        }
    }
    let budget = match budget
        .map(|b| size_arg("--budget", b, hlomem::units::parse_size))
        .transpose()
    {
        Ok(b) => b,
        Err(code) => return code,
    };
    let report = match load(paths, selection, false, term) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let result = gate::check(&report, budget, whole_program, fail_on);
    let options = RenderOptions {
        color: term.stdout_color,
        top: 3,
        verbose: false,
        interface: term.interface,
    };
    if let Err(code) = write_out(|out| render::render_check(&result, format, options, out)) {
        return code;
    }
    if !report.errors.is_empty() {
        EXIT_INPUT_ERROR
    } else if result.passed {
        EXIT_OK
    } else {
        EXIT_FAILED_CHECK
    }
}

pub fn diff(
    old: &Path,
    new: &Path,
    fail_over: Option<&str>,
    verbose: bool,
    selection: &Selection,
    format: GateFormat,
    term: Terminal,
) -> u8 {
    let limit = match fail_over
        .map(|s| size_arg("--fail-over", s, hlomem::units::parse_bytes))
        .transpose()
    {
        Ok(l) => l,
        Err(code) => return code,
    };
    if old.as_os_str() == "-" && new.as_os_str() == "-" {
        eprintln!("error: `-` (standard input) can be only one side of a diff");
        return EXIT_INPUT_ERROR;
    }
    let (old_report, new_report) = match (
        load(&[old.to_path_buf()], selection, false, term),
        load(&[new.to_path_buf()], selection, false, term),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    let d = gate::diff(&old_report, &new_report, limit);
    let options = RenderOptions {
        color: term.stdout_color,
        top: 3,
        verbose,
        interface: term.interface,
    };
    if let Err(code) = write_out(|out| render::render_diff(&d, format, options, out)) {
        return code;
    }
    if !old_report.errors.is_empty() || !new_report.errors.is_empty() {
        return EXIT_INPUT_ERROR;
    }
    if !d.passed {
        EXIT_FAILED_CHECK
    } else {
        EXIT_OK
    }
}
