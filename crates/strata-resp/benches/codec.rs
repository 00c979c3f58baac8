//! Throughput of the request parser, the reply writer and the value decoder.

// A failed expectation in a benchmark setup is a bug in the benchmark.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use strata_resp::inline::encode_inline;
use strata_resp::{
    Parsed, Protocol, ReplyWriter, RequestParser, Value, decode, encode_request, format_double,
};

/// Parses every request in `buf`, returning the number of arguments seen.
fn parse_all(parser: &mut RequestParser, mut buf: &[u8]) -> usize {
    let mut args = 0;
    loop {
        match parser.parse(buf).unwrap() {
            Parsed::Complete { consumed } => {
                args += parser.args(buf).len();
                buf = &buf[consumed..];
            }
            Parsed::Skip { consumed } => buf = &buf[consumed..],
            Parsed::Incomplete { .. } => return args,
        }
    }
}

fn requests(c: &mut Criterion) {
    let value = [b'v'; 64];
    let mut multibulk = Vec::new();
    let mut inline = Vec::new();
    for i in 0..1000 {
        let key = format!("key:{i}");
        let args = [&b"SET"[..], key.as_bytes(), &value];
        encode_request(args, &mut multibulk);
        encode_inline(args, &mut inline);
    }

    let mut group = c.benchmark_group("request");
    group.throughput(Throughput::Bytes(multibulk.len() as u64));
    group.bench_function("multibulk_pipeline_1000_set", |b| {
        let mut parser = RequestParser::default();
        b.iter(|| parse_all(&mut parser, black_box(&multibulk)));
    });
    group.throughput(Throughput::Bytes(inline.len() as u64));
    group.bench_function("inline_pipeline_1000_set", |b| {
        let mut parser = RequestParser::default();
        b.iter(|| parse_all(&mut parser, black_box(&inline)));
    });

    // A 1 MiB argument arriving in 16 KiB reads.
    let big = vec![b'x'; 1 << 20];
    let mut request = Vec::new();
    encode_request([&b"SET"[..], b"k", &big], &mut request);
    group.throughput(Throughput::Bytes(request.len() as u64));
    group.bench_function("1mib_bulk_in_16kib_reads", |b| {
        let mut parser = RequestParser::default();
        b.iter(|| {
            let mut end = 0;
            loop {
                end = (end + 16 * 1024).min(request.len());
                if let Parsed::Complete { consumed } = parser.parse(&request[..end]).unwrap() {
                    return consumed;
                }
            }
        });
    });
    group.finish();
}

fn replies(c: &mut Criterion) {
    let items: Vec<Vec<u8>> = (0..100)
        .map(|i| format!("member:{i:08}").into_bytes())
        .collect();
    let doubles: Vec<f64> = (0..100).map(|i| f64::from(i) * 1.37e-3 + 0.1).collect();
    let mut out = Vec::with_capacity(1 << 16);

    let mut group = c.benchmark_group("reply");
    group.bench_function("array_of_100_bulks", |b| {
        b.iter(|| {
            out.clear();
            ReplyWriter::new(&mut out, Protocol::Resp2).bulks(items.iter().map(Vec::as_slice));
            black_box(out.len())
        });
    });
    group.bench_function("100_integers", |b| {
        b.iter(|| {
            out.clear();
            let mut w = ReplyWriter::new(&mut out, Protocol::Resp3);
            for i in 0..100 {
                w.integer(black_box(i * 7919));
            }
            black_box(out.len())
        });
    });
    group.bench_function("100_doubles_percent_17g", |b| {
        b.iter(|| {
            out.clear();
            for &d in &doubles {
                format_double(black_box(d), &mut out);
            }
            black_box(out.len())
        });
    });
    group.finish();
}

fn values(c: &mut Criterion) {
    let reply = Value::Array(
        (0..1000)
            .map(|i| Value::bulk(format!("value:{i}")))
            .collect(),
    );
    let encoded = reply.to_bytes();
    let mut group = c.benchmark_group("value");
    group.throughput(Throughput::Bytes(encoded.len() as u64));
    group.bench_function("decode_array_of_1000_bulks", |b| {
        b.iter(|| decode(black_box(&encoded)).unwrap().unwrap().1);
    });
    group.finish();
}

criterion_group!(benches, requests, replies, values);
criterion_main!(benches);
