//! Instruction metadata and the stack-frame tables: where in the user's Python an
//! instruction comes from.
//!
//! Two spellings exist (notes §1.3): inline `source_file="a.py" source_line=3`
//! (older XLA, or `--xla_hlo_print_inline_stack_frames`), and since 2025-12 a
//! `stack_frame_id=N` into the `StackFrames` table printed after the header.

use serde::Serialize;

use super::parse::{HloParser, Rule};
use crate::source::Span;

/// The parts of `metadata={...}` hlomem uses; strings are spans of the quoted
/// text (still escaped) in the module's text.
#[derive(Debug, Clone, Copy, Default)]
pub struct Metadata {
    pub op_type: Option<Span>,
    pub op_name: Option<Span>,
    pub source_file: Option<Span>,
    pub source_line: Option<u64>,
    /// 1-based row of `StackFrames`; 0 (or absent) means none.
    pub stack_frame_id: Option<u64>,
}

/// The four tables, with every reference already made 0-based.
#[derive(Debug, Clone, Default)]
pub struct StackFrameIndex {
    /// Shared: a report names the same few files and functions thousands of times.
    pub file_names: Vec<std::sync::Arc<str>>,
    pub function_names: Vec<std::sync::Arc<str>>,
    pub file_locations: Vec<FileLocation>,
    pub frames: Vec<StackFrame>,
}

#[derive(Debug, Clone, Default)]
pub struct FileLocation {
    pub file_name: Option<usize>,
    pub function_name: Option<usize>,
    pub line: u64,
    pub column: u64,
}

#[derive(Debug, Clone, Default)]
pub struct StackFrame {
    pub file_location: Option<usize>,
    pub parent: Option<usize>,
}

/// A place in the user's program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SourceLocation {
    /// Shared with the stack-frame table it comes from (a report repeats the
    /// same few files over thousands of buffers' stacks).
    pub file: std::sync::Arc<str>,
    pub line: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<std::sync::Arc<str>>,
}

impl std::fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

impl StackFrameIndex {
    /// The innermost location of a frame (0-based), which is the line that made the op.
    pub fn location_of_frame(&self, frame: usize) -> Option<SourceLocation> {
        let location = self
            .file_locations
            .get(self.frames.get(frame)?.file_location?)?;
        Some(SourceLocation {
            file: self.file_names.get(location.file_name?)?.clone(),
            line: location.line,
            function: location
                .function_name
                .and_then(|f| self.function_names.get(f))
                .cloned(),
        })
    }

    /// The call stack of a frame, innermost first; stops at cycles.
    pub fn stack_of_frame(&self, frame: usize) -> Vec<SourceLocation> {
        let mut stack = Vec::new();
        let mut current = Some(frame);
        while let Some(f) = current {
            if stack.len() > self.frames.len() {
                break; // a cycle in a malformed table
            }
            if let Some(location) = self.location_of_frame(f) {
                stack.push(location);
            }
            current = self.frames.get(f).and_then(|fr| fr.parent);
        }
        stack
    }
}

impl Metadata {
    /// The innermost source location, from inline fields or through the tables.
    pub fn source_location(&self, text: &str, frames: &StackFrameIndex) -> Option<SourceLocation> {
        if let (Some(file), Some(line)) = (self.source_file, self.source_line) {
            return Some(SourceLocation {
                file: unescape(text.get(file.range()).unwrap_or("")).into(),
                line,
                function: None,
            });
        }
        let id = self.stack_frame_id.filter(|&id| id > 0)?;
        frames.location_of_frame(usize::try_from(id - 1).ok()?)
    }

    /// The whole call stack, innermost first: through the tables, or the one
    /// inline location older dumps carry.
    pub fn stack(&self, text: &str, frames: &StackFrameIndex) -> Vec<SourceLocation> {
        match self.stack_frame_id.filter(|&id| id > 0) {
            Some(id) if self.source_file.is_none() => usize::try_from(id - 1)
                .map(|frame| frames.stack_of_frame(frame))
                .unwrap_or_default(),
            _ => self.source_location(text, frames).into_iter().collect(),
        }
    }
}

/// Undoes XLA's C escaping of metadata strings (`absl::CEscape`).
pub fn unescape(text: &str) -> String {
    if !text.contains('\\') {
        return text.to_string();
    }
    let mut out = Vec::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' || i + 1 == bytes.len() {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let c = bytes[i + 1];
        i += 2;
        match c {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'0'..=b'7' => {
                // Up to three octal digits, the first already read.
                let mut value = u32::from(c - b'0');
                let mut digits = 1;
                while digits < 3 && i < bytes.len() && (b'0'..=b'7').contains(&bytes[i]) {
                    value = value * 8 + u32::from(bytes[i] - b'0');
                    i += 1;
                    digits += 1;
                }
                out.push(value as u8);
            }
            b'x' => {
                let mut value = 0u32;
                while i < bytes.len() && bytes[i].is_ascii_hexdigit() {
                    value = value * 16 + (bytes[i] as char).to_digit(16).unwrap_or(0);
                    i += 1;
                }
                out.push(value as u8);
            }
            other => out.push(other),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The fields of the `metadata={...}` value at `span` (see `Module::metadata`).
/// The value was checked to be balanced when the line was read; fields that do
/// not parse are left out rather than failing a report long after loading.
pub(crate) fn parse(text: &str, span: Span) -> Metadata {
    let mut metadata = Metadata::default();
    let Some(value) = text.get(span.range()) else {
        return metadata;
    };
    let Ok(mut pairs) = <HloParser as pest::Parser<Rule>>::parse(Rule::metadata, value) else {
        return metadata;
    };
    let base = span.start;
    for field in pairs.next().into_iter().flat_map(|p| p.into_inner()) {
        let mut kv = field.into_inner();
        let (Some(key), Some(value)) = (kv.next(), kv.next()) else {
            continue;
        };
        let quoted = || {
            let s = value.as_span();
            let text = value.as_str();
            (text.len() >= 2 && text.starts_with('"') && text.ends_with('"')).then(|| Span {
                start: base + s.start() as u32 + 1,
                end: base + s.end() as u32 - 1,
            })
        };
        match key.as_str() {
            "op_type" => metadata.op_type = quoted(),
            "op_name" => metadata.op_name = quoted(),
            "source_file" => metadata.source_file = quoted(),
            "source_line" => metadata.source_line = value.as_str().parse().ok(),
            "stack_frame_id" => metadata.stack_frame_id = value.as_str().parse().ok(),
            _ => {}
        }
    }
    metadata
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescape_handles_c_escapes() {
        assert_eq!(unescape(r#"jit(f)/\"x\"\n"#), "jit(f)/\"x\"\n");
        assert_eq!(unescape(r"a\303\251b"), "aéb");
        assert_eq!(unescape("plain"), "plain");
    }

    #[test]
    fn frames_walk_to_their_parents() {
        let index = StackFrameIndex {
            file_names: vec!["main.py".into(), "lib.py".into()],
            function_names: vec!["<module>".into(), "f".into()],
            file_locations: vec![
                FileLocation {
                    file_name: Some(0),
                    function_name: Some(0),
                    line: 10,
                    column: 1,
                },
                FileLocation {
                    file_name: Some(1),
                    function_name: Some(1),
                    line: 3,
                    column: 1,
                },
            ],
            frames: vec![
                StackFrame {
                    file_location: Some(0),
                    parent: None,
                },
                StackFrame {
                    file_location: Some(1),
                    parent: Some(0),
                },
            ],
        };
        let stack = index.stack_of_frame(1);
        assert_eq!(stack.len(), 2);
        assert_eq!(stack[0].to_string(), "lib.py:3");
        assert_eq!(stack[0].function.as_deref(), Some("f"));
        assert_eq!(stack[1].to_string(), "main.py:10");
    }
}
