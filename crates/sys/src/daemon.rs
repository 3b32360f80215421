//! Leaving the terminal: standard output and error into a log file, and the classic
//! double-fork daemon (`flowlab serve --daemon`).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Points standard output and standard error at `log` (as `iperf3 --logfile` does), so
/// everything printed later lands there.
pub fn redirect_output(log: &File) -> io::Result<()> {
    for target in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        // SAFETY: dup2 on two open descriptors; `log` outlives the call, and the copy made
        // is owned by the process's standard streams from now on.
        if unsafe { libc::dup2(log.as_raw_fd(), target) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Detaches from the terminal: forks twice (the parent exits at once with status 0; the
/// middle child starts a new session so no terminal can be acquired again), changes to `/`,
/// and sets standard input, output and error to /dev/null, or output and error to `log`.
/// Returns in the grandchild, whose pid is then the daemon's.
///
/// Call it before starting any thread: only the calling thread survives a fork.
pub fn daemonize(log: Option<&File>) -> io::Result<()> {
    fork_and_leave_parent()?;
    // SAFETY: setsid has no preconditions; it fails only if already a group leader, which
    // a freshly forked child is not.
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    fork_and_leave_parent()?;
    std::env::set_current_dir("/")?;
    let null = File::options().read(true).write(true).open("/dev/null")?;
    // SAFETY: dup2 between open descriptors, as in `redirect_output`.
    if unsafe { libc::dup2(null.as_raw_fd(), libc::STDIN_FILENO) } < 0 {
        return Err(io::Error::last_os_error());
    }
    redirect_output(log.unwrap_or(&null))
}

/// Forks; the parent exits at once (status 0) without running destructors or atexit
/// handlers that belong to the child now, and the child returns.
fn fork_and_leave_parent() -> io::Result<()> {
    // SAFETY: the caller is single-threaded (documented on `daemonize`), so the child's
    // copy of the process is consistent.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(()),
        // SAFETY: _exit ends the parent without touching state the child shares.
        _ => unsafe { libc::_exit(0) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_follows_the_log_file_in_a_child() {
        // Redirecting this test process's own streams would hide the harness's output, so
        // the child of a fork redirects, writes and exits; the parent reads the file.
        let path = std::env::temp_dir().join(format!("flowlab-log-{}", std::process::id()));
        let log = File::create(&path).unwrap();
        // SAFETY: the child only redirects, writes and calls _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let line = b"to the log\n";
            let ok = redirect_output(&log).is_ok()
                // SAFETY: writes a live buffer to fd 1 (no locks: other threads are gone).
                && unsafe { libc::write(libc::STDOUT_FILENO, line.as_ptr().cast(), line.len()) }
                    == line.len() as isize;
            // SAFETY: ends the forked child without running the test harness's teardown.
            unsafe { libc::_exit(i32::from(!ok)) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked; `status` is a valid out pointer.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(status, 0);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "to the log\n");
        let _ = std::fs::remove_file(&path);
    }
}
