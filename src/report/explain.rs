//! The JSON contract of `hlomem explain`: the message's facts as exact
//! numbers, and the explanation built from them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::oom::explain::Explanation;
use crate::oom::feasibility::Feasibility;
use crate::oom::model::{Amount, OomMessage};

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

    pub fn build(msg: &OomMessage, explanation: Explanation) -> ExplainReport {
        let s = &msg.stats;
        let mut stats = BTreeMap::new();
        let mut approximate = Vec::new();
        for (name, value) in [
            ("parameter_bytes", s.parameter),
            ("constant_bytes", s.constant),
            ("maybe_live_out_bytes", s.maybe_live_out),
            ("preallocated_temp_bytes", s.preallocated_temp),
            (
                "preallocated_temp_fragmentation_bytes",
                s.preallocated_temp_fragmentation,
            ),
            ("total_bytes", s.total),
            ("fragmentation_bytes", s.total_fragmentation),
        ] {
            if let Some(a) = value {
                stats.insert(name, a.bytes);
                if a.approximate {
                    approximate.push(name);
                }
            }
        }
        ExplainReport {
            format: msg.format.name(),
            truncated: msg.truncated,
            requested_bytes: bytes(msg.requested),
            requested_approximate: msg.requested.is_some_and(|a| a.approximate),
            stats,
            approximate,
            peak_buffers: msg
                .peak_buffers
                .iter()
                .map(|b| PeakBufferJson {
                    number: b.number,
                    size_bytes: bytes(b.size),
                    shape: b.shape.clone(),
                    kind: b.kind.clone(),
                    op_name: b.op_name.clone(),
                    source_file: b.source_file.clone(),
                    source_line: b.source_line,
                    label: b.label.clone(),
                    unpadded_size_bytes: bytes(b.unpadded_size),
                    padding_bytes: bytes(b.padding),
                })
                .collect(),
            tpu: msg.tpu.as_ref().map(|t| TpuJson {
                memory_space: t.memory_space.clone(),
                used_bytes: bytes(t.used),
                capacity_bytes: bytes(t.capacity),
                exceeded_by_bytes: bytes(t.exceeded_by),
                total_usage_bytes: bytes(t.total_usage),
                program_requirement_bytes: bytes(t.program_requirement),
                free_bytes: bytes(t.free),
                reserved_bytes: bytes(t.reserved),
                reservable_bytes: bytes(t.reservable),
                largest_free_region_bytes: bytes(t.largest_free_region),
                scoped_size_bytes: t.scoped.and_then(|s| bytes(s.size)),
                scoped_limit_bytes: t.scoped.and_then(|s| bytes(s.limit)),
                approximate: true,
            }),
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
