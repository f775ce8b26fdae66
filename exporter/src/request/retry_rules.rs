//! The OTLP retry rules, as the OTLP specification and the Collector's `otlpexporter` /
//! `otlphttpexporter` have them: how one attempt's failure is classified, and the retry step
//! the request exporter's retry sender takes after it (any request exporter's:
//! [`AttemptError`] is what every [`RequestSender`](super::RequestSender) attempt fails with).
//!
//! * gRPC: `CANCELLED`, `DEADLINE_EXCEEDED`, `ABORTED`, `OUT_OF_RANGE`, `UNAVAILABLE` and
//!   `DATA_LOSS` are retried; `RESOURCE_EXHAUSTED` only when the status carries
//!   `google.rpc.RetryInfo`; the wait is the larger of the backoff and
//!   `RetryInfo.retry_delay`; every other code is permanent.
//! * HTTP: 429, 502, 503 and 504 are retried, honouring `Retry-After`; other statuses are
//!   permanent. Connection errors and timeouts are retried on both transports.

use crate::config::RetryConfig;
use crate::durations::AttemptOutcome;
use crate::metrics::DiscardReason;
use crate::retry::Backoff;
use std::time::{Duration, Instant};
use tonic::Code;

/// How one attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptError {
    /// Worth retrying, after the server's delay if it gave one.
    Retryable {
        /// Server-requested delay.
        after: Option<Duration>,
        /// Description.
        message: String,
        /// True for transport failures (no response).
        network: bool,
    },
    /// Not worth retrying.
    Permanent(String),
}

/// Classifies a gRPC status by the OTLP rules; `retry_info` is `RetryInfo.retry_delay` when
/// the status carried one (`Some(None)`: RetryInfo without a delay).
pub fn classify_grpc(
    code: Code,
    retry_info: Option<Option<Duration>>,
    message: &str,
) -> AttemptError {
    let msg = format!("gRPC {code:?}: {message}");
    let retryable = matches!(
        code,
        Code::Cancelled
            | Code::DeadlineExceeded
            | Code::Aborted
            | Code::OutOfRange
            | Code::Unavailable
            | Code::DataLoss
    ) || (code == Code::ResourceExhausted && retry_info.is_some());
    if retryable {
        AttemptError::Retryable {
            after: retry_info.flatten(),
            message: msg,
            network: false,
        }
    } else {
        AttemptError::Permanent(msg)
    }
}

/// Classifies a failed gRPC call. A status the client made itself from a transport failure
/// (the connection was refused, closed or reset under the call, or an HTTP/2 error ended it)
/// carries no answer from the server: whatever code tonic gave it (often `UNKNOWN
/// "transport error"`), it is a retryable network failure, as the Collector's gRPC client
/// reports such failures as `UNAVAILABLE`. The request may have been received, so a retry can
/// deliver it twice (at-least-once), never lose it. Any other status is the server's answer,
/// classified by [`classify_grpc`] with its `google.rpc.RetryInfo`.
pub fn classify_grpc_status(status: &tonic::Status) -> AttemptError {
    use tonic_types::StatusExt;
    if let Some(cause) = transport_cause(status) {
        return AttemptError::Retryable {
            after: None,
            message: format!("gRPC transport failure: {cause}"),
            network: true,
        };
    }
    let retry_info = status.get_details_retry_info().map(|r| r.retry_delay);
    match classify_grpc(status.code(), retry_info, status.message()) {
        // Without a server message UNAVAILABLE is the connection's failure too.
        AttemptError::Retryable { after, message, .. } => AttemptError::Retryable {
            after,
            network: status.code() == Code::Unavailable,
            message,
        },
        permanent => permanent,
    }
}

/// The transport failure behind `status`, described, when the client made it from one (its
/// source chain holds a `tonic::transport::Error`, a hyper or HTTP/2 error, or an I/O error);
/// `None` for a status that came from the server.
fn transport_cause(status: &tonic::Status) -> Option<String> {
    let chain: Vec<&(dyn std::error::Error + 'static)> =
        std::iter::successors(std::error::Error::source(status), |e| e.source()).collect();
    if !chain.iter().any(|e| {
        e.is::<tonic::transport::Error>()
            || e.is::<hyper::Error>()
            || e.is::<h2::Error>()
            || e.is::<std::io::Error>()
    }) {
        return None;
    }
    let mut cause = status.message().to_string();
    for e in chain {
        let text = e.to_string();
        if !cause.contains(&text) {
            cause.push_str(": ");
            cause.push_str(&text);
        }
    }
    Some(cause)
}

/// Classifies an HTTP status by the OTLP rules (`Ok(())` for 2xx).
pub fn classify_http(
    status: u16,
    retry_after: Option<Duration>,
    body: &str,
) -> Result<(), AttemptError> {
    match status {
        200..=299 => Ok(()),
        429 | 502 | 503 | 504 => Err(AttemptError::Retryable {
            after: retry_after,
            message: format!("HTTP {status}: {body}"),
            network: false,
        }),
        _ => Err(AttemptError::Permanent(format!("HTTP {status}: {body}"))),
    }
}

/// What a delivery loop does after a failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Sleep this long, then send again.
    Retry(Duration, String),
    /// Give the request up, counted under this reason.
    GiveUp(DiscardReason, String),
}

/// The retry step after a failed attempt: a permanent failure is given up
/// (`send_error`); a retryable one waits for `backoff` (or the server's delay) until the
/// retries run out, then is given up (`network_error` for transport failures, else
/// `send_error`).
pub fn after_failure(
    backoff: &mut Backoff,
    retry: &RetryConfig,
    now: Instant,
    error: AttemptError,
) -> Next {
    match error {
        AttemptError::Permanent(message) => Next::GiveUp(DiscardReason::SendError, message),
        AttemptError::Retryable {
            after,
            message,
            network,
        } => match backoff.next(retry, now, after) {
            Some(wait) => Next::Retry(wait, message),
            None if network => Next::GiveUp(DiscardReason::NetworkError, message),
            None => Next::GiveUp(DiscardReason::SendError, message),
        },
    }
}

impl AttemptOutcome {
    /// The outcome of an OTLP attempt that failed (for the attempt duration histograms).
    pub(crate) fn of_error(error: &AttemptError) -> Self {
        match error {
            AttemptError::Retryable { network: true, .. } => AttemptOutcome::NetworkError,
            _ => AttemptOutcome::SendError,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_retry_rules() {
        for code in [
            Code::Cancelled,
            Code::DeadlineExceeded,
            Code::Aborted,
            Code::OutOfRange,
            Code::Unavailable,
            Code::DataLoss,
        ] {
            assert!(matches!(
                classify_grpc(code, None, ""),
                AttemptError::Retryable { .. }
            ));
        }
        assert!(matches!(
            classify_grpc(Code::ResourceExhausted, None, ""),
            AttemptError::Permanent(_)
        ));
        assert_eq!(
            classify_grpc(
                Code::ResourceExhausted,
                Some(Some(Duration::from_secs(3))),
                "x"
            ),
            AttemptError::Retryable {
                after: Some(Duration::from_secs(3)),
                message: "gRPC ResourceExhausted: x".into(),
                network: false
            }
        );
        for code in [
            Code::InvalidArgument,
            Code::Unauthenticated,
            Code::PermissionDenied,
            Code::Internal,
        ] {
            assert!(matches!(
                classify_grpc(code, None, ""),
                AttemptError::Permanent(_)
            ));
        }
    }

    #[test]
    fn a_status_made_from_a_transport_failure_is_a_retryable_network_error() {
        // What tonic gives for a connection reset under a call: UNKNOWN "transport error"
        // with the I/O error as its source.
        let reset = std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "connection reset by peer",
        );
        let status = tonic::Status::from_error(Box::new(reset));
        assert_eq!(status.code(), Code::Unknown);
        match classify_grpc_status(&status) {
            AttemptError::Retryable {
                network: true,
                after: None,
                message,
            } => assert!(message.contains("connection reset by peer"), "{message}"),
            other => panic!("{other:?}"),
        }
        // What the soak saw when the backend went away under a call: INTERNAL "h2 protocol
        // error" made from the connection's HTTP/2 error.
        let h2 = tonic::Status::from_error(Box::new(h2::Error::from(h2::Reason::INTERNAL_ERROR)));
        assert_eq!(h2.code(), Code::Internal);
        assert!(matches!(
            classify_grpc_status(&h2),
            AttemptError::Retryable { network: true, .. }
        ));
        // The same codes from the server are its answer: permanent.
        for code in [Code::Unknown, Code::Internal] {
            assert!(matches!(
                classify_grpc_status(&tonic::Status::new(code, "transport error")),
                AttemptError::Permanent(_)
            ));
        }
        // A server's UNAVAILABLE is retried and, like a refused connection, counted as a
        // network failure when retries run out.
        assert!(matches!(
            classify_grpc_status(&tonic::Status::unavailable("down")),
            AttemptError::Retryable { network: true, .. }
        ));
        assert!(matches!(
            classify_grpc_status(&tonic::Status::aborted("try again")),
            AttemptError::Retryable { network: false, .. }
        ));
    }

    #[test]
    fn http_retry_rules() {
        assert!(classify_http(200, None, "").is_ok());
        for s in [429, 502, 503, 504] {
            assert!(matches!(
                classify_http(s, None, ""),
                Err(AttemptError::Retryable { .. })
            ));
        }
        for s in [400, 401, 404, 413, 500] {
            assert!(matches!(
                classify_http(s, None, ""),
                Err(AttemptError::Permanent(_))
            ));
        }
    }

    #[test]
    fn failures_retry_until_the_backoff_runs_out() {
        // No jitter: the first backoff is 5 s, the server's 7 s is longer and wins.
        let retry = RetryConfig {
            randomization_factor: 0.0,
            ..RetryConfig::default()
        };
        let mut backoff = Backoff::new(&retry);
        let now = Instant::now();
        assert_eq!(
            after_failure(
                &mut backoff,
                &retry,
                now,
                AttemptError::Permanent("no".into())
            ),
            Next::GiveUp(DiscardReason::SendError, "no".into())
        );
        let failure = |network, after| AttemptError::Retryable {
            after,
            message: "down".into(),
            network,
        };
        let hint = Some(Duration::from_secs(7));
        assert_eq!(
            after_failure(&mut backoff, &retry, now, failure(true, hint)),
            Next::Retry(Duration::from_secs(7), "down".into())
        );
        // Past max_elapsed_time: given up, by what failed.
        let late = now + retry.max_elapsed_time;
        assert_eq!(
            after_failure(&mut backoff, &retry, late, failure(true, hint)),
            Next::GiveUp(DiscardReason::NetworkError, "down".into())
        );
        assert_eq!(
            after_failure(&mut backoff, &retry, late, failure(false, hint)),
            Next::GiveUp(DiscardReason::SendError, "down".into())
        );
    }

    #[test]
    fn failed_attempts_are_network_or_send_errors() {
        let network = AttemptError::Retryable {
            after: None,
            message: String::new(),
            network: true,
        };
        assert_eq!(
            AttemptOutcome::of_error(&network),
            AttemptOutcome::NetworkError
        );
        assert_eq!(
            AttemptOutcome::of_error(&AttemptError::Permanent(String::new())),
            AttemptOutcome::SendError
        );
    }
}
