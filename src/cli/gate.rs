//! `hlomem check` and `hlomem diff`.

use std::path::{Path, PathBuf};

use hlomem::gate;
use hlomem::render::{self, RenderOptions};

use super::analyze::load;
use super::{write_out, Selection, Terminal, EXIT_FAILED_CHECK, EXIT_INPUT_ERROR, EXIT_OK};

fn size_arg(name: &str, text: &str) -> Result<u64, u8> {
    hlomem::units::parse_size(text).map_err(|e| {
        eprintln!("error: {name}: {e}");
        EXIT_INPUT_ERROR
    })
}

pub fn check(
    paths: &[PathBuf],
    budget: Option<&str>,
    per_device: bool,
    fail_on: &[String],
    selection: &Selection,
    term: Terminal,
) -> u8 {
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
    let budget = match budget.map(|b| size_arg("--budget", b)).transpose() {
        Ok(b) => b.unwrap_or(u64::MAX),
        Err(code) => return code,
    };
    let report = match load(paths, selection, false, term) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let result = gate::check(&report, budget, per_device, fail_on);
    let options = RenderOptions {
        color: term.stdout_color,
        top: 3,
    };
    if let Err(code) =
        write_out(|out| render::render_check(&result, selection.format, options, out))
    {
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
    selection: &Selection,
    term: Terminal,
) -> u8 {
    let limit = match fail_over.map(|s| size_arg("--fail-over", s)).transpose() {
        Ok(l) => l,
        Err(code) => return code,
    };
    let (old_report, new_report) = match (
        load(&[old.to_path_buf()], selection, false, term),
        load(&[new.to_path_buf()], selection, false, term),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    let d = gate::diff(&old_report, &new_report);
    let options = RenderOptions {
        color: term.stdout_color,
        top: 3,
    };
    if let Err(code) = write_out(|out| render::render_diff(&d, selection.format, options, out)) {
        return code;
    }
    if !old_report.errors.is_empty() || !new_report.errors.is_empty() {
        return EXIT_INPUT_ERROR;
    }
    let too_much = limit.is_some_and(|l| d.modules.iter().any(|m| m.growth() > i128::from(l)));
    if too_much {
        EXIT_FAILED_CHECK
    } else {
        EXIT_OK
    }
}
