//! The lane's parser and its loop, with a host that echoes each request.

use super::*;
use std::io::{Read, Write};

fn limits() -> Limits {
    Limits {
        keep_alive: Duration::from_secs(60),
        max_body: 100,
        streamed: vec![b"application/x-ndjson".to_vec()],
    }
}

fn whole(raw: &[u8]) -> (usize, usize, bool) {
    match parse(raw, &limits()) {
        Parsed::Whole(w) => (w.head, w.length, w.keep_alive),
        Parsed::Partial => panic!("partial"),
        Parsed::Other => panic!("other"),
    }
}

#[test]
fn a_post_with_its_body_is_whole() {
    let raw = b"POST /v1/x HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}";
    assert_eq!(whole(raw), (raw.len() - 2, 2, true));
    assert!(matches!(
        parse(&raw[..raw.len() - 1], &limits()),
        Parsed::Partial
    ));
}

#[test]
fn close_is_heard_and_a_get_has_no_body() {
    assert!(!whole(b"GET /healthz HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n").2);
    assert_eq!(whole(b"GET /healthz HTTP/1.1\r\n\r\nGET").1, 0);
}

#[test]
fn what_the_lane_does_not_take_goes_back() {
    for raw in [
        &b"GET / HTTP/1.0\r\n\r\n"[..],
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n",
        b"GET / HTTP/1.1\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
        b"GARBAGE\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Type: Application/X-NDJSON; charset=utf-8\r\nContent-Length: 1\r\n\r\n",
        b"GET / HTTP/1.1\nHost: x\r\n\r\n",
    ] {
        assert!(
            matches!(parse(raw, &limits()), Parsed::Other),
            "{}",
            String::from_utf8_lossy(raw)
        );
    }
    let long = [b"GET / HTTP/1.1\r\nX: ".as_slice(), &vec![b'a'; MAX_HEAD]].concat();
    assert!(matches!(parse(&long, &limits()), Parsed::Other));
}

struct Echo {
    handed: std::sync::mpsc::Sender<Vec<u8>>,
}

impl Host for Echo {
    fn answer(&mut self, requests: &[Request<'_>]) -> Vec<Reply> {
        let reply = |r: &Request<'_>| {
            if r.target == b"/back" {
                return Reply::HandOff;
            }
            let body = [r.method.as_bytes(), b" ", r.target, b" ", r.body].concat();
            let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
            Reply::Answer([head.as_bytes(), &body].concat(), r.keep_alive)
        };
        requests.iter().map(reply).collect()
    }

    fn hand_off(&mut self, connection: OwnedFd, read: Vec<u8>) {
        drop(connection);
        let _ = self.handed.send(read);
    }
}

fn read_until(client: &mut std::net::TcpStream, end: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while !got.ends_with(end) {
        let n = client.read(&mut chunk).expect("an answer");
        assert!(n > 0, "closed after {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&chunk[..n]);
    }
    got
}

/// A lane serving on a thread, a client connected, and the server's side of it (not yet adopted).
struct Served {
    client: std::net::TcpStream,
    server: Option<std::net::TcpStream>,
    remote: Arc<Remote>,
    back: std::sync::mpsc::Receiver<Vec<u8>>,
    serving: std::thread::JoinHandle<io::Result<()>>,
}

impl Served {
    fn new() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let (server, _) = listener.accept().unwrap();
        let lane = Lane::new().unwrap();
        let remote = lane.remote();
        let (handed, back) = std::sync::mpsc::channel();
        let serving = std::thread::spawn(move || lane.run(&mut Echo { handed }, &limits()));
        Served {
            client,
            server: Some(server),
            remote,
            back,
            serving,
        }
    }

    fn adopt(&mut self) {
        let server = self.server.take().unwrap();
        self.remote.adopt(OwnedFd::from(server)).unwrap();
    }

    fn read_to_end(&mut self) -> Vec<u8> {
        let mut got = Vec::new();
        self.client.read_to_end(&mut got).unwrap();
        got
    }

    fn stop(self) {
        self.remote.stop().unwrap();
        self.serving.join().unwrap().unwrap();
    }
}

#[test]
fn pipelined_and_split_requests_are_answered_in_order_then_the_connection_goes_back() {
    let mut served = Served::new();
    served.adopt();
    let requests = b"POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nhiGET /b HTTP/1.1\r\n\r\n";
    served.client.write_all(requests).unwrap();
    served
        .client
        .write_all(b"POST /c HTTP/1.1\r\nContent-Length: 3\r\n\r\nx")
        .unwrap();
    served.client.write_all(b"yz").unwrap();
    let got = read_until(&mut served.client, b"POST /c xyz");
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.find("POST /a hi").unwrap() < text.find("GET /b ").unwrap(),
        "{text}"
    );
    let rest = b"GET /back HTTP/1.1\r\n\r\nGET /next HTTP/1.1\r\n\r\n";
    served.client.write_all(rest).unwrap();
    assert_eq!(
        served.back.recv_timeout(Duration::from_secs(60)).unwrap(),
        rest
    );
    served.stop();
}

#[test]
fn close_is_honoured_and_a_stopped_lane_ends() {
    let mut served = Served::new();
    served.adopt();
    served
        .client
        .write_all(b"GET /x HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let got = served.read_to_end(); // ends: the lane closed it after the answer
    assert!(
        got.ends_with(b"GET /x "),
        "{}",
        String::from_utf8_lossy(&got)
    );
    served.stop();
}

#[test]
fn a_client_that_shuts_its_side_gets_its_answers() {
    let mut served = Served::new();
    served
        .client
        .write_all(b"GET /x HTTP/1.1\r\n\r\nGET /y HTTP/1.1\r\n\r\n")
        .unwrap();
    served.client.shutdown(std::net::Shutdown::Write).unwrap();
    served.adopt(); // the requests and the end are both there already
    let got = served.read_to_end();
    assert!(
        got.ends_with(b"GET /y "),
        "{}",
        String::from_utf8_lossy(&got)
    );
    served.stop();
}
