//! One debuginfod download, bounded while it streams: `GET <url>/buildid/<hex>/debuginfo`
//! into a [`Part`] of the disk cache, chunk by chunk, with a running count against the size
//! bound ([`BodyBound`]) and one time budget for the whole exchange, from connecting to the
//! body's last byte.
//!
//! Nothing of the body is held in memory beyond the chunk being written, and the part never
//! gets more than the bound: a `Content-Length` above it is refused before the body is read,
//! and the chunk that would pass it ends the download (the part is removed). A whole body is
//! then checked for the GNU build id asked for, read from the file's headers and notes only.
//! Every failure has a [`FetchFailure`] reason.

use crate::file_id::gnu_build_id_of_file;
use crate::metrics::FetchFailure;
use crate::sources::disk_cache::{DiskCache, Part};
use profilink_consumer::body::BodyBound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The client of one fetch thread: an async `reqwest` client (its `timeout` is a total one that
/// covers the body, which the blocking client's is not) on a runtime of that thread alone.
pub(crate) struct Downloader {
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
    budget: Duration,
    max_size: u64,
}

/// A failed download: why (`None`: cancelled, the fetcher is shutting down), and the detail
/// to log.
#[derive(Debug)]
pub(crate) struct Failed {
    pub(crate) reason: Option<FetchFailure>,
    pub(crate) detail: String,
}

fn failed(reason: FetchFailure, detail: impl std::fmt::Display) -> Failed {
    Failed {
        reason: Some(reason),
        detail: detail.to_string(),
    }
}

/// How often a running download looks at its cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// A `reqwest` error's reason: `timeout` when the budget ran out, else `otherwise`.
fn classify(e: &reqwest::Error, otherwise: FetchFailure) -> Failed {
    let mut text = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        text.push_str(": ");
        text.push_str(&s.to_string());
        src = s.source();
    }
    failed(
        if e.is_timeout() {
            FetchFailure::Timeout
        } else {
            otherwise
        },
        text,
    )
}

impl Downloader {
    /// A downloader whose downloads each take at most `budget` and `max_size` bytes.
    pub(crate) fn new(budget: Duration, max_size: u64) -> Result<Downloader, String> {
        let tls = profilink_tls::ClientTlsConfig::default()
            .rustls_config(&[b"http/1.1"])
            .map_err(|e| e.to_string())?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let client = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .timeout(budget)
            .connect_timeout(budget.min(Duration::from_secs(10)))
            .user_agent(concat!("profilink/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Downloader {
            runtime,
            client,
            budget,
            max_size,
        })
    }

    /// Downloads `url` (the debug file of `id`) into a part of `cache`: `Ok(None)` for 404,
    /// the checked part and its length for 200. Stops (its part removed) within
    /// [`CANCEL_POLL`] of `cancel` being set.
    pub(crate) fn get(
        &self,
        cache: &DiskCache,
        url: &str,
        id: &[u8],
        cancel: &AtomicBool,
    ) -> Result<Option<(Part, u64)>, Failed> {
        let work = self.stream(cache, url, id);
        let cancelled = async {
            while !cancel.load(Ordering::Relaxed) {
                tokio::time::sleep(CANCEL_POLL).await;
            }
        };
        self.runtime.block_on(async {
            tokio::select! {
                // reqwest's timeout covers the exchange; this one covers the writes too.
                r = tokio::time::timeout(self.budget, work) => r.unwrap_or_else(|_| {
                    Err(failed(
                        FetchFailure::Timeout,
                        format!("still running after {:?}", self.budget),
                    ))
                }),
                () = cancelled => Err(Failed {
                    reason: None,
                    detail: "cancelled: shutting down".to_owned(),
                }),
            }
        })
    }

    async fn stream(
        &self,
        cache: &DiskCache,
        url: &str,
        id: &[u8],
    ) -> Result<Option<(Part, u64)>, Failed> {
        let mut resp = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| classify(&e, FetchFailure::Transport))?;
        let status = resp.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(failed(FetchFailure::HttpStatus, format!("HTTP {status}")));
        }
        let mut bound = BodyBound::new(self.max_size);
        let declared = resp.content_length();
        bound
            .check_declared(declared)
            .map_err(|e| failed(FetchFailure::TooLarge, format!("Content-Length: {e}")))?;
        let mut part = cache
            .part(id)
            .map_err(|e| failed(FetchFailure::CacheWrite, e))?;
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| classify(&e, FetchFailure::Truncated))?
        {
            bound
                .admit(&chunk)
                .map_err(|e| failed(FetchFailure::TooLarge, e))?;
            part.write(&chunk)
                .map_err(|e| failed(FetchFailure::CacheWrite, e))?;
        }
        if declared.is_some_and(|n| n != bound.seen()) {
            return Err(failed(
                FetchFailure::Truncated,
                format!("{} of {declared:?} bytes", bound.seen()),
            ));
        }
        if gnu_build_id_of_file(part.path()).as_deref() != Some(id) {
            return Err(failed(
                FetchFailure::BuildIdMismatch,
                "the answer's build id is not the one asked for",
            ));
        }
        Ok(Some((part, bound.seen())))
    }
}
