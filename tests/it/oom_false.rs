//! None of the false statements issue 39 quotes can be produced: a test per
//! kind, each over every message of the phrasing catalog, the real cases
//! and the samples, and over the message that produced it first.

use std::path::PathBuf;

use hlomem::oom::advice::Advice;
use hlomem::oom::context::{App, Framework};
use hlomem::oom::device::Device;
use hlomem::oom::explain::Explanation;
use hlomem::oom::situation::{RematBy, Workload};
use hlomem::oom::{self, OomMessage};
use hlomem::render::{self, ExplainFormat, RenderOptions};
use hlomem::report::explain::ExplainReport;

/// One message of a text, explained with its log, and its own rendering.
struct One {
    name: String,
    msg: OomMessage,
    e: Explanation,
    text: String,
}

fn rendered(report: &ExplainReport) -> String {
    let mut out = Vec::new();
    render::render_explain(
        report,
        ExplainFormat::Text,
        RenderOptions::default(),
        &mut out,
    )
    .unwrap();
    String::from_utf8(out).unwrap()
}

/// Every message of `text`, each rendered alone.
fn explained(name: &str, text: &str) -> Vec<One> {
    let log = oom::read_log(text);
    let all = oom::explain_log(&log, None);
    log.messages
        .iter()
        .zip(all)
        .map(|(msg, e)| One {
            name: name.to_string(),
            msg: msg.clone(),
            text: rendered(&ExplainReport::build(msg, e.clone())),
            e,
        })
        .collect()
}

fn texts_in(dir: &str) -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text: String = std::fs::read_to_string(&p)
                .unwrap()
                .lines()
                .filter(|l| !l.starts_with("# "))
                .map(|l| format!("{l}\n"))
                .collect();
            (p.file_stem().unwrap().to_string_lossy().into_owned(), text)
        })
        .collect()
}

/// Every message of the phrasing catalog, the real cases and the samples.
fn every_message() -> Vec<One> {
    ["tests/oom_catalog", "tests/oom_cases", "samples/oom"]
        .iter()
        .flat_map(|d| texts_in(d))
        .flat_map(|(name, text)| explained(&name, &text))
        .collect()
}

fn kinds(e: &Explanation) -> Vec<String> {
    e.advice.iter().map(|r| r.advice.kind()).collect()
}

/// Kind 1: The device and memory space come from evidence: a TPU runtime's
/// `Failed to allocate request` is not the GPU's, and pinned host memory is
/// not the GPU's memory.
#[test]
fn no_wrong_device_or_memory_space() {
    let tpu_log = "When I use 13b, batch_size=1, an error occurs on v3-8 as follows:\n\
        jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for 12.50MiB (13107200B) on device ordinal 0\n";
    let one = &explained("tpu failed request", tpu_log)[0];
    assert_eq!(
        one.e.situation.placement.device,
        Device::Tpu,
        "{}",
        one.text
    );
    assert!(!one.text.contains("GPU"), "{}", one.text);
    let bare = &explained(
        "bare request",
        "Failed to allocate request for 12.50MiB (13107200B) on device ordinal 0\n",
    )[0];
    assert_eq!(bare.e.situation.placement.device, Device::Unknown);
    let headline: String = bare.text.lines().take(2).collect();
    assert!(!headline.contains("GPU"), "{}", bare.text);
    let pinned = "W external/org_tensorflow/tensorflow/core/common_runtime/device/device_host_allocator.h:46] could not allocate pinned host memory of size: 67108864\n\
        E external/org_tensorflow/tensorflow/stream_executor/cuda/cuda_driver.cc:794] failed to alloc 67108864 bytes on host: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n";
    for one in explained("pinned", pinned) {
        assert_eq!(
            one.e.situation.placement.device,
            Device::Host,
            "{}",
            one.text
        );
        assert!(!one.text.contains("GPU's memory is held"), "{}", one.text);
    }
    for one in every_message() {
        let device = one.e.situation.placement.device;
        let headline: String = one.text.lines().take(2).collect();
        if device == Device::Host {
            for said in [
                "the GPU's memory is held",
                "the GPU pool had",
                "in the GPU's memory",
            ] {
                assert!(
                    !one.text.contains(said),
                    "{}: {said:?} for host memory:\n{}",
                    one.name,
                    one.text
                );
            }
        }
        if device == Device::Tpu {
            assert!(!headline.contains("GPU"), "{}:\n{}", one.name, one.text);
            for said in ["GPU pool", "nvidia-smi", "XLA_PYTHON_CLIENT_MEM_FRACTION"] {
                assert!(
                    !one.text.contains(said),
                    "{}: {said:?} for a TPU:\n{}",
                    one.name,
                    one.text
                );
            }
        }
    }
}

/// Kind 2a: Weights alone over HBM: no smaller batch "fits".
#[test]
fn no_smaller_batch_when_the_weights_alone_are_over() {
    let text = "XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 30.21G of 15.48G hbm. Exceeded hbm capacity by 14.73G.\n\
\n\
Total hbm usage >= 30.73G:\n    reserved        530.00M \n    program          14.31G \n    arguments        15.90G \n\
\n\
Output size 1.0K; shares 0B with arguments.\n";
    let one = &explained("gemma7b", text)[0];
    assert!(
        !one.text.contains("of the current one fits"),
        "{}",
        one.text
    );
    assert!(
        !one.e.advice.iter().any(|r| matches!(
            r.advice,
            Advice::SmallerBatch { .. } | Advice::SmallerBatchUnmeasured
        )),
        "{:?}",
        kinds(&one.e)
    );
    assert!(
        one.e
            .ruled_out
            .iter()
            .any(|r| r.advice.starts_with("smaller-batch")),
        "{:?}",
        one.e.ruled_out
    );
    assert!(
        matches!(
            one.e.advice[0].advice,
            Advice::MoreMemory { .. } | Advice::LowerPrecision { .. }
        ),
        "{:?}",
        kinds(&one.e)
    );
}

/// Kind 2b: A larger pool fraction is not offered when the remat target, scaled
/// to the largest fraction, is still under what is needed.
#[test]
fn no_larger_fraction_past_the_remat_target() {
    let text = "W0101 00:00:00.000000 1 hlo_rematerialization.cc:3021] Can't reduce memory use below 18.88GiB (20272245637 bytes) by rematerialization; only reduced to 47.00GiB (50465865728 bytes), down from 52.00GiB (55834574848 bytes) originally\n\
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 50465865728 bytes.\n";
    for one in explained("remat target", text) {
        assert!(
            !one.text.contains("XLA_PYTHON_CLIENT_MEM_FRACTION=0.95"),
            "{}",
            one.text
        );
        assert!(
            !one.text.contains(".95 (the default is .75)"),
            "{}",
            one.text
        );
    }
}

/// Kind 2c: The same allocation failing on two devices: sharding comes first.
#[test]
fn a_replicated_failure_is_told_to_shard() {
    let text = "E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2985] Execution of replica 0 failed: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 bytes.\n\
E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2985] Execution of replica 1 failed: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 bytes.\n";
    let all = explained("replicated", text);
    assert_eq!(all.len(), 2);
    for one in &all {
        let first_two: Vec<&Advice> = one.e.advice.iter().take(2).map(|r| &r.advice).collect();
        assert!(
            first_two
                .iter()
                .any(|a| matches!(a, Advice::Shard { replicated_on } if replicated_on.len() == 2)),
            "{:?}",
            kinds(&one.e)
        );
    }
}

/// Kind 2d: Less free than asked: no defragmentation, no "saves" of a few KiB.
#[test]
fn no_fragmentation_fix_when_less_is_free_than_asked() {
    let text = "RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 1.00M. That was not possible. There are 48.0K free. The largest contiguous region of free memory is 47.0K due to fragmentation.; (0x0x0_HBM0)\n";
    let one = &explained("48K free", text)[0];
    assert!(
        !one.e
            .advice
            .iter()
            .any(|r| matches!(r.advice, Advice::Fragmentation { .. })),
        "{:?}",
        kinds(&one.e)
    );
    assert!(!one.text.contains("saves 1.0KiB"), "{}", one.text);
    for one in every_message() {
        let free = one.msg.tpu.as_ref().and_then(|t| t.free).map(|f| f.bytes);
        let asked = one.msg.requested.map(|r| r.bytes);
        if let (Some(free), Some(asked)) = (free, asked) {
            if free < asked {
                assert!(
                    !one.e
                        .advice
                        .iter()
                        .any(|r| matches!(r.advice, Advice::Fragmentation { .. })),
                    "{}: {:?}",
                    one.name,
                    kinds(&one.e)
                );
            }
        }
    }
}

/// Kind 2e: A size no device holds is a shape mistake, worded the same on the
/// host as on a device, and never "a machine with more RAM".
#[test]
fn impossible_sizes_are_the_same_shape_mistake_everywhere() {
    let texts = [
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of host memory while trying to allocate 4000000000000 bytes.\n",
        "RESOURCE_EXHAUSTED: Out of memory allocating 4000000000000 bytes.\n",
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1374521760000 bytes.\n",
    ];
    let mut tails = Vec::new();
    for text in texts {
        let one = &explained("impossible", text)[0];
        let verdict = one.e.verdict.sentence();
        assert!(
            matches!(
                one.e.verdict,
                hlomem::oom::verdict::Verdict::ShapeMistake { .. }
            ),
            "{text}: {verdict}"
        );
        assert!(!one.text.contains("more RAM"), "{}", one.text);
        assert!(
            matches!(one.e.advice[0].advice, Advice::CheckShapes { .. }),
            "{:?}",
            kinds(&one.e)
        );
        tails.push(
            verdict
                .split_once(": ")
                .map(|(_, t)| t.to_string())
                .unwrap(),
        );
    }
    assert!(tails.windows(2).all(|w| w[0] == w[1]), "{tails:#?}");
}

/// Kind 3: "The program fits" only with the proof of a capacity table.
#[test]
fn the_program_fits_only_when_the_message_proves_it() {
    for one in every_message() {
        assert!(
            !one.text.contains("other live arrays occupy"),
            "{}:\n{}",
            one.name,
            one.text
        );
        let proven = one.e.proof.is_some_and(|p| p.program_fits_alone);
        for claim in [
            "program alone fits",
            "The program fits",
            "the program fits the device",
        ] {
            assert!(
                proven || !one.text.contains(claim),
                "{}: {claim:?} unproven:\n{}",
                one.name,
                one.text
            );
        }
        if matches!(
            one.msg.format.name(),
            "tpu-runtime-allocate" | "tpu-runtime-reserve"
        ) && !proven
        {
            assert!(
                one.e.undecided.is_some(),
                "{}: a runtime failure with one reading",
                one.name
            );
        }
    }
}

/// Kind 4a: No rematerialization for a program that does not train.
#[test]
fn no_remat_for_inference() {
    let text = "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 bytes.\n\
BufferAssignment OOM Debugging.\n\
BufferAssignment stats:\n\
             parameter allocation:    1.00GiB\n\
              constant allocation:         0B\n\
        maybe_live_out allocation:    1.00GiB\n\
     preallocated temp allocation:    8.00GiB\n\
                 total allocation:   10.00GiB\n\
Peak buffers:\n\
\tBuffer 1:\n\
\t\tSize: 4.00GiB\n\
\t\tOperator: op_name=\"jit(apply_fn)/jit(main)/attention/dot_general\" source_file=\"/app/model.py\" source_line=10\n\
\t\tXLA Label: fusion\n\
\t\tShape: f32[16,32,2048,1024]\n\
\t\t==========================\n";
    let one = &explained("apply_fn", text)[0];
    assert!(
        matches!(one.e.situation.workload, Workload::Inference { .. }),
        "{:?}",
        one.e.situation.workload
    );
    for one in every_message()
        .into_iter()
        .chain(explained("apply_fn", text))
    {
        if matches!(one.e.situation.workload, Workload::Inference { .. }) {
            assert!(
                !one.e
                    .advice
                    .iter()
                    .any(|r| matches!(r.advice, Advice::Rematerialize { .. })),
                "{}: {:?}",
                one.name,
                kinds(&one.e)
            );
        }
    }
}

/// Kind 4b: Advice in the framework's words, and the application's own setting
/// respected.
#[test]
fn advice_in_the_framework_and_application_words() {
    for one in every_message() {
        let s = &one.e.situation;
        if matches!(
            s.framework(),
            Some(Framework::PytorchXla | Framework::Tensorflow)
        ) {
            for jax_word in [
                "donate_argnums",
                "jax.checkpoint",
                "XLA_PYTHON_CLIENT_MEM_FRACTION",
                "in JAX by default",
            ] {
                assert!(
                    !one.text.contains(jax_word),
                    "{}: {jax_word:?}:\n{}",
                    one.name,
                    one.text
                );
            }
        }
        if matches!(s.app(), Some(App::AlphaFold | App::Vllm)) || s.fraction().is_some() {
            for default in [
                "XLA_PYTHON_CLIENT_MEM_FRACTION=0.95",
                "the default is .75",
                "(.75 in JAX by default)",
            ] {
                assert!(
                    !one.text.contains(default),
                    "{}: {default:?}:\n{}",
                    one.name,
                    one.text
                );
            }
        }
    }
    let alphafold = "I0824 15:39:29.297091 139937432360768 run_docker.py:193] Execution of replica 0 failed: Resource exhausted: Out of memory while trying to allocate 41360702624 bytes.\n";
    let one = &explained("alphafold", alphafold)[0];
    assert!(one.text.contains("above 4"), "{}", one.text);
}

/// Kind 4c: XLA's own rematerialization is not the user's jax.checkpoint.
#[test]
fn xla_remat_is_not_the_users_checkpoint() {
    for one in every_message() {
        let by = one.e.situation.remat.as_ref().map(|r| r.by);
        if one.text.contains("stricter policy") {
            assert_eq!(by, Some(RematBy::User), "{}:\n{}", one.name, one.text);
        }
        if by == Some(RematBy::Xla) {
            assert!(
                !one.text.contains("Rematerialization is already on"),
                "{}",
                one.name
            );
        }
    }
}

/// Kind 5a, 5b: every message of a log, in order, each with its own device.
#[test]
fn every_message_of_a_log_with_its_own_device() {
    let text = "W external/xla/xla/tsl/framework/bfc_allocator.cc:291] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.15GiB with freed_by_count=0. The caller indicates that this is not a failure, but this may mean that there could be performance gains if more memory were available.\n\
some other output\n\
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 21.95G of 15.48G hbm. Exceeded hbm capacity by 6.47G.\n";
    let log = oom::read_log(text);
    assert_eq!(log.messages.len(), 2);
    let report = ExplainReport::of_log(&log.messages, oom::explain_log(&log, None)).unwrap();
    let all = rendered(&report);
    assert!(
        all.contains("Message 1 of 2") && all.contains("Message 2 of 2"),
        "{all}"
    );
    let tpu_part = &all[all.find("Message 2 of 2").unwrap()..];
    assert!(
        tpu_part.contains("TPU's HBM") && !tpu_part.contains("GPU"),
        "{tpu_part}"
    );
}

/// Kind 5c: Numbers that do not add up are said so, never explained away.
#[test]
fn numbers_that_do_not_add_up_are_reported() {
    let text = "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1073741824 bytes.\n\
BufferAssignment OOM Debugging.\n\
BufferAssignment stats:\n\
             parameter allocation:    1.00GiB\n\
              constant allocation:         0B\n\
        maybe_live_out allocation:    1.00GiB\n\
     preallocated temp allocation:    1.00GiB\n\
                 total allocation:   30.52GiB\n";
    let one = &explained("stats", text)[0];
    assert!(one.text.contains("do not add up"), "{}", one.text);
    for one in every_message().into_iter().chain(explained("stats", text)) {
        assert!(
            !one.text.contains("reducer scratch"),
            "{}:\n{}",
            one.name,
            one.text
        );
    }
}

/// Kind 6: The CUDA context, cuDNN, cuBLAS and NCCL phrasings are read with their numbers.
#[test]
fn context_and_library_failures_are_recognized() {
    let cases = [
        ("failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY: out of memory; total memory reported: 34089730048\n", "gpu-context"),
        ("Failed to determine best cudnn convolution algorithm: Resource exhausted: Out of memory while trying to allocate 16777716 bytes.\n", "gpu-library"),
        ("Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR\nMemory usage: 707198976 bytes free, 4231397376 bytes total.\n", "gpu-library"),
        ("failed to create cublas handle: CUBLAS_STATUS_ALLOC_FAILED\n", "gpu-library"),
        ("include/alloc.h:178 NCCL WARN Failed to CUDA calloc 6291456 bytes\n", "gpu-library"),
    ];
    for (text, format) in cases {
        let one = &explained("library", text)[0];
        assert_eq!(one.msg.format.name(), format, "{text}");
        assert_eq!(one.e.situation.placement.device, Device::Gpu, "{text}");
    }
    let ctx = oom::read(cases[0].0).unwrap();
    assert_eq!(ctx.device_total.map(|a| a.bytes), Some(34089730048));
    let cudnn = oom::read(cases[2].0).unwrap();
    assert_eq!(cudnn.device_free.map(|a| a.bytes), Some(707198976));
}

/// Kind 7: A TPU compile-time refusal says one "needs" figure: the compiler's
/// count is called a count.
#[test]
fn a_tpu_refusal_says_one_needs_figure() {
    for one in every_message() {
        if one.msg.format.is_tpu() && one.e.situation.placement.device == Device::Tpu {
            for said in ["compiled program needs", "program itself needs"] {
                assert!(
                    !one.text.contains(said),
                    "{}: {said:?}:\n{}",
                    one.name,
                    one.text
                );
            }
        }
    }
}
