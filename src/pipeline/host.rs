//! What this machine lets hlomem use: the memory limit a large module is
//! checked against before it is read, so that it is refused with a message
//! rather than killed by an allocation failure halfway.

/// Memory a module needs per byte of its text, at most: parse tree, IR,
/// dataflow and live ranges together measured 9–13x on real and generated
/// modules (BENCHMARKS.md); 16 leaves room.
pub const BYTES_PER_TEXT_BYTE: u64 = 16;

/// Memory the process needs besides the module (threads, allocator arenas).
pub const BASE_BYTES: u64 = 256 << 20;

/// The memory analyzing `text_bytes` of HLO text needs, at most.
pub fn memory_needed(text_bytes: u64) -> u64 {
    text_bytes
        .saturating_mul(BYTES_PER_TEXT_BYTE)
        .saturating_add(BASE_BYTES)
}

/// The tightest hard memory limit on this process, with where it comes from:
/// the address-space limit (`ulimit -v`), the cgroup's `memory.max` (a
/// container's limit) and the machine's RAM. `None` where none can be read
/// (not Linux).
pub fn memory_limit() -> Option<(u64, &'static str)> {
    let address_space = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("Max address space"))?;
            line.split_whitespace().nth(3)?.parse::<u64>().ok()
        })
        .map(|b| (b, "the address-space limit (ulimit -v)"));
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .map(|b| (b, "the container's memory limit (cgroup memory.max)"));
    let ram = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map(|kib| (kib.saturating_mul(1024), "the machine's memory (MemTotal)"));
    [address_space, cgroup, ram]
        .into_iter()
        .flatten()
        .min_by_key(|&(bytes, _)| bytes)
}
