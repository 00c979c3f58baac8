//! TLS: plain and TLS ports at once, mutual TLS, protocol versions, large replies over
//! TLS — driven by the `redis` crate's rustls support, with a CA, a server and a client
//! certificate generated for each test.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use redis::{ClientTlsConfig, TlsCertificates};

use crate::support::{Proc, free_port, strata};

/// A test PKI written to a temporary directory.
struct Pki {
    dir: tempfile::TempDir,
    ca_pem: String,
    client_cert: String,
    client_key: String,
    /// A client certificate from a CA the server does not trust.
    stranger_cert: String,
    stranger_key: String,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().expect("temp dir");
        let ca = new_ca("strata test CA");
        let server_key = KeyPair::generate().expect("key");
        let server = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("params")
            .signed_by(&server_key, &ca)
            .expect("server certificate");
        let client_key = KeyPair::generate().expect("key");
        let client = CertificateParams::new(vec!["client".to_owned()])
            .expect("params")
            .signed_by(&client_key, &ca)
            .expect("client certificate");
        let other = new_ca("someone else");
        let stranger_key = KeyPair::generate().expect("key");
        let stranger = CertificateParams::new(vec!["client".to_owned()])
            .expect("params")
            .signed_by(&stranger_key, &other)
            .expect("client certificate");
        std::fs::write(dir.path().join("ca.crt"), ca.pem()).expect("write");
        std::fs::write(dir.path().join("server.crt"), server.pem()).expect("write");
        std::fs::write(dir.path().join("server.key"), server_key.serialize_pem()).expect("write");
        Pki {
            ca_pem: ca.pem(),
            client_cert: client.pem(),
            client_key: client_key.serialize_pem(),
            stranger_cert: stranger.pem(),
            stranger_key: stranger_key.serialize_pem(),
            dir,
        }
    }

    fn file(&self, name: &str) -> String {
        path_text(&self.dir.path().join(name))
    }

    /// strata with a plain port and a TLS port, and `extra` directives.
    fn server(&self, extra: &[&str]) -> (Proc, u16) {
        let tls_port = free_port();
        let mut args: Vec<String> = vec![
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            self.file("server.crt"),
            "--tls-key-file".into(),
            self.file("server.key"),
            "--tls-ca-cert-file".into(),
            self.file("ca.crt"),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        (strata(&args), tls_port)
    }

    fn client(&self, port: u16, cert: Option<(&str, &str)>) -> redis::Client {
        redis::Client::build_with_tls(
            format!("rediss://127.0.0.1:{port}/"),
            TlsCertificates {
                client_tls: cert.map(|(c, k)| ClientTlsConfig {
                    client_cert: c.as_bytes().to_vec(),
                    client_key: k.as_bytes().to_vec(),
                }),
                root_cert: Some(self.ca_pem.as_bytes().to_vec()),
            },
        )
        .expect("a TLS client")
    }

    fn mine(&self) -> Option<(&str, &str)> {
        Some((&self.client_cert, &self.client_key))
    }
}

fn new_ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA")
}

fn path_text(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn set_get(client: &redis::Client, value: &[u8]) -> redis::RedisResult<Vec<u8>> {
    let mut c = client.get_connection_with_timeout(std::time::Duration::from_secs(5))?;
    redis::cmd("SET").arg("k").arg(value).query::<()>(&mut c)?;
    redis::cmd("GET").arg("k").query(&mut c)
}

#[test]
fn plain_and_tls_ports_serve_at_once() {
    let pki = Pki::new();
    let (server, tls_port) = pki.server(&["--tls-auth-clients", "no"]);
    let tls = pki.client(tls_port, None);
    assert_eq!(
        set_get(&tls, b"over tls").expect("TLS round trip"),
        b"over tls"
    );
    // The plain port sees what the TLS client wrote.
    let mut plain = server.redis();
    let got: Vec<u8> = redis::cmd("GET").arg("k").query(&mut plain).expect("GET");
    assert_eq!(got, b"over tls");
    // A large reply and a pipeline cross TLS intact.
    let big = vec![b'x'; 3 << 20];
    assert_eq!(set_get(&tls, &big).expect("large value").len(), big.len());
    let mut c = tls.get_connection().expect("connect");
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("INCR").arg("n").ignore();
        if i % 100 == 0 {
            pipe.cmd("GET").arg("n");
        }
    }
    let got: Vec<String> = pipe.query(&mut c).expect("pipeline");
    assert_eq!(got.len(), 10);
    assert_eq!(got[9], "901");
    // Speaking plain RESP to the TLS port gets nowhere.
    let mut raw = crate::support::Raw::connect(tls_port);
    raw.send_raw(b"PING\r\n");
    let _ = raw.read_quiet(std::time::Duration::from_millis(300));
}

#[test]
fn mutual_tls_requires_a_trusted_client_certificate() {
    let pki = Pki::new();
    let (_server, port) = pki.server(&[]);
    assert!(set_get(&pki.client(port, None), b"v").is_err());
    assert!(
        set_get(
            &pki.client(port, Some((&pki.stranger_cert, &pki.stranger_key))),
            b"v"
        )
        .is_err()
    );
    assert_eq!(
        set_get(&pki.client(port, pki.mine()), b"v").expect("mTLS"),
        b"v"
    );
}

#[test]
fn optional_client_certificates_are_checked_when_given() {
    let pki = Pki::new();
    let (_server, port) = pki.server(&["--tls-auth-clients", "optional"]);
    assert_eq!(
        set_get(&pki.client(port, None), b"a").expect("no certificate"),
        b"a"
    );
    assert_eq!(
        set_get(&pki.client(port, pki.mine()), b"b").expect("certificate"),
        b"b"
    );
    assert!(
        set_get(
            &pki.client(port, Some((&pki.stranger_cert, &pki.stranger_key))),
            b"c"
        )
        .is_err()
    );
}

#[test]
fn tls_protocols_limit_the_versions() {
    let pki = Pki::new();
    for protocols in ["TLSv1.2", "TLSv1.3", "TLSv1.2 TLSv1.3"] {
        let (_server, port) =
            pki.server(&["--tls-auth-clients", "no", "--tls-protocols", protocols]);
        assert_eq!(
            set_get(&pki.client(port, None), b"v").expect(protocols),
            b"v"
        );
    }
}

/// Handshakes with a client that offers only `version`; whether a PING got its PONG.
fn ping_with_only(
    pki: &Pki,
    port: u16,
    version: &'static rustls::SupportedProtocolVersion,
) -> bool {
    use rustls::pki_types::pem::PemObject;
    use std::io::{Read, Write};
    let mut roots = rustls::RootCertStore::empty();
    let ca = rustls::pki_types::CertificateDer::from_pem_slice(pki.ca_pem.as_bytes())
        .expect("CA certificate");
    roots.add(ca).expect("a trusted root");
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[version])
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).expect("client");
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .expect("timeout");
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    if tls.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut reply = [0u8; 7];
    tls.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}

#[test]
fn tls_protocol_versions_are_enforced() {
    let pki = Pki::new();
    let (_server, port) = pki.server(&["--tls-auth-clients", "no", "--tls-protocols", "TLSv1.2"]);
    assert!(ping_with_only(&pki, port, &rustls::version::TLS12));
    assert!(!ping_with_only(&pki, port, &rustls::version::TLS13));
    let (_server, port) = pki.server(&["--tls-auth-clients", "no", "--tls-protocols", "TLSv1.3"]);
    assert!(ping_with_only(&pki, port, &rustls::version::TLS13));
    assert!(!ping_with_only(&pki, port, &rustls::version::TLS12));
}

#[test]
fn bad_tls_configuration_stops_start_up() {
    let pki = Pki::new();
    let missing: PathBuf = pki.dir.path().join("missing.crt");
    let cases: Vec<Vec<String>> = vec![
        vec![
            "--tls-cert-file".into(),
            path_text(&missing),
            "--tls-key-file".into(),
            pki.file("server.key"),
        ],
        vec!["--tls-cert-file".into(), pki.file("server.crt")],
        vec![
            "--tls-cert-file".into(),
            pki.file("server.crt"),
            "--tls-key-file".into(),
            pki.file("server.key"),
        ],
        vec!["--tls-protocols".into(), "TLSv1.1".into()],
    ];
    for extra in cases {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_strata-server"))
            .args(["--port", &free_port().to_string(), "--appendonly", "no"])
            .args(["--tls-port", &free_port().to_string()])
            .args(&extra)
            .output()
            .expect("run strata-server");
        assert!(!out.status.success(), "{extra:?} started");
    }
}

#[test]
fn stalled_handshakes_count_towards_maxclients() {
    let pki = Pki::new();
    let (server, port) = pki.server(&["--tls-auth-clients", "no", "--maxclients", "5"]);
    // The readiness check's connection must be gone first.
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Five connections to the TLS port that never say hello.
    let stalled: Vec<std::net::TcpStream> = (0..5)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect"))
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut plain = server.client();
    assert_eq!(
        plain.read_to_close(),
        b"-ERR max number of clients reached\r\n"
    );
    drop(stalled);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        set_get(&pki.client(port, None), b"v").expect("room again"),
        b"v"
    );
}
