//! profilink receiver: not built yet (see the issues).
