//! The Redis commands a `[watch]` gauge may send: reads that answer one number (or, for
//! `XPENDING`, a summary whose first element is the count), each with its fixed number of
//! arguments. Anything else is refused when the scenario is read: a watch never writes.

use redis::Value;

/// A read command: its name (upper case) and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadCommand {
    pub name: &'static str,
    pub args: Vec<String>,
}

/// Every allowed command: its name, its arguments as documented, and how many it takes.
pub const ALLOWED: [(&str, &str, usize); 12] = [
    ("XLEN", "key", 1),
    ("XPENDING", "key group", 2),
    ("LLEN", "key", 1),
    ("SCARD", "key", 1),
    ("ZCARD", "key", 1),
    ("ZCOUNT", "key min max", 3),
    ("HLEN", "key", 1),
    ("HGET", "key field", 2),
    ("GET", "key", 1),
    ("STRLEN", "key", 1),
    ("PFCOUNT", "key", 1),
    ("DBSIZE", "", 0),
];

/// What `command` may be, for messages.
pub fn allowed() -> String {
    let list: Vec<String> = ALLOWED
        .iter()
        .map(|(n, a, _)| {
            if a.is_empty() {
                format!("[\"{n}\"]")
            } else {
                let args: Vec<String> = a.split(' ').map(|w| format!("\"{w}\"")).collect();
                format!("[\"{n}\", {}]", args.join(", "))
            }
        })
        .collect();
    format!(
        "a read command answering one number, one of {} (no write command: a watch only reads)",
        list.join(", ")
    )
}

impl ReadCommand {
    /// The command `words` spell, if it is one of [`ALLOWED`] with its arguments; else what
    /// is allowed.
    pub fn parse(words: &[String]) -> Result<ReadCommand, String> {
        let Some((first, args)) = words.split_first() else {
            return Err(allowed());
        };
        let upper = first.trim().to_ascii_uppercase();
        let Some((name, _, n)) = ALLOWED.iter().find(|(n, _, _)| *n == upper) else {
            return Err(allowed());
        };
        if args.len() != *n || args.iter().any(|a| a.is_empty()) {
            return Err(allowed());
        }
        Ok(ReadCommand {
            name,
            args: args.to_vec(),
        })
    }

    /// `XLEN orders`.
    pub fn line(&self) -> String {
        std::iter::once(self.name.to_string())
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The command to send.
    pub fn cmd(&self) -> redis::Cmd {
        let mut c = redis::cmd(self.name);
        for a in &self.args {
            c.arg(a);
        }
        c
    }

    /// The number its answer holds: an integer, a numeric string, or (`XPENDING`'s summary)
    /// the first element; `Err` names what came instead.
    pub fn number(&self, v: &Value) -> Result<f64, String> {
        let v = match (self.name, v) {
            ("XPENDING", Value::Array(items)) => items
                .first()
                .ok_or_else(|| "XPENDING answered an empty array".to_string())?,
            _ => v,
        };
        match v {
            Value::Int(n) => Ok(*n as f64),
            Value::Double(f) => Ok(*f),
            Value::BulkString(b) => text_number(&String::from_utf8_lossy(b)),
            Value::SimpleString(s) => text_number(s),
            Value::Nil => Err(format!(
                "{} answered nil (the key does not exist)",
                self.line()
            )),
            other => Err(format!("{} answered {other:?}, not a number", self.name)),
        }
    }
}

fn text_number(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .ok_or_else(|| format!("the answer {:?} is not a number", crate::secret::cut(s, 40)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_reads_with_their_arguments_are_allowed() {
        let c = ReadCommand::parse(&words(&["xlen", "orders"])).unwrap();
        assert_eq!((c.name, c.line()), ("XLEN", "XLEN orders".to_string()));
        assert!(ReadCommand::parse(&words(&["XPENDING", "s", "g"])).is_ok());
        assert!(ReadCommand::parse(&words(&["DBSIZE"])).is_ok());
        for bad in [
            &["DEL", "orders"][..],
            &["SET", "k", "1"],
            &["EVAL", "return 1", "0"],
            &["XLEN"],
            &["XLEN", "a", "b"],
            &["XPENDING", "s", "g", "-", "+", "10"],
            &[],
        ] {
            let e = ReadCommand::parse(&words(bad)).unwrap_err();
            assert!(
                e.contains("[\"XLEN\", \"key\"]") && e.contains("no write"),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn answers_are_read_as_numbers() {
        let xlen = ReadCommand::parse(&words(&["XLEN", "s"])).unwrap();
        assert_eq!(xlen.number(&Value::Int(7)), Ok(7.0));
        let pending = ReadCommand::parse(&words(&["XPENDING", "s", "g"])).unwrap();
        let summary = Value::Array(vec![Value::Int(3), Value::Nil, Value::Nil, Value::Nil]);
        assert_eq!(pending.number(&summary), Ok(3.0));
        let get = ReadCommand::parse(&words(&["GET", "k"])).unwrap();
        assert_eq!(get.number(&Value::BulkString(b"12".to_vec())), Ok(12.0));
        assert!(get
            .number(&Value::Nil)
            .unwrap_err()
            .contains("does not exist"));
        assert!(get.number(&Value::BulkString(b"abc".to_vec())).is_err());
    }
}
