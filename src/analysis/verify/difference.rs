//! What `--verify` finds, as data: each difference says what was compared
//! and where, hlomem's side and XLA's; `report::verification` words them.

/// A value as XLA's reports name it: its instruction and shape index
/// (`add.9{1}`), or its instruction alone where XLA wrote no index (the
/// values at the peak, before 2025-05).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ValueName {
    pub instr: String,
    pub index: Option<Vec<u64>>,
}

/// `add.9{1}` (or `add.9`), as XLA's reports write a value.
impl std::fmt::Display for ValueName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.instr)?;
        if let Some(index) = &self.index {
            let index: Vec<String> = index.iter().map(u64::to_string).collect();
            write!(f, "{{{}}}", index.join(","))?;
        }
        Ok(())
    }
}

impl ValueName {
    pub fn new(instr: &str, index: &[u64]) -> ValueName {
        ValueName {
            instr: instr.to_string(),
            index: Some(index.to_vec()),
        }
    }
}

/// One difference between hlomem's accounting and XLA's reports.
#[derive(Debug, Clone)]
pub struct Difference {
    pub compared: Compared,
    pub hlomem: Found,
    pub xla: Found,
}

/// What was compared, and where.
#[derive(Debug, Clone, PartialEq)]
pub enum Compared {
    TotalBytes,
    /// The bytes in one memory space.
    SpaceBytes {
        space: String,
        color: u64,
    },
    /// Parameter allocations.
    ArgumentBytes,
    /// Maybe-live-out allocations.
    OutputBytes,
    /// Donated parameter allocations.
    AliasBytes,
    /// Preallocated-temp allocations.
    TempBytes,
    /// XLA's "Total bytes used" against the sum of its own allocations.
    ReportedTotal,
    /// The total outside the spaces hlomem estimates.
    TotalOutsideEstimates,
    /// The values under `Used values:`, by name and positions.
    UsedValues {
        differing: usize,
    },
    /// One of XLA's allocations that holds no value of the module.
    AllocationWithoutValues {
        allocation: u64,
    },
    /// Two of XLA's allocations whose values hlomem puts in one.
    SplitAllocation {
        first: u64,
        second: u64,
    },
    AllocationSize {
        allocation: u64,
    },
    AllocationKind {
        allocation: u64,
    },
    /// A value's offset in one of XLA's allocations.
    Offset {
        value: ValueName,
        allocation: u64,
    },
    /// Values XLA puts in another allocation than hlomem does.
    Misplaced {
        values: usize,
    },
    /// A value of one of XLA's allocations.
    Value {
        value: ValueName,
        allocation: u64,
    },
    ValueSize {
        value: ValueName,
    },
    /// The memory space of a value's allocation.
    ValueSpace {
        value: ValueName,
        allocation: u64,
    },
    /// Whether a value ends inside its allocation (of `size` bytes).
    ValueEnd {
        value: ValueName,
        allocation: u64,
        size: u64,
    },
    /// A parameter allocation: what it holds, `part` of it.
    Parameter {
        allocation: u64,
        number: u64,
        index: Vec<u64>,
        part: ParameterPart,
    },
    /// The length of the flattened schedule.
    ScheduleLength,
    /// The instruction sequence, position by position.
    Sequence {
        differing: usize,
    },
    LiveRanges {
        differing: usize,
        of: usize,
    },
    /// The values live at XLA's peak moment.
    PeakValues {
        time: u32,
    },
    PeakBytes {
        value: ValueName,
    },
    /// The running sum of the values at the peak, through `through`.
    CumulativePeakBytes {
        through: ValueName,
    },
    /// The total of the stack trace breakdown for XLA's peak.
    BreakdownBytes,
}

/// What of a parameter allocation was compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParameterPart {
    /// The parameter value it holds, and its allocation.
    Holder,
    Kind,
    Size,
    /// The values XLA lists in it.
    Values,
}

/// One side of a difference: a figure, or what that side has instead.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    Number(u64),
    Bytes(u64),
    Kind(Kind),
    NoSuchAllocation,
    NoAllocation,
    NoSuchValue,
    NoSuchParameterValue,
    AParameterAllocation,
    OneAllocation,
    TwoAllocations,
    Elsewhere,
    /// The values in another allocation, with the one of XLA's each is in.
    Misplaced(Vec<(ValueName, u64)>),
    /// The details are on XLA's side.
    SeeXla,
    UsedValues(Vec<UsedValueDifference>),
    Sequence(Vec<SequenceDifference>),
    Ranges(Vec<RangeDifference>),
    /// The memory space a value's own entry names.
    ValueSpace(u64),
    Space(u64),
    FitsIn(u64),
    EndsAt(u64),
    Holds(ValueName),
    DoesNotList,
    MultipleOf(u64),
    /// At the block's start or where another value ends.
    AtAGap,
    ClearOf(ValueName),
    /// `bytes` at `offset`, over `other` while both are live.
    Over {
        bytes: u64,
        offset: u64,
        other: ValueName,
    },
    AlsoLive(Vec<ValueName>),
}

/// An allocation's kind, as XLA's report spells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind {
    pub role: Role,
    pub maybe_live_out: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Parameter(u64),
    Constant,
    ThreadLocal,
    PreallocatedTemp,
    Other,
}

/// A value under `Used values:` that differs.
#[derive(Debug, Clone, PartialEq)]
pub enum UsedValueDifference {
    /// Value `id` of the values report is not that value in the buffer assignment's.
    NotInAllocations { id: u64, value: ValueName },
    Positions {
        value: ValueName,
        xla: Vec<ValueName>,
        hlomem: Vec<ValueName>,
    },
}

/// A position of the instruction sequence where the two differ.
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceDifference {
    pub time: usize,
    pub hlomem: Option<String>,
    pub xla: Option<String>,
}

/// A live range that differs.
#[derive(Debug, Clone, PartialEq)]
pub enum RangeDifference {
    ListedTwice(ValueName),
    Differs {
        value: ValueName,
        hlomem: (u32, u32),
        xla: (u64, u64),
    },
    /// XLA lists it; hlomem has no live range for it.
    Missing {
        value: ValueName,
        xla: (u64, u64),
    },
    /// hlomem has it; XLA does not list it.
    Extra {
        value: ValueName,
        hlomem: (u32, u32),
    },
}

/// What `--verify` says beside the differences.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    /// A space hlomem estimates (TPU's on-chip memory), where XLA's
    /// memory-space assignment placed another amount.
    Estimated {
        space: String,
        color: u64,
        hlomem: u64,
        xla: u64,
    },
    /// Values of the temp block at other offsets than hlomem's, each a valid
    /// packing of the same size.
    Repacked { values: usize },
    /// The dump leaves out get-tuple-elements, so live ranges were not compared.
    RangesNotCompared,
}
