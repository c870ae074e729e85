//! The library's one error type, rendered in the style of rustc.

use std::fmt;
use std::path::{Path, PathBuf};

use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};

use crate::source::SourceFile;

/// Everything that can go wrong reading an input. None of these is a bug in
/// hlomem; they are all the input's or the caller's fault and map to exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is {bytes} bytes; hlomem reads files of at most 4GiB", path.display())]
    TooLarge { path: PathBuf, bytes: u64 },
    #[error("{0}")]
    Usage(String),
    /// Non-UTF-8 bytes; `file` holds the valid text before them (boxed:
    /// errors are passed around by value, and this one is rare).
    #[error("{} is not UTF-8 text (first bad byte at offset {offset})", file.path.display())]
    Encoding {
        file: Box<SourceFile>,
        offset: usize,
    },
    /// A problem at a position in an input file.
    #[error("{}", .0.title)]
    Input(Box<Diagnostic>),
}

/// A message about one place in a file, with what is needed to show it.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub path: PathBuf,
    /// One line: what is wrong (`expected a shape, found `x``).
    pub title: String,
    /// What the caret points at.
    pub label: String,
    /// Extra help, shown below the snippet.
    pub note: Option<String>,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub line_text: String,
    /// Byte range of the caret inside `line_text`.
    pub caret: std::ops::Range<usize>,
}

impl Error {
    pub fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// An error at `span` (byte offsets into `file.text`).
    pub fn at(
        file: &SourceFile,
        span: std::ops::Range<usize>,
        title: impl Into<String>,
        label: impl Into<String>,
    ) -> Error {
        Error::Input(Box::new(Diagnostic::new(
            file,
            span,
            title.into(),
            label.into(),
        )))
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Error {
        if let Error::Input(d) = &mut self {
            d.note = Some(note.into());
        }
        self
    }

    /// The position the error points at, when it has one: (path, line, column).
    pub fn location(&self) -> Option<(&Path, usize, usize)> {
        match self {
            Error::Input(d) => Some((&d.path, d.line, d.column)),
            _ => None,
        }
    }

    /// Renders the error for a person: `error: ...`, ` --> file:line:col`, the line and a caret.
    pub fn render(&self, color: bool) -> String {
        let renderer = if color {
            Renderer::styled()
        } else {
            Renderer::plain()
        };
        match self {
            Error::Input(d) => render_diagnostic(d, &renderer),
            Error::Encoding { file, offset } => {
                let d = Diagnostic::new(
                    file,
                    *offset..*offset,
                    format!("{} is not UTF-8 text", file.path.display()),
                    "invalid UTF-8 byte here".into(),
                )
                .noted(
                    "HLO dumps are UTF-8; the file may be truncated, compressed or not an HLO dump",
                );
                render_diagnostic(&d, &renderer)
            }
            other => {
                let report = [Group::with_title(
                    Level::ERROR.primary_title(other.to_string()),
                )];
                renderer.render(&report)
            }
        }
    }
}

impl Diagnostic {
    fn new(
        file: &SourceFile,
        span: std::ops::Range<usize>,
        title: String,
        label: String,
    ) -> Diagnostic {
        let len = file.text.len();
        // An error at the very end of a file that ends in a newline points at the
        // end of the last line rather than at an empty line after it.
        let mut start = span.start.min(len);
        if start == len && start > 0 && file.text.ends_with('\n') {
            start = file.text.trim_end().len();
        }
        let line_range = file.line_range(start);
        // A span that starts in the line's indentation (a whole instruction)
        // starts at its first word, where the caret and column then point.
        let line = &file.text[line_range.clone()];
        let first_word = line_range.start + (line.len() - line.trim_start().len());
        if start < first_word && span.end > first_word {
            start = first_word;
        }
        // As written: metadata set aside from the text is put back.
        let line_text = file.as_written(line_range.clone());
        let written = |offset: usize| {
            file.written_offset(
                line_range.start,
                offset.clamp(line_range.start, line_range.end),
            )
        };
        // The caret covers whole characters: a span of one byte may start or
        // end inside a multi-byte one (`├──` in XLA's reports).
        let floor = |mut i: usize| {
            while i > 0 && !line_text.is_char_boundary(i) {
                i -= 1;
            }
            i
        };
        let ceil = |mut i: usize| {
            while i < line_text.len() && !line_text.is_char_boundary(i) {
                i += 1;
            }
            i
        };
        let caret_start = floor(written(start).min(line_text.len()));
        let caret_end = ceil(written(span.end).clamp(caret_start, line_text.len()));
        let (line, column) = file.line_col(start);
        Diagnostic {
            path: file.path.clone(),
            title,
            label,
            note: None,
            line,
            column,
            line_text,
            caret: caret_start..caret_end,
        }
    }

    fn noted(mut self, note: &str) -> Diagnostic {
        self.note = Some(note.to_string());
        self
    }
}

fn render_diagnostic(d: &Diagnostic, renderer: &Renderer) -> String {
    let path = d.path.display().to_string();
    let snippet = Snippet::source(d.line_text.as_str())
        .line_start(d.line)
        .path(path.as_str())
        .fold(false)
        .annotation(
            AnnotationKind::Primary
                .span(d.caret.clone())
                .label(d.label.as_str()),
        );
    let mut group =
        Group::with_title(Level::ERROR.primary_title(d.title.as_str())).element(snippet);
    if let Some(note) = &d.note {
        group = group.element(Level::NOTE.message(note.as_str()));
    }
    renderer.render(&[group])
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.path.display(),
            self.line,
            self.column,
            self.title
        )
    }
}
