//! The kernel's tracing ring buffer in its binary form: the pages a tracefs instance's
//! `per_cpu/cpuN/trace_pipe_raw` hands out, decoded without the kernel formatting every
//! event as text (which, with the scheduler's events on, cost a capture about a fifth of
//! its CPU time in `vsnprintf` and friends, and flashlab as much again to parse it).
//!
//! A page is a header (`events/header_page`: a u64 timestamp, then `commit`, the bytes of
//! events that follow, with the "events were lost before this page" flags in its bits 31
//! and 30) and a run of events, each a 32-bit word (`events/header_event`: 5 bits of
//! type/length, 27 bits of time delta) and its payload (kernel/trace/ring_buffer.c). An
//! event's payload is laid out as its `events/<system>/<event>/format` file says.
//! Timestamps are rebuilt as the kernel's own reader does (`rb_update_read_stamp`): data
//! events and time extends add their delta, an absolute time stamp replaces the time,
//! padding (an event the kernel discarded) changes nothing.

use std::collections::HashMap;

/// Where a page's fields are (`events/header_page`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    commit_offset: usize,
    commit_size: usize,
    data_offset: usize,
    /// Bytes of a whole page: what one read of `trace_pipe_raw` returns.
    pub page_bytes: usize,
}

impl PageLayout {
    /// Parses `events/header_page`.
    pub fn parse(header_page: &str) -> Result<PageLayout, String> {
        let fields = parse_fields(header_page);
        let get = |name: &str| {
            fields
                .get(name)
                .copied()
                .ok_or_else(|| format!("header_page has no field {name:?}"))
        };
        let (ts, commit, data) = (get("timestamp")?, get("commit")?, get("data")?);
        if ts.offset != 0 || ts.size != 8 || !matches!(commit.size, 4 | 8) {
            return Err(format!(
                "header_page's layout is not one this reader knows (timestamp {ts:?}, commit {commit:?})"
            ));
        }
        Ok(PageLayout {
            commit_offset: commit.offset,
            commit_size: commit.size,
            data_offset: data.offset,
            page_bytes: data.offset + data.size,
        })
    }
}

/// A field of an event or page: where it is and how long, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub offset: usize,
    pub size: usize,
}

/// An event's id and its fields by name (`events/<system>/<event>/format`).
#[derive(Debug, Clone)]
pub struct EventFormat {
    pub id: u16,
    pub fields: HashMap<String, Field>,
}

impl EventFormat {
    pub fn parse(format: &str) -> Result<EventFormat, String> {
        let id = format
            .lines()
            .find_map(|l| l.trim().strip_prefix("ID:"))
            .ok_or("no ID line")?
            .trim()
            .parse::<u16>()
            .map_err(|e| format!("the ID is not a number: {e}"))?;
        Ok(EventFormat {
            id,
            fields: parse_fields(format),
        })
    }

    /// The field `name`, at least `size` bytes long.
    pub fn field(&self, name: &str, size: usize) -> Result<Field, String> {
        match self.fields.get(name) {
            Some(f) if f.size >= size => Ok(*f),
            Some(f) => Err(format!(
                "field {name} is {} bytes, expected at least {size}",
                f.size
            )),
            None => Err(format!("no field {name}")),
        }
    }
}

/// `field:TYPE NAME;\toffset:N;\tsize:N;...` lines: name (without an array suffix) to
/// offset and size.
fn parse_fields(text: &str) -> HashMap<String, Field> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let mut parts = line.trim().split(';').map(str::trim);
        let Some(decl) = parts.next().and_then(|p| p.strip_prefix("field:")) else {
            continue;
        };
        let (mut offset, mut size) = (None, None);
        for p in parts {
            if let Some(v) = p.strip_prefix("offset:") {
                offset = v.trim().parse::<usize>().ok();
            } else if let Some(v) = p.strip_prefix("size:") {
                size = v.trim().parse::<usize>().ok();
            }
        }
        let name = decl
            .split_whitespace()
            .last()
            .map(|n| n.split('[').next().unwrap_or(n))
            .unwrap_or("");
        if let (Some(offset), Some(size), false) = (offset, size, name.is_empty()) {
            out.insert(name.to_string(), Field { offset, size });
        }
    }
    out
}

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
const TS_SHIFT: u32 = 27;
/// The bits of a time above the 59 an absolute time stamp holds.
const TS_MSB: u64 = 0xf8 << 56;
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;

/// Calls `f(time_ns, payload)` for every data event of `page`, in order; returns how many
/// events the kernel lost before this page (its count when stored, else 1 when the page
/// says some were lost, else 0).
pub fn decode_page(
    page: &[u8],
    layout: &PageLayout,
    mut f: impl FnMut(u64, &[u8]) -> Result<(), String>,
) -> Result<u64, String> {
    let word = |at: usize, size: usize| -> Result<u64, String> {
        let b = page
            .get(at..at + size)
            .ok_or_else(|| format!("a {size}-byte field at byte {at} is past the page's end"))?;
        let mut v = [0u8; 8];
        v[..size].copy_from_slice(b);
        Ok(u64::from_le_bytes(v))
    };
    let mut ts = word(0, 8)?;
    let commit = word(layout.commit_offset, layout.commit_size)?;
    let len = (commit & (MISSED_STORED - 1)) as usize;
    let data = page
        .get(layout.data_offset..layout.data_offset + len)
        .ok_or_else(|| format!("the page says it holds {len} bytes of events, more than it has"))?;
    let missed = if commit & MISSED_STORED != 0 {
        word(layout.data_offset + len, 8)?
    } else {
        u64::from(commit & MISSED_EVENTS != 0)
    };
    let u32_at = |at: usize| -> Result<u32, String> {
        data.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| format!("an event header at byte {at} is past the page's events"))
    };
    let mut at = 0;
    while at + 4 <= data.len() {
        let w = u32_at(at)?;
        let (type_len, delta) = (w & 0x1f, u64::from(w >> 5));
        let (payload, next) = match type_len {
            TYPE_PADDING => {
                if delta == 0 {
                    break; // the rest of the page is empty
                }
                (None, at + 4 + u32_at(at + 4)? as usize)
            }
            TYPE_TIME_EXTEND => {
                ts += (u64::from(u32_at(at + 4)?) << TS_SHIFT) + delta;
                (None, at + 8)
            }
            TYPE_TIME_STAMP => {
                let mut abs = (u64::from(u32_at(at + 4)?) << TS_SHIFT) + delta;
                if ts & TS_MSB != 0 {
                    abs |= ts & TS_MSB;
                    if abs < ts {
                        abs += 1 << 59;
                    }
                }
                ts = abs;
                (None, at + 8)
            }
            0 => {
                // A long event: its length (which counts the length word) comes first.
                let n = u32_at(at + 4)? as usize;
                if n < 4 {
                    return Err(format!("an event at byte {at} says it is {n} bytes long"));
                }
                ts += delta;
                (Some(at + 8..at + 4 + n), at + 4 + n)
            }
            n => {
                ts += delta;
                (
                    Some(at + 4..at + 4 + 4 * n as usize),
                    at + 4 + 4 * n as usize,
                )
            }
        };
        if let Some(range) = payload {
            let p = data
                .get(range)
                .ok_or_else(|| format!("the event at byte {at} runs past the page's events"))?;
            f(ts, p)?;
        }
        at = next;
    }
    Ok(missed)
}

/// Little-endian integer of `field` in an event's payload.
pub fn read_uint(payload: &[u8], field: Field) -> Result<u64, String> {
    let size = field.size.min(8);
    let b = payload
        .get(field.offset..field.offset + size)
        .ok_or_else(|| format!("a field at byte {} is past the event's end", field.offset))?;
    let mut v = [0u8; 8];
    v[..size].copy_from_slice(b);
    Ok(u64::from_le_bytes(v))
}

/// A NUL-terminated string field (`char name[N]`).
pub fn read_str(payload: &[u8], field: Field) -> Result<&str, String> {
    let b = payload
        .get(field.offset..field.offset + field.size)
        .ok_or_else(|| format!("a field at byte {} is past the event's end", field.offset))?;
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    std::str::from_utf8(&b[..end]).map_err(|e| format!("a text field is not UTF-8: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;
";

    /// A page as the kernel writes it: header, then (header word, payload) events.
    fn page(ts: u64, events: &[(u32, u32, Vec<u8>)], flags: u64, missed: Option<u64>) -> Vec<u8> {
        let mut data = Vec::new();
        for (type_len, delta, payload) in events {
            data.extend_from_slice(&(type_len | (delta << 5)).to_le_bytes());
            data.extend_from_slice(payload);
        }
        let mut p = ts.to_le_bytes().to_vec();
        p.extend_from_slice(&(data.len() as u64 | flags).to_le_bytes());
        p.extend_from_slice(&data);
        if let Some(m) = missed {
            p.extend_from_slice(&m.to_le_bytes());
        }
        p.resize(4096, 0);
        p
    }

    fn decode(p: &[u8]) -> (Vec<(u64, Vec<u8>)>, u64) {
        let layout = PageLayout::parse(HEADER_PAGE).unwrap();
        let mut out = Vec::new();
        let missed = decode_page(p, &layout, |ts, payload| {
            out.push((ts, payload.to_vec()));
            Ok(())
        })
        .unwrap();
        (out, missed)
    }

    #[test]
    fn the_header_page_gives_the_page_size() {
        let l = PageLayout::parse(HEADER_PAGE).unwrap();
        assert_eq!(
            (l.commit_offset, l.data_offset, l.page_bytes),
            (8, 16, 4096)
        );
        assert!(PageLayout::parse("field: u64 timestamp;\toffset:0;\tsize:8;").is_err());
    }

    #[test]
    fn timestamps_follow_the_kernels_reader() {
        let ext = |v: u32| v.to_le_bytes().to_vec();
        let p = page(
            1_000,
            &[
                (2, 10, vec![1; 8]),                              // short event: ts 1,010
                (TYPE_PADDING, 7, [ext(8), vec![0; 4]].concat()), // discarded: time unchanged
                (TYPE_TIME_EXTEND, 5, ext(1)),                    // + (1 << 27) + 5
                (0, 3, [ext(4 + 12), vec![2; 12]].concat()),      // long event, 12 bytes
                (TYPE_TIME_STAMP, 9, ext(0)),                     // absolute: 9
                (1, 1, vec![3; 4]),
            ],
            0,
            None,
        );
        let (events, missed) = decode(&p);
        let t = 1_010 + (1 << 27) + 5 + 3;
        assert_eq!(
            events,
            vec![(1_010, vec![1; 8]), (t, vec![2; 12]), (10, vec![3; 4])]
        );
        assert_eq!(missed, 0);
    }

    #[test]
    fn lost_events_are_counted() {
        let p = page(
            0,
            &[(1, 1, vec![0; 4])],
            MISSED_EVENTS | MISSED_STORED,
            Some(42),
        );
        assert_eq!(decode(&p).1, 42);
        let p = page(0, &[(1, 1, vec![0; 4])], MISSED_EVENTS, None);
        assert_eq!(decode(&p).1, 1);
    }

    #[test]
    fn a_torn_page_is_an_error_not_a_panic() {
        let mut p = page(0, &[(3, 1, vec![0; 12])], 0, None);
        let layout = PageLayout::parse(HEADER_PAGE).unwrap();
        assert!(decode_page(&p, &layout, |_, _| Ok(())).is_ok());
        p[8] = 200; // says 200 bytes of events: after the first, a zero word (a long event of length 0)
        assert!(decode_page(&p, &layout, |_, _| Ok(())).is_err());
        p[8..16].copy_from_slice(&5000u64.to_le_bytes());
        assert!(decode_page(&p, &layout, |_, _| Ok(())).is_err());
        let long = page(0, &[(0, 1, 2u32.to_le_bytes().to_vec())], 0, None);
        assert!(decode_page(&long, &layout, |_, _| Ok(())).is_err());
        assert!(decode_page(&p[..10], &layout, |_, _| Ok(())).is_err());
    }

    #[test]
    fn event_formats_parse_as_the_kernel_writes_them() {
        let f = EventFormat::parse(
            "name: block_rq_issue\nID: 2104\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:char rwbs[10];\toffset:34;\tsize:10;\tsigned:0;\n\tfield:__data_loc char[] cmd;\toffset:60;\tsize:4;\tsigned:0;\n\nprint fmt: \"%d\", REC->dev\n",
        )
        .unwrap();
        assert_eq!(f.id, 2104);
        assert_eq!(
            f.field("rwbs", 8).unwrap(),
            Field {
                offset: 34,
                size: 10
            }
        );
        assert_eq!(f.field("cmd", 4).unwrap().offset, 60);
        assert!(f.field("rwbs", 11).is_err());
        assert!(f.field("sector", 8).is_err());
        let mut payload = vec![0u8; 64];
        payload[34..36].copy_from_slice(b"WS");
        payload[4..8].copy_from_slice(&77i32.to_le_bytes());
        assert_eq!(
            read_str(&payload, f.field("rwbs", 8).unwrap()).unwrap(),
            "WS"
        );
        assert_eq!(
            read_uint(&payload, f.field("common_pid", 4).unwrap()).unwrap(),
            77
        );
        assert!(read_uint(&payload[..6], f.field("common_pid", 4).unwrap()).is_err());
    }
}
