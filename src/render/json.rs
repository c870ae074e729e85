use std::io::{self, Write};

use schemars::JsonSchema;
use serde::Serialize;

use crate::schema::Versioned;

/// Pretty JSON with `"schema_version"` first.
pub fn render<T: Serialize + JsonSchema>(report: &T, out: &mut dyn Write) -> io::Result<()> {
    // serde_json writes a few bytes at a time (a key, a colon, an indent);
    // through `dyn Write` each would be a call. A buffer of a concrete type
    // takes them inline and passes them on in large blocks.
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    serde_json::to_writer_pretty(&mut out, &Versioned::new(report))?;
    writeln!(out)?;
    out.flush()
}
