//! Sends an OTLP profiles file (binary protobuf or OTLP/JSON) to an OTLP gRPC endpoint, as the
//! opentelemetry-ebpf-profiler or a Collector's `otlp` exporter would, and prints the answer.
//!
//! ```sh
//! cargo run --example send_otlp -- tests/fixtures/otlp/ebpf-profile.pb
//! ```
//!
//! The endpoint is `PROFILINK_OTLP_GRPC_ENDPOINT` (`host:port`, default `127.0.0.1:4317`, the
//! variable profilink's own default configuration listens on). Exits 0 when every profile was
//! accepted, 1 otherwise.

use profilink_proto::otlp::profiles_service_client::ProfilesServiceClient;
use profilink_translator::decode_otlp;
use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: send_otlp <otlp file (.pb or .json)>");
        return ExitCode::from(2);
    };
    let endpoint = std::env::var("PROFILINK_OTLP_GRPC_ENDPOINT")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "127.0.0.1:4317".into());
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(1);
        }
    };
    // Protobuf or OTLP/JSON, detected.
    let request = match decode_otlp(&bytes, None) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(1);
        }
    };
    let profiles: usize = request
        .resource_profiles
        .iter()
        .flat_map(|rp| &rp.scope_profiles)
        .map(|sp| sp.profiles.len())
        .sum();
    let mut client = match ProfilesServiceClient::connect(format!("http://{endpoint}")).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cannot connect to {endpoint}: {e}");
            return ExitCode::from(1);
        }
    };
    match client.export(request).await {
        Ok(resp) => match resp.into_inner().partial_success {
            Some(p) if p.rejected_profiles > 0 => {
                eprintln!(
                    "{endpoint} rejected {} of {profiles} profiles: {}",
                    p.rejected_profiles, p.error_message
                );
                ExitCode::from(1)
            }
            _ => {
                println!("sent {profiles} profiles from {path} to {endpoint}");
                ExitCode::SUCCESS
            }
        },
        Err(status) => {
            eprintln!("{endpoint}: {}: {}", status.code(), status.message());
            ExitCode::from(1)
        }
    }
}
