//! profilink exporter: not built yet (see the issues).
