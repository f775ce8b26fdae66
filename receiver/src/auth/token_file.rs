//! The token file of a `bearertokenauth` extension (`filename`): one token per line, and the
//! poll that notices when it changes.

use std::io;
use std::path::{Path, PathBuf};

/// A token file that could not be read, or that holds no token.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The configured `filename`.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The file has no non-blank line.
    #[error("{} holds no token", path.display())]
    Empty {
        /// The configured `filename`.
        path: PathBuf,
    },
}

/// The tokens of a token file's text: each line trimmed, blank lines skipped.
pub(crate) fn parse_tokens(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// Reads the tokens of `path`; a file without a token is an error.
pub(crate) fn read_tokens(path: &Path) -> Result<(Vec<u8>, Vec<String>), TokenFileError> {
    let bytes = std::fs::read(path).map_err(|source| TokenFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let tokens = parse_tokens(&String::from_utf8_lossy(&bytes));
    if tokens.is_empty() {
        return Err(TokenFileError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok((bytes, tokens))
}

/// What a poll of the token file found.
#[derive(Debug)]
pub(crate) enum Poll {
    /// The same content as last time.
    Unchanged,
    /// New content with these tokens (maybe none).
    Changed(Vec<String>),
    /// The file cannot be read now (being replaced, removed): keep the tokens.
    Unreadable(io::Error),
}

/// The last content seen of a token file.
#[derive(Debug)]
pub(crate) struct Watched {
    path: PathBuf,
    last: Vec<u8>,
}

impl Watched {
    /// Watches `path`, whose content was `last` when its tokens were read.
    pub(crate) fn new(path: PathBuf, last: Vec<u8>) -> Self {
        Watched { path, last }
    }

    /// The watched path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the file again and compares it with the last content.
    pub(crate) async fn poll(&mut self) -> Poll {
        match tokio::fs::read(&self.path).await {
            Err(e) => Poll::Unreadable(e),
            Ok(bytes) if bytes == self.last => Poll::Unchanged,
            Ok(bytes) => {
                let tokens = parse_tokens(&String::from_utf8_lossy(&bytes));
                self.last = bytes;
                Poll::Changed(tokens)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_tokens() {
        assert_eq!(parse_tokens("a\n\n  b \r\n"), ["a", "b"]);
        assert!(parse_tokens(" \n").is_empty());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        assert!(matches!(read_tokens(&p), Err(TokenFileError::Read { .. })));
        std::fs::write(&p, "\n").unwrap();
        let e = read_tokens(&p).unwrap_err();
        assert_eq!(e.to_string(), format!("{} holds no token", p.display()));
        std::fs::write(&p, "x\ny\n").unwrap();
        assert_eq!(read_tokens(&p).unwrap().1, ["x", "y"]);
    }

    #[tokio::test]
    async fn poll_sees_changes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, "x\n").unwrap();
        let (bytes, _) = read_tokens(&p).unwrap();
        let mut w = Watched::new(p.clone(), bytes);
        assert!(matches!(w.poll().await, Poll::Unchanged));
        std::fs::write(&p, "y\n").unwrap();
        assert!(matches!(w.poll().await, Poll::Changed(t) if t == ["y"]));
        assert!(matches!(w.poll().await, Poll::Unchanged));
        std::fs::remove_file(&p).unwrap();
        assert!(matches!(w.poll().await, Poll::Unreadable(_)));
    }
}
