//! `analyze --verify`: compares hlomem's accounting with what XLA itself wrote
//! beside the HLO, and lists every number where the two disagree. A
//! disagreement means XLA's rules differ from hlomem's (a new XLA version, or a
//! rule not yet understood); hlomem's own numbers never come from these files.
//! The result is data (`difference.rs`); `report::verification` words it.

mod allocations;
mod difference;
mod ranges;

use std::collections::HashMap;
use std::path::PathBuf;

pub use difference::*;

use super::dataflow::ValueId;
use super::MemoryModel;
use crate::hlo::Module;
use crate::xla_report::XlaReports;

/// What `--verify` found for one module.
#[derive(Debug)]
pub struct Verification {
    /// XLA's report files that were read.
    pub files: Vec<PathBuf>,
    /// How many numbers were compared.
    pub checked: usize,
    pub differences: Vec<Difference>,
    pub notes: Vec<Note>,
}

impl Verification {
    /// One number or fact compared: a difference unless `ours == theirs`.
    fn compare(&mut self, compared: Compared, ours: Found, theirs: Found) {
        self.checked += 1;
        if ours != theirs {
            self.disagree(compared, ours, theirs);
        }
    }

    fn disagree(&mut self, compared: Compared, hlomem: Found, xla: Found) {
        self.differences.push(Difference {
            compared,
            hlomem,
            xla,
        });
    }
}

pub fn verify(module: &Module, model: &MemoryModel, xla: &XlaReports) -> Verification {
    let mut v = Verification {
        files: xla.files.clone(),
        checked: 0,
        differences: Vec::new(),
        notes: Vec::new(),
    };
    let check = |compared: Compared, ours: u64, theirs: Option<u64>, v: &mut Verification| {
        if let Some(theirs) = theirs {
            v.compare(compared, Found::Number(ours), Found::Number(theirs));
        }
    };
    let t = &model.totals;
    // Spaces XLA places before the buffer assignment (TPU VMEM...) are
    // hlomem's estimates: compared, but as notes.
    let exact = |color: u64| model.target.space_is_exact(color);
    if t.total_exact {
        check(
            Compared::TotalBytes,
            t.total_bytes,
            xla.total_bytes_used,
            &mut v,
        );
    }
    if !xla.allocations.is_empty() {
        let mut colors: Vec<u64> = xla.allocations.iter().map(|a| a.color).collect();
        colors.extend(t.by_space.iter().map(|s| s.color));
        colors.sort_unstable();
        colors.dedup();
        for color in colors {
            let theirs: u64 = xla
                .allocations
                .iter()
                .filter(|a| a.color == color)
                .map(|a| a.size)
                .sum();
            let ours = t
                .by_space
                .iter()
                .find(|s| s.color == color)
                .map_or(0, |s| s.bytes);
            let name = model.target.space_name(color);
            if exact(color) {
                let space = name.to_string();
                check(
                    Compared::SpaceBytes { space, color },
                    ours,
                    Some(theirs),
                    &mut v,
                );
            } else if ours != theirs {
                v.notes.push(Note::Estimated {
                    space: name.to_string(),
                    color,
                    hlomem: ours,
                    xla: theirs,
                });
            }
        }
    }
    let xla_allocations: Vec<&crate::xla_report::XlaAllocation> =
        xla.allocations.iter().filter(|a| exact(a.color)).collect();
    let our_temp: u64 = model
        .assignment
        .allocations
        .iter()
        .filter(|a| a.kind == super::assign::AllocationKind::Temp && exact(a.color))
        .map(|a| a.size)
        .sum();
    if !xla_allocations.is_empty() {
        let sum = |f: &dyn Fn(&crate::xla_report::XlaAllocation) -> bool| {
            Some(
                xla_allocations
                    .iter()
                    .filter(|a| f(a))
                    .map(|a| a.size)
                    .sum::<u64>(),
            )
        };
        check(
            Compared::ArgumentBytes,
            t.argument_bytes,
            sum(&|a| a.is_parameter()),
            &mut v,
        );
        check(
            Compared::OutputBytes,
            t.output_bytes,
            sum(&|a| a.maybe_live_out),
            &mut v,
        );
        check(
            Compared::AliasBytes,
            t.alias_bytes,
            sum(&|a| a.is_parameter() && a.maybe_live_out),
            &mut v,
        );
        check(
            Compared::TempBytes,
            our_temp,
            sum(&|a| a.preallocated_temp),
            &mut v,
        );
    }
    compare_total(model, xla, &mut v);
    let ours = value_index(module, model);
    if !xla.allocations.is_empty() {
        allocations::compare(module, model, xla, &ours, &mut v);
    }
    compare_used_values(module, model, xla, &ours, &mut v);
    if let Some(lr) = &xla.live_ranges {
        ranges::compare(module, model, lr, &ours, &mut v);
    }
    v
}

/// "Total bytes used" is the sum of XLA's allocations; where hlomem's total
/// is an estimate (TPU's on-chip spaces), the part outside those spaces is
/// still exact and compared.
fn compare_total(model: &MemoryModel, xla: &XlaReports, v: &mut Verification) {
    let Some(total) = xla.total_bytes_used else {
        return;
    };
    if !xla.allocations.is_empty() {
        let sum: u64 = xla.allocations.iter().map(|a| a.size).sum();
        v.compare(
            Compared::ReportedTotal,
            Found::Number(sum),
            Found::Number(total),
        );
    }
    if model.totals.total_exact || xla.allocations.is_empty() {
        return;
    }
    let exact = |color: u64| model.target.space_is_exact(color);
    let estimated: u64 = xla
        .allocations
        .iter()
        .filter(|a| !exact(a.color))
        .map(|a| a.size)
        .sum();
    let ours: u64 = model
        .totals
        .by_space
        .iter()
        .filter(|s| exact(s.color))
        .map(|s| s.bytes)
        .sum();
    v.compare(
        Compared::TotalOutsideEstimates,
        Found::Number(ours),
        Found::Number(total.saturating_sub(estimated)),
    );
}

/// The values under `Used values:` are the buffer-assignment report's, id for
/// id, and each appears where the module puts it (its positions).
fn compare_used_values(
    module: &Module,
    model: &MemoryModel,
    xla: &XlaReports,
    ours: &HashMap<(String, Vec<u64>), ValueId>,
    v: &mut Verification,
) {
    if xla.used_values.is_empty() {
        return;
    }
    let placed: HashMap<u64, (&str, &[u64])> = xla
        .allocations
        .iter()
        .flat_map(|a| &a.values)
        .map(|value| (value.id, (value.name.as_str(), value.index.as_slice())))
        .collect();
    let synthetic = module.instrs().any(|(_, i)| i.synthetic);
    let mut nodes = NodeIndexes::default();
    let mut differing = Vec::new();
    for used in &xla.used_values {
        v.checked += 1;
        if !xla.allocations.is_empty()
            && placed.get(&used.id) != Some(&(used.name.as_str(), used.index.as_slice()))
        {
            differing.push(UsedValueDifference::NotInAllocations {
                id: used.id,
                value: ValueName::new(&used.name, &used.index),
            });
            continue;
        }
        // Positions through compact `%t#i` operands are get-tuple-elements
        // the text leaves out (see the live ranges' note).
        let Some(&id) = ours
            .get(&(used.name.clone(), used.index.clone()))
            .filter(|_| !synthetic)
        else {
            continue;
        };
        let mut mine: Vec<(String, Vec<u64>)> = model
            .dataflow
            .positions(id)
            .iter()
            .map(|&(instr, node)| {
                (
                    module.instr_name(instr).to_string(),
                    nodes.index(module, instr, node),
                )
            })
            .collect();
        let mut theirs = used.positions.clone();
        mine.sort();
        theirs.sort();
        if mine != theirs {
            let names =
                |p: &[(String, Vec<u64>)]| p.iter().map(|(n, i)| ValueName::new(n, i)).collect();
            differing.push(UsedValueDifference::Positions {
                value: ValueName::new(&used.name, &used.index),
                xla: names(&theirs),
                hlomem: names(&mine),
            });
        }
    }
    if !differing.is_empty() {
        v.disagree(
            Compared::UsedValues {
                differing: differing.len(),
            },
            Found::SeeXla,
            Found::UsedValues(differing),
        );
    }
}

/// The shape index of each node of an instruction's shape, computed once per
/// instruction.
#[derive(Default)]
struct NodeIndexes(HashMap<crate::hlo::InstrId, Vec<Vec<u64>>>);

impl NodeIndexes {
    fn index(&mut self, module: &Module, instr: crate::hlo::InstrId, node: u32) -> Vec<u64> {
        let indexes = self.0.entry(instr).or_insert_with(|| {
            module
                .instr(instr)
                .shape
                .nodes()
                .into_iter()
                .map(|(i, _)| i)
                .collect()
        });
        indexes.get(node as usize).cloned().unwrap_or_default()
    }
}

/// Our value for XLA's `name{index}` (the defining instruction and shape index).
fn value_index(module: &Module, model: &MemoryModel) -> HashMap<(String, Vec<u64>), ValueId> {
    model
        .dataflow
        .values
        .iter()
        .enumerate()
        .filter(|(_, value)| !module.instr(value.instr).synthetic)
        .map(|(i, value)| {
            (
                (
                    module.instr_name(value.instr).to_string(),
                    value.index.clone(),
                ),
                ValueId(i as u32),
            )
        })
        .collect()
}
