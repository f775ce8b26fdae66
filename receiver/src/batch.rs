//! The hand-off to the pipeline, from the contract crate (`profilink-consumer`): re-exported
//! so the receivers' modules and this crate's users name it from here too.

pub use profilink_consumer::{
    Batch, ChannelConsumer, ConsumeError, Consumer, Payload, ReceiverKind, SentryBatch, Transport,
    trace_span_count,
};
