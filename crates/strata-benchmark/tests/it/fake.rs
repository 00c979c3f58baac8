//! A scripted RESP server on a free loopback port: it answers every request with a
//! reply chosen by a function of the request's bytes, and counts the requests.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Chooses the reply to a request (given as its RESP bytes).
pub type Script = fn(&[u8]) -> &'static [u8];

/// A running fake server; it stops when dropped.
pub struct Fake {
    pub port: u16,
    pub requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Fake {
    pub fn start(script: Script) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, halt) = (requests.clone(), stop.clone());
        let accept = std::thread::spawn(move || {
            let mut workers = Vec::new();
            while !halt.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (count, halt) = (count.clone(), halt.clone());
                        workers.push(std::thread::spawn(move || {
                            serve(stream, script, &count, &halt)
                        }));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            for w in workers {
                let _ = w.join();
            }
        });
        Fake {
            port,
            requests,
            stop,
            accept: Some(accept),
        }
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
    }
}

fn serve(mut stream: TcpStream, script: Script, count: &AtomicU64, halt: &AtomicBool) {
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut input = Vec::new();
    let mut chunk = [0u8; 8192];
    while !halt.load(Ordering::Relaxed) {
        let n = match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(_) => return,
        };
        input.extend_from_slice(&chunk[..n]);
        let mut out = Vec::new();
        let mut pos = 0;
        // A client's request is an array of bulk strings: any RESP value.
        while let Ok(Some(frame)) = strata_resp::scan(&input[pos..]) {
            out.extend_from_slice(script(&input[pos..pos + frame.len]));
            pos += frame.len;
            count.fetch_add(1, Ordering::Relaxed);
        }
        input.drain(..pos);
        if stream.write_all(&out).is_err() {
            return;
        }
    }
}
