//! The pprof receiver's `remote` mode: scrapes of an HTTP endpoint serving pprof, as a Go
//! service's `net/http/pprof` does (`/debug/pprof/profile?seconds=N` for a CPU profile of N
//! seconds; `/debug/pprof/heap`, `allocs`, `mutex`, `block` for the others, whose sample types
//! the Sentry translation skips, counted).
//!
//! Each scrape is one `GET` of `endpoint` with `headers`, bounded by the `timeout` from
//! connecting to the last byte; the body is counted as it streams and the scrape is abandoned
//! at `max_response_body_size_mib` (the profile's inflated size has the same bound). Scrapes
//! never overlap. A failed scrape (unreachable, a status other than 200, too slow, too large,
//! not pprof, refused by the pipeline) is counted in
//! `profilink_receiver_scrape_failures_total` with its reason and logged as a warning; the
//! next one runs on schedule.

use crate::converted::pprof_to_otlp;
use crate::error::ReceiverError;
use crate::pprof::config::PprofRemoteConfig;
use crate::pprof::pull::{deliver, every};
use crate::server::ServerHandle;
use crate::stats::Stats;
use crate::stats::scrape::ScrapeFailure;
use profilink_consumer::body::BodyBound;
use profilink_consumer::{Consumer, Transport};
use std::future::Future;
use std::sync::Arc;

/// Starts scraping `config.endpoint` into `consumer` until `shutdown` resolves. Counts into
/// `stats.pprof_scrape`.
pub fn start_pprof_remote<C: Consumer, F: Future<Output = ()> + Send + 'static>(
    config: &PprofRemoteConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
    shutdown: F,
) -> Result<ServerHandle, ReceiverError> {
    config.check().map_err(ReceiverError::Config)?;
    let mut headers = http::HeaderMap::new();
    for (name, value) in &config.headers {
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| ReceiverError::Config(format!("headers: {name:?}: {e}")))?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|e| ReceiverError::Config(format!("headers: {name}: {e}")))?;
        headers.insert(name, value);
    }
    let client = reqwest::Client::builder()
        .timeout(config.scrape_timeout())
        .default_headers(headers)
        .build()
        .map_err(|e| ReceiverError::Config(format!("HTTP client: {e}")))?;
    let scraper = Arc::new(Scraper {
        url: config.endpoint.clone(),
        limit: config.max_response_body_size(),
        client,
    });
    let (delay, interval) = (config.initial_delay, config.collection_interval);
    let task = tokio::spawn(async move {
        every(delay, interval, shutdown, || {
            let (scraper, consumer, stats) = (scraper.clone(), consumer.clone(), stats.clone());
            async move { scraper.scrape_once(&*consumer, &stats).await }
        })
        .await;
        Ok(())
    });
    tracing::info!(endpoint = %config.endpoint, interval = ?interval, "pprof receiver scraping");
    Ok(ServerHandle::without_listener(task))
}

struct Scraper {
    url: String,
    limit: usize,
    client: reqwest::Client,
}

impl Scraper {
    async fn scrape_once<C: Consumer + ?Sized>(&self, consumer: &C, stats: &Stats) {
        let counters = &stats.pprof_scrape;
        let outcome = async {
            let body = self.fetch().await?;
            let mut budget = self.limit;
            let data = pprof_to_otlp(&body, &mut budget)
                .map_err(|e| (ScrapeFailure::Invalid, format!("not a pprof profile: {e}")))?;
            drop(body);
            deliver(consumer, counters, Transport::Scrape, data).await
        }
        .await;
        match outcome {
            Ok(samples) => {
                counters.scrapes.success();
                tracing::debug!(url = %self.url, samples, "pprof scrape delivered");
            }
            Err((reason, message)) => {
                counters.scrapes.failure(reason);
                tracing::warn!(url = %self.url, reason = reason.as_str(), %message, "pprof scrape failed");
            }
        }
    }

    /// The body of one `GET`, at most `limit` bytes, read as it streams.
    async fn fetch(&self) -> Result<Vec<u8>, (ScrapeFailure, String)> {
        let failed = |e: reqwest::Error, reason| {
            let reason = if e.is_timeout() {
                ScrapeFailure::Timeout
            } else {
                reason
            };
            (reason, e.to_string())
        };
        let mut response = self
            .client
            .get(&self.url)
            .send()
            .await
            .map_err(|e| failed(e, ScrapeFailure::Connect))?;
        let status = response.status();
        if status != reqwest::StatusCode::OK {
            return Err((ScrapeFailure::Status, format!("answered {status}")));
        }
        let too_large = || {
            (
                ScrapeFailure::TooLarge,
                format!("the body is larger than the limit of {} bytes", self.limit),
            )
        };
        let mut bound = BodyBound::new(self.limit as u64);
        bound
            .check_declared(response.content_length())
            .map_err(|_| too_large())?;
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| failed(e, ScrapeFailure::Read))?
        {
            bound.admit(&chunk).map_err(|_| too_large())?;
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}
