//! Input text and positions in it.
//!
//! Positions are stored as byte offsets and turned into line and column only
//! when something is shown to a person: counting lines on the hot path of a
//! 50 MB module would cost more than parsing it.

use std::path::{Path, PathBuf};

use crate::error::Error;

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

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Files larger than this cannot be addressed with 32-bit spans.
pub const MAX_FILE_BYTES: u64 = u32::MAX as u64;

/// A file's path and its text, checked to be UTF-8.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: PathBuf,
    pub text: String,
}

impl SourceFile {
    /// Reads a file; refuses non-UTF-8 text with the position of the first bad byte.
    pub fn read(path: &Path) -> Result<SourceFile, Error> {
        let metadata = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if metadata.is_dir() {
            return Err(Error::Usage(format!(
                "{} is a folder; give an HLO text file here (`hlomem analyze` reads whole dump folders)",
                path.display()
            )));
        }
        if metadata.len() > MAX_FILE_BYTES {
            return Err(Error::TooLarge {
                path: path.to_path_buf(),
                bytes: metadata.len(),
            });
        }
        if let Some((limit, source)) = crate::host::memory_limit() {
            let needed = crate::host::memory_needed(metadata.len());
            if needed > limit {
                return Err(Error::Usage(format!(
                    "{} is {}; analyzing it needs up to {} of memory, more than {} allows ({}); \
                     run hlomem where more memory is available",
                    path.display(),
                    crate::units::human_bytes(metadata.len()),
                    crate::units::human_bytes(needed),
                    source,
                    crate::units::human_bytes(limit),
                )));
            }
        }
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        SourceFile::from_bytes(path, bytes)
    }

    /// Wraps bytes already in memory (tests, stdin).
    pub fn from_bytes(path: &Path, mut bytes: Vec<u8>) -> Result<SourceFile, Error> {
        // A byte-order mark (editors on Windows add one) is not text.
        if bytes.starts_with(UTF8_BOM) {
            bytes.drain(..UTF8_BOM.len());
        }
        match String::from_utf8(bytes) {
            Ok(text) => Ok(SourceFile {
                path: path.to_path_buf(),
                text,
            }),
            Err(e) => {
                let offset = e.utf8_error().valid_up_to();
                // Keep the valid prefix so the error can show the line and column.
                let mut bytes = e.into_bytes();
                bytes.truncate(offset);
                let text = String::from_utf8(bytes).unwrap_or_default();
                Err(Error::Encoding {
                    file: SourceFile {
                        path: path.to_path_buf(),
                        text,
                    },
                    offset,
                })
            }
        }
    }

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

    #[test]
    fn non_utf8_is_refused_with_its_position() {
        let err =
            SourceFile::from_bytes(Path::new("bad.txt"), b"HloModule m\n  %x\xff = 1".to_vec())
                .unwrap_err();
        match err {
            Error::Encoding { file, offset } => {
                assert_eq!(offset, 16);
                assert_eq!(file.line_col(offset), (2, 5));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
