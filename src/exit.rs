//! The process's exit codes: one enum, with the stable meanings a pipeline reads
//! (docs/src/gate/overview.md). Every command returns one; `main` hands its
//! [`Exit::code`] to the operating system.

use serde::{Serialize, Serializer};

/// How a command ended, as its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done; every threshold held, every check passed.
    Success = 0,
    /// 1: judged and failed: a threshold breached or not verified, a defect missed, a
    /// `--fail-on` metric worse, an answer no rule classified.
    Failed = 1,
    /// 2: bad usage or input, or a run that stopped before anything could be judged.
    Error = 2,
    /// 3: the target shop, the database, Redis or the oracle could not be reached; for
    /// `diagnose`, also: too little of the shop could be tested to say it is sound.
    Unreachable = 3,
}

impl Exit {
    /// The number the process exits with.
    pub const fn code(self) -> i32 {
        self as i32
    }

    /// [`Exit::Success`] when `passed`, else [`Exit::Failed`].
    pub const fn judged(passed: bool) -> Exit {
        if passed {
            Exit::Success
        } else {
            Exit::Failed
        }
    }
}

/// `--json`'s `exit_code`: the number.
impl Serialize for Exit {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i32(self.code())
    }
}

impl From<Exit> for serde_json::Value {
    fn from(e: Exit) -> Self {
        e.code().into()
    }
}

impl PartialEq<i32> for Exit {
    fn eq(&self, other: &i32) -> bool {
        self.code() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_exit_is_its_documented_number() {
        let codes = [Exit::Success, Exit::Failed, Exit::Error, Exit::Unreachable].map(Exit::code);
        assert_eq!(codes, [0, 1, 2, 3]);
        assert_eq!(Exit::judged(true), Exit::Success);
        assert_eq!(Exit::judged(false), 1);
        assert_eq!(
            serde_json::json!({ "exit_code": Exit::Error }),
            serde_json::json!({ "exit_code": 2 })
        );
    }
}
