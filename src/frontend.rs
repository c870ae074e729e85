//! Which XLA front-end made a module: JAX, TensorFlow (`tf.function(jit_compile=True)`)
//! or PyTorch/XLA. Their dumps are the same format, but each names its
//! modules, parameters and ops its own way, and each gives its users a
//! different way to donate a buffer or to cast to 32 bits: findings, fixes
//! and the report's names ask [`FrontendName`] for their words.
//!
//! Read from the module text alone, as [`crate::chip::Target`] reads the
//! backend: the module's name first (`jit_step`, `a_inference_train_step_441__XlaMustCompile_true_...`,
//! `SyncTensorsGraph.257`), then the parameters' `op_name`s (`XLA_Args`,
//! `xla__device_data`), then the ops' (`jit(f)/...`, `aten__add`). When
//! nothing says, the front-end is unknown and the words name none.

use serde::Serialize;

use crate::hlo::Module;

/// The programs that hand XLA a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FrontendName {
    Jax,
    /// `tf.function(jit_compile=True)`, Keras with `jit_compile`, TF's auto-clustering.
    Tensorflow,
    /// torch_xla's lazy tensors (`torch_xla.sync()`, `xm.mark_step()`) and
    /// `torch.compile(backend="openxla")`.
    PytorchXla,
    Unknown,
}

impl FrontendName {
    /// As people write it: `JAX`, `TensorFlow`, `PyTorch/XLA`.
    pub fn title(self) -> &'static str {
        match self {
            FrontendName::Jax => "JAX",
            FrontendName::Tensorflow => "TensorFlow",
            FrontendName::PytorchXla => "PyTorch/XLA",
            FrontendName::Unknown => "unknown",
        }
    }

    /// Whether a parameter's `op_name` is the path of the jitted function's
    /// argument it comes from (`params['w']`): JAX's are. TensorFlow names
    /// every parameter `XLA_Args` and torch_xla `xla__device_data` (or
    /// nothing): one row per parameter, no argument. An unknown front-end's
    /// `op_name`s are read as paths, as JAX's.
    pub fn names_arguments(self) -> bool {
        matches!(self, FrontendName::Jax | FrontendName::Unknown)
    }

    /// Whether the runtime decides which parameters are aliased to outputs,
    /// with no donation option for the user: TensorFlow aliases the resource
    /// variables a function updates, torch_xla the tensors a graph updates
    /// in place.
    pub fn runtime_aliases(self) -> bool {
        matches!(self, FrontendName::Tensorflow | FrontendName::PytorchXla)
    }

    /// The name people know a module by: TensorFlow's function name
    /// (`train_step` from `a_inference_train_step_441__XlaMustCompile_true_...`);
    /// other names as they are.
    pub fn short_name(self, module_name: &str) -> String {
        if self != FrontendName::Tensorflow {
            return module_name.to_string();
        }
        let Some(rest) = ["a_inference_", "__inference_", "inference_"]
            .iter()
            .find_map(|p| module_name.strip_prefix(p))
        else {
            return module_name.to_string();
        };
        // `train_step_441__XlaMustCompile...`: the function, then its unique id.
        let function = rest.split("__").next().unwrap_or(rest);
        let function = match function.rsplit_once('_') {
            Some((name, id)) if !name.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => function,
        };
        if function.is_empty() {
            module_name.to_string()
        } else {
            function.to_string()
        }
    }
}

impl std::fmt::Display for FrontendName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.title())
    }
}

/// Where in the text the front-end showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FrontendClue {
    /// The `HloModule` name.
    ModuleName,
    /// An entry parameter's `op_name`.
    ParameterOpName,
    /// An op's `op_name` or `op_type`.
    OpName,
    /// A `source_file` inside the front-end's own package.
    SourceFile,
}

/// What said which front-end made the module: the clue and the text quoted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FrontendEvidence {
    pub clue: FrontendClue,
    pub text: String,
}

impl FrontendEvidence {
    /// `module name SyncTensorsGraph.8`, `parameters named XLA_Args`: the
    /// clue and its text, cut for a line.
    pub fn phrase(&self) -> String {
        let text = shorten(&self.text);
        match self.clue {
            FrontendClue::ModuleName => format!("module name {text}"),
            FrontendClue::ParameterOpName => format!("parameters named {text}"),
            FrontendClue::OpName => format!("op names {text}..."),
            FrontendClue::SourceFile => format!("source files under {text}"),
        }
    }
}

/// The front-end of a module, and what in its text said so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Frontend {
    pub name: FrontendName,
    /// Absent when nothing in the text names a front-end (`unknown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<FrontendEvidence>,
}

/// Module-name prefixes and markers, in the order they are tried.
const MODULE_NAMES: &[(&str, NameMatch, FrontendName)] = &[
    ("a_inference_", NameMatch::Prefix, FrontendName::Tensorflow),
    ("__inference_", NameMatch::Prefix, FrontendName::Tensorflow),
    (
        "XlaMustCompile",
        NameMatch::Contains,
        FrontendName::Tensorflow,
    ),
    (
        "XlaCompiledKernel",
        NameMatch::Contains,
        FrontendName::Tensorflow,
    ),
    (
        "SyncTensorsGraph.",
        NameMatch::Prefix,
        FrontendName::PytorchXla,
    ),
    ("IrToHlo.", NameMatch::Prefix, FrontendName::PytorchXla),
    ("jit_", NameMatch::Prefix, FrontendName::Jax),
    ("pjit_", NameMatch::Prefix, FrontendName::Jax),
    ("pmap_", NameMatch::Prefix, FrontendName::Jax),
    ("xmap_", NameMatch::Prefix, FrontendName::Jax),
];

#[derive(Clone, Copy)]
enum NameMatch {
    Prefix,
    Contains,
}

/// Parameter `op_name`s only one front-end writes.
const PARAMETER_OP_NAMES: &[(&str, FrontendName)] = &[
    ("XLA_Args", FrontendName::Tensorflow),
    ("xla__device_data", FrontendName::PytorchXla),
];

/// Text only one front-end writes in ops' metadata, searched last.
const OP_TEXT: &[(&str, FrontendClue, FrontendName)] = &[
    (
        "op_name=\"aten__",
        FrontendClue::OpName,
        FrontendName::PytorchXla,
    ),
    (
        "op_type=\"xla__",
        FrontendClue::OpName,
        FrontendName::PytorchXla,
    ),
    ("op_name=\"jit(", FrontendClue::OpName, FrontendName::Jax),
    ("op_name=\"pjit(", FrontendClue::OpName, FrontendName::Jax),
    ("op_name=\"pmap(", FrontendClue::OpName, FrontendName::Jax),
    (
        "/tensorflow/python/",
        FrontendClue::SourceFile,
        FrontendName::Tensorflow,
    ),
    (
        "/torch_xla/",
        FrontendClue::SourceFile,
        FrontendName::PytorchXla,
    ),
];

impl Frontend {
    pub fn unknown() -> Frontend {
        Frontend {
            name: FrontendName::Unknown,
            evidence: None,
        }
    }

    /// Reads the front-end from the module's name, its entry parameters'
    /// `op_name`s (read once by the caller, in parameter order) and, when
    /// those say nothing, the ops' metadata.
    pub fn detect(module: &Module, parameter_op_names: &[Option<String>]) -> Frontend {
        let found = |name, clue, text: &str| Frontend {
            name,
            evidence: Some(FrontendEvidence {
                clue,
                text: text.to_string(),
            }),
        };
        let module_name = module.name.as_str();
        // TensorFlow's auto-clustering and TPU bridge name modules `cluster_<id>...`.
        let cluster = module_name
            .strip_prefix("cluster_")
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
        let by_name = MODULE_NAMES
            .iter()
            .find(|(marker, how, _)| match how {
                NameMatch::Prefix => module_name.starts_with(marker),
                NameMatch::Contains => module_name.contains(marker),
            })
            .map(|(_, _, name)| *name)
            .or(cluster.then_some(FrontendName::Tensorflow));
        if let Some(name) = by_name {
            return found(name, FrontendClue::ModuleName, module_name);
        }
        for op_name in parameter_op_names.iter().flatten() {
            if let Some((marker, name)) = PARAMETER_OP_NAMES.iter().find(|(m, _)| op_name == m) {
                return found(*name, FrontendClue::ParameterOpName, marker);
            }
        }
        for (marker, clue, name) in OP_TEXT {
            if module.text_contains(marker) {
                let quoted = marker
                    .trim_start_matches("op_name=\"")
                    .trim_start_matches("op_type=\"");
                return found(*name, *clue, quoted);
            }
        }
        Frontend::unknown()
    }

    /// `TensorFlow (from the module name a_inference_train_step_441__Xla…)`,
    /// `PyTorch/XLA (from the module name SyncTensorsGraph.257: its graph 257, ...)`.
    pub fn describe(&self) -> String {
        let Some(evidence) = &self.evidence else {
            return "unknown (nothing in the text names JAX, TensorFlow or PyTorch/XLA; advice names none of them)"
                .to_string();
        };
        let what = match evidence.clue {
            FrontendClue::ModuleName => format!("the {}", evidence.phrase()),
            _ => evidence.phrase(),
        };
        let note = match (self.name, evidence.clue) {
            (FrontendName::PytorchXla, FrontendClue::ModuleName) => graph_number(&evidence.text)
                .map(|n| {
                    format!(
                        ": its graph {n}, what one torch_xla.sync() (xm.mark_step()) or one \
                         torch.compile graph compiled"
                    )
                })
                .unwrap_or_default(),
            (FrontendName::Tensorflow, FrontendClue::ModuleName) => {
                let short = self.name.short_name(&evidence.text);
                if evidence.text.starts_with("cluster_") {
                    ": a cluster of ops TensorFlow handed XLA (a TPU step, or auto-clustering)"
                        .to_string()
                } else if short == evidence.text {
                    String::new()
                } else {
                    format!(": the tf.function {short}")
                }
            }
            _ => String::new(),
        };
        format!("{} (from {what}{note})", self.name.title())
    }
}

/// `SyncTensorsGraph.257` → `257`.
fn graph_number(module_name: &str) -> Option<&str> {
    let (_, n) = module_name.rsplit_once('.')?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(n)
}

/// A long name cut for a line of text (JSON keeps it whole).
fn shorten(text: &str) -> String {
    const KEEP: usize = 40;
    if text.chars().count() <= KEEP {
        return text.to_string();
    }
    let cut: String = text.chars().take(KEEP).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect(text: &str) -> Frontend {
        let module =
            crate::parse_text("t.txt", text).unwrap_or_else(|e| panic!("{}", e.render(false)));
        let op_names: Vec<Option<String>> = module
            .entry()
            .parameters
            .iter()
            .map(|&p| module.op_name(p))
            .collect();
        Frontend::detect(&module, &op_names)
    }

    fn module(name: &str, parameter_metadata: &str, op_metadata: &str) -> String {
        format!(
            "HloModule {name}\n\nENTRY %e (a: f32[4]) -> f32[4] {{\n  \
             %a = f32[4]{{0}} parameter(0){parameter_metadata}\n  \
             ROOT %n = f32[4]{{0}} negate(%a){op_metadata}\n}}\n"
        )
    }

    #[test]
    fn module_names_say_first() {
        let tf = detect(&module(
            "a_inference_train_step_441__XlaMustCompile_true_config_proto_1_executor_type_2_.8",
            "",
            "",
        ));
        assert_eq!(tf.name, FrontendName::Tensorflow);
        assert_eq!(tf.evidence.as_ref().unwrap().clue, FrontendClue::ModuleName);
        assert_eq!(
            detect(&module("SyncTensorsGraph.257", "", "")).name,
            FrontendName::PytorchXla
        );
        assert_eq!(
            detect(&module("IrToHlo.12", "", "")).name,
            FrontendName::PytorchXla
        );
        assert_eq!(
            detect(&module("jit_train_step", "", "")).name,
            FrontendName::Jax
        );
        assert_eq!(
            detect(&module("pmap_spmd_update__3.268", "", "")).name,
            FrontendName::Jax
        );
        assert_eq!(
            detect(&module("cluster_7035002757448359829_f15n_1__.3522", "", "")).name,
            FrontendName::Tensorflow
        );
    }

    #[test]
    fn parameters_then_ops_say_when_the_name_does_not() {
        let tf = detect(&module("m", ", metadata={op_name=\"XLA_Args\"}", ""));
        assert_eq!(tf.name, FrontendName::Tensorflow);
        assert_eq!(tf.evidence.unwrap().clue, FrontendClue::ParameterOpName);
        let pt = detect(&module(
            "m",
            ", metadata={op_type=\"xla__device_data\" op_name=\"xla__device_data\"}",
            "",
        ));
        assert_eq!(pt.name, FrontendName::PytorchXla);
        let pt_ops = detect(&module(
            "m",
            "",
            ", metadata={op_type=\"aten__neg\" op_name=\"aten__neg\"}",
        ));
        assert_eq!(pt_ops.name, FrontendName::PytorchXla);
        let jax = detect(&module("m", "", ", metadata={op_name=\"jit(f)/neg\"}"));
        assert_eq!(jax.name, FrontendName::Jax);
        let tf_file = detect(&module(
            "m",
            "",
            ", metadata={op_name=\"neg\" source_file=\"/v/site-packages/tensorflow/python/framework/ops.py\" source_line=1221}",
        ));
        assert_eq!(tf_file.name, FrontendName::Tensorflow);
        assert_eq!(tf_file.evidence.unwrap().clue, FrontendClue::SourceFile);
    }

    #[test]
    fn nothing_says_unknown() {
        let unknown = detect(&module("m", ", metadata={op_name=\"a\"}", ""));
        assert_eq!(unknown, Frontend::unknown());
        assert!(unknown.describe().starts_with("unknown"));
    }

    #[test]
    fn tensorflow_names_are_shortened_to_the_function() {
        let tf = FrontendName::Tensorflow;
        assert_eq!(
            tf.short_name("a_inference_train_step_441__XlaMustCompile_true_config_proto_13561319589895757934_executor_type_11160318154034397263_.8"),
            "train_step"
        );
        assert_eq!(
            tf.short_name("a_inference_add_18__XlaMustCompile_true_.1"),
            "add"
        );
        assert_eq!(tf.short_name("__inference_loop_54"), "loop");
        assert_eq!(
            tf.short_name("cluster_7035002757448359829_f15n_1__.3522"),
            "cluster_7035002757448359829_f15n_1__.3522"
        );
        assert_eq!(
            FrontendName::PytorchXla.short_name("SyncTensorsGraph.257"),
            "SyncTensorsGraph.257"
        );
        assert_eq!(FrontendName::Jax.short_name("jit_step"), "jit_step");
    }

    #[test]
    fn descriptions_say_what_the_name_means() {
        let pt = detect(&module("SyncTensorsGraph.257", "", ""));
        assert_eq!(
            pt.describe(),
            "PyTorch/XLA (from the module name SyncTensorsGraph.257: its graph 257, what one \
             torch_xla.sync() (xm.mark_step()) or one torch.compile graph compiled)"
        );
        let tf = detect(&module(
            "a_inference_add_18__XlaMustCompile_true_config_proto_1_.1",
            "",
            "",
        ));
        assert!(
            tf.describe().ends_with(": the tf.function add)"),
            "{}",
            tf.describe()
        );
        // TensorFlow's TPU bridge (the 2020 MLPerf DLRM step in ../shared/external).
        let cluster = detect(&module("cluster_7035002757448359829_f15n_1__.3522", "", ""));
        assert_eq!(
            cluster.describe(),
            "TensorFlow (from the module name cluster_7035002757448359829_f15n_1__.352…: a cluster \
             of ops TensorFlow handed XLA (a TPU step, or auto-clustering))"
        );
    }
}
