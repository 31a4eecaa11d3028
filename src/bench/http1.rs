//! A bare HTTP/1.1 keep-alive connection for the fixed-rate client: one request in flight,
//! the request written from one buffer, the answer read to its last byte (`Content-Length` or
//! chunked).
//!
//! reqwest costs several times wrk's CPU per request; on a 2-core machine that CPU comes out of
//! the shop under test, so a fixed-rate run through reqwest measured the client as much as the
//! shop. This connection does what wrk does per request: one write, reads until the answer is
//! complete, no allocation beyond its two reused buffers. Plain `http://` only: `bench shop`
//! fires at the child shop it started on loopback.

use std::io;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `host:port` of an `http://host:port[/...]` URL.
pub fn authority(base_url: &str) -> Option<&str> {
    let rest = base_url.strip_prefix("http://")?;
    let auth = rest.split('/').next()?;
    (!auth.is_empty()).then_some(auth)
}

/// One keep-alive connection to `authority`.
pub struct Conn {
    authority: String,
    stream: Option<TcpStream>,
    request: Vec<u8>,
    answer: Vec<u8>,
    timeout: Duration,
}

impl Conn {
    /// Connects lazily, on the first request.
    pub fn new(authority: &str, timeout: Duration) -> Self {
        Conn {
            authority: authority.to_string(),
            stream: None,
            request: Vec::with_capacity(512),
            answer: Vec::with_capacity(4096),
            timeout,
        }
    }

    /// `POST path` with a JSON `body` and extra `headers`; the answer's status once its body has
    /// been read in full. On any error the connection is dropped (the next call reconnects).
    pub async fn post_json(
        &mut self,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> io::Result<u16> {
        use std::io::Write;
        self.request.clear();
        write!(
            self.request,
            "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n",
            self.authority,
            body.len()
        )?;
        for (name, value) in headers {
            write!(self.request, "{name}: {value}\r\n")?;
        }
        self.request.extend_from_slice(b"\r\n");
        self.request.extend_from_slice(body.as_bytes());
        let result = tokio::time::timeout(self.timeout, self.exchange()).await;
        match result {
            Ok(Ok((status, keep))) => {
                if !keep {
                    self.stream = None;
                }
                Ok(status)
            }
            Ok(Err(e)) => {
                self.stream = None;
                Err(e)
            }
            Err(_) => {
                self.stream = None;
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no full answer in time",
                ))
            }
        }
    }

    async fn exchange(&mut self) -> io::Result<(u16, bool)> {
        if self.stream.is_none() {
            let s = TcpStream::connect(&self.authority).await?;
            s.set_nodelay(true)?;
            self.stream = Some(s);
        }
        let stream = self.stream.as_mut().expect("connected above");
        stream.write_all(&self.request).await?;
        self.answer.clear();
        let head_end = loop {
            if let Some(at) = find(&self.answer, b"\r\n\r\n") {
                break at + 4;
            }
            read_more(stream, &mut self.answer).await?;
        };
        let head = Head::parse(&self.answer[..head_end])?;
        match head.body {
            Body::Length(n) => {
                while self.answer.len() < head_end + n {
                    read_more(stream, &mut self.answer).await?;
                }
            }
            Body::Chunked => {
                let mut at = head_end;
                loop {
                    let line_end = loop {
                        if let Some(i) = find(&self.answer[at..], b"\r\n") {
                            break at + i;
                        }
                        read_more(stream, &mut self.answer).await?;
                    };
                    let size = std::str::from_utf8(&self.answer[at..line_end])
                        .ok()
                        .and_then(|l| usize::from_str_radix(l.split(';').next()?.trim(), 16).ok())
                        .ok_or_else(|| bad("a chunk size that is not hexadecimal"))?;
                    let next = line_end + 2 + size + 2;
                    while self.answer.len() < next {
                        read_more(stream, &mut self.answer).await?;
                    }
                    at = next;
                    if size == 0 {
                        break;
                    }
                }
            }
        }
        Ok((head.status, head.keep_alive))
    }
}

async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.reserve(4096);
    if stream.read_buf(buf).await? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the server closed the connection mid-answer",
        ));
    }
    Ok(())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn bad(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("bad HTTP answer: {what}"),
    )
}

enum Body {
    Length(usize),
    Chunked,
}

struct Head {
    status: u16,
    keep_alive: bool,
    body: Body,
}

impl Head {
    fn parse(raw: &[u8]) -> io::Result<Head> {
        let text = std::str::from_utf8(raw).map_err(|_| bad("a head that is not UTF-8"))?;
        let mut lines = text.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.split(' ');
        let version = parts.next().unwrap_or_default();
        if !version.starts_with("HTTP/1.") {
            return Err(bad("not an HTTP/1.x status line"));
        }
        let status = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("no status code"))?;
        let mut keep_alive = version == "HTTP/1.1";
        let mut body = Body::Length(0);
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                body = Body::Length(value.parse().map_err(|_| bad("content-length"))?);
            } else if name.eq_ignore_ascii_case("transfer-encoding")
                && value.eq_ignore_ascii_case("chunked")
            {
                body = Body::Chunked;
            } else if name.eq_ignore_ascii_case("connection") {
                keep_alive = !value.eq_ignore_ascii_case("close");
            }
        }
        Ok(Head {
            status,
            keep_alive,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    #[test]
    fn the_authority_comes_from_the_base_url() {
        assert_eq!(authority("http://127.0.0.1:8080"), Some("127.0.0.1:8080"));
        assert_eq!(authority("http://h:1/x"), Some("h:1"));
        assert_eq!(authority("https://h"), None);
        assert_eq!(authority("http://"), None);
    }

    /// A server that answers each request with the next canned answer, split in small writes.
    async fn serve(answers: Vec<&'static str>) -> String {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            for a in answers {
                let _ = s.read(&mut buf).await.unwrap();
                for piece in a.as_bytes().chunks(7) {
                    s.write_all(piece).await.unwrap();
                    s.flush().await.unwrap();
                }
            }
        });
        addr
    }

    #[tokio::test]
    async fn answers_are_read_to_their_last_byte_on_one_connection() {
        let addr = serve(vec![
            "HTTP/1.1 201 Created\r\ncontent-length: 11\r\n\r\n{\"ok\":true}",
            "HTTP/1.1 409 Conflict\r\ntransfer-encoding: chunked\r\n\r\n4\r\nsold\r\n3\r\nout\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        ])
        .await;
        let mut c = Conn::new(&addr, Duration::from_secs(2));
        assert_eq!(
            c.post_json("/api/orders", &[("x", "1")], "{}")
                .await
                .unwrap(),
            201
        );
        assert_eq!(c.post_json("/api/orders", &[], "{}").await.unwrap(), 409);
        assert_eq!(c.post_json("/api/orders", &[], "{}").await.unwrap(), 200);
    }

    #[tokio::test]
    async fn a_truncated_or_garbled_answer_is_an_error_not_a_hang() {
        let addr = serve(vec!["HTTP/1.1 201 Created\r\ncontent-length: 50\r\n\r\n{}"]).await;
        let mut c = Conn::new(&addr, Duration::from_secs(2));
        assert!(c.post_json("/", &[], "{}").await.is_err());
        let addr = serve(vec!["SMTP 220 hello\r\n\r\n"]).await;
        let mut c = Conn::new(&addr, Duration::from_secs(2));
        let e = c.post_json("/", &[], "{}").await.unwrap_err();
        assert!(e.to_string().contains("bad HTTP answer"), "{e}");
    }
}
