//! hlomem: static memory analysis of XLA HLO dumps.
//!
//! Data flows one way: text ([`source`]) → pest parse and typed IR ([`hlo`]) →
//! report ([`report`]) → renderers ([`render`]). See ARCHITECTURE.md.

pub mod analysis;
pub mod error;
pub mod hlo;
pub mod render;
pub mod report;
pub mod source;
pub mod units;

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

/// Analyzes files in parallel; the report keeps the order of `paths`, with
/// every file that failed listed under `errors`.
pub fn analyze_paths(paths: &[PathBuf]) -> Report {
    let results: Vec<Result<report::ModuleReport, (PathBuf, Error)>> = paths
        .par_iter()
        .map(|path| {
            let module = load_module(path).map_err(|e| (path.clone(), e))?;
            Ok(report::ModuleReport::summarize(&module))
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
