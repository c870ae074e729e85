//! Input text and positions in it.
//!
//! Positions are stored as byte offsets and turned into line and column only
//! when something is shown to a person: counting lines on the hot path of a
//! 50 MB module would cost more than parsing it.

use std::path::PathBuf;

/// A byte range in a [`SourceFile`]'s text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        // Inputs over 4 GiB are refused when read, so offsets fit in u32.
        Span {
            start: start as u32,
            end: end as u32,
        }
    }
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// Files larger than this cannot be addressed with 32-bit spans.
pub const MAX_FILE_BYTES: u64 = u32::MAX as u64;

/// A file's path and its text, checked to be UTF-8.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: PathBuf,
    pub text: String,
}

impl SourceFile {
    pub fn from_text(path: impl Into<PathBuf>, text: impl Into<String>) -> SourceFile {
        SourceFile {
            path: path.into(),
            text: text.into(),
        }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text.as_bytes()[..offset];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        let column = self.text[line_start..floor_char_boundary(&self.text, offset)]
            .chars()
            .count()
            + 1;
        (line, column)
    }

    /// The byte range of the line containing `offset`, without its line break.
    pub fn line_range(&self, offset: usize) -> std::ops::Range<usize> {
        let bytes = self.text.as_bytes();
        let offset = offset.min(bytes.len());
        let start = bytes[..offset]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        let end = bytes[offset..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |p| offset + p);
        let end = if end > start && bytes[end - 1] == b'\r' {
            end - 1
        } else {
            end
        };
        start..end.max(start)
    }
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based() {
        let f = SourceFile::from_text("x.txt", "ab\ncdé\nf");
        assert_eq!(f.line_col(0), (1, 1));
        assert_eq!(f.line_col(3), (2, 1));
        assert_eq!(f.line_col(5), (2, 3));
        assert_eq!(f.line_col(7), (2, 4));
        assert_eq!(f.line_col(8), (3, 1));
        assert_eq!(f.line_range(4), 3..7);
        assert_eq!(f.line_range(9), 8..9);
    }
}
