//! `profilink validate`: findings for every input, one line each.

use super::input::{Input, ndjson_lines, read_input};
use super::{EXIT_OK, EXIT_REJECTED};
use profilink_proto::input::InputFormat;
use profilink_proto::sentry::{Envelope, Transaction};
use profilink_proto::validate::{self, Finding, Severity};
use profilink_proto::wire::DecodeReport;
use profilink_translator::{InputError, decode_otlp_report};
use std::path::PathBuf;

/// Runs `validate` and returns the exit code.
pub fn run(inputs: &[PathBuf], strict: bool) -> u8 {
    let mut errors = 0usize;
    let mut warnings = 0usize;
    for path in inputs {
        let (name, findings) = match read_input(path, None) {
            Ok(input) => (input.name.clone(), findings_for(&input)),
            Err(e) => (
                path.display().to_string(),
                vec![finding(Severity::Error, "read", ".", format!("{e:#}"))],
            ),
        };
        for f in &findings {
            println!("{name}: {f}");
            match f.severity {
                Severity::Error => errors += 1,
                Severity::Warning => warnings += 1,
            }
        }
    }
    eprintln!(
        "{} input(s): {errors} error(s), {warnings} warning(s)",
        inputs.len()
    );
    if errors > 0 || (strict && warnings > 0) {
        EXIT_REJECTED
    } else {
        EXIT_OK
    }
}

fn finding(severity: Severity, rule: &'static str, path: &str, message: String) -> Finding {
    Finding {
        severity,
        rule,
        path: path.to_owned(),
        message,
    }
}

/// Warnings for what lenient decoding repaired or detected.
fn decode_findings(report: &DecodeReport) -> Vec<Finding> {
    let mut out = Vec::new();
    if report.utf8_replacements > 0 {
        out.push(finding(
            Severity::Warning,
            "invalid-utf8",
            ".",
            format!(
                "{} invalid UTF-8 sequence(s) in string fields, replaced with U+FFFD",
                report.utf8_replacements
            ),
        ));
    }
    if let Some(reason) = report.layout_reason {
        out.push(finding(
            Severity::Warning,
            "proto-1.9-layout",
            ".",
            format!(
                "the request uses the proto 1.9 Sample layout (values=2, attribute_indices=3, link_index=4; detected: {}); it was read as 1.9, upgrade the producer to proto 1.10",
                reason.as_str()
            ),
        ));
    }
    out
}

/// The findings for one input, by its format.
pub fn findings_for(input: &Input) -> Vec<Finding> {
    let bytes = &input.bytes;
    match input.format {
        InputFormat::OtlpProtobuf | InputFormat::OtlpJson => {
            match decode_otlp_report(bytes, Some(input.format)) {
                Ok((req, report)) => {
                    let mut findings = decode_findings(&report);
                    findings.extend(validate::validate_otlp(
                        req.dictionary.as_ref(),
                        &req.resource_profiles,
                    ));
                    findings
                }
                Err(InputError::OtlpJson(e)) => {
                    vec![finding(Severity::Error, "decode", &e.path, e.message)]
                }
                Err(e) => vec![finding(
                    Severity::Error,
                    "decode",
                    ".",
                    format!("{:#}", anyhow::Error::new(e)),
                )],
            }
        }
        InputFormat::Pprof | InputFormat::Folded => {
            match super::translate_pprof::read_request(input) {
                Ok(req) => validate::validate_otlp(req.dictionary.as_ref(), &req.resource_profiles),
                Err(e) => vec![finding(Severity::Error, "decode", ".", format!("{e:#}"))],
            }
        }
        InputFormat::SentryChunk => validate::validate_chunk_json(bytes),
        InputFormat::SentryChunkNdjson => per_line(bytes, validate::validate_chunk_json),
        InputFormat::SentryV1Profile => validate::validate_v1_profile_json(bytes),
        InputFormat::SentryTransaction => transaction_findings(bytes),
        InputFormat::SentryTransactionNdjson => per_line(bytes, transaction_findings),
        InputFormat::Envelope => match Envelope::parse(bytes) {
            Ok(env) => validate::validate_envelope(&env),
            Err(e) => vec![finding(Severity::Error, "envelope", ".", e.to_string())],
        },
    }
}

fn transaction_findings(bytes: &[u8]) -> Vec<Finding> {
    match Transaction::from_json(bytes) {
        Ok(_) => Vec::new(),
        Err(e) => vec![finding(Severity::Error, "json-parse", &e.path, e.message)],
    }
}

fn per_line(bytes: &[u8], check: fn(&[u8]) -> Vec<Finding>) -> Vec<Finding> {
    let mut out = Vec::new();
    for (line, text) in ndjson_lines(bytes) {
        for mut f in check(text) {
            f.path = format!("line {line}: {}", f.path);
            out.push(f);
        }
    }
    out
}
