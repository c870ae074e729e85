//! From pest pairs to the typed IR: one `lower_<rule>` function per rule.
//! Names are left for `resolve`.
//!
//! Lines are lowered on several cores (each computation on its own) into "raw"
//! structs that still borrow the text; names are resolved afterwards, in file
//! order, so errors are reported deterministically.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pest::iterators::Pair;

mod header;
mod rounds;
mod shape;

use self::header::{lower_header, lower_shape_index, lower_stack_tables};
use self::rounds::lower_computations;
use self::shape::lower_shape;
use super::ir::*;
use super::metadata::StackFrameIndex;
use super::opcode::Opcode;
use super::parse::{self, Line, Rule};
use super::shape::Shape;
use crate::error::Error;
use crate::source::{SourceFile, Span};

/// A module lowered but not yet resolved: names still borrow the text.
pub(super) struct Lowered<'a> {
    pub name: String,
    pub header: ModuleHeader,
    pub stack_frames: StackFrameIndex,
    pub raw: Vec<RawComputation<'a>>,
    pub instructions: Vec<Instruction>,
    pub unresolved: Vec<Unresolved<'a>>,
}

/// Lowers the header, the stack-frame tables and every instruction line of
/// an outlined module.
pub(super) fn lower_module<'a>(
    file: &'a SourceFile,
    mut outline: parse::Outline<'a>,
    defer: bool,
) -> Result<Lowered<'a>, Error> {
    // The stack tables are pest pairs of the outline, which stay on this
    // thread; taken, so that the parse they hold is freed once they are read.
    let stack_frames = match outline.stack_tables.take() {
        Some(tables) => lower_stack_tables(file, tables),
        None => Ok(StackFrameIndex::default()),
    };
    // The header can be as long as the entry's parameter list (its layout
    // repeats every parameter's shape): it is read beside the computations.
    let header = outline.header;
    let computations = outline.computations.as_mut_slice();
    let (head, lowered) = rayon::join(
        || lower_header(file, header),
        || lower_computations(file, computations, defer),
    );
    // Errors in file order.
    let (name, header) = head?;
    let stack_frames = stack_frames?;
    let (raw, instructions, unresolved) = lowered?;
    Ok(Lowered {
        name,
        header,
        stack_frames,
        raw,
        instructions,
        unresolved,
    })
}

// ---------------------------------------------------------------------------
// Raw (unresolved) lines
// ---------------------------------------------------------------------------

pub(super) struct RawComputation<'a> {
    pub(super) name: Reference<'a>,
    pub(super) is_entry: bool,
    pub(super) span: Span,
    /// Its instructions' range in the module's arena.
    pub(super) instructions: std::ops::Range<usize>,
    pub(super) execution_thread: Option<String>,
    /// Set when its body is deferred: its lines, unlowered.
    pub(super) deferred: Option<DeferredLines<'a>>,
}

/// A deferred computation's lines, as `(offset, length)`, and its ROOT line.
pub(super) struct DeferredLines<'a> {
    pub(super) lines: Vec<(u32, u32)>,
    pub(super) structure: super::structure::Structure<'a>,
}

impl<'a> RawComputation<'a> {
    /// A deferred computation as resolution needs it, rebuilt from its shell.
    pub(super) fn of_shell(file: &'a SourceFile, shell: &Computation) -> RawComputation<'a> {
        let header = file.text.get(shell.span.range()).unwrap_or("");
        let at = header.find(shell.name.as_str()).unwrap_or(0);
        RawComputation {
            name: Reference {
                name: header.get(at..at + shell.name.len()).unwrap_or(""),
                offset: shell.span.start as usize + at.saturating_sub(1),
            },
            is_entry: false,
            span: shell.span,
            instructions: 0..0,
            execution_thread: shell.execution_thread.clone(),
            deferred: None,
        }
    }
}

/// The names an instruction line uses, for `resolve` to turn into indices.
pub(super) struct Unresolved<'a> {
    pub(super) name: Reference<'a>,
    pub(super) is_root: bool,
    pub(super) operands: Vec<RawOperand<'a>>,
    pub(super) called: Vec<(CallRole, Reference<'a>)>,
    pub(super) control_predecessors: Vec<Reference<'a>>,
}

/// One instruction line as lowered, before it is split into its IR part and
/// its names.
pub(super) struct RawInstruction<'a> {
    name: Reference<'a>,
    /// Where the name is spelled, without the `%`.
    name_span: Span,
    line: Span,
    pub(super) is_root: bool,
    shape: Arc<Shape>,
    opcode: Opcode,
    pub(super) operands: Vec<RawOperand<'a>>,
    parameter_number: Option<u64>,
    pub(super) called: Vec<(CallRole, Reference<'a>)>,
    pub(super) control_predecessors: Vec<Reference<'a>>,
    tuple_index: Option<u64>,
    custom_call_target: Option<Span>,
    fusion_kind: Option<Span>,
    output_to_operand_aliasing: Vec<OperandAlias>,
    metadata: Span,
    attributes: Vec<Attribute>,
}

impl<'a> RawInstruction<'a> {
    /// The IR part (operands and called computations still empty) and the names.
    #[allow(clippy::type_complexity)]
    pub(super) fn split(
        self,
        computation: CompId,
    ) -> (Instruction, Result<Unresolved<'a>, Box<Error>>) {
        let instruction = Instruction {
            name: Name::Text(self.name_span),
            opcode: self.opcode,
            shape: self.shape,
            operands: Box::default(),
            computation,
            called: Box::default(),
            parameter_number: self.parameter_number,
            tuple_index: self.tuple_index,
            custom_call_target: self.custom_call_target,
            fusion_kind: self.fusion_kind,
            output_to_operand_aliasing: self.output_to_operand_aliasing.into_boxed_slice(),
            control_predecessors: Box::default(),
            metadata: self.metadata,
            attributes: self.attributes.into_boxed_slice(),
            span: self.line,
            synthetic: false,
        };
        let names = Unresolved {
            name: self.name,
            is_root: self.is_root,
            operands: self.operands,
            called: self.called,
            control_predecessors: self.control_predecessors,
        };
        (instruction, Ok(names))
    }
}

impl<'a> RawInstruction<'a> {
    /// What a line read alone keeps (`deferred::LineRead`): opcode, shape,
    /// parameter number and operands, names unresolved.
    pub(super) fn into_line_parts(self) -> (Opcode, Arc<Shape>, Option<u64>, Vec<RawOperand<'a>>) {
        (
            self.opcode,
            self.shape,
            self.parameter_number,
            self.operands,
        )
    }
}

/// Stands in for a line that failed to lower (its error is reported instead).
pub(super) fn placeholder(computation: CompId) -> Instruction {
    Instruction {
        name: Name::Own(Box::default()),
        opcode: Opcode::Tuple,
        shape: Arc::new(Shape::Tuple(Vec::new())),
        operands: Box::default(),
        computation,
        called: Box::default(),
        parameter_number: None,
        tuple_index: None,
        custom_call_target: None,
        fusion_kind: None,
        output_to_operand_aliasing: Box::default(),
        control_predecessors: Box::default(),
        metadata: Span::default(),
        attributes: Box::default(),
        span: Span::default(),
        synthetic: false,
    }
}

/// A name used somewhere, with its position for errors.
#[derive(Clone, Copy)]
pub(super) struct Reference<'a> {
    pub(super) name: &'a str,
    pub(super) offset: usize,
}

/// Prints the bare name (messages add the `%`).
impl std::fmt::Display for Reference<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

pub(super) struct RawOperand<'a> {
    pub(super) reference: Reference<'a>,
    /// `%t#0#1` → `[0, 1]`
    pub(super) tuple_path: Vec<u64>,
}

/// Pairs report offsets inside their line; `At` adds the line's offset back.
#[derive(Clone, Copy)]
struct At<'f> {
    file: &'f SourceFile,
    base: usize,
}

impl<'f> At<'f> {
    /// A `name` pair as a reference: its text without `%`, and where it stands.
    fn reference<'a>(&self, pair: &Pair<'a, Rule>) -> Reference<'a> {
        Reference {
            name: strip_percent(pair.as_str()),
            offset: self.offset(pair),
        }
    }
}

impl At<'_> {
    fn span(&self, pair: &Pair<'_, Rule>) -> Span {
        let s = pair.as_span();
        Span::new(self.base + s.start(), self.base + s.end())
    }
    fn offset(&self, pair: &Pair<'_, Rule>) -> usize {
        self.base + pair.as_span().start()
    }
    fn error(&self, pair: &Pair<'_, Rule>, title: String, label: &str) -> Error {
        let span = self.span(pair);
        Error::at(self.file, span.range(), title, label)
    }
    fn number(&self, pair: &Pair<'_, Rule>) -> Result<u64, Error> {
        let text = pair.as_str();
        text.parse::<u64>().map_err(|_| {
            let what = if text.starts_with('-') {
                "a non-negative number"
            } else {
                "a number below 2^64"
            };
            self.error(
                pair,
                format!("expected {what}, found `{text}`"),
                "out of range",
            )
        })
    }
}

fn strip_percent(name: &str) -> &str {
    name.strip_prefix('%').unwrap_or(name)
}

/// The text between the quotes of a `string` pair.
fn string_contents(at: At, pair: &Pair<'_, Rule>) -> Span {
    let s = at.span(pair);
    Span {
        start: s.start + 1,
        end: s.end.saturating_sub(1).max(s.start + 1),
    }
}

// ---------------------------------------------------------------------------
// Computations and instructions
// ---------------------------------------------------------------------------

/// A computation's header line, and the `execution_thread` of its closing line
/// (kept apart: an error in the header comes before its instructions' errors,
/// one in the closing line after them).
#[allow(clippy::type_complexity)]
fn lower_computation<'a>(
    file: &'a SourceFile,
    outline: &parse::OutlineComputation<'a>,
    rule: Rule,
) -> (
    Result<RawComputation<'a>, Error>,
    Result<Option<String>, Error>,
) {
    (
        lower_computation_header(file, outline, rule),
        lower_computation_close(file, outline.close),
    )
}

/// A computation's header line, read with `rule`: `comp_header` (all of it)
/// or `comp_name` (up to the name).
fn lower_computation_header<'a>(
    file: &'a SourceFile,
    outline: &parse::OutlineComputation<'a>,
    rule: Rule,
) -> Result<RawComputation<'a>, Error> {
    let header = parse::parse_line(file, rule, outline.header)?;
    let mut comp = RawComputation {
        name: Reference {
            name: "",
            offset: outline.header.offset,
        },
        is_entry: false,
        span: Span::new(
            outline.header.offset,
            outline.header.offset + outline.header.text.len(),
        ),
        instructions: 0..0,
        execution_thread: None,
        deferred: None,
    };
    for p in header.into_inner() {
        match p.as_rule() {
            Rule::kw_entry => comp.is_entry = true,
            Rule::name if comp.name.name.is_empty() => {
                let at = At {
                    file,
                    base: outline.header.offset,
                };
                comp.name = at.reference(&p);
            }
            _ => {} // the program shape repeats what the parameters say
        }
    }
    Ok(comp)
}

fn lower_computation_close(file: &SourceFile, line: Line) -> Result<Option<String>, Error> {
    // Nearly every closing line is a bare `}`, which `comp_close` reads as
    // no attribute: a parse per computation spared.
    if line
        .text
        .trim_matches([' ', '\t', '\n', '\u{b}', '\u{c}', '\r'])
        == "}"
    {
        return Ok(None);
    }
    let close = parse::parse_line(file, Rule::comp_close, line)?;
    let at = At {
        file,
        base: line.offset,
    };
    let mut thread = None;
    for p in close.into_inner().filter(|p| p.as_rule() != Rule::EOI) {
        let attribute = raw_attribute(at, &p);
        if file.text.get(attribute.name.range()) == Some("execution_thread") {
            let value = file.text.get(attribute.value.range()).unwrap_or("");
            thread = Some(super::metadata::unescape(value.trim_matches('"')));
        }
    }
    Ok(thread)
}

/// Shapes already lowered, by their text (one table per worker).
pub(super) type ShapeCache<'a> = rustc_hash::FxHashMap<&'a str, Arc<Shape>>;

/// Where lowered shapes are kept by their spelling: a worker's table while
/// loading, the module's shared one for bodies parsed on demand.
pub(super) trait Shapes<'a> {
    fn get(&self, text: &str) -> Option<Arc<Shape>>;
    fn insert(&mut self, text: &'a str, shape: Arc<Shape>);
}

impl<'a> Shapes<'a> for ShapeCache<'a> {
    fn get(&self, text: &str) -> Option<Arc<Shape>> {
        HashMap::get(self, text).cloned()
    }
    fn insert(&mut self, text: &'a str, shape: Arc<Shape>) {
        HashMap::insert(self, text, shape);
    }
}

/// The module's table for bodies parsed on demand, locked per shape so that
/// bodies parse on several threads at once.
impl<'a> Shapes<'a> for &Mutex<HashMap<Box<str>, Arc<Shape>>> {
    fn get(&self, text: &str) -> Option<Arc<Shape>> {
        let table = self.lock().unwrap_or_else(|e| e.into_inner());
        HashMap::get(&table, text).cloned()
    }
    fn insert(&mut self, text: &'a str, shape: Arc<Shape>) {
        let mut table = self.lock().unwrap_or_else(|e| e.into_inner());
        HashMap::insert(&mut table, Box::from(text), shape);
    }
}

pub(super) fn lower_instruction<'a>(
    file: &'a SourceFile,
    line: Line<'a>,
    shapes: &mut impl Shapes<'a>,
) -> Result<RawInstruction<'a>, Error> {
    lower_instruction_by(file, line, shapes, Rule::instruction)
}

/// A line read by `rule`: `instruction`, or `instruction_call` (up to its
/// operands, attributes unread: a fusion body's line read alone, `Deferred::line`).
pub(super) fn lower_instruction_by<'a>(
    file: &'a SourceFile,
    line: Line<'a>,
    shapes: &mut impl Shapes<'a>,
    rule: Rule,
) -> Result<RawInstruction<'a>, Error> {
    let at = At {
        file,
        base: line.offset,
    };
    let pair = parse::parse_line(file, rule, line)?;
    let mut instr = RawInstruction {
        name: Reference {
            name: "",
            offset: line.offset,
        },
        name_span: Span::new(line.offset, line.offset),
        line: Span::new(line.offset, line.offset + line.text.len()),
        is_root: false,
        shape: Arc::new(Shape::Tuple(Vec::new())),
        opcode: Opcode::Tuple,
        operands: Vec::new(),
        parameter_number: None,
        called: Vec::new(),
        control_predecessors: Vec::new(),
        tuple_index: None,
        custom_call_target: None,
        fusion_kind: None,
        output_to_operand_aliasing: Vec::new(),
        metadata: Span::default(),
        attributes: Vec::new(),
    };
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::kw_root => instr.is_root = true,
            Rule::name => {
                instr.name = at.reference(&p);
                let span = at.span(&p);
                let percent = (p.as_str().len() - instr.name.name.len()) as u32;
                instr.name_span = Span {
                    start: span.start + percent,
                    end: span.end,
                };
            }
            Rule::shape_text => {
                let shape_line = Line {
                    offset: at.offset(&p),
                    text: p.as_str(),
                };
                instr.shape = shape_of(file, shape_line, shapes).map_err(|shape_error| {
                    // The line parsed the strict way words the error as any
                    // other error in a line.
                    parse::parse_line(file, Rule::instruction_strict, line)
                        .err()
                        .unwrap_or(shape_error)
                })?;
            }
            Rule::constant_call => instr.opcode = Opcode::Constant,
            Rule::op_call => lower_op_call(at, p, &mut instr)?,
            Rule::EOI => {}
            _ => lower_attribute(at, p, &mut instr)?,
        }
    }
    Ok(instr)
}

/// The opcode of an instruction line, read by `instruction_head` (its first
/// words only).
pub(super) fn lower_opcode(file: &SourceFile, line: Line) -> Result<Opcode, Error> {
    let head = parse::parse_line(file, Rule::instruction_head, line)?;
    Ok(head
        .into_inner()
        .find(|p| p.as_rule() == Rule::opcode)
        .map_or(Opcode::Tuple, |p| Opcode::parse(p.as_str())))
}

/// The shape a `shape_text` spells, from `shapes` when spelled before. A
/// tuple is lowered element by element through the same table: a training
/// step's result tuple repeats a few spellings thousands of times.
pub(super) fn shape_of<'a>(
    file: &'a SourceFile,
    text: Line<'a>,
    shapes: &mut impl Shapes<'a>,
) -> Result<Arc<Shape>, Error> {
    if let Some(shape) = shapes.get(text.text) {
        return Ok(shape);
    }
    let at = At {
        file,
        base: text.offset,
    };
    let shape = if text.text.starts_with('(') {
        let pair = parse::parse_line(file, Rule::tuple_texts, text)?;
        let mut elements = Vec::new();
        for element in pair
            .into_inner()
            .filter(|p| p.as_rule() == Rule::shape_text)
        {
            let element = Line {
                offset: at.offset(&element),
                text: element.as_str(),
            };
            elements.push(Shape::clone(&*shape_of(file, element, shapes)?));
        }
        Shape::Tuple(elements)
    } else {
        let pair = parse::parse_line(file, Rule::shape_only, text)?;
        match pair.into_inner().next() {
            Some(shape) => lower_shape(at, shape)?,
            None => Shape::Tuple(Vec::new()),
        }
    };
    let shape = Arc::new(shape);
    shapes.insert(text.text, shape.clone());
    Ok(shape)
}

fn lower_op_call<'a>(
    at: At,
    pair: Pair<'a, Rule>,
    instr: &mut RawInstruction<'a>,
) -> Result<(), Error> {
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::opcode => instr.opcode = Opcode::parse(p.as_str()),
            Rule::operand_list => {
                for operand in p.into_inner() {
                    lower_operand(at, operand, instr)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn lower_operand<'a>(
    at: At,
    pair: Pair<'a, Rule>,
    instr: &mut RawInstruction<'a>,
) -> Result<(), Error> {
    let mut operand = RawOperand {
        reference: Reference {
            name: "",
            offset: 0,
        },
        tuple_path: Vec::new(),
    };
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::parameter_number if instr.opcode == Opcode::Parameter => {
                instr.parameter_number = Some(at.number(&p)?);
                return Ok(());
            }
            Rule::parameter_number => {
                return Err(at.error(
                    &p,
                    "expected an operand name".into(),
                    "a number is only allowed in `parameter(N)`",
                ))
            }
            Rule::name => operand.reference = at.reference(&p),
            Rule::gte_index => {
                if let Some(n) = p.into_inner().next() {
                    operand.tuple_path.push(at.number(&n)?);
                }
            }
            _ => {} // an operand shape (dumps before 2025-03) repeats the operand's own shape
        }
    }
    instr.operands.push(operand);
    Ok(())
}

fn lower_attribute<'a>(
    at: At,
    pair: Pair<'a, Rule>,
    instr: &mut RawInstruction<'a>,
) -> Result<(), Error> {
    let reference = |p: &Pair<'a, Rule>| at.reference(p);
    match pair.as_rule() {
        Rule::metadata_attr => {
            if let Some(value) = pair.into_inner().next() {
                instr.metadata = at.span(&value);
            }
        }
        Rule::called_attr => {
            let mut parts = pair.into_inner();
            if let (Some(key), Some(name)) = (parts.next(), parts.next()) {
                instr
                    .called
                    .push((CallRole::of_key(key.as_str()), reference(&name)));
            }
        }
        Rule::called_list_attr => {
            let mut parts = pair.into_inner();
            let role = CallRole::of_key(parts.next().map_or("", |k| k.as_str()));
            for name in parts.flat_map(|list| list.into_inner()) {
                instr.called.push((role, reference(&name)));
            }
        }
        Rule::control_preds_attr => {
            for name in pair.into_inner().flat_map(|list| list.into_inner()) {
                instr.control_predecessors.push(reference(&name));
            }
        }
        Rule::index_attr => {
            if let Some(n) = pair.into_inner().next() {
                instr.tuple_index = Some(at.number(&n)?);
            }
        }
        Rule::target_attr => {
            if let Some(s) = pair.into_inner().next() {
                instr.custom_call_target = Some(string_contents(at, &s));
            }
        }
        Rule::kind_attr => instr.fusion_kind = pair.into_inner().next().map(|k| at.span(&k)),
        Rule::operand_alias_attr => {
            for alias in pair.into_inner() {
                let mut parts = alias.into_inner();
                let (Some(out), Some(operand), Some(index)) =
                    (parts.next(), parts.next(), parts.next())
                else {
                    continue;
                };
                instr.output_to_operand_aliasing.push(OperandAlias {
                    output_index: lower_shape_index(at, out)?,
                    operand: at.number(&operand)?,
                    operand_index: lower_shape_index(at, index)?,
                });
            }
        }
        _ => instr.attributes.push(raw_attribute(at, &pair)),
    }
    Ok(())
}

/// Any attribute as `name` and `value` spans, split at the first `=`.
fn raw_attribute(at: At, pair: &Pair<'_, Rule>) -> Attribute {
    let span = at.span(pair);
    let eq = pair.as_str().find('=').map_or(0, |i| i as u32);
    Attribute {
        name: Span {
            start: span.start,
            end: span.start + eq,
        },
        value: Span {
            start: (span.start + eq + 1).min(span.end),
            end: span.end,
        },
    }
}
