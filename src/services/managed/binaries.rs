//! Where the server binaries are: `PATH` first, then the usual places the packages put them
//! (`/usr/lib/postgresql/*/bin`, Homebrew's `opt/*/bin`, `/usr/sbin`, ...). The usual places
//! can be replaced with `OVERSELL_SERVER_DIRS` (a `:`-separated list; empty: none), which is
//! how a test hides the machine's servers.

use super::ServerKind;
use std::path::{Path, PathBuf};

/// The environment variable that replaces the built-in list of usual places.
pub const SERVER_DIRS_ENV: &str = "OVERSELL_SERVER_DIRS";

/// The binaries one kind of server needs, found together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// `initdb` and `postgres` from one directory (one PostgreSQL version).
    Postgres { initdb: PathBuf, postgres: PathBuf },
    /// The MariaDB/MySQL server, and the installer of a fresh data directory
    /// (`mariadb-install-db` / `mysql_install_db`; `None`: Oracle MySQL's
    /// `mysqld --initialize-insecure`).
    Mysql {
        server: PathBuf,
        install: Option<PathBuf>,
    },
    /// `redis-server`.
    Redis { server: PathBuf },
}

impl Found {
    /// The server binary itself (what runs as the server process).
    pub fn server(&self) -> &Path {
        match self {
            Found::Postgres { postgres, .. } => postgres,
            Found::Mysql { server, .. } => server,
            Found::Redis { server } => server,
        }
    }

    /// The directory of the server binary (where a PostgreSQL's `pg_basebackup` and
    /// `pg_ctl` of the same version are).
    pub fn bin_dir(&self) -> &Path {
        self.server().parent().unwrap_or(Path::new("/"))
    }
}

/// Finds the binaries of `kind`, or `None`.
pub fn find(kind: ServerKind) -> Option<Found> {
    let dirs = search_dirs();
    match kind {
        ServerKind::Postgres => dirs.iter().find_map(|d| {
            let (initdb, postgres) = (d.join("initdb"), d.join("postgres"));
            (is_exe(&initdb) && is_exe(&postgres)).then_some(Found::Postgres { initdb, postgres })
        }),
        ServerKind::Mysql => {
            let server = first_of(&dirs, &["mariadbd", "mysqld"])?;
            let install = first_of(&dirs, &["mariadb-install-db", "mysql_install_db"]);
            Some(Found::Mysql { server, install })
        }
        ServerKind::Redis => {
            first_of(&dirs, &["redis-server"]).map(|server| Found::Redis { server })
        }
    }
}

/// The first of `names` in the first directory that has one.
fn first_of(dirs: &[PathBuf], names: &[&str]) -> Option<PathBuf> {
    dirs.iter()
        .find_map(|d| names.iter().map(|n| d.join(n)).find(|p| is_exe(p)))
}

fn is_exe(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `PATH`'s directories, then the usual places (or `OVERSELL_SERVER_DIRS`).
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    match std::env::var_os(SERVER_DIRS_ENV) {
        Some(v) => dirs.extend(std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty())),
        None => dirs.extend(usual_places()),
    }
    dirs
}

/// Where Debian, Homebrew and the MySQL installer put the servers, newest PostgreSQL first.
fn usual_places() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for base in [
        "/usr/lib/postgresql",
        "/usr/local/opt",
        "/opt/homebrew/opt",
        "/usr/local/pgsql",
    ] {
        let mut versions: Vec<PathBuf> = std::fs::read_dir(base)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| {
                        base == "/usr/lib/postgresql"
                            || p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                                n.starts_with("postgresql")
                                    || n.starts_with("mariadb")
                                    || n.starts_with("mysql")
                                    || n.starts_with("redis")
                            })
                    })
                    .map(|p| p.join("bin"))
                    .collect()
            })
            .unwrap_or_default();
        versions.sort_by_key(|p| std::cmp::Reverse(version_key(p)));
        dirs.extend(versions);
    }
    dirs.extend(
        [
            "/usr/local/pgsql/bin",
            "/usr/sbin",
            "/usr/local/sbin",
            "/usr/local/bin",
            "/opt/homebrew/bin",
            "/opt/homebrew/sbin",
            "/usr/local/mysql/bin",
            "/usr/bin",
        ]
        .map(PathBuf::from),
    );
    dirs
}

/// `/usr/lib/postgresql/16/bin` → 16 (so 16 sorts above 9.6).
fn version_key(p: &Path) -> (u32, u32) {
    let name = p
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("");
    let digits: String = name
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .to_string();
    let mut parts = digits.split(['.', '@']).map(|s| s.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// What to install for `kind`: the Debian and Homebrew packages.
pub fn packages(kind: ServerKind) -> &'static str {
    match kind {
        ServerKind::Postgres => {
            "Debian/Ubuntu: `apt-get install postgresql`; Homebrew: `brew install postgresql@16`"
        }
        ServerKind::Mysql => {
            "Debian/Ubuntu: `apt-get install mariadb-server`; Homebrew: `brew install mariadb`"
        }
        ServerKind::Redis => {
            "Debian/Ubuntu: `apt-get install redis-server`; Homebrew: `brew install redis`"
        }
    }
}

/// The binaries looked for, for a message.
pub fn looked_for(kind: ServerKind) -> &'static str {
    match kind {
        ServerKind::Postgres => "initdb and postgres",
        ServerKind::Mysql => "mariadbd or mysqld",
        ServerKind::Redis => "redis-server",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_postgresql_versions_sort_first() {
        let mut v = [
            PathBuf::from("/usr/lib/postgresql/9.6/bin"),
            PathBuf::from("/usr/lib/postgresql/16/bin"),
            PathBuf::from("/usr/lib/postgresql/13/bin"),
        ];
        v.sort_by_key(|p| std::cmp::Reverse(version_key(p)));
        assert_eq!(v[0], PathBuf::from("/usr/lib/postgresql/16/bin"));
        assert_eq!(v[2], PathBuf::from("/usr/lib/postgresql/9.6/bin"));
        assert_eq!(
            version_key(Path::new("/opt/homebrew/opt/postgresql@15/bin")),
            (15, 0)
        );
    }
}
