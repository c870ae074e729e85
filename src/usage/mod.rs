//! What uses the memory, in the user's terms: the buffers live at the peak
//! grouped by source line (with the user's own calling line), by scope (the
//! `op_name` path as a tree, forward and backward told apart) and by role
//! (parameters, optimizer state, activations kept for the backward pass,
//! gradients, ...).
//!
//! Every group is a sum of whole buffers, so each breakdown adds up to the
//! live peak exactly; nothing is dropped (a buffer with no source line is in
//! the group without one).

pub mod arguments;
mod role;
pub mod scope;
pub mod source;

use rayon::prelude::*;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use serde::Serialize;

use crate::analysis::{BufferKind, MemoryModel};
use crate::hlo::{Module, SourceLocation};
pub use arguments::ParameterOrigin;
pub use role::Role;
pub use scope::Phase;

/// The peak, grouped three ways, plus what the grouping learned about the
/// program.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PeakUsage {
    /// The module differentiates (some op is in a `transpose(...)`): a training step.
    pub training: bool,
    /// Some op is inside `jax.checkpoint` / `remat`: the program already
    /// recomputes activations instead of keeping them.
    pub rematerialized: bool,
    /// The pass the peak falls in, when the op there has an `op_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Largest first.
    pub by_source: Vec<SourceGroup>,
    /// Largest first.
    pub by_role: Vec<RoleGroup>,
    /// The `op_name` scopes as a tree; the root holds the whole live peak.
    pub by_scope: ScopeNode,
    /// Facts about each buffer live at the peak, in the order of
    /// `MemoryModel::peak.buffers` (the report copies them onto its rows).
    #[serde(skip)]
    pub buffers: Vec<BufferUse>,
    /// Each entry parameter's origin, by number, read once for the report
    /// and the findings too.
    #[serde(skip)]
    pub parameters: Vec<arguments::ParameterOrigin>,
    /// The front-end that made the module (the report shows it beside the
    /// module; findings word their fixes by it).
    #[serde(skip)]
    pub frontend: crate::frontend::Frontend,
    /// Where source lines are missing or say nothing of the user's code,
    /// and what would give them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_hint: Option<source::SourceHint>,
}

impl PeakUsage {
    /// The groups and facts a report keeps, without the per-buffer and
    /// per-parameter rows it reads once while being built (thousands of
    /// rows with their stacks: copying them doubled the report's memory).
    pub fn summary(&self) -> PeakUsage {
        PeakUsage {
            training: self.training,
            rematerialized: self.rematerialized,
            phase: self.phase,
            by_source: self.by_source.clone(),
            by_role: self.by_role.clone(),
            by_scope: self.by_scope.clone(),
            buffers: Vec::new(),
            parameters: Vec::new(),
            frontend: self.frontend.clone(),
            source_hint: self.source_hint.clone(),
        }
    }
}

/// Sizes shared by every kind of group.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct GroupSize {
    pub bytes: u64,
    /// `bytes` over the live peak, between 0 and 1.
    pub share: f64,
    pub buffers: usize,
    /// The shape of the group's largest buffer.
    pub shape: String,
    /// The instruction defining the group's largest buffer.
    pub largest: String,
    /// The size of that buffer (the group keeps the first one of that size).
    #[serde(skip)]
    largest_bytes: u64,
}

/// Buffers made by one line of code, called from one line of the user's.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SourceGroup {
    /// The innermost frame, `file:line` (often a library's line); absent for
    /// buffers the dump gives no line for (mostly arguments).
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// The innermost frame in the user's own code (outside installed packages
    /// and Python itself); equal to `source` when that is the user's.
    pub caller: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_function: Option<String>,
    /// For the arguments' buffers, which have no line: the JAX argument.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument: Option<String>,
    /// For a parameter's buffer with no argument path (TensorFlow's,
    /// PyTorch/XLA's): the parameter's name in the HLO (`arg0.1`, `p0.2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter: Option<String>,
    /// Copies XLA made of `argument` (a layout change), which are buffers of
    /// their own beside the argument's and so a group of their own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub layout_copy: bool,
    /// The group as people read it ([`SourceGroup::place`]): every renderer
    /// and the Python package show this one string.
    pub place: String,
    /// Values XLA made with no line of their own (materialized iotas and
    /// broadcasts, layout copies), charged to the line of their first user.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub made_by_xla: bool,
    /// The `op_name` of the largest buffer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_name: Option<String>,
    #[serde(flatten)]
    pub size: GroupSize,
}

impl SourceGroup {
    /// `flax/linen/stochastic.py:105 (Dropout.__call__) ← train.py:40 (Block.__call__)`,
    /// `argument params`, `made by XLA for ...`: the group as people read it.
    pub fn place(&self) -> String {
        // `build.<locals>.Block.__call__` reads as `Block.__call__`.
        let site = |location: &str, function: &Option<String>| match function {
            Some(f) => format!(
                "{} ({})",
                source::short(location),
                f.rsplit("<locals>.").next().unwrap_or(f)
            ),
            None => source::short(location),
        };
        let place = match (&self.source, &self.caller, &self.argument) {
            (None, _, Some(a)) if self.layout_copy => {
                return format!("layout copies of argument `{a}` (made by XLA)")
            }
            (None, _, Some(a)) => format!("argument `{a}`"),
            (None, _, None) => match &self.parameter {
                Some(p) => format!("parameter `{p}`"),
                None => "(no source line)".to_string(),
            },
            (Some(s), Some(c), _) if s != c => {
                format!(
                    "{} ← {}",
                    site(s, &self.function),
                    site(c, &self.caller_function)
                )
            }
            (Some(s), _, _) => site(s, &self.function),
        };
        if self.made_by_xla {
            format!("made by XLA for {place}")
        } else {
            place
        }
    }
}

/// Buffers of one role.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RoleGroup {
    pub role: Role,
    #[serde(flatten)]
    pub size: GroupSize,
    /// For inputs: each JAX argument's share, largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<ArgumentBytes>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ArgumentBytes {
    pub name: String,
    pub bytes: u64,
    pub buffers: usize,
}

/// One scope of the `op_name` tree and what is live under it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ScopeNode {
    pub name: String,
    #[serde(flatten)]
    pub size: GroupSize,
    /// Of `bytes`: made in the forward pass (kept for the backward pass).
    pub forward_bytes: u64,
    /// Of `bytes`: made in the backward pass.
    pub backward_bytes: u64,
    /// Of `bytes`: neither (the optimizer update, arguments, inference).
    pub outside_bytes: u64,
    /// Largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<ScopeNode>,
}

/// What the grouping knows about one buffer live at the peak.
#[derive(Debug, Clone)]
pub struct BufferUse {
    pub bytes: u64,
    pub shape: String,
    pub instruction: String,
    pub op_name: Option<String>,
    pub stack: Vec<SourceLocation>,
    /// The op carries no source line (XLA made it: a materialized iota, a
    /// layout copy); `stack` is then that of the first op that uses it.
    pub made_by_xla: bool,
    pub phase: Phase,
    pub role: Role,
    /// For arguments: the JAX argument (`params`).
    pub argument: Option<String>,
    /// For a parameter without an argument path: its HLO name (`p0.2`).
    pub parameter: Option<String>,
    /// A copy of the argument XLA made (a layout change), not the argument's
    /// own buffer: the peak holds both.
    pub layout_copy: bool,
}

impl BufferUse {
    pub fn source(&self) -> Option<&SourceLocation> {
        self.stack.first()
    }
    pub fn caller(&self) -> Option<&SourceLocation> {
        source::caller(&self.stack)
    }
    fn scope_path(&self) -> Vec<String> {
        match (&self.argument, &self.parameter, &self.op_name) {
            (Some(argument), _, _) if self.layout_copy => {
                vec!["arguments".into(), format!("{argument} (layout copies)")]
            }
            (Some(argument), _, _) => vec!["arguments".into(), argument.clone()],
            (None, Some(parameter), _) => vec!["parameters".into(), parameter.clone()],
            (None, None, Some(op)) => scope::path(op),
            (None, None, None) => vec!["(no op_name)".into()],
        }
    }
}

/// Values XLA made without a source line are charged to the code that uses
/// them: the first op reading them, in schedule order, whose line is known.
fn attribute_xla_made(module: &Module, model: &MemoryModel, buffers: &mut [BufferUse]) {
    let orphans: Vec<usize> = (0..buffers.len())
        .filter(|&i| {
            buffers[i].stack.is_empty()
                && buffers[i].argument.is_none()
                && buffers[i].parameter.is_none()
        })
        .collect();
    if orphans.is_empty() {
        return;
    }
    let wanted: HashMap<crate::hlo::InstrId, Vec<usize>> =
        orphans.iter().fold(HashMap::default(), |mut map, &i| {
            map.entry(model.peak.buffers[i].instruction)
                .or_default()
                .push(i);
            map
        });
    let mut found: HashMap<crate::hlo::InstrId, Vec<SourceLocation>> = HashMap::default();
    // A fusion without metadata often fuses ops that have it.
    let stack_of = |instr: crate::hlo::InstrId| {
        let own = source::op_name_and_stack(module, instr).1;
        if !own.is_empty() {
            return own;
        }
        for &(_, callee) in module.instr(instr).called.iter() {
            let comp = module.comp(callee);
            let inner = std::iter::once(comp.root)
                .chain(comp.instructions.iter().rev().copied())
                .map(|i| source::op_name_and_stack(module, i).1)
                .find(|s| !s.is_empty());
            if let Some(stack) = inner {
                return stack;
            }
        }
        Vec::new()
    };
    for &instr in wanted.keys() {
        let stack = stack_of(instr);
        if !stack.is_empty() {
            found.insert(instr, stack);
        }
    }
    // Users in schedule order; a user with no line of its own (a
    // get-tuple-element, another XLA-made op) passes the search on to its
    // users. A value is charged to the first user in schedule order, with a
    // line, that reads it directly or through such line-less users.
    //
    // Each user with a line walks back through the line-less values it reads
    // that no earlier user has walked through: the first to reach a value is
    // the earliest, so every value is walked once (linear, where carrying
    // each value's list of roots forward duplicated the lists at every
    // diamond and grew exponentially on an unscheduled module).
    let mut carries: HashSet<crate::hlo::InstrId> = wanted
        .keys()
        .filter(|i| !found.contains_key(i))
        .copied()
        .collect();
    let mut unresolved = carries.len();
    let mut walked: HashSet<crate::hlo::InstrId> = HashSet::default();
    let mut stack_walk: Vec<crate::hlo::InstrId> = Vec::new();
    for &user in &model.schedule.order {
        if unresolved == 0 {
            break;
        }
        let operands = &module.instr(user).operands;
        if !operands
            .iter()
            .any(|o| carries.contains(o) && !walked.contains(o))
        {
            continue;
        }
        let stack = stack_of(user);
        if stack.is_empty() {
            carries.insert(user);
            continue;
        }
        stack_walk.extend(
            operands
                .iter()
                .filter(|o| carries.contains(o) && !walked.contains(o)),
        );
        while let Some(value) = stack_walk.pop() {
            if !walked.insert(value) {
                continue;
            }
            if wanted.contains_key(&value) {
                if let std::collections::hash_map::Entry::Vacant(e) = found.entry(value) {
                    e.insert(stack.clone());
                    unresolved -= 1;
                }
            }
            stack_walk.extend(
                module
                    .instr(value)
                    .operands
                    .iter()
                    .filter(|o| carries.contains(o) && !walked.contains(o)),
            );
        }
    }
    for (instr, indices) in wanted {
        if let Some(stack) = found.get(&instr) {
            for i in indices {
                buffers[i].stack = stack.clone();
                buffers[i].made_by_xla = true;
            }
        }
    }
}

/// Groups the buffers live at `model`'s peak.
pub fn peak_usage(module: &Module, model: &MemoryModel) -> PeakUsage {
    peak_usage_with(module, model, ModuleFacts::read(module))
}

/// What the usage report reads of the module alone, before there is a memory
/// model: the front-end, whether its wrappers for training and
/// rematerialization appear in op_names, and each entry parameter's origin.
/// The pipeline reads them beside the accounting, whose longest stages keep
/// one core busy.
pub struct ModuleFacts {
    training: bool,
    rematerialized: bool,
    parameters: Vec<arguments::ParameterOrigin>,
    frontend: crate::frontend::Frontend,
}

impl ModuleFacts {
    pub fn read(module: &Module) -> ModuleFacts {
        use crate::frontend::{Frontend, FrontendName};
        // The text is searched instead of every instruction's metadata: these
        // wrappers appear nowhere but in op_names. Each search reads the whole
        // text, so they run beside the parameters' metadata.
        let ((jax_training, jax_remat), (parameters, frontend, tf_training)) = rayon::join(
            || {
                rayon::join(
                    || module.text_contains("transpose(jvp("),
                    || {
                        [
                            "remat(",
                            "checkpoint(",
                            "/checkpoint/",
                            "rematted_computation",
                        ]
                        .par_iter()
                        .any(|w| module.text_contains(w))
                    },
                )
            },
            || {
                let read = arguments::read_parameters(module);
                let op_names: Vec<Option<String>> =
                    read.iter().map(|(op_name, _)| op_name.clone()).collect();
                let frontend = Frontend::detect(module, &op_names);
                // TensorFlow's GradientTape scopes the backward pass.
                let tf_training = frontend.name == FrontendName::Tensorflow
                    && module.text_contains(scope::TF_BACKWARD);
                let parameters = arguments::parameter_origins(module, read, frontend.name);
                (parameters, frontend, tf_training)
            },
        );
        let jax_words = frontend.name.names_arguments();
        ModuleFacts {
            training: (jax_words && jax_training) || tf_training,
            // `jax.checkpoint`'s scopes; a TensorFlow or PyTorch/XLA op
            // named `checkpoint` is not one.
            rematerialized: jax_words && jax_remat,
            parameters,
            frontend,
        }
    }
}

/// [`peak_usage`] with the module's facts read already.
pub fn peak_usage_with(module: &Module, model: &MemoryModel, facts: ModuleFacts) -> PeakUsage {
    let ModuleFacts {
        training,
        rematerialized,
        parameters,
        frontend,
    } = facts;
    let origin_of: HashMap<_, _> = module.entry().parameters.iter().zip(&parameters).collect();
    let names: std::collections::HashSet<&str> = parameters
        .iter()
        .filter_map(|o| o.argument.as_ref())
        .map(|(name, _)| name.as_str())
        .collect();
    // Each buffer reads its instruction's metadata (a grammar parse): on all cores.
    let buffers: Vec<BufferUse> = model
        .peak
        .buffers
        .par_iter()
        .map(|b| {
            let instr = module.instr(b.instruction);
            let origin = origin_of.get(&b.instruction);
            // An entry parameter's metadata was read for its origin already,
            // and its frames are not shown: they are where jit was called,
            // not what made the argument.
            let (op_name, stack) = match origin {
                Some(o) if b.kind == BufferKind::Parameter => (o.op_name.clone(), Vec::new()),
                _ => source::op_name_and_stack(module, b.instruction),
            };
            let phase = op_name.as_deref().map_or(Phase::Outside, scope::phase);
            // A parameter without an argument path stands alone, by its HLO name.
            let parameter = origin
                .filter(|o| o.argument.is_none())
                .map(|o| o.name.clone());
            let argument = if let Some(o) = origin {
                o.argument.as_ref().map(|(name, _)| name.clone())
            } else {
                // A copy of an argument (a layout change) keeps its op_name.
                op_name
                    .as_deref()
                    .filter(|op| !op.contains('/'))
                    .map(arguments::top_name)
                    .filter(|top| names.contains(top.as_str()))
            };
            let layout_copy = origin.is_none() && argument.is_some();
            let role = role::classify(b.kind, phase, training, op_name.as_deref());
            BufferUse {
                bytes: b.bytes,
                shape: instr
                    .shape
                    .subshape(&b.index)
                    .map_or_else(|| instr.shape.to_string(), |s| s.to_string()),
                instruction: module.instr_name(b.instruction).to_string(),
                stack,
                made_by_xla: false,
                op_name,
                phase,
                role,
                argument,
                parameter,
                layout_copy,
            }
        })
        .collect();
    let mut buffers = buffers;
    attribute_xla_made(module, model, &mut buffers);
    let source_hint = source_hint(module, frontend.name, &buffers);
    let live_peak = model.totals.live_peak_bytes;
    let phase = model
        .peak
        .instruction
        .and_then(|i| module.op_name(i))
        .map(|op| scope::phase(&op));
    PeakUsage {
        training,
        rematerialized,
        phase,
        by_source: by_source(&buffers, live_peak),
        by_role: role::groups(&buffers, live_peak),
        by_scope: by_scope(&buffers, live_peak),
        buffers,
        parameters,
        frontend,
        source_hint,
    }
}

/// What would give the report the user's lines where it has none:
/// torch_xla's debug flags, or (TensorFlow) nothing, which the hint says.
fn source_hint(
    module: &Module,
    frontend: crate::frontend::FrontendName,
    buffers: &[BufferUse],
) -> Option<source::SourceHint> {
    use crate::frontend::FrontendName;
    match frontend {
        FrontendName::PytorchXla => {
            let none = buffers.iter().all(|b| b.stack.is_empty())
                && module.stack_frames.frames.is_empty()
                && !module.text_contains("source_line=");
            none.then_some(source::SourceHint::PytorchXlaDebugOff)
        }
        FrontendName::Tensorflow => {
            let with_lines: Vec<&BufferUse> =
                buffers.iter().filter(|b| !b.stack.is_empty()).collect();
            if with_lines.is_empty() || with_lines.iter().any(|b| b.caller().is_some()) {
                return None;
            }
            // The line most of them point at (TensorFlow's ops.py).
            let mut counts: HashMap<String, usize> = HashMap::default();
            for b in &with_lines {
                if let Some(s) = b.source() {
                    *counts.entry(s.to_string()).or_default() += 1;
                }
            }
            let location = counts
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))?
                .0;
            Some(source::SourceHint::TensorflowOwnLine { location })
        }
        FrontendName::Jax | FrontendName::Unknown => None,
    }
}

impl GroupSize {
    /// Adds a buffer; the first one added of the largest size names the group.
    fn add(&mut self, b: &BufferUse) {
        self.bytes = self.bytes.saturating_add(b.bytes);
        self.buffers += 1;
        if self.buffers == 1 || b.bytes > self.largest_bytes {
            self.largest_bytes = b.bytes;
            self.shape = b.shape.clone();
            self.largest = b.instruction.clone();
        }
    }

    fn finish(&mut self, live_peak: u64) {
        self.share = if live_peak == 0 {
            0.0
        } else {
            self.bytes as f64 / live_peak as f64
        };
    }
}

/// Groups keyed by any key, in first-seen order, then sorted largest first
/// (ties keep first-seen order, so output is deterministic). Each group comes
/// with the index of its first buffer and of its largest (the one `size`
/// names).
fn group_by<K: std::hash::Hash + Eq + Clone>(
    buffers: &[BufferUse],
    key: impl Fn(&BufferUse) -> K,
    live_peak: u64,
) -> Vec<(K, GroupSize, usize, usize)> {
    let mut index: HashMap<K, usize> = HashMap::default();
    let mut groups: Vec<(K, GroupSize, usize, usize)> = Vec::new();
    for (i, b) in buffers.iter().enumerate() {
        let k = key(b);
        let g = *index.entry(k.clone()).or_insert_with(|| {
            groups.push((k, GroupSize::default(), i, i));
            groups.len() - 1
        });
        let group = &mut groups[g];
        if b.bytes > group.1.largest_bytes {
            group.3 = i; // the same test GroupSize::add uses to name its largest
        }
        group.1.add(b);
    }
    for g in &mut groups {
        g.1.finish(live_peak);
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.1.bytes));
    groups
}

fn by_source(buffers: &[BufferUse], live_peak: u64) -> Vec<SourceGroup> {
    let key = |b: &BufferUse| {
        (
            b.source().map(ToString::to_string),
            b.caller().map(ToString::to_string),
            b.argument.clone().filter(|_| b.stack.is_empty()),
            b.parameter.clone().filter(|_| b.stack.is_empty()),
            b.layout_copy && b.stack.is_empty(),
            b.made_by_xla,
        )
    };
    group_by(buffers, key, live_peak)
        .into_iter()
        .map(
            |(
                (source, caller, argument, parameter, layout_copy, made_by_xla),
                size,
                first,
                largest,
            )| {
                let b = &buffers[first];
                let mut group = SourceGroup {
                    argument,
                    parameter,
                    layout_copy,
                    place: String::new(),
                    made_by_xla,
                    function: b
                        .source()
                        .and_then(|l| l.function.as_deref().map(String::from)),
                    caller_function: b
                        .caller()
                        .and_then(|l| l.function.as_deref().map(String::from)),
                    op_name: buffers[largest].op_name.clone(),
                    source,
                    caller,
                    size,
                };
                group.place = group.place();
                group
            },
        )
        .collect()
}

fn by_scope(buffers: &[BufferUse], live_peak: u64) -> ScopeNode {
    // The tree is built flat (nodes by number, a child found by its parent's
    // number and its name), then nested: a scope with thousands of children
    // (one per argument of a step with 100,000 parameters) is not searched
    // child by child for every buffer.
    let mut nodes = vec![ScopeNode::new("(all)")];
    let mut children: Vec<Vec<usize>> = vec![Vec::new()];
    let mut index: HashMap<(usize, String), usize> = HashMap::default();
    for b in buffers {
        let mut node = 0;
        nodes[node].add(b);
        for name in b.scope_path() {
            node = *index
                .entry((node, name))
                .or_insert_with_key(|(parent, name)| {
                    nodes.push(ScopeNode::new(name));
                    children.push(Vec::new());
                    children[*parent].push(nodes.len() - 1);
                    nodes.len() - 1
                });
            nodes[node].add(b);
        }
    }
    let mut root = nest(&mut nodes, &children, 0);
    root.finish(live_peak);
    root
}

/// Node `i` of the flat tree, with its children (and theirs) moved into it.
fn nest(nodes: &mut [ScopeNode], children: &[Vec<usize>], i: usize) -> ScopeNode {
    let mut node = std::mem::replace(&mut nodes[i], ScopeNode::new(""));
    node.children = children[i]
        .iter()
        .map(|&c| nest(nodes, children, c))
        .collect();
    node
}

impl ScopeNode {
    fn new(name: &str) -> ScopeNode {
        ScopeNode {
            name: name.to_string(),
            size: GroupSize::default(),
            forward_bytes: 0,
            backward_bytes: 0,
            outside_bytes: 0,
            children: Vec::new(),
        }
    }

    fn add(&mut self, b: &BufferUse) {
        self.size.add(b);
        let phase_bytes = match b.phase {
            Phase::Forward => &mut self.forward_bytes,
            Phase::Backward => &mut self.backward_bytes,
            Phase::Outside => &mut self.outside_bytes,
        };
        *phase_bytes = phase_bytes.saturating_add(b.bytes);
    }

    fn finish(&mut self, live_peak: u64) {
        self.size.finish(live_peak);
        self.children
            .sort_by_key(|c| std::cmp::Reverse(c.size.bytes));
        for c in &mut self.children {
            c.finish(live_peak);
        }
    }
}

/// Where the forward pass's values live at the peak: the deepest scope
/// holding most of them, and how they spread over its children (the layers).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ActivationScope {
    /// `train_step/GPT`: scopes joined by `/`.
    pub path: String,
    /// Forward-pass bytes under it.
    pub bytes: u64,
    /// Its children holding the most forward bytes (at most four).
    pub largest_children: Vec<(String, u64)>,
    pub children: usize,
}

impl PeakUsage {
    /// The scope whose forward values dominate the peak, if any are live.
    pub fn activation_scope(&self) -> Option<ActivationScope> {
        let mut node = &self.by_scope;
        let mut path: Vec<&str> = Vec::new();
        if node.forward_bytes == 0 {
            return None;
        }
        // Go down while one child holds more than half of the forward bytes.
        while let Some(child) = node
            .children
            .iter()
            .max_by_key(|c| c.forward_bytes)
            .filter(|c| c.forward_bytes * 2 > node.forward_bytes)
        {
            path.push(&child.name);
            node = child;
        }
        // Scopes, not the ops themselves (`dot_general`): what a person wraps
        // in jax.checkpoint is a block.
        let mut children: Vec<&ScopeNode> = node
            .children
            .iter()
            .filter(|c| c.forward_bytes * 100 >= node.forward_bytes && !c.children.is_empty())
            .collect();
        children.sort_by_key(|c| std::cmp::Reverse(c.forward_bytes));
        Some(ActivationScope {
            path: path.join("/"),
            bytes: node.forward_bytes,
            largest_children: children
                .iter()
                .take(4)
                .map(|c| (c.name.clone(), c.forward_bytes))
                .collect(),
            children: children.len(),
        })
    }
}

#[cfg(test)]
mod tests_frontends;
