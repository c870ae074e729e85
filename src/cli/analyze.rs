//! `hlomem analyze`, and the reading of dumps that `check` and `diff` share.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hlomem::render::{self, AnalyzeFormat, RenderOptions};
use hlomem::report::Report;
use hlomem::AnalyzeOptions;

use super::stdin::read_stdin;
use super::{write_out, Selection, Terminal, EXIT_FAILED_CHECK, EXIT_INPUT_ERROR, EXIT_OK};

/// More modules or bytes than this get a progress bar (on a terminal).
const PROGRESS_MODULES: usize = 8;
const PROGRESS_BYTES: u64 = 50 * 1024 * 1024;

/// Reads and analyzes `paths`, printing errors to stderr; the report keeps them too.
pub fn load(
    paths: &[PathBuf],
    selection: &Selection,
    verify: bool,
    term: Terminal,
) -> Result<Report, u8> {
    let stdin = read_stdin_if_named(paths)?;
    let mut inputs = hlomem::pipeline::inputs::collect_with_stdin(paths, stdin);
    if let Some(pattern) = &selection.module {
        let glob = match globset::Glob::new(pattern) {
            Ok(g) => g.compile_matcher(),
            Err(e) => {
                eprintln!("error: --module {pattern:?} is not a glob: {e}");
                return Err(EXIT_INPUT_ERROR);
            }
        };
        // The module's own name is in the dump name (`module_0000.<name>`).
        inputs.retain(|i| {
            glob.is_match(&i.key) || i.key.split('.').nth(1).is_some_and(|n| glob.is_match(n))
        });
        if inputs.is_empty() {
            eprintln!("error: no module matches --module {pattern:?}");
            return Err(EXIT_INPUT_ERROR);
        }
    }
    let bytes: u64 = inputs
        .iter()
        .filter_map(|i| std::fs::metadata(&i.path).ok())
        .map(|m| m.len())
        .sum();
    let bar =
        (term.progress && (inputs.len() > PROGRESS_MODULES || bytes > PROGRESS_BYTES)).then(|| {
            let bar = indicatif::ProgressBar::new(inputs.len() as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} analyzing {pos}/{len} modules {wide_bar} {elapsed}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
    let done = |_: &Path| {
        if let Some(bar) = &bar {
            bar.inc(1);
        }
    };
    let report = hlomem::analyze_inputs(
        &inputs,
        AnalyzeOptions {
            verify,
            backend: selection.backend.map(Into::into),
            tpu_version: selection.tpu.map(Into::into),
            libtpu: selection.libtpu.and_then(|l| l.newer),
            strict: selection.strict,
            interface: term.interface,
        },
        &done,
    );
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let mut stderr = std::io::stderr().lock();
    for error in &report.errors {
        let _ = writeln!(stderr, "{}", error.error.render(term.stderr_color));
    }
    Ok(report)
}

/// Standard input's bytes when `-` is among `paths` (it can be read once, so
/// once only); the pipeline analyzes them as the module `<stdin>`.
fn read_stdin_if_named(paths: &[PathBuf]) -> Result<Option<Arc<[u8]>>, u8> {
    match paths.iter().filter(|p| p.as_os_str() == "-").count() {
        0 => Ok(None),
        1 => match read_stdin("HLO text (`compiled.as_text()`)") {
            Ok(bytes) => Ok(Some(bytes.into())),
            Err(e) => {
                eprintln!("error: {e}");
                Err(EXIT_INPUT_ERROR)
            }
        },
        _ => {
            eprintln!("error: `-` (standard input) can be given once");
            Err(EXIT_INPUT_ERROR)
        }
    }
}

/// `analyze`'s own options.
pub struct Extras {
    pub format: AnalyzeFormat,
    pub top: usize,
    pub verbose: bool,
    pub verify: bool,
    pub html: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    /// `--budget`: drawn on the charts.
    pub budget: Option<String>,
}

/// Writes one rendering to a file: into a temporary file beside it, renamed
/// over it when complete, so a reader never sees half a page and a symlink at
/// `path` is replaced rather than followed.
fn write_file(
    path: &Path,
    render: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), u8> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let result = tempfile::NamedTempFile::new_in(folder).and_then(|file| {
        let mut out = std::io::BufWriter::new(file);
        render(&mut out)?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        // Temporary files are private (0600); a report is not.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            file.as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o644))?;
        }
        file.persist(path).map(drop).map_err(|e| e.error)
    });
    result.map_err(|e| {
        eprintln!("error: cannot write {}: {e}", path.display());
        EXIT_INPUT_ERROR
    })
}

pub fn run(paths: &[PathBuf], selection: &Selection, extras: Extras, term: Terminal) -> u8 {
    let Extras {
        format,
        top,
        verbose,
        verify,
        html,
        svg,
        budget,
    } = extras;
    let budget = match budget.as_deref().map(hlomem::units::parse_size).transpose() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: --budget: {e}");
            return EXIT_INPUT_ERROR;
        }
    };
    if budget.is_some() && format != AnalyzeFormat::Html && html.is_none() && svg.is_none() {
        eprintln!(
            "warning: --budget is drawn on the HTML and SVG charts only (--format html, --html, --svg); \
             `hlomem check --budget` fails a module over it"
        );
    }
    let report = match load(paths, selection, verify, term) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let failed = !report.errors.is_empty();
    // A lone file that failed prints no report at all: nothing that looks like a result.
    if !(failed && report.modules.is_empty()) || format == AnalyzeFormat::Json {
        let options = RenderOptions {
            color: term.stdout_color,
            top,
            verbose,
            interface: term.interface,
        };
        if let Err(code) = write_out(|out| match format {
            AnalyzeFormat::Html => render::render_html(&report, budget, out),
            _ => render::render(&report, format, options, out),
        }) {
            return code;
        }
    }
    if let Some(path) = &html {
        if let Err(code) = write_file(path, |out| render::render_html(&report, budget, out)) {
            return code;
        }
    }
    if let Some(path) = &svg {
        if let Err(code) = write_file(path, |out| render::render_svg(&report, budget, out)) {
            return code;
        }
    }
    let disagrees = report
        .modules
        .iter()
        .any(|m| m.verification.as_ref().is_some_and(|v| !v.agrees()));
    // The process ends here: the system takes its memory back at once, where
    // freeing a big report's allocations one by one cost time at the very
    // end of the run (a few milliseconds on 192 layers).
    std::mem::forget(report);
    if failed {
        EXIT_INPUT_ERROR
    } else if disagrees {
        EXIT_FAILED_CHECK
    } else {
        EXIT_OK
    }
}
