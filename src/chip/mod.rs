//! Which compiler made a module, and what that changes for memory.
//!
//! XLA's CPU, GPU and TPU backends share the buffer-assignment algorithm but
//! not its parameters: how big a shape's buffer is (TPU pads to tiles), how
//! temporaries are aligned, which memory space a buffer lives in, and when an
//! output may overwrite an operand. [`Target::detect`] reads the backend from
//! the module text alone (a `compiled.as_text()` has no file name); the one
//! [`Target`] value then flows into the analysis, and nothing else asks which
//! backend a module came from.

use std::fmt;

use serde::Serialize;

use crate::hlo::{Module, Shape};

pub mod devices;
pub mod fit;
mod tpu;

pub use tpu::{chips_in_words, TpuVersion};

/// The compiler backends whose dumps hlomem reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Cpu,
    Gpu,
    Tpu,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Gpu => "gpu",
            Backend::Tpu => "tpu",
        }
    }

    pub fn parse(text: &str) -> Option<Backend> {
        match text.to_ascii_lowercase().as_str() {
            "cpu" => Some(Backend::Cpu),
            "gpu" | "cuda" | "rocm" => Some(Backend::Gpu),
            "tpu" => Some(Backend::Tpu),
            _ => None,
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What decided the backend, for the report: a user should be able to check it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum Evidence {
    /// `--backend` (or the API's `backend=`) said so.
    Forced,
    /// A marker only that backend writes, quoted.
    Marker(String),
    /// Nothing in the text tells; CPU rules were used.
    Assumed,
}

/// The backend and the rules that follow from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Target {
    pub backend: Backend,
    pub evidence: Evidence,
    /// The TPU chip, which sizes tuple tables; `None` off TPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpu_version: Option<TpuVersion>,
    /// Where the chip came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chip_source: Option<ChipSource>,
    /// libtpu 0.0.52's rules apply, not 0.0.42's (the libtpu JAX 0.10.2
    /// pins): it keeps other buffers out of output allocations and starts an
    /// async computation's result at its async-start (libtpu 0.0.52's reports).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub newer_libtpu: bool,
    /// Who said which libtpu compiled it (TPU only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libtpu_source: Option<LibtpuSource>,
}

/// Who said which libtpu compiled a TPU module. The same HLO text can come
/// out of libtpu 0.0.42 and 0.0.52 with different HBM figures (v4 modules
/// without async copies: 0.0.52 keeps a tuple table out of an output's
/// allocation, 16 KiB more temp), so the release is one more thing a figure
/// may depend on, as the chip is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LibtpuSource {
    /// The text: how its backend configs are written (0.0.52 sorts their
    /// keys and gives async copies a `"dma_priority"`; 0.0.42 writes
    /// `"aliasing_operands"` after the scoped-memory lists).
    Marker,
    /// `--libtpu` (the Python package passes the libtpu installed where it
    /// compiled).
    User,
    /// The dump folder's `*.flagfile`, which lists libtpu's flags.
    Dump,
    /// Nothing told: 0.0.42's rules, and 0.0.52's figures worked out too.
    Assumed,
}

/// A flag libtpu 0.0.52 lists in a dump's `*.flagfile` and 0.0.42 does not
/// (`--xla_tpu_reuse_aliased_entry_params_for_temp=auto`): in the shared and
/// holdout dumps, all 57 folders of 0.0.52 have it and none of 138 of
/// 0.0.42.1 (v4, v5e, v5p, v6e).
const NEWER_LIBTPU_FLAG: &str = "--xla_tpu_reuse_aliased_entry_params_for_temp=";

/// Whether a dump's flag file is a libtpu after 0.0.42's (its rules are
/// 0.0.52's) rather than 0.0.42's.
pub fn newer_libtpu_flags(flagfile: &str) -> bool {
    flagfile
        .lines()
        .any(|l| l.trim_start().starts_with(NEWER_LIBTPU_FLAG))
}

/// The libtpu releases whose buffer-assignment rules hlomem knows, from a
/// version as pip writes it: `Some(false)` for 0.0.42 (`0.0.42.1`),
/// `Some(true)` for 0.0.52, `None` for any other, a nightly or dev build
/// (`0.0.21.dev20250807+nightly`) included: its rules were not checked
/// against its reports, and the module is read as one whose libtpu nobody
/// named. An error for what is not a version.
pub fn libtpu_rules(version: &str) -> Result<Option<bool>, String> {
    let v = version.trim();
    let parts: Vec<&str> = v.split('.').collect();
    let number = |p: &&str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if parts.len() < 3 || !parts[..3].iter().all(number) {
        return Err(format!(
            "{v:?} is not a libtpu version (as `pip show libtpu` prints it, e.g. 0.0.52)"
        ));
    }
    if !parts[3..].iter().all(number) {
        return Ok(None);
    }
    let release = parts[..3].join(".");
    Ok([false, true]
        .into_iter()
        .find(|&newer| libtpu_release(newer) == release))
}

/// The libtpu release whose rules `newer_libtpu` names: 0.0.52's (`true`)
/// or 0.0.42's, the one JAX 0.10.2 installs.
pub fn libtpu_release(newer: bool) -> &'static str {
    match newer {
        true => "0.0.52",
        false => "0.0.42",
    }
}

/// Who named the TPU chip (the HLO text never does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChipSource {
    /// The dump folder's `*.target_arguments.txt`.
    Dump,
    /// `--tpu` (or the API's `tpu=`).
    User,
    /// Nobody: v5e's rules were used.
    Assumed,
}

/// The interface a user drives hlomem through: the words that tell them how to
/// set the backend or the TPU chip name that interface's settings (the command
/// line's `--tpu`; the Python package has no such argument: the chip comes
/// from the compiled program it is given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Interface {
    #[default]
    Cli,
    Python,
}

impl Interface {
    /// The setting that names the TPU chip: `--tpu`; none in Python, where
    /// the compiled program's target or devices name it.
    pub fn chip_setting(self) -> Option<&'static str> {
        match self {
            Interface::Cli => Some("--tpu"),
            Interface::Python => None,
        }
    }

    /// How the libtpu release is named, after "libtpu assumed, ": `--libtpu
    /// sets it`; in Python, analyzing the compiled program passes the libtpu
    /// installed where it was compiled.
    pub fn libtpu_hint(self) -> &'static str {
        match self {
            Interface::Cli => "--libtpu sets it",
            Interface::Python => "analyzing the compiled program names it",
        }
    }

    /// The setting that forces a backend: `--backend`; none in Python.
    pub fn backend_setting(self) -> Option<&'static str> {
        match self {
            Interface::Cli => Some("--backend"),
            Interface::Python => None,
        }
    }

    /// How the chip is named, after "chip assumed, ": `--tpu sets it`; in
    /// Python the compiled program names it (its target, or its devices).
    pub fn chip_hint(self) -> &'static str {
        match self {
            Interface::Cli => "--tpu sets it",
            Interface::Python => "the compiled program names it",
        }
    }
}

/// The order in which a memory space's temporaries are packed into its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeapOrder {
    /// XLA's default (`ChooseBestHeapAlgorithm`): best fit biggest-first and
    /// longest-first, the smaller heap kept.
    BestOfSizeAndTime,
    /// Best fit in the order the values are first defined, once.
    StartTime,
}

/// Where a memory space's total makes the buffer assignment pack it again with
/// XLA's default algorithm (`RunAssignBuffersWithFallback`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackLimit {
    /// The space has no limit: its first packing stays.
    None,
    /// A total at most `.0` keeps the first packing, one above `.1` falls
    /// back, one between is not decided (the limit is known to a range, or
    /// depends on the TPU chip the text does not name).
    Between(u64, u64),
}

/// XLA:CPU aligns temporaries to 64 bytes (`EIGEN_MAX_ALIGN_BYTES` of jaxlib's build).
const CPU_ALIGNMENT: u64 = 64;
/// XLA:GPU aligns every allocation to 256 bytes (`kXlaAllocatedBufferAlignBytes`).
const GPU_ALIGNMENT: u64 = 256;

/// What only libtpu 0.0.52 writes: an async copy's `"dma_priority"`, and a
/// backend config whose keys are sorted (`{"aliasing_operands":` first).
/// Searched in the text and the backend configs set aside from it.
const NEWER_LIBTPU_MARKERS: &[&str] = &["\"dma_priority\"", "{\"aliasing_operands\":"];

/// What only libtpu 0.0.42 writes: a backend config's keys in the proto's
/// field order, `"aliasing_operands"` after the scoped-memory lists. Of 195
/// TPU modules (57 compiled by 0.0.52, 138 by 0.0.42.1; v4, v5e, v5p, v6e),
/// every one shows one of the two orders, its release's; the same program
/// may otherwise print the same text under both and take other HBM.
const OLDER_LIBTPU_MARKER: &str = "\"used_scoped_memory_configs\":[],\"aliasing_operands\"";

/// Text only one backend writes into an optimized module, most telling first.
/// TPU layouts are read from the parsed shapes instead (see [`Target::detect`]).
const MARKERS: &[(Backend, &str)] = &[
    // GPU: the stream a fusion runs on, the latency-hiding scheduler's names,
    // cuBLAS/cuDNN/Triton calls (2020 dumps have only these).
    (Backend::Gpu, "\"operation_queue_id\""),
    (Backend::Gpu, "custom_call_target=\"__cublas"),
    (Backend::Gpu, "custom_call_target=\"__cudnn"),
    (Backend::Gpu, "\"triton_gemm_config\""),
    (Backend::Gpu, "custom_call_target=\"__triton"),
    (Backend::Gpu, "custom_call_target=\"__gpu$"),
    // CPU: the parallel task partitioning of loop fusions, oneDNN calls.
    (Backend::Cpu, "\"outer_dimension_partitions\""),
    (Backend::Cpu, "custom_call_target=\"__onednn$"),
    (Backend::Cpu, "_cpu_callback\""),
];

impl Target {
    /// Rules for `backend`, as the user asked.
    pub fn forced(backend: Backend) -> Target {
        Target {
            backend,
            evidence: Evidence::Forced,
            tpu_version: None,
            chip_source: None,
            newer_libtpu: false,
            libtpu_source: None,
        }
    }

    /// Reads the backend from what the module text holds: tiled layouts
    /// (`{1,0:T(8,128)}`) are TPU's; GPU and CPU leave their names in
    /// `backend_config` keys and custom-call targets. A module with none of
    /// these (a lone `add` from a 2020 GPU dump) gets CPU rules, and says so.
    pub fn detect(module: &Module) -> Target {
        if let Some(shape) = module
            .header
            .entry_layout
            .iter()
            .flat_map(|p| p.parameters.iter().chain(std::iter::once(&p.result)))
            .chain(module.instrs().map(|(_, i)| &*i.shape))
            .find(|s| has_tiles(s))
        {
            return Target {
                backend: Backend::Tpu,
                evidence: Evidence::Marker(format!("tiled layout {shape}")),
                tpu_version: None,
                chip_source: None,
                ..Target::libtpu_from_text(module)
            };
        }
        // Each marker missing from a module is a search of all its text: on
        // all cores, the first marker in the list's order wins.
        use rayon::prelude::*;
        let found = MARKERS
            .par_iter()
            .position_first(|&(_, marker)| module.text_contains(marker));
        if let Some(&(backend, marker)) = found.map(|k| &MARKERS[k]) {
            return Target {
                backend,
                evidence: Evidence::Marker(marker.to_string()),
                tpu_version: None,
                chip_source: None,
                newer_libtpu: false,
                libtpu_source: None,
            };
        }
        Target {
            backend: Backend::Cpu,
            evidence: Evidence::Assumed,
            tpu_version: None,
            chip_source: None,
            newer_libtpu: false,
            libtpu_source: None,
        }
    }

    /// What the text says of the libtpu that compiled a TPU module: 0.0.52's
    /// or 0.0.42's markers, else 0.0.42 assumed.
    fn libtpu_from_text(module: &Module) -> Target {
        let newer = NEWER_LIBTPU_MARKERS.iter().any(|m| module.text_contains(m));
        let shown = newer || module.text_contains(OLDER_LIBTPU_MARKER);
        Target {
            newer_libtpu: newer,
            libtpu_source: Some(if shown {
                LibtpuSource::Marker
            } else {
                LibtpuSource::Assumed
            }),
            ..Target::forced(Backend::Tpu)
        }
    }

    /// A TPU module whose libtpu nobody named and the text does not show.
    pub fn libtpu_assumed(&self) -> bool {
        self.libtpu_source == Some(LibtpuSource::Assumed)
    }

    /// The libtpu rules a user named (`Some(true)`: 0.0.52's); `None` leaves
    /// the text's word. No effect off TPU.
    pub fn with_libtpu(mut self, newer: Option<bool>) -> Target {
        if let (Backend::Tpu, Some(newer)) = (self.backend, newer) {
            self.newer_libtpu = newer;
            self.libtpu_source = Some(LibtpuSource::User);
        }
        self
    }

    /// The libtpu rules the dump folder's flag file shows (`Some(true)`:
    /// 0.0.52's), when the text and the user said nothing.
    pub fn with_libtpu_from_dump(mut self, newer: Option<bool>) -> Target {
        if let (true, Some(newer)) = (self.libtpu_assumed(), newer) {
            self.newer_libtpu = newer;
            self.libtpu_source = Some(LibtpuSource::Dump);
        }
        self
    }

    /// The same target under the other libtpu's rules, still assumed: the
    /// figures a module whose libtpu nobody named would have under them.
    pub fn as_other_libtpu(&self) -> Target {
        Target {
            newer_libtpu: !self.newer_libtpu,
            ..self.clone()
        }
    }

    /// A TPU module whose chip nobody named (not the dump, not `--tpu`):
    /// sizes that differ by chip are v5e's guess.
    pub fn chip_assumed(&self) -> bool {
        self.chip_source == Some(ChipSource::Assumed)
    }

    /// The TPU chip and who named it; `None` assumes v5e. No effect off TPU.
    pub fn with_tpu_version(mut self, named: Option<(TpuVersion, ChipSource)>) -> Target {
        if self.backend == Backend::Tpu {
            let (version, source) = named.unwrap_or((tpu::DEFAULT_VERSION, ChipSource::Assumed));
            self.tpu_version = Some(version);
            self.chip_source = Some(source);
        }
        self
    }

    /// `forced` when given, else what the text says.
    pub fn resolve(module: &Module, forced: Option<Backend>) -> Target {
        match forced {
            None => Target::detect(module),
            // The libtpu release is in the text even when the user names the backend.
            Some(Backend::Tpu) => Target {
                evidence: Evidence::Forced,
                ..Target::libtpu_from_text(module)
            },
            Some(backend) => Target::forced(backend),
        }
    }

    /// Alignment of the chunks in a memory space's temporary block and of the
    /// temporary allocations combined into it.
    pub fn heap_alignment(&self, color: u64) -> u64 {
        match self.backend {
            Backend::Cpu => CPU_ALIGNMENT,
            Backend::Gpu => GPU_ALIGNMENT,
            Backend::Tpu => tpu::heap_alignment(color),
        }
    }

    /// How a memory space's temporaries are packed first. libtpu packs HBM
    /// best fit in the order the values are first defined (its buffer
    /// assignment runs `FAST_MERGE_WITH_FALLBACK`: `FAST_MERGE` for spaces with
    /// a memory limit, XLA's default for the others), and packs it again with
    /// XLA's default when HBM's total is too large ([`Target::fallback_limit`]).
    /// Evidence for the first packing: hlomem's HBM
    /// groups re-packed in each order and every value's offset compared with
    /// XLA's `-buffer-assignment.txt`, on the 65 TPU modules with an HBM heap
    /// (`../shared/accelerators`, the holdout's v4/v5e/v5p/v6e, and 16 new
    /// donated Adam, scan, conv and transformer steps on v5e, v5p and v6e;
    /// libtpu 0.0.42 and 0.0.52): definition order agrees on all 65,
    /// biggest-first on 37, longest-first on 43. It is what made v5e's
    /// donated transformer steps and v5p's HBM exact. The on-chip spaces do
    /// not follow it: SMEM agrees with XLA's default (119 of 120 heaps, 69 in
    /// definition order).
    pub fn heap_order(&self, color: u64) -> HeapOrder {
        match (self.backend, color) {
            (Backend::Tpu, 0) => HeapOrder::StartTime,
            _ => HeapOrder::BestOfSizeAndTime,
        }
    }

    /// Above which total a memory space is packed again with XLA's default
    /// algorithm (biggest-first and longest-first, the smaller kept): libtpu's
    /// HBM (color 0) is packed in start order first (`FAST_MERGE_WITH_FALLBACK`)
    /// and again when its total passes the chip's limit. Off TPU HBM there is
    /// no first packing to fall back from.
    pub fn fallback_limit(&self, color: u64) -> FallbackLimit {
        match (self.backend, color) {
            (Backend::Tpu, 0) => {
                let (low, high) = match self.tpu_version {
                    Some(chip) if !self.chip_assumed() => tpu::fallback_limit(chip),
                    _ => tpu::fallback_limit_range(),
                };
                FallbackLimit::Between(low, high)
            }
            _ => FallbackLimit::None,
        }
    }

    /// Bytes the backend allocates for the top-level buffer of `shape` (a
    /// tuple's index table, not its elements).
    pub fn buffer_size(&self, shape: &Shape) -> u64 {
        match self.backend {
            Backend::Tpu => {
                tpu::buffer_size(shape, self.tpu_version.unwrap_or(tpu::DEFAULT_VERSION))
            }
            Backend::Cpu | Backend::Gpu => shape.byte_size(),
        }
    }

    /// Whether every buffer of `shape` has a size that fits in 64 bits on this
    /// backend (TPU pads to tiles, so a shape that fits elsewhere may not).
    pub fn sizes_fit(&self, shape: &Shape) -> bool {
        match self.backend {
            Backend::Tpu => tpu::sizes_fit(shape),
            Backend::Cpu | Backend::Gpu => shape.sizes_fit(),
        }
    }

    /// Bytes of a whole value of this shape: a tuple's index table and every
    /// element, nested; what an entry parameter or the result occupies.
    pub fn total_size(&self, shape: &Shape) -> u64 {
        shape.total_size_with(&|s| self.buffer_size(s))
    }

    /// The memory space (XLA's buffer "color") a buffer of this shape lives in.
    pub fn memory_space(&self, shape: &Shape) -> u64 {
        match (self.backend, shape) {
            (Backend::Tpu, Shape::Array(a)) => a.layout.as_ref().map_or(0, |l| l.memory_space),
            _ => 0,
        }
    }

    /// The memory space and bytes of a value of `shape` defined by an
    /// instruction of a computation on execution thread `thread` (`None`: the
    /// main thread): [`Self::memory_space`] and [`Self::buffer_size`], except
    /// where the thread places its values elsewhere (TPU SparseCore tuples).
    pub fn value_placement(&self, shape: &Shape, thread: Option<&str>) -> (u64, u64) {
        let on_thread = match self.backend {
            Backend::Tpu => tpu::thread_tuple_placement(shape, thread),
            Backend::Cpu | Backend::Gpu => None,
        };
        on_thread.unwrap_or_else(|| (self.memory_space(shape), self.buffer_size(shape)))
    }

    /// Whether XLA's buffer assignment itself places this space's buffers, so
    /// that hlomem's replay gives XLA's number. TPU's on-chip spaces are placed
    /// earlier, by memory-space assignment, at offsets the HLO text does not show.
    pub fn space_is_exact(&self, color: u64) -> bool {
        match self.backend {
            Backend::Cpu | Backend::Gpu => true,
            Backend::Tpu => color == 0,
        }
    }

    /// Whether an allocation that may be returned (a donated parameter's, an
    /// output's) may take in a buffer other than its own, and whether a
    /// returned buffer may move into another one's allocation: XLA's
    /// `must_not_live_out` hook, asked of every value on both sides
    /// (`MaybeAssignBuffer`).
    ///
    /// Newer libtpu answers "must not live out" for every value, so such an
    /// allocation holds exactly the values of its own buffer. Evidence: in 30
    /// libtpu 0.0.52 modules (v5e and v6e: the shared five, optimizer steps
    /// with and without donation, scans, loops, conds; XLA's
    /// `*-buffer-assignment.txt`) no maybe-live-out allocation holds a second
    /// buffer, whatever its shape, layout or computation: f32 arrays of the
    /// very shape of an output (the m/v temporaries of an undonated Adam step)
    /// stay in the temp block as much as bf16 activations or `{0,1}`-layout
    /// copies beside a `{1,0}` donated weight. libtpu 0.0.42 lets them in.
    pub fn may_join_live_out(&self) -> bool {
        !self.newer_libtpu
    }

    /// Whether hlomem knows the order in which XLA joins a memory space's
    /// temporary pieces (the heap and the temporary tuple tables,
    /// `CombineTempAllocations`), which decides the block's padding: XLA's
    /// own order (the allocations in creation order, moved by libstdc++'s
    /// `std::partition`), which libtpu 0.0.42 keeps. libtpu 0.0.52 makes its
    /// allocations in another order, not known: its reports list the same
    /// program's allocations in one order on v5e and v6e although v6e's tuple
    /// tables are smaller (32 and 64 bytes, v5e's 512), and the piece it puts
    /// last is not always the one XLA's order puts last: on v5p and v6e a
    /// 32-byte table instead of a 64-byte one (HBM 32 or 64 bytes over XLA's
    /// on gradient-accumulation and GRU scans). Where XLA's order ends with
    /// the heap, libtpu's did too in all 52 holdout modules; where it ends
    /// with a table and the tables differ in padding, the size is "about".
    pub fn temp_piece_order_known(&self) -> bool {
        !(self.backend == Backend::Tpu && self.newer_libtpu)
    }

    /// Whether an async computation's result starts at its async-start
    /// (newer libtpu) rather than at its own root's position.
    pub fn async_result_starts_at_start(&self) -> bool {
        self.newer_libtpu
    }

    /// The most bytes the memory-space assignment may lay out in a space it
    /// places (TPU VMEM, on a measured chip; where the chip is assumed, the
    /// largest of the measured chips' bounds): hlomem's packing of that space,
    /// which only approximates the assignment's, is held below it.
    pub fn preset_space_limit(&self, color: u64) -> Option<u64> {
        match (self.backend, color) {
            (Backend::Tpu, 1) => match self.tpu_version {
                Some(chip) if !self.chip_assumed() => tpu::vmem_assignment_limit(chip),
                _ => tpu::vmem_assignment_limit_any(),
            },
            _ => None,
        }
    }

    /// Spaces whose block XLA creates before assigning any buffer: the one
    /// memory-space assignment lays out. That is VMEM (color 1), except on v4,
    /// whose assignment fills color 3 and leaves no VMEM block (libtpu's v4
    /// buffer assignments have no color-1 allocation).
    pub fn preset_colors(&self) -> &'static [u64] {
        match (self.backend, self.tpu_version) {
            (Backend::Tpu, Some(TpuVersion::V4)) => &[3],
            (Backend::Tpu, _) => &[1],
            (Backend::Cpu | Backend::Gpu, _) => &[],
        }
    }

    /// The name XLA's memory-usage report gives a memory space.
    pub fn space_name(&self, color: u64) -> String {
        match (self.backend, color) {
            (_, 0) => "default".into(),
            (Backend::Tpu, c) => tpu::space_name(c),
            (_, c) => format!("color {c}"),
        }
    }
}

fn has_tiles(shape: &Shape) -> bool {
    match shape {
        Shape::Array(a) => a.layout.as_ref().is_some_and(|l| !l.tiles.is_empty()),
        Shape::Tuple(elements) => elements.iter().any(has_tiles),
        Shape::Buffer(inner) => has_tiles(inner),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(copy_config: &str) -> Module {
        let text = format!(
            "HloModule m, is_scheduled=true\n\nENTRY %e (p: f32[8]) -> f32[8] {{\n  \
             %p = f32[8]{{0:T(256)}} parameter(0)\n  \
             %cs = (f32[8]{{0:T(256)S(1)}}, f32[8]{{0:T(256)}}, u32[]{{:S(2)}}) copy-start(%p){copy_config}\n  \
             ROOT %cd = f32[8]{{0:T(256)S(1)}} copy-done(%cs)\n}}\n"
        );
        crate::parse_text("m.txt", text).expect("parses")
    }

    #[test]
    fn the_backend_and_the_libtpu_era_come_from_the_text() {
        let old = Target::detect(&module(""));
        assert_eq!(old.backend, Backend::Tpu);
        assert!(!old.newer_libtpu);
        let new = Target::detect(&module(r#", backend_config={"dma_priority":1}"#));
        assert!(new.newer_libtpu);
        assert!(old.may_join_live_out());
        assert!(!new.may_join_live_out());
    }

    #[test]
    fn only_tpu_hbm_is_packed_in_definition_order() {
        let tpu = Target::detect(&module(""));
        assert_eq!(tpu.heap_order(0), HeapOrder::StartTime);
        assert_eq!(tpu.heap_order(2), HeapOrder::BestOfSizeAndTime);
        assert!(tpu.space_is_exact(0));
        let v5p = tpu
            .clone()
            .with_tpu_version(Some((TpuVersion::V5p, ChipSource::User)));
        assert!(v5p.space_is_exact(0));
        let gpu = Target::forced(Backend::Gpu);
        assert_eq!(gpu.heap_order(0), HeapOrder::BestOfSizeAndTime);
    }

    /// Only VMEM is held to the memory-space assignment's bound, the chip's
    /// where it is named and measured, the largest measured one where not.
    #[test]
    fn vmem_is_bounded_by_the_named_chip() {
        let named = |chip| {
            Target::detect(&module(""))
                .with_tpu_version(Some((chip, ChipSource::User)))
                .preset_space_limit(1)
        };
        assert_eq!(named(TpuVersion::V5e), Some(112 << 20));
        assert_eq!(named(TpuVersion::V6e), Some(96 << 20));
        assert_eq!(named(TpuVersion::V5p), None);
        let assumed = Target::detect(&module("")).with_tpu_version(None);
        assert_eq!(assumed.preset_space_limit(1), Some(112 << 20));
        assert_eq!(assumed.preset_space_limit(0), None);
        assert_eq!(assumed.preset_space_limit(2), None);
        assert_eq!(Target::forced(Backend::Gpu).preset_space_limit(1), None);
    }
}
