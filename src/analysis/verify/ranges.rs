//! XLA's live-range report against hlomem's: the flattened instruction
//! sequence, every value's live range (both ways: none missing, none extra),
//! and the values live at XLA's peak moment with their sizes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{list, value_name, Verification};
use crate::analysis::dataflow::ValueId;
use crate::analysis::MemoryModel;
use crate::hlo::Module;
use crate::xla_report::XlaLiveRanges;

type Ours = HashMap<(String, Vec<u64>), ValueId>;

pub(super) fn compare(
    module: &Module,
    model: &MemoryModel,
    lr: &XlaLiveRanges,
    ours: &Ours,
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
    v.compare(
        "length of the flattened schedule",
        u64::from(model.schedule.len()),
        lr.max_time,
    );
    compare_sequence(module, model, lr, v);
    compare_ranges(model, lr, ours, v);
    compare_peak(module, model, lr, ours, v);
}

/// The flattened schedule, instruction by instruction.
fn compare_sequence(
    module: &Module,
    model: &MemoryModel,
    lr: &XlaLiveRanges,
    v: &mut Verification,
) {
    let mine: Vec<&str> = model
        .schedule
        .order
        .iter()
        .map(|&i| module.instr_name(i))
        .collect();
    v.checked += lr.sequence.len();
    let differing: Vec<String> = (0..mine.len().max(lr.sequence.len()))
        .filter_map(|t| {
            let (ours, theirs) = (mine.get(t).copied(), lr.sequence.get(t).map(String::as_str));
            (ours != theirs).then(|| {
                format!(
                    "at {t}: hlomem {}, XLA {}",
                    ours.unwrap_or("nothing"),
                    theirs.unwrap_or("nothing")
                )
            })
        })
        .collect();
    if !differing.is_empty() {
        v.disagree(
            format!(
                "{} positions of the instruction sequence differ",
                differing.len()
            ),
            "see XLA column",
            list(&differing),
        );
    }
}

/// Every range XLA lists is hlomem's, once; and hlomem has none XLA leaves out.
fn compare_ranges(model: &MemoryModel, lr: &XlaLiveRanges, ours: &Ours, v: &mut Verification) {
    let mut differing = Vec::new();
    let mut listed = BTreeSet::new();
    for (name, index, start, end) in &lr.ranges {
        v.checked += 1;
        let shown = value_name(name, index);
        if !listed.insert((name.as_str(), index.as_slice())) {
            differing.push(format!("{shown}: listed twice by XLA"));
            continue;
        }
        let mine = ours
            .get(&(name.clone(), index.clone()))
            .and_then(|id| model.ranges[id.index()]);
        match mine {
            Some(r) if u64::from(r.start) == *start && u64::from(r.end) == *end => {}
            Some(r) => differing.push(format!(
                "{shown}: hlomem {}-{}, XLA {start}-{end}",
                r.start, r.end
            )),
            None => differing.push(format!(
                "{shown}: no live range in hlomem, XLA {start}-{end}"
            )),
        }
    }
    let mut extra: Vec<String> = ours
        .iter()
        .filter(|(key, id)| {
            model.ranges[id.index()].is_some()
                && !listed.contains(&(key.0.as_str(), key.1.as_slice()))
        })
        .map(|((name, index), id)| {
            let r = model.ranges[id.index()].expect("filtered on a range");
            format!(
                "{}: hlomem {}-{}, not listed by XLA",
                value_name(name, index),
                r.start,
                r.end
            )
        })
        .collect();
    extra.sort();
    v.checked += extra.len();
    differing.extend(extra);
    if !differing.is_empty() {
        v.disagree(
            format!(
                "{} of {} live ranges differ",
                differing.len(),
                lr.ranges.len()
            ),
            "see XLA column",
            list(&differing),
        );
    }
}

/// The values XLA lists at its peak moment are exactly those live then, each
/// of hlomem's size, and the running sums and the breakdown's total add up.
fn compare_peak(
    module: &Module,
    model: &MemoryModel,
    lr: &XlaLiveRanges,
    ours: &Ours,
    v: &mut Verification,
) {
    let Some(t) = lr.peak_time else {
        return;
    };
    v.checked += 1;
    let t = u32::try_from(t).unwrap_or(u32::MAX);
    // Before 2025-05 XLA named a value at the peak by its instruction alone,
    // once per live value: then values are compared by name, each name as
    // many times as values of it are live.
    let by_name = lr.peak_values.iter().any(|p| !p.indexed);
    let key = |name: &str, index: &[u64]| {
        if by_name {
            name.to_string()
        } else {
            value_name(name, index)
        }
    };
    let theirs: Vec<String> = lr
        .peak_values
        .iter()
        .map(|p| key(&p.name, &p.index))
        .collect();
    let mine: Vec<String> = ours
        .iter()
        .filter(|(_, id)| model.ranges[id.index()].is_some_and(|r| r.start <= t && t <= r.end))
        .map(|((n, i), _)| key(n, i))
        .collect();
    let missing = not_in(&theirs, &mine);
    let extra = not_in(&mine, &theirs);
    if !missing.is_empty() || !extra.is_empty() {
        v.disagree(
            format!("values live at XLA's peak moment {t}"),
            format!("also live: {}", list(&extra)),
            format!("also live: {}", list(&missing)),
        );
    }
    let mut sum = 0u64;
    for peak in &lr.peak_values {
        let name = value_name(&peak.name, &peak.index);
        // The live-range report counts a shape's logical bytes, without a
        // backend's tile padding (`ShapeUtil::ByteSizeOf`).
        if let Some(id) = ours.get(&(peak.name.clone(), peak.index.clone())) {
            let value = &model.dataflow.values[id.index()];
            let node = module
                .instr(value.instr)
                .shape
                .nodes()
                .into_iter()
                .nth(value.node as usize);
            let bytes = node.map_or(value.size, |(_, shape)| shape.byte_size());
            v.compare(format!("bytes of {name} at XLA's peak"), bytes, peak.bytes);
        }
        sum = sum.saturating_add(peak.bytes);
        if let Some(cumulative) = peak.cumulative {
            v.compare(
                format!("cumulative bytes at XLA's peak, through {name}"),
                sum,
                cumulative,
            );
        }
    }
    if let Some(total) = lr.breakdown_total {
        v.compare(
            "bytes of the stack trace breakdown for XLA's peak",
            sum,
            total,
        );
    }
}

/// The names of `a` that `b` does not hold as many times, sorted, each as
/// often as `a` has it more.
fn not_in(a: &[String], b: &[String]) -> Vec<String> {
    let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
    for name in a {
        *counts.entry(name).or_default() += 1;
    }
    for name in b {
        *counts.entry(name).or_default() -= 1;
    }
    counts
        .into_iter()
        .flat_map(|(name, more)| std::iter::repeat_n(name.to_string(), more.max(0) as usize))
        .collect()
}
