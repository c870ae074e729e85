//! The JSON contract of every command (`analyze`'s and `explain`'s reports,
//! `check`'s and `diff`'s gate results): every `--format json` document carries
//! `"schema_version"`, and its JSON Schema is generated from the report types
//! (`hlomem schema COMMAND` prints it; `schema/*.schema.json` in the
//! repository are these, checked by a test). The version goes up when a field
//! is removed or changes meaning; added fields keep it.

use schemars::JsonSchema;
use serde::Serialize;

pub const SCHEMA_VERSION: u32 = 4;

/// A JSON document: the version, then the command's own fields.
#[derive(Serialize, JsonSchema)]
pub struct Versioned<'a, T: JsonSchema> {
    /// [`SCHEMA_VERSION`] of the hlomem that wrote the document.
    pub schema_version: u32,
    #[serde(flatten)]
    pub body: &'a T,
}

impl<'a, T: JsonSchema> Versioned<'a, T> {
    pub fn new(body: &'a T) -> Versioned<'a, T> {
        Versioned {
            schema_version: SCHEMA_VERSION,
            body,
        }
    }
}

/// The commands whose output has a schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Document {
    Analyze,
    Check,
    Diff,
    Explain,
    /// `targets`: the devices the Python package compiles for, or one.
    Targets,
    /// `fits`: whether a program fits on one device of a target.
    Fits,
}

impl Document {
    pub const ALL: [Document; 6] = [
        Document::Analyze,
        Document::Check,
        Document::Diff,
        Document::Explain,
        Document::Targets,
        Document::Fits,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Document::Analyze => "analyze",
            Document::Check => "check",
            Document::Diff => "diff",
            Document::Explain => "explain",
            Document::Targets => "targets",
            Document::Fits => "fits",
        }
    }

    /// The JSON Schema of the command's `--format json` output (what hlomem
    /// writes: fields it may leave out are not required).
    pub fn schema(self) -> schemars::Schema {
        let generator = schemars::generate::SchemaSettings::draft2020_12()
            .for_serialize()
            .into_generator();
        match self {
            Document::Analyze => {
                generator.into_root_schema_for::<Versioned<'static, crate::report::Report>>()
            }
            Document::Check => {
                generator.into_root_schema_for::<Versioned<'static, crate::gate::CheckResult>>()
            }
            Document::Diff => {
                generator.into_root_schema_for::<Versioned<'static, crate::gate::DiffReport>>()
            }
            Document::Explain => generator
                .into_root_schema_for::<Versioned<'static, crate::report::explain::ExplainReport>>(
                ),
            Document::Targets => generator
                .into_root_schema_for::<Versioned<'static, crate::report::fits::TargetsReport>>(),
            Document::Fits => generator
                .into_root_schema_for::<Versioned<'static, crate::report::fits::FitsReport>>(),
        }
    }
}
