//! Caveats about a module's numbers, as data: the JSON carries each by its
//! code and facts, and the words, which may name a setting (`--tpu`), are
//! those of the interface that asked (the command line's flags, or the Python
//! package's terms: [`Interface`]).

use serde::Serialize;

use crate::chip::{chips_in_words, Backend, Interface, TpuVersion};

/// One caveat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Note {
    /// A TPU module whose chip nobody named (no `target_arguments.txt`
    /// beside it, no `--tpu`): tuple tables are sized as on `assumed`.
    TpuChipAssumed { assumed: TpuVersion },
    /// The backend was forced (`--backend`) against a marker in the text
    /// that only `detected` writes.
    BackendOverridden {
        forced: Backend,
        detected: Backend,
        marker: String,
    },
    /// A TPU chip was named for a module of another backend, and ignored.
    TpuChipIgnored { backend: Backend },
    /// Not an optimized, scheduled module: XLA will fuse, reorder and pack
    /// it differently, so the numbers are estimates.
    NotOptimized,
}

impl Note {
    /// The note in words, naming `interface`'s settings.
    pub fn words(&self, interface: Interface) -> String {
        match self {
            Note::TpuChipAssumed { assumed } => {
                let how = match interface.chip_setting() {
                    Some(flag) => format!("{flag} sets the chip"),
                    None => "analyzing the compiled program (hlomem.compile_for's, or a \
                             jax.stages.Compiled on TPU devices) names the chip"
                        .to_string(),
                };
                let other = assumed.other_tuple_tables();
                format!(
                    "the TPU chip is not named (no target_arguments.txt beside the module): tuple tables \
                     are sized as on {} ({} bytes; {} on {}); {how}",
                    chips_in_words(&assumed.same_tuple_tables()),
                    assumed.tuple_granule(),
                    other.first().map_or(0, |o| o.tuple_granule()),
                    chips_in_words(&other)
                )
            }
            Note::BackendOverridden {
                forced,
                detected,
                marker,
            } => {
                let setting = match interface.backend_setting() {
                    Some(flag) => format!("{flag} {forced}"),
                    None => format!("the backend given ({forced})"),
                };
                format!(
                    "{setting} overrides the text, which is {detected}'s ({marker}): these numbers follow \
                     rules this module was not compiled under"
                )
            }
            Note::TpuChipIgnored { .. } => format!(
                "{} applies to TPU modules only; this one is not, so it was ignored",
                interface
                    .chip_setting()
                    .unwrap_or("the TPU chip of the compiled program")
            ),
            Note::NotOptimized => {
                "not an optimized, scheduled module: XLA will fuse, reorder and pack it \
                                   differently, so these numbers are estimates"
                    .into()
            }
        }
    }
}

/// A note as the report carries it: the data, and its words for the
/// interface that asked (`message`, which every renderer prints as it is).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct NoteReport {
    #[serde(flatten)]
    pub note: Note,
    pub message: String,
}

impl NoteReport {
    pub fn new(note: Note, interface: Interface) -> NoteReport {
        let message = note.words(interface);
        NoteReport { note, message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_interface_names_its_own_settings() {
        let notes = [
            Note::TpuChipAssumed {
                assumed: TpuVersion::V5e,
            },
            Note::BackendOverridden {
                forced: Backend::Tpu,
                detected: Backend::Gpu,
                marker: "\"operation_queue_id\"".into(),
            },
            Note::TpuChipIgnored {
                backend: Backend::Cpu,
            },
        ];
        for note in &notes {
            let cli = note.words(Interface::Cli);
            let python = note.words(Interface::Python);
            assert!(cli.contains("--tpu") || cli.contains("--backend"), "{cli}");
            assert!(!python.contains("--"), "{python}");
        }
        assert_eq!(
            Note::NotOptimized.words(Interface::Cli),
            Note::NotOptimized.words(Interface::Python)
        );
    }
}
