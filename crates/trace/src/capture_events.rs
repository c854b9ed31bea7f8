//! The events a capture records, read from its tracing instance's per-CPU binary buffers
//! ([`crate::ring_buffer`]) and turned into a trace exactly as the same events printed as
//! text would be (`formats::tracefs`): the CPUs' events merged in time order as
//! `trace_pipe` merges them (earliest first, the lower CPU first on a tie), times rounded
//! to the microsecond as the text prints them, the same requests, think times and
//! dependencies (`tests/capture_raw.rs` captures both at once and compares).

use crate::formats::{op_from_rwbs, KernelEvents};
use crate::ring_buffer::{decode_page, read_str, read_uint, EventFormat, Field, PageLayout};
use crate::{Trace, TraceError};
use flash::Op;
use std::path::Path;

/// One decoded event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    /// `block_rq_issue` (op None: a request that carries no data command).
    Issue {
        pid: u32,
        op: Option<Op>,
        sector: u64,
        sectors: u64,
    },
    /// `block_rq_complete`.
    Complete {
        op: Option<Op>,
        sector: u64,
        sectors: u64,
    },
    /// `sched_switch`: `prev` left the CPU (still runnable if preempted) for `next`.
    Switch {
        prev: u32,
        prev_runnable: bool,
        next: u32,
    },
    /// `sched_wakeup`.
    Wakeup {
        pid: u32,
    },
    /// `jbd2_end_commit`.
    JournalCommit,
    /// `jbd2_commit_locking`: a commit closes its transaction to new handles (what is
    /// freed after it goes to the next commit).
    JournalLocked,
    /// `ext4_unlink_enter`: a file of the file system is being removed.
    Unlink,
    /// `ext4_mballoc_free`: ext4 freed an extent's blocks within one block group.
    Freed,
    /// `workqueue_queue_work` / `workqueue_execute_end` of the filtered work function.
    WorkQueued,
    WorkEnded,
}

/// A record and when it happened (tracing clock, ns) and on which CPU.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timed {
    pub time_ns: u64,
    pub cpu: u32,
    pub record: Record,
}

struct BlockFields {
    id: u16,
    pid: Field,
    sector: Field,
    sectors: Field,
    rwbs: Field,
}

/// The events a capture enabled beside the block events.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Enabled {
    /// The scheduler's wake-ups and switches.
    pub sched: bool,
    /// jbd2's commit ends.
    pub journal: bool,
    /// ext4's unlinks and jbd2's commit lockings.
    pub unlinks: bool,
    /// The discard worker's work items.
    pub work: bool,
    /// ext4's freed extents.
    pub frees: bool,
}

/// Decodes the events a capture enabled, by their ids and the fields their format files
/// give.
pub(crate) struct Decoder {
    pub layout: PageLayout,
    issue: BlockFields,
    complete: BlockFields,
    switch: Option<(u16, Field, Field, Field)>,
    wakeup: Option<(u16, Field)>,
    journal_commit: Option<u16>,
    journal_locked: Option<u16>,
    unlink: Option<u16>,
    work: Option<(u16, u16)>,
    freed: Option<u16>,
}

impl Decoder {
    /// Reads the layouts of the events a capture enabled under the tracefs instance `inst`:
    /// the block events, and those the flags name (the scheduler's, jbd2's commits, ext4's
    /// unlinks with jbd2's commit locking, the discard worker's).
    pub(crate) fn new(inst: &Path, enabled: Enabled) -> Result<Decoder, String> {
        let Enabled {
            sched,
            journal,
            unlinks,
            work,
            frees,
        } = enabled;
        let read = |rel: &str| {
            read_tracefs(&inst.join(rel)).map_err(|e| format!("{}: {e}", inst.join(rel).display()))
        };
        let format = |rel: &str| {
            EventFormat::parse(&read(&format!("events/{rel}/format"))?)
                .map_err(|e| format!("events/{rel}/format: {e}"))
        };
        let layout = PageLayout::parse(&read("events/header_page")?)
            .map_err(|e| format!("events/header_page: {e}"))?;
        let block = |rel: &str| -> Result<BlockFields, String> {
            let f = format(rel)?;
            let field = |name: &str, size: usize| {
                f.field(name, size)
                    .map_err(|e| format!("events/{rel}/format: {e}"))
            };
            Ok(BlockFields {
                id: f.id,
                pid: field("common_pid", 4)?,
                sector: field("sector", 8)?,
                sectors: field("nr_sector", 4)?,
                rwbs: field("rwbs", 1)?,
            })
        };
        let switch = if sched {
            let f = format("sched/sched_switch")?;
            let field = |name: &str, size: usize| {
                f.field(name, size)
                    .map_err(|e| format!("events/sched/sched_switch/format: {e}"))
            };
            Some((
                f.id,
                field("prev_pid", 4)?,
                field("prev_state", 4)?,
                field("next_pid", 4)?,
            ))
        } else {
            None
        };
        let wakeup = if sched {
            let f = format("sched/sched_wakeup")?;
            Some((
                f.id,
                f.field("pid", 4)
                    .map_err(|e| format!("events/sched/sched_wakeup/format: {e}"))?,
            ))
        } else {
            None
        };
        Ok(Decoder {
            layout,
            issue: block("block/block_rq_issue")?,
            complete: block("block/block_rq_complete")?,
            switch,
            wakeup,
            journal_commit: if journal {
                Some(format("jbd2/jbd2_end_commit")?.id)
            } else {
                None
            },
            journal_locked: if unlinks {
                Some(format("jbd2/jbd2_commit_locking")?.id)
            } else {
                None
            },
            unlink: if unlinks {
                Some(format("ext4/ext4_unlink_enter")?.id)
            } else {
                None
            },
            work: if work {
                Some((
                    format("workqueue/workqueue_queue_work")?.id,
                    format("workqueue/workqueue_execute_end")?.id,
                ))
            } else {
                None
            },
            freed: if frees {
                Some(format("ext4/ext4_mballoc_free")?.id)
            } else {
                None
            },
        })
    }

    /// Decodes one page read from CPU `cpu`'s buffer, appending its records to `out`;
    /// returns the events the kernel lost before it.
    pub(crate) fn page(&self, cpu: u32, page: &[u8], out: &mut Vec<Timed>) -> Result<u64, String> {
        decode_page(page, &self.layout, |time_ns, p| {
            if let Some(record) = self.record(p)? {
                out.push(Timed {
                    time_ns,
                    cpu,
                    record,
                });
            }
            Ok(())
        })
    }

    fn record(&self, p: &[u8]) -> Result<Option<Record>, String> {
        let id = read_uint(p, Field { offset: 0, size: 2 })? as u16;
        let block = |f: &BlockFields| -> Result<(Option<Op>, u64, u64), String> {
            let sectors = read_uint(p, f.sectors)?;
            let op = op_from_rwbs(read_str(p, f.rwbs)?, sectors)?;
            Ok((op, read_uint(p, f.sector)?, sectors))
        };
        let pid = |f: Field| -> Result<u32, String> {
            // pid_t: a signed 32-bit field.
            Ok(read_uint(p, Field { size: 4, ..f })? as u32)
        };
        Ok(Some(if id == self.issue.id {
            let (op, sector, sectors) = block(&self.issue)?;
            Record::Issue {
                pid: pid(self.issue.pid)?,
                op,
                sector,
                sectors,
            }
        } else if id == self.complete.id {
            let (op, sector, sectors) = block(&self.complete)?;
            Record::Complete {
                op,
                sector,
                sectors,
            }
        } else if let Some((_, prev, state, next)) = self.switch.filter(|s| s.0 == id) {
            // As the text prints it: "R" (or "R+", preempted) when no state bit below
            // TASK_REPORT_MAX (0x100) is set (include/trace/events/sched.h).
            let state = read_uint(p, state)?;
            Record::Switch {
                prev: pid(prev)?,
                prev_runnable: state & 0xff == 0,
                next: pid(next)?,
            }
        } else if let Some((_, f)) = self.wakeup.filter(|w| w.0 == id) {
            Record::Wakeup { pid: pid(f)? }
        } else if self.journal_commit == Some(id) {
            Record::JournalCommit
        } else if self.journal_locked == Some(id) {
            Record::JournalLocked
        } else if self.unlink == Some(id) {
            Record::Unlink
        } else if self.freed == Some(id) {
            Record::Freed
        } else if let Some((queued, ended)) = self.work.filter(|w| w.0 == id || w.1 == id) {
            if id == queued {
                Record::WorkQueued
            } else {
                debug_assert_eq!(id, ended);
                Record::WorkEnded
            }
        } else {
            return Ok(None);
        }))
    }
}

/// A tracefs control file's whole text. Read in one large read: some of these files
/// (`events/header_page`) end at the first read however short it was, so the small first
/// read `read_to_string` makes would cut them.
fn read_tracefs(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut len = 0;
    loop {
        match f.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if len == buf.len() {
                    buf.resize(2 * len, 0);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(len);
    String::from_utf8(buf).map_err(std::io::Error::other)
}

/// The time the text prints for an event: microseconds, rounded (`ns2usecs`), as ns.
fn as_printed(time_ns: u64) -> u64 {
    (time_ns + 500) / 1000 * 1000
}

/// What a capture's records say, in the order `trace_pipe` would have printed them.
pub(crate) struct Assembled {
    pub trace: Trace,
    /// Block events (issues and completions).
    pub block_events: u64,
    /// The tracing clock at the first issue, ns (as printed).
    pub start_ns: u64,
    /// When each journal commit ended, ns after `start_ns`.
    pub journal_commit_at_ns: Vec<u64>,
    /// When each commit closed its transaction (`jbd2_commit_locking`), and when each
    /// unlink began, ns after `start_ns` (0 for those before it).
    pub journal_locked_at_ns: Vec<u64>,
    pub unlink_at_ns: Vec<u64>,
    /// When ext4 freed each extent (a group's piece of it), ns after `start_ns`.
    pub freed_at_ns: Vec<u64>,
}

/// Merges the CPUs' records (each CPU's in the order read) and builds the trace.
pub(crate) fn assemble(origin: &str, mut records: Vec<Timed>) -> Result<Assembled, TraceError> {
    // Stable: each CPU's records keep their order among equal times.
    records.sort_by_key(|r| (r.time_ns, r.cpu));
    let mut events = KernelEvents::default();
    let mut block_events = 0;
    let mut commits = Vec::new();
    let mut unlinks = Vec::new();
    let mut freed = Vec::new();
    let mut locked = Vec::new();
    let mut start_ns = None::<u64>;
    let err = |msg: String| TraceError::Format {
        origin: origin.to_string(),
        msg,
    };
    for r in &records {
        let t = as_printed(r.time_ns);
        match r.record {
            Record::Issue {
                pid,
                op,
                sector,
                sectors,
            } => {
                block_events += 1;
                start_ns = Some(start_ns.map_or(t, |s| s.min(t)));
                if let Some(op) = op {
                    events
                        .push(true, u64::from(pid), t, op, sector, sectors)
                        .map_err(err)?;
                }
            }
            Record::Complete {
                op,
                sector,
                sectors,
            } => {
                block_events += 1;
                if let Some(op) = op {
                    events.push(false, 0, t, op, sector, sectors).map_err(err)?;
                }
            }
            Record::Switch {
                prev,
                prev_runnable,
                next,
            } => events.cpu_waits.switch(t, prev, prev_runnable, next),
            Record::Wakeup { pid } => events.cpu_waits.wakeup(t, pid),
            Record::JournalCommit => commits.push(t),
            Record::Unlink => unlinks.push(t),
            Record::Freed => freed.push(t),
            Record::JournalLocked => locked.push(t),
            Record::WorkQueued | Record::WorkEnded => {}
        }
    }
    let start_ns = start_ns.unwrap_or(0);
    Ok(Assembled {
        trace: events.into_trace(origin, "block_rq_issue events")?,
        block_events,
        start_ns,
        journal_commit_at_ns: commits
            .into_iter()
            .map(|t| t.saturating_sub(start_ns))
            .collect(),
        journal_locked_at_ns: locked
            .into_iter()
            .map(|t| t.saturating_sub(start_ns))
            .collect(),
        unlink_at_ns: unlinks
            .into_iter()
            .map(|t| t.saturating_sub(start_ns))
            .collect(),
        freed_at_ns: freed
            .into_iter()
            .map(|t| t.saturating_sub(start_ns))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::PathBuf;

    /// A tracing instance removed when dropped.
    struct Instance(PathBuf);

    impl Drop for Instance {
        fn drop(&mut self) {
            let _ = std::fs::write(self.0.join("tracing_on"), "0");
            let _ = std::fs::remove_dir(&self.0);
        }
    }

    /// Real block I/O on this machine's disk, traced with the scheduler's events; the
    /// instance's text (`trace`, which does not consume) and then its binary pages
    /// (`trace_pipe_raw`, which do) hold the same events with the same times, so both must
    /// give the same trace, request for request and think time for think time.
    #[test]
    fn the_binary_pages_give_the_trace_the_text_gives() {
        let root = Path::new("/sys/kernel/tracing");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 || !root.join("instances").is_dir() {
            eprintln!("skipped: needs root and tracefs at {}", root.display());
            return;
        }
        let inst = Instance(
            root.join("instances")
                .join(format!("flashlab-raw-test-{}", std::process::id())),
        );
        std::fs::create_dir(&inst.0).unwrap();
        let set = |rel: &str, v: &str| std::fs::write(inst.0.join(rel), v).unwrap();
        set("buffer_size_kb", "16384");
        set("trace_clock", "mono");
        for ev in [
            "block/block_rq_issue",
            "block/block_rq_complete",
            "sched/sched_switch",
            "sched/sched_wakeup",
        ] {
            set(&format!("events/{ev}/enable"), "1");
        }
        set("tracing_on", "1");
        // Direct writes, syncs and reads of a file in the temp directory.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .unwrap();
        let layout = std::alloc::Layout::from_size_align(1 << 16, 4096).unwrap();
        // SAFETY: a non-zero size; freed below with the same layout.
        let buf = unsafe { std::alloc::alloc_zeroed(layout) };
        // SAFETY: `buf` is a live allocation of `layout.size()` bytes.
        let block = unsafe { std::slice::from_raw_parts_mut(buf, layout.size()) };
        for _ in 0..32 {
            f.write_all(block).unwrap();
            f.sync_data().unwrap();
        }
        drop(f);
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .unwrap();
        while f.read(block).unwrap() > 0 {}
        // SAFETY: allocated above with `layout`.
        unsafe { std::alloc::dealloc(buf, layout) };
        set("tracing_on", "0");

        let text = std::fs::read_to_string(inst.0.join("trace")).unwrap();
        let decoder = Decoder::new(
            &inst.0,
            Enabled {
                sched: true,
                ..Enabled::default()
            },
        )
        .unwrap();
        let mut records = Vec::new();
        let mut page = vec![0u8; decoder.layout.page_bytes];
        for entry in std::fs::read_dir(inst.0.join("per_cpu")).unwrap() {
            let entry = entry.unwrap();
            let Some(cpu) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("cpu")?.parse::<u32>().ok())
            else {
                continue;
            };
            let mut raw = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(entry.path().join("trace_pipe_raw"))
                .unwrap();
            loop {
                match raw.read(&mut page) {
                    Ok(0) => break,
                    Ok(n) => assert_eq!(decoder.page(cpu, &page[..n], &mut records), Ok(0)),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("trace_pipe_raw: {e}"),
                }
            }
        }
        let from_text = crate::formats::tracefs::parse("text", &text).unwrap();
        let from_raw = assemble("raw", records).unwrap();
        assert!(
            from_text.requests.len() >= 64,
            "the workload's requests were traced ({} requests)",
            from_text.requests.len()
        );
        assert_eq!(
            from_raw.block_events,
            text.lines().filter(|l| l.contains(": block_rq_")).count() as u64
        );
        assert_eq!(from_raw.trace, from_text);
    }
}
