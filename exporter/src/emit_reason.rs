//! Why the chunk accumulator emitted a chunk: [`EmitReason`], below both the accumulator and
//! the metrics that count it.

/// Why a chunk was emitted (the `reason` of `profilink_exporter_chunks_closed_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmitReason {
    /// The session's newest sample passed the window's end by `chunk_lateness`.
    Duration,
    /// The session's newest sample passed the window's end and no sample joined it for half
    /// of `chunk_idle_timeout`.
    Settled,
    /// The window's chunk would have passed `max_chunk_bytes`: cut early.
    Size,
    /// The open windows together would have held more than `max_open_bytes`: cut early.
    Memory,
    /// No samples for `chunk_idle_timeout`.
    Idle,
    /// Shutdown flush.
    Flush,
    /// Samples for a window already past the lateness bound when they arrived.
    Late,
}

impl EmitReason {
    /// Every reason, in counter order.
    pub const ALL: [EmitReason; 7] = [
        EmitReason::Duration,
        EmitReason::Settled,
        EmitReason::Size,
        EmitReason::Memory,
        EmitReason::Idle,
        EmitReason::Flush,
        EmitReason::Late,
    ];

    /// Its position in [`EmitReason::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            EmitReason::Duration => "duration",
            EmitReason::Settled => "settled",
            EmitReason::Size => "size",
            EmitReason::Memory => "memory",
            EmitReason::Idle => "idle",
            EmitReason::Flush => "flush",
            EmitReason::Late => "late",
        }
    }
}
