//! Fuzzes the request parser: any byte stream, fed whole and in chunks, must parse
//! without panicking, keep the parser's promises, and (under the default limits, which
//! fuzz inputs cannot reach) give the same outcome however it is cut.

#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_resp::{Limits, Parsed, ProtocolError, RequestParser};

#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    requests: Vec<Vec<Vec<u8>>>,
    end: Result<usize, ProtocolError>,
}

fn run(stream: &[u8], chunk: usize, limits: Limits, authenticated: bool) -> Outcome {
    let mut parser = RequestParser::new(limits);
    parser.set_authenticated(authenticated);
    let mut buf = Vec::new();
    let mut fed = 0;
    let mut requests = Vec::new();
    loop {
        loop {
            match parser.parse(&buf) {
                Ok(Parsed::Complete { consumed }) => {
                    assert!(consumed > 0 && consumed <= buf.len());
                    let args = parser.args(&buf);
                    assert!(!args.is_empty());
                    assert_eq!(args.iter().len(), args.len());
                    requests.push(args.to_vec());
                    buf.drain(..consumed);
                }
                Ok(Parsed::Skip { consumed }) => {
                    assert!(consumed > 0 && consumed <= buf.len());
                    buf.drain(..consumed);
                }
                Ok(Parsed::Incomplete { hint }) => {
                    assert!(hint.is_none_or(|h| h > buf.len()));
                    break;
                }
                Err(error) => {
                    // The exact text is always available and well formed.
                    assert!(error.to_bytes().starts_with(b"Protocol error: "));
                    return Outcome {
                        requests,
                        end: Err(error),
                    };
                }
            }
        }
        if fed == stream.len() {
            return Outcome {
                requests,
                end: Ok(buf.len()),
            };
        }
        let end = (fed + chunk).min(stream.len());
        buf.extend_from_slice(&stream[fed..end]);
        fed = end;
    }
}

fuzz_target!(|data: &[u8]| {
    // The first byte chooses the chunk size, the authentication and the limits.
    let Some((&control, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(control & 0x1f) + 1;
    let authenticated = control & 0x20 == 0;
    let tiny = control & 0x40 != 0;
    let limits = if tiny {
        Limits {
            max_bulk_len: 16,
            max_multibulk_len: 4,
            max_inline_len: 24,
        }
    } else {
        Limits::default()
    };
    let whole = run(stream, stream.len().max(1), limits, authenticated);
    let chunked = run(stream, chunk, limits, authenticated);
    if !tiny && stream.len() <= limits.max_inline_len {
        assert_eq!(whole, chunked);
    }
});
