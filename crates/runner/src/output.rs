//! Printing a finished result: its JSON written where asked and shown as JSON or text, and the
//! exit code of a run that ended early.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;

/// Writes a result's JSON to `output`, if given, then prints it: as JSON, or as `human` text.
pub fn print_result(
    json: &str,
    output: Option<&Path>,
    as_json: bool,
    human: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    if let Some(path) = output {
        std::fs::write(path, format!("{json}\n"))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut stdout = std::io::stdout().lock();
    match as_json {
        true => writeln!(stdout, "{json}")?,
        false => write!(stdout, "{}", human())?,
    }
    stdout.flush()?;
    Ok(())
}

/// `text` with every line prefixed by `title` and ": " (iperf3's `--title`), when given.
pub fn titled(title: Option<&str>, text: String) -> String {
    match title {
        None => text,
        Some(title) => text.lines().map(|l| format!("{title}: {l}\n")).collect(),
    }
}

/// The exit code of a `what` whose results were printed: an error (1) or an interruption
/// (130) said in one line on stderr; `None` when it ran to its end.
pub fn conclude(error: Option<&str>, interrupted: bool, what: &str) -> Option<ExitCode> {
    if let Some(e) = error {
        eprintln!("flowlab: error: {e} (results above cover the {what} up to then)");
        return Some(ExitCode::from(1));
    }
    if interrupted {
        eprintln!("flowlab: interrupted: results above cover the {what} up to then");
        return Some(ExitCode::from(130));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_prefixes_every_line() {
        assert_eq!(titled(None, "a\nb\n".into()), "a\nb\n");
        assert_eq!(
            titled(Some("lab 3"), "a\nb\n".into()),
            "lab 3: a\nlab 3: b\n"
        );
    }
}
