//! The codec of the export services: prost, with decode errors as `INVALID_ARGUMENT`.

use crate::otlp::ingest::IngestSignal;
use prost::Message;
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// Prost codec whose decode errors are `INVALID_ARGUMENT` (`S::Request` is decoded with the
/// decoder of the request's version, `S::Response` encoded).
pub(super) struct ExportCodec<S: IngestSignal> {
    version: S::Version,
}

impl<S: IngestSignal> ExportCodec<S> {
    pub(super) fn new(version: S::Version) -> Self {
        ExportCodec { version }
    }
}

impl<S: IngestSignal> Codec for ExportCodec<S> {
    type Encode = S::Response;
    type Decode = S::Request;
    type Encoder = ExportCodec<S>;
    type Decoder = ExportCodec<S>;

    fn encoder(&mut self) -> Self::Encoder {
        ExportCodec::new(self.version)
    }

    fn decoder(&mut self) -> Self::Decoder {
        ExportCodec::new(self.version)
    }
}

impl<S: IngestSignal> Encoder for ExportCodec<S> {
    type Item = S::Response;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("cannot encode the response: {e}")))
    }
}

impl<S: IngestSignal> Decoder for ExportCodec<S> {
    type Item = S::Request;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Status> {
        S::decode_protobuf(self.version, src)
            .map(Some)
            .map_err(|e| {
                Status::invalid_argument(format!("cannot decode {}: {e}", S::REQUEST_NAME))
            })
    }
}
