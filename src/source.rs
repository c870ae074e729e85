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
    /// The text, less what was set aside (`set_aside`): spans index this.
    pub text: String,
    /// Pieces of the file moved out of `text` after reading; a person is
    /// always shown the file as written (lines, columns, carets).
    pub set_aside: SetAside,
}

impl SourceFile {
    pub fn from_text(path: impl Into<PathBuf>, text: impl Into<String>) -> SourceFile {
        SourceFile {
            path: path.into(),
            text: text.into(),
            set_aside: SetAside::default(),
        }
    }

    /// 1-based line and column (in characters, in the file as written) of a
    /// byte offset into `text`.
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
            + self.set_aside.chars_between(line_start, offset)
            + 1;
        (line, column)
    }

    /// The file as written over `range` of `text` (a line, for a caret): the
    /// pieces set aside put back.
    pub fn as_written(&self, range: std::ops::Range<usize>) -> String {
        self.set_aside.restore(&self.text, range)
    }

    /// Where `offset` of `text` is in [`SourceFile::as_written`]`(from..)`.
    pub fn written_offset(&self, from: usize, offset: usize) -> usize {
        offset - from + self.set_aside.bytes_between(from, offset)
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

/// Pieces cut out of a file's text, each kept once however often it was cut
/// (HLO metadata: a third of a dump's bytes, a few thousand distinct values
/// repeated tens of thousands of times). A cut keeps the piece's first and
/// last byte in the text (`{...}` becomes `{}`), so a cut is found by where
/// its closing byte now is, and lines keep their numbers.
#[derive(Debug, Clone, Default)]
pub struct SetAside {
    /// The distinct pieces, whole (`{...}`), back to back.
    pub text: String,
    /// Each distinct piece's range in `text`.
    pieces: Vec<Span>,
    /// Each cut in text order: the offset of its closing byte in the cut
    /// text, and its piece.
    cuts: Vec<(u32, u32)>,
}

impl SetAside {
    /// Keeps a distinct piece; returns its number.
    pub fn add(&mut self, piece: &str) -> u32 {
        let id = self.pieces.len() as u32;
        let start = self.text.len();
        self.text.push_str(piece);
        self.pieces.push(Span::new(start, self.text.len()));
        id
    }

    /// Records a cut of piece `id` whose closing byte is now at `at`
    /// (offsets increasing).
    pub fn cut(&mut self, at: usize, id: u32) {
        self.cuts.push((at as u32, id));
    }

    pub fn is_empty(&self) -> bool {
        self.cuts.is_empty()
    }

    /// The piece cut out of `{}` at `span` of the cut text, as a range of
    /// [`SetAside::text`].
    pub fn piece(&self, span: Span) -> Option<Span> {
        if span.end != span.start + 2 {
            return None;
        }
        let at = span.start + 1;
        let i = self.cuts.partition_point(|&(c, _)| c < at);
        let &(c, id) = self.cuts.get(i)?;
        (c == at).then(|| self.pieces[id as usize])
    }

    /// The cuts between two offsets of the cut text: those whose closing
    /// byte is in `from + 1..=to` (the piece is before its closing byte).
    fn cuts_between(&self, from: usize, to: usize) -> impl Iterator<Item = Span> + '_ {
        let first = self.cuts.partition_point(|&(c, _)| c as usize <= from);
        self.cuts[first..]
            .iter()
            .take_while(move |&&(c, _)| c as usize <= to)
            .map(|&(_, id)| self.pieces[id as usize])
    }

    /// Bytes cut out between two offsets of the cut text.
    fn bytes_between(&self, from: usize, to: usize) -> usize {
        self.cuts_between(from, to)
            .map(|p| p.range().len() - 2)
            .sum()
    }

    /// Characters cut out between two offsets of the cut text.
    fn chars_between(&self, from: usize, to: usize) -> usize {
        self.cuts_between(from, to)
            .map(|p| {
                self.text[p.start as usize + 1..p.end as usize - 1]
                    .chars()
                    .count()
            })
            .sum()
    }

    /// `text[range]` with the pieces cut from it put back.
    fn restore(&self, text: &str, range: std::ops::Range<usize>) -> String {
        let mut out = String::with_capacity(range.len());
        let mut at = range.start;
        let first = self
            .cuts
            .partition_point(|&(c, _)| c as usize <= range.start);
        for &(c, id) in self.cuts[first..]
            .iter()
            .take_while(|&&(c, _)| c as usize <= range.end)
        {
            let piece = self.pieces[id as usize];
            out.push_str(&text[at..c as usize]);
            out.push_str(&self.text[piece.start as usize + 1..piece.end as usize - 1]);
            at = c as usize;
        }
        out.push_str(&text[at..range.end]);
        out
    }
}

/// A table of the bytes in `bytes`, for scans that skip every other byte
/// with one lookup.
pub const fn byte_set(bytes: &[u8]) -> [bool; 256] {
    let mut table = [false; 256];
    let mut i = 0;
    while i < bytes.len() {
        table[bytes[i] as usize] = true;
        i += 1;
    }
    table
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
