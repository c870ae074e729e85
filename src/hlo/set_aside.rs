//! Moves every instruction's `metadata={...}` out of a module's text before
//! it is parsed.
//!
//! Metadata is a third of a dump's bytes (op names, source files, stack frame
//! ids), yet a 48-layer training step has 1,652 distinct values over 30,204
//! instructions. Kept once each beside the text ([`SetAside`]), they cost a
//! twentieth of what they did, and the grammar reads `metadata={}` where the
//! text had the whole value. The pieces are read back through
//! [`crate::hlo::Module::metadata`]; lines and columns shown to a person are
//! those of the file as written ([`SourceFile::line_col`]).
//!
//! The cut is made only where the text is certainly an instruction's
//! `metadata` attribute as the grammar reads it: after `, ` at the top level
//! of its line (outside strings, comments and brackets), and closed by its
//! brace on the same line. Anything else stays as written, for the grammar to
//! read or refuse.

use rustc_hash::FxHashMap;

use crate::source::{SetAside, SourceFile};

const KEY: &[u8] = b", metadata={";

/// Cuts the metadata values out of `file.text` into `file.set_aside`.
pub(super) fn metadata(file: &mut SourceFile) {
    let bytes = file.text.as_bytes();
    let mut set_aside = SetAside::default();
    let mut known = FxHashMap::default();
    // (the value's opening brace, its closing brace, its piece), in text order.
    let mut cuts: Vec<(usize, usize, u32)> = Vec::new();
    for hit in memchr::memmem::find_iter(bytes, KEY) {
        // Inside the value cut last (in one of its strings): part of it.
        if cuts.last().is_some_and(|&(_, close, _)| hit < close) {
            continue;
        }
        let open = hit + KEY.len() - 1;
        let line_start = memchr::memrchr(b'\n', &bytes[..hit]).map_or(0, |p| p + 1);
        if !at_top_level(&bytes[line_start..hit]) {
            continue;
        }
        let Some(close) = closing_brace(bytes, open) else {
            continue;
        };
        if close == open + 1 {
            continue; // `metadata={}`: nothing to move
        }
        let id = set_aside.keep(&file.text[open..=close], &mut known);
        cuts.push((open, close, id));
    }
    if cuts.is_empty() {
        return;
    }
    drop(known);
    // SAFETY: each cut removes the bytes strictly between an ASCII `{` and
    // `}`, which are whole characters, so the text stays UTF-8.
    let text = unsafe { file.text.as_mut_vec() };
    let (mut read, mut write) = (0, 0);
    for (open, close, id) in cuts {
        text.copy_within(read..=open, write);
        write += open + 1 - read;
        set_aside.cut(write, id);
        read = close;
    }
    let len = text.len();
    text.copy_within(read..len, write);
    text.truncate(write + len - read);
    // Gives the cut bytes back (a big text is its own mapping: it shrinks in place).
    text.shrink_to_fit();
    file.set_aside = set_aside;
}

/// Whether the end of `prefix` (a line up to `, metadata={`) is outside
/// every string, comment and bracket of the line. A single quote makes it
/// unsure (the grammar reads `'...'` strings between attributes but not in
/// braces), so it says no.
fn at_top_level(prefix: &[u8]) -> bool {
    let mut depth = 0i32;
    let mut i = 0;
    while i < prefix.len() {
        // Most bytes are none of these: one table lookup each.
        if !SPECIAL[prefix[i] as usize] {
            i += 1;
            continue;
        }
        match prefix[i] {
            b'"' => match string_end(prefix, i) {
                Some(end) => i = end,
                None => return false,
            },
            b'/' if prefix.get(i + 1) == Some(&b'*') => {
                match memchr::memmem::find(&prefix[i + 2..], b"*/") {
                    Some(p) => i += 2 + p + 1,
                    None => return false,
                }
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            b'\'' => return false,
            _ => {}
        }
        i += 1;
    }
    depth == 0
}

/// The bytes [`at_top_level`] looks at.
const SPECIAL: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    let special = b"\"/()[]{}'";
    while i < special.len() {
        table[special[i] as usize] = true;
        i += 1;
    }
    table
};

/// The closing quote of the `"` string opening at `open` (escapes skipped),
/// on its line.
fn string_end(bytes: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Some(i),
            b'\\' => i += 2,
            b'\n' => return None,
            _ => i += 1,
        }
    }
    None
}

/// The brace closing the `{` at `open` as the grammar's `brace_group` reads
/// it (strings skipped, braces nested), on the same line.
fn closing_brace(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            b'"' => i = string_end(bytes, i)?,
            b'\n' => return None,
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(text: &str) -> SourceFile {
        let mut file = SourceFile::from_text("t.txt", text);
        metadata(&mut file);
        file
    }

    #[test]
    fn values_are_moved_out_and_kept_once() {
        let line = r#"  %a = f32[2]{0} add(f32[2]{0} %x, f32[2]{0} %y), metadata={op_name="jit(f)/add" source_line=3}"#;
        let text = format!("{line}\n{line}\n  %b = f32[] constant(0)\n");
        let file = cut(&text);
        assert_eq!(
            file.text,
            "  %a = f32[2]{0} add(f32[2]{0} %x, f32[2]{0} %y), metadata={}\n".repeat(2)
                + "  %b = f32[] constant(0)\n"
        );
        assert_eq!(
            file.set_aside.text,
            r#"{op_name="jit(f)/add" source_line=3}"#
        );
        // The file as written, and its columns, come back.
        let second = file.text.find('\n').unwrap() + 1;
        let end = second + file.text[second..].find('\n').unwrap();
        assert_eq!(file.as_written(second..end), line);
        assert_eq!(file.line_col(end), (2, line.chars().count() + 1));
        assert_eq!(file.line_col(end + 1), (3, 1));
        let braces = end - 2;
        let piece = file
            .set_aside
            .piece(crate::source::Span::new(braces, braces + 2));
        assert_eq!(
            piece.map(|p| &file.set_aside.text[p.range()]),
            Some(r#"{op_name="jit(f)/add" source_line=3}"#)
        );
    }

    #[test]
    fn only_the_attribute_at_the_top_level_of_its_line_is_moved() {
        for text in [
            // inside a string, a bracket, a comment, after a single-quoted string
            "%a = f32[] custom-call(), backend_config=\"x, metadata={y}\"\n",
            "%a = f32[] custom-call(), backend_config={x, metadata={y}}\n",
            "%a = f32[] custom-call(), /* , metadata={y} */ x=1\n",
            "%a = f32[] custom-call(), x='}', metadata={y}\n",
            // not closed on its line
            "%a = f32[] custom-call(), metadata={y\n}\n",
            // a string with an escaped quote, not closed
            "%a = f32[] add(), metadata={op_name=\"a\\\"}\n",
        ] {
            let file = cut(text);
            assert_eq!(file.text, text, "{text}");
            assert!(file.set_aside.is_empty());
        }
        let file = cut("%a = f32[] add(), metadata={op_name=\"}{\\\"\"}, b={}\n");
        assert_eq!(file.text, "%a = f32[] add(), metadata={}, b={}\n");
        // The key again inside the value's string: one cut, the whole value.
        let file = cut("%a = f32[] add(), metadata={op_name=\", metadata={x}\"}\n");
        assert_eq!(file.text, "%a = f32[] add(), metadata={}\n");
        assert_eq!(file.set_aside.text, "{op_name=\", metadata={x}\"}");
    }

    /// Random lines made of the pieces that matter: whatever is cut, the
    /// file as written comes back whole, and each line keeps its number and
    /// its columns.
    #[test]
    fn the_file_as_written_always_comes_back() {
        const PIECES: [&str; 14] = [
            ", metadata={",
            "}",
            "{",
            "\"",
            "\\",
            "'",
            "/*",
            "*/",
            "(",
            ")",
            "op_name=x",
            "é",
            "\n",
            " ",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..3000 {
            let mut text = String::new();
            for _ in 0..40 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                text.push_str(PIECES[(seed % PIECES.len() as u64) as usize]);
            }
            let file = cut(&text);
            assert_eq!(file.as_written(0..file.text.len()), text);
            let written = SourceFile::from_text("t.txt", text.clone());
            for (offset, c) in file.text.char_indices() {
                let original = file.written_offset(0, offset);
                assert!(text[original..].starts_with(c), "{text:?} at {offset}");
                assert_eq!(
                    file.line_col(offset),
                    written.line_col(original),
                    "{text:?} at {offset}"
                );
            }
        }
    }
}
