//! File paths kept as text and as C strings at once. SQLite names files by
//! NUL-terminated bytes, which this VFS requires to be UTF-8 (xOpen and xDelete refuse
//! others). A [`FilePath`] keeps the name with its terminating NUL, so every system call
//! on it (`open`, `stat`, `unlink`) takes it as it is, and [`with_c_prefix`] gives a
//! name derived from one — a journal's database, a file's directory — its NUL on the
//! stack: a rollback commit opens, stats, syncs the directory of and deletes its journal
//! with one copy of its name, the one its `File` keeps (os_unix.c copies such derived
//! names into a stack buffer too).

use std::ffi::{CStr, CString};

/// A file's name: UTF-8 text without a NUL inside, stored with a terminating NUL.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct FilePath {
    /// The text and one NUL after it (the only NUL).
    with_nul: Box<str>,
}

impl FilePath {
    /// The name SQLite passed, copied once; `None` when it is not UTF-8.
    pub(crate) fn from_c(name: &CStr) -> Option<FilePath> {
        let text = name.to_str().ok()?;
        Some(FilePath::terminated(text))
    }

    /// `text` as a path; `None` when it holds a NUL (no system call could name it).
    pub(crate) fn new(text: &str) -> Option<FilePath> {
        if text.as_bytes().contains(&0) {
            return None;
        }
        Some(FilePath::terminated(text))
    }

    /// `text` (no NUL inside: the constructors check) with its NUL appended.
    fn terminated(text: &str) -> FilePath {
        let mut with_nul = String::with_capacity(text.len() + 1);
        with_nul.push_str(text);
        with_nul.push('\0');
        FilePath {
            with_nul: with_nul.into_boxed_str(),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.with_nul[..self.with_nul.len() - 1]
    }

    pub(crate) fn as_c_str(&self) -> &CStr {
        let bytes = self.with_nul.as_bytes();
        debug_assert_eq!(bytes.iter().position(|&b| b == 0), Some(bytes.len() - 1));
        // SAFETY: the constructors store text without a NUL and append exactly one, so
        // `bytes` ends with the only NUL it holds.
        unsafe { CStr::from_bytes_with_nul_unchecked(bytes) }
    }
}

impl std::ops::Deref for FilePath {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for FilePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

/// Names shorter than this get their NUL on the stack in [`with_c_prefix`]; longer ones
/// in an allocation.
const STACK_PATH_BYTES: usize = 256;

/// Runs `f` on the first `len_bytes` bytes of `path` as a C string: `path` itself when
/// that is all of it, else a NUL-terminated copy, on the stack when it is short.
///
/// # Panics
/// If `len_bytes` is past the end of `path`.
pub(crate) fn with_c_prefix<R>(path: &CStr, len_bytes: usize, f: impl FnOnce(&CStr) -> R) -> R {
    let bytes = path.to_bytes();
    assert!(
        len_bytes <= bytes.len(),
        "a prefix past the end of the path"
    );
    if len_bytes == bytes.len() {
        return f(path);
    }
    let prefix = &bytes[..len_bytes];
    if len_bytes < STACK_PATH_BYTES {
        let mut buffer = [0u8; STACK_PATH_BYTES];
        buffer[..len_bytes].copy_from_slice(prefix);
        // SAFETY: `prefix` is part of a C string, so it holds no NUL; the byte after it
        // is the buffer's zero, so `buffer[..=len_bytes]` ends with its only NUL.
        let c_prefix = unsafe { CStr::from_bytes_with_nul_unchecked(&buffer[..=len_bytes]) };
        f(c_prefix)
    } else {
        // A part of a C string has no NUL inside.
        let c_prefix = CString::new(prefix).expect("a C string's prefix holds no NUL");
        f(&c_prefix)
    }
}

/// The length of the directory part of `path` as os_unix.c's `openDirectory` takes it:
/// everything before the last `/`, `None` for a name at the root (`/`) or without one
/// (`.`), which [`directory_name`] names.
pub(crate) fn directory_len(path: &[u8]) -> Option<usize> {
    match path.iter().rposition(|&b| b == b'/') {
        Some(0) | None => None,
        Some(end) => Some(end),
    }
}

/// The directory of a name [`directory_len`] gives no length for: `/` for a name at the
/// root, `.` for one without a `/`.
pub(crate) fn directory_name(path: &[u8]) -> &'static CStr {
    if path.first() == Some(&b'/') {
        c"/"
    } else {
        c"."
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_its_text_and_its_c_string() {
        let path = FilePath::new("/d/main.db-journal").unwrap();
        assert_eq!(path.as_str(), "/d/main.db-journal");
        assert_eq!(path.as_c_str(), c"/d/main.db-journal");
        assert_eq!(&*path, "/d/main.db-journal");
        assert_eq!(format!("{path:?}"), "\"/d/main.db-journal\"");
        assert_eq!(FilePath::from_c(c"/d/x"), FilePath::new("/d/x"));
        assert_eq!(FilePath::new(""), FilePath::from_c(c""));
        assert_eq!(FilePath::new("").unwrap().as_c_str(), c"");
    }

    #[test]
    fn a_nul_or_a_non_utf8_name_is_no_path() {
        assert_eq!(FilePath::new("a\0b"), None);
        assert_eq!(FilePath::from_c(c"caf\xe9"), None);
    }

    #[test]
    fn a_prefix_is_nul_terminated_short_or_long() {
        let seen = |path: &CStr, len: usize| with_c_prefix(path, len, |c| c.to_owned());
        assert_eq!(seen(c"/d/main.db-journal", 10), c"/d/main.db".to_owned());
        assert_eq!(seen(c"/d/main.db", 10), c"/d/main.db".to_owned());
        assert_eq!(seen(c"/d/main.db", 0), c"".to_owned());
        for len in [STACK_PATH_BYTES - 1, STACK_PATH_BYTES, STACK_PATH_BYTES + 7] {
            let long = CString::new("x".repeat(len + 5)).unwrap();
            assert_eq!(
                seen(&long, len),
                CString::new("x".repeat(len)).unwrap(),
                "{len} bytes"
            );
        }
    }

    #[test]
    #[should_panic(expected = "past the end")]
    fn a_prefix_past_the_end_is_refused() {
        with_c_prefix(c"/d", 3, |_| ());
    }

    #[test]
    fn the_directory_is_as_open_directory_takes_it() {
        assert_eq!(directory_len(b"/d/main.db"), Some(2));
        assert_eq!(directory_len(b"a/b/c"), Some(3));
        assert_eq!(directory_len(b"/main.db"), None);
        assert_eq!(directory_name(b"/main.db"), c"/");
        assert_eq!(directory_len(b"main.db"), None);
        assert_eq!(directory_name(b"main.db"), c".");
    }
}
