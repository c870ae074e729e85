//! Runs the pest grammar (`grammar/hlo.pest`) and turns its errors into ours.
//!
//! Pass 1 (`Rule::module`) cuts the file into lines of known kinds; pass 2 parses
//! each line with its own rule. See the grammar's header for why.

use pest::iterators::Pair;
use pest::Parser;

use crate::error::Error;
use crate::source::SourceFile;

#[derive(pest_derive::Parser)]
#[grammar = "grammar/hlo.pest"]
pub struct HloParser;

/// A line of the file: its byte offset and its text (without the line break).
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    pub offset: usize,
    pub text: &'a str,
}

/// The file cut into its parts (pass 1).
pub struct Outline<'a> {
    pub header: Line<'a>,
    pub stack_tables: Option<Pair<'a, Rule>>,
    pub computations: Vec<OutlineComputation<'a>>,
}

pub struct OutlineComputation<'a> {
    pub header: Line<'a>,
    pub instructions: Vec<Line<'a>>,
    pub close: Line<'a>,
}

/// How deeply brackets may nest in one line. Real dumps stay under 20; the
/// limit keeps pest's recursion far from the end of the stack on hostile input.
const MAX_NESTING: usize = 200;

/// Pass 1: finds the header, the tables and each computation's lines.
///
/// A big file is cut after computations' closing lines into parts read on all
/// cores: the first with `module`, the others with `computations`. Any error
/// reads the whole file again in one piece, so that it is reported exactly as
/// a one-piece read reports it.
pub fn outline(file: &SourceFile) -> Result<Outline<'_>, Error> {
    use rayon::prelude::*;
    let text = file.text.as_str();
    let cuts = cuts(text, 4 * rayon::current_num_threads());
    if cuts.is_empty() {
        return outline_whole(file);
    }
    let parts: Vec<(usize, usize)> = cuts
        .iter()
        .zip(cuts.iter().skip(1).chain(std::iter::once(&text.len())))
        .map(|(&a, &b)| (a, b))
        .collect();
    let read_rest = || {
        parts
            .par_iter()
            .map(|&(a, b)| {
                let pairs = HloParser::parse(Rule::computations, &text[a..b]).ok()?;
                let computation_pairs = pairs
                    .flat_map(|p| p.into_inner())
                    .filter(|p| p.as_rule() == Rule::computation);
                computation_pairs
                    .map(|p| outline_computation(file, p, a).ok())
                    .collect()
            })
            .collect::<Option<Vec<Vec<OutlineComputation>>>>()
    };
    let read_first = || {
        let pairs = HloParser::parse(Rule::module, &text[..cuts[0]]).ok()?;
        outline_of(file, pairs, 0).ok()
    };
    // The first part (the header and the first computations) is read on this
    // thread while the pool reads the others, not before them: its pest pairs
    // cannot move between threads, so it cannot be a pool task. With a pool
    // of one thread, one after the other, as asked.
    let (first, rest) = if rayon::current_num_threads() > 1 {
        let mut rest = None;
        let first = rayon::in_place_scope(|scope| {
            scope.spawn(|_| rest = read_rest());
            read_first()
        });
        (first, rest)
    } else {
        (read_first(), read_rest())
    };
    let (Some(mut outline), Some(rest)) = (first, rest) else {
        return outline_whole(file);
    };
    outline.computations.extend(rest.into_iter().flatten());
    Ok(outline)
}

/// Where to cut `text` into about `parts` parts, each cut right after a line
/// that starts with `}` (a computation's close: no other line starts so).
/// None for a file too small to be worth it.
fn cuts(text: &str, parts: usize) -> Vec<usize> {
    const MIN_PART: usize = 1 << 20;
    let step = text.len() / parts.max(1);
    if step < MIN_PART {
        return Vec::new();
    }
    let finder = memchr::memmem::Finder::new(b"\n}");
    let mut cuts = Vec::new();
    let mut from = step;
    while from < text.len() {
        let Some(close) = finder.find(&text.as_bytes()[from..]).map(|k| from + k + 1) else {
            break;
        };
        let Some(end) = memchr::memchr(b'\n', &text.as_bytes()[close..]).map(|k| close + k + 1)
        else {
            break;
        };
        if end < text.len() {
            cuts.push(end);
        }
        from = (end + step).max(from + step);
    }
    cuts
}

/// Pass 1 in one piece.
fn outline_whole(file: &SourceFile) -> Result<Outline<'_>, Error> {
    let text = file.text.as_str();
    let module = HloParser::parse(Rule::module, text).map_err(|e| {
        mlir_error(file)
            .or_else(|| indented_close(file))
            .unwrap_or_else(|| syntax_error(file, Rule::module, Line { offset: 0, text }, &e))
    })?;
    outline_of(file, module, 0)
}

/// The outline of a `module` parse of the text starting at `base`.
fn outline_of<'a>(
    file: &'a SourceFile,
    mut pairs: pest::iterators::Pairs<'a, Rule>,
    base: usize,
) -> Result<Outline<'a>, Error> {
    let module = pairs
        .next()
        .expect("a successful parse of Rule::module yields one pair");
    let mut outline = Outline {
        header: Line {
            offset: 0,
            text: "",
        },
        stack_tables: None,
        computations: Vec::new(),
    };
    for pair in module.into_inner() {
        match pair.as_rule() {
            Rule::header_line => outline.header = line(&pair, base),
            Rule::stack_tables => outline.stack_tables = Some(pair),
            Rule::computation => outline
                .computations
                .push(outline_computation(file, pair, base)?),
            _ => {}
        }
    }
    Ok(outline)
}

/// One `computation` pair of a parse of the text starting at `base`.
fn outline_computation<'a>(
    file: &'a SourceFile,
    pair: Pair<'a, Rule>,
    base: usize,
) -> Result<OutlineComputation<'a>, Error> {
    let mut parts = pair.into_inner();
    let header = parts.next().map(|p| line(&p, base)).unwrap_or(Line {
        offset: 0,
        text: "",
    });
    let mut instructions = Vec::new();
    let mut close = header;
    for p in parts {
        match p.as_rule() {
            Rule::instr_lines => {
                let start = base + p.as_span().start();
                let mut offset = 0;
                for text in p.as_str().split_inclusive('\n') {
                    let body = text.trim_end_matches(['\n', '\r']);
                    let trimmed = body.trim_start_matches([' ', '\t']);
                    if trimmed.starts_with('}') {
                        let at = start + offset + body.len() - trimmed.len();
                        return Err(indented_close_error(file, at));
                    }
                    if !body.trim().is_empty() {
                        instructions.push(Line {
                            offset: start + offset,
                            text: body,
                        });
                    }
                    offset += text.len();
                }
            }
            _ => close = line(&p, base),
        }
    }
    Ok(OutlineComputation {
        header,
        instructions,
        close,
    })
}

/// A computation's instruction lines run to the first line that starts with
/// `}` (one search per computation): a closing brace with spaces before it,
/// which XLA never prints, makes the search run on. When it runs to the end of
/// the file the grammar fails there; said plainly, at the brace. (When it stops
/// at a later computation's close, `outline` finds the brace among the lines.)
/// An indented `}` right after a header closes an empty computation, which
/// the grammar accepts. Asked only after the grammar refused the file.
fn indented_close(file: &SourceFile) -> Option<Error> {
    let mut offset = 0;
    let mut after_header = false;
    for line in file.text.split_inclusive('\n') {
        let trimmed = line.trim_start_matches([' ', '\t']);
        if trimmed.len() < line.len() && trimmed.starts_with('}') && !after_header {
            return Some(indented_close_error(
                file,
                offset + line.len() - trimmed.len(),
            ));
        }
        if !line.trim().is_empty() {
            after_header = line.trim_end().ends_with('{');
        }
        offset += line.len();
    }
    None
}

fn indented_close_error(file: &SourceFile, at: usize) -> Error {
    Error::at(
        file,
        at..at + 1,
        "a computation's closing `}` must start its line",
        "spaces before the closing brace",
    )
    .with_note("XLA prints it at the start of the line; remove the spaces before it")
}

/// StableHLO and other MLIR text (`module @jit_f attributes {...} {`,
/// `func.func`) is what `jax.jit(f).lower(...).as_text()` gives, the first
/// thing people try; it is not the HLO XLA compiles it to, and has no buffer
/// assignment to reproduce. Said plainly rather than as a syntax error.
/// Only asked after the grammar refused a file, so it costs valid files nothing.
fn mlir_error(file: &SourceFile) -> Option<Error> {
    let text = file.text.as_str();
    // The first line that is not blank or a comment (MLIR's `//`, `#loc` aliases).
    let mut offset = 0;
    let first = text.split_inclusive('\n').find_map(|line| {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim_start();
        let skip =
            trimmed.trim().is_empty() || trimmed.starts_with("//") || trimmed.starts_with('#');
        (!skip).then(|| (start + line.len() - trimmed.len(), trimmed))
    })?;
    let (at, line) = first;
    let token = [
        "module @",
        "module {",
        "module attributes",
        "func.func",
        "\"builtin.module\"",
    ]
    .into_iter()
    .find(|t| line.starts_with(t))?;
    let token_len = token.trim_end_matches([' ', '@', '{']).len();
    Some(
        Error::at(
            file,
            at..at + token_len,
            "this is StableHLO (MLIR), not HLO text",
            "an MLIR module: what `lowered.as_text()` gives",
        )
        .with_note(
            "hlomem reads the HLO XLA compiles it to: pass `jax.jit(f).lower(...).compile().as_text()`, \
             or a dump folder (XLA_FLAGS=--xla_dump_to=DIR)",
        ),
    )
}

fn line<'a>(pair: &Pair<'a, Rule>, base: usize) -> Line<'a> {
    Line {
        offset: base + pair.as_span().start(),
        text: pair.as_str(),
    }
}

/// Pass 2: parses one line with `rule`; errors point into the file.
pub fn parse_line<'a>(
    file: &SourceFile,
    rule: Rule,
    line: Line<'a>,
) -> Result<Pair<'a, Rule>, Error> {
    if let Some(at) = too_deep(line.text) {
        return Err(Error::at(
            file,
            line.offset + at..line.offset + at + 1,
            format!("brackets nest more than {MAX_NESTING} deep"),
            "too deep",
        )
        .with_note("no XLA dump nests this deep; the file is probably corrupt"));
    }
    let mut pairs = HloParser::parse(rule, line.text).map_err(|e| {
        // A line the fast rule refused is described by the rule that parses
        // everything in place, so that the message names what was expected.
        if rule != Rule::instruction {
            return syntax_error(file, rule, line, &e);
        }
        match HloParser::parse(Rule::instruction_strict, line.text) {
            Err(strict_error) => syntax_error(file, Rule::instruction_strict, line, &strict_error),
            Ok(_) => syntax_error(file, rule, line, &e),
        }
    })?;
    Ok(pairs
        .next()
        .expect("a successful parse yields its rule's pair"))
}

/// The offset at which brackets first nest deeper than `MAX_NESTING`, outside strings.
fn too_deep(text: &str) -> Option<usize> {
    // Brackets cannot nest deeper than there are opening ones (strings only
    // add to the count): one quick count spares nearly every line the walk.
    let opening = text
        .bytes()
        .filter(|b| matches!(b, b'(' | b'[' | b'{'))
        .count();
    if opening <= MAX_NESTING {
        return None;
    }
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            // An unclosed string runs to the end of the line.
            b'"' => i = string_end(bytes, i + 1)?,
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(i);
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the quote closing a `"..."` string whose contents start at
/// `from` (a backslash escapes the byte after it), for the scans that look at
/// brackets only; `None` when the line ends first.
pub(super) fn string_end(bytes: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let k = from + memchr::memchr2(b'"', b'\\', bytes.get(from..)?)?;
        if bytes[k] == b'"' {
            return Some(k);
        }
        from = k + 2;
    }
}

fn syntax_error(file: &SourceFile, rule: Rule, line: Line, e: &pest::error::Error<Rule>) -> Error {
    use pest::error::{ErrorVariant, InputLocation};
    let (at, mut expected) = match detailed_expectations(rule, line.text) {
        // Parsing again with pest's error detail names the punctuation that was
        // expected (`,` or `]`), which the plain error, listing rules only, cannot.
        Some(detail) => detail,
        None => {
            let at = match e.location {
                InputLocation::Pos(p) => p,
                InputLocation::Span((s, _)) => s,
            };
            let words = match &e.variant {
                ErrorVariant::ParsingError { positives, .. } => {
                    positives.iter().map(|r| describe(*r).to_string()).collect()
                }
                ErrorVariant::CustomError { .. } => Vec::new(),
            };
            (at, words)
        }
    };
    let at = line.offset + at;
    expected.dedup();
    let found = found_at(&file.text, at);
    let expected = match expected.len() {
        0 => "something else".to_string(),
        1 => expected[0].clone(),
        n => format!("{} or {}", expected[..n - 1].join(", "), expected[n - 1]),
    };
    let mut error = Error::at(
        file,
        at..at + found.len().max(1),
        format!("expected {expected}, found {}", found.describe()),
        format!("expected {expected}"),
    );
    if found.is_end_of_file() {
        error = error.with_note("the file ends here: it may be truncated");
    }
    error
}

/// Parses `text` again with pest's error detail on (only ever after a failure)
/// and returns the failure's offset in `text` and words for what could have stood
/// there: the rules tried and the punctuation they wanted, spaces left out.
fn detailed_expectations(rule: Rule, text: &str) -> Option<(usize, Vec<String>)> {
    // The switch is global: serialize the (rare) failures that use it.
    static DETAIL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = DETAIL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    pest::set_error_detail(true);
    let result = HloParser::parse(rule, text);
    pest::set_error_detail(false);
    let attempts = result.err()?.parse_attempts()?;
    let mut words: Vec<String> = Vec::new();
    for stack in attempts.call_stacks() {
        if let Some(&r) = stack.deepest.get_rule() {
            words.push(describe(r).to_string());
        }
    }
    for token in attempts.expected_tokens() {
        let token = token.to_string();
        let word = match token.as_str() {
            " " | "\t" | "\r" | "\n" | "\r\n" | "/*" | "BUILTIN_RULE" => continue,
            // A character range prints as `a..z`.
            t if t.chars().count() == 4 && t.chars().skip(1).take(2).eq("..".chars()) => {
                match t.chars().next() {
                    Some(c) if c.is_ascii_digit() => "a digit".to_string(),
                    Some(c) if c.is_alphabetic() => "a letter".to_string(),
                    _ => continue, // spaces and line breaks
                }
            }
            t => format!("`{}`", t.escape_debug()),
        };
        words.push(word);
    }
    // Drop a token that a rule's words already show (`}` beside "`}` closing ...").
    let rules_words = words.clone();
    let shown = |w: &String| {
        rules_words.iter().any(|r| r != w && r.contains(w.as_str()))
            || (w == "a digit" && rules_words.iter().any(|r| r == "an integer"))
    };
    let mut seen = std::collections::HashSet::new();
    words.retain(|w| w != "a space" && !shown(w) && seen.insert(w.clone()));
    words.truncate(8);
    (!words.is_empty()).then_some((attempts.max_position, words))
}

/// What stands at an error position, for the message.
struct Found<'a>(Option<&'a str>);

impl Found<'_> {
    fn len(&self) -> usize {
        self.0.map_or(0, str::len)
    }
    fn is_end_of_file(&self) -> bool {
        self.0.is_none()
    }
    fn describe(&self) -> String {
        match self.0 {
            None => "end of file".to_string(),
            Some("\n") | Some("\r\n") => "end of line".to_string(),
            Some(token) => format!("`{token}`"),
        }
    }
}

fn found_at(text: &str, at: usize) -> Found<'_> {
    let Some(rest) = text.get(at..) else {
        return Found(None);
    };
    let Some(first) = rest.chars().next() else {
        return Found(None);
    };
    if rest.starts_with("\r\n") {
        return Found(Some("\r\n"));
    }
    let len = if first.is_alphanumeric() || first == '_' || first == '%' {
        rest.find(|c: char| !(c.is_alphanumeric() || "_.-%".contains(c)))
            .unwrap_or(rest.len())
    } else {
        first.len_utf8()
    };
    // Keep long identifiers readable in a one-line message.
    let len = rest.char_indices().nth(40).map_or(len, |(i, _)| len.min(i));
    Found(Some(&rest[..len]))
}

/// What each rule is called in an error message. Exhaustive on purpose: a new
/// rule does not compile until it has words.
pub fn describe(rule: Rule) -> &'static str {
    match rule {
        Rule::EOI => "end of line",
        Rule::module | Rule::computations => "an HLO module",
        Rule::header_line | Rule::header => "the header (`HloModule` and a name)",
        Rule::computation | Rule::comp_header_line | Rule::comp_header | Rule::comp_name => {
            "a computation (`%name (params) -> shape {`)"
        }
        Rule::instruction | Rule::instruction_head | Rule::instruction_call => {
            "an instruction (`%name = shape opcode(...)`)"
        }
        // It runs to the first line that starts with `}`.
        Rule::instr_lines => {
            "an instruction (`%name = shape opcode(...)`) or `}` closing the computation"
        }
        Rule::comp_close_line | Rule::comp_close => "`}` closing the computation",
        Rule::stack_tables => "the stack-frame tables",
        Rule::kw_file_names => "`FileNames`",
        Rule::kw_function_names => "`FunctionNames`",
        Rule::kw_file_locations => "`FileLocations`",
        Rule::kw_stack_frames => "`StackFrames`",
        Rule::string_row => "a table row (`1 \"name\"`)",
        Rule::record_row => "a table row (`1 {key=value ...}`)",
        Rule::record_field => "`key=number`",
        Rule::module_name => "a module name",
        Rule::entry_layout_attr => "`entry_computation_layout={...}`",
        Rule::program_shape => "a program shape (`(shapes)->shape`)",
        Rule::io_alias_attr => "`input_output_alias={...}`",
        Rule::alias_entry => "an alias (`{output}: (parameter, {index}, may-alias)`)",
        Rule::alias_kind => "`may-alias` or `must-alias`",
        Rule::buffer_donor_attr => "`buffer_donor={...}`",
        Rule::donor_entry => "a donor (`(parameter, {index})`)",
        Rule::shape_index => "a shape index (`{}`, `{0,1}`)",
        Rule::kw_entry => "`ENTRY`",
        Rule::param_list => "a parameter list (`(p0: f32[2], ...)`)",
        Rule::param_decl => "a parameter (`name: shape`)",
        Rule::kw_root => "`ROOT`",
        Rule::constant_call => "`constant(literal)`",
        Rule::literal => "a literal",
        Rule::op_call => "an opcode and operands (`add(%x, %y)`)",
        Rule::opcode => "an opcode",
        Rule::name | Rule::ident => "a name",
        Rule::operand_list => "operands",
        Rule::operand => "an operand",
        Rule::parameter_number => "a parameter number",
        Rule::gte_index => "a tuple index (`#0`)",
        Rule::tuple_shape => "a tuple shape",
        Rule::buffer_shape => "a buffer shape (`b(...)`)",
        Rule::array_shape => "a shape (`f32[2,3]`)",
        Rule::elem_type => "an element type (`f32`, `bf16`, `pred`, ...)",
        Rule::dim => "a dimension size",
        Rule::dynamic_unbounded => "`?`",
        Rule::dynamic_bound => "`<=N`",
        Rule::layout => "a layout (`{1,0}`)",
        Rule::minor_to_major => "dimension numbers",
        Rule::tile_field => "tiles (`T(8,128)`)",
        Rule::tile => "a tile (`(8,128)`)",
        Rule::tile_dim => "a tile size",
        Rule::element_bits => "`E(bits)`",
        Rule::memory_space => "`S(space)`",
        Rule::tail_padding => "`L(n)`",
        Rule::other_layout_field => "a layout field",
        Rule::metadata_attr | Rule::metadata => "`metadata={...}`",
        Rule::instruction_strict => "an instruction (`%name = shape opcode(operands), ...`)",
        Rule::shape_text | Rule::shape_only => "a shape (`f32[2,3]`)",
        Rule::tuple_texts => "a tuple shape (`(f32[2], s32[])`)",
        Rule::meta_field => "a metadata field (`op_name=\"...\"`)",
        Rule::called_attr | Rule::called_key => "a called computation (`calls=%f`)",
        Rule::called_list_attr | Rule::called_list_key => "called computations (`{%f, %g}`)",
        Rule::control_preds_attr => "`control-predecessors={...}`",
        Rule::name_list => "a list of names (`{%a, %b}`)",
        Rule::index_attr => "`index=N`",
        Rule::target_attr => "`custom_call_target=\"...\"`",
        Rule::kind_attr => "`kind=...`",
        Rule::operand_alias_attr => "`output_to_operand_aliasing={...}`",
        Rule::operand_alias => "an alias (`{output}: (operand, {index})`)",
        Rule::generic_attr => "an attribute (`name=value`)",
        Rule::attr_name => "an attribute name",
        Rule::attr_value => "an attribute value",
        Rule::string => "a quoted string",
        Rule::int => "an integer",
        // Silent rules never appear in errors; pest still gives them variants.
        Rule::blank_line | Rule::line_end => "end of line",
        Rule::sp_inline | Rule::sp | Rule::sp1 | Rule::comment => "a space",
        Rule::line_comment => "a `//` comment",
        Rule::module_attr | Rule::attribute => "an attribute (`name=value`)",
        Rule::shape => "a shape (`f32[2,3]`)",
        Rule::layout_field => "a layout field",
        Rule::bare_chars
        | Rule::value_run
        | Rule::brace_group
        | Rule::bracket_group
        | Rule::paren_group => "balanced brackets",
        Rule::dq_string => "a quoted string",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module big enough to be outlined in parts: many small computations.
    fn big_module(computations: usize) -> String {
        let mut text =
            String::from("HloModule big, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n\n");
        for i in 0..computations {
            text += &format!(
                "%c{i} (p: f32[4]) -> f32[4] {{\n  %p = f32[4]{{0}} parameter(0)\n  ROOT %r = f32[4]{{0}} negate(%p), metadata={{op_name=\"jit(f)/neg\"}}\n}}\n\n"
            );
        }
        text + "ENTRY %main (a: f32[4]) -> f32[4] {\n  %a = f32[4]{0} parameter(0)\n  ROOT %n = f32[4]{0} call(%a), to_apply=%c0\n}\n"
    }

    /// Read in parts on all cores or in one piece, a big file outlines the
    /// same; an error in it reads the same too.
    #[test]
    fn outline_in_parts_equals_outline_in_one_piece() {
        let text = big_module(100_000);
        assert!(!cuts(&text, 8).is_empty(), "the file is cut");
        let file = SourceFile::from_text("big", text.clone());
        let (parts, whole) = (outline(&file).unwrap(), outline_whole(&file).unwrap());
        assert_eq!(parts.computations.len(), 100_001);
        assert_eq!(parts.header.offset, whole.header.offset);
        let lines = |o: &Outline| -> Vec<(usize, usize, usize)> {
            o.computations
                .iter()
                .flat_map(|c| {
                    let inner = c.instructions.iter().map(|l| (l.offset, l.text.len(), 1));
                    std::iter::once((c.header.offset, c.header.text.len(), 0))
                        .chain(inner)
                        .chain(std::iter::once((c.close.offset, c.close.text.len(), 2)))
                })
                .collect()
        };
        assert_eq!(lines(&parts), lines(&whole));
        // Damage near the end, in the last part: the one-piece error. A
        // closing brace with spaces before it; a file cut inside a computation.
        let at = text[..text.len() - 300].rfind("\n}\n").unwrap();
        let indented = format!("{}\n  }}\n{}", &text[..at], &text[at + 3..]);
        let cut = text[..text.len() - 300].to_string();
        for broken in [indented, cut] {
            let file = SourceFile::from_text("big", broken);
            let (Err(a), Err(b)) = (outline(&file), outline_whole(&file)) else {
                panic!("the damage is refused");
            };
            assert_eq!(a.to_string(), b.to_string());
            assert_eq!(a.location(), b.location());
        }
    }

    #[test]
    fn mlir_text_is_named_stablehlo() {
        let title = |text: &str| match outline(&SourceFile::from_text("f", text.to_string())) {
            Err(Error::Input(d)) => d.title.clone(),
            Err(other) => other.to_string(),
            Ok(_) => "parsed".to_string(),
        };
        for text in [
            "module @jit_f attributes {mhlo.num_partitions = 1 : i32} {\n}\n",
            "// a comment\n\n  module {\n  func.func @main() {\n}\n}\n",
            "#loc = loc(unknown)\nfunc.func public @main(%arg0: tensor<4xf32>) {\n}\n",
        ] {
            assert_eq!(
                title(text),
                "this is StableHLO (MLIR), not HLO text",
                "{text}"
            );
        }
        // Text that merely mentions MLIR is not MLIR.
        assert!(title("Traceback: func.func failed\n").starts_with("expected the header"));
    }

    /// Parses `input` with `rule` and checks the rule consumed all of it.
    fn parses_fully(rule: Rule, input: &str) -> bool {
        match HloParser::parse(rule, input) {
            Ok(mut pairs) => pairs.next().is_some_and(|p| p.as_str() == input),
            Err(_) => false,
        }
    }

    #[test]
    fn shapes() {
        for s in [
            "f32[2,3]{1,0}",
            "f32[]",
            "pred[<=10,3]",
            "f32[?]",
            "token[]",
            "s4[1024]{0:E(4)}",
            "bf16[2,4,128,64]{2,3,1,0:T(8,128)(2,1)S(1)}",
            "f32[]{:T(256)}",
            "u32[8]{0:T(*,128)L(2)#(u32)}",
        ] {
            assert!(parses_fully(Rule::array_shape, s), "{s}");
        }
        for s in [
            "(f32[2]{0}, s32[])",
            "((f32[64]{0}), f32[256]{0}, s32[])",
            "()",
            "(f32[], /*index=1*/s32[])",
        ] {
            assert!(parses_fully(Rule::tuple_shape, s), "{s}");
        }
        assert!(parses_fully(Rule::buffer_shape, "b(f32[8]{0})"));
        assert!(!parses_fully(Rule::array_shape, "f32[2,"));
        assert!(!parses_fully(Rule::array_shape, "F32[2]"));
    }

    #[test]
    fn instructions() {
        for s in [
            "  %a.1 = f64[8]{0} parameter(0), metadata={op_name=\"a\"}",
            "  ROOT %t = (f32[], s32[]) tuple(%x, %y)",
            "  %c = f32[2,2]{1,0} constant({ { 1, 2 }, { 3, 4 } })",
            "  %c2 = f32[4096,16]{1,0} constant({...})",
            "  %c3 = c64[] constant((1, 2))",
            "  %n = f32[] constant(-inf)",
            "  %g = f32[8]{0} get-tuple-element(%t), index=0",
            "  add.1 = f32[] add(x, y)",
            "  %m = f32[] maximum(f32[] %parameter.35, f32[] %parameter.36), metadata={op_type=\"max\" op_name=\"max\"}",
            "  %u = f32[8]{0} add(%t#0, %t#1#2)",
            "  %f = f32[8]{0} fusion(%a, %b), kind=kLoop, calls=%fused, backend_config={\"x\":\"}\"}",
            "  %ar = f32[8]{0} all-reduce(%x), replica_groups=[2,4]<=[8], to_apply=%sum, channel_id=1",
            "  %cv = f32[1,8,8,4]{3,2,1,0} convolution(%i, %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
            "  %s = f32[2]{0} slice(%x), slice={[0:2:1]}",
            "  %cc = (f32[8]{0}, s8[4]{0}) custom-call(%x), custom_call_target=\"__cublas$gemm\", output_to_operand_aliasing={{0}: (0, {})}",
            "  %c4 = (f32[], s32[]) conditional(%p, %x, %y), branch_computations={%b0, %b1}",
            "  %w = (s32[], f32[8]{0}) while(%init), condition=%cond, body=%body, control-predecessors={%a}",
            "  %z = f32[8]{0} new-op-from-2030(%x), brand_new_attr={a=[1,2] b=\"c\"}, sharding={devices=[4]<=[4]}",
            "  %sh = f32[8]{0} copy(%x), sharding={{replicated}, {devices=[2,1]0,1}}",
        ] {
            assert!(parses_fully(Rule::instruction, s), "{s}");
        }
        assert!(!parses_fully(Rule::instruction, "  %a = f32[8]{0} add(%x"));
        assert!(!parses_fully(Rule::instruction, "  %a f32[8]{0} add(%x)"));
    }

    #[test]
    fn headers() {
        for s in [
            "HloModule m",
            "HloModule jit_fn, is_scheduled=true, input_output_alias={ {}: (0, {}, may-alias) }, entry_computation_layout={(f64[2]{0}, f64[2]{0})->f64[2]{0}}",
            "HloModule m, buffer_donor={ (0, {}), (1, {1}) }, num_partitions=8, frontend_attributes={a=\"1\",b={\"k\":2}}",
            "HloModule m, entry_computation_layout={(f32[]{:T(256)}, /*index=1*/s32[])->(f32[], s32[])}",
        ] {
            assert!(parses_fully(Rule::header, s), "{s}");
        }
        for s in [
            "ENTRY %main.1 (a.1: f64[2], b.1: f64[2]) -> f64[2] {",
            "%region_0.1 (x: f32[], y: f32[]) -> f32[] {",
            "region_0.2 {",
            "%fused () -> pred[128,128] {",
        ] {
            assert!(parses_fully(Rule::comp_header, s), "{s}");
        }
        assert!(parses_fully(
            Rule::comp_close,
            "}, execution_thread=\"host\""
        ));
    }

    #[test]
    fn nesting_limit_ignores_strings() {
        assert_eq!(too_deep(&"(".repeat(MAX_NESTING)), None);
        assert_eq!(too_deep(&"(".repeat(MAX_NESTING + 1)), Some(MAX_NESTING));
        let quoted = format!("\"{}\"", "(".repeat(1000));
        assert_eq!(too_deep(&quoted), None);
    }
}
