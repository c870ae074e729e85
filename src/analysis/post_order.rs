//! XLA's post-order numbering of instructions, the tie-break of the buffer
//! assignment: among buffers of equal size (and equal live-out-ness), the one
//! whose earliest defining instruction comes first in this order is assigned
//! first (`AssignBuffersForComputations`). Computations are numbered callers
//! first (the reverse of the call graph's post-order, entry first: the
//! reverse of the order the dump prints them in), and each computation's
//! instructions in `MakeInstructionPostOrder` order: a
//! depth-first post-order from every instruction without users, in text
//! order, operands first to last.

use crate::hlo::{CompId, InstrId, Module};

/// Position of each instruction, for the computations `counted` accepts;
/// `u32::MAX` for the others.
pub fn positions(module: &Module, counted: impl Fn(CompId) -> bool) -> Vec<u32> {
    let mut position = vec![u32::MAX; module.instr_count()];
    let mut next = 0u32;
    let mut computations = call_graph_post_order(module);
    computations.reverse();
    let mut users = vec![0u32; module.instr_count()];
    for (_, instr) in module.instrs() {
        for op in &instr.operands {
            users[op.index()] += 1;
        }
    }
    let mut visited = vec![false; module.instr_count()];
    for comp in computations.into_iter().filter(|&c| counted(c)) {
        for &start in &module.comp(comp).instructions {
            if users[start.index()] > 0 || visited[start.index()] {
                continue;
            }
            // Iterative DFS: (instruction, children pushed?).
            let mut stack: Vec<(InstrId, bool)> = vec![(start, false)];
            while let Some((current, expanded)) = stack.pop() {
                if expanded {
                    if position[current.index()] == u32::MAX {
                        position[current.index()] = next;
                        next += 1;
                    }
                    continue;
                }
                if visited[current.index()] {
                    continue;
                }
                visited[current.index()] = true;
                stack.push((current, true));
                let instr = module.instr(current);
                for &op in instr.operands.iter().rev() {
                    if !visited[op.index()] {
                        stack.push((op, false));
                    }
                }
                for &op in instr.control_predecessors.iter() {
                    if !visited[op.index()] {
                        stack.push((op, false));
                    }
                }
            }
        }
        // Instructions only reachable from nothing (cycles a parser let through)
        // still get a place, after the others.
        for &id in &module.comp(comp).instructions {
            if position[id.index()] == u32::MAX {
                position[id.index()] = next;
                next += 1;
            }
        }
    }
    position
}

/// Computations in call-graph post-order (callees before callers), as
/// `CallGraph::VisitNodes` walks them: depth first from each computation
/// nobody calls, each computation's callees in the order of its instruction
/// list. That list is XLA's own, not the schedule the dump prints: a pass
/// that adds a call (the CPU backend's parallel-task outlining into `call`s
/// of `parallel_*` computations, a loop wrapped into a `call`) appends it
/// to the end. The dump prints computations in the same walk
/// (`MakeComputationPostOrder`: the embedded computations of each uncalled
/// one, depth first in instruction-list order, then the computation), so
/// the file's order of computations is this order.
fn call_graph_post_order(module: &Module) -> Vec<CompId> {
    (0..module.comp_count() as u32).map(CompId).collect()
}
