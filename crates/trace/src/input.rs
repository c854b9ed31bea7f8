//! Opening a trace file as lines of text: gzip and zstd files are decompressed on the way
//! (recognised by their first bytes, whatever their name), a line is at most
//! [`MAX_LINE_BYTES`], and a line that is not UTF-8 text or holds NUL bytes is an error
//! naming it.
//!
//! Decompression streams: memory does not grow with the file. gzip is read with flate2's
//! `MultiGzDecoder` (every member, as `zcat` reads `pigz` and `bgzip` output), zstd with
//! the `zstd` crate, which binds the reference libzstd: it decodes every frame of a file
//! (concatenated frames, as `pzstd` writes, and skippable frames), where the pure-Rust
//! `ruzstd`'s streaming decoder reads one frame.

use crate::TraceError;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek};
use std::path::Path;

/// The longest trace line read: far beyond any format's rows, short enough that a file
/// of one endless line is an error, not a memory hog.
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// How a trace file is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    /// Recognises a compressed file by its first bytes (RFC 1952's gzip magic, RFC 8878's
    /// zstd frame magic).
    pub fn of_magic(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }
}

/// Opens `path` for reading if it is a regular file. A trace is read twice (once to check
/// it, once to replay it), which a pipe, FIFO or device cannot give: those are refused
/// before they are opened (opening a FIFO would wait for a writer).
pub fn open_regular(path: &Path, origin: &str) -> Result<File, TraceError> {
    let io = |source| TraceError::Io {
        origin: origin.to_string(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file (a pipe, FIFO, socket or device)"
        };
        return Err(TraceError::Format {
            origin: origin.to_string(),
            msg: format!("{what}: a trace is read twice (to check it, then to replay it), so it must be a file; save it first (e.g. `cat > trace.csv`)"),
        });
    }
    File::open(path).map_err(io)
}

/// Opens the trace at `path` (named `origin` in errors) as lines, decompressing it if its
/// first bytes say it is gzip or zstd.
pub fn open_lines(path: &Path, origin: &str) -> Result<LineReader, TraceError> {
    let io = |source| TraceError::Io {
        origin: origin.to_string(),
        source,
    };
    let mut file = open_regular(path, origin)?;
    let mut head = [0u8; 4];
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..]).map_err(io)? {
            0 => break,
            n => got += n,
        }
    }
    file.rewind().map_err(io)?;
    let reader: Box<dyn BufRead + Send> = match Compression::of_magic(&head[..got]) {
        Compression::None => Box::new(BufReader::with_capacity(1 << 16, file)),
        Compression::Gzip => Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 16, file)),
        )),
        Compression::Zstd => Box::new(BufReader::with_capacity(
            1 << 16,
            zstd::stream::read::Decoder::new(file).map_err(io)?,
        )),
    };
    Ok(LineReader {
        origin: origin.to_string(),
        reader,
        buf: Vec::new(),
        line_no: 0,
    })
}

/// Where a parser's lines come from: a file being read ([`LineReader`]) or text in memory
/// ([`TextLines`]).
pub trait LineSource {
    /// The next line (without its end), `None` at the end.
    fn next_line(&mut self) -> Option<Result<&str, TraceError>>;
    /// The number of the line last read (from 1; 0 before the first).
    fn line_no(&self) -> usize;
}

impl LineSource for LineReader {
    fn next_line(&mut self) -> Option<Result<&str, TraceError>> {
        LineReader::next_line(self)
    }
    fn line_no(&self) -> usize {
        LineReader::line_no(self)
    }
}

/// The lines of a text in memory.
pub struct TextLines<'a> {
    lines: std::str::Lines<'a>,
    line_no: usize,
}

impl<'a> TextLines<'a> {
    pub fn new(text: &'a str) -> TextLines<'a> {
        TextLines {
            lines: text.lines(),
            line_no: 0,
        }
    }
}

impl LineSource for TextLines<'_> {
    fn next_line(&mut self) -> Option<Result<&str, TraceError>> {
        let line = self.lines.next()?;
        self.line_no += 1;
        Some(Ok(line))
    }
    fn line_no(&self) -> usize {
        self.line_no
    }
}

/// A file's lines, read into one reused buffer.
pub struct LineReader {
    origin: String,
    reader: Box<dyn BufRead + Send>,
    buf: Vec<u8>,
    /// The number of the line last read (from 1).
    line_no: usize,
}

impl LineReader {
    /// The number of the line last read (from 1; 0 before the first).
    pub fn line_no(&self) -> usize {
        self.line_no
    }

    /// The next line (without its end), `None` at the end of the file. A line longer than
    /// [`MAX_LINE_BYTES`], not UTF-8, or holding a NUL byte is an error naming it.
    pub fn next_line(&mut self) -> Option<Result<&str, TraceError>> {
        self.buf.clear();
        let limit = MAX_LINE_BYTES as u64 + 2; // the line and its "\r\n"
        let n = match (&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut self.buf)
        {
            Ok(0) => return None,
            Ok(n) => n,
            Err(source) => {
                return Some(Err(TraceError::Io {
                    origin: self.origin.clone(),
                    source,
                }))
            }
        };
        self.line_no += 1;
        let error = |msg: String| {
            Some(Err(TraceError::Parse {
                origin: self.origin.clone(),
                line: self.line_no,
                msg,
            }))
        };
        if n as u64 == limit && !self.buf.ends_with(b"\n") {
            return error(long_line(&self.buf));
        }
        let bytes = trim_line_end(&self.buf);
        let Ok(line) = std::str::from_utf8(bytes) else {
            return error("not UTF-8 text".into());
        };
        // A byte-order mark (spreadsheets write one) is not part of the first line.
        let line = if self.line_no == 1 {
            line.strip_prefix('\u{feff}').unwrap_or(line)
        } else {
            line
        };
        if line.contains('\0') {
            return error(
                "NUL bytes: not a text trace (an archive such as a .tgz? unpack it first, e.g. `tar xzf FILE`)"
                    .into(),
            );
        }
        Some(Ok(line))
    }
}

fn trim_line_end(mut b: &[u8]) -> &[u8] {
    while let [rest @ .., b'\n' | b'\r'] = b {
        b = rest;
    }
    b
}

/// The message for a line longer than [`MAX_LINE_BYTES`], quoting its start.
pub(crate) fn long_line(start: &[u8]) -> String {
    let head = String::from_utf8_lossy(&start[..start.len().min(40)]).into_owned();
    format!("the line is longer than {MAX_LINE_BYTES} bytes (it starts {head:?}); is this a trace?")
}

/// Reads the whole trace at `path` into one string (decompressing it), line by line so
/// that a file of one endless line is an error as soon as the line passes the limit.
pub fn read_text(path: &Path, origin: &str) -> Result<String, TraceError> {
    let mut lines = open_lines(path, origin)?;
    let mut text = String::new();
    while let Some(line) = lines.next_line() {
        text.push_str(line?);
        text.push('\n');
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lines_of(bytes: &[u8]) -> Result<Vec<String>, TraceError> {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(bytes).unwrap();
        let mut r = open_lines(f.path(), "t")?;
        let mut out = Vec::new();
        while let Some(l) = r.next_line() {
            out.push(l?.to_string());
        }
        Ok(out)
    }

    #[test]
    fn plain_gzip_and_zstd_read_the_same_lines() {
        let text = b"first line\r\nsecond\n\nlast without end";
        let want = vec!["first line", "second", "", "last without end"];
        assert_eq!(lines_of(text).unwrap(), want);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(text).unwrap();
        let gz = gz.finish().unwrap();
        assert_eq!(Compression::of_magic(&gz), Compression::Gzip);
        assert_eq!(lines_of(&gz).unwrap(), want);
        // Two gzip members, as pigz and bgzip write: both are read.
        let mut two = gz.clone();
        let mut gz2 = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz2.write_all(b"\nmore").unwrap();
        two.extend(gz2.finish().unwrap());
        assert_eq!(lines_of(&two).unwrap().last().unwrap(), "more");
        let zst = zstd::stream::encode_all(&text[..], 1).unwrap();
        assert_eq!(Compression::of_magic(&zst), Compression::Zstd);
        assert_eq!(lines_of(&zst).unwrap(), want);
        // Two zstd frames, as pzstd writes.
        let mut two = zst.clone();
        two.extend(zstd::stream::encode_all(&b"\nmore"[..], 1).unwrap());
        assert_eq!(lines_of(&two).unwrap().last().unwrap(), "more");
    }

    #[test]
    fn bad_input_is_an_error_naming_the_line() {
        let e = lines_of(b"ok\n\xff\xfe\n").unwrap_err().to_string();
        assert_eq!(e, "t:2: not UTF-8 text");
        let e = lines_of(b"ok\nab\0cd\n").unwrap_err().to_string();
        assert!(e.starts_with("t:2: NUL bytes") && e.contains("tar"), "{e}");
        let long = vec![b'x'; MAX_LINE_BYTES + 10];
        let e = lines_of(&long).unwrap_err().to_string();
        assert!(e.starts_with("t:1: the line is longer"), "{e}");
        // A truncated gzip file is a read error, not a panic.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&[b'a'; 10_000]).unwrap();
        let gz = gz.finish().unwrap();
        let e = lines_of(&gz[..gz.len() / 2]).unwrap_err().to_string();
        assert!(e.starts_with("cannot read t:"), "{e}");
        let zst = zstd::stream::encode_all(&[b'a'; 10_000][..], 1).unwrap();
        let e = lines_of(&zst[..zst.len() / 2]).unwrap_err().to_string();
        assert!(e.starts_with("cannot read t:"), "{e}");
    }
}
