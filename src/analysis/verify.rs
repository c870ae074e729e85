//! `analyze --verify`: compares hlomem's accounting with what XLA itself wrote
//! beside the HLO, and lists every number where the two disagree. A
//! disagreement means XLA's rules differ from hlomem's (a new XLA version, or a
//! rule not yet understood); hlomem's own numbers never come from these files.

use std::collections::HashMap;

use serde::Serialize;

use super::dataflow::ValueId;
use super::MemoryModel;
use crate::hlo::Module;
use crate::xla_report::XlaReports;

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Verification {
    /// XLA's report files that were read.
    pub files: Vec<String>,
    /// How many numbers were compared.
    pub checked: usize,
    pub disagreements: Vec<Disagreement>,
    /// Why some comparisons were skipped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Disagreement {
    pub what: String,
    pub hlomem: String,
    pub xla: String,
}

impl Verification {
    /// Nothing could be compared, and why.
    pub fn unavailable(why: &str) -> Verification {
        Verification {
            files: Vec::new(),
            checked: 0,
            disagreements: Vec::new(),
            notes: vec![why.to_string()],
        }
    }

    pub fn agrees(&self) -> bool {
        self.disagreements.is_empty()
    }
}

/// How many individual values to list before summarizing.
const MAX_LISTED: usize = 10;

pub fn verify(module: &Module, model: &MemoryModel, xla: &XlaReports) -> Verification {
    let mut v = Verification {
        files: xla.files.iter().map(|p| p.display().to_string()).collect(),
        checked: 0,
        disagreements: Vec::new(),
        notes: Vec::new(),
    };
    let check = |what: &str, ours: u64, theirs: Option<u64>, v: &mut Verification| {
        if let Some(theirs) = theirs {
            v.checked += 1;
            if ours != theirs {
                v.disagreements.push(Disagreement {
                    what: what.to_string(),
                    hlomem: ours.to_string(),
                    xla: theirs.to_string(),
                });
            }
        }
    };
    let t = &model.totals;
    // Spaces XLA places before the buffer assignment (TPU VMEM...) are
    // hlomem's estimates: compared, but as notes.
    let exact = |color: u64| model.target.space_is_exact(color);
    if t.total_exact {
        check(
            "total bytes used",
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
                check(
                    &format!("bytes in memory space {name} (color {color})"),
                    ours,
                    Some(theirs),
                    &mut v,
                );
            } else if ours != theirs {
                v.notes.push(format!(
                    "memory space {name} (color {color}): hlomem estimates {ours} bytes, XLA's memory-space assignment placed {theirs}"
                ));
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
            "argument bytes (parameter allocations)",
            t.argument_bytes,
            sum(&|a| a.is_parameter()),
            &mut v,
        );
        check(
            "output bytes (maybe-live-out allocations)",
            t.output_bytes,
            sum(&|a| a.maybe_live_out),
            &mut v,
        );
        check(
            "alias bytes (donated parameter allocations)",
            t.alias_bytes,
            sum(&|a| a.is_parameter() && a.maybe_live_out),
            &mut v,
        );
        check(
            "temp bytes (preallocated-temp allocations)",
            our_temp,
            sum(&|a| a.preallocated_temp),
            &mut v,
        );
        compare_allocations(module, model, xla, &mut v);
    }
    if let Some(lr) = &xla.live_ranges {
        compare_live_ranges(module, model, lr, &mut v);
    }
    v
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

fn compare_allocations(
    module: &Module,
    model: &MemoryModel,
    xla: &XlaReports,
    v: &mut Verification,
) {
    let ours = value_index(module, model);
    let assignment = &model.assignment;
    let mut misplaced = Vec::new();
    for allocation in xla
        .allocations
        .iter()
        .filter(|a| model.target.space_is_exact(a.color))
    {
        // Which of our allocations holds most of this one's values?
        let mut votes: HashMap<usize, usize> = HashMap::new();
        for value in &allocation.values {
            let Some(&id) = ours.get(&(value.name.clone(), value.index.clone())) else {
                continue;
            };
            let buffer = model.dataflow.values[id.index()].buffer;
            if let Some(a) = assignment.allocation_of[buffer.index()] {
                *votes.entry(a).or_default() += 1;
            }
        }
        let Some((&mine, _)) = votes
            .iter()
            .max_by_key(|&(a, n)| (*n, std::cmp::Reverse(*a)))
        else {
            continue;
        };
        v.checked += 1;
        if assignment.allocations[mine].size != allocation.size {
            v.disagreements.push(Disagreement {
                what: format!("size of XLA's allocation {}", allocation.index),
                hlomem: assignment.allocations[mine].size.to_string(),
                xla: allocation.size.to_string(),
            });
        }
        for value in &allocation.values {
            let place = ours
                .get(&(value.name.clone(), value.index.clone()))
                .and_then(|id| {
                    assignment.allocation_of[model.dataflow.values[id.index()].buffer.index()]
                });
            if place != Some(mine) {
                misplaced.push(format!(
                    "{}{:?} (XLA's allocation {})",
                    value.name, value.index, allocation.index
                ));
            }
        }
    }
    if misplaced.is_empty() {
        return;
    }
    // When every allocation still has XLA's size, the values only swapped
    // places between interchangeable allocations: XLA breaks such ties by value
    // ids, which depend on its internal computation order that the text does not
    // show. That changes no number, so it is a note, not a disagreement.
    let sizes_agree = !v
        .disagreements
        .iter()
        .any(|d| d.what.starts_with("size of XLA's allocation"));
    let message = format!(
        "{} values are in a different allocation: {}",
        misplaced.len(),
        list(&misplaced)
    );
    if sizes_agree {
        v.notes.push(format!(
            "{message} (equal-sized allocations, no number changes)"
        ));
    } else {
        v.disagreements.push(Disagreement {
            what: format!("{} values are in a different allocation", misplaced.len()),
            hlomem: "elsewhere".into(),
            xla: list(&misplaced),
        });
    }
}

fn compare_live_ranges(
    module: &Module,
    model: &MemoryModel,
    lr: &crate::xla_report::XlaLiveRanges,
    v: &mut Verification,
) {
    if module.instrs().any(|(_, i)| i.synthetic) {
        v.notes.push(
            "live ranges not compared: the dump leaves out get-tuple-elements (compact `%t#i` operands), so logical \
             times differ from XLA's by design"
                .into(),
        );
        return;
    }
    v.checked += 1;
    if u64::from(model.schedule.len()) != lr.max_time {
        v.disagreements.push(Disagreement {
            what: "length of the flattened schedule".into(),
            hlomem: model.schedule.len().to_string(),
            xla: lr.max_time.to_string(),
        });
    }
    let ours = value_index(module, model);
    let mut differing = Vec::new();
    for (name, index, start, end) in &lr.ranges {
        v.checked += 1;
        let mine = ours
            .get(&(name.clone(), index.clone()))
            .and_then(|id| model.ranges[id.index()]);
        match mine {
            Some(r) if u64::from(r.start) == *start && u64::from(r.end) == *end => {}
            Some(r) => differing.push(format!(
                "{name}{index:?}: hlomem {}-{}, XLA {start}-{end}",
                r.start, r.end
            )),
            None => differing.push(format!(
                "{name}{index:?}: no live range in hlomem, XLA {start}-{end}"
            )),
        }
    }
    if !differing.is_empty() {
        v.disagreements.push(Disagreement {
            what: format!(
                "{} of {} live ranges differ",
                differing.len(),
                lr.ranges.len()
            ),
            hlomem: "see XLA column".into(),
            xla: list(&differing),
        });
    }
    // The values XLA lists at its peak moment must be exactly those live then.
    if let Some(t) = lr.peak_time {
        v.checked += 1;
        let t = t as u32;
        let theirs: std::collections::BTreeSet<String> = lr
            .peak_values
            .iter()
            .map(|(n, i, _)| format!("{n}{i:?}"))
            .collect();
        let mine: std::collections::BTreeSet<String> = ours
            .iter()
            .filter(|(_, id)| model.ranges[id.index()].is_some_and(|r| r.start <= t && t <= r.end))
            .map(|((n, i), _)| format!("{n}{i:?}"))
            .collect();
        let missing: Vec<String> = theirs.difference(&mine).cloned().collect();
        let extra: Vec<String> = mine.difference(&theirs).cloned().collect();
        if !missing.is_empty() || !extra.is_empty() {
            v.disagreements.push(Disagreement {
                what: format!("values live at XLA's peak moment {t}"),
                hlomem: format!("also live: {}", list(&extra)),
                xla: format!("also live: {}", list(&missing)),
            });
        }
    }
}

fn list(items: &[String]) -> String {
    let shown: Vec<&str> = items.iter().take(MAX_LISTED).map(String::as_str).collect();
    let more = items.len().saturating_sub(MAX_LISTED);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}
