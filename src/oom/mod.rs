//! Out-of-memory messages: find them in pasted text (`lines` undoes wrapping
//! and escaping, `parse` reads each line with `grammar/oom.pest`), explain one
//! (`explain`, with `verdict`, `checks` and `advice`), and link it to a dump
//! (`dump`).

pub mod advice;
pub mod checks;
pub mod dump;
pub mod explain;
pub mod failure;
mod lines;
pub mod model;
mod parse;
pub mod verdict;

pub use model::{Amount, OomFormat, OomMessage};
pub use parse::LOOKED_FOR;

/// Every out-of-memory message in `text`, in the order they appear. A log
/// with several gives several; the same error printed twice (a log line, then
/// the traceback) is one.
pub fn read_all(text: &str) -> Vec<OomMessage> {
    parse::parse_messages(text)
}

/// The message that leads: the first error (a headline such as `Out of
/// memory while trying to allocate`), else the first message of any kind
/// (warnings or allocator lines alone).
pub fn read(text: &str) -> Option<OomMessage> {
    let mut all = read_all(text);
    let lead = lead_index(&all)?;
    Some(all.swap_remove(lead))
}

/// Which of `messages` leads (see [`read`]).
pub fn lead_index(messages: &[OomMessage]) -> Option<usize> {
    messages
        .iter()
        .position(|m| m.is_error())
        .or(if messages.is_empty() { None } else { Some(0) })
}
