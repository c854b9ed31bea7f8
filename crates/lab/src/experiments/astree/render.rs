//! The astree section's tables and plots, from its runs' results.

use super::{Sizes, BUFFERS, CACHES, FANOUTS, PAPER_INSERT};
use crate::btreerun::{BtreeResult, StoreKind};
use crate::report::{LinePlot, Plot, Series, Table};
use crate::rows::{Cell, Row};
use astree::asstore::Cleaning;

/// A main run by store, fanout, write buffer and cache.
type Get<'a> = dyn Fn(StoreKind, usize, usize, usize) -> &'a BtreeResult + 'a;
/// The cache study's run by store and cache.
type Study<'a> = dyn Fn(StoreKind, usize) -> &'a BtreeResult + 'a;
/// A named run (Table 7's and the drive-write-cache ones).
type Named<'a> = dyn Fn(&str) -> &'a BtreeResult + 'a;
/// Table 7's runs: (name, store, cleaning, segment bytes, inserts).
type CleaningRuns = [(&'static str, StoreKind, Cleaning, u64, u64); 5];

/// A row of table `insert`: one fanout's insert times, the paper's beside.
struct InsertRow {
    fanout: usize,
    btree_s: f64,
    bftl_s: f64,
    as_s: Vec<f64>,
    paper: (usize, f64, f64, [f64; 4]),
}

impl Row for InsertRow {
    const COLUMNS: &'static [&'static str] = &[
        "fanout",
        "B-tree",
        "BFTL",
        "AS 1",
        "AS 8",
        "AS 16",
        "AS 32",
        "paper B-tree",
        "paper BFTL",
        "paper AS 1/8/16/32",
    ];
    fn cells(&self) -> Vec<Cell> {
        let mut c = vec![
            Cell::Count(self.fanout as u64),
            Cell::Fixed(self.btree_s, 2),
            Cell::Fixed(self.bftl_s, 2),
        ];
        c.extend(self.as_s.iter().map(|&s| Cell::Fixed(s, 2)));
        let p = self.paper;
        let as_paper = p.3.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        c.extend([
            format!("{}", p.1).into(),
            format!("{}", p.2).into(),
            as_paper.join("/").into(),
        ]);
        c
    }
}

/// Table `insert` (paper 004's Tables 2–5).
pub(super) fn insert_table(sz: &Sizes, get: &Get) -> Table {
    let rows = FANOUTS.iter().enumerate().map(|(i, &f)| InsertRow {
        fanout: f,
        btree_s: get(StoreKind::InPlace, f, 1, 0).insert_s,
        bftl_s: get(StoreKind::Bftl, f, 1, 0).insert_s,
        as_s: BUFFERS
            .iter()
            .map(|&b| get(StoreKind::As, f, b, 0).insert_s)
            .collect(),
        paper: PAPER_INSERT[i],
    });
    Table::of(
        "insert",
        format!(
            "Insert time of {} inserts after {} (simulated s; paper's seconds for 100k after 400k beside)",
            sz.ops, sz.preload
        ),
        rows,
    )
}

/// A row of table `search_split_size`: one store at one fanout.
struct SearchRow<'a> {
    fanout: usize,
    store: &'static str,
    r: &'a BtreeResult,
    ops: u64,
}

impl Row for SearchRow<'_> {
    const COLUMNS: &'static [&'static str] = &[
        "fanout",
        "store",
        "search s",
        "insert read s",
        "insert write s",
        "file bytes",
        "node reads per search",
    ];
    fn cells(&self) -> Vec<Cell> {
        let r = self.r;
        vec![
            Cell::Count(self.fanout as u64),
            self.store.into(),
            Cell::Fixed(r.search_s, 2),
            Cell::Fixed(r.insert_read_s, 2),
            Cell::Fixed(r.insert_write_s, 2),
            Cell::Count(r.file_bytes),
            Cell::Fixed(r.search_node_reads as f64 / self.ops as f64, 2),
        ]
    }
}

/// Table `search_split_size`: search time, the insert time's read/write split, file size.
pub(super) fn search_split_size_table<'a>(sz: &Sizes, get: &'a Get<'a>) -> Table {
    let rows = FANOUTS.iter().flat_map(|&f| {
        [
            ("B-tree", get(StoreKind::InPlace, f, 1, 0)),
            ("BFTL", get(StoreKind::Bftl, f, 1, 0)),
            ("AS (32)", get(StoreKind::As, f, 32, 0)),
        ]
        .map(|(store, r)| SearchRow {
            fanout: f,
            store,
            r,
            ops: sz.ops,
        })
    });
    Table::of(
        "search_split_size",
        "Search time, the read/write split of insert time (buffer 32 for AS) and file size",
        rows,
    )
}

/// A row of table `cache`: the three stores with one cache size.
struct CacheRow<'a> {
    cache: usize,
    btree: &'a BtreeResult,
    bftl: &'a BtreeResult,
    as_: &'a BtreeResult,
}

impl Row for CacheRow<'_> {
    const COLUMNS: &'static [&'static str] = &[
        "cache nodes",
        "B-tree insert",
        "BFTL insert",
        "AS insert",
        "B-tree search",
        "BFTL search",
        "AS search",
    ];
    fn cells(&self) -> Vec<Cell> {
        let (b, t, a) = (self.btree, self.bftl, self.as_);
        vec![
            Cell::Count(self.cache as u64),
            Cell::Fixed(b.insert_s, 2),
            Cell::Fixed(t.insert_s, 2),
            Cell::Fixed(a.insert_s, 2),
            Cell::Fixed(b.search_s, 2),
            Cell::Fixed(t.search_s, 2),
            Cell::Fixed(a.search_s, 2),
        ]
    }
}

/// Table `cache` (Tables 6–7's cache study).
pub(super) fn cache_table<'a>(sz: &Sizes, study: &'a Study<'a>) -> Table {
    let rows = CACHES.iter().map(|&c| CacheRow {
        cache: c,
        btree: study(StoreKind::InPlace, c),
        bftl: study(StoreKind::Bftl, c),
        as_: study(StoreKind::As, c),
    });
    Table::of(
        "cache",
        format!(
            "LRU cache (fanout {} after {} keys; AS buffer 32): insert / search seconds",
            sz.study_fanout, sz.study_preload
        ),
        rows,
    )
}

/// The file size halfway through a run's inserts.
fn half_file(r: &BtreeResult) -> u64 {
    let inserts = r.file_samples.last().map_or(0, |s| s.inserts);
    r.file_samples
        .iter()
        .find(|s| s.inserts * 2 >= inserts)
        .map_or(0, |s| s.file_bytes)
}

/// A row of table `cleaning`: one of Table 7's runs.
struct CleaningRow<'a> {
    name: &'static str,
    r: &'a BtreeResult,
}

impl Row for CleaningRow<'_> {
    const COLUMNS: &'static [&'static str] = &[
        "store",
        "file MB at 50%",
        "file MB at end",
        "live node MB",
        "space amplification",
        "segments cleaned",
        "nodes moved",
        "segment files removed",
    ];
    fn cells(&self) -> Vec<Cell> {
        let r = self.r;
        let mb = |b: u64| Cell::Fixed(b as f64 / 1e6, 1);
        vec![
            self.name.into(),
            mb(half_file(r)),
            mb(r.file_bytes),
            mb(r.live_node_bytes),
            Cell::Fixed(r.space_amplification, 2),
            Cell::Count(r.segments_cleaned),
            Cell::Count(r.nodes_moved),
            Cell::Count(r.segments_removed),
        ]
    }
}

/// Table `cleaning` (Table 7): file size over many inserts.
pub(super) fn cleaning_table<'a>(sz: &Sizes, named: &'a Named<'a>, runs: &CleaningRuns) -> Table {
    let rows = runs.iter().map(|&(name, ..)| CleaningRow {
        name,
        r: named(name),
    });
    Table::of(
        "cleaning",
        format!(
            "File size over {} inserts (F=256, AS buffer 32, a commit every 1,000 inserts; \
             without cleaning {}); sliding window: {} MiB segments, oldest first; cost-benefit: \
             256 KiB segments, at most 1.5× live",
            sz.cleaning_inserts,
            sz.uncleaned_inserts,
            sz.paper_segment >> 20
        ),
        rows,
    )
}

/// Insert time against the write buffer and the cache, file size while inserting, and the
/// uncleaned log's valid nodes per segment (Fig. 6).
pub(super) fn plots(
    sz: &Sizes,
    get: &Get,
    study: &Study,
    named: &Named,
    runs: &CleaningRuns,
) -> Vec<Plot> {
    let line = |name: &str, points: Vec<(f64, f64)>| Series {
        name: name.into(),
        points,
        reference: false,
    };
    let by_buffer = |store, buffer: Option<usize>| {
        BUFFERS
            .iter()
            .map(|&b| (b as f64, get(store, 256, buffer.unwrap_or(b), 0).insert_s))
            .collect()
    };
    let by_cache = |store| {
        CACHES
            .iter()
            .map(|&c| (c as f64, study(store, c).insert_s))
            .collect()
    };
    let plot = |file_stem: &str, title: String, x_label: &str, y_label: &str, series| -> Plot {
        LinePlot {
            file_stem: file_stem.into(),
            title,
            x_label: x_label.into(),
            y_label: y_label.into(),
            series,
        }
        .into()
    };
    vec![
        plot(
            "insert_vs_buffer",
            "Insert time vs AS write buffer (fanout 256); B-tree and BFTL flat".into(),
            "write buffer (nodes)",
            "simulated s",
            vec![
                line("AS B-tree", by_buffer(StoreKind::As, None)),
                line("B-tree (in place)", by_buffer(StoreKind::InPlace, Some(1))),
                line("BFTL", by_buffer(StoreKind::Bftl, Some(1))),
            ],
        ),
        plot(
            "cache",
            format!("Insert time vs LRU cache size (fanout {})", sz.study_fanout),
            "cache (nodes)",
            "simulated s",
            vec![
                line("AS B-tree (buffer 32)", by_cache(StoreKind::As)),
                line("B-tree (in place)", by_cache(StoreKind::InPlace)),
                line("BFTL", by_cache(StoreKind::Bftl)),
            ],
        ),
        plot(
            "cleaning",
            "File size while inserting (F=256, AS buffer 32)".into(),
            "inserts",
            "file MB",
            runs.iter()
                .map(|(name, ..)| {
                    let samples = named(name).file_samples.iter();
                    line(
                        name,
                        samples
                            .map(|s| (s.inserts as f64, s.file_bytes as f64 / 1e6))
                            .collect(),
                    )
                })
                .collect(),
        ),
        plot(
            "valid_nodes",
            format!(
                "Valid nodes per {} MiB segment of the AS file without cleaning, oldest first (Fig. 6)",
                sz.paper_segment >> 20
            ),
            "segment",
            "valid nodes",
            vec![line(
                "AS, no cleaning",
                named("AS, no cleaning")
                    .segment_live_nodes
                    .iter()
                    .enumerate()
                    .map(|(i, &(_, live))| (i as f64, live as f64))
                    .collect(),
            )],
        ),
    ]
}
