//! What XLA's parser checks of every instruction line, read at token level
//! for the fusion bodies that loading does not parse (`deferred`): each
//! operand names an instruction defined on an earlier line of the same body,
//! the opcodes whose operand count XLA fixes have that many, parameter
//! numbers are `0..n` once each, dimensions are not negative, and a layout's
//! minor-to-major order is a permutation of the dimensions.
//!
//! XLA refuses a module that breaks any of these (jaxlib's
//! `hlo_module_from_text`; a parameter number out of range even aborts it), so
//! hlomem must too, including in bodies no analysis reads. A whole pest parse of
//! every body line would cost a fifth of the analysis on an unrolled training
//! step; this reads a line only up to its operand list's closing parenthesis
//! (attributes and metadata unread), and each distinct shape spelling once.

use std::ops::Range;

use rustc_hash::FxHashSet;

use super::counts::arity;
use super::opcode::Opcode;
use super::shape::{Layout, NUMERIC_LAYOUT_FIELDS};

/// A problem found on one line: the byte range in the line, what is wrong,
/// and the label under the caret.
pub(super) struct Problem {
    pub(super) at: Range<usize>,
    pub(super) title: String,
    pub(super) label: &'static str,
}

impl Problem {
    fn new(at: Range<usize>, title: String, label: &'static str) -> Problem {
        Problem { at, title, label }
    }
}

/// The checks of one body, line by line in file order.
#[derive(Default)]
pub(super) struct BodyCheck<'a> {
    /// Names defined so far.
    defined: FxHashSet<&'a str>,
    /// `parameter(N)` numbers seen, with the line index and the number's range.
    parameters: Vec<(u64, usize, Range<usize>)>,
    /// The first operand that names no earlier line: line index, range, name.
    unknown: Option<(usize, Range<usize>, &'a str)>,
    /// Shape spellings already found valid.
    shapes: FxHashSet<&'a str>,
}

/// The parts of a line the check reads: `[ROOT ]name = SHAPE opcode(OPERANDS)`.
struct Call<'a> {
    shape: Range<usize>,
    opcode: &'a str,
    /// Where the operand list starts (after `(`) and ends (at `)`).
    operands: Range<usize>,
}

impl<'a> BodyCheck<'a> {
    /// Checks line `i` (`text`; `after_eq` is where the text after ` = `
    /// starts), before [`BodyCheck::define`] records its name, so that a line
    /// reading its own name is caught. Returns the first problem found on it.
    pub(super) fn line(&mut self, i: usize, text: &'a str, after_eq: usize) -> Result<(), Problem> {
        let call = split_call(text, after_eq)?;
        self.shape(text, call.shape.clone())?;
        let list = &text[call.operands.clone()];
        match call.opcode {
            // A literal, not operands.
            "constant" => {}
            "parameter" => {
                let digits = list.trim();
                let number = digits.parse::<u64>().map_err(|_| {
                    Problem::new(
                        call.operands.clone(),
                        "expected a parameter number: `parameter(N)`".into(),
                        "not a parameter number",
                    )
                })?;
                self.parameters.push((number, i, call.operands.clone()));
            }
            opcode => {
                let mut count = 0;
                for (range, operand_name) in operands(list, call.operands.start) {
                    count += 1;
                    if self.unknown.is_none() && !self.defined.contains(operand_name) {
                        self.unknown = Some((i, range, operand_name));
                    }
                }
                if let Some(wanted) = arity(&Opcode::parse(opcode)).filter(|a| !a.admits(count)) {
                    return Err(Problem::new(
                        call.operands.start.saturating_sub(1)..call.operands.end + 1,
                        format!("`{opcode}` takes {wanted} operand(s), but has {count}"),
                        "wrong number of operands",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Records the name line `i` defines; false if an earlier line did.
    pub(super) fn define(&mut self, name: &'a str) -> bool {
        self.defined.insert(name)
    }

    /// After the last line: an operand that named no earlier line, and the
    /// parameter numbers. The error names a line by its index.
    /// The words are the complete parse's (`resolve`), so a message does not
    /// depend on whether a body was read at load.
    pub(super) fn finish(mut self, comp: &str) -> Result<(), (usize, Problem)> {
        if let Some((i, range, name)) = self.unknown.take() {
            let problem = if self.defined.contains(name) {
                Problem::new(
                    range,
                    format!("`%{name}` is used before the line that defines it, in computation `%{comp}`"),
                    "defined further down",
                )
            } else {
                Problem::new(
                    range,
                    format!("unknown instruction `%{name}` in computation `%{comp}`"),
                    "not defined in this computation",
                )
            };
            return Err((i, problem));
        }
        self.parameters.sort_by_key(|(n, ..)| *n);
        let numbers: Vec<u64> = self.parameters.iter().map(|(n, ..)| *n).collect();
        if let Some((k, problem)) = super::counts::parameter_numbers_problem(&numbers) {
            let (n, i, range) = self.parameters.swap_remove(k);
            return Err((
                i,
                Problem::new(
                    range,
                    format!("parameter({n}) of `%{comp}` {problem}"),
                    "parameter numbers must be 0, 1, 2, ...",
                ),
            ));
        }
        Ok(())
    }

    fn shape(&mut self, text: &'a str, at: Range<usize>) -> Result<(), Problem> {
        let spelling = &text[at.clone()];
        if self.shapes.contains(spelling) {
            return Ok(());
        }
        shape_problem(spelling).map_err(|(r, title)| {
            Problem::new(at.start + r.start..at.start + r.end, title, "invalid shape")
        })?;
        self.shapes.insert(spelling);
        Ok(())
    }
}

/// The ROOT line's shape must be the one the computation's header declares
/// it returns, layouts aside (XLA: "Shape of computation ... is not
/// compatible with that of its root instruction"). `header` is the header
/// line; one without a signature declares nothing.
pub(super) fn root_matches_header(
    header: &str,
    root: &str,
    after_eq: usize,
) -> Result<(), Problem> {
    let Some(arrow) = header.rfind("->") else {
        return Ok(());
    };
    let Some(declared) = header[arrow + 2..].trim_end().strip_suffix('{') else {
        return Ok(());
    };
    let Some(end) = shape_end(root.as_bytes(), after_eq) else {
        return Ok(());
    };
    let shape = &root[after_eq..end];
    if without_layouts(declared).eq(without_layouts(shape)) {
        return Ok(());
    }
    Err(Problem::new(
        after_eq..end,
        format!(
            "the ROOT's shape {shape} is not the {} the computation's header declares",
            declared.trim()
        ),
        "shape does not match the header",
    ))
}

/// A shape's text without layouts, comments and spaces: what XLA's
/// `ShapeUtil::Compatible` compares.
fn without_layouts(text: &str) -> impl Iterator<Item = u8> + '_ {
    let bytes = text.as_bytes();
    let (mut depth, mut i) = (0usize, 0);
    std::iter::from_fn(move || {
        while i < bytes.len() {
            let b = bytes[i];
            i += 1;
            match b {
                b'/' if bytes.get(i) == Some(&b'*') => {
                    i = text[i..].find("*/").map_or(bytes.len(), |k| i + k + 2);
                }
                b'{' => depth += 1,
                b'}' => depth = depth.saturating_sub(1),
                b' ' => {}
                _ if depth == 0 => return Some(b),
                _ => {}
            }
        }
        None
    })
}

/// Cuts `SHAPE opcode(OPERANDS)` out of the text after ` = `.
fn split_call(text: &str, after_eq: usize) -> Result<Call<'_>, Problem> {
    let bytes = text.as_bytes();
    let after_eq = skip_space(bytes, after_eq);
    let shape_end = shape_end(bytes, after_eq).ok_or_else(|| {
        Problem::new(
            after_eq..text.len(),
            "expected a shape after `=`".into(),
            "not a shape",
        )
    })?;
    // Spaces or comments (at least one) before the opcode, as the grammar's `sp1`.
    let op_start = skip_space(bytes, shape_end);
    let op_len = bytes[op_start.min(bytes.len())..]
        .iter()
        .position(|&b| !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')))
        .unwrap_or(0);
    let open = op_start + op_len;
    if op_start == shape_end || op_len == 0 || bytes.get(open) != Some(&b'(') {
        return Err(Problem::new(
            shape_end.min(text.len())..text.len(),
            "expected an opcode and its operands after the shape: `opcode(operands)`".into(),
            "not an opcode",
        ));
    }
    let close = closing(bytes, open).ok_or_else(|| {
        Problem::new(
            open..text.len(),
            "the operand list is not closed".into(),
            "not closed",
        )
    })?;
    Ok(Call {
        shape: after_eq..shape_end,
        opcode: &text[op_start..open],
        operands: open + 1..close,
    })
}

/// Past spaces and `/* ... */` comments from `i` (the grammar's `sp`).
fn skip_space(bytes: &[u8], mut i: usize) -> usize {
    loop {
        match bytes.get(i) {
            Some(b' ' | b'\t'..=b'\r') => i += 1,
            Some(b'/') if bytes.get(i + 1) == Some(&b'*') => {
                match bytes[i + 2..].windows(2).position(|w| w == b"*/") {
                    Some(k) => i += k + 4,
                    None => return bytes.len(),
                }
            }
            _ => return i,
        }
    }
}

/// Where a shape that starts at `at` ends: a bracket group `(...)`,
/// `b(...)`, or `type[...]` with an optional `{...}`.
fn shape_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'(' => closing(bytes, at).map(|c| c + 1),
        b'b' if bytes.get(at + 1) == Some(&b'(') => closing(bytes, at + 1).map(|c| c + 1),
        b'a'..=b'z' => {
            let open = at + bytes[at..].iter().position(|&b| b == b'[')?;
            let end = closing(bytes, open)? + 1;
            if bytes.get(end) == Some(&b'{') {
                closing(bytes, end).map(|c| c + 1)
            } else {
                Some(end)
            }
        }
        _ => None,
    }
}

/// The bracket that closes the one at `open`, skipping strings.
fn closing(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    while i < bytes.len() {
        match bytes[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            b'"' => i = super::parse::string_end(bytes, i + 1)?,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The operands of a list: each one's name (`%x`, `f32[8]{0} %x`,
/// `%t#0#1`, after a `/*index=5*/` comment), with its range in the line.
fn operands(list: &str, offset: usize) -> impl Iterator<Item = (Range<usize>, &str)> {
    let bytes = list.as_bytes();
    let mut start = 0;
    let mut done = list.trim().is_empty();
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        // The next comma outside brackets ends this operand.
        let mut depth = 0usize;
        let mut end = bytes.len();
        for (k, &b) in bytes[start..].iter().enumerate() {
            match b {
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth = depth.saturating_sub(1),
                b',' if depth == 0 => {
                    end = start + k;
                    break;
                }
                _ => {}
            }
        }
        let part = start..end;
        done = end == bytes.len();
        start = end + 1;
        let mut text = &list[part.clone()];
        // A comment after the name (`%b /* c */`) is not part of it.
        while let Some(open) = text
            .trim_end()
            .strip_suffix("*/")
            .and_then(|t| t.rfind("/*"))
        {
            text = &text[..open];
        }
        // The name is the last word (after an operand's shape in old dumps,
        // or a comment), up to a compact tuple index (`#0`).
        let word_start = text.trim_end().rfind([' ', '/']).map_or(0, |k| k + 1);
        let word = text[word_start..].trim_end();
        let name = word.trim_start_matches('%');
        let name = &name[..name.find('#').unwrap_or(name.len())];
        let at = offset + part.start + word_start;
        Some((at..at + word.len(), name))
    })
}

/// Is `text` a valid shape: no negative dimension, and each layout's
/// minor-to-major a permutation of its array's dimensions? Returns the range
/// of the problem within `text` and what it is.
pub(super) fn shape_problem(text: &str) -> Result<(), (Range<usize>, String)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(k) = bytes[i..].iter().position(|&b| b == b'[') {
        let open = i + k;
        let close = match bytes[open..].iter().position(|&b| b == b']') {
            Some(c) => open + c,
            None => return Ok(()),
        };
        let dims = &text[open + 1..close];
        let rank = if dims.trim().is_empty() {
            0
        } else {
            dims.split(',').count()
        };
        if let Some(minus) = dims.find('-') {
            return Err((
                open + 1 + minus..close,
                format!(
                    "dimension `{}` is negative",
                    dims[minus..].split(',').next().unwrap_or("")
                ),
            ));
        }
        i = close + 1;
        if bytes.get(i) == Some(&b'{') {
            let Some(k) = bytes[i..].iter().position(|&b| b == b'}') else {
                return Err((i..text.len(), "a layout is not closed".into()));
            };
            let end = i + k;
            layout_problem(&text[i + 1..end], rank).map_err(|title| (i..end + 1, title))?;
        }
    }
    Ok(())
}

/// A layout (the text inside its braces) for an array of `rank` dimensions:
/// its minor-to-major order numbers each dimension once
/// ([`Layout::order_problem`]), and its numeric fields hold numbers.
fn layout_problem(layout: &str, rank: usize) -> Result<(), String> {
    let (order, fields) = layout.split_once(':').unwrap_or((layout, ""));
    let order = order.trim();
    let numbers: Vec<u64> = if order.is_empty() {
        Vec::new()
    } else {
        order
            .split(',')
            .map(|d| d.trim().parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("layout `{{{order}}}` is not a list of dimension numbers"))?
    };
    if let Some(problem) = Layout::order_problem(&numbers, rank) {
        return Err(problem);
    }
    // `T(8,128)(2,1)S(1)`: each numeric field's parentheses hold digits,
    // commas and `*` only.
    for field in NUMERIC_LAYOUT_FIELDS {
        let mut rest = fields;
        while let Some(k) = rest.find(field) {
            let after = &rest[k + field.len()..];
            let close = after.find(')').unwrap_or(after.len());
            let inside = &after[..close];
            if !inside
                .bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b',' | b'*' | b' '))
            {
                return Err(format!(
                    "layout field `{field}{inside})` holds numbers only"
                ));
            }
            rest = &after[close..];
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(lines: &[&'static str]) -> Result<(), String> {
        let mut check = BodyCheck::default();
        for (i, line) in lines.iter().enumerate() {
            let eq = line.find(" = ").unwrap();
            let name = line[..eq]
                .trim()
                .trim_start_matches("ROOT ")
                .trim_start_matches('%');
            check.line(i, line, eq + 3).map_err(|p| p.title)?;
            assert!(check.define(name), "{name} defined twice");
        }
        check.finish("fused").map_err(|(_, p)| p.title)
    }

    #[test]
    fn a_valid_body_passes() {
        check(&[
            "  %p = f32[4]{0} parameter(0)",
            "  %q = (f32[4]{0}, s32[]) parameter(1)",
            "  %c = f32[] constant({1, 2})",
            "  %g = f32[4]{0} get-tuple-element(%q), index=0",
            "  %old = f32[4]{0} add(f32[4]{0} %p, f32[4]{0} %g)",
            "  %t = f32[4]{0} custom-call(%q#0, %p), custom_call_target=\"x(\"",
            "  %u = (f32[4]{0}, f32[4]{0}) tuple(%p, /*index=1*/%t /* t */)",
            "  %v = f32[4]{0}\t/* p */negate( %u#0 )",
            "  ROOT %r = f32[2,4]{1,0:T(8,128)} broadcast(%old), dimensions={1}",
        ])
        .unwrap();
    }

    #[test]
    fn what_xla_refuses_is_refused() {
        let cases: [(&[&'static str], &str); 7] = [
            (
                &[
                    "  %p = f32[4]{0} parameter(0)",
                    "  ROOT %n = f32[4]{0} negate(%x)",
                ],
                "unknown instruction `%x`",
            ),
            (
                &[
                    "  ROOT %n = f32[4]{0} negate(%p)",
                    "  %p = f32[4]{0} parameter(0)",
                ],
                "used before",
            ),
            (
                &[
                    "  %p = f32[4]{0} parameter(0)",
                    "  ROOT %n = f32[4]{0} add(%p)",
                ],
                "takes 2",
            ),
            (&["  %p = f32[4]{0} parameter(3)"], "out of range"),
            (
                &[
                    "  %p = f32[4]{0} parameter(0)",
                    "  %q = f32[4]{0} parameter(0)",
                ],
                "declared twice",
            ),
            (&["  %p = f32[-4]{0} parameter(0)"], "negative"),
            (&["  %p = f32[4]{0,1} parameter(0)"], "not an order"),
        ];
        for (lines, expected) in cases {
            let error = check(lines).unwrap_err();
            assert!(error.contains(expected), "{lines:?}: {error}");
        }
    }

    #[test]
    fn the_root_returns_what_the_header_declares() {
        let header = "%fused (p: f32[4]) -> (f32[4], /*index=1*/s32[]) {";
        let root = "  ROOT %t = (f32[4]{0}, s32[]{:T(128)}) tuple(%p, %c)";
        assert!(root_matches_header(header, root, 12).is_ok());
        let wrong = "  ROOT %t = (f32[4,3]{1,0}, s32[]) tuple(%p, %c)";
        let problem = root_matches_header(header, wrong, 12).unwrap_err();
        assert!(
            problem.title.contains("not the (f32[4], /*index=1*/s32[])"),
            "{}",
            problem.title
        );
        assert!(root_matches_header("%fused {", wrong, 12).is_ok());
    }

    #[test]
    fn odd_shapes_are_errors_not_panics() {
        for text in [
            "(f32[2]{0)]",
            "f32[2]{",
            "f32[",
            "[]{}",
            "f32[é]{0}",
            "(f32[2]{0}, /*x*/s32[]{:T(1é)})",
        ] {
            let _ = shape_problem(text);
        }
        assert!(shape_problem("(f32[2]{0)]").is_err());
    }

    #[test]
    fn layouts_are_permutations() {
        assert!(layout_problem("1,0", 2).is_ok());
        assert!(layout_problem("", 3).is_ok());
        assert!(layout_problem("7", 1).is_err());
        assert!(layout_problem("0,1,2", 1).is_err());
        assert!(layout_problem("1,1", 2).is_err());
        assert!(layout_problem("0", 2).is_err());
        assert!(layout_problem("1,0:T(8,128)(2,1)S(1)", 2).is_ok());
        assert!(layout_problem(":T(128)", 0).is_ok());
        assert!(layout_problem(":T(x.1)", 0).is_err());
    }
}
