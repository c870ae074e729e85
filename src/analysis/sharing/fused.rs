//! A fused computation as the sharing rules read it.
//!
//! The rules ask a fusion's body a few questions: what its root is, what the
//! root reads, whether a parameter's users are all elementwise. A body parsed
//! already answers from the IR. A deferred body (most fusion bodies, see
//! `hlo::deferred`) answers line by line: only the lines a rule reaches are
//! parsed, which on an unrolled training step is a tenth of the body lines the
//! rules would otherwise parse.

use crate::hlo::{Body, BodyLine, CompId, InstrId, Module, Opcode, Shape};

#[derive(Clone, Copy)]
pub(super) enum Fused<'m> {
    Parsed(&'m Module, CompId),
    /// A deferred body, not parsed yet.
    Lines(Body<'m>),
}

/// An instruction of a [`Fused`] body: an id in the IR, or a line of the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Node {
    Instr(InstrId),
    Line(BodyLine),
}

impl Node {
    fn instr(self) -> InstrId {
        match self {
            Node::Instr(id) => id,
            Node::Line(_) => unreachable!("a parsed body's nodes are instructions"),
        }
    }

    fn line(self) -> BodyLine {
        match self {
            Node::Line(line) => line,
            Node::Instr(_) => unreachable!("an unparsed body's nodes are lines"),
        }
    }
}

impl<'m> Fused<'m> {
    pub(super) fn body(module: &'m Module, comp: CompId) -> Fused<'m> {
        match module.shell(comp).deferred {
            Some(k) if !module.body(k).is_parsed() => Fused::Lines(module.body(k)),
            _ => Fused::Parsed(module, comp),
        }
    }

    pub(super) fn root(self) -> Node {
        match self {
            Fused::Parsed(module, comp) => Node::Instr(module.comp(comp).root),
            Fused::Lines(body) => Node::Line(body.root_line()),
        }
    }

    pub(super) fn opcode(self, n: Node) -> &'m Opcode {
        match self {
            Fused::Parsed(module, _) => &module.instr(n.instr()).opcode,
            Fused::Lines(body) => body.line_opcode(n.line()),
        }
    }

    pub(super) fn shape(self, n: Node) -> &'m Shape {
        match self {
            Fused::Parsed(module, _) => &module.instr(n.instr()).shape,
            Fused::Lines(body) => &body.line(n.line()).shape,
        }
    }

    pub(super) fn operands(self, n: Node) -> Vec<Node> {
        match self {
            Fused::Parsed(module, _) => {
                let operands = &module.instr(n.instr()).operands;
                operands.iter().map(|&o| Node::Instr(o)).collect()
            }
            Fused::Lines(body) => {
                let operands = &body.line(n.line()).operands;
                operands.iter().map(|&o| Node::Line(o)).collect()
            }
        }
    }

    /// `N` if `n` is `parameter(N)`.
    pub(super) fn parameter_number(self, n: Node) -> Option<u64> {
        let number = match self {
            Fused::Parsed(module, _) => module.instr(n.instr()).parameter_number,
            Fused::Lines(body) => body.line(n.line()).parameter_number,
        };
        number.filter(|_| *self.opcode(n) == Opcode::Parameter)
    }

    /// The body's `parameter(number)`.
    pub(super) fn parameter(self, number: u64) -> Option<Node> {
        match self {
            Fused::Parsed(module, comp) => {
                let params = &module.comp(comp).parameters;
                params.get(number as usize).map(|&p| Node::Instr(p))
            }
            Fused::Lines(body) => body.parameter_line(number).map(Node::Line),
        }
    }

    /// The instructions of the body that have `n` among their operands.
    pub(super) fn users(self, n: Node) -> Vec<Node> {
        match self {
            Fused::Parsed(module, comp) => {
                let instrs = &module.comp(comp).instructions;
                let users = instrs
                    .iter()
                    .filter(|&&i| module.instr(i).operands.contains(&n.instr()));
                users.map(|&i| Node::Instr(i)).collect()
            }
            Fused::Lines(body) => {
                let users = body.line_users(n.line());
                users.iter().map(|&u| Node::Line(u)).collect()
            }
        }
    }
}
