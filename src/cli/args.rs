//! clap's view of the library's enums: the library does not depend on clap,
//! so each value the command line accepts is mirrored here, with a `From`
//! into the library's type (a variant added on one side only does not compile).

use hlomem::chip::{Backend, Interface, TpuVersion};
use hlomem::render::{AnalyzeFormat, ExplainFormat, FitsFormat, GateFormat, TargetsFormat};
use hlomem::schema::Document;

macro_rules! mirror {
    ($(#[$meta:meta])* $arg:ident => $lib:ident { $($(#[$vmeta:meta])* $variant:ident),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
        pub enum $arg {
            $($(#[$vmeta])* $variant,)*
        }

        impl From<$arg> for $lib {
            fn from(value: $arg) -> $lib {
                match value {
                    $($arg::$variant => $lib::$variant,)*
                }
            }
        }
    };
}

mirror! {
    /// `analyze --format`.
    AnalyzeFormatArg => AnalyzeFormat {
        /// For people, on a terminal.
        Text,
        /// For programs: exact byte counts.
        Json,
        /// For pull-request and issue comments.
        Markdown,
        /// GitHub Actions annotations.
        Github,
        /// One self-contained page with a chart of memory over the schedule.
        Html,
    }
}

mirror! {
    /// `check --format` and `diff --format`.
    GateFormatArg => GateFormat {
        /// For people, on a terminal.
        Text,
        /// For programs: exact byte counts.
        Json,
        /// For pull-request comments.
        Markdown,
        /// GitHub Actions annotations: `::error` for what fails the gate.
        Github,
    }
}

mirror! {
    /// `explain --format`.
    ExplainFormatArg => ExplainFormat {
        /// For people, on a terminal.
        Text,
        /// For programs: exact byte counts.
        Json,
        /// For issue comments.
        Markdown,
    }
}

mirror! {
    /// `targets --format`.
    TargetsFormatArg => TargetsFormat {
        /// For people, on a terminal.
        Text,
        /// For programs (the Python package reads it): exact byte counts.
        Json,
    }
}

mirror! {
    /// `fits --format`.
    FitsFormatArg => FitsFormat {
        /// For people: the decision, then the figures it was made from.
        Text,
        /// For programs (the Python package's `Verdict` reads it): the
        /// figures, the decision and its words.
        Json,
    }
}

mirror! {
    /// `--backend`.
    BackendArg => Backend { Cpu, Gpu, Tpu }
}

mirror! {
    /// `--tpu`.
    TpuArg => TpuVersion { V4, V5e, V5p, V6e }
}

mirror! {
    /// `--interface` (hidden: the Python package's).
    InterfaceArg => Interface { Cli, Python }
}

mirror! {
    /// `schema COMMAND`.
    DocumentArg => Document { Analyze, Check, Diff, Explain, Targets, Fits }
}

/// `--libtpu VERSION`: the release as given, and whose rules it means
/// (`Some(true)`: 0.0.52's; `None`: a release whose rules are not known).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LibtpuArg {
    pub newer: Option<bool>,
}

/// Parses `--libtpu`; what is not a version is refused with an example.
pub fn libtpu_version(text: &str) -> Result<LibtpuArg, String> {
    hlomem::chip::libtpu_rules(text).map(|newer| LibtpuArg { newer })
}
