//! Property tests: chunking never changes what is parsed, random bytes never panic,
//! values round-trip through the encoder and decoder, and inline quoting round-trips.

use proptest::collection::vec;
use proptest::prelude::*;
use strata_resp::inline::{encode_inline, quote_arg, split_args};
use strata_resp::{
    DecodeError, Limits, Parsed, ProtocolError, RequestParser, Value, decode, encode_request,
    format_double, scan,
};

/// A request as it goes on the wire, and the arguments it should parse to (none for a
/// request that is skipped).
#[derive(Debug, Clone)]
struct Request {
    bytes: Vec<u8>,
    args: Vec<Vec<u8>>,
}

fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..12),
        vec(prop::sample::select(b"ab \r\n\"'\\*$\0".to_vec()), 0..8),
        vec(any::<u8>(), 0..300),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        6 => vec(arg(), 1..6).prop_map(|args| {
            let mut bytes = Vec::new();
            encode_request(args.iter().map(Vec::as_slice), &mut bytes);
            Request { bytes, args }
        }),
        3 => vec(arg(), 1..6).prop_map(|args| {
            let mut bytes = Vec::new();
            encode_inline(args.iter().map(Vec::as_slice), &mut bytes);
            Request { bytes, args }
        }),
        1 => prop::sample::select(vec![&b"*0\r\n"[..], b"*-1\r\n", b"\r\n", b"\n", b" \t \r\n"])
            .prop_map(|bytes| Request { bytes: bytes.to_vec(), args: Vec::new() }),
    ]
}

/// What one feeding of a stream yields: the requests' arguments and how it ended.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    requests: Vec<Vec<Vec<u8>>>,
    end: Result<(), ProtocolError>,
    pending: usize,
}

/// Feeds `stream` to a parser in chunks of the given sizes (cycled), as a server does
/// with one growing buffer, checking the parser's promises on every call.
fn feed(stream: &[u8], chunks: &[usize], limits: Limits, authenticated: bool) -> Outcome {
    let mut parser = RequestParser::new(limits);
    parser.set_authenticated(authenticated);
    let mut buf: Vec<u8> = Vec::new();
    let mut fed = 0;
    let mut requests = Vec::new();
    let mut sizes = chunks.iter().cycle();
    loop {
        let mut progressed = true;
        while progressed {
            progressed = false;
            match parser.parse(&buf) {
                Ok(Parsed::Complete { consumed }) => {
                    assert!(consumed > 0 && consumed <= buf.len());
                    let args = parser.args(&buf);
                    assert!(!args.is_empty());
                    assert_eq!(args.iter().len(), args.len());
                    requests.push(args.to_vec());
                    buf.drain(..consumed);
                    progressed = true;
                }
                Ok(Parsed::Skip { consumed }) => {
                    assert!(consumed > 0 && consumed <= buf.len());
                    assert!(parser.args(&buf).is_empty());
                    buf.drain(..consumed);
                    progressed = true;
                }
                Ok(Parsed::Incomplete { hint }) => {
                    if let Some(hint) = hint {
                        assert!(hint > buf.len());
                    }
                }
                Err(error) => {
                    return Outcome {
                        requests,
                        end: Err(error),
                        pending: 0,
                    };
                }
            }
        }
        if fed == stream.len() {
            return Outcome {
                requests,
                end: Ok(()),
                pending: buf.len(),
            };
        }
        let size = (*sizes.next().unwrap_or(&1)).max(1);
        let end = (fed + size).min(stream.len());
        buf.extend_from_slice(&stream[fed..end]);
        fed = end;
    }
}

fn chunk_sizes() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        Just(vec![1]),
        vec(1usize..8, 1..16),
        vec(1usize..600, 1..16),
    ]
}

/// Bytes that look enough like RESP to reach deep into the parser.
fn protocol_noise() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        prop::sample::select(vec![
            &b"*"[..],
            b"$",
            b"\r",
            b"\n",
            b"\r\n",
            b"\0",
            b"-",
            b"0",
            b"1",
            b"2",
            b"3",
            b"9",
            b"*2\r\n",
            b"$3\r\n",
            b"abc",
            b"\"",
            b"'",
            b"\\",
            b"\\x4",
            b" ",
            b"*-1\r\n",
        ])
        .prop_map(<[u8]>::to_vec),
        vec(any::<u8>(), 1..4),
    ];
    vec(piece, 0..64).prop_map(|pieces| pieces.concat())
}

fn value() -> impl Strategy<Value = Value> {
    let text = || {
        vec(
            any::<u8>().prop_filter("no line ends", |b| *b != b'\r' && *b != b'\n'),
            0..10,
        )
    };
    let leaf = prop_oneof![
        text().prop_map(Value::Simple),
        vec(any::<u8>(), 0..10).prop_map(Value::Error),
        any::<i64>().prop_map(Value::Integer),
        vec(any::<u8>(), 0..20).prop_map(Value::Bulk),
        Just(Value::Null),
        Just(Value::NullArray),
        any::<f64>().prop_map(Value::Double),
        any::<bool>().prop_map(Value::Boolean),
        text().prop_map(Value::BigNumber),
        (any::<[u8; 3]>(), vec(any::<u8>(), 0..10))
            .prop_map(|(format, text)| Value::Verbatim { format, text }),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            vec(inner.clone(), 0..6).prop_map(Value::Set),
            vec(inner.clone(), 0..6).prop_map(Value::Push),
            vec((inner.clone(), inner.clone()), 0..4).prop_map(Value::Map),
            (vec((inner.clone(), inner.clone()), 0..3), inner).prop_map(|(attributes, value)| {
                Value::Attribute {
                    attributes,
                    value: Box::new(value),
                }
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// (a) However a stream of requests is cut, it parses to the same arguments as when
    /// fed at once, and to the arguments it was built from.
    #[test]
    fn chunking_does_not_change_requests(
        requests in vec(request(), 0..8),
        chunks in chunk_sizes(),
    ) {
        let stream: Vec<u8> = requests.iter().flat_map(|r| r.bytes.clone()).collect();
        let expected: Vec<Vec<Vec<u8>>> = requests
            .iter()
            .filter(|r| !r.args.is_empty())
            .map(|r| r.args.clone())
            .collect();
        let whole = feed(&stream, &[stream.len().max(1)], Limits::default(), true);
        prop_assert_eq!(&whole.requests, &expected);
        prop_assert_eq!(whole.end, Ok(()));
        prop_assert_eq!(whole.pending, 0);
        let chunked = feed(&stream, &chunks, Limits::default(), true);
        prop_assert_eq!(chunked, whole);
    }

    /// (b) Random bytes never panic; below the line limits, chunking does not change
    /// the outcome either.
    #[test]
    fn random_bytes_never_panic(
        bytes in prop_oneof![protocol_noise(), vec(any::<u8>(), 0..256)],
        chunks in chunk_sizes(),
    ) {
        let whole = feed(&bytes, &[bytes.len().max(1)], Limits::default(), true);
        let chunked = feed(&bytes, &chunks, Limits::default(), true);
        prop_assert_eq!(chunked, whole);
    }

    /// (b) With tiny limits every "too big" and "invalid length" path is reached; the
    /// parser still never panics.
    #[test]
    fn random_bytes_with_tiny_limits_never_panic(
        bytes in protocol_noise(),
        chunks in chunk_sizes(),
        max_bulk_len in 0usize..8,
        max_multibulk_len in 0usize..4,
        max_inline_len in 0usize..16,
        authenticated in any::<bool>(),
    ) {
        let limits = Limits { max_bulk_len, max_multibulk_len, max_inline_len };
        let _ = feed(&bytes, &chunks, limits, authenticated);
    }

    /// (b) With small length limits, and with or without authentication, a stream
    /// fed at once (read in one pass where it can be) and fed byte by byte (read by
    /// the state machine) give the same requests and the same error.
    #[test]
    fn limits_do_not_depend_on_chunking(
        requests in vec(request(), 0..6),
        noise in protocol_noise(),
        max_bulk_len in 0usize..40,
        max_multibulk_len in 0usize..6,
        authenticated in any::<bool>(),
    ) {
        let mut stream: Vec<u8> = requests.iter().flat_map(|r| r.bytes.clone()).collect();
        stream.extend_from_slice(&noise);
        let limits = Limits { max_bulk_len, max_multibulk_len, ..Limits::default() };
        let whole = feed(&stream, &[stream.len().max(1)], limits, authenticated);
        let bytes = feed(&stream, &[1], limits, authenticated);
        prop_assert_eq!(bytes, whole);
    }

    /// A request read ahead by `peek_args` and taken by the parser is the request
    /// the parser reads itself, under any limits: the same length and arguments, or
    /// the parser is left to read it (and refuse it, or skip it).
    #[test]
    fn a_peeked_request_is_the_parsed_one(
        bytes in prop_oneof![
            protocol_noise(),
            vec(request(), 1..3).prop_map(|rs| rs.into_iter().flat_map(|r| r.bytes).collect()),
        ],
        max_bulk_len in prop_oneof![Just(usize::MAX), 0usize..40],
        max_multibulk_len in prop_oneof![Just(usize::MAX), 0usize..6],
        authenticated in any::<bool>(),
    ) {
        let limits = Limits { max_bulk_len, max_multibulk_len, ..Limits::default() };
        let base = bytes.as_ptr() as usize;
        let mut ranges = Vec::new();
        let peeked = strata_resp::request::peek_args(&bytes, |_, arg| {
            let at = arg.as_ptr() as usize - base;
            ranges.push(at..at + arg.len());
        });
        let mut parser = RequestParser::new(limits);
        parser.set_authenticated(authenticated);
        let parsed = parser.parse(&bytes);
        if let Some(len) = peeked {
            let mut taker = RequestParser::new(limits);
            taker.set_authenticated(authenticated);
            match taker.take_peeked(len, &ranges) {
                Some(taken) => {
                    prop_assert_eq!(Ok(taken), parsed);
                    prop_assert_eq!(taker.args(&bytes).to_vec(), parser.args(&bytes).to_vec());
                }
                None => prop_assert!(
                    !matches!(parsed, Ok(Parsed::Complete { .. })),
                    "refused a request the parser reads: {:?}",
                    parsed
                ),
            }
        }
    }

    /// Random bytes never panic the value decoder, and whatever it decodes re-encodes
    /// to a fixed point.
    #[test]
    fn value_decoder_never_panics(bytes in prop_oneof![protocol_noise(), vec(any::<u8>(), 0..256)]) {
        if let Ok(Some((value, consumed))) = decode(&bytes) {
            prop_assert!(consumed <= bytes.len());
            let encoded = value.to_bytes();
            let (again, used) = decode(&encoded).unwrap().unwrap();
            prop_assert_eq!(used, encoded.len());
            prop_assert_eq!(again.to_bytes(), encoded);
        }
    }

    /// The allocation-free scanner agrees with the decoder on any bytes: the same
    /// length, the same incompleteness, the same error (nesting limit aside).
    #[test]
    fn scan_agrees_with_decode(bytes in prop_oneof![protocol_noise(), vec(any::<u8>(), 0..256)]) {
        let decoded = decode(&bytes).map(|d| d.map(|(_, n)| n));
        if decoded != Err(DecodeError::TooDeep) {
            prop_assert_eq!(scan(&bytes).map(|f| f.map(|f| f.len)), decoded);
        }
    }

    /// The scanner measures every encoded value exactly, and finds every strict prefix
    /// incomplete.
    #[test]
    fn scan_measures_encoded_values(value in value()) {
        let encoded = value.to_bytes();
        let frame = scan(&encoded).unwrap().unwrap();
        prop_assert_eq!(frame.len, encoded.len());
        prop_assert_eq!(frame.is_error(), value.is_error());
        for end in 0..encoded.len() {
            prop_assert_eq!(scan(&encoded[..end]), Ok(None));
        }
    }

    /// (c) Encoding then decoding gives the value back, and every strict prefix of the
    /// encoding is incomplete.
    #[test]
    fn values_round_trip(value in value()) {
        let encoded = value.to_bytes();
        let (decoded, consumed) = decode(&encoded).unwrap().unwrap();
        prop_assert_eq!(consumed, encoded.len());
        prop_assert_eq!(&decoded, &value);
        for end in 0..encoded.len() {
            prop_assert_eq!(decode(&encoded[..end]), Ok(None));
        }
    }

    /// (d) Quoted arguments split back to themselves, alone and as an inline request.
    #[test]
    fn inline_quoting_round_trips(args in vec(arg(), 1..8)) {
        for arg in &args {
            let mut quoted = Vec::new();
            quote_arg(arg, &mut quoted);
            prop_assert_eq!(split_args(&quoted).unwrap(), vec![arg.clone()]);
        }
        let mut line = Vec::new();
        encode_inline(args.iter().map(Vec::as_slice), &mut line);
        let mut parser = RequestParser::default();
        prop_assert_eq!(parser.parse(&line), Ok(Parsed::Complete { consumed: line.len() }));
        prop_assert_eq!(parser.args(&line).to_vec(), args);
    }

    /// `%.17g` text always reads back as the same double, and has C's shape.
    #[test]
    fn formatted_doubles_read_back(bits in any::<u64>()) {
        let value = f64::from_bits(bits);
        let mut text = Vec::new();
        format_double(value, &mut text);
        let text = String::from_utf8(text).unwrap();
        let parsed: f64 = text.parse().unwrap();
        if value.is_nan() {
            prop_assert!(parsed.is_nan());
            prop_assert_eq!(text.starts_with('-'), value.is_sign_negative());
        } else {
            prop_assert_eq!(parsed.to_bits(), value.to_bits());
        }
        let digits = text.bytes().filter(u8::is_ascii_digit).count();
        if let Some((mantissa, exponent)) = text.split_once('e') {
            prop_assert!(mantissa.bytes().filter(u8::is_ascii_digit).count() <= 17);
            prop_assert!(exponent.len() >= 3, "{}", text);
        } else if value.is_finite() {
            prop_assert!(digits <= 21, "{}", text);
        }
    }
}
