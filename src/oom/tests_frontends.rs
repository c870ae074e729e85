//! `explain`'s advice in TensorFlow's and PyTorch/XLA's terms: every advice
//! for either names no JAX API, each rule that had only JAX's words has the
//! front-end's own, and a dump's front-end decides the words when the log
//! names none (or when the dump is the message's program).

use super::advice::Advice;
use super::context::{Found, Framework, LogContext};
use super::dump::DumpLinks;
use super::explain::BufferRef;
use super::situation::{is_autodiff, Remat, RematBy, Situation, Workload};
use crate::frontend::{Frontend, FrontendClue, FrontendEvidence, FrontendName};

/// What a TensorFlow or PyTorch/XLA user must never be told (the project's one
/// list, lowercase), and the JAX-only settings and pages advice could name.
fn jax_words() -> impl Iterator<Item = &'static str> {
    include_str!("../../tests/jax_words.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .chain([
            "xla_python_client",
            "pltpu",
            "pallas_call",
            "blockspec",
            "memory_kind",
            "namedsharding",
        ])
}

/// A situation as `explain` builds it for a GPU allocation failure, with the framework set.
fn situation(framework: Option<Framework>) -> Situation {
    let msg = super::read("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1024 bytes.")
        .expect("a message");
    let mut s = Situation::infer(&msg, &LogContext::default(), None);
    s.framework = framework.map(|value| Found {
        value,
        evidence: "test".into(),
    });
    s
}

/// One of every advice, with every variant's cases that word differently.
fn every_advice() -> Vec<Advice> {
    let buffer = BufferRef {
        number: 1,
        shape: Some("f32[1024,1024]".into()),
        parameter: false,
        op: Some("broadcast".into()),
        label: None,
        source: None,
    };
    vec![
        Advice::CheckShapes { bytes: 1 << 50 },
        Advice::ReportXlaBug,
        Advice::DonateArgument {
            parameter: 0,
            argument: "arg0.1".into(),
            output: "result".into(),
            shape: "f32[1024,1024]".into(),
            saves_bytes: 4 << 20,
        },
        Advice::DonateMatchingInput {
            shape: "f32[1024,1024]".into(),
            inputs: 1,
            saves_bytes: Some(4 << 20),
        },
        Advice::UseFloat32 {
            wide_bytes: 8 << 20,
            saves_bytes: 4 << 20,
        },
        Advice::LowerPrecision {
            argument_bytes: 8 << 20,
            saves_bytes: 4 << 20,
        },
        Advice::AvoidBroadcast {
            buffer,
            saves_bytes: Some(4 << 20),
        },
        Advice::SmallerBatch {
            needs: 10 << 30,
            available: 8 << 30,
            saves_bytes: 2 << 30,
        },
        Advice::SmallerBatchUnmeasured,
        Advice::MoreMemory {
            needs: Some(10 << 30),
            available: Some(8 << 30),
        },
        Advice::MoreMemory {
            needs: None,
            available: None,
        },
        Advice::Rematerialize {
            temp_bytes: 6 << 30,
            total_bytes: 10 << 30,
            workload: Workload::Training {
                evidence: "gradient_tape/dense/MatMul".into(),
            },
        },
        Advice::RematAlreadyOn {
            by: RematBy::User,
            evidence: "checkpoint".into(),
        },
        Advice::RematAlreadyOn {
            by: RematBy::Xla,
            evidence: "fusion.3.remat".into(),
        },
        Advice::ReduceTilePadding { saves_bytes: 1024 },
        Advice::KernelBlockSizes {
            space: "vmem".into(),
            saves_bytes: None,
        },
        Advice::RaiseVmemLimit {
            size: Some(40 << 20),
            limit: Some(32 << 20),
            custom_kernel: Some(true),
        },
        Advice::ArgumentsTooLarge {
            argument_bytes: 10 << 30,
            limit_bytes: 8 << 30,
            saves_bytes: 2 << 30,
        },
        Advice::HostMemory { pinned: true },
        Advice::HostMemory { pinned: false },
        Advice::FreeLiveArrays,
        Advice::Fragmentation {
            largest_free_region: 1 << 20,
            requested: 2 << 20,
        },
        Advice::PoolFraction {
            raise: true,
            current: None,
        },
        Advice::PoolFraction {
            raise: false,
            current: Some(0.9),
        },
        Advice::DisableCommandBuffers,
        Advice::OtherProcesses,
        Advice::DumpTheProgram,
        Advice::Shard {
            replicated_on: vec!["GPU 0".into(), "GPU 1".into()],
        },
        Advice::Shard {
            replicated_on: Vec::new(),
        },
    ]
}

fn words(advice: &Advice, s: &Situation) -> String {
    format!(
        "{} | {} | {}",
        advice.action(s),
        advice.why(s),
        advice.links(s).join(" ")
    )
}

#[test]
fn no_advice_names_a_jax_api_to_tensorflow_or_pytorch_xla() {
    for framework in [Framework::Tensorflow, Framework::PytorchXla] {
        let mut s = situation(Some(framework));
        for remat in [None, Some(RematBy::Xla), Some(RematBy::User)] {
            s.remat = remat.map(|by| Remat {
                by,
                evidence: "x".into(),
            });
            for advice in every_advice() {
                let text = words(&advice, &s).to_ascii_lowercase();
                for api in jax_words() {
                    assert!(
                        !text.contains(api),
                        "{framework:?} {}: {api}: {text}",
                        advice.kind()
                    );
                }
            }
            if let Some(r) = &s.remat {
                let line = r.describe(s.framework());
                assert!(!line.contains("jax"), "{line}");
            }
        }
    }
}

/// Donating a parameter the dump names: TensorFlow's resource variables,
/// torch_xla's in-place updates and buffer donation; JAX's donate_argnums
/// only to JAX (and to a log that names no framework, as before).
#[test]
fn donation_advice_in_each_front_ends_terms() {
    let donate = &every_advice()[2];
    let tf = donate.action(&situation(Some(Framework::Tensorflow)));
    assert!(tf.contains("tf.Variable") && tf.contains("assign"), "{tf}");
    let pt = donate.action(&situation(Some(Framework::PytorchXla)));
    assert!(
        pt.contains("a.add_(b)") && pt.contains("_set_buffer_donation(tensor, True)"),
        "{pt}"
    );
    let jax = donate.action(&situation(Some(Framework::Jax)));
    assert!(jax.contains("donate_argnums=0"), "{jax}");
    assert_eq!(
        donate.links(&situation(Some(Framework::Tensorflow))),
        Vec::<&str>::new()
    );
    let matching = &every_advice()[3];
    let tf = matching.action(&situation(Some(Framework::Tensorflow)));
    assert!(tf.contains("tf.Variable"), "{tf}");
}

/// Recomputation already on, and XLA's own pass: the front-end's API.
#[test]
fn remat_advice_names_the_front_ends_checkpointing() {
    let all = every_advice();
    let (user, xla) = (&all[12], &all[13]);
    let tf = situation(Some(Framework::Tensorflow));
    let pt = situation(Some(Framework::PytorchXla));
    assert!(xla.action(&tf).contains("tf.recompute_grad"));
    assert!(xla.why(&tf).contains("not tf.recompute_grad"));
    assert!(xla
        .action(&pt)
        .contains("torch_xla.utils.checkpoint.checkpoint"));
    assert!(!user.action(&pt).contains("checkpoint_policies"));
    assert!(xla
        .action(&situation(Some(Framework::Jax)))
        .contains("jax.checkpoint"));
    let line = Remat {
        by: RematBy::User,
        evidence: "checkpoint".into(),
    }
    .describe(Some(Framework::PytorchXla));
    assert_eq!(
        line,
        "yours, torch_xla.utils.checkpoint.checkpoint (checkpoint)"
    );
}

/// TPU kernels: a TensorFlow or PyTorch/XLA user raises XLA's scoped limit
/// through LIBTPU_INIT_ARGS (in KiB), not a Pallas compiler parameter.
#[test]
fn vmem_advice_without_pallas() {
    let all = every_advice();
    let (blocks, vmem) = (&all[15], &all[16]);
    for f in [Framework::Tensorflow, Framework::PytorchXla] {
        let s = situation(Some(f));
        assert_eq!(
            vmem.action(&s),
            "Raise the scoped VMEM limit of XLA's own ops: \
             LIBTPU_INIT_ARGS=--xla_tpu_scoped_vmem_limit_kib=40960 (a custom kernel sets its own \
             limit where it is defined)"
        );
        assert_eq!(
            vmem.links(&s),
            vec![super::advice_words::XLA_ERROR_SCOPED_VMEM]
        );
        assert!(
            !blocks.action(&s).contains("Pallas"),
            "{}",
            blocks.action(&s)
        );
    }
    let jax = situation(Some(Framework::Jax));
    assert!(vmem
        .action(&jax)
        .contains("pltpu.CompilerParams(vmem_limit_bytes=41943040)"));
}

/// Pinned host memory on PyTorch/XLA: XLA's cap, not JAX's memory kinds.
#[test]
fn pinned_host_memory_on_pytorch_xla() {
    let pinned = Advice::HostMemory { pinned: true };
    let pt = pinned.action(&situation(Some(Framework::PytorchXla)));
    assert!(pt.contains("XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB"), "{pt}");
    assert!(!pt.contains("memory_kind"), "{pt}");
}

fn dump_of(name: FrontendName, module: &str, matches: bool) -> DumpLinks {
    DumpLinks {
        module: module.into(),
        file: "f.txt".into(),
        frontend: Frontend {
            name,
            evidence: Some(FrontendEvidence {
                clue: FrontendClue::ModuleName,
                text: module.into(),
            }),
        },
        memory: Default::default(),
        buffers: Vec::new(),
        donation_candidates: Vec::new(),
        training_evidence: None,
        remat_evidence: None,
        op_names: 0,
        checks: if matches {
            Vec::new()
        } else {
            vec![super::dump::DumpCheck::NoBufferInModule { count: 3 }]
        },
    }
}

/// The dump's front-end: the program's own text. It decides when the log
/// names no framework, and over the log's words when the module is the
/// message's program; a dump of another program does not overrule the log.
#[test]
fn the_dumps_front_end_decides_the_words() {
    let msg = super::read("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1024 bytes.")
        .unwrap();
    let quiet = LogContext::default();
    let pt = dump_of(FrontendName::PytorchXla, "SyncTensorsGraph.8", true);
    let s = Situation::infer(&msg, &quiet, Some(&pt));
    assert_eq!(s.framework(), Some(Framework::PytorchXla));
    assert_eq!(
        s.framework.unwrap().evidence,
        "the dump's module name SyncTensorsGraph.8"
    );
    let tf_log = super::read_log(
        "2020-11-04 W tensorflow/core/framework/op_kernel.cc:1651] OP_REQUIRES failed\n\
         RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1024 bytes.\n",
    );
    assert_eq!(
        Situation::infer(&msg, &tf_log.context, Some(&pt)).framework(),
        Some(Framework::PytorchXla)
    );
    let other = dump_of(FrontendName::PytorchXla, "SyncTensorsGraph.8", false);
    assert_eq!(
        Situation::infer(&msg, &tf_log.context, Some(&other)).framework(),
        Some(Framework::Tensorflow)
    );
    assert_eq!(
        Situation::infer(&msg, &quiet, Some(&other)).framework(),
        Some(Framework::PytorchXla)
    );
    let unknown = DumpLinks {
        frontend: Frontend::unknown(),
        ..pt.clone()
    };
    assert_eq!(
        Situation::infer(&msg, &quiet, Some(&unknown)).framework(),
        None
    );
}

/// A backward pass in each front-end's op names: JAX's autodiff,
/// TensorFlow's GradientTape, PyTorch's autograd (with XLA_HLO_DEBUG=1).
#[test]
fn training_is_read_from_every_front_ends_op_names() {
    for training in [
        "jit(step)/transpose(jvp(mlp))/dot_general",
        "jit(step)/jvp(mlp)/tanh",
        "gradient_tape/sequential_1/dense_1/MatMul/MatMul",
        "while/gradient_tape/dense/MatMul",
        "aten__nll_loss_backward",
        "aten___log_softmax_backward_data",
        "aten__threshold_backward",
    ] {
        assert!(is_autodiff(training), "{training}");
    }
    for not in [
        "sequential_1/dense_1/Relu",
        "aten__addmm",
        "adam/Mul_9",
        "jit(f)/add",
        "backward_compat",
    ] {
        assert!(!is_autodiff(not), "{not}");
    }
}
