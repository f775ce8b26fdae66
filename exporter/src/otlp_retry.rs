//! The OTLP retry rules, as the OTLP specification and the Collector's `otlpexporter` /
//! `otlphttpexporter` have them: how one attempt's failure is classified, and the retry step
//! every OTLP delivery loop takes after it.
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

/// The retry step both OTLP delivery loops share: a permanent failure is given up
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
