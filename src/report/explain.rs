//! The JSON contract of `hlomem explain`: the message's facts as exact
//! numbers, and the explanation built from them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::oom::explain::Explanation;
use crate::oom::feasibility::Feasibility;
use crate::oom::model::{Amount, OomMessage, PeakBuffer, ScopedAllocation, Stats, TpuUsage};

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ExplainReport {
    /// The explanation in one line (`explanation.verdict` in words).
    pub verdict: String,
    /// The recognized format (`gpu-buffer-assignment`, `tpu-compile`, ...).
    pub format: &'static str,
    pub truncated: bool,
    pub requested_bytes: Option<u64>,
    /// The requested size was printed rounded (`13.77GiB`): the nearest byte count.
    pub requested_approximate: bool,
    /// `parameter_bytes`, `constant_bytes`, `maybe_live_out_bytes`, `preallocated_temp_bytes`,
    /// `preallocated_temp_fragmentation_bytes`, `total_bytes`, `fragmentation_bytes`.
    pub stats: BTreeMap<&'static str, u64>,
    /// Which of `stats` were printed rounded.
    pub approximate: Vec<&'static str>,
    pub peak_buffers: Vec<PeakBufferJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpu: Option<TpuJson>,
    pub explanation: Explanation,
    /// `explanation.advice` in words, in the same order.
    pub advice: Vec<AdviceWords>,
    /// Where this message stands in the text (1 is the first).
    pub position: usize,
    /// The positions of the other messages that are the same failure on other devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub same_failure_as: Vec<usize>,
    /// Other out-of-memory messages in the same text, each explained, in the
    /// order they appear (this one, the first error, leads).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<ExplainReport>,
}

/// One piece of advice as people read it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct AdviceWords {
    pub action: String,
    pub why: String,
    /// `None`: the saving cannot be measured from the message.
    pub saves_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<&'static str>,
    /// What the message's figures say of it: that it closes the gap alone,
    /// or saves at most part of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feasibility: Option<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct PeakBufferJson {
    pub number: u64,
    pub size_bytes: Option<u64>,
    pub shape: Option<String>,
    pub kind: Option<String>,
    pub op_name: Option<String>,
    pub source_file: Option<String>,
    pub source_line: Option<u64>,
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unpadded_size_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub padding_bytes: Option<u64>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct TpuJson {
    pub memory_space: Option<String>,
    pub used_bytes: Option<u64>,
    pub capacity_bytes: Option<u64>,
    pub exceeded_by_bytes: Option<u64>,
    pub total_usage_bytes: Option<u64>,
    pub program_requirement_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservable_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub largest_free_region_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scoped_size_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scoped_limit_bytes: Option<u64>,
    /// Every size here is printed rounded by the TPU compiler.
    pub approximate: bool,
}

fn feasibility_words(f: &Feasibility) -> Option<String> {
    let h = crate::units::human_bytes;
    match f {
        Feasibility::Closes { gap_bytes } => {
            Some(format!("alone, this closes the {} gap", h(*gap_bytes)))
        }
        Feasibility::Partial {
            saves_at_most,
            gap_bytes,
        } => Some(format!(
            "not alone: it saves at most {} of the {} over",
            h(*saves_at_most),
            h(*gap_bytes)
        )),
        Feasibility::Unknown => None,
    }
}

fn bytes(a: Option<Amount>) -> Option<u64> {
    a.map(|a| a.bytes)
}

/// `stats` by name, and the names of those printed rounded.
fn stats_json(s: &Stats) -> (BTreeMap<&'static str, u64>, Vec<&'static str>) {
    let Stats {
        parameter,
        constant,
        maybe_live_out,
        preallocated_temp,
        preallocated_temp_fragmentation,
        total,
        total_fragmentation,
    } = *s;
    let mut stats = BTreeMap::new();
    let mut approximate = Vec::new();
    for (name, value) in [
        ("parameter_bytes", parameter),
        ("constant_bytes", constant),
        ("maybe_live_out_bytes", maybe_live_out),
        ("preallocated_temp_bytes", preallocated_temp),
        (
            "preallocated_temp_fragmentation_bytes",
            preallocated_temp_fragmentation,
        ),
        ("total_bytes", total),
        ("fragmentation_bytes", total_fragmentation),
    ] {
        if let Some(a) = value {
            stats.insert(name, a.bytes);
            if a.approximate {
                approximate.push(name);
            }
        }
    }
    (stats, approximate)
}

impl From<&PeakBuffer> for PeakBufferJson {
    fn from(b: &PeakBuffer) -> PeakBufferJson {
        let PeakBuffer {
            number,
            size,
            shape,
            kind,
            op_name,
            source_file,
            source_line,
            label,
            unpadded_size,
            padding,
            // Kept as parsed; no report has shown them. `complete` is the parser's.
            op_type: _,
            deduplicated_name: _,
            complete: _,
        } = b;
        PeakBufferJson {
            number: *number,
            size_bytes: bytes(*size),
            shape: shape.clone(),
            kind: kind.clone(),
            op_name: op_name.clone(),
            source_file: source_file.clone(),
            source_line: *source_line,
            label: label.clone(),
            unpadded_size_bytes: bytes(*unpadded_size),
            padding_bytes: bytes(*padding),
        }
    }
}

impl From<&TpuUsage> for TpuJson {
    fn from(t: &TpuUsage) -> TpuJson {
        let TpuUsage {
            memory_space,
            used,
            capacity,
            exceeded_by,
            total_usage,
            program_requirement,
            free,
            reserved,
            reservable,
            largest_free_region,
            scoped,
            // What the explanation reads (its TPU notes, verdict, readings and
            // advice); `stack_shape` is kept as parsed, shown nowhere.
            usage_rows: _,
            output_size: _,
            output_shared_with_arguments: _,
            requirement_rows: _,
            requires: _,
            available: _,
            capacity_rows: _,
            sparse_core: _,
            stack_instruction: _,
            stack_shape: _,
            custom_kernel: _,
        } = t;
        let (scoped_size, scoped_limit) = match scoped {
            Some(ScopedAllocation {
                size,
                limit,
                exceeded_by: _,
            }) => (*size, *limit),
            None => (None, None),
        };
        TpuJson {
            memory_space: memory_space.clone(),
            used_bytes: bytes(*used),
            capacity_bytes: bytes(*capacity),
            exceeded_by_bytes: bytes(*exceeded_by),
            total_usage_bytes: bytes(*total_usage),
            program_requirement_bytes: bytes(*program_requirement),
            free_bytes: bytes(*free),
            reserved_bytes: bytes(*reserved),
            reservable_bytes: bytes(*reservable),
            largest_free_region_bytes: bytes(*largest_free_region),
            scoped_size_bytes: bytes(scoped_size),
            scoped_limit_bytes: bytes(scoped_limit),
            approximate: true,
        }
    }
}

impl ExplainReport {
    /// The report of the leading message, with the others of the same text.
    pub fn with_others(mut self, others: Vec<ExplainReport>) -> ExplainReport {
        self.others = others;
        self
    }

    /// This message and the others, in the order they appear in the text.
    pub fn in_order(&self) -> Vec<&ExplainReport> {
        let mut all: Vec<&ExplainReport> = std::iter::once(self).chain(&self.others).collect();
        all.sort_by_key(|r| r.position);
        all
    }

    /// The reports of every message of a log, in text order, as one report:
    /// the first error leads (its fields are the document's), the others
    /// follow it under `others`.
    pub fn of_log(
        messages: &[OomMessage],
        explanations: Vec<Explanation>,
    ) -> Option<ExplainReport> {
        let lead = crate::oom::lead_index(messages)?;
        let groups = crate::oom::relate::same_failure(messages);
        let mut reports: Vec<ExplainReport> = messages
            .iter()
            .zip(explanations)
            .enumerate()
            .map(|(i, (m, e))| {
                let mut r = ExplainReport::build(m, e);
                r.position = i + 1;
                r.same_failure_as = groups
                    .iter()
                    .find(|g| g.contains(&i))
                    .map(|g| g.iter().filter(|&&j| j != i).map(|j| j + 1).collect())
                    .unwrap_or_default();
                r
            })
            .collect();
        let first = reports.remove(lead);
        Some(first.with_others(reports))
    }

    /// The report of one message. Every field of the message's model
    /// (`oom::model`) is named here, taken or left to the explanation, so a
    /// field added there does not compile until this says which.
    pub fn build(msg: &OomMessage, explanation: Explanation) -> ExplainReport {
        let OomMessage {
            format,
            truncated,
            requested,
            stats,
            peak_buffers,
            tpu,
            // What the explanation says of these (its placement, situation,
            // failures and readings), not repeated here.
            host: _,
            allocator: _,
            device: _,
            warnings: _,
            driver_error: _,
            tensor: _,
            not_a_failure: _,
            unified: _,
            library: _,
            library_status: _,
            device_total: _,
            device_free: _,
            replica: _,
            xla_bug: _,
            line: _,
        } = msg;
        let (stats, approximate) = stats_json(stats);
        ExplainReport {
            format: format.name(),
            truncated: *truncated,
            requested_bytes: bytes(*requested),
            requested_approximate: requested.is_some_and(|a| a.approximate),
            stats,
            approximate,
            peak_buffers: peak_buffers.iter().map(PeakBufferJson::from).collect(),
            tpu: tpu.as_ref().map(TpuJson::from),
            verdict: explanation.verdict.sentence(),
            advice: explanation
                .advice
                .iter()
                .map(|r| {
                    let s = &explanation.situation;
                    AdviceWords {
                        action: r.advice.action(s),
                        why: r.advice.why(s),
                        saves_bytes: r.advice.saves_bytes(),
                        links: r.advice.links(s),
                        feasibility: feasibility_words(&r.feasibility),
                    }
                })
                .collect(),
            explanation,
            position: 1,
            same_failure_as: Vec::new(),
            others: Vec::new(),
        }
    }
}
