//! The attribute-name convention for Sentry data in OTLP.
//!
//! Every Sentry field without a native OTLP home is kept under one of these names, so that
//! [`restore_chunk`](super::restore_chunk) can rebuild the exact chunk. OpenTelemetry semantic
//! conventions are used where one exists; everything Sentry-specific is under `sentry.`.
//!
//! | where | key | value | from |
//! |---|---|---|---|
//! | resource | [`SERVICE_NAME`] | string | release up to `@` (`pkg@1.0` → `pkg`), else `unknown_service` (derived, ignored by restore) |
//! | resource | [`SERVICE_VERSION`] | string | `release` (absent when `None`) |
//! | resource | [`DEPLOYMENT_ENVIRONMENT_NAME`] | string | `environment` |
//! | resource | [`TELEMETRY_SDK_NAME`], [`TELEMETRY_SDK_VERSION`] | string | `client_sdk.name` / `.version` (both written when `client_sdk` is set) |
//! | resource | [`TELEMETRY_SDK_LANGUAGE`] | string | `platform` mapped to the OTel language (`resource::sdk_language`) |
//! | resource | [`SENTRY_PLATFORM`] | string | `platform`, exactly |
//! | resource | [`SENTRY_PROFILER_ID`] | string | `profiler_id`, exactly (V2 only) |
//! | resource | [`PROCESS_RUNTIME_NAME`], [`PROCESS_RUNTIME_VERSION`] | string | V1 `runtime.name` / `.version` |
//! | resource | [`OS_NAME`], [`OS_VERSION`] | string | V1 `os.name` / `.version` |
//! | resource | [`HOST_ARCH`] | string | V1 `device.architecture` (`x86_64` → `amd64`, `aarch64` → `arm64`) |
//! | profile | [`PROFILINK_FORMAT`] | string | [`PROFILINK_FORMAT_CHUNK_V1`]: this profile is profilink's complete encoding of a chunk (see [`check_marker`](super::check_marker) for the whole marker set) |
//! | profile | [`SENTRY_CHUNK_ID`] | string | `chunk_id`, exactly |
//! | profile | [`SENTRY_PROFILE_ID`] | string | V1 `event_id`, exactly |
//! | profile | [`SENTRY_VERSION`] | string | `version` (`"2"`, `"1"`) |
//! | profile | [`SENTRY_CONTENT_TYPE`] | string | `content_type`, when set |
//! | profile | [`SENTRY_THREAD_METADATA`] | string (JSON object) | the whole `thread_metadata` map (names, priorities, threads without samples), when not empty |
//! | profile | [`SENTRY_DEBUG_META`] | string (JSON object) | the whole `debug_meta`, when set (images in order, with every field) |
//! | profile | [`SENTRY_MEASUREMENTS`] | kvlist | `measurements`: `{name: {unit: string, timestamps: [double], values: [double]}}` (doubles keep every bit); V1: `elapsed_since_start_ns: [int]` instead of `timestamps` |
//! | profile | [`SENTRY_V1_TRANSACTIONS`] | string (JSON array) | V1 `transactions` (or the single `transaction`) |
//! | sample | [`THREAD_ID`] | int, or string | `thread_id`: an int when it is the canonical decimal of an `i64` (`"42"`, not `"042"`), else the string |
//! | sample | [`THREAD_NAME`] | string | `thread_metadata[thread_id].name`, when known |
//! | location | [`PROFILE_FRAME_TYPE`] | string | frame `platform`, else the chunk's, mapped (`frames::frame_type`) |
//! | location | [`SENTRY_FRAME_PLATFORM`] | string | frame `platform`, when set |
//! | location | [`SENTRY_FRAME_IN_APP`] | bool | frame `in_app`, when set |
//! | location | [`SENTRY_FRAME_MODULE`] | string | frame `module`, when set |
//! | location | [`SENTRY_FRAME_PACKAGE`] | string | frame `package`, when set |
//! | location | [`SENTRY_FRAME_FILENAME`] | string | frame `filename`, when both `abs_path` and `filename` are set (`abs_path` then fills `Function.filename`) |
//! | location | [`SENTRY_FRAME_INSTRUCTION_ADDR`] | string | frame `instruction_addr`, when `Location.address` cannot give it back (not canonical lowercase `0x…`, zero, or unparsable) |
//! | location | [`SENTRY_FRAME_PRESENT`] | array of strings | which of `function`, `abs_path`, `filename`, `lineno`, `colno` are set, only when the default reading of the `Line`/`Function` would be wrong (see the `frames` module) |
//! | mapping | [`PROCESS_EXECUTABLE_BUILD_ID_GNU`] | string | debug image `code_id` |
//! | mapping | [`SENTRY_DEBUG_IMAGE_TYPE`] | string | debug image `type` |
//! | mapping | [`SENTRY_DEBUG_IMAGE_DEBUG_ID`] | string | debug image `debug_id` |
//! | mapping | [`SENTRY_DEBUG_IMAGE_VMADDR`] | string | debug image `image_vmaddr` |
//! | mapping | [`SENTRY_DEBUG_IMAGE_ARCH`] | string | debug image `arch` (an extra field), when a string |
//! | mapping | [`SENTRY_DEBUG_IMAGE_SLOT_BASE`] | int | for an image profilink placed in its synthetic address space (see [`profilink_proto::sentry::image_space`]): the slot base subtracted from the image's and its frames' addresses, which are ELF virtual addresses in OTLP |
//!
//! Mapping attributes are for OTLP consumers; restore reads [`SENTRY_DEBUG_META`] and, for the
//! frames' addresses, [`SENTRY_DEBUG_IMAGE_SLOT_BASE`].

/// `service.name` (resource).
pub const SERVICE_NAME: &str = "service.name";
/// `service.version` (resource) ← `release`.
pub const SERVICE_VERSION: &str = "service.version";
/// `deployment.environment.name` (resource) ← `environment`.
pub const DEPLOYMENT_ENVIRONMENT_NAME: &str = "deployment.environment.name";
/// `telemetry.sdk.name` (resource) ← `client_sdk.name`.
pub const TELEMETRY_SDK_NAME: &str = "telemetry.sdk.name";
/// `telemetry.sdk.version` (resource) ← `client_sdk.version`.
pub const TELEMETRY_SDK_VERSION: &str = "telemetry.sdk.version";
/// `telemetry.sdk.language` (resource) ← `platform`, mapped.
pub const TELEMETRY_SDK_LANGUAGE: &str = "telemetry.sdk.language";
/// `process.runtime.name` (resource) ← V1 `runtime.name`.
pub const PROCESS_RUNTIME_NAME: &str = "process.runtime.name";
/// `process.runtime.version` (resource) ← V1 `runtime.version`.
pub const PROCESS_RUNTIME_VERSION: &str = "process.runtime.version";
/// `os.name` (resource) ← V1 `os.name`.
pub const OS_NAME: &str = "os.name";
/// `os.version` (resource) ← V1 `os.version`.
pub const OS_VERSION: &str = "os.version";
/// `host.arch` (resource) ← V1 `device.architecture`.
pub const HOST_ARCH: &str = "host.arch";
/// `sentry.platform` (resource) ← `platform`, exactly.
pub const SENTRY_PLATFORM: &str = "sentry.platform";
/// `sentry.profiler_id` (resource) ← `profiler_id`, exactly.
pub const SENTRY_PROFILER_ID: &str = "sentry.profiler_id";

/// `profilink.format` (profile): which profilink encoding the profile is; profilink writes
/// [`PROFILINK_FORMAT_CHUNK_V1`] on every profile made from a chunk.
pub const PROFILINK_FORMAT: &str = "profilink.format";
/// The value of [`PROFILINK_FORMAT`] for a V2 chunk encoded by this convention.
pub const PROFILINK_FORMAT_CHUNK_V1: &str = "sentry.chunk/v1";

/// `sentry.chunk_id` (profile) ← `chunk_id`; with the rest of the marker set (see
/// [`check_marker`](super::check_marker)) it marks a profile restorable to a chunk.
pub const SENTRY_CHUNK_ID: &str = "sentry.chunk_id";
/// `sentry.profile_id` (profile) ← V1 `event_id`.
pub const SENTRY_PROFILE_ID: &str = "sentry.profile_id";
/// `sentry.version` (profile) ← `version`.
pub const SENTRY_VERSION: &str = "sentry.version";
/// `sentry.content_type` (profile) ← `content_type`.
pub const SENTRY_CONTENT_TYPE: &str = "sentry.content_type";
/// `sentry.thread_metadata` (profile) ← `thread_metadata` as a JSON object string.
pub const SENTRY_THREAD_METADATA: &str = "sentry.thread_metadata";
/// `sentry.debug_meta` (profile) ← `debug_meta` as a JSON object string.
pub const SENTRY_DEBUG_META: &str = "sentry.debug_meta";
/// `sentry.measurements` (profile) ← `measurements` as a kvlist.
pub const SENTRY_MEASUREMENTS: &str = "sentry.measurements";
/// `sentry.v1.transactions` (profile) ← V1 `transactions` as a JSON array string.
pub const SENTRY_V1_TRANSACTIONS: &str = "sentry.v1.transactions";

/// `thread.id` (sample).
pub const THREAD_ID: &str = "thread.id";
/// `thread.name` (sample).
pub const THREAD_NAME: &str = "thread.name";

/// `profile.frame.type` (location).
pub const PROFILE_FRAME_TYPE: &str = "profile.frame.type";
/// `sentry.frame.platform` (location) ← frame `platform`.
pub const SENTRY_FRAME_PLATFORM: &str = "sentry.frame.platform";
/// `sentry.frame.in_app` (location) ← frame `in_app`.
pub const SENTRY_FRAME_IN_APP: &str = "sentry.frame.in_app";
/// `sentry.frame.module` (location) ← frame `module`.
pub const SENTRY_FRAME_MODULE: &str = "sentry.frame.module";
/// `sentry.frame.package` (location) ← frame `package`.
pub const SENTRY_FRAME_PACKAGE: &str = "sentry.frame.package";
/// `sentry.frame.filename` (location) ← frame `filename` when `abs_path` is also set.
pub const SENTRY_FRAME_FILENAME: &str = "sentry.frame.filename";
/// `sentry.frame.instruction_addr` (location) ← frame `instruction_addr` when the address
/// alone cannot give it back.
pub const SENTRY_FRAME_INSTRUCTION_ADDR: &str = "sentry.frame.instruction_addr";
/// `sentry.frame.present` (location): the set fields among `function`, `abs_path`,
/// `filename`, `lineno`, `colno`, when the default reading would be wrong.
pub const SENTRY_FRAME_PRESENT: &str = "sentry.frame.present";

/// `process.executable.build_id.gnu` (mapping) ← debug image `code_id`.
pub const PROCESS_EXECUTABLE_BUILD_ID_GNU: &str = "process.executable.build_id.gnu";
/// `sentry.debug_image.type` (mapping).
pub const SENTRY_DEBUG_IMAGE_TYPE: &str = "sentry.debug_image.type";
/// `sentry.debug_image.debug_id` (mapping).
pub const SENTRY_DEBUG_IMAGE_DEBUG_ID: &str = "sentry.debug_image.debug_id";
/// `sentry.debug_image.image_vmaddr` (mapping).
pub const SENTRY_DEBUG_IMAGE_VMADDR: &str = "sentry.debug_image.image_vmaddr";
/// `sentry.debug_image.arch` (mapping).
pub const SENTRY_DEBUG_IMAGE_ARCH: &str = "sentry.debug_image.arch";
/// `sentry.debug_image.slot_base` (mapping): the synthetic slot base of an image profilink
/// placed; `instruction_addr` = this + `Location.address`.
pub const SENTRY_DEBUG_IMAGE_SLOT_BASE: &str = "sentry.debug_image.slot_base";

/// Names used inside [`SENTRY_FRAME_PRESENT`].
pub mod field {
    /// Frame `function`.
    pub const FUNCTION: &str = "function";
    /// Frame `abs_path`.
    pub const ABS_PATH: &str = "abs_path";
    /// Frame `filename`.
    pub const FILENAME: &str = "filename";
    /// Frame `lineno`.
    pub const LINENO: &str = "lineno";
    /// Frame `colno`.
    pub const COLNO: &str = "colno";
}

/// Keys inside the [`SENTRY_MEASUREMENTS`] kvlist entries.
pub mod measurement {
    /// The unit (string).
    pub const UNIT: &str = "unit";
    /// Timestamps in float Unix seconds (array of doubles).
    pub const TIMESTAMPS: &str = "timestamps";
    /// V1 only: times in ns since the profile's start (array of ints), instead of timestamps.
    pub const ELAPSED_SINCE_START_NS: &str = "elapsed_since_start_ns";
    /// Values (array of doubles), same length as timestamps.
    pub const VALUES: &str = "values";
}

/// Instrumentation scope name of the profiles profilink emits.
pub const SCOPE_NAME: &str = "profilink";
