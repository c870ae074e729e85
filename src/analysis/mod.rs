//! Memory accounting from the HLO text alone, following XLA's buffer assignment:
//! `schedule` (call graph, flattened order) → `dataflow` (values, buffers) →
//! `liveness` (live ranges) → `assign` (allocations, with `heap` packing the
//! temporaries) → the numbers XLA reports (notes §4).

pub mod assign;
pub mod dataflow;
pub mod graph;
pub mod heap;
pub mod interference;
pub mod lists;
pub mod liveness;
pub mod phi;
pub mod post_order;
pub mod schedule;
pub mod sharing;
pub mod verify;
pub mod whatif;

use self::assign::{AllocationKind, Assignment, Packing};
// Fx, not SipHash: keys are ids, and these maps are on the hot path.
use rustc_hash::FxHashMap as HashMap;

use self::dataflow::{BufferId, Dataflow, ValueId};
use self::graph::ModuleGraph;
use self::liveness::LiveRange;
use self::schedule::Schedule;
use crate::chip::Target;
use crate::hlo::{InstrId, IoAlias, Module, Opcode};

/// Everything the accounting found for one module.
pub struct MemoryModel {
    /// The backend whose rules were applied.
    pub target: Target,
    pub schedule: Schedule,
    pub dataflow: Dataflow,
    pub ranges: Vec<Option<LiveRange>>,
    pub assignment: Assignment,
    pub totals: Totals,
    pub peak: Peak,
}

/// XLA's figures: `compiled.memory_analysis()` and the buffer assignment's
/// "Total bytes used".
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, schemars::JsonSchema)]
pub struct Totals {
    /// Entry parameters' allocations (`argument_size_in_bytes`).
    pub argument_bytes: u64,
    /// Allocations that may be returned, donated parameters included (`output_size_in_bytes`).
    pub output_bytes: u64,
    /// Donated parameters' allocations, counted in both of the above (`alias_size_in_bytes`).
    pub alias_bytes: u64,
    /// The preallocated temporary block in device memory (`temp_size_in_bytes`
    /// on CPU and GPU; on TPU the HBM block, the on-chip ones being in `by_space`).
    pub temp_bytes: u64,
    /// Every allocation, constants and reducer scratch included ("Total bytes used").
    pub total_bytes: u64,
    /// Most bytes of device memory (the default space) live at one moment,
    /// each buffer counted once.
    pub live_peak_bytes: u64,
    /// The default memory space's allocations: what must fit in the device's
    /// memory (HBM on TPU, GPU memory, RAM on CPU). Equals `total_bytes` off TPU.
    pub device_bytes: u64,
    /// The allocations of each memory space ("color"), default (device
    /// memory) first. On TPU, what must fit in HBM is the default space.
    pub by_space: Vec<SpaceBytes>,
    /// `false` when a space whose placement XLA decides outside the buffer
    /// assignment (TPU VMEM and the other on-chip spaces, placed by memory-space
    /// assignment) adds to `total_bytes`: that total is then hlomem's estimate.
    pub total_exact: bool,
    /// Why device memory (and so the total) is hlomem's estimate, when it is:
    /// the default space's `exact` is then `false`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_estimates: Vec<DeviceEstimate>,
}

/// What hlomem cannot know about a module's device memory from its text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DeviceEstimate {
    /// A TPU module whose chip nobody named holds a tuple table in HBM, whose
    /// size is the chip's (512 bytes on v4 and v5e, 32 on v5p and v6e): the
    /// figures are those of the `assumed` chips, and `other_figures` those of
    /// the `other` chips.
    ChipAssumed {
        assumed: Vec<crate::chip::TpuVersion>,
        other: Vec<crate::chip::TpuVersion>,
        other_figures: ChipFigures,
    },
    /// A TPU module whose libtpu nobody named and whose text and dump do not
    /// show it comes out with other figures
    /// under libtpu 0.0.52's rules than under 0.0.42's: the figures are
    /// `assumed`'s, and `other_figures` those under `other`'s rules.
    LibtpuAssumed {
        assumed: String,
        other: String,
        other_figures: ChipFigures,
    },
    /// The HBM heap's size depends on the order libtpu packs it in: start
    /// order, or (when HBM's total passes the chip's limit less 2.5 GiB) the
    /// smaller of biggest-first and longest-first, and the total is too near
    /// where that limit may be (or the chip is not named). Each order's size,
    /// the first reported.
    PackingOrder(heap::OrderSizes),
    /// An `async-update` hands its async operation operands, or has another
    /// shape than the operation it updates: libtpu 0.0.52's SparseCore
    /// gather/scatter offloads, whose `async-start` takes no operands. XLA's
    /// open source defines an update as its operand passed on; where libtpu
    /// places the operands, the wrapped computation's values and the
    /// offload's scratch buffers, and when they are live, is its own and not
    /// hlomem's: device memory, temp and the live peak are about. The
    /// updates, by name.
    OperandsAtUpdate { updates: Vec<String> },
    /// The HBM temporary block joins pieces (the heap, temporary tuple
    /// tables) that end in different padding, in an order the text does not
    /// tell (newer libtpu: [`crate::chip::Target::temp_piece_order_known`]):
    /// that order alone moves its size between the two (the one reported
    /// being XLA's own order's). Not a bound on XLA's figure: on a v5p KV-cache
    /// decode step libtpu 0.0.52 also moved a value into another allocation,
    /// and its temp block was 65,600 bytes below both.
    PieceOrder(assign::PieceOrder),
}

/// The figures under another assumption (another TPU chip, another libtpu),
/// and how to say which: "2,103,296 B on v4 and v5e", "... with libtpu 0.0.42".
pub struct Alternative<'a> {
    /// The assumption the module's own figures were made under, in words.
    pub assumed: String,
    /// The other one, in words.
    pub other: String,
    pub other_figures: &'a ChipFigures,
    /// What names the truth (`--tpu sets it`).
    pub hint: &'static str,
}

/// The figures that depend on a TPU chip or libtpu release, as another would make them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct ChipFigures {
    pub argument_bytes: u64,
    pub output_bytes: u64,
    pub alias_bytes: u64,
    pub temp_bytes: u64,
    pub device_bytes: u64,
    pub total_bytes: u64,
    pub live_peak_bytes: u64,
}

impl Totals {
    /// Whether the figure `of` reads would be another on the other chips or
    /// under the other libtpu (either being assumed): then it is "about".
    pub fn depends_on_chip(&self, of: fn(&ChipFigures) -> u64) -> bool {
        !self
            .alternatives_for(of, crate::chip::Interface::Cli)
            .is_empty()
    }

    /// Whether the temp block's figure is XLA's to the byte: no assumption
    /// changes it and no estimate leaves its packing or contents unknown.
    pub fn temp_exact(&self) -> bool {
        self.exact_unless(|f| f.temp_bytes, DeviceEstimate::temp_is_about)
    }

    /// Whether the live peak is XLA's to the byte (as [`Self::temp_exact`]).
    pub fn live_peak_exact(&self) -> bool {
        self.exact_unless(|f| f.live_peak_bytes, DeviceEstimate::live_peak_is_about)
    }

    /// The figure `of` reads is exact unless an assumption changes it or an
    /// estimate makes it `about`.
    fn exact_unless(
        &self,
        of: fn(&ChipFigures) -> u64,
        about: fn(&DeviceEstimate) -> bool,
    ) -> bool {
        !self.depends_on_chip(of) && !self.device_estimates.iter().any(about)
    }

    /// Every assumption the figure `of` reads depends on, with the figure
    /// under the other one (`interface` names the settings).
    pub fn alternatives_for(
        &self,
        of: fn(&ChipFigures) -> u64,
        interface: crate::chip::Interface,
    ) -> Vec<Alternative<'_>> {
        let own = of(&self.figures());
        self.device_estimates
            .iter()
            .filter_map(|e| e.alternative(interface))
            .filter(|a| of(a.other_figures) != own)
            .collect()
    }

    /// The figures that depend on the chip, as this module's.
    pub fn figures(&self) -> ChipFigures {
        ChipFigures {
            argument_bytes: self.argument_bytes,
            output_bytes: self.output_bytes,
            alias_bytes: self.alias_bytes,
            temp_bytes: self.temp_bytes,
            device_bytes: self.device_bytes,
            total_bytes: self.total_bytes,
            live_peak_bytes: self.live_peak_bytes,
        }
    }

    /// When the chip is assumed: the assumed chips, the other chips, and
    /// their figures.
    pub fn chip_alternative(
        &self,
    ) -> Option<(
        &[crate::chip::TpuVersion],
        &[crate::chip::TpuVersion],
        &ChipFigures,
    )> {
        self.device_estimates.iter().find_map(|e| match e {
            DeviceEstimate::ChipAssumed {
                assumed,
                other,
                other_figures,
            } => Some((assumed.as_slice(), other.as_slice(), other_figures)),
            DeviceEstimate::LibtpuAssumed { .. }
            | DeviceEstimate::PackingOrder(_)
            | DeviceEstimate::OperandsAtUpdate { .. }
            | DeviceEstimate::PieceOrder(_) => None,
        })
    }
}

impl DeviceEstimate {
    /// The figures under the other assumption, when this estimate is one.
    pub fn alternative(&self, interface: crate::chip::Interface) -> Option<Alternative<'_>> {
        use crate::chip::chips_in_words;
        match self {
            DeviceEstimate::ChipAssumed {
                assumed,
                other,
                other_figures,
            } => Some(Alternative {
                assumed: format!("on {}", chips_in_words(assumed)),
                other: format!("on {}", chips_in_words(other)),
                other_figures,
                hint: interface.chip_hint(),
            }),
            DeviceEstimate::LibtpuAssumed {
                assumed,
                other,
                other_figures,
            } => Some(Alternative {
                assumed: format!("with libtpu {assumed}"),
                other: format!("with {other}"),
                other_figures,
                hint: interface.libtpu_hint(),
            }),
            DeviceEstimate::PackingOrder(_)
            | DeviceEstimate::PieceOrder(_)
            | DeviceEstimate::OperandsAtUpdate { .. } => None,
        }
    }

    /// Why, in words, for every renderer; the setting named is `interface`'s.
    pub fn describe(&self, interface: crate::chip::Interface) -> String {
        use crate::chip::chips_in_words;
        use crate::units::human_bytes;
        match self {
            DeviceEstimate::ChipAssumed {
                assumed,
                other,
                other_figures,
            } => format!(
                "the TPU chip is assumed to be {} (tuple tables differ by chip); on {} device \
                 memory is {}; {}",
                chips_in_words(assumed).replace(" and ", " or "),
                chips_in_words(other),
                crate::units::exact_bytes(other_figures.device_bytes),
                interface.chip_hint()
            ),
            DeviceEstimate::LibtpuAssumed {
                assumed,
                other,
                other_figures,
            } => format!(
                "which libtpu compiled it is not known (hlomem knows 0.0.42's and 0.0.52's \
                 rules; a text shows its release in how it writes backend configs, a dump folder \
                 in its flag file, and this one does neither): libtpu {assumed}'s were used; \
                 under {other}'s device memory is {}; {}",
                crate::units::exact_bytes(other_figures.device_bytes),
                interface.libtpu_hint()
            ),
            DeviceEstimate::PackingOrder(s) => format!(
                "libtpu packs HBM again, biggest- or longest-first, when its total passes \
                 the chip's limit less 2.50GiB, and this total is too near where that may be \
                 (or the chip is not named: --tpu names it) to tell: its temporaries take {} \
                 packed in definition order (shown), {} biggest-first, {} longest-first",
                human_bytes(s.definition),
                human_bytes(s.biggest_first),
                human_bytes(s.longest_first)
            ),
            DeviceEstimate::OperandsAtUpdate { updates } => format!(
                "an async-update hands its async operation operands ({}), libtpu's form of \
                 a SparseCore offload, whose buffers libtpu places by rules hlomem does not know",
                updates_in_words(updates)
            ),
            DeviceEstimate::PieceOrder(o) => format!(
                "this libtpu (newer than 0.0.42) joins the temporary block's pieces (the heap \
                 and tuple tables, each padded to the next {} slot) in an order hlomem does not \
                 know, which alone moves the block between {} and {}; its other rules for this \
                 block are not all known either, so XLA's figure may lie outside",
                human_bytes(o.alignment),
                crate::units::exact_bytes(o.smallest),
                crate::units::exact_bytes(o.largest)
            ),
        }
    }

    /// Whether the temp block is about too, not only device memory: its
    /// packing, or what it holds, is unknown.
    pub fn temp_is_about(&self) -> bool {
        matches!(
            self,
            DeviceEstimate::PackingOrder(_)
                | DeviceEstimate::PieceOrder(_)
                | DeviceEstimate::OperandsAtUpdate { .. }
        )
    }

    /// Whether the live peak is about: which buffers are live when is
    /// unknown (a packing order leaves it exact).
    pub fn live_peak_is_about(&self) -> bool {
        matches!(self, DeviceEstimate::OperandsAtUpdate { .. })
    }
}

/// One memory space's share of the allocations.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct SpaceBytes {
    pub color: u64,
    /// As XLA's memory-usage report names it (`default`, `vmem`, `smem`, ...).
    pub name: String,
    pub bytes: u64,
    /// XLA's own number (`true`), or hlomem's packing of the same buffers.
    pub exact: bool,
}

/// The moment of the live peak and what is live then.
#[derive(Debug, Clone, Default)]
pub struct Peak {
    /// Logical time in the flattened schedule.
    pub time: u32,
    /// The instruction scheduled at that time.
    pub instruction: Option<InstrId>,
    /// Buffers live at the peak, largest first.
    pub buffers: Vec<PeakBuffer>,
    /// Bytes in use at each logical time, by kind (indexed by `BufferKind as usize`).
    pub timeline: Vec<[u64; 4]>,
}

#[derive(Debug, Clone)]
pub struct PeakBuffer {
    pub buffer: BufferId,
    /// The instruction that defines the buffer's first value.
    pub instruction: InstrId,
    pub index: Vec<u64>,
    pub bytes: u64,
    pub kind: BufferKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum BufferKind {
    Parameter = 0,
    Output = 1,
    Temp = 2,
    Constant = 3,
}

impl BufferKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BufferKind::Parameter => "parameter",
            BufferKind::Output => "output",
            BufferKind::Temp => "temp",
            BufferKind::Constant => "constant",
        }
    }
}

/// The accounting of `module` compiled for `target`.
pub fn analyze(module: &Module, target: &Target) -> MemoryModel {
    analyze_with_aliases(module, target, &module.header.input_output_alias)
}

/// The accounting as if the entry's input/output aliasing were `aliases`:
/// what donating (or not donating) parameters would change (a what-if).
pub fn analyze_with_aliases(module: &Module, target: &Target, aliases: &[IoAlias]) -> MemoryModel {
    let mut model = model_of(module, target, aliases);
    let assumed = target.tpu_version.filter(|_| target.chip_assumed());
    if let Some(assumed) =
        assumed.filter(|_| holds_tuple_table(module, &model.dataflow, &model.assignment))
    {
        // A tuple table's size is the chip's, and the text does not name the
        // chip: every figure is the assumed chip's, and the other chips' are
        // worked out too, so that the words can give both.
        let other = assumed.other_tuple_tables();
        if let Some(&stand_in) = other.first() {
            let as_other = target
                .clone()
                .with_tpu_version(Some((stand_in, crate::chip::ChipSource::Assumed)));
            let other_figures = model_of(module, &as_other, aliases).totals.figures();
            model.totals.device_estimates.insert(
                0,
                DeviceEstimate::ChipAssumed {
                    assumed: assumed.same_tuple_tables(),
                    other,
                    other_figures,
                },
            );
            mark_device_estimated(&mut model.totals);
        }
    }
    if target.libtpu_assumed() {
        // libtpu 0.0.42 and 0.0.52 may pack the same text differently, and
        // nothing says which compiled it: where their figures differ, both
        // are given.
        let other_figures = model_of(module, &target.as_other_libtpu(), aliases)
            .totals
            .figures();
        if other_figures != model.totals.figures() {
            let release = crate::chip::libtpu_release;
            model.totals.device_estimates.insert(
                0,
                DeviceEstimate::LibtpuAssumed {
                    assumed: release(target.newer_libtpu).to_string(),
                    other: release(!target.newer_libtpu).to_string(),
                    other_figures,
                },
            );
            mark_device_estimated(&mut model.totals);
        }
    }
    model
}

/// The default space and the total are hlomem's estimate once anything in
/// `device_estimates` says why.
fn mark_device_estimated(totals: &mut Totals) {
    if !totals.device_estimates.is_empty() {
        for space in totals.by_space.iter_mut().filter(|s| s.color == 0) {
            space.exact = false;
        }
        totals.total_exact = false;
    }
}

/// [`analyze_with_aliases`] for one chip, the chip's own doubts aside.
fn model_of(module: &Module, target: &Target, aliases: &[IoAlias]) -> MemoryModel {
    let (schedule, dataflow, ranges, assignment) = account(module, target, aliases);
    let mut totals = totals_of(&assignment, target);
    if let (Some(sizes), Packing::Undecided) = (assignment.heap.order_sizes, assignment.packing) {
        totals
            .device_estimates
            .push(DeviceEstimate::PackingOrder(sizes));
    }
    let updates = updates_with_operands(module);
    if !updates.is_empty() {
        totals
            .device_estimates
            .push(DeviceEstimate::OperandsAtUpdate { updates });
    }
    // Device memory's block only: the other spaces are estimates already.
    if let Some(&order) = assignment.piece_orders.iter().find(|o| o.color == 0) {
        totals
            .device_estimates
            .push(DeviceEstimate::PieceOrder(order));
    }
    mark_device_estimated(&mut totals);
    let peak = live_peak(module, &schedule, &dataflow, &ranges, &assignment);
    totals.live_peak_bytes = peak
        .timeline
        .get(peak.time as usize)
        .map_or(0, |k| k.iter().copied().fold(0u64, u64::saturating_add));
    MemoryModel {
        target: target.clone(),
        schedule,
        dataflow,
        ranges,
        assignment,
        totals,
        peak,
    }
}

/// [`analyze_with_aliases`]'s total, without the live peak and the tables a
/// report reads: the one number HM001's what-ifs ask for.
pub fn total_bytes_with_aliases(module: &Module, target: &Target, aliases: &[IoAlias]) -> u64 {
    let (.., assignment) = account(module, target, aliases);
    totals_of(&assignment, target).total_bytes
}

/// Dataflow, live ranges and buffer assignment, in that order.
fn account(
    module: &Module,
    target: &Target,
    aliases: &[IoAlias],
) -> (Schedule, Dataflow, Vec<Option<LiveRange>>, Assignment) {
    let graph = ModuleGraph::build(module);
    let schedule = Schedule::build(module, &graph);
    let dataflow = Dataflow::build(module, &graph, aliases, target);
    let ranges = liveness::live_ranges(module, aliases, &dataflow, &schedule, target);
    // The buffer assignment is one core's work until the heap simulation;
    // the fusion body lines the simulation will read are read meanwhile.
    let (assignment, ()) = rayon::join(
        || {
            assign::assign(
                module, aliases, &graph, &dataflow, &ranges, &schedule, target,
            )
        },
        || sharing::read_sharing_queries(target, module, &dataflow, &ranges),
    );
    (schedule, dataflow, ranges, assignment)
}

/// `%a`, `%a and %b`, or the first two and how many more.
fn updates_in_words(updates: &[String]) -> String {
    let named: Vec<String> = updates.iter().take(2).map(|u| format!("%{u}")).collect();
    match updates.len() {
        0..=2 => named.join(" and "),
        n => format!("{} and {} more async-updates", named.join(", "), n - 2),
    }
}

/// The `async-update`s that are not XLA's (an update passes its one operand
/// on, same shape): their names, in text order.
fn updates_with_operands(module: &Module) -> Vec<String> {
    module
        .instrs()
        .filter(|(_, instr)| instr.opcode == Opcode::AsyncUpdate)
        .filter(|(_, instr)| match instr.operands.as_ref() {
            [only] => module.instr(*only).shape != instr.shape,
            _ => true,
        })
        .map(|(id, _)| module.instr_name(id).to_string())
        .collect()
}

/// Whether device memory (color 0) holds a tuple's index table: the one
/// size that depends on which TPU chip compiled the module.
fn holds_tuple_table(module: &Module, dataflow: &Dataflow, assignment: &Assignment) -> bool {
    assignment
        .allocations
        .iter()
        .filter(|a| a.color == 0)
        .flat_map(|a| &a.buffers)
        .flat_map(|&b| &dataflow.buffers[b.index()].values)
        .any(|&v| dataflow.is_tuple(module, v))
}

/// The allocations' bytes, by kind and by memory space (the live peak aside).
fn totals_of(assignment: &Assignment, target: &Target) -> Totals {
    let mut totals = Totals {
        by_space: vec![SpaceBytes {
            color: 0,
            name: target.space_name(0),
            bytes: 0,
            exact: target.space_is_exact(0),
        }],
        ..Totals::default()
    };
    for a in &assignment.allocations {
        totals.total_bytes = totals.total_bytes.saturating_add(a.size);
        match totals.by_space.iter_mut().find(|s| s.color == a.color) {
            Some(space) => space.bytes = space.bytes.saturating_add(a.size),
            None => totals.by_space.push(SpaceBytes {
                color: a.color,
                name: target.space_name(a.color),
                bytes: a.size,
                exact: target.space_is_exact(a.color),
            }),
        }
        match a.kind {
            AllocationKind::Parameter { aliased, .. } => {
                totals.argument_bytes = totals.argument_bytes.saturating_add(a.size);
                if aliased {
                    totals.alias_bytes = totals.alias_bytes.saturating_add(a.size);
                }
            }
            // Device memory's block: TPU's on-chip blocks are listed by space.
            AllocationKind::Temp if a.color == 0 => {
                totals.temp_bytes = totals.temp_bytes.saturating_add(a.size)
            }
            _ => {}
        }
        if a.maybe_live_out {
            totals.output_bytes = totals.output_bytes.saturating_add(a.size);
        }
    }
    totals.by_space.sort_by_key(|s| s.color);
    totals.device_bytes = totals.by_space.first().map_or(0, |s| s.bytes);
    totals.total_exact = totals.by_space.iter().all(|s| s.exact || s.bytes == 0);
    totals
}

/// The moment the most device memory (the default space: HBM on TPU) is in
/// use, and what occupies it.
///
/// A value is live over its inclusive live range, except that a value whose
/// memory another value takes over at the instant it dies (an operand reused in
/// place, a buffer's next value) stops one step earlier: the two share bytes,
/// so the moment is counted once. The sum is therefore never above XLA's total.
fn live_peak(
    module: &Module,
    schedule: &Schedule,
    dataflow: &Dataflow,
    ranges: &[Option<LiveRange>],
    assignment: &Assignment,
) -> Peak {
    // Each value's (allocation, offset, size), once: both passes below read it.
    let chunks: Vec<Option<(usize, u64, u64)>> = (0..dataflow.values.len())
        .map(|i| {
            let value = &dataflow.values[i];
            let a = assignment.allocation_of[value.buffer.index()]?;
            // Device memory only: TPU's on-chip spaces are not what runs out.
            if assignment.allocations[a].color != 0 {
                return None;
            }
            let offset = match assignment
                .heap
                .chunks
                .binary_search_by_key(&ValueId(i as u32), |(id, _)| *id)
            {
                Ok(k) => assignment.heap.chunks[k].1.offset,
                // Temp tuple tables sit outside the heap: give each its own place,
                // far enough apart that no two overlap (a TPU table is 512 bytes,
                // a CPU one 8 bytes an element), whatever the buffer numbering.
                Err(_) if assignment.allocations[a].kind == AllocationKind::Temp => {
                    u64::MAX / 2 + (value.buffer.0 as u64) * (1 << 31)
                }
                Err(_) => 0,
            };
            Some((a, offset, value.size))
        })
        .collect();
    let mut starts: HashMap<(usize, u32), Vec<(u64, u64)>> = HashMap::default();
    for (r, chunk) in ranges.iter().zip(&chunks) {
        if let (Some(r), Some((a, offset, size))) = (r, chunk) {
            starts
                .entry((*a, r.start))
                .or_default()
                .push((*offset, *size));
        }
    }
    // Whether a buffer holds a constant, once per buffer (a buffer may hold
    // thousands of values).
    let holds_constant: Vec<bool> = dataflow
        .buffers
        .iter()
        .map(|buffer| {
            buffer
                .values
                .iter()
                .any(|v| module.instr(dataflow.values[v.index()].instr).opcode == Opcode::Constant)
        })
        .collect();
    // What a value holds: a donated parameter's buffer may already hold the
    // output that replaces it.
    let kind_of = |v: ValueId| {
        let value = &dataflow.values[v.index()];
        let def = module.instr(value.instr);
        if def.opcode == Opcode::Parameter && def.computation == module.entry {
            BufferKind::Parameter
        } else if assignment.live_out[value.buffer.index()] {
            BufferKind::Output
        } else if holds_constant[value.buffer.index()] {
            BufferKind::Constant
        } else {
            BufferKind::Temp
        }
    };
    let n = schedule.len() as usize + 2;
    let mut delta = vec![[0i128; 4]; n + 1];
    let mut occupancy: Vec<Option<LiveRange>> = vec![None; ranges.len()];
    for (i, (r, chunk)) in ranges.iter().zip(&chunks).enumerate() {
        let (Some(r), &Some((a, offset, size))) = (r, chunk) else {
            continue;
        };
        let taken_over = r.end > r.start
            && starts.get(&(a, r.end)).is_some_and(|others| {
                others.iter().any(|&(o, s)| {
                    o < offset.saturating_add(size)
                        && offset < o.saturating_add(s)
                        && !(o == offset && r.start == r.end)
                })
            });
        let end = if taken_over { r.end - 1 } else { r.end };
        occupancy[i] = Some(LiveRange {
            start: r.start,
            end,
        });
        let k = kind_of(ValueId(i as u32)) as usize;
        delta[r.start as usize][k] += i128::from(size);
        delta[(end as usize + 1).min(n)][k] -= i128::from(size);
    }
    let mut timeline = Vec::with_capacity(schedule.len() as usize);
    let (mut best_time, mut best) = (0usize, i128::MIN);
    let mut running = [0i128; 4];
    for (t, d) in delta.iter().enumerate().take(n) {
        for k in 0..4 {
            running[k] += d[k];
        }
        let total: i128 = running.iter().sum();
        if total > best {
            best = total;
            best_time = t;
        }
        if t < schedule.len() as usize {
            timeline.push(running.map(|b| u64::try_from(b).unwrap_or(0)));
        }
    }
    let t = best_time as u32;
    let mut live: HashMap<BufferId, (ValueId, u64)> = HashMap::default();
    for (i, r) in occupancy.iter().enumerate() {
        if r.is_some_and(|r| r.start <= t && t <= r.end) {
            let v = ValueId(i as u32);
            let value = &dataflow.values[i];
            let entry = live.entry(value.buffer).or_insert((v, 0));
            if value.size >= entry.1 {
                *entry = (v, value.size);
            }
        }
    }
    let mut buffers: Vec<PeakBuffer> = live
        .into_iter()
        .map(|(b, (v, bytes))| {
            let value = &dataflow.values[v.index()];
            let kind = kind_of(v);
            PeakBuffer {
                buffer: b,
                instruction: value.instr,
                index: value.index.clone(),
                bytes,
                kind,
            }
        })
        .collect();
    buffers.sort_by_key(|p| (std::cmp::Reverse(p.bytes), p.buffer));
    Peak {
        time: t,
        instruction: schedule.order.get(best_time).copied(),
        buffers,
        timeline,
    }
}

#[cfg(test)]
mod tests;
