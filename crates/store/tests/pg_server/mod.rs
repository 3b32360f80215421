//! A throwaway PostgreSQL server for tests: `initdb` into a temporary directory, listening only
//! on a Unix socket there (no TCP port to collide with), stopped and removed when dropped.
//! PostgreSQL refuses to run as root, and tests run as root, so the server then runs as the
//! `postgres` user (Debian's package makes it), else `nobody`. Shared by the store's tests and
//! the CLI's (`#[path]`).

// Each test binary uses only part of it.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct PgServer {
    dir: PathBuf,
    bin: PathBuf,
    /// Whom the server runs as, when this process is root.
    user: Option<&'static str>,
}

/// Where PostgreSQL's programs are: `$FLOWLAB_PG_BIN`, Debian's newest
/// `/usr/lib/postgresql/N/bin`, or `initdb`'s directory on `PATH`.
fn bin_dir() -> Option<PathBuf> {
    let has_initdb = |d: &Path| d.join("initdb").is_file();
    if let Some(d) = std::env::var_os("FLOWLAB_PG_BIN") {
        return Some(PathBuf::from(d)).filter(|d| has_initdb(d));
    }
    let mut debian: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|d| has_initdb(d))
        .collect();
    debian.sort_by_key(|d| {
        let version = d
            .parent()
            .and_then(|v| v.file_name())
            .map(|v| v.to_string_lossy().into_owned());
        version.and_then(|v| v.parse::<u32>().ok()).unwrap_or(0)
    });
    if let Some(d) = debian.pop() {
        return Some(d);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find(|d| has_initdb(d))
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// The uid and gid of `user`, from /etc/passwd.
fn ids(user: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.first() == Some(&user))
            .then(|| Some((f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?)))?
    })
}

fn check(what: &str, o: Output) {
    assert!(
        o.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

impl PgServer {
    /// Starts a server for the test `name`, or `None`, with a line saying so, where PostgreSQL
    /// is not installed (`apt-get install postgresql`, as .ci/run does).
    pub fn start(name: &str) -> Option<PgServer> {
        let Some(bin) = bin_dir() else {
            eprintln!("skipped: PostgreSQL's initdb not found (install Debian's postgresql, or set FLOWLAB_PG_BIN)");
            return None;
        };
        let user = is_root()
            .then(|| {
                ["postgres", "nobody"]
                    .into_iter()
                    .find(|u| ids(u).is_some())
            })
            .flatten();
        let dir = std::env::temp_dir().join(format!("flowlab-pg-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        if let Some((uid, gid)) = user.and_then(ids) {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).unwrap();
        }
        let server = PgServer { dir, bin, user };
        let data = server.dir.join("data");
        check(
            "initdb",
            server.run_as_owner(
                "initdb",
                &[
                    "-D",
                    data.to_str().unwrap(),
                    "-U",
                    "flowlab",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "--no-sync",
                    "--no-instructions",
                ],
            ),
        );
        // Only the Unix socket; no fsync: a test's data need not survive a crash.
        let options = format!(
            "-k {} -c listen_addresses='' -F -c max_connections=40 -c shared_buffers=16MB",
            server.dir.display()
        );
        check(
            "pg_ctl start",
            server.run_as_owner(
                "pg_ctl",
                &[
                    "-D",
                    data.to_str().unwrap(),
                    "-l",
                    server.dir.join("log").to_str().unwrap(),
                    "-w",
                    "-t",
                    "60",
                    "-o",
                    &options,
                    "start",
                ],
            ),
        );
        Some(server)
    }

    /// A program of PostgreSQL's, run as the server's owner.
    fn run_as_owner(&self, program: &str, args: &[&str]) -> Output {
        let exe = self.bin.join(program);
        let mut cmd = match self.user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        cmd.args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"))
    }

    /// Creates the database `name` and gives its URL.
    pub fn database(&self, name: &str) -> String {
        let socket_dir = self.dir.to_str().unwrap();
        let o = Command::new(self.bin.join("createdb"))
            .args(["-h", socket_dir, "-U", "flowlab", name])
            .output()
            .expect("createdb");
        check("createdb", o);
        format!("postgres://flowlab@localhost/{name}?host={socket_dir}")
    }

    /// Runs `sql` in database `name` with psql, its output unaligned without headers.
    pub fn psql(&self, name: &str, sql: &str) -> Output {
        Command::new(self.bin.join("psql"))
            .args([
                "-h",
                self.dir.to_str().unwrap(),
                "-U",
                "flowlab",
                "-d",
                name,
            ])
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .output()
            .expect("psql")
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = self.run_as_owner(
            "pg_ctl",
            &["-D", data.to_str().unwrap(), "-m", "immediate", "stop"],
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
