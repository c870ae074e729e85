//! Which phi values XLA removes after its dataflow reached a fixed point
//! (`HloDataflowAnalysis::OptimizePhiValues` on the `PhiGraph` of
//! `xla/service/hlo_phi_graph.cc`; notes §4.2).
//!
//! A loop's state, a loop body's and condition's parameters and a
//! conditional's result are phi values whose inputs are the values that reach
//! them (init and body root; the branches' roots). A phi whose inputs, once it
//! is dropped from them, are all one value is that value; so is every phi of a
//! group that reaches, through phis only, exactly one other value. Resolving
//! one phi can resolve another (a loop nested in a body that passes an element
//! through makes the outer body's root hold the outer parameter again), so XLA
//! repeats both rules until nothing changes: pass-through is found at any depth.

use super::dataflow::ValueId;
// Fx, not SipHash: keys are ids.
use rustc_hash::FxHashSet as HashSet;
use std::collections::VecDeque;

/// Phi values with their inputs, in the order they were defined.
#[derive(Default)]
pub struct PhiGraph {
    phis: Vec<(ValueId, Vec<ValueId>)>,
}

/// No phi slot (a value that is not a registered phi).
const NONE: u32 = u32::MAX;

impl PhiGraph {
    /// Records that `phi` merges `inputs` (one per incoming edge; repeats kept).
    pub fn add(&mut self, phi: ValueId, inputs: Vec<ValueId>) {
        self.phis.push((phi, inputs));
    }

    /// For each of `value_count` values, the value it stands for once phis are
    /// resolved: itself, unless it is a phi XLA removes.
    pub fn resolve(self, value_count: usize) -> Vec<ValueId> {
        let mut slot = vec![NONE; value_count];
        for (k, (phi, _)) in self.phis.iter().enumerate() {
            slot[phi.index()] = k as u32;
        }
        let (ids, mut inputs): (Vec<ValueId>, Vec<Vec<ValueId>>) = self.phis.into_iter().unzip();
        // The value a removed phi now is (itself possibly a phi removed later).
        let mut replaced: Vec<Option<ValueId>> = vec![None; ids.len()];
        let follow = |replaced: &[Option<ValueId>], mut v: ValueId| {
            while let Some(k) = Some(slot[v.index()]).filter(|&k| k != NONE) {
                match replaced[k as usize] {
                    Some(next) => v = next,
                    None => break,
                }
            }
            v
        };
        let mut changed = true;
        while changed {
            changed = false;
            // A phi already inside a group tested this round is not a new start
            // (XLA's `checked_for_closure`, reset each round).
            let mut checked = vec![false; ids.len()];
            for k in 0..ids.len() {
                if replaced[k].is_some() {
                    continue;
                }
                let me = ids[k];
                let current: Vec<ValueId> = inputs[k]
                    .iter()
                    .map(|&v| follow(&replaced, v))
                    .filter(|&v| v != me)
                    .collect();
                inputs[k] = current;
                let Some(&first) = inputs[k].first() else {
                    continue;
                };
                if inputs[k].iter().all(|&v| v == first) {
                    replaced[k] = Some(first);
                    changed = true;
                    continue;
                }
                if checked[k] {
                    continue;
                }
                // Breadth first through the phis this one reaches: if exactly
                // one value that is not a phi is reached, every phi seen is it.
                let mut group: Vec<usize> = Vec::new();
                let mut seen: HashSet<ValueId> = HashSet::default();
                let mut queue = VecDeque::from([me]);
                let mut only: Option<ValueId> = None;
                let mut several = false;
                while let Some(v) = queue.pop_front() {
                    if !seen.insert(v) {
                        continue;
                    }
                    match Some(slot[v.index()]).filter(|&s| s != NONE) {
                        Some(s) => {
                            let s = s as usize;
                            checked[s] = true;
                            group.push(s);
                            queue.extend(inputs[s].iter().map(|&i| follow(&replaced, i)));
                        }
                        None if only.is_some_and(|o| o != v) => {
                            several = true;
                            break;
                        }
                        None => only = Some(v),
                    }
                }
                if let (Some(value), false) = (only, several) {
                    for s in group {
                        replaced[s] = Some(value);
                    }
                    changed = true;
                }
            }
        }
        (0..value_count)
            .map(|v| follow(&replaced, ValueId(v as u32)))
            .collect()
    }
}
