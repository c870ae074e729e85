//! Values and buffers: which instruction defines which value, where each value
//! appears, who uses it, and which values must share one buffer.
//!
//! Follows XLA's `HloDataflowAnalysis` in SSA form (notes §4.2) and
//! `HloAliasAnalysis` (notes §4.3): an instruction defines a value at every
//! node of its shape except where the table in §4.2 forwards its operands'
//! values; `while` and `conditional` results are phi values merged with their
//! inputs; in-place ops and the entry's `input_output_alias` merge buffers.

// Fx, not SipHash: keys are ids, and these maps are on the hot path.
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::graph::{CompKind, ModuleGraph};
use super::lists::Lists;
use super::phi::PhiGraph;
use super::sharing;
use crate::chip::Target;
use crate::hlo::{CallRole, CompId, InstrId, IoAlias, Module, Opcode, Place, Shape};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferId(pub u32);

impl ValueId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}
impl BufferId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One SSA value: an instruction's output at one node of its shape.
#[derive(Debug, Clone)]
pub struct Value {
    pub instr: InstrId,
    /// Pre-order node of the instruction's shape (0 is the whole shape, `{}`).
    pub node: u32,
    pub index: Vec<u64>,
    pub size: u64,
    pub is_phi: bool,
    pub buffer: BufferId,
}

/// Values that must share memory.
#[derive(Debug, Clone)]
pub struct Buffer {
    pub values: Vec<ValueId>,
    /// The largest of its values.
    pub size: u64,
}

pub struct Dataflow {
    /// Ordered like XLA's value ids: computations callees first, instructions
    /// in post-order, shape nodes in pre-order.
    pub values: Vec<Value>,
    /// By instruction: the value at each node of its shape.
    value_of: Lists<ValueId>,
    /// By value: every (instruction, node) whose output it is.
    positions: Lists<(InstrId, u32)>,
    /// By value: every (user, operand number) that reads it.
    uses: Lists<(InstrId, u32)>,
    pub buffers: Vec<Buffer>,
}

impl Dataflow {
    /// `value_of(instr)[node]`: the value at each node of the instruction's
    /// shape (none for an instruction of a body parsed on demand).
    pub fn value_of(&self, instr: InstrId) -> &[ValueId] {
        self.value_of.get(instr.index())
    }

    /// Every (instruction, node) whose output is `value`.
    pub fn positions(&self, value: ValueId) -> &[(InstrId, u32)] {
        self.positions.get(value.index())
    }

    /// Whether `value` is a tuple's index table (its node of its
    /// instruction's shape is a tuple), not an array.
    pub fn is_tuple(&self, module: &Module, value: ValueId) -> bool {
        let value = &self.values[value.index()];
        module
            .instr(value.instr)
            .shape
            .subshape(&value.index)
            .is_some_and(|s| s.is_tuple())
    }

    /// Every (user, operand number) that reads `value`.
    pub fn uses(&self, value: ValueId) -> &[(InstrId, u32)] {
        self.uses.get(value.index())
    }
}

fn node_count(shape: &Shape) -> usize {
    1 + shape.tuple_elements().iter().map(node_count).sum::<usize>()
}

/// The node range of tuple element `i` of `shape` (within the parent's node list).
fn child_range(shape: &Shape, i: usize) -> Option<std::ops::Range<usize>> {
    let elements = shape.tuple_elements();
    let element = elements.get(i)?;
    let start = 1 + elements[..i].iter().map(node_count).sum::<usize>();
    Some(start..start + node_count(element))
}

/// The node number of a shape index, if it exists.
pub fn node_of(shape: &Shape, index: &[u64]) -> Option<usize> {
    let mut node = 0;
    let mut current = shape;
    for &i in index {
        let range = child_range(current, usize::try_from(i).ok()?)?;
        node += range.start;
        current = &current.tuple_elements()[i as usize];
    }
    Some(node)
}

/// [`node_of`] for many indices into one shape: where each top-level element's
/// nodes start is summed once. An entry's result may be a tuple of thousands
/// of arrays, and every aliased output asks for its node.
pub struct NodeIndex<'s> {
    shape: &'s Shape,
    starts: Vec<usize>,
}

impl<'s> NodeIndex<'s> {
    pub fn new(shape: &'s Shape) -> NodeIndex<'s> {
        let mut next = 1;
        let starts = shape
            .tuple_elements()
            .iter()
            .map(|e| {
                let start = next;
                next += node_count(e);
                start
            })
            .collect();
        NodeIndex { shape, starts }
    }

    pub fn node_of(&self, index: &[u64]) -> Option<usize> {
        let Some((&first, rest)) = index.split_first() else {
            return Some(0);
        };
        let i = usize::try_from(first).ok()?;
        let start = *self.starts.get(i)?;
        Some(start + node_of(&self.shape.tuple_elements()[i], rest)?)
    }
}

/// Stack left before a nested evaluation moves to a new heap-allocated segment.
const STACK_RED_ZONE: usize = 128 * 1024;
/// Size of each new segment.
const STACK_GROWTH: usize = 4 * 1024 * 1024;

struct Builder<'m> {
    module: &'m Module,
    graph: &'m ModuleGraph,
    target: &'m Target,
    /// What must share an operand's buffer, fusions' found on all cores first.
    in_place: sharing::InPlacePairs,
    values: Vec<Value>,
    value_of: Vec<Vec<ValueId>>,
    /// Pairs of values that must share a buffer.
    merges: Vec<(ValueId, ValueId)>,
    /// Phi values and what reaches them, resolved before numbering.
    phis: PhiGraph,
    evaluated: Vec<bool>,
}

impl Dataflow {
    /// `aliases`: the entry's input/output aliasing (the module's own, or a what-if).
    pub fn build(
        module: &Module,
        graph: &ModuleGraph,
        aliases: &[IoAlias],
        target: &Target,
    ) -> Dataflow {
        let mut b = Builder {
            module,
            target,
            in_place: sharing::InPlacePairs::find(module),
            graph,
            values: Vec::new(),
            value_of: vec![Vec::new(); module.instr_count()],
            merges: Vec::new(),
            phis: PhiGraph::default(),
            evaluated: vec![false; module.comp_count()],
        };
        b.evaluate(module.entry, None);
        // Computations not reached through the entry's control flow (reducers,
        // fusion bodies read) define their own parameters. Deferred bodies
        // hold no values XLA's buffer assignment places.
        for ci in 0..module.comp_count() {
            if !b.evaluated[ci] && module.shell(CompId(ci as u32)).deferred.is_none() {
                b.evaluate(CompId(ci as u32), None);
            }
        }
        b.add_io_aliases(aliases);
        b.finish()
    }
}

impl Builder<'_> {
    fn define(
        &mut self,
        instr: InstrId,
        node: usize,
        index: Vec<u64>,
        shape: &Shape,
        is_phi: bool,
    ) -> ValueId {
        let id = ValueId(self.values.len() as u32);
        let thread = self
            .module
            .comp(self.module.instr(instr).computation)
            .execution_thread
            .as_deref();
        let (_, size) = self.target.value_placement(shape, thread);
        self.values.push(Value {
            instr,
            node: node as u32,
            index,
            size,
            is_phi,
            buffer: BufferId(0),
        });
        id
    }

    /// Defines an instruction's values, except that async-style starts keep
    /// their operands' own values in one slot ({0}; copy-start: {1}): the
    /// operands stay live until the matching done.
    fn define_with_operand_slot(&mut self, id: InstrId) -> Vec<ValueId> {
        let module = self.module;
        let instr = module.instr(id);
        let slot = match instr.opcode {
            Opcode::CopyStart => Some(1),
            Opcode::AsyncStart
            | Opcode::AllGatherStart
            | Opcode::CollectivePermuteStart
            | Opcode::Send => Some(0),
            _ => None,
        };
        let Some(range) = slot.and_then(|s| child_range(&instr.shape, s)) else {
            return self.define_all(id, false);
        };
        let operands: Vec<ValueId> = (0..instr.operands.len())
            .flat_map(|k| self.operand_values(id, k))
            .collect();
        // One operand fills the slot directly; several fill a tuple below it,
        // whose own table the start defines.
        let table_defined = slot
            .and_then(|s| instr.shape.tuple_elements().get(s))
            .is_some_and(|s| s.is_tuple());
        if operands.len() + usize::from(table_defined) != range.len() {
            return self.define_all(id, false);
        }
        // An async-start's result slot {1} is the wrapped computation's root
        // value, live until the done (`HloDataflowAnalysis` async rules).
        let result = match (instr.opcode.clone(), child_range(&instr.shape, 1)) {
            (Opcode::AsyncStart, Some(result_range)) => {
                match called(module, id, CallRole::Calls)
                    .filter(|c| self.graph.kind(*c) == CompKind::Global)
                {
                    Some(callee) => {
                        let args = (0..instr.operands.len())
                            .map(|k| self.operand_values(id, k))
                            .collect();
                        self.evaluate(callee, Some(args));
                        let root = self.value_of[module.comp(callee).root.index()].clone();
                        (root.len() == result_range.len()).then_some((result_range, root))
                    }
                    None => None,
                }
            }
            _ => None,
        };
        let nodes = instr.shape.nodes();
        let mut values = Vec::with_capacity(nodes.len());
        let mut forwarded = operands.into_iter();
        let mut from_callee = result.as_ref().map(|(_, root)| root.iter().copied());
        for (node, (index, sub)) in nodes.into_iter().enumerate() {
            let keep_operand = range.contains(&node) && !(table_defined && node == range.start);
            let callee_value = result
                .as_ref()
                .filter(|(r, _)| r.contains(&node))
                .and_then(|_| from_callee.as_mut()?.next());
            if let Some(v) = callee_value {
                values.push(v);
                continue;
            }
            match keep_operand.then(|| forwarded.next()).flatten() {
                Some(v) => values.push(v),
                None => values.push(self.define(id, node, index, sub, false)),
            }
        }
        values
    }

    fn define_all(&mut self, instr: InstrId, is_phi: bool) -> Vec<ValueId> {
        let shape = &self.module.instr(instr).shape;
        shape
            .nodes()
            .into_iter()
            .enumerate()
            .map(|(node, (index, sub))| self.define(instr, node, index, sub, is_phi))
            .collect()
    }

    /// Evaluates a computation once; `params` binds its parameters to the
    /// caller's values (call, while, conditional), `None` makes them define values.
    ///
    /// Evaluation recurses once per call level (a callee's parameters are the
    /// caller's values at the call, so the caller is half done when the callee
    /// runs). Thousands of nested `call`s or `while`s are valid HLO, so the
    /// stack grows on the heap instead of overflowing.
    fn evaluate(&mut self, comp: CompId, params: Option<Vec<Vec<ValueId>>>) {
        if std::mem::replace(&mut self.evaluated[comp.index()], true) {
            return;
        }
        stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, || {
            let module = self.module;
            for &id in &module.comp(comp).instructions {
                let values = self.evaluate_instruction(id, params.as_deref());
                self.value_of[id.index()] = values;
            }
        });
    }

    fn operand_values(&self, id: InstrId, k: usize) -> Vec<ValueId> {
        self.module
            .instr(id)
            .operands
            .get(k)
            .map(|o| self.value_of[o.index()].clone())
            .unwrap_or_default()
    }

    /// The values of tuple element `k` of operand 0.
    fn operand_element(&self, id: InstrId, k: usize) -> Option<Vec<ValueId>> {
        let operand = *self.module.instr(id).operands.first()?;
        let range = child_range(&self.module.instr(operand).shape, k)?;
        self.value_of[operand.index()].get(range).map(<[_]>::to_vec)
    }

    fn evaluate_instruction(
        &mut self,
        id: InstrId,
        params: Option<&[Vec<ValueId>]>,
    ) -> Vec<ValueId> {
        let module = self.module;
        let instr = module.instr(id);
        let nodes = node_count(&instr.shape);
        let forward = |values: Vec<ValueId>| (values.len() == nodes).then_some(values);
        let forwarded = match &instr.opcode {
            Opcode::Parameter => params
                .and_then(|p| p.get(instr.parameter_number.unwrap_or(0) as usize).cloned())
                .and_then(forward),
            Opcode::Bitcast
            | Opcode::Domain
            | Opcode::AddDependency
            | Opcode::OptimizationBarrier => forward(self.operand_values(id, 0)),
            Opcode::AllReduceDone => forward(self.operand_values(id, 0)),
            Opcode::GetTupleElement => self
                .operand_element(id, instr.tuple_index.unwrap_or(0) as usize)
                .and_then(forward),
            Opcode::Tuple => {
                let table = self.define(id, 0, Vec::new(), &instr.shape, false);
                let mut values = vec![table];
                for k in 0..instr.operands.len() {
                    values.extend(self.operand_values(id, k));
                }
                forward(values)
            }
            Opcode::Copy if instr.shape.is_tuple() => {
                let table = self.define(id, 0, Vec::new(), &instr.shape, false);
                let mut values = vec![table];
                values.extend(self.operand_values(id, 0).into_iter().skip(1));
                forward(values)
            }
            Opcode::Call => {
                let callee = called(module, id, CallRole::ToApply)
                    .or_else(|| called(module, id, CallRole::Calls));
                match callee.filter(|c| self.graph.kind(*c) == CompKind::Global) {
                    Some(callee) => {
                        let args = (0..instr.operands.len())
                            .map(|k| self.operand_values(id, k))
                            .collect();
                        self.evaluate(callee, Some(args));
                        forward(self.value_of[module.comp(callee).root.index()].clone())
                    }
                    None => None,
                }
            }
            Opcode::While => Some(self.evaluate_while(id)),
            Opcode::Conditional => Some(self.evaluate_conditional(id)),
            Opcode::CopyDone
            | Opcode::AsyncDone
            | Opcode::AllGatherDone
            | Opcode::CollectivePermuteDone => {
                // The result lives in the start's destination slot.
                let slot = if instr.opcode == Opcode::CopyDone {
                    0
                } else {
                    1
                };
                self.operand_element(id, slot).and_then(forward)
            }
            _ => None,
        };
        let values = match forwarded {
            Some(values) => values,
            None => self.define_with_operand_slot(id),
        };
        for pair in self.in_place.pairs(module, id) {
            let (Some(out_node), Some(&operand_instr)) = (
                node_of(&instr.shape, &pair.output_index),
                instr.operands.get(pair.operand as usize),
            ) else {
                continue;
            };
            let operand_shape = &module.instr(operand_instr).shape;
            if let (Some(&out), Some(in_node)) = (
                values.get(out_node),
                node_of(operand_shape, &pair.operand_index),
            ) {
                if let Some(&input) = self.value_of[operand_instr.index()].get(in_node) {
                    self.merges.push((out, input));
                }
            }
        }
        values
    }

    /// The loop state: the while's result, the condition's and the body's
    /// parameters are phi values of their own (so each has its own live range),
    /// all in one buffer with the initial value and the body's result. Each phi
    /// is recorded with the values reaching it (init and body root) so that
    /// [`PhiGraph`] can remove it where the body passes an element through
    /// unchanged, directly or through loops nested in it.
    fn evaluate_while(&mut self, id: InstrId) -> Vec<ValueId> {
        let module = self.module;
        let init = self.operand_values(id, 0);
        let phis = self.define_all(id, true);
        let merge_with_phis = |b: &mut Self, values: &[ValueId]| {
            for (&phi, &v) in phis.iter().zip(values) {
                b.merges.push((phi, v));
            }
        };
        merge_with_phis(self, &init);
        let mut params = Vec::new();
        let mut root = None;
        for role in [CallRole::Condition, CallRole::Body] {
            let Some(comp) =
                called(module, id, role).filter(|c| self.graph.kind(*c) == CompKind::Global)
            else {
                continue;
            };
            if self.evaluated[comp.index()] {
                continue;
            }
            let Some(&param) = module.comp(comp).parameters.first() else {
                self.evaluate(comp, None);
                continue;
            };
            let param_values = self.define_all(param, true);
            merge_with_phis(self, &param_values);
            self.evaluate(comp, Some(vec![param_values.clone()]));
            params.push(param_values);
            if role == CallRole::Body {
                let values = self.value_of[module.comp(comp).root.index()].clone();
                merge_with_phis(self, &values);
                root = Some(values);
            }
        }
        // XLA's inputs: the while's result merges the body's root and the
        // init; both parameters merge the init and the body's root.
        let n = phis.len();
        if let Some(root) = root.filter(|r| r.len() == n && init.len() == n) {
            for node in 0..n {
                self.phis.add(phis[node], vec![root[node], init[node]]);
                for param in params.iter().filter(|p| p.len() == n) {
                    self.phis.add(param[node], vec![init[node], root[node]]);
                }
            }
        }
        phis
    }

    /// A conditional's result is a phi of its branches' roots (XLA removes it
    /// where all branches return one value, as for a while).
    fn evaluate_conditional(&mut self, id: InstrId) -> Vec<ValueId> {
        let module = self.module;
        let phis = self.define_all(id, true);
        let branches: Vec<CompId> = module
            .instr(id)
            .called
            .iter()
            .filter(|(r, _)| *r == CallRole::Branch)
            .map(|&(_, c)| c)
            .collect();
        let mut roots = Vec::with_capacity(branches.len());
        for (b, &comp) in branches.iter().enumerate() {
            if self.graph.kind(comp) != CompKind::Global {
                continue;
            }
            let args = vec![self.operand_values(id, b + 1)];
            self.evaluate(comp, Some(args));
            let root = self.value_of[module.comp(comp).root.index()].clone();
            for (&phi, &v) in phis.iter().zip(&root) {
                self.merges.push((phi, v));
            }
            roots.push(root);
        }
        if roots.len() == branches.len() && roots.iter().all(|r| r.len() == phis.len()) {
            for (node, &phi) in phis.iter().enumerate() {
                self.phis.add(phi, roots.iter().map(|r| r[node]).collect());
            }
        }
        phis
    }

    /// Entry outputs aliased with parameters share the parameter's buffer.
    fn add_io_aliases(&mut self, aliases: &[IoAlias]) {
        let module = self.module;
        let entry = module.entry();
        let root = entry.root;
        let outputs = NodeIndex::new(&module.instr(root).shape);
        for alias in aliases {
            let Some(&param) = entry.parameters.get(alias.parameter as usize) else {
                continue;
            };
            let out = outputs
                .node_of(&alias.output_index)
                .and_then(|n| self.value_of[root.index()].get(n).copied());
            let input = node_of(&module.instr(param).shape, &alias.parameter_index)
                .and_then(|n| self.value_of[param.index()].get(n).copied());
            if let (Some(out), Some(input)) = (out, input) {
                self.merges.push((out, input));
            }
        }
    }

    fn finish(mut self) -> Dataflow {
        let module = self.module;
        // Removed phis: every position and merge takes the value they stand
        // for, and they leave the value list (XLA deletes them).
        let resolved = std::mem::take(&mut self.phis).resolve(self.values.len());
        for per_instr in &mut self.value_of {
            for v in per_instr.iter_mut() {
                *v = resolved[v.index()];
            }
        }
        for (a, b) in &mut self.merges {
            *a = resolved[a.index()];
            *b = resolved[b.index()];
        }
        // Renumber values like XLA: computations in file order (callees first),
        // instructions in post-order, nodes in pre-order.
        let mut rank = vec![u32::MAX; module.instr_count()];
        let mut next = 0u32;
        for (_, comp) in module.shells() {
            for id in post_order(module, comp.instructions.as_slice(), comp.root) {
                rank[id.index()] = next;
                next += 1;
            }
        }
        let mut order: Vec<usize> = (0..self.values.len())
            .filter(|&v| resolved[v].index() == v)
            .collect();
        order.sort_by_key(|&v| (rank[self.values[v].instr.index()], self.values[v].node, v));
        let mut new_id = vec![ValueId(0); self.values.len()];
        for (new, &old) in order.iter().enumerate() {
            new_id[old] = ValueId(new as u32);
        }
        let mut values: Vec<Value> = order
            .iter()
            .map(|&old| {
                let v = &mut self.values[old];
                Value {
                    index: std::mem::take(&mut v.index),
                    ..*v
                }
            })
            .collect();
        self.values = Vec::new();
        for per_instr in &mut self.value_of {
            for v in per_instr.iter_mut() {
                *v = new_id[v.index()];
            }
        }
        for (a, b) in &mut self.merges {
            *a = new_id[a.index()];
            *b = new_id[b.index()];
        }

        // Positions, then uses (notes §4.2: tuple and domain never use their
        // operands; get-tuple-element and copy use only the operand's top node).
        let value_of = {
            let mut flat = Lists::with_capacity(self.value_of.len(), values.len());
            for per_instr in std::mem::take(&mut self.value_of) {
                flat.push(per_instr);
            }
            flat
        };
        let positions = Lists::grouped(
            values.len(),
            value_of
                .iter()
                .enumerate()
                .flat_map(|(i, per_instr)| {
                    per_instr
                        .iter()
                        .enumerate()
                        .map(move |(node, &v)| (v.index(), (InstrId::arena(i), node as u32)))
                })
                .collect(),
        );
        let mut uses = Lists::with_capacity(values.len(), values.len());
        // One position lists each (user, operand) once; a value at several
        // positions (a tuple holding it twice) may meet the same use again.
        let mut seen: HashSet<(InstrId, u32)> = HashSet::default();
        let mut reads = Vec::new();
        for v in 0..values.len() {
            let at = positions.get(v);
            let dedup = at.len() > 1;
            seen.clear();
            for &(instr, node) in at {
                for (user, k) in self.graph.users(instr) {
                    let read = match module.instr(user).opcode {
                        Opcode::Tuple | Opcode::Domain => false,
                        Opcode::GetTupleElement | Opcode::Copy => node == 0,
                        _ => true,
                    };
                    if read && (!dedup || seen.insert((user, k))) {
                        reads.push((user, k));
                    }
                }
            }
            uses.push(reads.drain(..));
        }

        // Buffers: union-find over the merges.
        let mut parent: Vec<u32> = (0..values.len() as u32).collect();
        fn find(parent: &mut [u32], mut x: u32) -> u32 {
            while parent[x as usize] != x {
                parent[x as usize] = parent[parent[x as usize] as usize];
                x = parent[x as usize];
            }
            x
        }
        for &(a, b) in &self.merges {
            let (ra, rb) = (find(&mut parent, a.0), find(&mut parent, b.0));
            if ra != rb {
                let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
                parent[hi as usize] = lo;
            }
        }
        let mut buffer_of_root: HashMap<u32, BufferId> = HashMap::default();
        let mut buffers: Vec<Buffer> = Vec::new();
        for (v, value) in values.iter_mut().enumerate() {
            let root = find(&mut parent, v as u32);
            let b = *buffer_of_root.entry(root).or_insert_with(|| {
                buffers.push(Buffer {
                    values: Vec::new(),
                    size: 0,
                });
                BufferId(buffers.len() as u32 - 1)
            });
            buffers[b.index()].values.push(ValueId(v as u32));
            buffers[b.index()].size = buffers[b.index()].size.max(value.size);
            value.buffer = b;
        }
        Dataflow {
            values,
            value_of,
            positions,
            uses,
            buffers,
        }
    }
}

fn called(module: &Module, id: InstrId, role: CallRole) -> Option<CompId> {
    module
        .instr(id)
        .called
        .iter()
        .find(|(r, _)| *r == role)
        .map(|&(_, c)| c)
}

/// XLA's `MakeInstructionPostOrder`: depth-first from each instruction nobody
/// uses, in text order, operands before users.
pub fn post_order(module: &Module, instructions: &[InstrId], root: InstrId) -> Vec<InstrId> {
    let local = LocalIndex::new(instructions);
    let mut has_user = vec![false; instructions.len()];
    for &id in instructions {
        for op in module
            .instr(id)
            .operands
            .iter()
            .chain(&module.instr(id).control_predecessors)
        {
            if let Some(i) = local.get(*op) {
                has_user[i] = true;
            }
        }
    }
    let mut visited = vec![false; instructions.len()];
    let mut out = Vec::with_capacity(instructions.len());
    let starts = instructions
        .iter()
        .enumerate()
        .filter(|&(i, &id)| !has_user[i] && id != root)
        .map(|(i, _)| i)
        .chain(local.get(root));
    for start in starts {
        if visited[start] {
            continue;
        }
        // Iterative DFS: (node, next operand to visit).
        let mut stack = vec![(start, 0usize)];
        visited[start] = true;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            let instr = module.instr(instructions[node]);
            let n = instr.operands.len();
            let pred = if *next < n {
                instr.operands.get(*next)
            } else {
                instr.control_predecessors.get(*next - n)
            };
            if let Some(&op) = pred {
                *next += 1;
                if let Some(i) = local.get(op) {
                    if !visited[i] {
                        visited[i] = true;
                        stack.push((i, 0));
                    }
                }
            } else {
                out.push(instructions[node]);
                stack.pop();
            }
        }
    }
    out
}

/// Where each instruction of one computation is in its list. A computation's
/// instructions sit side by side in the arena (recreated get-tuple-elements
/// after all of them), so a table over their id range replaces a hash map:
/// the entry of a training step has tens of thousands.
struct LocalIndex {
    first: u32,
    slots: Vec<u32>,
}

/// An instruction's number in its place (the arena, or the deferred lines):
/// a computation's instructions are all in one place.
fn key(id: InstrId) -> u32 {
    match id.place() {
        Place::Arena(n) => n as u32,
        Place::Body(line) => line.0,
    }
}

impl LocalIndex {
    fn new(instructions: &[InstrId]) -> LocalIndex {
        let first = instructions.iter().map(|&id| key(id)).min().unwrap_or(0);
        let last = instructions.iter().map(|&id| key(id)).max().unwrap_or(0);
        let span = if instructions.is_empty() {
            0
        } else {
            (last - first) as usize + 1
        };
        let mut slots = vec![u32::MAX; span];
        for (i, id) in instructions.iter().enumerate() {
            slots[(key(*id) - first) as usize] = i as u32;
        }
        LocalIndex { first, slots }
    }

    fn get(&self, id: InstrId) -> Option<usize> {
        let slot = *self.slots.get(key(id).checked_sub(self.first)? as usize)?;
        (slot != u32::MAX).then_some(slot as usize)
    }
}
