//! Streaming a shard over http(s): one GET read front to back; a dropped connection is
//! retried with backoff, resuming at the byte reached with a Range request where the server
//! allows, else reading from the start again and dropping what was already delivered.

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
        s.connect_retrying(None)?;
        Ok(s)
    }

    /// One request for the bytes from `self.pos` on.
    fn request(&mut self) -> Result<(), Failure> {
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
        Ok(())
    }

    /// Connects at `self.pos`, retrying with backoff; `first_error` is why the last
    /// connection was lost.
    fn connect_retrying(&mut self, first_error: Option<String>) -> io::Result<()> {
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
                Ok(()) => return Ok(()),
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
                self.stalls += 1;
                if self.stalls > self.retry.attempts + 1 {
                    return Err(io::Error::other(format!(
                        "the connection keeps closing at byte {} without sending more",
                        self.pos
                    )));
                }
                self.connect_retrying(Some("connection closed early".into()))?;
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
                    self.connect_retrying(Some(e.to_string()))?;
                }
            }
        }
    }
}

impl ShardRead for HttpShard {
    fn skip(&mut self, n: u64) -> io::Result<u64> {
        // Far jumps on a server that takes ranges are a new request, not a download.
        if self.ranges && n > (4 << 20) {
            let to = self.pos.saturating_add(n);
            let to = self.len.map_or(to, |l| to.min(l));
            let skipped = to.saturating_sub(self.pos);
            self.pos = to;
            self.body = None;
            return Ok(skipped);
        }
        super::tar::skip_by_reading(self, n)
    }
}
