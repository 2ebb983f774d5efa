//! Streaming a shard over http(s): one GET read front to back; a dropped connection is
//! retried with backoff, resuming at the byte reached with a Range request where the server
//! allows, else reading from the start again and dropping what was already delivered. A
//! Range request at or past the end (416) is the shard's end, reported where the server
//! says the shard ends, as a read to the end would report it.

use std::io::{self, Read};
use std::time::Duration;

use super::tar::ShardRead;

/// How a shard's connection is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Attempts after a failure before giving up (each waits twice as long as the last).
    pub attempts: u32,
    /// The first wait.
    pub backoff: Duration,
    /// A read that gets no byte for this long fails, and counts as a dropped connection:
    /// a stalled server costs retries, never a reader thread forever.
    pub read_timeout: Duration,
}

impl Default for Retry {
    fn default() -> Retry {
        Retry {
            attempts: 5,
            backoff: Duration::from_millis(200),
            read_timeout: Duration::from_secs(30),
        }
    }
}

/// The agent every shard request goes through: status codes come back as responses, so a
/// 404 is told apart from a dropped connection; every read of the socket gives up after
/// `read_timeout` without a byte.
fn agent(read_timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(30)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .timeout_per_read(Some(read_timeout))
        .build()
        .into()
}

/// Fetches a small text document (an index) whole; `Ok(None)` for a 404.
pub fn fetch_small(url: &str, max: u64) -> Result<Option<Vec<u8>>, String> {
    let resp = agent(Retry::default().read_timeout)
        .get(url)
        .call()
        .map_err(|e| e.to_string())?;
    match resp.status().as_u16() {
        200 => {
            let mut body = Vec::new();
            resp.into_body()
                .into_reader()
                .take(max + 1)
                .read_to_end(&mut body)
                .map_err(|e| e.to_string())?;
            if body.len() as u64 > max {
                return Err(format!("over {max} bytes"));
            }
            Ok(Some(body))
        }
        404 | 410 => Ok(None),
        s => Err(format!("HTTP {s}")),
    }
}

/// A shard read over http(s); see the module doc.
pub struct HttpShard {
    agent: ureq::Agent,
    url: String,
    body: Option<ureq::BodyReader<'static>>,
    /// Bytes delivered to the reader so far.
    pos: u64,
    /// The shard's length, when the server said.
    len: Option<u64>,
    /// Whether the server answered a Range request with 206.
    ranges: bool,
    retry: Retry,
    /// Connections lost in a row without a byte delivered.
    stalls: u32,
}

/// Why a request failed: worth another try, or not (a 404 stays a 404).
enum Failure {
    Retry(String),
    Final(io::Error),
}

/// What a request got.
enum Reply {
    /// The bytes from `pos` on, in `body`.
    Body,
    /// Nothing is at or after `pos` (HTTP 416): the shard's length, where the server said it.
    PastEnd(Option<u64>),
}

impl HttpShard {
    /// Opens `url` (the first request is made here, so a 404 is an error at once).
    pub fn open(url: &str, retry: Retry) -> io::Result<HttpShard> {
        let mut s = HttpShard {
            agent: agent(retry.read_timeout),
            url: url.to_string(),
            body: None,
            pos: 0,
            len: None,
            ranges: false,
            retry,
            stalls: 0,
        };
        // A first request has no Range: never past the end.
        s.connect_retrying(None)?;
        Ok(s)
    }

    /// The server said nothing is at or after `self.pos`, all of it delivered: the shard
    /// ends here — unless its length is known to be more (said before, or said now), when
    /// the server contradicts itself and the rest is lost, an error.
    fn ended_here(&mut self, total: Option<u64>) -> io::Result<()> {
        let said_before = self.len.filter(|&l| l != self.pos);
        match said_before.or(total) {
            Some(t) if t != self.pos => Err(io::Error::other(format!(
                "the server says the shard is {t} bytes, and nothing at byte {} (HTTP 416)",
                self.pos
            ))),
            _ => {
                self.len = Some(self.pos);
                Ok(())
            }
        }
    }

    /// A jump of `n` bytes by a Range request (the server takes them): the bytes skipped,
    /// fewer where the shard ends first — where the server says it ends, or, where it
    /// doesn't say, where reading from here ends.
    fn jump(&mut self, n: u64) -> io::Result<u64> {
        let from = self.pos;
        let to = from.saturating_add(n);
        self.body = None;
        if let Some(len) = self.len {
            self.pos = to.min(len);
            return Ok(self.pos - from);
        }
        // The end unknown (a reply with "bytes a-b/*"): ask now, so that a jump past the end
        // is found here, not as the next read's failure.
        self.pos = to;
        match self.connect_retrying(None)? {
            Reply::Body => Ok(n),
            Reply::PastEnd(Some(total)) if (from..=to).contains(&total) => {
                self.pos = total;
                self.len = Some(total);
                Ok(total - from)
            }
            Reply::PastEnd(Some(total)) => Err(io::Error::other(format!(
                "the server says the shard is {total} bytes, and nothing from byte {to} (HTTP 416)"
            ))),
            Reply::PastEnd(None) => {
                self.pos = from;
                if let Reply::PastEnd(total) = self.connect_retrying(None)? {
                    self.ended_here(total)?;
                    return Ok(0);
                }
                super::tar::skip_by_reading(self, n)
            }
        }
    }

    /// One request for the bytes from `self.pos` on.
    fn request(&mut self) -> Result<Reply, Failure> {
        let mut req = self.agent.get(&self.url);
        if self.pos > 0 {
            req = req.header("Range", &format!("bytes={}-", self.pos));
        }
        let resp = req.call().map_err(|e| match e {
            ureq::Error::Io(e) => Failure::Retry(e.to_string()),
            ureq::Error::Timeout(t) => Failure::Retry(format!("timed out ({t})")),
            ureq::Error::ConnectionFailed => Failure::Retry("connection failed".into()),
            other => Failure::Final(io::Error::other(other.to_string())),
        })?;
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let mut skip = 0;
        match status {
            206 if self.pos > 0 => {
                // "bytes START-END/TOTAL": it must start where we are.
                let range = header("content-range").unwrap_or_default();
                let start = range
                    .strip_prefix("bytes ")
                    .and_then(|r| r.split('-').next())
                    .and_then(|s| s.parse::<u64>().ok());
                if start != Some(self.pos) {
                    return Err(Failure::Final(io::Error::other(format!(
                        "asked for bytes from {}, the server sent '{range}'",
                        self.pos
                    ))));
                }
                self.ranges = true;
                if let Some(total) = range.rsplit('/').next().and_then(|t| t.parse().ok()) {
                    self.len = Some(total);
                }
            }
            200 => {
                if let Some(n) = header("content-length").and_then(|l| l.parse().ok()) {
                    self.len = Some(n);
                }
                // A server that ignores ranges starts from the beginning again.
                skip = self.pos;
            }
            416 if self.pos > 0 => {
                // "bytes */TOTAL" (RFC 9110 §15.5.17).
                let total = header("content-range").and_then(|r| {
                    r.trim()
                        .strip_prefix("bytes */")
                        .and_then(|t| t.trim().parse::<u64>().ok())
                });
                return Ok(Reply::PastEnd(total));
            }
            404 | 410 => {
                return Err(Failure::Final(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("HTTP {status} (not found)"),
                )))
            }
            s if s >= 500 || s == 408 || s == 429 => {
                return Err(Failure::Retry(format!("HTTP {s}")))
            }
            s => return Err(Failure::Final(io::Error::other(format!("HTTP {s}")))),
        }
        let mut body = resp.into_body().into_reader();
        if skip > 0 {
            let got = io::copy(&mut Read::by_ref(&mut body).take(skip), &mut io::sink())
                .map_err(|e| Failure::Retry(e.to_string()))?;
            if got < skip {
                return Err(Failure::Retry(format!(
                    "the shard ended at byte {got} when re-read, before byte {skip} reached earlier"
                )));
            }
        }
        self.body = Some(body);
        Ok(Reply::Body)
    }

    /// Connects at `self.pos`, retrying with backoff; `first_error` is why the last
    /// connection was lost.
    fn connect_retrying(&mut self, first_error: Option<String>) -> io::Result<Reply> {
        let mut last = first_error;
        let mut wait = self.retry.backoff;
        // A first connection tries at once; a lost one waits before each try.
        let tries = self.retry.attempts + u32::from(last.is_none());
        for _ in 0..tries {
            if let Some(why) = &last {
                tracing::debug!("{}: {why}; retrying at byte {}", self.url, self.pos);
                std::thread::sleep(wait);
                wait = wait.saturating_mul(2);
            }
            match self.request() {
                Ok(reply) => return Ok(reply),
                Err(Failure::Final(e)) => return Err(e),
                Err(Failure::Retry(why)) => last = Some(why),
            }
        }
        Err(io::Error::other(format!(
            "{} (after {} retries)",
            last.unwrap_or_default(),
            self.retry.attempts
        )))
    }
}

impl Read for HttpShard {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.body.is_none() {
                // A jump to the end: nothing to ask for.
                if self.len == Some(self.pos) {
                    return Ok(0);
                }
                self.stalls += 1;
                if self.stalls > self.retry.attempts + 1 {
                    return Err(io::Error::other(format!(
                        "the connection keeps closing at byte {} without sending more",
                        self.pos
                    )));
                }
                if let Reply::PastEnd(total) =
                    self.connect_retrying(Some("connection closed early".into()))?
                {
                    self.ended_here(total)?;
                    return Ok(0);
                }
            }
            let body = self.body.as_mut().expect("connected above");
            match body.read(buf) {
                Ok(0) if self.len.is_some_and(|l| self.pos < l) => {
                    self.body = None;
                }
                Ok(n) => {
                    if n > 0 {
                        self.stalls = 0;
                    }
                    self.pos += n as u64;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.body = None;
                    self.stalls += 1;
                    if self.stalls > self.retry.attempts + 1 {
                        return Err(e);
                    }
                    if let Reply::PastEnd(total) = self.connect_retrying(Some(e.to_string()))? {
                        self.ended_here(total)?;
                        return Ok(0);
                    }
                }
            }
        }
    }
}

impl ShardRead for HttpShard {
    fn skip(&mut self, n: u64) -> io::Result<u64> {
        // Far jumps on a server that takes ranges are a new request, not a download.
        if self.ranges && n > (4 << 20) {
            return self.jump(n);
        }
        super::tar::skip_by_reading(self, n)
    }
}
