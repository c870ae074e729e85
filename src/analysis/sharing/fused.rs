//! A fused computation as the sharing rules read it.
//!
//! The rules ask a fusion's body a few questions: what its root is, what the
//! root reads, whether a parameter's users are all elementwise. A body parsed
//! already answers from the IR. A deferred body (most fusion bodies, see
//! `hlo::deferred`) answers line by line: only the lines a rule reaches are
//! parsed, which on an unrolled training step is a tenth of the body lines the
//! rules would otherwise parse.

use crate::hlo::{CompId, InstrId, Module, Opcode, Shape};

#[derive(Clone, Copy)]
pub(super) enum Fused<'m> {
    Parsed(&'m Module, CompId),
    /// Deferred body `k`, not parsed yet.
    Lines(&'m Module, u32),
}

/// An instruction of a [`Fused`] body: an id in the IR, or a line of the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Node(u32);

impl<'m> Fused<'m> {
    pub(super) fn body(module: &'m Module, comp: CompId) -> Fused<'m> {
        match module.shell(comp).deferred {
            Some(k) if !module.deferred.is_parsed(k) => Fused::Lines(module, k),
            _ => Fused::Parsed(module, comp),
        }
    }

    pub(super) fn root(self) -> Node {
        match self {
            Fused::Parsed(module, comp) => Node(module.comp(comp).root.0),
            Fused::Lines(module, k) => Node(module.deferred.root_line(module, k)),
        }
    }

    pub(super) fn opcode(self, n: Node) -> &'m Opcode {
        match self {
            Fused::Parsed(module, _) => &module.instr(InstrId(n.0)).opcode,
            Fused::Lines(module, k) => module.deferred.line_opcode(module, k, n.0),
        }
    }

    pub(super) fn shape(self, n: Node) -> &'m Shape {
        match self {
            Fused::Parsed(module, _) => &module.instr(InstrId(n.0)).shape,
            Fused::Lines(module, k) => &module.deferred.line(module, k, n.0).shape,
        }
    }

    pub(super) fn operands(self, n: Node) -> Vec<Node> {
        match self {
            Fused::Parsed(module, _) => {
                let operands = &module.instr(InstrId(n.0)).operands;
                operands.iter().map(|o| Node(o.0)).collect()
            }
            Fused::Lines(module, k) => {
                let operands = &module.deferred.line(module, k, n.0).operands;
                operands.iter().map(|&o| Node(o)).collect()
            }
        }
    }

    /// `N` if `n` is `parameter(N)`.
    pub(super) fn parameter_number(self, n: Node) -> Option<u64> {
        let number = match self {
            Fused::Parsed(module, _) => module.instr(InstrId(n.0)).parameter_number,
            Fused::Lines(module, k) => module.deferred.line(module, k, n.0).parameter_number,
        };
        number.filter(|_| *self.opcode(n) == Opcode::Parameter)
    }

    /// The body's `parameter(number)`.
    pub(super) fn parameter(self, number: u64) -> Option<Node> {
        match self {
            Fused::Parsed(module, comp) => {
                let params = &module.comp(comp).parameters;
                params.get(number as usize).map(|p| Node(p.0))
            }
            Fused::Lines(module, k) => module.deferred.parameter_line(module, k, number).map(Node),
        }
    }

    /// The instructions of the body that have `n` among their operands.
    pub(super) fn users(self, n: Node) -> Vec<Node> {
        match self {
            Fused::Parsed(module, comp) => {
                let instrs = &module.comp(comp).instructions;
                let users = instrs
                    .iter()
                    .filter(|&&i| module.instr(i).operands.contains(&InstrId(n.0)));
                users.map(|i| Node(i.0)).collect()
            }
            Fused::Lines(module, k) => {
                let users = module.deferred.line_users(module, k, n.0);
                users.iter().map(|&u| Node(u)).collect()
            }
        }
    }
}
