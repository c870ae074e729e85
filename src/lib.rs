//! hlomem: static memory analysis of XLA HLO dumps.
//!
//! Data flows one way: files ([`pipeline`] reads them) → text ([`source`]) →
//! pest parse and typed IR ([`hlo`]) → memory model ([`analysis`]) → findings
//! ([`findings`]) → report ([`report`]) → renderers ([`render`]). The pipeline
//! runs those stages and does all file I/O. See ARCHITECTURE.md.

// pest is built without its `std` feature, which checks the remaining stack
// at every rule (a tenth of the parse); pest's generated code then names
// `alloc`. The check has nothing to catch: the HLO grammar recurses only
// within a line, and lines are parsed once their bracket nesting is known to
// be shallow (`hlo::parse::too_deep`); the OOM and report grammars do not recurse.
extern crate alloc;

pub mod analysis;
pub mod chip;
pub mod error;
pub mod findings;
pub mod frontend;
pub mod gate;
pub mod hlo;
pub mod oom;
pub mod pipeline;
pub mod render;
pub mod report;
pub mod schema;
pub mod source;
pub mod units;
pub mod usage;
pub mod xla_report;

pub use error::Error;
pub use hlo::Module;
pub use pipeline::{
    analyze_inputs, analyze_paths, collect_inputs, load_and_model, load_module, parse_text,
    parse_text_on_demand, AnalyzeOptions,
};
pub use report::Report;
