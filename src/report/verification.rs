//! `--verify`'s result in the report: each difference `analysis::verify`
//! found, worded (what was compared, hlomem's side, XLA's), and its notes.

use serde::Serialize;

use crate::analysis::verify::{
    self, Compared, Difference, Found, Kind, Note, ParameterPart, RangeDifference, Role,
    UsedValueDifference, ValueName,
};

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
    /// XLA's own totals, as its reports give them ("Total bytes used", each
    /// memory space's allocations), when they could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xla_totals: Option<crate::xla_report::XlaTotals>,
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
            xla_totals: None,
        }
    }

    pub fn agrees(&self) -> bool {
        self.disagreements.is_empty()
    }
}

impl From<verify::Verification> for Verification {
    fn from(v: verify::Verification) -> Verification {
        Verification {
            files: v.files.iter().map(|p| p.display().to_string()).collect(),
            checked: v.checked,
            disagreements: v.differences.iter().map(Disagreement::of).collect(),
            notes: v.notes.iter().map(note).collect(),
            xla_totals: None,
        }
    }
}

impl Disagreement {
    fn of(d: &Difference) -> Disagreement {
        Disagreement {
            what: what(&d.compared),
            hlomem: found(&d.hlomem),
            xla: found(&d.xla),
        }
    }
}

/// How many individual values to list before summarizing.
const MAX_LISTED: usize = 10;

fn list(items: &[String]) -> String {
    let shown: Vec<&str> = items.iter().take(MAX_LISTED).map(String::as_str).collect();
    let more = items.len().saturating_sub(MAX_LISTED);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

fn names(values: &[ValueName]) -> String {
    list(&values.iter().map(ValueName::to_string).collect::<Vec<_>>())
}

fn what(c: &Compared) -> String {
    match c {
        Compared::TotalBytes => "total bytes used".into(),
        Compared::SpaceBytes { space, color } => {
            format!("bytes in memory space {space} (color {color})")
        }
        Compared::ArgumentBytes => "argument bytes (parameter allocations)".into(),
        Compared::OutputBytes => "output bytes (maybe-live-out allocations)".into(),
        Compared::AliasBytes => "alias bytes (donated parameter allocations)".into(),
        Compared::TempBytes => "temp bytes (preallocated-temp allocations)".into(),
        Compared::ReportedTotal => {
            "XLA's \"Total bytes used\" against the sum of its allocations".into()
        }
        Compared::TotalOutsideEstimates => {
            "total bytes used outside the spaces hlomem estimates".into()
        }
        Compared::UsedValues { differing } => {
            format!("{differing} used values differ in name or positions")
        }
        Compared::AllocationWithoutValues { allocation } => {
            format!("XLA's allocation {allocation} holds no value of the module")
        }
        Compared::SplitAllocation { first, second } => format!(
            "XLA's allocations {first} and {second} hold values hlomem puts in one allocation"
        ),
        Compared::AllocationSize { allocation } => format!("size of XLA's allocation {allocation}"),
        Compared::AllocationKind { allocation } => format!("kind of XLA's allocation {allocation}"),
        Compared::Offset { value, allocation } => {
            format!("offset of {value} in XLA's allocation {allocation}")
        }
        Compared::Misplaced { values } => format!("{values} values are in a different allocation"),
        Compared::Value { value, allocation } => {
            format!("value {value} of XLA's allocation {allocation}")
        }
        Compared::ValueSize { value } => format!("size of value {value}"),
        Compared::ValueSpace { value, allocation } => format!(
            "allocation of {value}: XLA's allocation {allocation} is in another memory space"
        ),
        Compared::ValueEnd {
            value,
            allocation,
            size,
        } => {
            format!("offset of {value}: it ends past XLA's allocation {allocation} ({size} bytes)")
        }
        Compared::Parameter {
            allocation,
            number,
            index,
            part,
        } => {
            let at = ValueName::new("", index);
            let allocation = format!("XLA's allocation {allocation} (parameter {number} at {at})");
            match part {
                ParameterPart::Holder => allocation,
                ParameterPart::Kind => format!("{allocation}: kind"),
                ParameterPart::Size => format!("{allocation}: size"),
                ParameterPart::Values => format!("{allocation}: values"),
            }
        }
        Compared::ScheduleLength => "length of the flattened schedule".into(),
        Compared::Sequence { differing } => {
            format!("{differing} positions of the instruction sequence differ")
        }
        Compared::LiveRanges { differing, of } => format!("{differing} of {of} live ranges differ"),
        Compared::PeakValues { time } => format!("values live at XLA's peak moment {time}"),
        Compared::PeakBytes { value } => format!("bytes of {value} at XLA's peak"),
        Compared::CumulativePeakBytes { through } => {
            format!("cumulative bytes at XLA's peak, through {through}")
        }
        Compared::BreakdownBytes => "bytes of the stack trace breakdown for XLA's peak".into(),
    }
}

fn found(f: &Found) -> String {
    match f {
        Found::Number(n) => n.to_string(),
        Found::Bytes(n) => format!("{n} bytes"),
        Found::Kind(kind) => kind_words(kind),
        Found::NoSuchAllocation => "no such allocation".into(),
        Found::NoAllocation => "no allocation".into(),
        Found::NoSuchValue => "no such value in the module".into(),
        Found::NoSuchParameterValue => "the entry has no such parameter value".into(),
        Found::AParameterAllocation => "a parameter allocation".into(),
        Found::OneAllocation => "one allocation".into(),
        Found::TwoAllocations => "two".into(),
        Found::Elsewhere => "elsewhere".into(),
        Found::Misplaced(values) => list(
            &values
                .iter()
                .map(|(value, allocation)| format!("{value} (XLA's allocation {allocation})"))
                .collect::<Vec<_>>(),
        ),
        Found::SeeXla => "see XLA column".into(),
        Found::UsedValues(differing) => list(
            &differing
                .iter()
                .map(|d| match d {
                    UsedValueDifference::NotInAllocations { id, value } => format!(
                        "value {id} is {value} in the values report but not in the buffer-assignment report"
                    ),
                    UsedValueDifference::Positions { value, xla, hlomem } => format!(
                        "{value} at {} in XLA, at {} in hlomem",
                        names(xla),
                        names(hlomem)
                    ),
                })
                .collect::<Vec<_>>(),
        ),
        Found::Sequence(differing) => list(
            &differing
                .iter()
                .map(|d| {
                    format!(
                        "at {}: hlomem {}, XLA {}",
                        d.time,
                        d.hlomem.as_deref().unwrap_or("nothing"),
                        d.xla.as_deref().unwrap_or("nothing")
                    )
                })
                .collect::<Vec<_>>(),
        ),
        Found::Ranges(differing) => list(
            &differing
                .iter()
                .map(|d| match d {
                    RangeDifference::ListedTwice(value) => format!("{value}: listed twice by XLA"),
                    RangeDifference::Differs { value, hlomem, xla } => format!(
                        "{value}: hlomem {}-{}, XLA {}-{}",
                        hlomem.0, hlomem.1, xla.0, xla.1
                    ),
                    RangeDifference::Missing { value, xla } => {
                        format!("{value}: no live range in hlomem, XLA {}-{}", xla.0, xla.1)
                    }
                    RangeDifference::Extra { value, hlomem } => format!(
                        "{value}: hlomem {}-{}, not listed by XLA",
                        hlomem.0, hlomem.1
                    ),
                })
                .collect::<Vec<_>>(),
        ),
        Found::ValueSpace(color) => format!("memory space {color}, as the value says"),
        Found::Space(color) => format!("memory space {color}"),
        Found::FitsIn(size) => format!("fits in {size} bytes"),
        Found::EndsAt(end) => format!("ends at byte {end}"),
        Found::Holds(value) => format!("holds {value}"),
        Found::DoesNotList => "does not list it".into(),
        Found::MultipleOf(alignment) => format!("a multiple of {alignment}"),
        Found::AtAGap => "0 or where another value ends".into(),
        Found::ClearOf(value) => format!("clear of {value}"),
        Found::Over {
            bytes,
            offset,
            other,
        } => format!("{bytes} bytes at {offset}, over {other} while both are live"),
        Found::AlsoLive(values) => format!("also live: {}", names(values)),
    }
}

/// `parameter 0, maybe-live-out`, as XLA's report spells an allocation's kind.
fn kind_words(kind: &Kind) -> String {
    let role = match kind.role {
        Role::Parameter(number) => format!("parameter {number}"),
        Role::Constant => "constant".into(),
        Role::ThreadLocal => "thread-local".into(),
        Role::PreallocatedTemp => "preallocated-temp".into(),
        Role::Other => "other".into(),
    };
    if kind.maybe_live_out {
        format!("{role}, maybe-live-out")
    } else {
        role
    }
}

fn note(n: &Note) -> String {
    match n {
        Note::Estimated {
            space,
            color,
            hlomem,
            xla,
        } => format!(
            "memory space {space} (color {color}): hlomem estimates {hlomem} bytes, XLA's memory-space assignment placed {xla}"
        ),
        Note::Repacked { values } => format!(
            "{values} values of the temp block are at other offsets than hlomem's, each aligned, inside its \
             allocation and clear of every value live with it: a different packing of the same size"
        ),
        Note::RangesNotCompared => "live ranges not compared: the dump leaves out get-tuple-elements (compact `%t#i` operands), so logical \
             times differ from XLA's by design"
            .into(),
    }
}
