//! XLA's flattened schedule.
//!
//! The flattened schedule (`HloLiveRange::FlattenSchedule`, notes §4.4) lays
//! callees, loop bodies and every branch out before their caller, in text order.

use super::graph::{CompKind, ModuleGraph};
use crate::hlo::{CallRole, CompId, InstrId, Module};

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
    pub fn build(module: &Module, graph: &ModuleGraph) -> Schedule {
        let mut schedule = Schedule {
            order: Vec::with_capacity(module.instr_count()),
            time: vec![None; module.instr_count()],
            span: vec![None; module.comp_count()],
        };
        let mut visited = vec![false; module.comp_count()];
        schedule.flatten(module, graph, module.entry, &mut visited);
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

    fn flatten(
        &mut self,
        module: &Module,
        graph: &ModuleGraph,
        comp: CompId,
        visited: &mut [bool],
    ) {
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
                .find(|c| !visited[c.index()] && graph.kind(*c) == CompKind::Global);
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
    let mut out: Vec<CompId> = called
        .iter()
        .filter(|(role, _)| *role == CallRole::Condition)
        .map(|&(_, c)| c)
        .collect();
    out.extend(
        called
            .iter()
            .filter(|(role, _)| *role != CallRole::Condition)
            .map(|&(_, c)| c),
    );
    out
}
