//! Out-of-memory messages: find one in pasted text (`parse`, with
//! `grammar/oom.pest`), explain it (`explain`), and link it to a dump (`dump`).

pub mod dump;
pub mod explain;
pub mod model;
mod parse;

pub use model::{Amount, OomFormat, OomMessage};
pub use parse::LOOKED_FOR;

/// Reads the out-of-memory message in `text`, wherever it stands. A log with
/// several is read as one: their lines merge, later values replacing earlier.
pub fn read(text: &str) -> Option<OomMessage> {
    parse::parse_message(text)
}
