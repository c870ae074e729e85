//! One integration-test binary (faster to link than one per file).

mod accelerators;
mod architecture;
mod attacks;
mod cli;
mod corpus;
mod deferred;
mod errors;
mod explain;
mod folders;
mod frontends;
mod gate;
mod hostile;
mod html;
mod oom_cases;
mod oom_catalog;
mod oom_false;
mod parse;
mod python;
mod refusals;
mod report_layouts;
mod samples;
mod schema;
mod stdin;
mod support;
mod usage;
mod verify_reports;
