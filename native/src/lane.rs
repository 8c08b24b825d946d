//! The service's fast lane: an HTTP/1.1 loop (mio, httparse) over the connections a worker gives it,
//! answering each whole, plain request through its `Host` on this thread, and giving a connection back
//! (`Host::hand_off`, with the bytes read and not answered) at the first request it does not take.
//!
//! Taken: HTTP/1.1 with a Content-Length body (or none) within `Limits::max_body` and not of a streamed
//! media type, no Transfer-Encoding, Expect or Upgrade, a head within `MAX_HEAD` bytes. Everything else, and whatever the host declines,
//! goes back to the general server, which answers it as it answers every request. A connection idle for
//! `Limits::keep_alive` is closed; one holding part of a request that stops growing is given back (the
//! general server's timeouts apply to it there).

use std::collections::HashMap;
use std::io::{self, ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};

/// The longest request head taken (longer ones are given back).
const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;
const WAKER: Token = Token(0);
/// A connection's buffers shrink back to nothing once emptied beyond this size.
const KEEP: usize = 64 * 1024;
/// How often idle connections are looked for, and how long part of a request may wait for the rest.
const SWEEP: Duration = Duration::from_millis(100);

/// One request, whole.
pub struct Request<'a> {
    pub method: &'a str,
    /// The request target as sent: path and query.
    pub target: &'a [u8],
    /// Names in lower case.
    pub headers: Vec<(Vec<u8>, &'a [u8])>,
    pub body: &'a [u8],
    /// False when the client asked to close, or the lane is stopping: the answer says so.
    pub keep_alive: bool,
    pub client: Option<SocketAddr>,
    pub server: Option<SocketAddr>,
}

/// What the host makes of a request.
pub enum Reply {
    /// The whole response, head and body, and whether the connection stays open after it.
    Answer(Vec<u8>, bool),
    /// Not taken: the connection goes back, this request first.
    HandOff,
}

/// Who answers the requests and takes connections back.
pub trait Host {
    /// The replies to requests of different connections, in their order (a batch: what was whole at once).
    fn answer(&mut self, requests: &[Request<'_>]) -> Vec<Reply>;
    fn hand_off(&mut self, connection: OwnedFd, read: Vec<u8>);
}

/// How long an idle connection is kept, the largest body taken, and the media types of bodies the
/// general server streams (in lower case): a request with one goes back at its head, not its end.
#[derive(Clone)]
pub struct Limits {
    pub keep_alive: Duration,
    pub max_body: usize,
    pub streamed: Vec<Vec<u8>>,
}

/// The side of a lane other threads hold: connections given to it, and the stop.
pub struct Remote {
    waker: Waker,
    stopping: AtomicBool,
    incoming: Mutex<Vec<OwnedFd>>,
}

impl Remote {
    /// A connection for the lane; refused (and closed: the caller keeps its own descriptor of the
    /// socket) once the lane is stopping, or if the loop cannot be woken.
    pub fn adopt(&self, connection: OwnedFd) -> io::Result<()> {
        if self.stopping.load(Ordering::SeqCst) {
            return Err(io::Error::other("the lane is stopping"));
        }
        self.incoming().push(connection);
        self.waker.wake().inspect_err(|_| {
            self.incoming().pop(); // ours, the last: closed here, the caller serves the connection
        })
    }

    fn incoming(&self) -> std::sync::MutexGuard<'_, Vec<OwnedFd>> {
        self.incoming.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Take no more connections; answer the requests read, close each connection after its answer, and
    /// end `Lane::run` once none is left.
    pub fn stop(&self) -> io::Result<()> {
        self.stopping.store(true, Ordering::SeqCst);
        self.waker.wake()
    }
}

/// The loop's own side.
pub struct Lane {
    poll: Poll,
    remote: Arc<Remote>,
}

/// The connections, and those with something to do (an event, or a request read behind one answered).
struct Connections {
    open: HashMap<Token, Connection>,
    ready: Vec<Token>,
    next: usize,
}

impl Connections {
    /// Note a connection with something to do (once, however many events it had).
    fn queue(&mut self, token: Token) {
        if let Some(connection) = self.open.get_mut(&token) {
            if !connection.queued {
                connection.queued = true;
                self.ready.push(token);
            }
        }
    }
}

impl Lane {
    pub fn new() -> io::Result<Self> {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        let remote = Arc::new(Remote {
            waker,
            stopping: AtomicBool::new(false),
            incoming: Mutex::new(Vec::new()),
        });
        Ok(Lane { poll, remote })
    }

    pub fn remote(&self) -> Arc<Remote> {
        Arc::clone(&self.remote)
    }

    /// Serve until stopped and every connection is closed or given back.
    pub fn run(mut self, host: &mut dyn Host, limits: &Limits) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        let mut all = Connections {
            open: HashMap::new(),
            ready: Vec::new(),
            next: 1,
        };
        let mut sweep_at = Instant::now() + SWEEP;
        loop {
            let wait = if all.ready.is_empty() {
                sweep_at.saturating_duration_since(Instant::now())
            } else {
                Duration::ZERO
            };
            match self.poll.poll(&mut events, Some(wait)) {
                Ok(()) => {}
                Err(err) if err.kind() == ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            }
            let stopping = self.remote.stopping.load(Ordering::SeqCst);
            for event in events.iter() {
                if event.token() == WAKER {
                    self.welcome(&mut all, host, stopping);
                } else {
                    all.queue(event.token());
                }
            }
            // Before the round, on what the poll saw: a connection with an event is not idle.
            let now = Instant::now();
            if now >= sweep_at {
                sweep_at = now + SWEEP;
                self.sweep(&mut all, host, limits, now);
            }
            self.round(&mut all, host, limits, stopping);
            if stopping {
                // Idle ones close now (as uvicorn closes its own); the others once their answers are written.
                let idle: Vec<Token> = all
                    .open
                    .iter()
                    .filter(|(_, c)| c.idle() && !c.queued)
                    .map(|(t, _)| *t)
                    .collect();
                for token in idle {
                    close(&mut all.open, token, &self.poll);
                }
                if all.open.is_empty() {
                    self.welcome(&mut all, host, true); // given while the last ones closed: back
                    return Ok(());
                }
            }
        }
    }

    /// Register the connections given since the last turn (or, once stopping, give them back: uvicorn
    /// closes them, or answers what they hold, as it stops).
    fn welcome(&self, all: &mut Connections, host: &mut dyn Host, stopping: bool) {
        let fresh = std::mem::take(&mut *self.remote.incoming());
        for fd in fresh {
            if stopping {
                host.hand_off(fd, Vec::new());
                continue;
            }
            let token = Token(all.next);
            all.next += 1;
            if let Some(connection) = Connection::new(fd, token, &self.poll) {
                all.open.insert(token, connection);
                all.queue(token); // bytes may have come before it was registered
            }
        }
    }

    /// One turn: the ready connections' I/O, then their whole requests answered as one batch.
    fn round(&self, all: &mut Connections, host: &mut dyn Host, limits: &Limits, stopping: bool) {
        let mut whole: Vec<(Token, Whole)> = Vec::new();
        for token in std::mem::take(&mut all.ready) {
            let Some(connection) = all.open.get_mut(&token) else {
                continue;
            };
            connection.queued = false;
            match connection.io(limits, stopping) {
                Next::Wait => {}
                Next::Answer(request) => whole.push((token, request)),
                Next::Close => close(&mut all.open, token, &self.poll),
                Next::HandOff => hand_off(&mut all.open, token, host, &self.poll),
            }
        }
        if whole.is_empty() {
            return;
        }
        let replies = {
            let requests: Vec<Request<'_>> = whole
                .iter()
                .filter_map(|(token, w)| all.open.get(token).and_then(|c| c.request(w)))
                .collect();
            if requests.len() != whole.len() {
                Vec::new() // cannot happen (each was parsed whole): every one goes back below
            } else {
                host.answer(&requests)
            }
        };
        let mut replies = replies.into_iter();
        for (token, w) in whole {
            match replies.next() {
                Some(Reply::Answer(bytes, open)) => {
                    if let Some(c) = all.open.get_mut(&token) {
                        c.read.drain(..w.head + w.length);
                        if c.read.is_empty() && c.read.capacity() > KEEP {
                            c.read = Vec::new();
                        }
                        c.out = bytes;
                        c.closing = !(w.keep_alive && open);
                        c.last = Instant::now();
                        c.write(); // now, not after the next poll
                        all.queue(token); // the rest of it, then the next request read, if any
                    }
                }
                Some(Reply::HandOff) | None => hand_off(&mut all.open, token, host, &self.poll),
            }
        }
    }

    /// Close the connections idle (or not reading their answer) for `keep_alive`; give back one holding
    /// part of a request that has not grown for `SWEEP` (a slow client: the general server times it out,
    /// or finishes it as it stops). One with an event waiting is neither.
    fn sweep(&self, all: &mut Connections, host: &mut dyn Host, limits: &Limits, now: Instant) {
        let mut due: Vec<(Token, bool)> = Vec::new();
        for (token, c) in &all.open {
            let still = now.saturating_duration_since(c.last);
            if c.queued {
                continue;
            }
            if c.unsent() == 0 && !c.read.is_empty() && still >= SWEEP {
                due.push((*token, true));
            } else if still >= limits.keep_alive {
                due.push((*token, false));
            }
        }
        for (token, give_back) in due {
            if give_back {
                hand_off(&mut all.open, token, host, &self.poll);
            } else {
                close(&mut all.open, token, &self.poll);
            }
        }
    }
}

struct Connection {
    stream: TcpStream,
    read: Vec<u8>,
    out: Vec<u8>,
    sent: usize,
    last: Instant,
    /// Close once the answer is written (the client asked, or the lane is stopping).
    closing: bool,
    /// In `Connections::ready`.
    queued: bool,
    /// The client has shut its side: the requests read are answered, then the connection closes.
    eof: bool,
    client: Option<SocketAddr>,
    server: Option<SocketAddr>,
}

/// A whole request read: its head's length, its body's, and whether the connection stays open after it.
#[derive(Clone, Copy)]
struct Whole {
    head: usize,
    length: usize,
    keep_alive: bool,
}

/// What a connection's I/O came to.
enum Next {
    /// Waiting for the socket.
    Wait,
    Answer(Whole),
    Close,
    HandOff,
}

impl Connection {
    fn new(fd: OwnedFd, token: Token, poll: &Poll) -> Option<Self> {
        let std_stream = std::net::TcpStream::from(fd);
        std_stream.set_nonblocking(true).ok()?;
        let mut stream = TcpStream::from_std(std_stream);
        poll.registry()
            .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
            .ok()?;
        let client = stream.peer_addr().ok();
        let server = stream.local_addr().ok();
        Some(Connection {
            stream,
            read: Vec::new(),
            out: Vec::new(),
            sent: 0,
            last: Instant::now(),
            closing: false,
            queued: false,
            eof: false,
            client,
            server,
        })
    }

    fn unsent(&self) -> usize {
        self.out.len() - self.sent
    }

    fn idle(&self) -> bool {
        self.read.is_empty() && self.unsent() == 0
    }

    /// Write what is owed until the socket would block: false if the connection is broken.
    fn write(&mut self) -> bool {
        while self.unsent() > 0 {
            match self.stream.write(&self.out[self.sent..]) {
                Ok(0) => return false,
                Ok(n) => {
                    self.sent += n;
                    self.last = Instant::now();
                }
                Err(err) if err.kind() == ErrorKind::WouldBlock => return true,
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }

    /// Write what is owed, then find the next whole request, reading until the socket would block.
    fn io(&mut self, limits: &Limits, stopping: bool) -> Next {
        if !self.write() {
            return Next::Close;
        }
        if self.unsent() > 0 {
            return Next::Wait;
        }
        self.out.clear();
        self.sent = 0;
        if self.out.capacity() > KEEP {
            self.out = Vec::new(); // one large answer does not hold its memory for the connection's life
        }
        if self.closing {
            return Next::Close;
        }
        let mut chunk = [0u8; 64 * 1024];
        loop {
            match parse(&self.read, limits) {
                Parsed::Whole(mut whole) => {
                    whole.keep_alive &= !stopping; // after the client's end: closed once none is left
                    return Next::Answer(whole);
                }
                Parsed::Other => return Next::HandOff,
                Parsed::Partial if self.eof => return Next::Close, // a partial request is dropped, as a server would
                Parsed::Partial => {}
            }
            // Nothing whole to answer: read what has come.
            let before = self.read.len();
            loop {
                match self.stream.read(&mut chunk) {
                    Ok(0) => {
                        self.eof = true;
                        break;
                    }
                    Ok(n) => {
                        self.read.extend_from_slice(&chunk[..n]);
                        if self.read.len() > MAX_HEAD + limits.max_body {
                            break;
                        }
                    }
                    Err(err) if err.kind() == ErrorKind::WouldBlock => break,
                    Err(err) if err.kind() == ErrorKind::Interrupted => {}
                    Err(_) => return Next::Close,
                }
            }
            if self.read.len() == before && !self.eof {
                return Next::Wait;
            }
            self.last = Instant::now();
        }
    }

    /// The whole request `io` found, parsed again (httparse's borrows end with `parse`).
    fn request(&self, whole: &Whole) -> Option<Request<'_>> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Request::new(&mut headers);
        parsed.parse(self.read.get(..whole.head)?).ok()?;
        let method = parsed.method?;
        let target = parsed.path?.as_bytes();
        let headers = parsed
            .headers
            .iter()
            .map(|h| (h.name.as_bytes().to_ascii_lowercase(), h.value))
            .collect();
        Some(Request {
            method,
            target,
            headers,
            body: self.read.get(whole.head..whole.head + whole.length)?,
            keep_alive: whole.keep_alive,
            client: self.client,
            server: self.server,
        })
    }
}

enum Parsed {
    Whole(Whole),
    /// More bytes needed (or none read).
    Partial,
    /// Not one the lane takes.
    Other,
}

fn parse(read: &[u8], limits: &Limits) -> Parsed {
    if read.is_empty() {
        return Parsed::Partial;
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let head = match request.parse(read) {
        Ok(httparse::Status::Complete(head)) => head,
        Ok(httparse::Status::Partial) if read.len() <= MAX_HEAD => return Parsed::Partial,
        _ => return Parsed::Other,
    };
    // A line ended by a bare LF: uvicorn's parser refuses it (400), so it answers.
    if request.version != Some(1) || bare_lf(read.get(..head).unwrap_or_default()) {
        return Parsed::Other;
    }
    let mut length: Option<usize> = None;
    let mut keep_alive = true;
    for header in request.headers.iter() {
        let name = header.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            match decimal(header.value) {
                Some(n) if length.is_none_or(|given| given == n) => length = Some(n),
                _ => return Parsed::Other,
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding")
            || name.eq_ignore_ascii_case(b"expect")
            || name.eq_ignore_ascii_case(b"upgrade")
        {
            return Parsed::Other;
        } else if name.eq_ignore_ascii_case(b"content-type") {
            let media = header
                .value
                .split(|&b| b == b';')
                .next()
                .unwrap_or_default()
                .trim_ascii();
            if limits
                .streamed
                .iter()
                .any(|kind| media.eq_ignore_ascii_case(kind))
            {
                return Parsed::Other; // streamed by the general server as it arrives
            }
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in header.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case(b"upgrade") {
                    return Parsed::Other;
                }
            }
        }
    }
    let length = length.unwrap_or(0);
    if length > limits.max_body {
        return Parsed::Other;
    }
    if read.len() - head < length {
        return Parsed::Partial;
    }
    Parsed::Whole(Whole {
        head,
        length,
        keep_alive,
    })
}

fn bare_lf(head: &[u8]) -> bool {
    memchr::memchr_iter(b'\n', head).any(|i| i == 0 || head.get(i - 1) != Some(&b'\r'))
}

/// A Content-Length: ASCII digits only, and not absurd.
fn decimal(value: &[u8]) -> Option<usize> {
    let value = value.trim_ascii();
    if value.is_empty() || value.len() > 18 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

fn close(open: &mut HashMap<Token, Connection>, token: Token, poll: &Poll) {
    if let Some(mut connection) = open.remove(&token) {
        let _ = poll.registry().deregister(&mut connection.stream);
    }
}

fn hand_off(open: &mut HashMap<Token, Connection>, token: Token, host: &mut dyn Host, poll: &Poll) {
    if let Some(mut connection) = open.remove(&token) {
        let _ = poll.registry().deregister(&mut connection.stream);
        let read = std::mem::take(&mut connection.read);
        host.hand_off(OwnedFd::from(connection.stream), read);
    }
}

#[cfg(test)]
#[path = "lane_tests.rs"]
mod tests;
