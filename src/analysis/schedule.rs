//! The call graph and XLA's flattened schedule.
//!
//! Computations are either *global* (the entry and everything reached through
//! `call`, `while`, `conditional` and async wrappers: their values get memory
//! in the module's allocations), *fused* (bodies of fusions: no memory of their
//! own), or *thread-local* (reducers and comparators reached through `reduce`,
//! `sort`, `map`, ...: one small allocation per buffer). See notes §4.1 step 4.
//!
//! The flattened schedule (`HloLiveRange::FlattenSchedule`, notes §4.4) lays
//! callees, loop bodies and every branch out before their caller, in text order.

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;

use crate::hlo::{CallRole, CompId, InstrId, Module, Opcode};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompKind {
    Global,
    ThreadLocal,
    Fused,
    /// Not reached from the entry.
    Unreachable,
}

/// Which computations call which, as a petgraph graph (nodes are `CompId`s in order).
pub struct CallGraph {
    pub graph: DiGraph<CompId, (InstrId, CallRole)>,
    pub kinds: Vec<CompKind>,
}

impl CallGraph {
    pub fn build(module: &Module) -> CallGraph {
        let mut graph = DiGraph::with_capacity(module.computations.len(), 0);
        for i in 0..module.computations.len() {
            graph.add_node(CompId(i as u32));
        }
        for (ci, comp) in module.computations.iter().enumerate() {
            for &id in &comp.instructions {
                for &(role, callee) in &module.instr(id).called {
                    graph.add_edge(NodeIndex::new(ci), NodeIndex::new(callee.index()), (id, role));
                }
            }
        }
        let mut kinds = vec![CompKind::Unreachable; module.computations.len()];
        // A worklist rather than recursion: a malformed module may call itself.
        let mut work = vec![(module.entry, CompKind::Global)];
        while let Some((comp, kind)) = work.pop() {
            let current = &mut kinds[comp.index()];
            // A computation reached both ways keeps the kind that gives it memory.
            let stronger = match (*current, kind) {
                (CompKind::Unreachable, _) => true,
                (CompKind::Fused, CompKind::Global | CompKind::ThreadLocal) => true,
                (CompKind::ThreadLocal, CompKind::Global) => true,
                _ => false,
            };
            if !stronger {
                continue;
            }
            *current = kind;
            for edge in graph.edges(NodeIndex::new(comp.index())) {
                let (caller, role) = *edge.weight();
                let callee = graph[edge.target()];
                let callee_kind = match kind {
                    CompKind::Global => callee_kind(module, caller, role),
                    // Inside a reducer or a fusion nothing is global any more.
                    _ => match callee_kind(module, caller, role) {
                        CompKind::Fused => CompKind::Fused,
                        _ => CompKind::ThreadLocal,
                    },
                };
                work.push((callee, callee_kind));
            }
        }
        CallGraph { graph, kinds }
    }

    pub fn kind(&self, comp: CompId) -> CompKind {
        self.kinds[comp.index()]
    }
}

/// How a caller's instruction treats the computation it calls (notes §4.1).
fn callee_kind(module: &Module, caller: InstrId, role: CallRole) -> CompKind {
    let op = &module.instr(caller).opcode;
    match (op, role) {
        (Opcode::Fusion, _) => CompKind::Fused,
        (Opcode::Call, _) | (Opcode::While, _) | (Opcode::Conditional, _) => CompKind::Global,
        (Opcode::AsyncStart | Opcode::AsyncUpdate | Opcode::AsyncDone, _) => CompKind::Global,
        _ => CompKind::ThreadLocal,
    }
}

/// The flattened schedule: every instruction of a global computation at one
/// logical time.
pub struct Schedule {
    /// Instructions in flattened order; the index is the logical time.
    pub order: Vec<InstrId>,
    /// `time[instr]`, for instructions of global computations.
    pub time: Vec<Option<u32>>,
    /// `[first time, one past the last]` of each flattened computation.
    pub span: Vec<Option<(u32, u32)>>,
}

impl Schedule {
    pub fn build(module: &Module, calls: &CallGraph) -> Schedule {
        let mut schedule = Schedule {
            order: Vec::with_capacity(module.instructions.len()),
            time: vec![None; module.instructions.len()],
            span: vec![None; module.computations.len()],
        };
        let mut visited = vec![false; module.computations.len()];
        schedule.flatten(module, calls, module.entry, &mut visited);
        schedule
    }

    /// Total number of logical times (`N`; the entry's span ends here).
    pub fn len(&self) -> u32 {
        self.order.len() as u32
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub fn time(&self, instr: InstrId) -> Option<u32> {
        self.time[instr.index()]
    }

    fn flatten(&mut self, module: &Module, calls: &CallGraph, comp: CompId, visited: &mut [bool]) {
        // Iterative over callees via an explicit stack of (computation, next instruction).
        let mut stack: Vec<(CompId, usize, u32)> = Vec::new();
        if visited[comp.index()] {
            return;
        }
        visited[comp.index()] = true;
        stack.push((comp, 0, self.len()));
        while let Some(&(current, next, start)) = stack.last() {
            let instrs = &module.comp(current).instructions;
            if next >= instrs.len() {
                self.span[current.index()] = Some((start, self.len()));
                stack.pop();
                continue;
            }
            let id = instrs[next];
            // Flatten not-yet-flattened global callees before the caller.
            let pending = ordered_callees(module, id)
                .into_iter()
                .find(|c| !visited[c.index()] && calls.kind(*c) == CompKind::Global);
            if let Some(callee) = pending {
                visited[callee.index()] = true;
                stack.push((callee, 0, self.len()));
                continue;
            }
            if let Some(top) = stack.last_mut() {
                top.1 += 1;
            }
            self.time[id.index()] = Some(self.len());
            self.order.push(id);
        }
    }
}

/// A `while` flattens its condition before its body; everything else in attribute order.
fn ordered_callees(module: &Module, id: InstrId) -> Vec<CompId> {
    let called = &module.instr(id).called;
    let mut out: Vec<CompId> =
        called.iter().filter(|(role, _)| *role == CallRole::Condition).map(|&(_, c)| c).collect();
    out.extend(called.iter().filter(|(role, _)| *role != CallRole::Condition).map(|&(_, c)| c));
    out
}
