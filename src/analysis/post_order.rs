//! XLA's post-order numbering of instructions, the tie-break of the buffer
//! assignment: among buffers of equal size (and equal live-out-ness), the one
//! whose earliest defining instruction comes first in this order is assigned
//! first (`AssignBuffersForComputations`). Computations are numbered callers
//! first (the reverse of the call graph's post-order, entry first), and each
//! computation's instructions in `MakeInstructionPostOrder` order: a
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

/// Computations in call-graph post-order (callees before callers), starting
/// from every computation nobody calls, in module order (`CallGraph::VisitNodes`).
fn call_graph_post_order(module: &Module) -> Vec<CompId> {
    let n = module.comp_count();
    let mut callees: Vec<Vec<CompId>> = vec![Vec::new(); n];
    let mut called = vec![false; n];
    // Each computation's callees once, in first-call order. An unrolled entry
    // calls tens of thousands of fusion bodies: a set, not a scan per call.
    let mut seen: rustc_hash::FxHashSet<(usize, CompId)> = Default::default();
    for (c, comp) in module.shells() {
        let ci = c.index();
        for &id in &comp.instructions {
            for &(_, callee) in module.instr(id).called.iter() {
                if seen.insert((ci, callee)) {
                    callees[ci].push(callee);
                }
                if callee.index() != ci {
                    called[callee.index()] = true;
                }
            }
        }
    }
    let mut order = Vec::with_capacity(n);
    let mut visited = vec![false; n];
    for root in (0..n).filter(|&c| !called[c]) {
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        visited[root] = true;
        while let Some(&mut (c, ref mut next_child)) = stack.last_mut() {
            if let Some(&child) = callees[c].get(*next_child) {
                *next_child += 1;
                if !visited[child.index()] {
                    visited[child.index()] = true;
                    stack.push((child.index(), 0));
                }
            } else {
                order.push(CompId(c as u32));
                stack.pop();
            }
        }
    }
    // Computations in a call cycle with no caller outside it.
    order.extend((0..n).filter(|&c| !visited[c]).map(|c| CompId(c as u32)));
    order
}
