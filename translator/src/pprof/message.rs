//! The pprof wire format (`google/pprof` `proto/profile.proto`) as prost messages.
//!
//! Derived here rather than taken from the `pprof` crate: that crate generates its messages
//! with rust-protobuf (or prost behind a feature) and brings a sampling profiler (signals,
//! `backtrace`, `nix`) with it; the translator is pure and needs only these nine messages.
//! Field numbers and types follow profile.proto exactly; ids and string indices are plain
//! integers, checked when resolved ([`super::to_otlp`]).

/// A pprof profile (`perftools.profiles.Profile`).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PprofProfile {
    /// What each sample value measures.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<PprofValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<PprofSample>,
    /// Executable and library mappings.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<PprofMapping>,
    /// Locations (addresses, with their lines).
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<PprofLocation>,
    /// Functions.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<PprofFunction>,
    /// Strings; index 0 is "".
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// Regex of frames to drop (string index).
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    /// Regex of frames to keep (string index).
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    /// Collection time, Unix nanoseconds.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// Collection duration, nanoseconds.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// What the period measures.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<PprofValueType>,
    /// Events between samples.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free-form comments (string indices).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type shown by default (string index of its type).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
    /// Documentation link (string index).
    #[prost(int64, tag = "15")]
    pub doc_url: i64,
}

/// A type and unit (string indices).
#[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
pub struct PprofValueType {
    /// Type, e.g. `cpu`.
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// Unit, e.g. `nanoseconds`.
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// A sample: a stack (leaf first), one value per sample type, labels.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PprofSample {
    /// Location ids, leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per sample type.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Labels.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<PprofLabel>,
}

/// A label: a string (`str`) or a number (`num`, with `num_unit`).
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct PprofLabel {
    /// Key (string index).
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// String value (string index; 0 for a numeric label).
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// Numeric value.
    #[prost(int64, tag = "3")]
    pub num: i64,
    /// Unit of `num` (string index).
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// A mapping of an object file into memory.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PprofMapping {
    /// Unique non-zero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Start address.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// End address.
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// File offset of the start.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// File name (string index).
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// Build id (string index).
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// Symbolization state.
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    /// Symbolization state.
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    /// Symbolization state.
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    /// Symbolization state.
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// A location: an address and the lines it stands for (inlined callees first, caller last).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PprofLocation {
    /// Unique non-zero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Mapping id (0: none).
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// Instruction address.
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// Lines, innermost inline level first.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<PprofLine>,
    /// Several symbols share this address (identical code folding).
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

/// A line of a location.
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct PprofLine {
    /// Function id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// Line number.
    #[prost(int64, tag = "2")]
    pub line: i64,
    /// Column number.
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// A function.
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct PprofFunction {
    /// Unique non-zero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Name (string index).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// Mangled name (string index).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// Source file (string index).
    #[prost(int64, tag = "4")]
    pub filename: i64,
    /// First line of the function.
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}
