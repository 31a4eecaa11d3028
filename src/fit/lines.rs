//! The log read one line at a time into one reused buffer, so a log of any size costs the
//! buffer and no more: a line longer than [`MAX_LINE`] is not kept whole but skipped to its
//! end and reported as too long.

use std::io::{self, BufRead};

/// The longest line kept: longer ones are bad lines (an access log line is a few hundred
/// bytes; a JSON one a few KiB).
pub const MAX_LINE: usize = 64 * 1024;

/// One line as read.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// The line's bytes are in the buffer (without its `\n` or `\r\n`).
    Read,
    /// Longer than [`MAX_LINE`]: skipped to its end; the buffer holds its start.
    TooLong,
}

/// Reads the next line of `r` into `buf` (cleared first); `None` at the end.
pub fn next(r: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<Option<Line>> {
    buf.clear();
    let mut too_long = false;
    let mut any = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            break;
        }
        any = true;
        let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        let room = MAX_LINE.saturating_sub(buf.len());
        if take > room {
            too_long = true;
        }
        buf.extend_from_slice(&chunk[..take.min(room)]);
        r.consume(if done { take + 1 } else { take });
        if done {
            break;
        }
    }
    if !any {
        return Ok(None);
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(if too_long { Line::TooLong } else { Line::Read }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_one_by_one_and_a_long_one_is_cut_and_flagged() {
        let long = "x".repeat(MAX_LINE + 10);
        let text = format!("a\r\n\nb{long}\nlast");
        let mut r = io::BufReader::with_capacity(16, text.as_bytes());
        let mut buf = Vec::new();
        let mut got = Vec::new();
        while let Some(l) = next(&mut r, &mut buf).unwrap() {
            got.push((l, buf.len(), buf.first().copied()));
        }
        assert_eq!(
            got,
            vec![
                (Line::Read, 1, Some(b'a')),
                (Line::Read, 0, None),
                (Line::TooLong, MAX_LINE, Some(b'b')),
                (Line::Read, 4, Some(b'l')),
            ]
        );
        assert!(buf.capacity() <= 2 * MAX_LINE, "{}", buf.capacity());
    }
}
