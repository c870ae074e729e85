//! hlomem: static memory analysis of XLA HLO dumps.
//!
//! Data flows one way: text ([`source`]) → pest parse and typed IR ([`hlo`]) →
//! report ([`report`]) → renderers ([`render`]). See ARCHITECTURE.md.

pub mod analysis;
pub mod error;
pub mod findings;
pub mod hlo;
pub mod oom;
pub mod render;
pub mod report;
pub mod source;
pub mod units;
pub mod xla_report;

use std::path::{Path, PathBuf};

use rayon::prelude::*;

pub use error::Error;
pub use hlo::Module;
pub use report::Report;

/// Reads and parses one HLO text file.
pub fn load_module(path: &Path) -> Result<Module, Error> {
    let file = source::SourceFile::read(path)?;
    hlo::parse_module(file)
}

/// Parses HLO text already in memory; `path` is used in messages only.
pub fn parse_text(path: impl Into<PathBuf>, text: impl Into<String>) -> Result<Module, Error> {
    hlo::parse_module(source::SourceFile::from_text(path, text))
}

/// What `analyze_paths` does besides the accounting.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnalyzeOptions {
    /// Compare with XLA's own reports beside each HLO file.
    pub verify: bool,
}

/// The HLO files to analyze: files as given, and for a directory the
/// after-optimizations HLO files directly in it, sorted.
pub fn collect_inputs(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .map(|entries| {
                    entries
                        .flatten()
                        .map(|e| e.path())
                        .filter(|p| p.to_string_lossy().ends_with("after_optimizations.txt"))
                        .collect()
                })
                .unwrap_or_default();
            found.sort();
            if found.is_empty() {
                // Let the reader report the folder itself.
                out.push(path.clone());
            }
            out.extend(found);
        } else {
            out.push(path.clone());
        }
    }
    out
}

/// Analyzes files in parallel; the report keeps the order of `paths`, with
/// every file that failed listed under `errors`.
pub fn analyze_paths(paths: &[PathBuf], options: AnalyzeOptions) -> Report {
    let inputs = collect_inputs(paths);
    let results: Vec<Result<report::ModuleReport, (PathBuf, Error)>> = inputs
        .par_iter()
        .map(|path| {
            let module = load_module(path).map_err(|e| (path.clone(), e))?;
            let model = analysis::analyze(&module);
            let mut summary = report::ModuleReport::build(&module, &model);
            if options.verify {
                summary.verification = Some(match xla_report::XlaReports::load(path) {
                    Ok(Some(xla)) => analysis::verify::verify(&module, &model, &xla),
                    Ok(None) => analysis::verify::Verification::unavailable(
                        "no XLA report files beside the HLO file",
                    ),
                    Err(e) => analysis::verify::Verification::unavailable(&e.to_string()),
                });
            }
            Ok(summary)
        })
        .collect();
    let mut report = Report {
        modules: Vec::new(),
        errors: Vec::new(),
    };
    for result in results {
        match result {
            Ok(module) => report.modules.push(module),
            Err((path, error)) => report.errors.push(report::InputError::new(&path, error)),
        }
    }
    report
}
