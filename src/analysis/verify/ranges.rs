//! XLA's live-range report against hlomem's: the flattened instruction
//! sequence, every value's live range (both ways: none missing, none extra),
//! and the values live at XLA's peak moment with their sizes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{Compared, Found, Note, RangeDifference, SequenceDifference, ValueName, Verification};
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
        v.notes.push(Note::RangesNotCompared);
        return;
    }
    v.compare(
        Compared::ScheduleLength,
        Found::Number(u64::from(model.schedule.len())),
        Found::Number(lr.max_time),
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
    let differing: Vec<SequenceDifference> = (0..mine.len().max(lr.sequence.len()))
        .filter_map(|t| {
            let (ours, theirs) = (mine.get(t).copied(), lr.sequence.get(t).map(String::as_str));
            (ours != theirs).then(|| SequenceDifference {
                time: t,
                hlomem: ours.map(str::to_string),
                xla: theirs.map(str::to_string),
            })
        })
        .collect();
    if !differing.is_empty() {
        v.disagree(
            Compared::Sequence {
                differing: differing.len(),
            },
            Found::SeeXla,
            Found::Sequence(differing),
        );
    }
}

/// Every range XLA lists is hlomem's, once; and hlomem has none XLA leaves out.
fn compare_ranges(model: &MemoryModel, lr: &XlaLiveRanges, ours: &Ours, v: &mut Verification) {
    let mut differing = Vec::new();
    let mut listed = BTreeSet::new();
    for (name, index, start, end) in &lr.ranges {
        v.checked += 1;
        let shown = ValueName::new(name, index);
        if !listed.insert((name.as_str(), index.as_slice())) {
            differing.push(RangeDifference::ListedTwice(shown));
            continue;
        }
        let mine = ours
            .get(&(name.clone(), index.clone()))
            .and_then(|id| model.ranges[id.index()]);
        match mine {
            Some(r) if u64::from(r.start) == *start && u64::from(r.end) == *end => {}
            Some(r) => differing.push(RangeDifference::Differs {
                value: shown,
                hlomem: (r.start, r.end),
                xla: (*start, *end),
            }),
            None => differing.push(RangeDifference::Missing {
                value: shown,
                xla: (*start, *end),
            }),
        }
    }
    let mut extra: Vec<(ValueName, (u32, u32))> = ours
        .iter()
        .filter(|(key, _)| !listed.contains(&(key.0.as_str(), key.1.as_slice())))
        .filter_map(|((name, index), id)| {
            let r = model.ranges[id.index()]?;
            Some((ValueName::new(name, index), (r.start, r.end)))
        })
        .collect();
    extra.sort_by_cached_key(|(value, _)| value.to_string());
    v.checked += extra.len();
    differing.extend(
        extra
            .into_iter()
            .map(|(value, hlomem)| RangeDifference::Extra { value, hlomem }),
    );
    if !differing.is_empty() {
        v.disagree(
            Compared::LiveRanges {
                differing: differing.len(),
                of: lr.ranges.len(),
            },
            Found::SeeXla,
            Found::Ranges(differing),
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
    let key = |name: &str, index: &[u64]| ValueName {
        instr: name.to_string(),
        index: (!by_name).then(|| index.to_vec()),
    };
    let theirs: Vec<ValueName> = lr
        .peak_values
        .iter()
        .map(|p| key(&p.name, &p.index))
        .collect();
    let mine: Vec<ValueName> = ours
        .iter()
        .filter(|(_, id)| model.ranges[id.index()].is_some_and(|r| r.start <= t && t <= r.end))
        .map(|((n, i), _)| key(n, i))
        .collect();
    let missing = not_in(&theirs, &mine);
    let extra = not_in(&mine, &theirs);
    if !missing.is_empty() || !extra.is_empty() {
        v.disagree(
            Compared::PeakValues { time: t },
            Found::AlsoLive(extra),
            Found::AlsoLive(missing),
        );
    }
    let mut sum = 0u64;
    for peak in &lr.peak_values {
        let name = ValueName::new(&peak.name, &peak.index);
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
            v.compare(
                Compared::PeakBytes {
                    value: name.clone(),
                },
                Found::Number(bytes),
                Found::Number(peak.bytes),
            );
        }
        sum = sum.saturating_add(peak.bytes);
        if let Some(cumulative) = peak.cumulative {
            v.compare(
                Compared::CumulativePeakBytes { through: name },
                Found::Number(sum),
                Found::Number(cumulative),
            );
        }
    }
    if let Some(total) = lr.breakdown_total {
        v.compare(
            Compared::BreakdownBytes,
            Found::Number(sum),
            Found::Number(total),
        );
    }
}

/// The names of `a` that `b` does not hold as many times, sorted as written,
/// each as often as `a` has it more.
fn not_in(a: &[ValueName], b: &[ValueName]) -> Vec<ValueName> {
    let mut counts: BTreeMap<String, (&ValueName, i64)> = BTreeMap::new();
    for name in a {
        counts.entry(name.to_string()).or_insert((name, 0)).1 += 1;
    }
    for name in b {
        counts.entry(name.to_string()).or_insert((name, 0)).1 -= 1;
    }
    counts
        .into_values()
        .flat_map(|(name, more)| std::iter::repeat_n(name.clone(), more.max(0) as usize))
        .collect()
}
