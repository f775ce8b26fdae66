//! OTLP/JSON codec for the profiles messages (being written).
