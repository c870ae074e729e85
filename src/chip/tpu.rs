//! TPU buffer sizes and memory spaces (XLA's TPU shape-size function, read
//! off libtpu's buffer-assignment reports: every value of the shared TPU dumps
//! is sized by these rules).
//!
//! - A tiled array is stored in whole tiles: `f32[1000,1000]{1,0:T(8,128)}`
//!   pads its two minor-most dimensions (in layout order) up to 8 and 128, so
//!   it takes 1000 × 1024 × 4 = 4,096,000 bytes. Each further tile (`(2,1)` in
//!   `T(8,128)(2,1)`) tiles the previous one. A scalar is a shape of leading
//!   1s, so `f32[]{:T(128)}` holds 128 elements: 512 bytes.
//! - An untiled array outside SMEM is padded to 1024 elements (`s32[]` takes
//!   4096 bytes, `pred[]` 1024); in SMEM (`S(2)`) it takes its plain size.
//! - A tuple's index table is 4 bytes an element, rounded up to a granule
//!   that depends on the chip: 512 bytes on v4 and v5e, 32 on v5p and v6e.
//! - An instruction that runs on the SparseCore (a computation with
//!   `execution_thread="sparsecore"`, such as an offloaded scatter's nested
//!   `async-start`) keeps no tuple index table in HBM: libtpu colors its
//!   tuple-shaped values 7 and sizes them 0 bytes (v5p and v6e MoE steps).
//! - Untiled arrays in the SparseCore's space 8 (`u32[]{:S(8)}`, the nested
//!   `async-start`'s context) take their plain size, as in SMEM.
//! - A split array (`SC(0:256)`: dimension 0 split at index 256, seen in
//!   v5p's VMEM, whose chip has two TensorCores) is sized as its largest
//!   part: `f32[512,1024]{1,0:T(8,128)S(1)SC(0:256)}` takes 1 MiB, not 2.

use serde::Serialize;

use crate::hlo::{ArrayShape, ElementType, Shape};

/// The TPU generations whose rules differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TpuVersion {
    V4,
    V5e,
    V5p,
    V6e,
}

impl TpuVersion {
    /// From `tpu_topology_args { version: TPU_VERSION_... }` of a dump's
    /// `*.target_arguments.txt`, or a user's `v6e`.
    pub fn parse(text: &str) -> Option<TpuVersion> {
        let t = text.trim().to_ascii_lowercase();
        let t = t
            .trim_start_matches("tpu_version_")
            .trim_start_matches("tpu-");
        match t {
            "v4" | "pufferfish" => Some(TpuVersion::V4),
            "v5e" | "v5litepod" | "viperlite" => Some(TpuVersion::V5e),
            "v5p" | "viperfish" => Some(TpuVersion::V5p),
            "v6e" | "ghostlite" | "trillium" => Some(TpuVersion::V6e),
            _ => None,
        }
    }

    /// Reads the chip from the text of a dump's `*.target_arguments.txt`:
    /// `version: TPU_VERSION_VIPERFISH` is v5p, and v5e with `variant: "lite"`.
    pub fn from_target_arguments(text: &str) -> Option<TpuVersion> {
        let at = text.find("version: TPU_VERSION_")?;
        let word: String = text[at + "version: ".len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        match TpuVersion::parse(&word)? {
            TpuVersion::V5p if text.contains("variant: \"lite\"") => Some(TpuVersion::V5e),
            version => Some(version),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TpuVersion::V4 => "v4",
            TpuVersion::V5e => "v5e",
            TpuVersion::V5p => "v5p",
            TpuVersion::V6e => "v6e",
        }
    }

    /// Bytes a tuple index table is rounded up to.
    pub fn tuple_granule(self) -> u64 {
        match self {
            TpuVersion::V5p | TpuVersion::V6e => 32,
            TpuVersion::V4 | TpuVersion::V5e => 512,
        }
    }

    /// Every generation, oldest first.
    pub const ALL: [TpuVersion; 4] = [
        TpuVersion::V4,
        TpuVersion::V5e,
        TpuVersion::V5p,
        TpuVersion::V6e,
    ];

    /// The chips that size a tuple table as this one does, this one among them.
    pub fn same_tuple_tables(self) -> Vec<TpuVersion> {
        Self::ALL
            .into_iter()
            .filter(|v| v.tuple_granule() == self.tuple_granule())
            .collect()
    }

    /// The chips that size a tuple table otherwise: the only chip-dependent
    /// size of a module read without its chip (v5p and v6e for v5e).
    pub fn other_tuple_tables(self) -> Vec<TpuVersion> {
        Self::ALL
            .into_iter()
            .filter(|v| v.tuple_granule() != self.tuple_granule())
            .collect()
    }
}

/// Chips in words: `v5p and v6e`.
pub fn chips_in_words(chips: &[TpuVersion]) -> String {
    let names: Vec<&str> = chips.iter().map(|c| c.as_str()).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// The chip assumed when neither the dump nor the user names one.
pub const DEFAULT_VERSION: TpuVersion = TpuVersion::V5e;

/// Bytes of one tuple index entry.
const TUPLE_ENTRY_BYTES: u64 = 4;
/// Untiled arrays outside SMEM (and the SparseCore's scalars) hold at least
/// this many elements.
const UNTILED_MIN_ELEMENTS: u64 = 1024;
/// Scalar memory: untiled arrays take their plain size there.
const SMEM: u64 = 2;
/// The SparseCore's space that libtpu's reports call `color_8`: untiled
/// arrays take their plain size there too (`u32[]{:S(8)}` is 4 bytes).
const SPARSECORE_SCALARS: u64 = 8;
/// Where the tuple-shaped values of SparseCore instructions are colored.
const SPARSECORE_TUPLES: u64 = 7;
/// The execution thread of computations that run on the SparseCore.
const SPARSECORE_THREAD: &str = "sparsecore";

/// The memory space and size of a tuple-shaped value defined on `thread`,
/// when the thread keeps its tuples off HBM (the SparseCore: color 7, no
/// bytes; see the module notes); `None` where the usual rules hold.
pub fn thread_tuple_placement(shape: &Shape, thread: Option<&str>) -> Option<(u64, u64)> {
    (matches!(shape, Shape::Tuple(_)) && thread == Some(SPARSECORE_THREAD))
        .then_some((SPARSECORE_TUPLES, 0))
}

/// Whether every buffer of `shape` (each tuple level and array) has a padded
/// size that fits in 64 bits.
pub fn sizes_fit(shape: &Shape) -> bool {
    match shape {
        Shape::Array(a) => array_size(a).is_some(),
        Shape::Tuple(elements) => elements.iter().all(sizes_fit),
        Shape::Buffer(inner) => sizes_fit(inner),
    }
}

pub fn buffer_size(shape: &Shape, version: TpuVersion) -> u64 {
    match shape {
        // Shapes whose padded size overflows are refused before the analysis
        // (`Target::sizes_fit`); saturating keeps a caller that skipped it safe.
        Shape::Array(a) => array_size(a).unwrap_or(u64::MAX),
        Shape::Tuple(elements) => {
            let granule = version.tuple_granule();
            let entries = (elements.len() as u64).max(1) * TUPLE_ENTRY_BYTES;
            entries.div_ceil(granule) * granule
        }
        Shape::Buffer(inner) => buffer_size(inner, version),
    }
}

fn array_size(a: &ArrayShape) -> Option<u64> {
    if a.element == ElementType::Token {
        return Some(0);
    }
    let layout = a.layout.as_ref();
    let bits = layout
        .and_then(|l| l.element_size_bits)
        .unwrap_or_else(|| a.element.bit_width());
    let elements = match layout.filter(|l| !l.tiles.is_empty()) {
        Some(layout) => {
            // Dimensions in physical order, most major first; each tile level
            // tiles the minor dimensions of the level before.
            let extent = |d: u64| {
                let whole = a.dims.get(d as usize).map_or(1, |d| d.extent());
                split_part(layout, d, whole)
            };
            let mut dims: Vec<u64> = layout
                .minor_to_major
                .iter()
                .rev()
                .map(|&d| extent(d))
                .collect();
            for tile in &layout.tiles {
                while dims.len() < tile.len() {
                    dims.insert(0, 1);
                }
                let split = dims.len() - tile.len();
                let mut tiled: Vec<u64> = dims[..split].to_vec();
                let mut inner = Vec::with_capacity(tile.len());
                for (&d, t) in dims[split..].iter().zip(tile) {
                    match t.filter(|&t| t > 0) {
                        Some(t) => {
                            tiled.push(d.div_ceil(t));
                            inner.push(t);
                        }
                        // `*` combines: the dimension stays whole.
                        None => {
                            tiled.push(1);
                            inner.push(d);
                        }
                    }
                }
                tiled.extend(inner);
                dims = tiled;
            }
            dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))?
        }
        None => {
            let n = a.element_count()?;
            if matches!(
                layout.map_or(0, |l| l.memory_space),
                SMEM | SPARSECORE_SCALARS
            ) {
                n
            } else {
                n.max(UNTILED_MIN_ELEMENTS)
            }
        }
    };
    // In bits the product can pass 2^64 while the bytes still fit.
    let data = u64::try_from((u128::from(elements) * u128::from(bits)).div_ceil(8)).ok()?;
    // Dynamic arrays carry their dimension sizes, as on every backend.
    let metadata = if a.is_dynamic() {
        4 * a.dims.len() as u64
    } else {
        0
    };
    data.checked_add(metadata)
}

/// The extent of dimension `dim` (of `whole` elements) in the largest part
/// of a split layout (`SC(dim:i1,i2,...)`: parts `[0,i1)`, `[i1,i2)`, ...,
/// `[ik,whole)`); `whole` when the layout does not split it.
fn split_part(layout: &crate::hlo::Layout, dim: u64, whole: u64) -> u64 {
    let split = layout.other_fields.iter().find_map(|f| {
        let (d, indices) = f.strip_prefix("SC(")?.strip_suffix(')')?.split_once(':')?;
        (d.trim().parse::<u64>().ok()? == dim).then_some(indices)
    });
    let Some(indices) = split else {
        return whole;
    };
    let mut cuts: Vec<u64> = indices
        .split(',')
        .filter_map(|i| i.trim().parse::<u64>().ok())
        .filter(|&i| i < whole)
        .collect();
    cuts.sort_unstable();
    cuts.push(whole);
    let mut start = 0;
    let mut largest = 0;
    for cut in cuts {
        largest = largest.max(cut - start);
        start = cut;
    }
    largest
}

/// Alignment of chunks in each memory space's temporary block.
pub fn heap_alignment(color: u64) -> u64 {
    match color {
        0 => 16384,
        1 => 4096,
        SMEM => 4,
        _ => 512,
    }
}

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
/// What `RunAssignBuffersWithFallback` keeps clear of the memory limit.
const FALLBACK_MARGIN: u64 = 5 << 29;
/// Room on each side of a chip's threshold for what hlomem's total may leave
/// out of the one libtpu compares (its code is closed; the open XLA sums
/// every allocation of the space): totals this close are not decided.
const FALLBACK_ALLOWANCE: u64 = 64 * MIB;

/// The HBM totals around which libtpu starts packing HBM again with XLA's
/// default algorithm: its memory limit less 2.5 GiB (`kTwoPointFiveGiB`), as
/// a range. A total at most the low end keeps start order, one above the
/// high end falls back, one between is not decided. The low end is libtpu's
/// "available HBM" (its refusals print it rounded to 0.01 GiB) less 2.5 GiB.
/// On v5e, compiles of one program padded to HBM totals on both sides put the
/// threshold above 13.25 GiB + 80 KiB and at most 13.26 GiB, which is 15.75
/// GiB less 2.5. On v6e the same program kept start order at 28.79 GiB, above
/// 31.25 GiB less 2.5: where its fallback starts is not known, nor on v5p and
/// v4, which were not measured.
pub fn fallback_limit(version: TpuVersion) -> (u64, u64) {
    let (low, high) = match version {
        TpuVersion::V5e => (1575 * GIB / 100, Some(1576 * GIB / 100)),
        TpuVersion::V6e => (3124 * GIB / 100, None),
        TpuVersion::V5p => (9573 * GIB / 100, None),
        // One TensorCore's.
        TpuVersion::V4 => (1524 * GIB / 100, None),
    };
    (
        low - FALLBACK_MARGIN - FALLBACK_ALLOWANCE,
        high.map_or(u64::MAX, |h| h - FALLBACK_MARGIN + FALLBACK_ALLOWANCE),
    )
}

/// [`fallback_limit`] over every chip: where the chip is not known.
pub fn fallback_limit_range() -> (u64, u64) {
    let all = [
        TpuVersion::V4,
        TpuVersion::V5e,
        TpuVersion::V5p,
        TpuVersion::V6e,
    ]
    .map(fallback_limit);
    (
        all.iter().map(|l| l.0).min().unwrap_or(0),
        all.iter().map(|l| l.1).max().unwrap_or(0),
    )
}

/// The most VMEM (color 1) libtpu's memory-space assignment may lay out:
/// the chip's VMEM less the scoped VMEM each kernel keeps for itself
/// (`--xla_tpu_scoped_vmem_limit_kib`, -1 in the dumps' flag files: the chip's
/// default). XLA's VMEM allocation is the highest end among the chunks the
/// assignment placed (`MemorySpaceAssignment::Process`, `alternate_memory_size_`;
/// `BufferAssigner::AssignPresetBuffers` makes it the color's allocation), and
/// every chunk lies below this bound (its `max_size_in_bytes`).
/// Evidence: on v5e six modules of `../shared/accelerators` (MLP and
/// transformer steps, libtpu 0.0.42 and 0.0.52) have exactly 112 MiB, and an
/// MLP step compiled with the scoped limit at 32 MiB has exactly 96 MiB and at
/// 8 MiB a little over 112: 128 MiB less the scoped limit, 16 MiB by default.
/// On v6e (128 MiB, scoped 32 MiB by default) no compile went past 96 MiB,
/// and with the scoped limit at 16 MiB or 100 MiB none past 112 MiB or 28 MiB.
/// v5p's and v4's (whose assignment fills color 3) were not measured.
pub fn vmem_assignment_limit(version: TpuVersion) -> Option<u64> {
    match version {
        TpuVersion::V5e => Some((128 - 16) * MIB),
        TpuVersion::V6e => Some((128 - 32) * MIB),
        TpuVersion::V5p | TpuVersion::V4 => None,
    }
}

/// [`vmem_assignment_limit`] where the chip is not known: the largest of the
/// measured chips'.
pub fn vmem_assignment_limit_any() -> Option<u64> {
    [
        TpuVersion::V4,
        TpuVersion::V5e,
        TpuVersion::V5p,
        TpuVersion::V6e,
    ]
    .into_iter()
    .filter_map(vmem_assignment_limit)
    .max()
}

/// Memory spaces as XLA's TPU memory-usage report names them.
pub fn space_name(color: u64) -> String {
    match color {
        0 => "default".into(),
        1 => "vmem".into(),
        SMEM => "smem".into(),
        // v4's memory-space assignment fills color 3, and libtpu's
        // memory-usage report calls it `hbm (color=3)`.
        3 => "hbm".into(),
        c => format!("color_{c}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(text: &str) -> Shape {
        let module = crate::parse_text(
            "t.txt",
            format!(
                "HloModule m\n\nENTRY %e () -> {text} {{\n  ROOT %p = {text} parameter(0)\n}}\n"
            ),
        )
        .expect("parses");
        (*module.instr(module.comp(module.entry).root).shape).clone()
    }

    #[test]
    fn split_layouts_are_sized_as_their_largest_part() {
        // libtpu 0.0.42.1's v5p report of a gradient-accumulation step
        // (`copy-start.3{0}`, `multiply_subtract_fusion.1{}` in VMEM).
        let v5p = TpuVersion::V5p;
        assert_eq!(
            buffer_size(&shape("f32[512,1024]{1,0:T(8,128)S(1)SC(0:256)}"), v5p),
            1_048_576
        );
        assert_eq!(
            buffer_size(&shape("f32[1024,256]{1,0:T(8,128)S(1)SC(0:512)}"), v5p),
            524_288
        );
        // An uneven split: the larger part, rows 0..300 of 512, padded to
        // whole (8, 128) tiles.
        assert_eq!(
            buffer_size(&shape("f32[512,128]{1,0:T(8,128)SC(0:300)}"), v5p),
            304 * 128 * 4
        );
    }

    #[test]
    fn sizes_follow_the_tpu_reports() {
        // Every number here is a `size=` of libtpu's buffer-assignment reports.
        let v5e = TpuVersion::V5e;
        assert_eq!(
            buffer_size(&shape("f32[1000,1000]{1,0:T(8,128)}"), v5e),
            4_096_000
        );
        assert_eq!(buffer_size(&shape("f32[]{:T(128)}"), v5e), 512);
        assert_eq!(buffer_size(&shape("f32[4096]{0:T(1024)}"), v5e), 16384);
        assert_eq!(
            buffer_size(&shape("bf16[2048,2048]{1,0:T(8,128)(2,1)S(1)}"), v5e),
            8_388_608
        );
        assert_eq!(buffer_size(&shape("s32[]"), v5e), 4096);
        assert_eq!(buffer_size(&shape("u32[]{:S(2)}"), v5e), 4);
        assert_eq!(
            buffer_size(&shape("(f32[]{:T(128)}, f32[]{:T(128)})"), v5e),
            512
        );
        assert_eq!(
            buffer_size(&shape("(f32[]{:T(128)}, f32[]{:T(128)})"), TpuVersion::V6e),
            32
        );
    }

    #[test]
    fn padded_sizes_that_pass_64_bits_are_caught() {
        // 2^60 f32 elements: 2^65 bits but 2^62 bytes, which fits.
        assert_eq!(
            buffer_size(
                &shape("f32[1152921504606846976]{0:T(1024)}"),
                TpuVersion::V5e
            ),
            1 << 62
        );
        assert!(sizes_fit(&shape("f32[1152921504606846976]{0:T(1024)}")));
        assert!(!sizes_fit(&shape(
            "f32[1,4611686018427387903]{1,0:T(8,128)}"
        )));
        assert!(!sizes_fit(&shape(
            "f32[256,256]{1,0:T(18446744073709551615,128)}"
        )));
    }

    #[test]
    fn the_chip_comes_from_target_arguments() {
        let v5e = "tpu_topology_args {\n  version: TPU_VERSION_VIPERFISH\n  variant: \"lite\"\n}";
        let v5p = "tpu_topology_args {\n  version: TPU_VERSION_VIPERFISH\n}";
        let v6e = "tpu_topology_args {\n  version: TPU_VERSION_GHOSTLITE\n}";
        assert_eq!(
            TpuVersion::from_target_arguments(v5e),
            Some(TpuVersion::V5e)
        );
        assert_eq!(
            TpuVersion::from_target_arguments(v5p),
            Some(TpuVersion::V5p)
        );
        assert_eq!(
            TpuVersion::from_target_arguments(v6e),
            Some(TpuVersion::V6e)
        );
        assert_eq!(TpuVersion::from_target_arguments("garbage"), None);
    }
}
