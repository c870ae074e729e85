use std::io::{self, Write};

use serde::Serialize;

pub fn render<T: Serialize>(report: &T, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report)?;
    writeln!(out)
}
