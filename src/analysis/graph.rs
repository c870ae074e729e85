//! The module as a graph (petgraph): one node per instruction and per
//! computation, operand edges from each operand to its user, and call edges
//! from an instruction to the computations it calls.
//!
//! Computations are either *global* (the entry and everything reached through
//! `call`, `while`, `conditional` and async wrappers: their values get memory
//! in the module's allocations), *fused* (bodies of fusions: no memory of their
//! own), or *thread-local* (reducers and comparators reached through `reduce`,
//! `sort`, `map`, ...: one small allocation per buffer). See notes §4.1 step 4.

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;

use crate::hlo::{CallRole, CompId, InstrId, Module, Opcode};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompKind {
    Global,
    ThreadLocal,
    Fused,
    /// Not reached from the entry.
    Unreachable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    Instruction(InstrId),
    Computation(CompId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    /// Operand → user; the number is the operand's position.
    Operand(u32),
    /// Instruction → a computation it calls.
    Calls(CallRole),
}

pub struct ModuleGraph {
    /// Instruction `i` is node `i`; computation `c` is node `instructions + c`.
    pub graph: DiGraph<Node, Edge>,
    kinds: Vec<CompKind>,
}

impl ModuleGraph {
    pub fn build(module: &Module) -> ModuleGraph {
        let n = module.instr_count();
        let edges = module
            .instrs()
            .map(|(_, i)| i.operands.len() + i.called.len())
            .sum();
        let mut graph = DiGraph::with_capacity(n + module.comp_count(), edges);
        for i in 0..n {
            graph.add_node(Node::Instruction(InstrId::arena(i)));
        }
        for c in 0..module.comp_count() {
            graph.add_node(Node::Computation(CompId(c as u32)));
        }
        for (i, instr) in module.instrs() {
            for (k, operand) in instr.operands.iter().enumerate() {
                graph.add_edge(
                    NodeIndex::new(operand.index()),
                    NodeIndex::new(i.index()),
                    Edge::Operand(k as u32),
                );
            }
            for &(role, callee) in &instr.called {
                graph.add_edge(
                    NodeIndex::new(i.index()),
                    NodeIndex::new(n + callee.index()),
                    Edge::Calls(role),
                );
            }
        }
        let mut g = ModuleGraph {
            graph,
            kinds: vec![CompKind::Unreachable; module.comp_count()],
        };
        g.classify(module);
        g
    }

    pub fn kind(&self, comp: CompId) -> CompKind {
        self.kinds[comp.index()]
    }

    /// `(user, operand number)` for every use of `instr`'s result as an operand.
    pub fn users(&self, instr: InstrId) -> impl Iterator<Item = (InstrId, u32)> + '_ {
        self.graph
            .edges_directed(NodeIndex::new(instr.index()), Direction::Outgoing)
            .filter_map(|e| match (e.weight(), self.graph[e.target()]) {
                (Edge::Operand(k), Node::Instruction(user)) => Some((user, *k)),
                _ => None,
            })
    }

    /// `(role, callee)` for every computation `instr` calls.
    pub fn callees(&self, instr: InstrId) -> impl Iterator<Item = (CallRole, CompId)> + '_ {
        self.graph
            .edges_directed(NodeIndex::new(instr.index()), Direction::Outgoing)
            .filter_map(|e| match (e.weight(), self.graph[e.target()]) {
                (Edge::Calls(role), Node::Computation(c)) => Some((*role, c)),
                _ => None,
            })
    }

    fn classify(&mut self, module: &Module) {
        // A worklist rather than recursion: a malformed module may call itself.
        let mut work = vec![(module.entry, CompKind::Global)];
        while let Some((comp, kind)) = work.pop() {
            let current = &mut self.kinds[comp.index()];
            // A computation reached both ways keeps the kind that gives it memory.
            let stronger = matches!(
                (*current, kind),
                (CompKind::Unreachable, _)
                    | (CompKind::Fused, CompKind::Global | CompKind::ThreadLocal)
                    | (CompKind::ThreadLocal, CompKind::Global)
            );
            if !stronger {
                continue;
            }
            *current = kind;
            // A deferred body is not parsed for this: the computations it
            // calls were read by its structural check. Inside a fusion body
            // a `calls=` is a nested fusion, anything else thread-local.
            if let Some(k) = module.shell(comp).deferred {
                for &(role, callee) in module.body(k).calls() {
                    let callee_kind = match role {
                        CallRole::Calls => CompKind::Fused,
                        _ => CompKind::ThreadLocal,
                    };
                    work.push((callee, callee_kind));
                }
                continue;
            }
            for &caller in &module.comp(comp).instructions {
                for (_, callee) in self.callees(caller).collect::<Vec<_>>() {
                    let callee_kind = match (kind, callee_kind(module, caller)) {
                        (_, CompKind::Fused) => CompKind::Fused,
                        // Inside a reducer or a fusion nothing is global any more.
                        (CompKind::Global, k) => k,
                        _ => CompKind::ThreadLocal,
                    };
                    work.push((callee, callee_kind));
                }
            }
        }
    }
}

/// How a caller treats the computations it calls (notes §4.1).
fn callee_kind(module: &Module, caller: InstrId) -> CompKind {
    match module.instr(caller).opcode {
        Opcode::Fusion => CompKind::Fused,
        Opcode::Call | Opcode::While | Opcode::Conditional => CompKind::Global,
        Opcode::AsyncStart | Opcode::AsyncUpdate | Opcode::AsyncDone => CompKind::Global,
        _ => CompKind::ThreadLocal,
    }
}
