//! XLA's flattened schedule.
//!
//! The flattened schedule (`HloLiveRange::FlattenSchedule`, notes §4.4) lays
//! callees, loop bodies and every branch out before their caller, in text order.
//! It also records which computations run inside an async operation (its
//! "async context"), whose values XLA keeps until the operation is done.

use super::graph::{CompKind, ModuleGraph};
use crate::hlo::{CallRole, CompId, InstrId, Module, Opcode};

/// The flattened schedule: every instruction of a global computation at one
/// logical time.
pub struct Schedule {
    /// Instructions in flattened order; the index is the logical time.
    pub order: Vec<InstrId>,
    /// `time[instr]`, for instructions of global computations.
    pub time: Vec<Option<u32>>,
    /// `[first time, one past the last]` of each flattened computation.
    pub span: Vec<Option<(u32, u32)>>,
    /// `held_until[comp]`: for a computation flattened inside an async
    /// operation, the time of that operation's `async-done`, before which no
    /// value the computation defines may end (`HloLiveRange`'s async context,
    /// notes §4.4).
    pub held_until: Vec<Option<u32>>,
}

impl Schedule {
    pub fn build(module: &Module, graph: &ModuleGraph) -> Schedule {
        let mut schedule = Schedule {
            order: Vec::with_capacity(module.instr_count()),
            time: vec![None; module.instr_count()],
            span: vec![None; module.comp_count()],
            held_until: vec![None; module.comp_count()],
        };
        let mut visited = vec![false; module.comp_count()];
        let mut context = vec![None; module.comp_count()];
        schedule.flatten(module, graph, module.entry, &mut visited, &mut context);
        schedule.hold_async_contexts(module, &context);
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
        context: &mut [Option<CompId>],
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
                // An async operation starts a context of its own; a call, a
                // loop or a branch inherits its caller's.
                context[callee.index()] = if is_async(&module.instr(id).opcode) {
                    Some(callee)
                } else {
                    context[current.index()]
                };
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

impl Schedule {
    /// Each computation in an async context is held until the `async-done`
    /// of the operation that wraps the context, found along the chain
    /// start → updates → done (a done need not name the computation). A chain
    /// whose done is not scheduled holds it to the computation's own end, as
    /// XLA does.
    fn hold_async_contexts(&mut self, module: &Module, context: &[Option<CompId>]) {
        if context.iter().all(Option::is_none) {
            return;
        }
        // The next operation of each async chain: the update or done that
        // takes the previous one as its operand.
        let mut next: Vec<Option<InstrId>> = vec![None; module.instr_count()];
        let mut wrapping: Vec<Vec<InstrId>> = vec![Vec::new(); module.comp_count()];
        for (id, instr) in module.instrs() {
            if matches!(instr.opcode, Opcode::AsyncUpdate | Opcode::AsyncDone) {
                if let Some(&prev) = instr.operands.first() {
                    next[prev.index()] = Some(id);
                }
            }
            if is_async(&instr.opcode) {
                for &(_, callee) in &instr.called {
                    wrapping[callee.index()].push(id);
                }
            }
        }
        let done_time = |op: InstrId| -> Option<u32> {
            let mut op = op;
            // A malformed chain cannot loop for longer than the module.
            for _ in 0..module.instr_count() {
                if module.instr(op).opcode == Opcode::AsyncDone {
                    return self.time(op);
                }
                op = next[op.index()]?;
            }
            None
        };
        let mut held_until = vec![None; module.comp_count()];
        for (comp, ctx) in context.iter().enumerate() {
            let Some(ctx) = ctx else { continue };
            let own_end = self.span[comp].map(|s| s.1);
            let held = wrapping[ctx.index()]
                .iter()
                .filter_map(|&op| done_time(op).or(own_end))
                .max();
            held_until[comp] = held;
        }
        self.held_until = held_until;
    }
}

fn is_async(opcode: &Opcode) -> bool {
    matches!(
        opcode,
        Opcode::AsyncStart | Opcode::AsyncUpdate | Opcode::AsyncDone
    )
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
