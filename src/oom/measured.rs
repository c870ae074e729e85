//! Advice the message's buffers and stats measure: 64-bit types, a
//! materialized broadcast, tile padding, arguments over the scheduler's
//! limit, and inputs that could receive an output (donation). Each carries
//! the bytes it saves, for the feasibility check to weigh.

use super::advice::{Advice, Candidates};
use super::checks;
use super::explain::{BufferRef, Explanation};
use super::model::*;

/// Bytes the listed TPU allocations lose to tile padding.
pub fn padding_bytes(msg: &OomMessage) -> u64 {
    msg.peak_buffers
        .iter()
        .filter_map(|b| b.padding.map(|p| p.bytes))
        .try_fold(0u64, u64::checked_add)
        .unwrap_or(0)
}

/// Whether a shape string such as `f64[42994,42994]` has 64-bit elements (f64, c128).
fn is_wide(shape: &str) -> bool {
    matches!(
        crate::hlo::ElementType::parse(shape.split('[').next().unwrap_or("").trim()),
        Some(crate::hlo::ElementType::F64 | crate::hlo::ElementType::C128)
    )
}

/// Advice measured from the listed buffers and stats.
pub(super) fn measured(msg: &OomMessage, e: &Explanation, c: &mut Candidates) {
    let sized = |b: &PeakBuffer| {
        b.size
            .map(|a| a.bytes)
            .filter(|&s| s <= checks::LARGEST_DEVICE_BYTES)
    };
    donation(msg, e, c);
    // Wide types: f64 and c128 halve in f32 / c64.
    let wide: u64 = msg
        .peak_buffers
        .iter()
        .filter(|b| b.shape.as_deref().is_some_and(is_wide))
        .filter_map(sized)
        .try_fold(0u64, u64::checked_add)
        .unwrap_or(0);
    if wide > 0 {
        c.push(Advice::UseFloat32 {
            wide_bytes: wide,
            saves_bytes: wide / 2,
        });
    }
    if let Some(b) = msg.peak_buffers.iter().find(|b| {
        b.label.as_deref() == Some("broadcast")
            || b.op_name
                .as_deref()
                .is_some_and(|o| o.contains("broadcast"))
    }) {
        c.push(Advice::AvoidBroadcast {
            buffer: BufferRef::from(b),
            saves_bytes: sized(b),
        });
    }
    let padding = padding_bytes(msg);
    if padding > 0 {
        c.push(Advice::ReduceTilePadding {
            saves_bytes: padding,
        });
    }
    for w in &msg.warnings {
        if let Warning::ArgumentsExceedLimit {
            argument_bytes: Some(args),
            limit_bytes: Some(limit),
        } = *w
        {
            if args > limit && args <= checks::LARGEST_DEVICE_BYTES {
                c.push(Advice::ArgumentsTooLarge {
                    argument_bytes: args,
                    limit_bytes: limit,
                    saves_bytes: args - limit,
                });
            }
        }
    }
}

fn donation(msg: &OomMessage, e: &Explanation, c: &mut Candidates) {
    if let Some(d) = e.dump.as_ref().filter(|d| d.matches()) {
        for cand in &d.donation_candidates {
            c.push(Advice::DonateArgument {
                parameter: cand.parameter,
                argument: cand.argument.clone(),
                output: cand.output.clone(),
                shape: cand.shape.clone(),
                saves_bytes: cand.bytes,
            });
        }
        // The dump knows which inputs are donated already: no guessing.
        return;
    }
    // TensorFlow's runtime chooses its aliasing itself: nothing to donate.
    if e.situation.framework() == Some(super::context::Framework::Tensorflow) {
        return;
    }
    if !(msg.stats.maybe_live_out.is_some_and(|a| a.bytes > 0) || msg.stats.is_empty()) {
        return;
    }
    let params: Vec<&PeakBuffer> = msg
        .peak_buffers
        .iter()
        .filter(|b| b.kind.as_deref() == Some("parameter"))
        .collect();
    let result = msg
        .peak_buffers
        .iter()
        .filter(|b| b.kind.as_deref() == Some("instruction"))
        .find(|r| {
            params
                .iter()
                .any(|p| p.shape == r.shape && p.size == r.size)
        });
    if let Some(r) = result {
        c.push(Advice::DonateMatchingInput {
            shape: r.shape.clone().unwrap_or_default(),
            inputs: params.iter().filter(|p| p.shape == r.shape).count(),
            saves_bytes: r.size.map(|a| a.bytes),
        });
    }
}
