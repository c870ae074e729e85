//! Turns a parsed message into an explanation a person can act on: what
//! failed, what each number means applied to the user's numbers, which buffers
//! fill the memory, and what to try, with the bytes each change would save.

use serde::Serialize;

use super::dump::DumpLinks;
use super::model::*;
use crate::units::human_bytes;

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Explanation {
    pub format: &'static str,
    /// A human description of the format.
    pub format_description: &'static str,
    pub truncated: bool,
    /// What failed, in one or two sentences.
    pub what_failed: Vec<String>,
    pub stats: Vec<StatExplained>,
    /// How the stats add up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arithmetic: Option<String>,
    pub buffer_groups: Vec<BufferGroup>,
    /// TPU: memory space, usage against capacity, padding, the tables in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tpu: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub advice: Vec<Advice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dump: Option<DumpLinks>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct StatExplained {
    pub name: &'static str,
    pub bytes: u64,
    pub approximate: bool,
    pub meaning: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct BufferGroup {
    pub count: usize,
    pub shape: String,
    /// `None` when the message does not give the size.
    pub each_bytes: Option<u64>,
    /// `None` without a size, or when the sizes add up past 2^64 bytes.
    pub total_bytes: Option<u64>,
    /// One line per kind of buffer in the group ("2 are the jitted function's inputs").
    pub parts: Vec<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Advice {
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saves_bytes: Option<u64>,
    pub why: String,
}

fn describe_format(format: OomFormat) -> &'static str {
    match format {
        OomFormat::GpuAllocation => "GPU: an allocation failed at run time (the one-line form)",
        OomFormat::GpuBufferAssignment => {
            "GPU: an allocation failed, with XLA's buffer-assignment statistics"
        }
        OomFormat::GpuFailedRequest => "GPU: a device allocation request failed",
        OomFormat::GpuBfcAllocator => "GPU: the BFC allocator ran out of memory",
        OomFormat::GpuCompileWarnings => "GPU: compile-time memory warnings",
        OomFormat::HostAllocation => "host memory allocation failed",
        OomFormat::TpuCompile => "TPU: the program does not fit (compile time)",
        OomFormat::TpuCompileAbort => "TPU: compilation aborted early, the program cannot fit",
        OomFormat::TpuSparseCore => "TPU: TensorCore and SparseCore memory together do not fit",
        OomFormat::TpuRuntimeReserve => {
            "TPU: the program's memory could not be reserved at run time"
        }
        OomFormat::TpuRuntimeAllocate => "TPU: a buffer could not be allocated at run time",
    }
}

/// Bytes of one element of a shape string such as `f64[42994,42994]`.
fn element_type(shape: &str) -> Option<crate::hlo::ElementType> {
    crate::hlo::ElementType::parse(shape.split('[').next()?.trim())
}

fn h(a: Option<Amount>) -> String {
    a.map_or_else(|| "?".into(), |a| human_bytes(a.bytes))
}

/// `label size, label size, ...` for a table of labelled amounts.
fn labelled(rows: &[(String, Option<Amount>)]) -> String {
    let parts: Vec<String> = rows.iter().map(|(l, a)| format!("{l} {}", h(*a))).collect();
    parts.join(", ")
}

pub fn explain(msg: &OomMessage, dump: Option<DumpLinks>) -> Explanation {
    let mut e = Explanation {
        format: msg.format.name(),
        format_description: describe_format(msg.format),
        truncated: msg.truncated,
        what_failed: what_failed(msg),
        stats: explain_stats(&msg.stats),
        arithmetic: arithmetic(&msg.stats),
        buffer_groups: group_buffers(msg),
        tpu: explain_tpu(msg),
        warnings: msg.warnings.iter().map(|w| w.message.clone()).collect(),
        advice: Vec::new(),
        dump,
    };
    e.advice = advise(msg, &e);
    if msg.truncated {
        e.what_failed.push(
            "The message is cut off (or starts in its middle): this explains what it shows; paste the whole \
             message for the rest."
                .into(),
        );
    }
    e
}

fn what_failed(msg: &OomMessage) -> Vec<String> {
    let mut out = Vec::new();
    let device = if msg.host {
        "host memory"
    } else if msg.format.is_tpu() {
        "the TPU"
    } else {
        "the GPU"
    };
    if let Some(r) = msg.requested {
        let exact = if r.approximate {
            String::new()
        } else {
            format!(" ({} bytes)", r.bytes)
        };
        match msg.format {
            OomFormat::TpuRuntimeReserve => out.push(format!(
                "At run time the TPU could not reserve {} for the program; only {} were free.",
                human_bytes(r.bytes),
                h(msg.tpu.as_ref().and_then(|t| t.free))
            )),
            OomFormat::TpuRuntimeAllocate => out.push(format!(
                "At run time the TPU could not allocate a buffer of {}; only {} were free{}.",
                human_bytes(r.bytes),
                h(msg.tpu.as_ref().and_then(|t| t.free)),
                msg.device
                    .as_ref()
                    .map(|d| format!(" on {d}"))
                    .unwrap_or_default()
            )),
            _ => out.push(format!(
                "XLA asked {device} for one block of {}{exact} and could not get it.",
                human_bytes(r.bytes)
            )),
        }
        // Which allocation of the program is that? (notes §3.4)
        let s = &msg.stats;
        let close = |a: Option<Amount>| a.is_some_and(|a| within_rounding(a, r));
        if close(s.preallocated_temp) && s.preallocated_temp.is_some_and(|a| a.bytes > 0) {
            out.push("That is the whole preallocated temp block: the scratch memory for the program's intermediate values, \
                      allocated in one piece when the program starts.".into());
        } else if let Some(b) = msg.peak_buffers.iter().find(|b| {
            b.size.is_some_and(|a| within_rounding(a, r)) && b.kind.as_deref() != Some("parameter")
        }) {
            let what = buffer_phrase(b);
            let output = if close(s.maybe_live_out) {
                " (the program's result: maybe_live_out)"
            } else {
                ""
            };
            out.push(format!("That is the size of {what}{output}."));
        } else if close(s.maybe_live_out) {
            out.push("That is the size of the program's outputs (maybe_live_out).".into());
        }
    }
    if let Some(t) = &msg.tpu {
        if let (Some(used), Some(cap)) = (t.used, t.capacity) {
            let space = t.memory_space.as_deref().unwrap_or("hbm");
            out.push(format!(
                "The compiled program needs {} of {space} but {} are available: {} too much.",
                human_bytes(used.bytes),
                human_bytes(cap.bytes),
                h(t.exceeded_by
                    .or(Some(Amount::exact(used.bytes.saturating_sub(cap.bytes)))))
            ));
        } else if let Some(space) = &t.memory_space {
            if msg.format == OomFormat::TpuCompile {
                out.push(format!(
                    "The compiled program does not fit in the TPU's {space} memory."
                ));
            }
        }
        if let (Some(req), Some(avail)) = (t.requires, t.available) {
            out.push(format!(
                "XLA stopped compiling early: the program requires {} and the device has {} available.",
                human_bytes(req.bytes),
                human_bytes(avail.bytes)
            ));
        }
    }
    if out.is_empty() && !msg.warnings.is_empty() {
        out.push("The compiler warned that the program will not fit; the allocation failure that follows is the consequence.".into());
    }
    out
}

/// A rounded size (`13.77GiB`) and an exact byte count match if they print the same.
fn within_rounding(a: Amount, b: Amount) -> bool {
    if !a.approximate && !b.approximate {
        return a.bytes == b.bytes;
    }
    human_bytes(a.bytes) == human_bytes(b.bytes)
        || a.bytes.abs_diff(b.bytes) <= a.bytes.max(b.bytes) / 500
}

fn buffer_phrase(b: &PeakBuffer) -> String {
    described(b, true)
}

/// "the result of `add` at kernels.py:178", with the shape in front when asked.
fn described(b: &PeakBuffer, with_shape: bool) -> String {
    let shape = b.shape.as_deref().unwrap_or("a buffer");
    let op = b
        .op_name
        .as_deref()
        .map(|o| o.rsplit('/').next().unwrap_or(o).to_string());
    let source = match (&b.source_file, b.source_line) {
        (Some(f), Some(l)) => format!(" at {f}:{l}"),
        _ => String::new(),
    };
    let label = b
        .label
        .as_deref()
        .filter(|l| l.len() < 40)
        .map(|l| format!(" ({l})"))
        .unwrap_or_default();
    let lead = if with_shape {
        format!("{shape}, ")
    } else {
        String::new()
    };
    match (b.kind.as_deref(), op) {
        (Some("parameter"), _) => format!("an input {shape}"),
        (_, Some(op)) => format!("{lead}the result of `{op}`{label}{source}"),
        _ if with_shape => format!("{shape}{label}"),
        _ => format!("a buffer{label}"),
    }
}

fn explain_stats(s: &Stats) -> Vec<StatExplained> {
    let rows: [(&'static str, Option<Amount>, &str); 7] = [
        ("parameter allocation", s.parameter, "the arguments the caller passed in, held for the whole run (donated ones included)"),
        ("constant allocation", s.constant, "constants baked into the program"),
        ("maybe_live_out allocation", s.maybe_live_out, "buffers that may be returned as results: allocated separately so they survive the program (donated parameters that receive an output count here too)"),
        ("preallocated temp allocation", s.preallocated_temp, "one scratch block for all intermediate values, packed by XLA's heap simulator and allocated whole when the program starts"),
        ("preallocated temp fragmentation", s.preallocated_temp_fragmentation, "wasted space inside the temp block: gaps the packing could not fill"),
        ("total allocation", s.total, "everything this program needs at once, besides other arrays already on the device"),
        ("total fragmentation", s.total_fragmentation, "wasted space: the total minus the most bytes ever live at once (packing gaps, alignment, constants)"),
    ];
    rows.into_iter()
        .filter_map(|(name, amount, meaning)| {
            amount.map(|a| StatExplained {
                name,
                bytes: a.bytes,
                approximate: a.approximate,
                meaning: meaning.to_string(),
            })
        })
        .collect()
}

fn arithmetic(s: &Stats) -> Option<String> {
    let total = s.total?;
    let parts = [
        ("parameters", s.parameter),
        ("outputs", s.maybe_live_out),
        ("temp", s.preallocated_temp),
        ("constants", s.constant),
    ];
    let present: Vec<(&str, Amount)> = parts
        .iter()
        .filter_map(|(n, a)| a.map(|a| (*n, a)))
        .filter(|(_, a)| a.bytes > 0)
        .collect();
    if present.is_empty() {
        return None;
    }
    // A sum past 2^64 bytes is no statement at all.
    let sum: u64 = present
        .iter()
        .map(|(_, a)| a.bytes)
        .try_fold(0u64, u64::checked_add)?;
    let terms: Vec<String> = present
        .iter()
        .map(|(n, a)| format!("{} {n}", human_bytes(a.bytes)))
        .collect();
    let sum_amount = Amount {
        bytes: sum,
        approximate: true,
    };
    if within_rounding(sum_amount, total) {
        Some(format!(
            "{} = {} total",
            terms.join(" + "),
            human_bytes(total.bytes)
        ))
    } else if sum > total.bytes {
        Some(format!(
            "{} = {}, {} more than the total {}: donated parameters that receive outputs are counted both as \
             parameters and as outputs",
            terms.join(" + "),
            human_bytes(sum),
            human_bytes(sum - total.bytes),
            human_bytes(total.bytes)
        ))
    } else {
        Some(format!(
            "{} = {}; the total {} also holds {} of reducer scratch and alignment",
            terms.join(" + "),
            human_bytes(sum),
            human_bytes(total.bytes),
            human_bytes(total.bytes - sum)
        ))
    }
}

fn group_buffers(msg: &OomMessage) -> Vec<BufferGroup> {
    let mut groups: Vec<BufferGroup> = Vec::new();
    let mut members: Vec<Vec<&PeakBuffer>> = Vec::new();
    for b in &msg.peak_buffers {
        let shape = b
            .shape
            .clone()
            .unwrap_or_else(|| "unknown shape (cut off)".into());
        let each = b.size.map(|a| a.bytes);
        match groups
            .iter()
            .position(|g| g.shape == shape && g.each_bytes == each)
        {
            Some(i) => members[i].push(b),
            None => {
                groups.push(BufferGroup {
                    count: 0,
                    shape,
                    each_bytes: each,
                    total_bytes: None,
                    parts: Vec::new(),
                });
                members.push(vec![b]);
            }
        }
    }
    for (g, bs) in groups.iter_mut().zip(&members) {
        g.count = bs.len();
        g.total_bytes = g.each_bytes.and_then(|e| e.checked_mul(bs.len() as u64));
        let params = bs
            .iter()
            .filter(|b| b.kind.as_deref() == Some("parameter"))
            .count();
        if params > 0 {
            let what = if params == 1 {
                "is an input"
            } else {
                "are inputs"
            };
            g.parts.push(format!(
                "{params} {what} of the jitted function (entry parameters), held for the whole run"
            ));
        }
        let mut others: Vec<(String, usize)> = Vec::new();
        for b in bs.iter().filter(|b| b.kind.as_deref() != Some("parameter")) {
            let phrase = described(b, false);
            match others.iter_mut().find(|(p, _)| *p == phrase) {
                Some((_, n)) => *n += 1,
                None => others.push((phrase, 1)),
            }
        }
        for (phrase, n) in others {
            let verb = if n == 1 { "is" } else { "are" };
            g.parts.push(format!("{n} {verb} {phrase}"));
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.total_bytes));
    groups
}

fn explain_tpu(msg: &OomMessage) -> Vec<String> {
    let Some(t) = &msg.tpu else { return Vec::new() };
    let mut out = Vec::new();
    match t.memory_space.as_deref() {
        Some("vmem") => out.push("VMEM is the TPU core's small on-chip vector memory (tens of MiB). Running out of it is a kernel's \
                                 working set not fitting, usually a Pallas or fusion block size, not your arrays' total size.".into()),
        Some("smem") => out.push("SMEM is the TPU core's tiny scalar memory (about 1 MiB): a kernel uses too many scalars or \
                                 scalar-prefetched indices.".into()),
        Some(space) => out.push(format!("{} is the TPU's main device memory.", space.to_uppercase())),
        None => {}
    }
    if let Some(total) = t.total_usage {
        let rows = labelled(&t.usage_rows);
        out.push(format!(
            "Total usage is at least {}: {}.",
            human_bytes(total.bytes),
            rows
        ));
    }
    if let Some(req) = t.program_requirement {
        let rows = labelled(&t.requirement_rows);
        out.push(format!(
            "The program itself needs {}: {} (HLO temp is the scratch for intermediate values).",
            human_bytes(req.bytes),
            rows
        ));
    }
    if let Some(out_size) = t.output_size {
        out.push(format!(
            "Outputs take {}, of which {} reuse argument memory.",
            human_bytes(out_size.bytes),
            h(t.output_shared_with_arguments)
        ));
    }
    let padding: u64 = msg
        .peak_buffers
        .iter()
        .filter_map(|b| b.padding.map(|p| p.bytes))
        .sum_or_zero();
    if padding > 0 {
        out.push(format!(
            "Tile padding wastes {} in the largest allocations listed: TPU layouts round the last two dimensions up to \
             multiples of 8 and 128, so a dimension of 18 takes the room of 128.",
            human_bytes(padding)
        ));
    }
    if !t.capacity_rows.is_empty() {
        let rows: Vec<String> = t
            .capacity_rows
            .iter()
            .map(|(l, b)| {
                format!(
                    "{l} {}",
                    crate::units::human_bytes_signed(*b).trim_start_matches('+')
                )
            })
            .collect();
        out.push(format!(
            "Device memory at that moment: {}.",
            rows.join(", ")
        ));
    }
    if let Some(sc) = t.sparse_core {
        out.push(format!(
            "TensorCore buffers take {} and SparseCore (embedding) buffers {}, more than the {} available.",
            h(t.used),
            human_bytes(sc.bytes),
            h(t.capacity)
        ));
    }
    out
}

fn advise(msg: &OomMessage, e: &Explanation) -> Vec<Advice> {
    let mut advice = Vec::new();
    let params: Vec<&PeakBuffer> = msg
        .peak_buffers
        .iter()
        .filter(|b| b.kind.as_deref() == Some("parameter"))
        .collect();
    let results: Vec<&PeakBuffer> = msg
        .peak_buffers
        .iter()
        .filter(|b| b.kind.as_deref() == Some("instruction"))
        .collect();

    // Donation: an output with the shape of an input can be written into it.
    let linked = e
        .dump
        .as_ref()
        .map(|d| d.donation_candidates.clone())
        .unwrap_or_default();
    if !linked.is_empty() {
        for c in linked {
            advice.push(Advice {
                action: format!("Donate argument {} (`{}`): jax.jit(fn, donate_argnums={})", c.parameter, c.argument, c.parameter),
                saves_bytes: Some(c.bytes),
                why: format!(
                    "the output {} ({}) could be written into that input's buffer, but the input is not donated",
                    c.output, c.shape
                ),
            });
        }
    } else if msg.stats.maybe_live_out.is_some_and(|a| a.bytes > 0) || msg.stats.is_empty() {
        if let Some(r) = results.iter().find(|r| {
            params
                .iter()
                .any(|p| p.shape == r.shape && p.size == r.size)
        }) {
            let same = params.iter().filter(|p| p.shape == r.shape).count();
            advice.push(Advice {
                action: "Donate the input that has the result's shape: jax.jit(fn, donate_argnums=0) if it is argument 0"
                    .into(),
                saves_bytes: r.size.map(|a| a.bytes),
                why: format!(
                    "{same} input{} the same shape and dtype as the result {} ({}); a donated input's buffer receives the \
                     result instead of a new {} allocation (`hlomem explain --dump DIR` names the argument)",
                    if same == 1 { " has" } else { "s have" },
                    r.shape.as_deref().unwrap_or("?"),
                    h(r.size),
                    h(r.size)
                ),
            });
        }
    }

    // Wide types: f64 and c128 halve in f32 / c64.
    let wide: u64 = msg
        .peak_buffers
        .iter()
        .filter(|b| {
            b.shape.as_deref().and_then(element_type).is_some_and(|t| {
                matches!(
                    t,
                    crate::hlo::ElementType::F64 | crate::hlo::ElementType::C128
                )
            })
        })
        .filter_map(|b| b.size.map(|a| a.bytes))
        .sum_or_zero();
    if wide > 0 {
        advice.push(Advice {
            action: "Use float32 instead of float64 (turn off jax_enable_x64, or cast with .astype(jnp.float32))".into(),
            saves_bytes: Some(wide / 2),
            why: format!("{} of the buffers listed are 64-bit (x64 is on); 32-bit halves each of them", human_bytes(wide)),
        });
    }

    // A materialized broadcast.
    let broadcast = msg.peak_buffers.iter().find(|b| {
        b.label.as_deref() == Some("broadcast")
            || b.op_name
                .as_deref()
                .is_some_and(|o| o.contains("broadcast"))
    });
    if let Some(b) = broadcast {
        advice.push(Advice {
            action: "Avoid materializing the broadcast: reduce or contract it in the same expression, or compute it in chunks (lax.map)".into(),
            saves_bytes: b.size.map(|a| a.bytes),
            why: format!("{} is a broadcast made concrete; every element is a copy", described(b, b.shape.is_some())),
        });
    }

    // Temporaries dominate: rematerialize.
    let temp = msg.stats.preallocated_temp.map(|a| a.bytes).or_else(|| {
        msg.tpu.as_ref().and_then(|t| {
            t.requirement_rows
                .iter()
                .find(|(l, _)| l.starts_with("HLO temp"))
                .and_then(|(_, a)| a.map(|a| a.bytes))
        })
    });
    let total = msg
        .stats
        .total
        .or_else(|| msg.tpu.as_ref().and_then(|t| t.used.or(t.total_usage)))
        .map(|a| a.bytes);
    if let (Some(temp), Some(total)) = (temp, total) {
        if temp.saturating_mul(2) > total {
            advice.push(Advice {
                action: "Rematerialize: wrap the model's layers in jax.checkpoint (jax.remat) so activations are recomputed in the backward pass instead of stored".into(),
                saves_bytes: None,
                why: format!(
                    "intermediate values take {} of the {} needed; most of them are activations kept for the gradient",
                    human_bytes(temp),
                    human_bytes(total)
                ),
            });
        }
    }

    // TPU tile padding.
    let padding: u64 = msg
        .peak_buffers
        .iter()
        .filter_map(|b| b.padding.map(|p| p.bytes))
        .sum_or_zero();
    if padding > 0 {
        advice.push(Advice {
            action: "Reshape arrays so their last two dimensions are multiples of 8 and 128 (or move a small dimension out of the last two)".into(),
            saves_bytes: Some(padding),
            why: "TPU tiled layouts pad those dimensions; the listed allocations lose this much to padding".into(),
        });
    }

    if let Some(t) = &msg.tpu {
        if matches!(t.memory_space.as_deref(), Some("vmem") | Some("smem")) {
            advice.push(Advice {
                action: "Reduce the kernel's block sizes (Pallas BlockSpec) or its scratch buffers"
                    .into(),
                saves_bytes: t.exceeded_by.map(|a| a.bytes),
                why: "this memory space holds one kernel's working set, not whole arrays".into(),
            });
        }
        if matches!(
            msg.format,
            OomFormat::TpuRuntimeReserve | OomFormat::TpuRuntimeAllocate
        ) {
            advice.push(Advice {
                action: "Free device arrays you no longer need before this call (del them, avoid keeping old results), and donate inputs that are replaced".into(),
                saves_bytes: msg.requested.zip(t.free).map(|(r, f)| r.bytes.saturating_sub(f.bytes)),
                why: "the program fits the device but other live arrays occupy the room it needs at this moment".into(),
            });
        }
    }

    // The one-line GPU message says too little to point at a buffer.
    if msg.peak_buffers.is_empty() && msg.stats.is_empty() && msg.tpu.is_none() {
        advice.push(Advice {
            action: "See which buffers these are: dump the program (XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text), \
                     then run `hlomem analyze DIR` and `hlomem explain MESSAGE --dump DIR`"
                .into(),
            saves_bytes: None,
            why: "the message only says how much was requested; the dump has every buffer, its size and its source line, \
                  and compiling alone (jax.jit(f).lower(...).compile()) is enough to get it"
                .into(),
        });
    }
    if matches!(
        msg.format,
        OomFormat::GpuAllocation | OomFormat::GpuBufferAssignment | OomFormat::GpuFailedRequest
    ) {
        advice.push(Advice {
            action: "Check what else holds the GPU: JAX preallocates 75% of GPU memory by default \
                     (XLA_PYTHON_CLIENT_MEM_FRACTION, XLA_PYTHON_CLIENT_PREALLOCATE=false), and arrays from earlier steps stay \
                     until released"
                .into(),
            saves_bytes: None,
            why: "the program's own need is only part of what is on the device when the allocation fails".into(),
        });
    }
    // Sharding spreads arrays over devices.
    if total.is_some() || !msg.peak_buffers.is_empty() {
        advice.push(Advice {
            action: "Shard the large arrays across devices (jax.sharding.NamedSharding with a mesh)".into(),
            saves_bytes: None,
            why: "on N devices each holds 1/N of a sharded array; the saving depends on N and on which arrays you shard".into(),
        });
    }
    advice.sort_by_key(|a| std::cmp::Reverse(a.saves_bytes.unwrap_or(0)));
    advice
}

/// Adds byte counts read from a message; 0 (so the statement built on the sum
/// is left out) when they pass 2^64, which no real message does.
trait SumOrZero {
    fn sum_or_zero(self) -> u64;
}

impl<I: Iterator<Item = u64>> SumOrZero for I {
    fn sum_or_zero(mut self) -> u64 {
        self.try_fold(0u64, u64::checked_add).unwrap_or(0)
    }
}
