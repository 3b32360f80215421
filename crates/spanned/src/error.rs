use std::fmt;

/// A file that failed to load: one line of message and, where known, the line it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    /// 1-based line, when the error is about a place in the file.
    pub line: Option<usize>,
    /// One line, no trailing period.
    pub message: String,
    file: Option<String>,
}

impl FileError {
    /// An error about `line` (or the whole file); line breaks in `message` become spaces, so
    /// the error always prints as one line.
    pub fn new(line: Option<usize>, message: impl Into<String>) -> Self {
        let message: String = message.into();
        FileError {
            line,
            message: message.trim().replace(['\r', '\n'], " "),
            file: None,
        }
    }

    /// An error about line `line`.
    pub fn at(line: usize, message: impl Into<String>) -> Self {
        Self::new(Some(line), message)
    }

    /// The same error, displayed as `FILE:LINE: message`.
    pub fn with_file(mut self, name: &str) -> Self {
        self.file = Some(name.to_string());
        self
    }

    /// The same error with `note` appended to its message, e.g. which sweep point it is at.
    pub fn note(mut self, note: impl fmt::Display) -> Self {
        self.message = format!("{} {note}", self.message)
            .trim()
            .replace(['\r', '\n'], " ");
        self
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{file}:{line}: {}", self.message),
            (Some(file), None) => write!(f, "{file}: {}", self.message),
            (None, Some(line)) => write!(f, "line {line}: {}", self.message),
            (None, None) => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for FileError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_with_and_without_file_and_line() {
        let e = FileError::at(3, "rate: bad\nvalue");
        assert_eq!(e.to_string(), "line 3: rate: bad value");
        assert_eq!(
            e.clone().with_file("x.toml").to_string(),
            "x.toml:3: rate: bad value"
        );
        let e = FileError::new(None, "no [[flow]]");
        assert_eq!(e.to_string(), "no [[flow]]");
        assert_eq!(e.with_file("x.toml").to_string(), "x.toml: no [[flow]]");
        let e = FileError::at(1, "bad").note("(at sweep point a=1)");
        assert_eq!(e.message, "bad (at sweep point a=1)");
    }
}
