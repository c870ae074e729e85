//! The cheap check every line of a fusion body read on demand passes at load
//! ([`check`]), and the line scanning it shares with the reads on demand
//! ([`line_head`]): a cut or garbled body is refused even if no analysis reads it.

use super::body_check::{self, BodyCheck};
use super::ir::CallRole;
use crate::error::Error;
use crate::source::SourceFile;

/// What the structural check learns of a deferred body without parsing it.
pub(super) struct Structure<'a> {
    /// The ROOT line's index.
    pub(super) root: Option<usize>,
    /// The computations its lines name in call attributes (`calls=`,
    /// `to_apply=`, ...), with the offset of each name: which computations are
    /// fused or thread-local is decided from them (see `analysis::graph`).
    pub(super) calls: Vec<(CallRole, &'a str, usize)>,
}

/// The cheap check every deferred line passes at load: brackets balance
/// outside strings, the line is `[ROOT ]name = ...`, names are defined once,
/// there is at most one ROOT, and what XLA's parser checks of each line
/// ([`body_check`]: operands defined earlier, operand counts, parameter
/// numbers, dimensions and layouts). It also collects the computations the body
/// calls, read from call attributes outside strings and brackets; when the body
/// is parsed, the grammar's reading must agree (`Deferred::parse` checks).
pub(super) fn check<'a>(
    file: &'a SourceFile,
    comp: &str,
    header: &str,
    lines: &[(u32, u32)],
) -> Result<Structure<'a>, Error> {
    let mut body = BodyCheck::default();
    let mut structure = Structure {
        root: None,
        calls: Vec::new(),
    };
    for (i, &(offset, len)) in lines.iter().enumerate() {
        let (offset, len) = (offset as usize, len as usize);
        let text = &file.text[offset..offset + len];
        let head = line_head(text);
        if let Some(root) = head.root {
            if structure.root.is_some() {
                return Err(Error::at(
                    file,
                    offset + root..offset + root + 4,
                    format!("computation `%{comp}` has two ROOTs"),
                    "second ROOT",
                ));
            }
            structure.root = Some(i);
        }
        let token = offset + head.token.start..offset + head.token.end;
        let name = &text[head.name];
        if name.is_empty() || !head.defines {
            return Err(Error::at(
                file,
                token.start..token.end.max(token.start + 1),
                "expected an instruction: `name = shape opcode(operands)`",
                "not an instruction",
            ));
        }
        if let Some((at_byte, what)) = scan_line(text, offset, &mut structure.calls) {
            return Err(Error::at(
                file,
                offset + at_byte..offset + at_byte + 1,
                format!("brackets do not balance: {what}"),
                "here",
            )
            .with_note("the line was probably cut or edited"));
        }
        body.line(i, text, head.token.end + 3)
            .map_err(|p| problem(file, offset, p))?;
        if !body.define(name) {
            return Err(Error::at(
                file,
                token,
                format!("instruction `%{name}` is defined twice"),
                "second definition",
            ));
        }
    }
    body.finish(comp)
        .map_err(|(i, p)| problem(file, lines[i].0 as usize, p))?;
    // Without a ROOT marker XLA takes the last instruction.
    if let Some(&(offset, len)) = lines.get(structure.root.unwrap_or(lines.len().wrapping_sub(1))) {
        let (offset, len) = (offset as usize, len as usize);
        let text = &file.text[offset..offset + len];
        body_check::root_matches_header(header, text, line_head(text).token.end + 3)
            .map_err(|p| problem(file, offset, p))?;
    }
    Ok(structure)
}

/// A token-level problem on the line at `offset`, as an input error there.
fn problem(file: &SourceFile, offset: usize, p: body_check::Problem) -> Error {
    let end = p.at.end.max(p.at.start + 1);
    Error::at(file, offset + p.at.start..offset + end, p.title, p.label)
}

/// Where a line's `[ROOT ]%name = ` prefix puts things, relative to the line.
pub(super) struct LineHead {
    /// Where `ROOT` is, if the line starts with it.
    pub(super) root: Option<usize>,
    /// The name as written, `%` included.
    pub(super) token: std::ops::Range<usize>,
    /// The name without its `%`.
    pub(super) name: std::ops::Range<usize>,
    /// The name is followed by ` = `.
    pub(super) defines: bool,
}

pub(super) fn line_head(text: &str) -> LineHead {
    let indent = text.len() - text.trim_start().len();
    let mut at = indent;
    let root = text[at..].starts_with("ROOT ").then_some(indent);
    if root.is_some() {
        at += 5;
    }
    let rest = &text[at..];
    let token_len = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
    let percent = rest[..token_len].len() - rest[..token_len].trim_start_matches('%').len();
    LineHead {
        root,
        token: at..at + token_len,
        name: at + percent..at + token_len,
        defines: rest[token_len..].starts_with(" = "),
    }
}

pub(super) fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '%' | '_' | '.' | '-')
}

/// The attributes that name computations, as the grammar's `called_attr` and
/// `called_list_attr` read them.
const CALL_KEYS: [&str; 10] = [
    "calls",
    "to_apply",
    "condition",
    "body",
    "select",
    "scatter",
    "called_computations",
    "branch_computations",
    "true_computation",
    "false_computation",
];

/// Walks a line outside strings: collects the computation names of call
/// attributes (at the attribute list's depth), and says where brackets first
/// fail to balance.
fn scan_line<'a>(
    text: &'a str,
    offset: usize,
    calls: &mut Vec<(CallRole, &'a str, usize)>,
) -> Option<(usize, &'static str)> {
    let bytes = text.as_bytes();
    let mut stack: Vec<u8> = Vec::new();
    let mut i = 0;
    // Most bytes are none of these: they are skipped a table look-up each,
    // and a string's contents in one search for its closing quote (a body's
    // text is read whole here, so this walk is the cost of the check).
    while let Some(k) = bytes[i..].iter().position(|&b| SPECIAL[b as usize]) {
        i += k;
        match bytes[i] {
            b'"' => match super::parse::string_end(bytes, i + 1) {
                Some(end) => i = end,
                None => return Some((text.len().saturating_sub(1), "a string is not closed")),
            },
            b @ (b'(' | b'[' | b'{') => stack.push(b),
            b'=' if stack.is_empty() => call_attribute(text, i, offset, calls),
            b'=' => {}
            close => {
                let open = match close {
                    b')' => b'(',
                    b']' => b'[',
                    _ => b'{',
                };
                if stack.pop() != Some(open) {
                    return Some((i, "a closing bracket without its opening one"));
                }
            }
        }
        i += 1;
    }
    (!stack.is_empty()).then(|| (text.len().saturating_sub(1), "a bracket is not closed"))
}

/// The bytes [`scan_line`] stops at: brackets, `=` and the opening quote of a string.
const SPECIAL: [bool; 256] = crate::source::byte_set(b"()[]{}=\"");

/// At the `=` at `eq`: if the key before it names computations, the names
/// after it (`%c` or `{%a, %b}`).
fn call_attribute<'a>(
    text: &'a str,
    eq: usize,
    offset: usize,
    calls: &mut Vec<(CallRole, &'a str, usize)>,
) {
    let key_start = text[..eq]
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map_or(0, |k| k + 1);
    let key = &text[key_start..eq];
    if !CALL_KEYS.contains(&key) {
        return;
    }
    let role = CallRole::of_key(key);
    let value = &text[eq + 1..];
    let (names, mut pos) = match value.strip_prefix('{') {
        Some(list) => (&list[..list.find('}').unwrap_or(list.len())], eq + 2),
        None => (value, eq + 1),
    };
    for part in names.split(',') {
        let token = part.trim_start();
        let len = token
            .find(|c: char| !is_name_char(c))
            .unwrap_or(token.len());
        let name = token[..len].trim_start_matches('%');
        if !name.is_empty() {
            calls.push((role, name, offset + pos + part.len() - token.len()));
        }
        pos += part.len() + 1;
        if !value.starts_with('{') {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::scan_line;

    fn scan(text: &str) -> (Option<(usize, &'static str)>, Vec<String>) {
        let mut calls = Vec::new();
        let result = scan_line(text, 0, &mut calls);
        (result, calls.iter().map(|c| c.1.to_string()).collect())
    }

    #[test]
    fn brackets_and_quotes_inside_strings_do_not_count() {
        let line = r#"%f = f32[2]{0} fusion(%a), calls=%c, metadata={op_name="x(\"]{" source_file="a.py"}"#;
        assert_eq!(scan(line), (None, vec!["c".to_string()]));
    }

    #[test]
    fn damage_is_found_where_it_is() {
        assert_eq!(
            scan("%f = f32[2)").0,
            Some((10, "a closing bracket without its opening one"))
        );
        assert_eq!(
            scan("%f = f32[2]{0").0,
            Some((12, "a bracket is not closed"))
        );
        // The escaped quote does not close the string: the error is at the line's end.
        let unclosed = r#"%f = f32[] x(), m={a="b\"}"#;
        assert_eq!(
            scan(unclosed).0,
            Some((unclosed.len() - 1, "a string is not closed"))
        );
    }

    #[test]
    fn calls_are_read_outside_brackets_only() {
        let line =
            "%w = (s32[]) while(%t), condition=%cond, body=%body, backend_config={calls=%no}";
        assert_eq!(
            scan(line),
            (None, vec!["cond".to_string(), "body".to_string()])
        );
    }
}
