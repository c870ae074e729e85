//! Moves every instruction's `metadata={...}` and `backend_config={...}` out
//! of a module's text before it is parsed.
//!
//! Metadata is a third of a dump's bytes (op names, source files, stack frame
//! ids), yet a 48-layer training step has 1,652 distinct values over 30,204
//! instructions; backend configs are a tenth of a GPU or TPU dump's, with a
//! dozen distinct values over hundreds of fusions. Kept once each beside the
//! text ([`SetAside`]), they cost a twentieth of what they did, and the
//! grammar reads `metadata={}` where the text had the whole value. The pieces
//! are read back through [`crate::hlo::Module::metadata`] and
//! [`crate::hlo::Module::attribute`]; lines and columns shown to a person are
//! those of the file as written ([`SourceFile::line_col`]).
//!
//! The cut is made only where the text is certainly such an attribute as the
//! grammar reads it: after `, ` at the top level
//! of its line (outside strings, comments and brackets), and closed by its
//! brace on the same line. Anything else stays as written, for the grammar to
//! read or refuse.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::source::{SetAside, SourceFile};

/// The attributes whose values are set aside (the brace form: a quoted
/// `backend_config="..."` stays).
const KEYS: [&[u8]; 2] = [b", metadata={", b", backend_config={"];

/// A text is searched in parts of at least this many bytes, on all cores.
const PART_BYTES: usize = 1 << 20;

/// Cuts the `metadata` and `backend_config` values out of `file.text` into
/// `file.set_aside`.
pub(super) fn values(file: &mut SourceFile) {
    let text = file.text.as_str();
    let parts = (text.len() / PART_BYTES).clamp(1, 4 * rayon::current_num_threads());
    let bounds = line_bounds(text.as_bytes(), parts);
    let parts: Vec<Part> = bounds
        .par_windows(2)
        .map(|w| Part::find(text, w[0]..w[1]))
        .collect();
    if parts.iter().all(|p| p.cuts.is_empty()) {
        return;
    }
    // The parts' distinct values, made distinct across parts.
    let mut set_aside = SetAside::default();
    let mut known: FxHashMap<&str, u32> = FxHashMap::default();
    // (the value's opening brace, its closing brace, its piece), in text order.
    let mut cuts: Vec<(usize, usize, u32)> =
        Vec::with_capacity(parts.iter().map(|p| p.cuts.len()).sum());
    for part in parts {
        let ids: Vec<u32> = part
            .pieces
            .iter()
            .map(|&piece| *known.entry(piece).or_insert_with(|| set_aside.add(piece)))
            .collect();
        cuts.extend(
            part.cuts
                .into_iter()
                .map(|(open, close, local)| (open, close, ids[local as usize])),
        );
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

/// `parts + 1` offsets that split `bytes` into about equal runs of whole
/// lines (fewer where lines are long).
fn line_bounds(bytes: &[u8], parts: usize) -> Vec<usize> {
    let mut bounds = vec![0];
    for i in 1..parts {
        let from = (bytes.len() / parts * i).max(*bounds.last().unwrap_or(&0));
        match memchr::memchr(b'\n', &bytes[from..]) {
            Some(p) if from + p + 1 < bytes.len() => bounds.push(from + p + 1),
            _ => break,
        }
    }
    bounds.push(bytes.len());
    bounds.dedup();
    bounds
}

/// The values to cut in a run of whole lines.
struct Part<'t> {
    /// The `{` and `}` of each value, in text order, and its piece.
    cuts: Vec<(usize, usize, u32)>,
    /// The part's distinct values, whole (`{...}`), by piece number.
    pieces: Vec<&'t str>,
}

impl<'t> Part<'t> {
    fn find(text: &'t str, range: std::ops::Range<usize>) -> Part<'t> {
        let bytes = text.as_bytes();
        let mut part = Part {
            cuts: Vec::new(),
            pieces: Vec::new(),
        };
        let mut known: FxHashMap<&str, u32> = FxHashMap::default();
        // Both keys' places, in text order.
        let mut hits: Vec<(usize, usize)> = KEYS
            .iter()
            .flat_map(|key| {
                memchr::memmem::find_iter(&bytes[range.clone()], key)
                    .map(|hit| (range.start + hit, key.len()))
            })
            .collect();
        hits.sort_unstable();
        for (hit, key_len) in hits {
            // Inside the value cut last (in one of its strings): part of it.
            if part.cuts.last().is_some_and(|&(_, close, _)| hit < close) {
                continue;
            }
            let open = hit + key_len - 1;
            let line_start = memchr::memrchr(b'\n', &bytes[range.start..hit])
                .map_or(range.start, |p| range.start + p + 1);
            if !at_top_level(&bytes[line_start..hit]) {
                continue;
            }
            let line_end =
                memchr::memchr(b'\n', &bytes[open..range.end]).map_or(range.end, |p| open + p);
            let Some(close) = closing_brace(&bytes[..line_end], open) else {
                continue;
            };
            if close == open + 1 {
                continue; // `metadata={}`: nothing to move
            }
            let piece = &text[open..=close];
            let id = *known.entry(piece).or_insert_with(|| {
                part.pieces.push(piece);
                part.pieces.len() as u32 - 1
            });
            part.cuts.push((open, close, id));
        }
        part
    }
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
const SPECIAL: [bool; 256] = crate::source::byte_set(b"\"/()[]{}'");

/// The closing quote of the `"` string opening at `open` (escapes skipped)
/// in `line`, which ends where its line does.
fn string_end(line: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    loop {
        i += memchr::memchr2(b'"', b'\\', line.get(i..)?)?;
        if line[i] == b'"' {
            return Some(i);
        }
        i += 2;
    }
}

/// The brace closing the `{` at `open` as the grammar's `brace_group` reads
/// it (strings skipped, braces nested) in `line`, which ends where its line
/// does.
fn closing_brace(line: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    loop {
        i += memchr::memchr3(b'{', b'}', b'"', line.get(i..)?)?;
        match line[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => i = string_end(line, i)?,
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(text: &str) -> SourceFile {
        let mut file = SourceFile::from_text("t.txt", text);
        values(&mut file);
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
            "%a = f32[] custom-call(), frontend_attributes={x, metadata={y}}\n",
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
        // A backend config is set aside too, and a key inside its strings is part of it.
        let file = cut("%f = f32[] fusion(), backend_config={\"k\":\", metadata={x}\"}, metadata={op_name=\"f\"}\n");
        assert_eq!(
            file.text,
            "%f = f32[] fusion(), backend_config={}, metadata={}\n"
        );
        assert_eq!(
            file.set_aside.text,
            "{\"k\":\", metadata={x}\"}{op_name=\"f\"}"
        );
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

    /// A text of several parts, searched on all cores, is cut as one part is.
    #[test]
    fn parts_are_cut_as_the_whole_is() {
        let mut text = String::new();
        let mut i = 0;
        while text.len() < 5 * PART_BYTES / 2 {
            text.push_str(&format!(
                "  %a.{i} = f32[2]{{0}} add(%x, %y), metadata={{op_name=\"jit(f)/add\" source_line={}}}\n",
                i % 7
            ));
            i += 1;
        }
        let bounds = line_bounds(text.as_bytes(), 3);
        assert_eq!((bounds.len(), bounds[0], bounds[3]), (4, 0, text.len()));
        assert!(bounds[1..3]
            .iter()
            .all(|&b| text.as_bytes()[b - 1] == b'\n'));
        let whole = Part::find(&text, 0..text.len());
        let parts: Vec<_> = bounds
            .windows(2)
            .flat_map(|w| Part::find(&text, w[0]..w[1]).cuts)
            .map(|(open, close, _)| (open, close))
            .collect();
        let whole_cuts: Vec<_> = whole
            .cuts
            .iter()
            .map(|&(open, close, _)| (open, close))
            .collect();
        assert_eq!((whole_cuts.len(), &parts), (i, &whole_cuts));
        assert_eq!(whole.pieces.len(), 7);
        let file = cut(&text);
        assert_eq!(file.set_aside.text.matches("op_name").count(), 7);
        assert_eq!(file.as_written(0..file.text.len()), text);
    }
}
