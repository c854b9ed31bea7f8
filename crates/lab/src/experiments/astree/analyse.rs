//! The verdicts of experiment `astree`: a pure function of the runs' results, with paper
//! 004's numbers in one place, and its unit tests.

use super::FANOUTS;
use crate::btreerun::{BtreeResult, StoreKind};
use crate::report::{Role, Verdict, HEADLINE_TOLERANCE};

/// Paper 004's numbers (F = 64 / 128 / 256 where three are given).
pub(super) mod paper {
    /// Table 3: insert time (s), AS with a 32-node buffer and the in-place B-tree.
    pub const AS_INSERT_S: [f64; 3] = [90.0, 63.0, 61.0];
    pub const BTREE_INSERT_S: [f64; 3] = [109.0, 81.0, 78.0];
    pub const BFTL_INSERT_S: [f64; 3] = [184.0, 149.0, 143.0];
    /// Searches (s), F = 256.
    pub const BTREE_SEARCH_S_F256: f64 = 56.0;
    pub const BFTL_SEARCH_S_F256: f64 = 88.0;
    /// Write time (s) of the inserts, F = 256: AS vs B-tree.
    pub const AS_WRITE_S_F256: f64 = 5.0;
    pub const BTREE_WRITE_S_F256: f64 = 10.0;
    /// An 80-node cache, F = 256: AS insert time 61 → 31 s.
    pub const AS_CACHE_80_S: f64 = 31.0;
    /// Insert read time (s), F = 256, buffer 32: AS 56 vs the B-tree's 68 (−17%).
    pub const AS_READ_S_F256: f64 = 56.0;
    pub const BTREE_READ_S_F256: f64 = 68.0;
    /// Searches: BFTL reads 1.49 sectors per node and sends 37% more read requests.
    pub const BFTL_SECTORS_PER_NODE: f64 = 1.49;
    pub const BFTL_MORE_READ_REQUESTS: f64 = 0.37;
    /// The AS write buffer as a cache: hit ratios (%) of reads and of writes.
    pub const BUFFER_READ_HIT_PCT: f64 = 1.1;
    pub const BUFFER_WRITE_HIT_PCT: f64 = 0.6;
    /// Insert time (s) with 16/32/48/64/80 cached nodes (Table 6).
    pub const AS_CACHED_S: [f64; 5] = [36.0, 34.0, 34.0, 31.0, 31.0];
    pub const BTREE_CACHED_S: [f64; 5] = [49.0, 46.0, 46.0, 46.0, 46.0];
    /// The AS file with sliding-window cleaning: 642 MB with 128 MB segments.
    pub const SLIDING_WINDOW_FILE_MB: f64 = 642.0;
    pub const SEGMENT_MB: f64 = 128.0;
}

/// The verdicts: `get(store, fanout, buffer, cache)` the main runs' results,
/// `study(store, cache)` the cache study's (AS with a 32-node buffer), `cleaning(name)` the
/// file-size runs', whose sliding window used `segment_bytes` segments; `bftl_sooner` BFTL
/// at F=256 compacting one sector run sooner (`super::BFTL_SOONER`), not judged.
pub(super) fn analyse<'a>(
    get: &dyn Fn(StoreKind, usize, usize, usize) -> &'a BtreeResult,
    study: &dyn Fn(StoreKind, usize) -> &'a BtreeResult,
    cleaning: &dyn Fn(&str) -> &'a BtreeResult,
    bftl_sooner: &'a BtreeResult,
    segment_bytes: u64,
) -> Vec<Verdict> {
    let mut v = insert_verdicts(get, cleaning);
    v.extend(search_and_split_verdicts(get, cleaning));
    v.extend(bftl_verdicts(get, bftl_sooner));
    v.extend(cache_verdicts(study));
    v.extend(cache_at_32_verdicts(study));
    v.extend(fanout_and_buffer_verdicts(get));
    v.extend(cache_rate_verdicts(study));
    v.extend(file_size_verdicts(get, cleaning, segment_bytes));
    v
}

/// The main runs at a fanout: the AS B-tree with a 32-node buffer, the in-place B-tree,
/// BFTL.
struct Main<'a, 'g>(&'g dyn Fn(StoreKind, usize, usize, usize) -> &'a BtreeResult);

impl<'a> Main<'a, '_> {
    fn as32(&self, f: usize) -> &'a BtreeResult {
        (self.0)(StoreKind::As, f, 32, 0)
    }
    fn inplace(&self, f: usize) -> &'a BtreeResult {
        (self.0)(StoreKind::InPlace, f, 1, 0)
    }
    fn bftl(&self, f: usize) -> &'a BtreeResult {
        (self.0)(StoreKind::Bftl, f, 1, 0)
    }
}

/// `f` of every fanout, joined: "F=64 ...; F=128 ...; F=256 ...".
fn per_fanout(f: &dyn Fn(usize) -> String) -> String {
    FANOUTS.iter().map(|&x| f(x)).collect::<Vec<_>>().join("; ")
}

const INTERFERENCE: &str = "read/write interference on the drive, which paper 004 itself credits for part of \
     the AS tree's gain (an SSD's writes are slower interleaved with reads than alone, citing Nam & Park, 2007; \
     its reference Chen, Koufaty & Zhang, SIGMETRICS 2009, measured such interference on SSDs of the time): the \
     in-place tree interleaves a random write with every insert's reads, the AS tree \
     writes its 32 buffered nodes together with no read between them. In this model a read waits only for flash \
     work on its own die and the drive acknowledges writes from its DRAM, so the interleaving costs the reads \
     little; how much it cost the paper's unnamed drive has no source";

/// Tables 2–5: insert times.
fn insert_verdicts<'a>(
    get: &dyn Fn(StoreKind, usize, usize, usize) -> &'a BtreeResult,
    cleaning: &dyn Fn(&str) -> &'a BtreeResult,
) -> Vec<Verdict> {
    let m = Main(get);
    let mut v = Vec::new();

    let (unbuffered_inplace, unbuffered_as) = (
        cleaning(super::DRIVE_CACHE_RUNS[0]),
        cleaning(super::DRIVE_CACHE_RUNS[1]),
    );
    let cut = 1.0 - m.as32(256).insert_s / m.inplace(256).insert_s;
    v.push(Verdict::numeric(
        "astree.as-vs-btree-insert-f256",
        "F=256: the AS B-tree (buffer 32) cuts the in-place B-tree's insert time by ~21%",
        "61 s vs 78 s (−22%)",
        cut,
        1.0 - paper::AS_INSERT_S[2] / paper::BTREE_INSERT_S[2],
        HEADLINE_TOLERANCE,
        format!(
            "{:.2} s vs {:.2} s ({:+.0}%). The in-place B-tree's writes take {:.0}% of its insert time \
             ({:.3} ms per node write: the drive acknowledges a single write from its DRAM in 90 µs, as the \
             Intel SSD 320 does) against 13% in the paper (10 of 78 s, ~0.1 ms per write). The paper's cut comes \
             mostly from reads (AS 56 s against the B-tree's 68: verdict as-insert-read-time-f256), which the \
             model gives no reason to differ: both trees read the same nodes. Without the drive's write buffer \
             (not judged) every write waits for the FTL's merges: {:.2} s vs {:.2} s ({:+.0}%), the in-place \
             writes {:.0}% of its insert time: a cut near the paper's from writes far slower than the paper's",
            m.as32(256).insert_s,
            m.inplace(256).insert_s,
            -cut * 100.0,
            100.0 * m.inplace(256).insert_write_s / m.inplace(256).insert_s.max(1e-12),
            1e3 * m.inplace(256).insert_write_s / m.inplace(256).insert_node_writes.max(1) as f64,
            unbuffered_as.insert_s,
            unbuffered_inplace.insert_s,
            -(1.0 - unbuffered_as.insert_s / unbuffered_inplace.insert_s.max(1e-12)) * 100.0,
            100.0 * unbuffered_inplace.insert_write_s / unbuffered_inplace.insert_s.max(1e-12),
        ),
    )
    .if_missed(format!(
        "{INTERFERENCE}. Without the drive's write buffer (not judged) the cut is {:+.0}%, from writes \
         far slower than the paper's",
        -(1.0 - unbuffered_as.insert_s / unbuffered_inplace.insert_s.max(1e-12)) * 100.0
    )));
    let cut_bftl = 1.0 - m.as32(256).insert_s / m.bftl(256).insert_s;
    v.push(Verdict::numeric(
        "astree.as-vs-bftl-insert-f256",
        "F=256: the AS B-tree cuts BFTL's insert time by ~57%",
        "61 s vs 143 s (−57%)",
        cut_bftl,
        1.0 - paper::AS_INSERT_S[2] / paper::BFTL_INSERT_S[2],
        HEADLINE_TOLERANCE,
        format!(
            "{:.2} s vs {:.2} s ({:+.0}%)",
            m.as32(256).insert_s,
            m.bftl(256).insert_s,
            -cut_bftl * 100.0
        ),
    ));
    let worst = FANOUTS
        .iter()
        .map(|&f| m.as32(f).insert_s / m.inplace(f).insert_s)
        .fold(0.0, f64::max);
    v.push(Verdict::ordering(
"astree.as-faster-every-fanout",
        "The AS B-tree (buffer 32) inserts faster than the in-place B-tree at every fanout: an ordering",
        "90/63/61 s vs 109/81/78 s",
        worst,
        worst < 1.0,
        per_fanout(&|f| format!("F={f}: {:.2} vs {:.2}", m.as32(f).insert_s, m.inplace(f).insert_s)),
    ));
    let worst = FANOUTS
        .iter()
        .map(|&f| m.as32(f).insert_s / get(StoreKind::As, f, 1, 0).insert_s)
        .fold(0.0, f64::max);
    v.push(Verdict::ordering(
        "astree.buffer-speeds-as",
        "A larger write buffer speeds AS inserts (buffer 1 → 32) at every fanout: an ordering",
        "108→90, 76→63, 68→61 s",
        worst,
        worst < 1.0,
        per_fanout(&|f| {
            format!(
                "F={f}: {:.2}→{:.2}",
                get(StoreKind::As, f, 1, 0).insert_s,
                m.as32(f).insert_s
            )
        }),
    ));
    let closest = FANOUTS
        .iter()
        .map(|&f| m.bftl(f).insert_s / m.inplace(f).insert_s.max(m.as32(f).insert_s))
        .fold(f64::MAX, f64::min);
    v.push(Verdict::ordering(
        "astree.bftl-slowest",
        "BFTL inserts slowest of the three at every fanout: an ordering",
        "184/149/143 s",
        closest,
        closest > 1.0,
        per_fanout(&|f| format!("F={f}: {:.2}", m.bftl(f).insert_s)),
    ));

    v
}

/// Searches, and the insert time's read/write split.
fn search_and_split_verdicts<'a>(
    get: &dyn Fn(StoreKind, usize, usize, usize) -> &'a BtreeResult,
    cleaning: &dyn Fn(&str) -> &'a BtreeResult,
) -> Vec<Verdict> {
    let m = Main(get);
    let mut v = Vec::new();
    let search_worst = FANOUTS
        .iter()
        .map(|&f| m.as32(f).search_s / m.inplace(f).search_s)
        .fold(1.0f64, |w, r| {
            if (r - 1.0).abs() > (w - 1.0).abs() {
                r
            } else {
                w
            }
        });
    v.push(
        Verdict::numeric(
"astree.as-search-equals-btree",
            "Searches: AS ≈ B-tree (within 10%); a model check: both read the same nodes of the same tree",
            "AS ≈ 84/57/56 s",
            search_worst,
            1.0,
            0.1,
            per_fanout(&|f| format!("F={f}: AS {:.2}, B-tree {:.2}", m.as32(f).search_s, m.inplace(f).search_s)),
        )
        .with_role(Role::Check),
    );
    let write_share = m.as32(256).insert_write_s / m.inplace(256).insert_write_s;
    v.push(Verdict::numeric(
        "astree.as-write-time-f256",
        "F=256, buffer 32: AS spends half the in-place B-tree's write time",
        "5 s vs 10 s",
        write_share,
        paper::AS_WRITE_S_F256 / paper::BTREE_WRITE_S_F256,
        HEADLINE_TOLERANCE,
        format!(
            "{:.2} s vs {:.2} s",
            m.as32(256).insert_write_s,
            m.inplace(256).insert_write_s
        ),
    ));
    let read_cut = 1.0 - m.as32(256).insert_read_s / m.inplace(256).insert_read_s.max(1e-12);
    v.push(Verdict::numeric(
        "astree.as-insert-read-time-f256",
        "F=256, buffer 32: the AS B-tree's inserts spend ~17% less time reading than the in-place B-tree's",
        "56 s vs 68 s (−17%)",
        read_cut,
        1.0 - paper::AS_READ_S_F256 / paper::BTREE_READ_S_F256,
        HEADLINE_TOLERANCE,
        format!(
            "{:.2} s vs {:.2} s ({:+.0}%)",
            m.as32(256).insert_read_s,
            m.inplace(256).insert_read_s,
            -read_cut * 100.0
        ),
    )
    .if_missed({
        let (a, b) = (
            cleaning(super::DRIVE_CACHE_RUNS[1]).insert_read_s,
            cleaning(super::DRIVE_CACHE_RUNS[0]).insert_read_s,
        );
        format!(
            "{INTERFERENCE}. The paper's in-place tree reads for 12 s longer for the same node reads. \
             Without the drive's write buffer (not judged), where every write waits for the FTL: AS {a:.2} s \
             vs {b:.2} s ({:+.0}%)",
            -(1.0 - a / b.max(1e-12)) * 100.0
        )
    }));
    v
}

/// What the sliding window's file sizes believe missing: the rule by which the paper's
/// window drops its oldest segment, which it does not give.
fn window_miss(window: &BtreeResult) -> String {
    format!(
        "when the paper's sliding window drops its oldest segment, which it does not say. Ours cleans \
         the oldest partly live segment whenever the file passes the larger of {:.1}× the live nodes (an \
         assumed bound, `btree --max-space-amp`) and the live nodes plus {} segments (the active one, one \
         being emptied and {} recycled): {:.1} MB of file for {:.1} MB of live nodes here. The paper's \
         642 MB is about five 128 MB segments, 29× its B-tree's 22.4 MB of nodes: a window that keeps \
         more old segments than ours",
        astree::asstore::DEFAULT_MAX_SPACE_AMP,
        2 + astree::asstore::RECYCLE_POOL,
        astree::asstore::RECYCLE_POOL,
        mb(window.file_bytes),
        mb(window.live_node_bytes)
    )
}

/// Bytes in MB (the paper's unit).
fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

/// BFTL at F=256 on paper 004's configuration (C = 3, a reservation buffer of F index
/// units): its searches' read requests and time, and its file after the main runs' inserts
/// (Table 7 gives the experiments' files at F=256). A miss names what we believe differs,
/// where the paper's BFTL compacts a node, with `sooner` (compacting one sector run
/// sooner, not judged) as the measured sensitivity.
fn bftl_verdicts<'a>(
    get: &dyn Fn(StoreKind, usize, usize, usize) -> &'a BtreeResult,
    sooner: &BtreeResult,
) -> Vec<Verdict> {
    let m = Main(get);
    let (bftl, btree) = (m.bftl(256), m.inplace(256));
    let per_node =
        |r: &BtreeResult| r.search_read_requests as f64 / r.search_node_reads.max(1) as f64;
    let more = |r: &BtreeResult| {
        r.search_read_requests as f64 / btree.search_read_requests.max(1) as f64 - 1.0
    };
    let search = |r: &BtreeResult| r.search_s / btree.search_s.max(1e-12);
    let file = |r: &BtreeResult| r.file_bytes as f64 / btree.file_bytes.max(1) as f64;
    // What every BFTL miss believes missing, with the number `what` as the sooner run gives it.
    let miss = |at_sooner: String| {
        format!(
            "where the paper's BFTL compacts a node. Paper 004 sets C = 3 and compacts \"when the \
             list grows longer\"; ours compacts a node when its list passes {} sector runs, and its \
             searches read {:.2} runs a node, where the paper's account (\"1~3 reads a node, 1.5 on \
             average\") puts most nodes on the shortest lists. Compacting when a list reaches C instead \
             (`--bftl-list {}`, run beside, not judged) gives {at_sooner}. That reading is not \
             adopted: chosen because it comes nearer, it would be fitted to these very numbers",
            crate::btreerun::BFTL_LIST,
            per_node(bftl),
            super::BFTL_SOONER,
        )
    };
    let mut v = Vec::new();
    v.push(
        Verdict::numeric(
            "astree.bftl-vs-btree-search-f256",
            "F=256: BFTL searches ~1.6× slower than the B-tree (nodes scattered over sectors)",
            "88 s vs 56 s",
            search(bftl),
            paper::BFTL_SEARCH_S_F256 / paper::BTREE_SEARCH_S_F256,
            HEADLINE_TOLERANCE,
            format!(
                "{:.2} s vs {:.2} s ({:.2}×): each sector run on a node's list is a read request at \
                 the drive's random-read cost",
                bftl.search_s,
                btree.search_s,
                search(bftl)
            ),
        )
        .if_missed(miss(format!("searches {:.2}× the B-tree's time", search(sooner)))),
    );
    v.push(
        Verdict::numeric(
            "astree.bftl-sectors-per-node",
            "F=256 searches: BFTL reads ~1.49 sectors per node (a node's IUs lie in 1–3 sectors)",
            "1.49",
            per_node(bftl),
            paper::BFTL_SECTORS_PER_NODE,
            HEADLINE_TOLERANCE,
            format!(
                "{} read requests (one per sector run) for {} node reads",
                bftl.search_read_requests, bftl.search_node_reads
            ),
        )
        .if_missed(miss(format!("{:.2} runs a node", per_node(sooner)))),
    );
    v.push(
        Verdict::numeric(
            "astree.bftl-more-read-requests",
            "F=256 searches: BFTL sends ~37% more read requests than the B-tree",
            "+37%",
            more(bftl),
            paper::BFTL_MORE_READ_REQUESTS,
            HEADLINE_TOLERANCE,
            format!(
                "{} vs {} ({:+.0}%); the paper's own 1.49 sectors a node would make +49%",
                bftl.search_read_requests,
                btree.search_read_requests,
                more(bftl) * 100.0
            ),
        )
        .if_missed(miss(format!("{:+.0}% requests", more(sooner) * 100.0))),
    );
    v.push(
        Verdict::numeric(
            "astree.bftl-file-vs-btree",
            "BFTL's file is ~72× the in-place B-tree's after the same inserts (Table 7, F=256: 1,615 MB vs 22.4 MB)",
            "1615 MB / 22.4 MB",
            file(bftl),
            1615.0 / 22.4,
            HEADLINE_TOLERANCE,
            format!(
                "{:.1}× ({:.1} MB vs {:.1} MB after the main runs' preload and timed inserts). BFTL \
                 appends every node change as index units packed into 512-byte sectors, a compacted \
                 node's whole content again; its log is never cleaned",
                file(bftl),
                mb(bftl.file_bytes),
                mb(btree.file_bytes)
            ),
        )
        .if_missed(format!(
            "{}. Beyond when a node is compacted, the bytes an index unit takes (ours: a 15-byte \
             header with the key and value; the paper gives no format) set the file's size",
            miss(format!("a file {:.1}× the B-tree's", file(sooner)))
        )),
    );
    v
}

/// Tables 6–7's cache study and the write buffer's hits.
fn cache_verdicts<'a>(study: &dyn Fn(StoreKind, usize) -> &'a BtreeResult) -> Vec<Verdict> {
    let mut v = Vec::new();
    let as0 = study(StoreKind::As, 0);
    for (id, what, ours, paper) in [
        (
            "astree.write-buffer-read-hit",
            "reads",
            as0.write_buffer_read_hit_ratio * 100.0,
            paper::BUFFER_READ_HIT_PCT,
        ),
        (
            "astree.write-buffer-write-hit",
            "writes",
            as0.write_buffer_write_hit_ratio * 100.0,
            paper::BUFFER_WRITE_HIT_PCT,
        ),
    ] {
        v.push(Verdict::numeric(
            id,
            &format!(
                "The AS write buffer (32 nodes) works little as a cache: ~{paper}% of node {what} find their node in it \
                 (a small rate: within ±50%)"
            ),
            &format!("{paper}%"),
            ours,
            paper,
            0.5,
            format!("{ours:.2}% on the cache study's tree"),
        ));
    }
    let cached = |k| study(k, 80).insert_s;
    let as_cache = cached(StoreKind::As) / as0.insert_s;
    v.push(Verdict::numeric(
        "astree.cache-80-as",
        "An 80-node LRU cache halves the AS B-tree's insert time",
        "61 → 31 s",
        as_cache,
        paper::AS_CACHE_80_S / paper::AS_INSERT_S[2],
        HEADLINE_TOLERANCE,
        format!("{:.2} → {:.2} s", as0.insert_s, cached(StoreKind::As)),
    ));
    v.push(Verdict::ordering(
        "astree.as-fastest-with-cache",
        "With an 80-node cache every store is faster and the AS B-tree stays fastest: an ordering",
        "AS 61→31 s, B-tree 78→46, BFTL 143→117",
        cached(StoreKind::As) / cached(StoreKind::InPlace),
        cached(StoreKind::As) < cached(StoreKind::InPlace)
            && cached(StoreKind::InPlace) < study(StoreKind::InPlace, 0).insert_s
            && cached(StoreKind::Bftl) < study(StoreKind::Bftl, 0).insert_s,
        format!(
            "cache 0→80: AS {:.2}→{:.2}, B-tree {:.2}→{:.2}, BFTL {:.2}→{:.2}",
            as0.insert_s,
            cached(StoreKind::As),
            study(StoreKind::InPlace, 0).insert_s,
            cached(StoreKind::InPlace),
            study(StoreKind::Bftl, 0).insert_s,
            cached(StoreKind::Bftl)
        ),
    ));
    let stores = [StoreKind::As, StoreKind::InPlace, StoreKind::Bftl];
    let after_32 = stores
        .iter()
        .map(|&k| study(k, 32).insert_s / study(k, 80).insert_s)
        .fold(0.0, f64::max);
    // Gains "stop" only after gains: up to 32 nodes every store must speed up (the
    // paper's least is BFTL's 143 → 117 s, 1.22×), or a cache that does nothing passes.
    let up_to_32 = stores
        .iter()
        .map(|&k| study(k, 0).insert_s / study(k, 32).insert_s)
        .fold(f64::MAX, f64::min);
    let mut stop = Verdict::numeric(
        "astree.cache-gains-stop-after-32",
        "Cache gains stop after 32 nodes: 32 → 80 cached nodes speed inserts by at most ~10% (every store), after 0 → 32 nodes sped every store up by more than 1.15×",
        "AS 34 → 31 s, B-tree 46 → 46, BFTL 117 → 117",
        after_32,
        1.0,
        0.15,
        format!(
            "0 → 32 nodes: at least {up_to_32:.2}×; insert time at 32 / at 80 nodes: {}",
            stores
                .iter()
                .map(|&k| format!(
                    "{k:?} {:.2}/{:.2}",
                    study(k, 32).insert_s,
                    study(k, 80).insert_s
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    stop.holds &= up_to_32 > 1.15;
    v.push(stop);
    let (a16, b48) = (
        study(StoreKind::As, 16).insert_s,
        study(StoreKind::InPlace, 48).insert_s,
    );
    v.push(Verdict::ordering(
        "astree.as-cache16-beats-btree-cache48",
        "The AS B-tree with a 16-node cache inserts faster than the B-tree with 48: an ordering",
        &format!(
            "{} s vs {} s",
            paper::AS_CACHED_S[0],
            paper::BTREE_CACHED_S[2]
        ),
        a16 / b48,
        a16 < b48,
        format!("{a16:.2} s vs {b48:.2} s"),
    ));

    v
}

/// Tables 2–3 beyond F=256: the AS B-tree's speed-up with the fanout, its cut against the
/// in-place B-tree at F=64 and F=128, and the write buffer's gain at every step.
fn fanout_and_buffer_verdicts<'a>(
    get: &dyn Fn(StoreKind, usize, usize, usize) -> &'a BtreeResult,
) -> Vec<Verdict> {
    let m = Main(get);
    let mut v = Vec::new();
    let (f64_, f128, f256) = (
        m.as32(64).insert_s,
        m.as32(128).insert_s,
        m.as32(256).insert_s,
    );
    v.push(
        Verdict::ordering(
            "astree.as-faster-with-fanout",
            "The AS B-tree (buffer 32) inserts faster as the fanout grows, 64 → 128 → 256 (a lower tree reads fewer nodes an insert): an ordering",
            "90 → 63 → 61 s (Table 3)",
            f256 / f64_,
            f64_ > f128 && f128 > f256,
            format!("{f64_:.2} → {f128:.2} → {f256:.2} s"),
        )
        .if_missed(
            "the tree's height: a larger fanout saves a level of node reads an insert only where the \
             tree is tall enough; at this scale's keys the trees at F=128 and F=256 may have the same \
             height (the paper's 400,000 keys make the difference)",
        ),
    );
    for (fi, f) in [(0usize, 64usize), (1, 128)] {
        let cut = 1.0 - m.as32(f).insert_s / m.inplace(f).insert_s.max(1e-12);
        let paper_cut = 1.0 - paper::AS_INSERT_S[fi] / paper::BTREE_INSERT_S[fi];
        v.push(
            Verdict::numeric(
                &format!("astree.as-vs-btree-insert-f{f}"),
                &format!(
                    "F={f}: the AS B-tree (buffer 32) cuts the in-place B-tree's insert time by ~{:.0}%",
                    paper_cut * 100.0
                ),
                &format!(
                    "{:.0} s vs {:.0} s (Table 3)",
                    paper::AS_INSERT_S[fi],
                    paper::BTREE_INSERT_S[fi]
                ),
                cut,
                paper_cut,
                HEADLINE_TOLERANCE,
                format!(
                    "{:.2} s vs {:.2} s ({:+.0}%)",
                    m.as32(f).insert_s,
                    m.inplace(f).insert_s,
                    -cut * 100.0
                ),
            )
            .if_missed(format!(
                "{INTERFERENCE}; the same as at F=256 (as-vs-btree-insert-f256)"
            )),
        );
    }
    let steps: Vec<(usize, [f64; 4])> = FANOUTS
        .iter()
        .map(|&f| {
            (
                f,
                super::BUFFERS.map(|b| get(StoreKind::As, f, b, 0).insert_s),
            )
        })
        .collect();
    let monotone = steps.iter().all(|(_, t)| t.windows(2).all(|w| w[0] > w[1]));
    let smallest_step = steps
        .iter()
        .flat_map(|(_, t)| t.windows(2).map(|w| w[0] / w[1]).collect::<Vec<_>>())
        .fold(f64::MAX, f64::min);
    v.push(
        Verdict::ordering(
            "astree.buffer-gain-every-step",
            "A larger write buffer speeds AS inserts at every step, 1 → 8 → 16 → 32 nodes, at every fanout: an ordering",
            "108/94/91/90, 76/66/65/63, 68/65/63/61 s (Table 2)",
            smallest_step,
            monotone,
            steps
                .iter()
                .map(|(f, t)| {
                    format!(
                        "F={f}: {}",
                        t.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join("/")
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        )
        .if_missed(
            "gains past 8 nodes that the model's drive does not give: each flush of a larger buffer \
             is one longer sequential write, which the drive's DRAM buffer and eight dies already \
             absorb at 8 nodes; the paper's gains past 8 nodes are 1–3% (its text credits them to \
             the drive's parallelism and to fewer reads between writes)",
        ),
    );
    v
}

/// The cache study's rate: all three stores improve alike, and searches stop gaining
/// after 32 nodes.
fn cache_rate_verdicts<'a>(study: &dyn Fn(StoreKind, usize) -> &'a BtreeResult) -> Vec<Verdict> {
    let stores = [StoreKind::As, StoreKind::InPlace, StoreKind::Bftl];
    let mut v = Vec::new();
    let hits: Vec<f64> = stores
        .iter()
        .map(|&k| study(k, 32).cache_hit_ratio)
        .collect();
    let (lo, hi) = hits
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), &h| (lo.min(h), hi.max(h)));
    let gains: Vec<f64> = stores
        .iter()
        .map(|&k| study(k, 0).insert_s / study(k, 32).insert_s.max(1e-12))
        .collect();
    let every_store_gains = gains.iter().all(|&g| g > 1.1);
    v.push(
        Verdict::ordering(
            "astree.cache-same-rate",
            "All three stores improve with the cache alike: at 32 cached nodes their cache hit ratios are within 10% of one another, each store faster than without the cache by more than 1.1×",
            "\"improved at the same rate (the cache's hit ratio is the same)\" (section 4)",
            hi / lo.max(1e-12),
            lo > 0.0 && hi / lo <= 1.1 && every_store_gains,
            format!(
                "hit ratio at 32 nodes: {}; insert time 0 → 32 nodes: {}",
                stores
                    .iter()
                    .zip(&hits)
                    .map(|(k, h)| format!("{k:?} {:.1}%", h * 100.0))
                    .collect::<Vec<_>>()
                    .join(", "),
                stores
                    .iter()
                    .map(|&k| format!(
                        "{k:?} {:.2} → {:.2} s",
                        study(k, 0).insert_s,
                        study(k, 32).insert_s
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .if_missed(
            "a cache of nodes the stores read alike: BFTL reads a node from several sector runs and \
             the AS store's write buffer serves some reads, so the same LRU cache of nodes saves them \
             different shares of their reads",
        ),
    );
    let after_32 = stores
        .iter()
        .map(|&k| study(k, 32).search_s / study(k, 80).search_s.max(1e-12))
        .fold(0.0, f64::max);
    let up_to_32 = stores
        .iter()
        .map(|&k| study(k, 0).search_s / study(k, 32).search_s.max(1e-12))
        .fold(f64::MAX, f64::min);
    let mut stop = Verdict::numeric(
        "astree.search-gains-stop-after-32",
        "Search gains stop after 32 cached nodes: 32 → 80 nodes speed searches by at most ~10% (every store), after 0 → 32 nodes sped every store's searches up by more than 1.15×",
        "AS 28 → 27 s, B-tree 28 → 28, BFTL 44 → 44 (Table 7)",
        after_32,
        1.0,
        0.1,
        format!(
            "0 → 32 nodes: at least {up_to_32:.2}×; search time at 32 / at 80 nodes: {}",
            stores
                .iter()
                .map(|&k| format!(
                    "{k:?} {:.2}/{:.2}",
                    study(k, 32).search_s,
                    study(k, 80).search_s
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
    .if_missed(
        "the tree's shape against the cache: the gains stop once the root and inner nodes all fit; \
         a tree with more inner nodes than the paper's (or fewer) moves where they stop",
    );
    stop.holds &= up_to_32 > 1.15;
    v.push(stop);
    v
}

/// Section 4's cache study at 32 nodes.
fn cache_at_32_verdicts<'a>(study: &dyn Fn(StoreKind, usize) -> &'a BtreeResult) -> Vec<Verdict> {
    let as0 = study(StoreKind::As, 0);
    let mut v = Vec::new();
    // Section 4's cache study at 32 nodes ("root and inner nodes all fit"): insert times
    // AS 34 s, B-tree 46 s (−26%), BFTL 117 s (−70%); the AS tree without a cache takes
    // 32% longer than the B-tree with 32 nodes; searches AS = B-tree 28 s, BFTL 44 s (−36%).
    let c32 = |k| study(k, 32);
    let (a32, b32, f32_) = (
        c32(StoreKind::As),
        c32(StoreKind::InPlace),
        c32(StoreKind::Bftl),
    );
    for (id, claim, reference, ours, paper) in [
        (
            "astree.as-vs-btree-cache32",
            "With a 32-node cache the AS B-tree cuts the B-tree's insert time by ~26%",
            "34 s vs 46 s",
            1.0 - a32.insert_s / b32.insert_s.max(1e-12),
            1.0 - 34.0 / 46.0,
        ),
        (
            "astree.as-vs-bftl-cache32",
            "With a 32-node cache the AS B-tree cuts BFTL's insert time by ~70%",
            "34 s vs 117 s",
            1.0 - a32.insert_s / f32_.insert_s.max(1e-12),
            1.0 - 34.0 / 117.0,
        ),
        (
            "astree.as-nocache-vs-btree-cache32",
            "The AS B-tree without a cache takes ~32% longer to insert than the B-tree with a 32-node cache (the cache holds every inner node)",
            "61 s vs 46 s",
            as0.insert_s / b32.insert_s.max(1e-12) - 1.0,
            61.0 / 46.0 - 1.0,
        ),
        (
            "astree.bftl-search-cache32",
            "With a 32-node cache the B-tree (and AS) search ~36% faster than BFTL",
            "28 s vs 44 s",
            1.0 - b32.search_s / f32_.search_s.max(1e-12),
            1.0 - 28.0 / 44.0,
        ),
    ] {
        v.push(Verdict::numeric(
            id,
            claim,
            reference,
            ours,
            paper,
            HEADLINE_TOLERANCE,
            format!(
                "{:.0}% (cache 32: inserts AS {:.2} s, B-tree {:.2} s, BFTL {:.2} s; searches B-tree {:.2} s, BFTL {:.2} s; AS without a cache {:.2} s)",
                ours * 100.0,
                a32.insert_s,
                b32.insert_s,
                f32_.insert_s,
                b32.search_s,
                f32_.search_s,
                as0.insert_s
            ),
        ));
    }
    v
}

/// Table 7 and Fig. 6: file sizes, the sliding window, the uncleaned log.
fn file_size_verdicts<'a>(
    get: &dyn Fn(StoreKind, usize, usize, usize) -> &'a BtreeResult,
    cleaning: &dyn Fn(&str) -> &'a BtreeResult,
    segment_bytes: u64,
) -> Vec<Verdict> {
    let mut v = Vec::new();
    // File sizes on the file-size runs (F=256, the same inserts), where the AS log is
    // cleaned by the paper's sliding window, with BFTL beside them.
    let (b, a, f) = (
        cleaning("B-tree (in place)").file_bytes,
        cleaning("AS, sliding window").file_bytes,
        cleaning("BFTL").file_bytes,
    );
    v.push(
        Verdict::ordering(
            "astree.file-size-order",
            "Check: file size after the same inserts: the in-place B-tree is smallest, the AS log (sliding-window cleaning) larger, BFTL largest — not a prediction: it holds by construction (an in-place tree rewrites its nodes where they are, BFTL's log is never cleaned, the AS log is cleaned)",
            "22.4 MB / 642 MB / 1615 MB",
            a as f64 / b.max(1) as f64,
            b < a && a < f,
            format!("{:.1} / {:.1} / {:.1} MB", mb(b), mb(a), mb(f)),
        )
        .with_role(Role::Check),
    );
    // The sliding window keeps a few segments: compared in segments, which does not depend
    // on the segment size the run's length called for.
    let window = cleaning("AS, sliding window");
    let segments = window.file_bytes as f64 / segment_bytes as f64;
    v.push(Verdict::numeric(
        "astree.sliding-window-file-segments",
        "With sliding-window cleaning the AS file stays ~5 segments (642 MB of 128 MB segments)",
        "600–700 MB over 1,000,000 inserts with 128 MB segments",
        segments,
        paper::SLIDING_WINDOW_FILE_MB / paper::SEGMENT_MB,
        HEADLINE_TOLERANCE,
        format!(
            "{:.1} MB = {segments:.1} segments of {} MiB",
            mb(window.file_bytes),
            segment_bytes >> 20
        ),
    )
    .if_missed(window_miss(window)));
    // Table 7: the AS file (sliding window) against the in-place B-tree's after the
    // experiments' inserts (F=256, the main run).
    let btree = Main(get).inplace(256);
    let ratio = window.file_bytes as f64 / btree.file_bytes.max(1) as f64;
    v.push(
        Verdict::numeric(
            "astree.as-file-vs-btree",
            "The AS B-tree's file (sliding-window cleaning) is ~29× the in-place B-tree's (Table 7: 642 MB vs 22.4 MB)",
            "642 MB / 22.4 MB",
            ratio,
            paper::SLIDING_WINDOW_FILE_MB / 22.4,
            HEADLINE_TOLERANCE,
            format!(
                "{ratio:.1}× ({:.1} MB vs {:.1} MB)",
                mb(window.file_bytes),
                mb(btree.file_bytes)
            ),
        )
        .if_missed(window_miss(window)),
    );
    let none = cleaning("AS, no cleaning");
    let half = {
        let inserts = none.file_samples.last().map_or(0, |s| s.inserts);
        none.file_samples
            .iter()
            .find(|s| s.inserts * 2 >= inserts)
            .map_or(0, |s| s.file_bytes)
    };
    let growth = none.file_bytes as f64 / half.max(1) as f64;
    v.push(
        Verdict::ordering(
"astree.uncleaned-log-grows",
            "Check: without cleaning the AS file grows with every insert (≥ 1.8× from half to all inserts) — not a prediction: any append-only log that is never cleaned does",
            "grows without bound",
            growth,
            growth >= 1.8,
            format!("{:.1} → {:.1} MB", mb(half), mb(none.file_bytes)),
        )
        .with_role(Role::Check),
    );
    // Fig. 6: valid nodes per 128 MB section of the uncleaned AS file; "most nodes lie
    // within 1/6 of the file from its end".
    let (tail_share, tail_segments) = share_in_last_sixth(&none.segment_live_nodes);
    v.push(Verdict::numeric(
        "astree.valid-nodes-in-last-sixth",
        "Without cleaning most valid nodes of the AS file lie in its last sixth (Fig. 6)",
        "\"most\" (judged as more than half)",
        tail_share,
        1.0,
        0.5,
        format!(
            "{:.0}% of the live nodes in the last {tail_segments} of {} segments ({} MiB each); a file \
             whose live nodes were spread evenly would hold a sixth there",
            tail_share * 100.0,
            none.segment_live_nodes.len(),
            segment_bytes >> 20
        ),
    ));
    let cb = cleaning("AS, cost-benefit ≤1.5×");
    v.push(
        Verdict::numeric(
"astree.cost-benefit-within-limit",
            "flashlab's cost-benefit cleaning keeps the AS files within 1.5× the live node bytes (its own limit: a model check)",
            "≤ 1.5×",
            cb.space_amplification,
            1.0,
            0.5,
            format!("{:.2}× ({:.1} MB for {:.1} MB of live nodes)", cb.space_amplification, mb(cb.file_bytes), mb(cb.live_node_bytes)),
        )
        .with_role(Role::Check),
    );
    v
}

/// The share of live nodes in the segments that make the last sixth of the log (at least
/// one), and how many segments that is.
pub(super) fn share_in_last_sixth(segments: &[(u64, u64)]) -> (f64, usize) {
    let tail = segments.len().div_ceil(6).max(1).min(segments.len());
    let total: u64 = segments.iter().map(|s| s.1).sum();
    let in_tail: u64 = segments[segments.len() - tail..].iter().map(|s| s.1).sum();
    (in_tail as f64 / total.max(1) as f64, tail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btreerun::FileSample;

    /// Results shaped like paper 004's tables (seconds as the paper's, sizes in bytes);
    /// `as_f256` the AS B-tree's insert time at F=256.
    fn paperlike(as_f256: f64) -> impl Fn(StoreKind, usize, usize, usize) -> BtreeResult {
        move |store, fanout, buffer, cache| {
            let fi = FANOUTS.iter().position(|&f| f == fanout).unwrap_or(2);
            let (insert, search, write, file, requests) = match store {
                StoreKind::As => {
                    // Table 2's times by buffer, F=256's scaled to `as_f256`.
                    let (_, _, _, by_buffer) = super::super::PAPER_INSERT[fi];
                    let bi = super::super::BUFFERS
                        .iter()
                        .position(|&b| b == buffer)
                        .unwrap_or(3);
                    let scale = if fi == 2 { as_f256 / by_buffer[3] } else { 1.0 };
                    (by_buffer[bi] * scale, 56.0, 5.0, 642e6, 1000)
                }
                StoreKind::InPlace => (paper::BTREE_INSERT_S[fi], 56.0, 10.0, 22.4e6, 1000),
                StoreKind::Bftl => (paper::BFTL_INSERT_S[fi], 88.0, 1.0, 1615e6, 1370),
            };
            // Cache gains as Tables 5-6: large up to 32 nodes, none after (B-tree 78 → 49 →
            // 46 s, the AS tree by the same factors, BFTL 143 → 117 s; searches halve at 32).
            let cached = match (cache, store) {
                (0, _) => 1.0,
                (16, StoreKind::Bftl) => 0.9,
                (16, _) => 49.0 / 78.0,
                (_, StoreKind::Bftl) => 117.0 / 143.0,
                (_, _) => 46.0 / 78.0,
            };
            let search_cached = if cache >= 32 { 0.5 } else { 1.0 };
            BtreeResult {
                insert_s: insert * cached,
                insert_read_s: (insert - write) * cached,
                search_s: search * search_cached,
                insert_write_s: write,
                file_bytes: file as u64,
                search_node_reads: if store == StoreKind::Bftl { 920 } else { 1000 },
                search_read_requests: requests,
                write_buffer_read_hit_ratio: 0.011,
                write_buffer_write_hit_ratio: 0.006,
                // The same hit ratio for every store ("the same rate").
                cache_hit_ratio: if cache > 0 { 0.3 } else { 0.0 },
                ..Default::default()
            }
        }
    }

    fn cleaning(name: &str) -> BtreeResult {
        let samples = |half: u64, end: u64| {
            vec![
                FileSample {
                    inserts: 500,
                    file_bytes: half,
                },
                FileSample {
                    inserts: 1000,
                    file_bytes: end,
                },
            ]
        };
        match name {
            "AS, sliding window" => BtreeResult {
                file_bytes: 642 << 20,
                ..Default::default()
            },
            "B-tree (in place)" => BtreeResult {
                file_bytes: 22 << 20,
                ..Default::default()
            },
            "BFTL" => BtreeResult {
                file_bytes: 1615 << 20,
                ..Default::default()
            },
            "AS, no cleaning" => BtreeResult {
                file_bytes: 2000 << 20,
                file_samples: samples(900 << 20, 2000 << 20),
                // Fig. 6's shape: few live nodes in the old sections, most in the newest.
                segment_live_nodes: (0..12)
                    .map(|s| (s, if s < 10 { 20 } else { 400 }))
                    .collect(),
                ..Default::default()
            },
            _ => BtreeResult {
                space_amplification: 1.4,
                ..Default::default()
            },
        }
    }

    fn verdicts(as_f256: f64) -> Vec<Verdict> {
        verdicts_with(as_f256, |_, _, _| {})
    }

    /// As `verdicts`, with `tweak(result, store, cache)` applied to every run.
    fn verdicts_with(
        as_f256: f64,
        tweak: impl Fn(&mut BtreeResult, StoreKind, usize),
    ) -> Vec<Verdict> {
        let f = paperlike(as_f256);
        let mut runs = std::collections::HashMap::new();
        for store in [StoreKind::As, StoreKind::InPlace, StoreKind::Bftl] {
            for fanout in FANOUTS {
                for buffer in super::super::BUFFERS {
                    for cache in [0, 16, 32, 48, 80] {
                        let mut r = f(store, fanout, buffer, cache);
                        tweak(&mut r, store, cache);
                        runs.insert((store, fanout, buffer, cache), r);
                    }
                }
            }
        }
        let names = [
            super::super::DRIVE_CACHE_RUNS[0],
            super::super::DRIVE_CACHE_RUNS[1],
            "AS, sliding window",
            "AS, no cleaning",
            "AS, cost-benefit ≤1.5×",
            "B-tree (in place)",
            "BFTL",
        ];
        let clean: std::collections::HashMap<&str, BtreeResult> =
            names.iter().map(|&n| (n, cleaning(n))).collect();
        analyse(
            &|s, f, b, c| &runs[&(s, f, b, c)],
            &|s, c| &runs[&(s, 256, if s == StoreKind::As { 32 } else { 1 }, c)],
            &|n| &clean[n],
            &runs[&(StoreKind::Bftl, 256, 1, 0)],
            128 << 20,
        )
    }

    #[test]
    fn every_quick_preview_names_a_verdict() {
        let v = verdicts(61.0);
        Verdict::assert_ids_exist(&v, &super::super::QUICK_PREVIEWS);
    }

    #[test]
    fn every_verdict_that_reads_the_cache_study_is_a_quick_preview() {
        // The cache study runs at F=128 at quick scale, the paper's numbers are F=256's: a
        // verdict whose text moves when the cached runs move reads the study.
        let base = verdicts(61.0);
        let moved = verdicts_with(61.0, |r, _, cache| {
            if cache > 0 {
                r.insert_s *= 1.37;
                r.search_s *= 1.41;
            }
        });
        let reads_study: Vec<&str> = base
            .iter()
            .zip(&moved)
            .filter(|(a, b)| a.measured != b.measured)
            .map(|(a, _)| a.id())
            .collect();
        assert!(reads_study.len() >= 6, "{reads_study:?}");
        for id in reads_study {
            assert!(
                super::super::QUICK_PREVIEWS.contains(&id),
                "{id} reads the cache study but is not a quick preview"
            );
        }
    }

    #[test]
    fn the_last_sixth_is_the_newest_segments() {
        let even: Vec<(u64, u64)> = (0..12).map(|s| (s, 100)).collect();
        assert_eq!(share_in_last_sixth(&even), (2.0 / 12.0, 2));
        assert_eq!(share_in_last_sixth(&[(0, 5), (1, 15)]), (0.75, 1));
        assert_eq!(share_in_last_sixth(&[]), (0.0, 0));
    }

    #[test]
    fn paper_shaped_results_hold_every_claim() {
        let v = verdicts(61.0);
        let ids = Verdict::all_hold_with_unique_ids(&v);
        assert!(ids.contains("astree.as-vs-btree-insert-f256"));
    }

    #[test]
    fn a_model_without_any_effect_fails_every_prediction() {
        // Every store, fanout, buffer and cache the same run; every cleaning the same file.
        let same = BtreeResult {
            insert_s: 60.0,
            insert_read_s: 55.0,
            insert_write_s: 5.0,
            search_s: 50.0,
            file_bytes: 100 << 20,
            search_node_reads: 1000,
            search_read_requests: 1000,
            space_amplification: 1.0,
            // Live nodes spread evenly over the log.
            segment_live_nodes: (0..12).map(|s| (s, 100)).collect(),
            file_samples: vec![
                FileSample {
                    inserts: 500,
                    file_bytes: 100 << 20,
                },
                FileSample {
                    inserts: 1000,
                    file_bytes: 100 << 20,
                },
            ],
            ..Default::default()
        };
        let v = analyse(
            &|_, _, _, _| &same,
            &|_, _| &same,
            &|_| &same,
            &same,
            128 << 20,
        );
        Verdict::assert_no_prediction_holds(&v);
    }

    #[test]
    fn each_claim_can_fail() {
        // The AS B-tree as slow as the in-place one at F=256: no 21% cut, not faster at
        // every fanout, no longer fastest with a cache.
        let v = verdicts(78.0);
        let holds = |id: &str| Verdict::holds_in(&v, &format!("astree.{id}"));
        for id in [
            "as-vs-btree-insert-f256",
            "as-faster-every-fanout",
            "as-fastest-with-cache",
        ] {
            assert!(!holds(id), "{id} should fail");
        }
        // A write buffer that catches 6% of reads and writes (a tree too small for it).
        let v = verdicts_with(61.0, |r, _, _| {
            r.write_buffer_read_hit_ratio = 0.06;
            r.write_buffer_write_hit_ratio = 0.06;
        });
        assert!(!Verdict::holds_in(&v, "astree.write-buffer-read-hit"));
        assert!(!Verdict::holds_in(&v, "astree.write-buffer-write-hit"));
        // Cache gains that go on past 32 nodes; the AS store's 16-node cache no help.
        let v = verdicts_with(61.0, |r, store, cache| {
            if cache == 80 {
                r.insert_s *= 0.7;
            }
            if store == StoreKind::As && cache == 16 {
                r.insert_s *= 3.0;
            }
        });
        assert!(!Verdict::holds_in(&v, "astree.cache-gains-stop-after-32"));
        assert!(!Verdict::holds_in(
            &v,
            "astree.as-cache16-beats-btree-cache48"
        ));
        // BFTL reading one sector per node: no extra requests.
        let v = verdicts_with(61.0, |r, _, _| r.search_read_requests = r.search_node_reads);
        assert!(!Verdict::holds_in(&v, "astree.bftl-sectors-per-node"));
        assert!(!Verdict::holds_in(&v, "astree.bftl-more-read-requests"));
        // AS reads as long as the B-tree's.
        let v = verdicts_with(61.0, |r, _, _| r.insert_read_s = 50.0);
        assert!(!Verdict::holds_in(&v, "astree.as-insert-read-time-f256"));
        // A 10% cut is outside ±30% of 21%.
        assert!(
            !verdicts(70.2)
                .iter()
                .find(|v| v.score.as_ref().unwrap().id == "astree.as-vs-btree-insert-f256")
                .unwrap()
                .holds
        );
    }
}
