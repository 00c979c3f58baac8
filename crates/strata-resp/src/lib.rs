//! RESP2/RESP3/inline codec.
