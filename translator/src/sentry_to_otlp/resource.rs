//! Resource attributes for chunks and V1 profiles.
//!
//! Resource attributes are plain `KeyValue { key, value: string_value }` (no string-table
//! references), the form every OTLP consumer reads. An attribute is absent when its Sentry field
//! is `None`, and present (possibly `""`) when it is `Some`, so restore can tell them apart.
//!
//! * V2 chunk: [`SERVICE_NAME`] (derived), [`SERVICE_VERSION`] ← `release`,
//!   [`DEPLOYMENT_ENVIRONMENT_NAME`] ← `environment`, [`TELEMETRY_SDK_NAME`] and
//!   [`TELEMETRY_SDK_VERSION`] ← `client_sdk`, [`TELEMETRY_SDK_LANGUAGE`] ← [`sdk_language`] of
//!   `platform`, [`SENTRY_PLATFORM`] ← `platform`, [`SENTRY_PROFILER_ID`] ← `profiler_id`.
//!   Chunks with equal attributes (normally: the same profiler session) share one
//!   `ResourceProfiles`; a chunk of the same session with different metadata gets its own.
//! * V1 profile: the same without the profiler id, plus [`PROCESS_RUNTIME_NAME`]/
//!   [`PROCESS_RUNTIME_VERSION`] ← `runtime`, [`OS_NAME`]/[`OS_VERSION`] ← `os`, [`HOST_ARCH`] ←
//!   `device.architecture`. V1 profiles with equal attributes share one resource (a V1 profile
//!   belongs to one transaction, not to a profiler session).

use super::attributes::*;
use super::builder::resource_kv;
use profilink_proto::otlp::KeyValue;
use profilink_proto::sentry::{ClientSdk, ProfileChunk, SampleProfileV1};
use serde_json::Value;

/// The OTel `telemetry.sdk.language` for a Sentry platform: `node`→`nodejs`,
/// `javascript`→`webjs`, `android`→`java`, `cocoa`→`swift`, `csharp`→`dotnet`, `native`→`cpp`,
/// `elixir`→`erlang`; any other platform as it is (`python`, `java`, `go`, `rust`, `php`, `ruby`…).
pub fn sdk_language(platform: &str) -> &str {
    match platform {
        "node" => "nodejs",
        "javascript" => "webjs",
        "android" => "java",
        "cocoa" => "swift",
        "csharp" => "dotnet",
        "native" => "cpp",
        "elixir" => "erlang",
        other => other,
    }
}

/// `service.name`: the release up to `@` (Sentry's `package@version` convention), else
/// `unknown_service` (the OTel fallback).
pub fn service_name(release: Option<&str>) -> &str {
    match release.and_then(|r| r.split_once('@')).map(|(p, _)| p) {
        Some(p) if !p.is_empty() => p,
        _ => "unknown_service",
    }
}

fn common(
    out: &mut Vec<KeyValue>,
    release: Option<&str>,
    environment: Option<&str>,
    sdk: Option<&ClientSdk>,
    platform: &str,
) {
    out.push(resource_kv(SERVICE_NAME, service_name(release)));
    if let Some(r) = release {
        out.push(resource_kv(SERVICE_VERSION, r));
    }
    if let Some(e) = environment {
        out.push(resource_kv(DEPLOYMENT_ENVIRONMENT_NAME, e));
    }
    if let Some(sdk) = sdk {
        out.push(resource_kv(TELEMETRY_SDK_NAME, &sdk.name));
        out.push(resource_kv(TELEMETRY_SDK_VERSION, &sdk.version));
    }
    if !platform.is_empty() {
        out.push(resource_kv(TELEMETRY_SDK_LANGUAGE, sdk_language(platform)));
    }
    out.push(resource_kv(SENTRY_PLATFORM, platform));
}

/// The resource attributes of a chunk.
pub fn chunk_resource(chunk: &ProfileChunk) -> Vec<KeyValue> {
    let mut out = Vec::with_capacity(8);
    common(
        &mut out,
        chunk.release.as_deref(),
        chunk.environment.as_deref(),
        chunk.client_sdk.as_ref(),
        &chunk.platform,
    );
    out.push(resource_kv(SENTRY_PROFILER_ID, &chunk.profiler_id));
    out
}

fn ctx_str<'a>(ctx: Option<&'a Value>, key: &str) -> Option<&'a str> {
    ctx?.get(key)?.as_str()
}

/// `host.arch` for an architecture name (OTel values for the common ones, others as they are).
fn host_arch(arch: &str) -> &str {
    match arch {
        "x86_64" | "amd64" => "amd64",
        "aarch64" | "arm64" | "arm64e" => "arm64",
        "x86" | "i386" | "i686" => "x86",
        other => other,
    }
}

/// The resource attributes of a V1 profile.
pub fn v1_resource(p: &SampleProfileV1) -> Vec<KeyValue> {
    let mut out = Vec::with_capacity(11);
    common(
        &mut out,
        p.release.as_deref(),
        p.environment.as_deref(),
        p.client_sdk.as_ref(),
        &p.platform,
    );
    for (key, ctx, field) in [
        (PROCESS_RUNTIME_NAME, p.runtime.as_ref(), "name"),
        (PROCESS_RUNTIME_VERSION, p.runtime.as_ref(), "version"),
        (OS_NAME, p.os.as_ref(), "name"),
        (OS_VERSION, p.os.as_ref(), "version"),
    ] {
        if let Some(v) = ctx_str(ctx, field) {
            out.push(resource_kv(key, v));
        }
    }
    if let Some(a) = ctx_str(p.device.as_ref(), "architecture") {
        out.push(resource_kv(HOST_ARCH, host_arch(a)));
    }
    out
}
