//! The Sentry door: the envelope endpoint ([`envelope`]) answering as Relay does, and the
//! other ingest paths SDKs use, passed on to an upstream ([`proxy`]).
//!
//! What both endpoints share (state, Relay-style refusals, CORS, body reading) is in
//! [`common`]; request authentication in [`auth`]; the envelope's checks and item parsing in
//! [`items`], with every chunk checked at the door ([`chunk_door`]); the copy forwarded
//! upstream in [`forward`]; the per-item counters in [`crate::stats::items`].

pub(crate) mod auth;
pub(crate) mod chunk_door;
pub(crate) mod common;
pub(crate) mod envelope;
pub(crate) mod forward;
pub(crate) mod items;
pub(crate) mod proxy;
