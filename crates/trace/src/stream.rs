//! Traces read a request at a time from their file, so a replay's memory does not grow
//! with the trace's length.
//!
//! [`TraceFile::open`] reads the file once to learn what a replay needs before it starts
//! (how many requests, which streams, the highest byte, whether it is timestamped) and to
//! check it (an archive file's devices, a native file's header, open-loop times that go
//! back);
//! [`TraceFile::requests`] then reads it again, one request at a time, as often as asked (a
//! replay with `--repeat` reads it once per pass). [`replay_file`] replays it open or closed
//! loop.
//!
//! Native traces and the archive formats (MSR Cambridge, Alibaba, Tencent, SPC, FIU,
//! DiskSim, fio iologs) stream, plain or gzip- or zstd-compressed. Their rows go into time
//! order through a window of [`REORDER_WINDOW`] rows, which gives exactly the order of a
//! whole-file stable sort; a row further out of order is an error that names its line and
//! says to sort the file first. In closed loop, one reading of the file feeds every
//! stream: a stream's requests read ahead of its turn wait in memory, so memory is bounded
//! by how far apart the streams' requests lie in the file, not by its length. blkparse and
//! tracefs captures are parsed as they are read, but their requests are kept whole:
//! pairing each issue with its completion looks across the file (they are captures of a
//! run on this machine, not archives of billions of requests).

use crate::formats::native::NativeLines;
use crate::formats::rows::{Order, RowLines};
use crate::formats::{self, Format};
use crate::input::{open_lines, LineReader};
use crate::replay::{replay_closed, replay_open, ReplaySummary};
use crate::{Request, TraceError};
use flash::Device;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Rows an archive trace (MSR, Alibaba, ...) may be out of time order by.
pub const REORDER_WINDOW: usize = 1 << 16;

use formats::DETECT_LINES;

/// What a replay needs to know before it starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceInfo {
    pub requests: u64,
    /// Stream ids in order of first appearance.
    pub streams: Vec<u32>,
    /// The highest byte any request touches.
    pub max_end_bytes: u64,
    /// Whether requests carry real issue times (open loop by default).
    pub timestamped: bool,
}

/// A trace file, checked and described, ready to be read.
#[derive(Debug, Clone)]
pub struct TraceFile {
    path: PathBuf,
    origin: String,
    format: Format,
    disk: Option<String>,
    limit: Option<u64>,
    info: TraceInfo,
    /// With [`TraceFile::with_stream_handles`]: writes carry a placement handle by stream.
    stream_handles: u16,
}

impl TraceFile {
    /// Opens `path` (plain, gzip or zstd) in `format` (`Auto`: from its first lines),
    /// keeping only `disk` of a trace of several devices and only the first `limit`
    /// requests; reads it through once.
    pub fn open(
        path: &Path,
        format: Format,
        disk: Option<&str>,
        limit: Option<u64>,
    ) -> Result<TraceFile, TraceError> {
        Self::open_cancellable(path, format, disk, limit, &crate::Cancel::new())
    }

    /// [`TraceFile::open`], stopping with an error soon after `cancel` is cancelled (a
    /// read-through of a large file takes seconds).
    pub fn open_cancellable(
        path: &Path,
        format: Format,
        disk: Option<&str>,
        limit: Option<u64>,
        cancel: &crate::Cancel,
    ) -> Result<TraceFile, TraceError> {
        let origin = path.display().to_string();
        let format = if format == Format::Auto {
            let mut head = String::new();
            let mut lines = open_lines(path, &origin)?;
            for _ in 0..DETECT_LINES {
                match lines.next_line() {
                    None => break,
                    Some(line) => head.push_str(line?),
                }
                head.push('\n');
            }
            formats::resolve(&origin, &head, format)?
        } else {
            format
        };
        if disk.is_some() && format.row_lines(None).is_none() {
            return Err(formats::refuse_disk(&origin, format));
        }
        let mut file = TraceFile {
            path: path.to_path_buf(),
            origin,
            format,
            disk: disk.map(str::to_string),
            limit,
            info: TraceInfo::default(),
            stream_handles: 0,
        };
        let mut info = TraceInfo::default();
        let mut seen: HashMap<u32, ()> = HashMap::new();
        let mut requests = file.reader()?;
        for r in &mut requests {
            let r = r?;
            if info.requests % 65_536 == 0 && cancel.is_cancelled() {
                return Err(TraceError::Format {
                    origin: file.origin.clone(),
                    msg: "interrupted while reading the trace".into(),
                });
            }
            info.requests += 1;
            info.max_end_bytes = info
                .max_end_bytes
                .max(r.cmd.offset_bytes.saturating_add(r.cmd.len_bytes));
            if seen.insert(r.stream, ()).is_none() {
                info.streams.push(r.stream);
            }
        }
        info.timestamped = requests.timestamped();
        if info.requests == 0 {
            return Err(TraceError::Format {
                origin: file.origin.clone(),
                msg: format!(
                    "no requests{}: the file holds only headers, comments or blank lines, and would replay as nothing",
                    file.disk.as_deref().map(|d| format!(" of device {d}")).unwrap_or_default()
                ),
            });
        }
        file.info = info;
        Ok(file)
    }

    pub fn info(&self) -> &TraceInfo {
        &self.info
    }

    /// Writes of the trace's `i`-th stream (in order of first appearance) carry placement
    /// handle `i mod handles` (for an FDP drive, [`flash::placement`]); 0 or 1 handles:
    /// every write on handle 0, as read.
    pub fn with_stream_handles(mut self, handles: u16) -> TraceFile {
        self.stream_handles = handles;
        self
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The requests, read from the file from its start (by a thread of their own).
    pub fn requests(&self) -> Result<Requests, TraceError> {
        Ok(Requests::spawn(self.reader()?))
    }

    /// The requests, read from the file from its start on this thread.
    fn reader(&self) -> Result<Reader, TraceError> {
        let source = match (self.format, self.format.row_lines(self.disk.as_deref())) {
            (_, Some(parser)) => Source::Rows(Box::new(RowSource {
                lines: open_lines(&self.path, &self.origin)?,
                order: Order::new(REORDER_WINDOW, parser.sort_hint()),
                parser,
                eof: false,
            })),
            (Format::Native, None) => Source::Native {
                lines: open_lines(&self.path, &self.origin)?,
                parser: NativeLines::default(),
            },
            (f, None) => {
                let t = formats::read_file_disk(&self.path, f, self.disk.as_deref())?;
                Source::Whole {
                    requests: t.requests.into_iter(),
                    timestamped: t.timestamped,
                }
            }
        };
        let handle_of = if self.stream_handles > 1 {
            self.info
                .streams
                .iter()
                .enumerate()
                .map(|(i, &s)| (s, (i % self.stream_handles as usize) as u16))
                .collect()
        } else {
            HashMap::new()
        };
        Ok(Reader {
            origin: self.origin.clone(),
            source,
            remaining: self.limit,
            done: false,
            handle_of,
        })
    }
}

/// An archive file being read: its lines, parser and reorder window.
struct RowSource {
    lines: LineReader,
    parser: Box<dyn RowLines>,
    order: Order,
    eof: bool,
}

/// One reading of a trace file on this thread: its requests in order, or the first error
/// (then nothing).
struct Reader {
    origin: String,
    source: Source,
    remaining: Option<u64>,
    done: bool,
    /// Placement handle of each stream's writes (empty: as read).
    handle_of: HashMap<u32, u16>,
}

/// Requests per batch handed from the reading thread to the replay.
const BATCH: usize = 4096;
/// Batches ready ahead of the replay (memory: `BATCH` × this many requests).
const BATCHES_AHEAD: usize = 4;

type Batch = Vec<Result<Request, TraceError>>;

/// One reading of a trace file: its requests in order, or the first error (then nothing).
/// A thread reads and parses the file while the replay simulates, a few batches ahead.
pub struct Requests {
    origin: String,
    batches: Option<std::sync::mpsc::Receiver<Batch>>,
    batch: std::vec::IntoIter<Result<Request, TraceError>>,
    done: bool,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Requests {
    fn spawn(reader: Reader) -> Requests {
        let origin = reader.origin.clone();
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(BATCHES_AHEAD);
        let thread = std::thread::spawn(move || {
            let mut reader = reader;
            loop {
                let batch: Batch = reader.by_ref().take(BATCH).collect();
                let last = batch.len() < BATCH || batch.last().is_some_and(|r| r.is_err());
                if batch.is_empty() || tx.send(batch).is_err() || last {
                    return;
                }
            }
        });
        Requests {
            origin,
            batches: Some(rx),
            batch: Vec::new().into_iter(),
            done: false,
            thread: Some(thread),
        }
    }
}

impl Iterator for Requests {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            if let Some(r) = self.batch.next() {
                if r.is_err() {
                    self.done = true;
                }
                return Some(r);
            }
            match self.batches.as_ref().map(|rx| rx.recv()) {
                Some(Ok(b)) => self.batch = b.into_iter(),
                _ => {
                    self.done = true;
                    if self.thread.take().is_some_and(|t| t.join().is_err()) {
                        return Some(Err(TraceError::Format {
                            origin: self.origin.clone(),
                            msg: "the thread reading the trace failed".into(),
                        }));
                    }
                }
            }
        }
    }
}

impl Drop for Requests {
    fn drop(&mut self) {
        // Closing the channel ends the reading thread at its next batch.
        self.batches = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

enum Source {
    Native {
        lines: LineReader,
        parser: NativeLines,
    },
    Rows(Box<RowSource>),
    Whole {
        requests: std::vec::IntoIter<Request>,
        timestamped: bool,
    },
}

impl Reader {
    /// Whether the trace carries issue times (known once a native header was read).
    pub fn timestamped(&self) -> bool {
        match &self.source {
            Source::Native { parser, .. } => parser.open() == Some(true),
            Source::Rows(r) => r.parser.timestamped(),
            Source::Whole { timestamped, .. } => *timestamped,
        }
    }

    fn read(&mut self) -> Option<Result<Request, TraceError>> {
        let origin = &self.origin;
        let parse_error = |line: usize, msg: String| TraceError::Parse {
            origin: origin.clone(),
            line,
            msg,
        };
        match &mut self.source {
            Source::Native { lines, parser } => loop {
                let line = match lines.next_line() {
                    None => return parser.finish(origin).err().map(Err),
                    Some(Err(e)) => return Some(Err(e)),
                    Some(Ok(l)) => l,
                };
                match parser.line(line) {
                    Ok(Some(r)) => return Some(Ok(r)),
                    Ok(None) => {}
                    Err(msg) => return Some(Err(parse_error(lines.line_no(), msg))),
                }
            },
            Source::Rows(m) => loop {
                let RowSource {
                    lines,
                    parser,
                    order,
                    eof,
                } = &mut **m;
                if order.full() || *eof {
                    return order.pop().map(Ok);
                }
                let line = match lines.next_line() {
                    None => {
                        *eof = true;
                        if let Err(e) = parser.finish(origin) {
                            return Some(Err(e));
                        }
                        continue;
                    }
                    Some(Err(e)) => return Some(Err(e)),
                    Some(Ok(l)) => l,
                };
                match parser.line(line) {
                    Ok(Some(row)) => {
                        if let Err(msg) = order.push(row) {
                            return Some(Err(parse_error(lines.line_no(), msg)));
                        }
                    }
                    Ok(None) => {}
                    Err(msg) => return Some(Err(parse_error(lines.line_no(), msg))),
                }
            },
            Source::Whole { requests, .. } => requests.next().map(Ok),
        }
    }
}

impl Iterator for Reader {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.remaining == Some(0) {
            self.done = true;
            // Stopped before the end of the file: the devices read so far (the requests
            // given and those waiting in the reorder window) must still be one, or the
            // one picked; a limit must not merge several into one address space.
            if let Source::Rows(m) = &self.source {
                if let Err(e) = m.parser.finish(&self.origin) {
                    return Some(Err(e));
                }
            }
            return None;
        }
        let mut r = self.read();
        match &mut r {
            Some(Ok(req)) => {
                if let Some(n) = &mut self.remaining {
                    *n -= 1;
                }
                if req.cmd.op == flash::Op::Write && !self.handle_of.is_empty() {
                    req.cmd.handle = self.handle_of.get(&req.stream).copied().unwrap_or(0);
                }
            }
            _ => self.done = true,
        }
        r
    }
}

/// One reading of a trace split by stream for closed-loop replay: each stream's iterator
/// reads the file on until its next request, leaving other streams' requests queued.
struct Demux {
    source: Requests,
    slot_of: HashMap<u32, usize>,
    queued: Vec<VecDeque<Request>>,
    error: Option<TraceError>,
}

struct StreamRequests {
    demux: Rc<RefCell<Demux>>,
    slot: usize,
}

impl Iterator for StreamRequests {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        let mut d = self.demux.borrow_mut();
        loop {
            if let Some(r) = d.queued[self.slot].pop_front() {
                return Some(r);
            }
            if d.error.is_some() {
                return None;
            }
            match d.source.next()? {
                Err(e) => {
                    d.error = Some(e);
                    return None;
                }
                Ok(r) => match d.slot_of.get(&r.stream) {
                    Some(&s) if s == self.slot => return Some(r),
                    Some(&s) => d.queued[s].push_back(r),
                    None => {
                        let msg = format!(
                            "stream {} appeared that the first reading did not see: the file changed while it was replayed",
                            r.stream
                        );
                        d.error = Some(TraceError::Format {
                            origin: d.source.origin.clone(),
                            msg,
                        });
                        return None;
                    }
                },
            }
        }
    }
}

/// Replays `file` once on `dev` from `start_ns`: open loop (requests at their times) or
/// closed loop (each stream keeps `queue_depth` requests in flight).
pub fn replay_file<D: Device>(
    dev: &mut D,
    file: &TraceFile,
    open: bool,
    queue_depth: u32,
    start_ns: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<ReplaySummary, TraceError> {
    let requests = file.requests()?;
    if open {
        return replay_open(dev, requests, start_ns, progress);
    }
    let streams = &file.info().streams;
    let demux = Rc::new(RefCell::new(Demux {
        source: requests,
        slot_of: streams.iter().enumerate().map(|(i, &s)| (s, i)).collect(),
        queued: vec![VecDeque::new(); streams.len()],
        error: None,
    }));
    let iters: Vec<StreamRequests> = (0..streams.len())
        .map(|slot| StreamRequests {
            demux: Rc::clone(&demux),
            slot,
        })
        .collect();
    let summary = replay_closed(dev, iters, queue_depth, start_ns, progress)?;
    let error = demux.borrow_mut().error.take();
    match error {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}
