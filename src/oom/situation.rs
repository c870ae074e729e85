//! What the message and the log tell about the program beyond its sizes:
//! whether it trains or only runs a model, whether memory is already being
//! rematerialized and by whom (the user's `jax.checkpoint`, or XLA's own
//! pass when the program is over its limit), which framework and
//! application ran it, the settings already made, and where the memory is.

use serde::Serialize;

use super::context::{App, Found, Framework, LogContext, Settings};
use super::device::Placement;
use super::dump::DumpLinks;
use super::model::{OomMessage, Warning};
use crate::frontend::FrontendName;

/// Whether the program computes gradients, and what says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Workload {
    /// An op name of a backward pass ([`is_autodiff`]), or a training
    /// function's name.
    Training {
        evidence: String,
    },
    /// The function that ran is an inference one (`jit(apply_fn)`,
    /// `pjit(generate)`), or the application only serves models, or many op
    /// names and none is autodiff's.
    Inference {
        evidence: String,
    },
    Unknown,
}

/// Who rematerializes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RematBy {
    /// The user's checkpointing (`jax.checkpoint`, `nn.remat`,
    /// `tf.recompute_grad`, torch_xla's `checkpoint`): `remat` or
    /// `checkpoint` in op names.
    User,
    /// XLA's rematerialization pass, which runs on its own when the program
    /// is over its memory limit: its warning, or `.remat` in instruction names.
    Xla,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Remat {
    pub by: RematBy,
    pub evidence: String,
}

impl Remat {
    /// `yours, jax.checkpoint (EVIDENCE)` or `XLA's own pass only (EVIDENCE),
    /// not tf.recompute_grad`, in the framework's words.
    pub fn describe(&self, framework: Option<Framework>) -> String {
        let api = super::advice_words::checkpoint_api(framework);
        match self.by {
            RematBy::User => format!("yours, {api} ({})", self.evidence),
            RematBy::Xla => format!("XLA's own pass only ({}), not {api}", self.evidence),
        }
    }
}

/// The same failure on several devices: each holds the whole program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Replicated {
    /// The replicas or devices the messages name (`replica 0`, `GPU 1`).
    pub on: Vec<String>,
}

/// What the message (and the log, and the dump) tell about the program beyond sizes.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Situation {
    pub placement: Placement,
    pub workload: Workload,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remat: Option<Remat>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework: Option<Found<Framework>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<Found<App>>,
    #[serde(default, skip_serializing_if = "settings_empty")]
    pub settings: Settings,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicated: Option<Replicated>,
}

fn settings_empty(s: &Settings) -> bool {
    *s == Settings::default()
}

/// Words in a function's name that say it trains.
const TRAINING: &[&str] = &[
    "train",
    "training",
    "update",
    "grad",
    "grads",
    "gradients",
    "backward",
    "loss",
];
/// Words in a function's name that say it only runs the model.
const INFERENCE: &[&str] = &[
    "apply",
    "generate",
    "generation",
    "decode",
    "decoding",
    "predict",
    "prediction",
    "infer",
    "inference",
    "sample",
    "sampler",
    "sampling",
    "serve",
    "eval",
    "evaluate",
    "forward",
];

/// Training, inference or neither, by the words of a function's name.
fn kind_of_name(name: &str) -> Option<bool> {
    let words: Vec<String> = name
        .split(|c: char| c == '_' || !c.is_alphanumeric())
        .map(str::to_lowercase)
        .collect();
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    if has(TRAINING) {
        Some(true)
    } else if has(INFERENCE) {
        Some(false)
    } else {
        None
    }
}

/// The function an op name was traced in: `pjit(generate)/jit(main)/...` → `generate`.
fn traced_function(op_name: &str) -> Option<&str> {
    let first = op_name.split('/').next()?;
    let inner = first.split_once('(')?.1.strip_suffix(')')?;
    (!inner.is_empty() && inner != "main").then_some(inner)
}

impl Situation {
    pub fn infer(msg: &OomMessage, ctx: &LogContext, dump: Option<&DumpLinks>) -> Situation {
        let framework = framework(ctx, dump);
        let dump = dump.filter(|d| d.matches());
        Situation {
            placement: Placement::locate(msg, ctx),
            workload: workload(msg, ctx, dump),
            remat: remat(msg, dump),
            framework,
            app: ctx.app.clone(),
            settings: ctx.settings.clone(),
            replicated: None,
        }
    }

    pub fn framework(&self) -> Option<Framework> {
        self.framework.as_ref().map(|f| f.value)
    }

    pub fn app(&self) -> Option<App> {
        self.app.as_ref().map(|a| a.value)
    }

    pub fn is_inference(&self) -> bool {
        matches!(self.workload, Workload::Inference { .. })
    }

    /// The fraction of the device the pool takes, when the log says.
    pub fn fraction(&self) -> Option<f64> {
        self.settings.memory_fraction.as_ref().map(|f| f.value)
    }

    /// Device memory may spill into host RAM (unified memory, or a fraction above 1).
    pub fn unified(&self) -> bool {
        self.settings.unified_memory.is_some() || self.fraction().is_some_and(|f| f > 1.0)
    }
}

/// The framework whose words the advice uses. The dump's module says which
/// front-end made it (its name, its parameters' op names): when the module is
/// the message's program, that is the program's own text and outranks the
/// log's words (TensorFlow paths appear in JAX's and torch_xla's logs); a
/// dump of another program still tells a log that names no framework which
/// one its user runs.
fn framework(ctx: &LogContext, dump: Option<&DumpLinks>) -> Option<Found<Framework>> {
    let from_dump = dump.and_then(|d| {
        let value = match d.frontend.name {
            FrontendName::Jax => Framework::Jax,
            FrontendName::Tensorflow => Framework::Tensorflow,
            FrontendName::PytorchXla => Framework::PytorchXla,
            FrontendName::Unknown => return None,
        };
        let evidence = d.frontend.evidence.as_ref()?;
        Some((
            d.matches(),
            Found {
                value,
                evidence: format!("the dump's {}", evidence.phrase()),
            },
        ))
    });
    match (from_dump, &ctx.framework) {
        (Some((true, f)), _) | (Some((false, f)), None) => Some(f),
        (_, log) => log.clone(),
    }
}

/// Whether an op name is a backward pass's: JAX's autodiff (`transpose(`,
/// `jvp(`), TensorFlow's `GradientTape` (`gradient_tape/`), or PyTorch's
/// autograd (`aten__nll_loss_backward`, `aten___log_softmax_backward_data`,
/// with `XLA_HLO_DEBUG=1`).
pub fn is_autodiff(op_name: &str) -> bool {
    use crate::usage::scope::{phase, Phase};
    op_name.contains("jvp(")
        || phase(op_name) == Phase::Backward
        || (op_name.starts_with("aten__") && op_name.contains("_backward"))
}

fn workload(msg: &OomMessage, ctx: &LogContext, dump: Option<&DumpLinks>) -> Workload {
    let names: Vec<&str> = msg
        .peak_buffers
        .iter()
        .flat_map(|b| [b.op_name.as_deref(), b.label.as_deref()])
        .flatten()
        .collect();
    if let Some(evidence) = names
        .iter()
        .find(|n| is_autodiff(n))
        .map(|n| n.to_string())
        .or_else(|| dump.and_then(|d| d.training_evidence.clone()))
    {
        return Workload::Training { evidence };
    }
    // The function that was jitted names what the program does: a training
    // step is jitted as a whole, inference as `apply_fn`, `generate`, ...
    let traced = msg
        .peak_buffers
        .iter()
        .filter_map(|b| b.op_name.as_deref().and_then(traced_function))
        .chain(ctx.functions.iter().map(String::as_str));
    for name in traced {
        match kind_of_name(name) {
            Some(true) => {
                return Workload::Training {
                    evidence: format!("the function `{name}`"),
                }
            }
            Some(false) => {
                return Workload::Inference {
                    evidence: format!(
                    "the function `{name}`, and no autodiff (`jvp`, `transpose`) in the op names"
                ),
                }
            }
            None => {}
        }
    }
    if let Some(app) = ctx.app.as_ref().filter(|a| a.value.is_inference()) {
        return Workload::Inference {
            evidence: format!("{} only runs models (`{}`)", app.value.name(), app.evidence),
        };
    }
    // A few op names without autodiff's are weak evidence (the listed
    // buffers may all be forward values); the dump's whole program is strong.
    let op_names = msg
        .peak_buffers
        .iter()
        .filter(|b| b.op_name.is_some())
        .count();
    if op_names >= 3 {
        return Workload::Inference {
            evidence: format!("{op_names} op names and none of autodiff's"),
        };
    }
    if let Some(n) = dump.map(|d| d.op_names).filter(|&n| n >= 10) {
        return Workload::Inference {
            evidence: format!("none of the dumped module's {n} op names is autodiff's"),
        };
    }
    Workload::Unknown
}

fn remat(msg: &OomMessage, dump: Option<&DumpLinks>) -> Option<Remat> {
    // The user's `jax.checkpoint` shows in op names as a `remat` or
    // `checkpoint` scope; XLA's pass clones instructions as `NAME.remat`.
    let user = msg
        .peak_buffers
        .iter()
        .filter_map(|b| b.op_name.as_deref())
        .find(|o| {
            o.split('/')
                .any(|s| s == "remat" || s.starts_with("remat(") || s.starts_with("checkpoint"))
        });
    if let Some(o) = user {
        return Some(Remat {
            by: RematBy::User,
            evidence: o.to_string(),
        });
    }
    let xla_label = msg
        .peak_buffers
        .iter()
        .filter_map(|b| b.label.as_deref())
        .find(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|n| n.contains(".remat"))
        });
    if let Some(l) = xla_label {
        return Some(Remat {
            by: RematBy::Xla,
            evidence: l.split_whitespace().next().unwrap_or(l).to_string(),
        });
    }
    if msg
        .warnings
        .iter()
        .any(|w| matches!(w, Warning::Rematerialization { .. }))
    {
        return Some(Remat {
            by: RematBy::Xla,
            evidence: "XLA's rematerialization warning".into(),
        });
    }
    let d = dump?.remat_evidence.clone()?;
    let by = if d.contains(".remat") {
        RematBy::Xla
    } else {
        RematBy::User
    };
    Some(Remat { by, evidence: d })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_functions() {
        assert_eq!(kind_of_name("apply_fn"), Some(false));
        assert_eq!(kind_of_name("apply_gradients"), Some(true));
        assert_eq!(kind_of_name("casual_language_model_train_step"), Some(true));
        assert_eq!(kind_of_name("_forward_generate"), Some(false));
        assert_eq!(kind_of_name("concatenate"), None);
        assert_eq!(
            traced_function("pjit(generate)/jit(main)/x"),
            Some("generate")
        );
        assert_eq!(traced_function("jit(main)/x"), None);
    }
}
