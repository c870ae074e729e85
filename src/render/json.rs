use std::io::{self, Write};

use schemars::JsonSchema;
use serde::Serialize;

use crate::report::schema::Versioned;

/// Pretty JSON with `"schema_version"` first.
pub fn render<T: Serialize + JsonSchema>(report: &T, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &Versioned::new(report))?;
    writeln!(out)
}
