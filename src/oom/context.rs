//! What the log around the messages says: which framework and application
//! printed them, which device each line speaks of, the memory settings the
//! user already made, and the functions that were running. Messages
//! themselves rarely name a device or a framework; the log around them
//! usually does (a traceback's file names, an allocator's name, a TPU VM's
//! host name), and advice in the wrong framework's words is advice nobody
//! can follow.

use serde::Serialize;

/// The framework that ran the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    Jax,
    PytorchXla,
    Tensorflow,
}

impl Framework {
    pub fn name(self) -> &'static str {
        match self {
            Framework::Jax => "JAX",
            Framework::PytorchXla => "PyTorch/XLA",
            Framework::Tensorflow => "TensorFlow",
        }
    }
}

/// An application built on a framework whose own settings are the ones to turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum App {
    Vllm,
    AlphaFold,
    ColabFold,
    MaxText,
}

impl App {
    pub fn name(self) -> &'static str {
        match self {
            App::Vllm => "vLLM",
            App::AlphaFold => "AlphaFold",
            App::ColabFold => "ColabFold",
            App::MaxText => "MaxText",
        }
    }

    /// The framework the application runs on, when it has one choice.
    pub fn framework(self) -> Option<Framework> {
        match self {
            App::AlphaFold | App::ColabFold | App::MaxText => Some(Framework::Jax),
            App::Vllm => None,
        }
    }

    /// Applications that only run models, never train them.
    pub fn is_inference(self) -> bool {
        matches!(self, App::Vllm | App::AlphaFold | App::ColabFold)
    }
}

/// A fact read from the log, with the text that shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Found<T> {
    pub value: T,
    /// The words of the log it was read from.
    pub evidence: String,
}

/// Memory settings the log shows the user (or the application) made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Settings {
    /// `XLA_PYTHON_CLIENT_MEM_FRACTION`, or the fraction an application sets for the same pool
    /// (TensorFlow's `per_process_gpu_memory_fraction`, vLLM's `gpu_memory_utilization`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_fraction: Option<Found<f64>>,
    /// `XLA_PYTHON_CLIENT_PREALLOCATE=false` (or TensorFlow's `allow_growth`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preallocate_off: Option<String>,
    /// `TF_FORCE_UNIFIED_MEMORY=1`: device allocations may spill into host RAM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unified_memory: Option<String>,
}

/// Which kind of device a line of the log speaks of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Tpu,
    Gpu,
}

/// What the whole log says.
#[derive(Debug, Clone, Default)]
pub struct LogContext {
    pub framework: Option<Found<Framework>>,
    pub app: Option<Found<App>>,
    pub settings: Settings,
    /// Per logical line, the device markers it holds and their words.
    markers: Vec<(usize, Marker, String)>,
    /// Functions named in op names (`jit(apply_fn)`, `pjit(generate)`) and
    /// tracebacks (`in generate`), in the order they appear.
    pub functions: Vec<String>,
}

/// Words that only a TPU log holds.
const TPU_WORDS: &[&str] = &[
    "libtpu",
    "tpu_driver",
    "TPU VM",
    "TPU v",
    "TPU:",
    "tpu_execute",
    "XRTExecute",
    "XRTCompile",
    "/device:TPU",
    "TpuDevice",
    "PJRT_DEVICE=TPU",
    "colab_tpu",
    "Colab TPU",
    "tpu-vm",
    "t1v-n-",
    "_HBM",
];

/// Words that only a GPU log holds.
const GPU_WORDS: &[&str] = &[
    "GPU_0_bfc",
    "cuda_driver",
    "cuda_dnn",
    "cuda_blas",
    "CUDA_ERROR",
    "cudnn",
    "cuDNN",
    "NCCL",
    "nvidia-smi",
    "NVIDIA",
    "/device:GPU",
    "GpuDevice",
    "CudaDevice",
    "gpu_executable",
    "se_gpu_pjrt",
    "gpu_hlo_schedule",
    "HIP_ERROR",
    "rocm",
    "GeForce",
    "Tesla ",
    " RTX ",
    "GTX ",
    "Quadro ",
    "gpu_device.cc",
];

impl LogContext {
    /// Reads the logical lines of a pasted text.
    pub fn read(lines: &[String]) -> LogContext {
        let mut ctx = LogContext::default();
        for (i, line) in lines.iter().enumerate() {
            ctx.read_line(i, line);
        }
        // An application fixes its framework when the log names none.
        if ctx.framework.is_none() {
            if let Some(app) = &ctx.app {
                if let Some(f) = app.value.framework() {
                    ctx.framework = Some(Found {
                        value: f,
                        evidence: format!("{} runs on {}", app.value.name(), f.name()),
                    });
                }
            }
        }
        // AlphaFold's docker runner sets both unless the log shows otherwise
        // (`docker/run_docker.py`: TF_FORCE_UNIFIED_MEMORY=1, XLA_PYTHON_CLIENT_MEM_FRACTION=4.0).
        if ctx.app.as_ref().is_some_and(|a| a.value == App::AlphaFold) {
            let why = "AlphaFold's docker runner sets it";
            ctx.settings
                .unified_memory
                .get_or_insert_with(|| format!("TF_FORCE_UNIFIED_MEMORY=1 ({why})"));
            ctx.settings.memory_fraction.get_or_insert_with(|| Found {
                value: 4.0,
                evidence: format!("XLA_PYTHON_CLIENT_MEM_FRACTION=4.0 ({why})"),
            });
        }
        ctx
    }

    fn read_line(&mut self, i: usize, line: &str) {
        for (words, marker) in [(TPU_WORDS, Marker::Tpu), (GPU_WORDS, Marker::Gpu)] {
            if let Some(w) = words.iter().find(|w| line.contains(**w)) {
                self.markers.push((i, marker, w.trim().to_string()));
            }
        }
        if let Some(v) = tpu_slice(line) {
            self.markers.push((i, Marker::Tpu, v));
        }
        // PyTorch/XLA's and JAX's programs often load TensorFlow beside them
        // (data pipelines, ColabFold, XRT's runtime), while TensorFlow's own
        // logs do not name JAX or torch_xla: the most specific one found wins.
        if let Some(f) = framework_of(line) {
            let rank = |f: Framework| match f {
                Framework::PytorchXla => 0,
                Framework::Jax => 1,
                Framework::Tensorflow => 2,
            };
            if self
                .framework
                .as_ref()
                .is_none_or(|old| rank(f.value) < rank(old.value))
            {
                self.framework = Some(f);
            }
        }
        if self.app.is_none() {
            self.app = app_of(line);
        }
        settings_of(line, &mut self.settings);
        for name in functions_of(line) {
            if !self.functions.contains(&name) {
                self.functions.push(name);
            }
        }
    }

    /// The device the log speaks of around logical line `at`: the markers on
    /// that line, else the nearest marked line when the log names only one
    /// kind of device or the nearest is close, with its words.
    pub fn device_near(&self, at: usize) -> Option<(Marker, String)> {
        let on_line: Vec<&(usize, Marker, String)> =
            self.markers.iter().filter(|(l, _, _)| *l == at).collect();
        if let [(_, m, w), ..] = on_line[..] {
            if on_line.iter().all(|(_, k, _)| k == m) {
                return Some((*m, w.clone()));
            }
        }
        let kinds = |m: Marker| self.markers.iter().filter(|(_, k, _)| *k == m).count();
        let (tpu, gpu) = (kinds(Marker::Tpu), kinds(Marker::Gpu));
        let nearest = self.markers.iter().min_by_key(|(l, _, _)| l.abs_diff(at))?;
        // A log that names both (a GPU machine listing `tpu_driver` among its
        // platforms) is read by the nearest line that names one, if it is near.
        if tpu == 0 || gpu == 0 || nearest.0.abs_diff(at) <= 3 {
            return Some((nearest.1, nearest.2.clone()));
        }
        None
    }
}

/// `v3-8`, `v2-32`, `v5e`, `v4-64`, `v7x`: a TPU slice's or chip's name.
fn tpu_slice(line: &str) -> Option<String> {
    let b = line.as_bytes();
    (0..b.len().saturating_sub(2)).find_map(|i| {
        let word_start = i == 0 || !b[i - 1].is_ascii_alphanumeric();
        if !(word_start && b[i] == b'v' && (b'2'..=b'7').contains(&b[i + 1])) {
            return None;
        }
        let rest = &line[i + 2..];
        let len = match rest.as_bytes().first()? {
            b'-' => 1 + rest[1..].chars().take_while(char::is_ascii_digit).count(),
            b'e' | b'p' | b'x' => 1,
            _ => return None,
        };
        let end = i + 2 + len;
        let ends_word = line[end..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_ascii_alphanumeric());
        (len > 1 || !rest.starts_with('-')).then_some(())?;
        ends_word.then(|| format!("TPU {}", &line[i..end]))
    })
}

fn found<T>(value: T, evidence: &str) -> Option<Found<T>> {
    Some(Found {
        value,
        evidence: evidence.to_string(),
    })
}

/// The framework a line shows. JAX's XLA once lived in TensorFlow's tree, so
/// `external/org_tensorflow/...` paths are JAX's; TensorFlow's own logs name
/// `tensorflow/core/...`, its Python errors, or `external/local_xla`.
fn framework_of(line: &str) -> Option<Found<Framework>> {
    const TORCH: &[&str] = &[
        "torch_xla",
        "xla_model",
        "XRTCompile",
        "XRTExecute",
        "Bad StatusOr access",
        "xla_util.cc",
        "SyncTensorsGraph",
        "PJRT_DEVICE",
        "XLA_USE_BF16",
    ];
    const JAX: &[&str] = &[
        "jaxlib",
        "XlaRuntimeError",
        "JaxRuntimeError",
        "jax._src",
        "jax/_src",
        "jax.errors",
        "external/org_tensorflow/",
        "external/xla/xla",
        "XLA_PYTHON_CLIENT",
        "flax",
        "haiku",
    ];
    const TF: &[&str] = &[
        "OOM when allocating tensor",
        "ResourceExhaustedError",
        "tensorflow.python",
        "tensorflow/python",
        "tensorflow/core/",
        "tensorflow/stream_executor",
        "external/local_xla",
        "report_tensor_allocations_upon_oom",
        "TPUEstimator",
        "tf.function",
        "tf.config",
        "keras",
    ];
    if let Some(w) = TORCH.iter().find(|w| line.contains(**w)) {
        return found(Framework::PytorchXla, w);
    }
    if let Some(w) = JAX.iter().find(|w| line.contains(**w)) {
        return found(Framework::Jax, w);
    }
    // A `tensorflow/...` path inside JAX's bundled XLA is not TensorFlow.
    if !line.contains("org_tensorflow") {
        if let Some(w) = TF.iter().find(|w| line.contains(**w)) {
            return found(Framework::Tensorflow, w);
        }
    }
    None
}

fn app_of(line: &str) -> Option<Found<App>> {
    let lower = line.to_lowercase();
    const APPS: &[(&str, App)] = &[
        ("vllm", App::Vllm),
        ("enginecore", App::Vllm),
        ("gpu_memory_utilization", App::Vllm),
        ("gpu-memory-utilization", App::Vllm),
        ("colabfold", App::ColabFold),
        ("not enough gpu memory?", App::ColabFold),
        ("alphafold", App::AlphaFold),
        // AlphaFold's docker runner prefixes every line it relays with its name.
        ("run_docker.py", App::AlphaFold),
        ("maxtext", App::MaxText),
    ];
    APPS.iter()
        .find(|(w, _)| lower.contains(w))
        .and_then(|(w, app)| found(*app, w))
}

/// The number after `key=` or `key ` in `line`.
fn value_after(line: &str, key: &str) -> Option<f64> {
    let at = line.find(key)? + key.len();
    let rest = line[at..].trim_start_matches(['=', ' ', '"', '\'', ':']);
    let number: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    number.parse().ok()
}

fn settings_of(line: &str, s: &mut Settings) {
    for key in [
        "XLA_PYTHON_CLIENT_MEM_FRACTION",
        "per_process_gpu_memory_fraction",
        "gpu_memory_utilization",
        "gpu-memory-utilization",
    ] {
        if let Some(v) = value_after(line, key) {
            s.memory_fraction = Some(Found {
                value: v,
                evidence: format!("{key}={v}"),
            });
        }
    }
    let lower = line.to_lowercase();
    if lower.contains("xla_python_client_preallocate") && lower.contains("false")
        || lower.contains("allow_growth = true")
        || lower.contains("set_memory_growth")
    {
        s.preallocate_off = Some(line.trim().chars().take(120).collect());
    }
    if line.contains("TF_FORCE_UNIFIED_MEMORY") && !line.contains("=0") {
        s.unified_memory = Some("TF_FORCE_UNIFIED_MEMORY".into());
    }
}

/// Functions a line names: `jit(NAME)`, `pjit(NAME)`, `pmap(NAME)` in op
/// names, and `in NAME` at the end of a traceback's `File ... line N, in NAME`.
fn functions_of(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    for key in ["pjit(", "jit(", "pmap(", "xmap("] {
        let mut rest = line;
        while let Some(at) = rest.find(key) {
            let after = &rest[at + key.len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != "main" && after[name.len()..].starts_with(')') {
                out.push(name);
            }
            rest = after;
        }
    }
    if line.trim_start().starts_with("File \"") {
        if let Some((_, name)) = line.rsplit_once(", in ") {
            out.push(name.trim().to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(text: &str) -> LogContext {
        LogContext::read(&text.lines().map(str::to_string).collect::<Vec<_>>())
    }

    #[test]
    fn jax_paths_inside_tensorflow_are_jax() {
        let c = ctx(
            "2022-10-25 W external/org_tensorflow/tensorflow/tsl/framework/bfc_allocator.cc:479] x",
        );
        assert_eq!(c.framework.unwrap().value, Framework::Jax);
        let c = ctx("2020-11-04 W tensorflow/core/framework/op_kernel.cc:1651] OP_REQUIRES failed");
        assert_eq!(c.framework.unwrap().value, Framework::Tensorflow);
        let c = ctx("RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: x");
        assert_eq!(c.framework.unwrap().value, Framework::PytorchXla);
    }

    #[test]
    fn tpu_slices_and_hosts_are_tpu_markers() {
        let c =
            ctx("When I use 13b an error occurs on v3-8 as follows:\nFailed to allocate request");
        assert_eq!(c.device_near(1).unwrap().0, Marker::Tpu);
        assert!(tpu_slice("a uuid4-like version v4 only").is_none());
        assert_eq!(tpu_slice("TPU v5e chip").as_deref(), Some("TPU v5e"));
        let c = ctx("avaer@t1v-n-490548e3-w-0:~$ python3 x.py\nerror");
        assert_eq!(c.device_near(1).unwrap().0, Marker::Tpu);
    }

    #[test]
    fn settings_and_functions() {
        let c = ctx("XLA_PYTHON_CLIENT_MEM_FRACTION=.80\nop_name=\"pjit(generate)/jit(main)/x\"");
        assert_eq!(c.settings.memory_fraction.unwrap().value, 0.8);
        assert_eq!(c.functions, vec!["generate".to_string()]);
        let c = ctx("I0309 12:51:51 run_docker.py:247] Size: 1.32GiB");
        assert_eq!(c.app.unwrap().value, App::AlphaFold);
        assert_eq!(c.settings.memory_fraction.unwrap().value, 4.0);
    }
}
