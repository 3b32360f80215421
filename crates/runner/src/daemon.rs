//! Where a long-running flowlab prints and who can find it: `--logfile`, `serve --daemon` and
//! `--pidfile`.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// Appends everything printed from now on to `path` (`--logfile`, as iperf3's).
pub fn log_to(path: &Path) -> anyhow::Result<()> {
    let file = open_log(path)?;
    flowlab_sys::daemon::redirect_output(&file)
        .with_context(|| format!("cannot log to {}", path.display()))
}

fn open_log(path: &Path) -> anyhow::Result<File> {
    File::options()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open log file {}", path.display()))
}

/// Logs to `logfile`, goes into the background if `daemon`, and writes `pidfile` (claimed
/// before, so a live agent's is refused while the terminal can still say so). Call it
/// before starting any thread.
pub fn detach(
    daemon: bool,
    logfile: Option<&Path>,
    pidfile: Option<&PidFile>,
) -> anyhow::Result<()> {
    let log = logfile.map(open_log).transpose()?;
    if daemon {
        flowlab_sys::daemon::daemonize(log.as_ref()).context("cannot run in the background")?;
    } else if let Some(log) = &log {
        flowlab_sys::daemon::redirect_output(log).context("cannot log to the log file")?;
    }
    pidfile.map_or(Ok(()), PidFile::write)
}

/// A file naming this process's id while it runs (`--pidfile`); removed on drop.
#[derive(Debug)]
pub struct PidFile(PathBuf);

impl PidFile {
    /// Takes `path` unless it names a process still running; the daemon's working directory
    /// is `/`, so the path is made absolute first. [`detach`] writes it.
    pub fn claim(path: &Path) -> anyhow::Result<PidFile> {
        let path = std::path::absolute(path)
            .with_context(|| format!("invalid pid file {}", path.display()))?;
        let running = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
            .filter(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if let Some(pid) = running {
            anyhow::bail!(
                "pid file {} names process {pid}, which is still running",
                path.display()
            );
        }
        Ok(PidFile(path))
    }

    fn write(&self) -> anyhow::Result<()> {
        std::fs::write(&self.0, format!("{}\n", std::process::id()))
            .with_context(|| format!("cannot write pid file {}", self.0.display()))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_file_is_refused_while_its_process_runs_and_removed_after() {
        let path = std::env::temp_dir().join(format!("flowlab-pid-{}", std::process::id()));
        let held = PidFile::claim(&path).unwrap();
        detach(false, None, Some(&held)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{}\n", std::process::id()));
        let e = PidFile::claim(&path).unwrap_err();
        assert!(e.to_string().ends_with("which is still running"), "{e}");
        drop(held);
        assert!(!path.exists());
        // A stale file (no such process) is taken over.
        std::fs::write(&path, "4294967295\n").unwrap();
        let taken = PidFile::claim(&path).unwrap();
        taken.write().unwrap();
        drop(taken);
        assert!(!path.exists());
    }
}
