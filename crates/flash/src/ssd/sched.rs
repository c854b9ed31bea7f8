//! The per-die scheduler (`[ssd.scheduler]`, `policy = "priority"`): maintenance work —
//! garbage collection's page reads, copy programs and erases, background GC, read
//! reclaim — waits in a queue per die and runs in the die's gaps between host commands, a
//! flash operation at a time, instead of being booked on the die at once. A host read
//! goes before every queued step; one that meets a program or erase in progress suspends
//! it (at the suspension latency) when enough of it is left, at most
//! [`SchedulerConfig::max_suspensions`] times per operation; a host program suspends an
//! erase the same way or waits for the step in progress, and waits for the queued work up
//! to the erase of a block it is about to program (the hard threshold: a block is
//! programmed only after its erase).
//!
//! The FTL's decisions are unchanged (it still cleans when and what it did): only when its
//! operations occupy the die moves. Sources and the rule behind each constant:
//! docs/sources.md, "The per-die scheduler".
//!
//! Host work promised to a caller (a completion time already returned) is booked on the
//! die's host timeline (`die_free_ns` in [`super::Ssd`]) and never moves; maintenance
//! runs only where that timeline leaves the die free. The channels and the host link
//! serve transfers out of order under this policy ([`super::bus`]): a read whose data is
//! ready does not queue behind one still waiting for its die.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How a die orders its flash operations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedulerPolicy {
    /// Every operation booked on its die when the FTL issues it, in submission order: a
    /// host read waits behind all GC work issued before it (the null model).
    #[default]
    Fifo,
    /// Host reads, then host writes, then maintenance, with program and erase suspension;
    /// channel and host-link transfers in whichever order their data is ready.
    Priority,
}

/// `[ssd.scheduler]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerConfig {
    pub policy: SchedulerPolicy,
    /// From suspending a program until a read can start on the die (MQSim's
    /// `Suspend_Program_Time` default); a program with less left runs to its end.
    #[serde(default = "default_program_suspend_ns")]
    pub program_suspend_ns: u64,
    /// From suspending an erase until a read can start (MQSim's `Suspend_Erase_Time`).
    #[serde(default = "default_erase_suspend_ns")]
    pub erase_suspend_ns: u64,
    /// Most suspensions of one program or erase (assumed; 0 = never suspend).
    #[serde(default = "default_max_suspensions")]
    pub max_suspensions: u32,
}

/// MQSim's default `Suspend_Program_Time` (src/exec/Flash_Parameter_Set.cpp).
pub const DEFAULT_PROGRAM_SUSPEND_NS: u64 = 100_000;
/// MQSim's default `Suspend_Erase_Time`.
pub const DEFAULT_ERASE_SUSPEND_NS: u64 = 700_000;
/// Assumed (docs/sources.md): enough for a QD32 burst of reads, too few to starve a program.
pub const DEFAULT_MAX_SUSPENSIONS: u32 = 4;

fn default_program_suspend_ns() -> u64 {
    DEFAULT_PROGRAM_SUSPEND_NS
}
fn default_erase_suspend_ns() -> u64 {
    DEFAULT_ERASE_SUSPEND_NS
}
fn default_max_suspensions() -> u32 {
    DEFAULT_MAX_SUSPENSIONS
}

impl SchedulerConfig {
    /// The priority scheduler with its sourced defaults.
    pub fn priority() -> SchedulerConfig {
        SchedulerConfig {
            policy: SchedulerPolicy::Priority,
            program_suspend_ns: DEFAULT_PROGRAM_SUSPEND_NS,
            erase_suspend_ns: DEFAULT_ERASE_SUSPEND_NS,
            max_suspensions: DEFAULT_MAX_SUSPENSIONS,
        }
    }

    /// Today's submission order.
    pub fn fifo() -> SchedulerConfig {
        SchedulerConfig {
            policy: SchedulerPolicy::Fifo,
            ..SchedulerConfig::priority()
        }
    }
}

/// What a maintenance step does on its die.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepKind {
    Read,
    Program,
    /// The erase of this (global) block.
    Erase(u32),
}

/// A flash operation waiting in a die's queue (32 bytes: a die's queues are walked and
/// moved step by step, so their size is the scheduler's memory traffic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Step {
    kind: StepKind,
    dur_ns: u32,
    /// Write-buffer bytes this step frees when it ends: a buffered host program's
    /// superpage (never 0); 0 for maintenance.
    bytes: u32,
    /// Not before this time (when the FTL issued it).
    ready_ns: u64,
    /// In `queued`: the time of all steps put in `queued` before it, back to back.
    cum_ns: u64,
}

impl Step {
    fn new(kind: StepKind, dur_ns: u64, ready_ns: u64, bytes: u64) -> Step {
        Step {
            kind,
            dur_ns: u32::try_from(dur_ns).expect("a flash operation shorter than 4 s"),
            bytes: u32::try_from(bytes).expect("a superpage smaller than 4 GiB"),
            ready_ns,
            cum_ns: 0,
        }
    }

    fn dur(&self) -> u64 {
        self.dur_ns as u64
    }

    /// A buffered host program (else maintenance).
    fn is_host(&self) -> bool {
        self.bytes > 0
    }
}

/// The step a die is running: from `start_ns`, ending at `end_ns` (pushed on by each
/// suspension).
#[derive(Debug, Clone, Copy)]
struct Running {
    kind: StepKind,
    end_ns: u64,
    suspensions: u32,
    bytes: u64,
    promised_ns: u64,
}

#[derive(Debug, Default, Clone)]
struct DieQueue {
    /// On a drive with a write buffer: its buffered host programs, and the GC released
    /// ahead of each (in proportion to the writes), in order.
    queued: VecDeque<Step>,
    /// Maintenance not yet released: GC, background GC, read reclaim, SLC folds. It runs
    /// in the die's gaps; on a drive with a write buffer each buffered program releases
    /// its share into `queued` ahead of it.
    gc: VecDeque<Step>,
    /// GC copies issued since the last erase (the victim being cleaned).
    victim_copies: u32,
    /// Translation-page programs (the mapping table on flash) and buffered host programs
    /// queued on the die so far: translation pages take free pages as host programs do,
    /// and their share of the programs says how much of a victim's freed pages they take.
    maps: u64,
    host_programs: u64,
    /// Maintenance steps (a copy or a translation-page program with the reads before it,
    /// or an erase) to release per buffered program: the last victim's copies, its erase
    /// and the translation-page programs that share its freed pages, over the host
    /// programs that have the rest ([`DieQueue::maintenance_per_write`]).
    per_write: f64,
    /// Released steps owed: `per_write` per buffered program, less what was released.
    credit: f64,
    /// Maintenance steps in `queued` (released, not yet run): while there are any, `gc`
    /// waits, so maintenance keeps its order.
    released: u32,
    /// While a victim's reads lead `gc`: the reads released with each of its copies, how
    /// many reads lead `gc` now, and whether they are all alike (see
    /// [`DieQueue::release_one`]).
    read_share: Option<(usize, usize, bool)>,
    running: Option<Running>,
    /// When the die's last maintenance step ended.
    clock_ns: u64,
    /// Steps put in `queued` and taken off it, ever: a step's number less `taken` is its
    /// index.
    enqueued: u64,
    taken: u64,
    /// The numbers of the buffered host programs in `queued`, in order.
    programs: VecDeque<u64>,
    /// The ends promised for programs in `queued` that a write's admission counted on, by
    /// program number, in order.
    promises: VecDeque<(u64, u64)>,
    /// The time of all steps put in `queued`, back to back, and the latest time one of
    /// them was ready: once the die is free after it, a program's expected end is a
    /// difference of `cum_ns` ([`DieQueue::next_program`]).
    enqueued_ns: u64,
    latest_ready_ns: u64,
}

/// How much later than `promised_ns` a step that ended at `end_ns` ended (0 if no
/// write's admission counted on it).
fn slip(end_ns: u64, promised_ns: u64) -> u64 {
    if promised_ns == 0 {
        0
    } else {
        end_ns.saturating_sub(promised_ns)
    }
}

impl DieQueue {
    /// Maintenance steps to release per buffered program for the victim being cleaned
    /// (see `per_write`): it frees its pages less its copies; translation-page programs
    /// take their share `f` of those (their share of the die's programs so far) and host
    /// programs the rest, so each host program releases (copies + erase + f x freed) over
    /// (1 - f) x freed. Without the translation pages (issue 43: a 980 at 16 GiB, whose
    /// mapping cache misses make them 47% of flash writes) the release fell behind the
    /// issue, the unreleased backlog grew to half a second of work a die, and the erases in
    /// it stalled every write behind the hard threshold. The share is over the whole run,
    /// not since the last victim, so a stretch of translation pages with no host programs
    /// (reads evicting dirty map pages, or no GC for a while) does not release a whole
    /// victim at once.
    fn maintenance_per_write(&self, pages_per_block: u32) -> f64 {
        let copies = self.victim_copies;
        let freed = pages_per_block.saturating_sub(copies).max(1) as f64;
        let programs = self.maps + self.host_programs;
        let f = if programs == 0 {
            0.0
        } else {
            self.maps as f64 / programs as f64
        };
        (copies as f64 + 1.0 + f * freed) / ((1.0 - f) * freed).max(1.0)
    }

    /// No earlier than this has the die a step to end or start, its host timeline free
    /// from `host_free_ns`: its running step's end, else when its queues' first steps are
    /// ready and the die free; `u64::MAX` with nothing to do.
    fn wake_ns(&self, host_free_ns: u64) -> u64 {
        if let Some(r) = self.running {
            return r.end_ns;
        }
        let released = self.queued.front().map(|s| s.ready_ns);
        let unreleased = self.gc.front().map(|s| s.ready_ns);
        match released.into_iter().chain(unreleased).min() {
            Some(ready) => ready.max(self.clock_ns).max(host_free_ns),
            None => u64::MAX,
        }
    }

    /// The die's first buffered program not yet ended, the die free from `free_ns` (the
    /// time now, or its host timeline's end if later): the running step if it is one,
    /// else the first in `queued`. Once the die has been run up to the time now (so its
    /// running step ends after it, or its queue cannot start before it), the answer does
    /// not depend on the time now: it holds until the die's queues or its host timeline
    /// change ([`Maintenance::admission_ns`]).
    fn first_program(&self, free_ns: u64) -> Option<Expected> {
        let mut t = free_ns.max(self.clock_ns);
        if let Some(r) = self.running {
            t = t.max(r.end_ns);
            if r.bytes > 0 {
                // A running program came off `queued`: it was the last step taken.
                return Some(Expected {
                    end_ns: r.end_ns,
                    number: self.taken - 1,
                    bytes: r.bytes,
                    die_free_ns: t,
                });
            }
        }
        self.next_program(t, 0)
    }

    /// The buffered program after `p` (one of this die's not yet ended).
    fn program_after(&self, p: &Expected) -> Option<Expected> {
        self.next_program(p.die_free_ns, (p.number + 1 - self.taken) as usize)
    }

    /// Puts `step` at the end of `queued`.
    fn enqueue(&mut self, mut step: Step) {
        step.cum_ns = self.enqueued_ns;
        self.enqueued_ns += step.dur();
        self.latest_ready_ns = self.latest_ready_ns.max(step.ready_ns);
        if step.is_host() {
            self.programs.push_back(self.enqueued);
        }
        self.enqueued += 1;
        self.queued.push_back(step);
    }

    /// The first buffered program in `queued` from index `from`, the die free from `t_ns`
    /// and the steps before it run back to back.
    fn next_program(&self, t_ns: u64, from: usize) -> Option<Expected> {
        if self.latest_ready_ns > t_ns {
            return self.next_program_stepwise(t_ns, from);
        }
        // Every step is ready by `t_ns`: they run back to back from it.
        let first = self.taken + from as u64;
        // `programs` is in ascending order: the first at or after `first` by bisection.
        let number = *self
            .programs
            .get(self.programs.partition_point(|&n| n < first))?;
        let i = (number - self.taken) as usize;
        let (program, start) = (&self.queued[i], &self.queued[from]);
        let end_ns = t_ns + program.cum_ns + program.dur() - start.cum_ns;
        let found = Expected {
            end_ns,
            number,
            bytes: program.bytes as u64,
            die_free_ns: end_ns,
        };
        debug_assert_eq!(Some(found), self.next_program_stepwise(t_ns, from));
        Some(found)
    }

    /// [`DieQueue::next_program`] a step at a time, for steps that may not yet be ready.
    fn next_program_stepwise(&self, mut t_ns: u64, from: usize) -> Option<Expected> {
        for (i, s) in self.queued.iter().enumerate().skip(from) {
            t_ns = t_ns.max(s.ready_ns) + s.dur();
            if s.bytes > 0 {
                return Some(Expected {
                    end_ns: t_ns,
                    number: self.taken + i as u64,
                    bytes: s.bytes as u64,
                    die_free_ns: t_ns,
                });
            }
        }
        None
    }

    /// The promise of the buffered program numbered `number` (not yet ended): 0 if none.
    fn promised_ns_mut(&mut self, number: u64) -> &mut u64 {
        if number < self.taken {
            let running = self.running.as_mut().expect("a program not yet ended");
            return &mut running.promised_ns;
        }
        let i = match self.promises.binary_search_by_key(&number, |p| p.0) {
            Ok(i) => i,
            Err(i) => {
                self.promises.insert(i, (number, 0));
                i
            }
        };
        &mut self.promises[i].1
    }

    /// The step that runs next from `free_ns`, released work first when both could start
    /// by then, and when it may start; not yet taken off its queue.
    fn next(&self, free_ns: u64) -> Option<(bool, u64)> {
        let q = self.queued.front().map(|s| free_ns.max(s.ready_ns));
        let g = self
            .gc
            .front()
            .filter(|_| self.released == 0)
            .map(|s| free_ns.max(s.ready_ns));
        match (q, g) {
            (Some(a), Some(b)) if b < a => Some((false, b)),
            (Some(a), _) => Some((true, a)),
            (None, Some(b)) => Some((false, b)),
            (None, None) => None,
        }
    }

    /// Takes the step [`DieQueue::next`] found off its queue, with the end a write's
    /// admission was promised for it (0 if none).
    fn take(&mut self, released: bool) -> (Step, u64) {
        if !released {
            let step = self.gc.pop_front().expect("next() saw it");
            if let Some((_, leading, _)) = &mut self.read_share {
                *leading = leading.saturating_sub((step.kind == StepKind::Read) as usize);
            }
            return (step, 0);
        }
        let step = self.queued.pop_front().expect("next() saw it");
        let mut promised_ns = 0;
        if self.programs.front() == Some(&self.taken) {
            self.programs.pop_front();
            if self.promises.front().is_some_and(|p| p.0 == self.taken) {
                promised_ns = self.promises.pop_front().expect("just seen").1;
            }
        }
        self.taken += 1;
        if !step.is_host() {
            self.released -= 1;
        }
        (step, promised_ns)
    }

    /// Moves one GC step group from `gc` to `queued`: the steps up to and including the
    /// next program or erase. The FTL issues a victim's page reads all before its copy
    /// programs (it reads the whole victim, then appends the copies); a copy is released
    /// with its share of those reads instead (reads over copies, rounded up), as MQSim
    /// pairs each valid page's GC read with its write — else the first copy would carry
    /// every read of the victim, and a buffered program behind it would wait for all of
    /// them (768 reads, 61 ms on the MX500), a stall whose length follows the block size
    /// that capacity scaling changes. Whether there was one.
    fn release_one(&mut self) -> bool {
        let is_read = |s: &Step| s.kind == StepKind::Read;
        if self.gc.front().is_some_and(is_read) {
            // The victim's share, and the reads leading `gc`, counted once a victim.
            let (share, leading, alike) = match self.read_share {
                Some(known) => known,
                None => {
                    let reads = self.gc.iter().take_while(|s| is_read(s)).count();
                    let first = self.gc[0];
                    let alike = self.gc.iter().take(reads).all(|s| *s == first);
                    let copies = self
                        .gc
                        .iter()
                        .skip(reads)
                        .take_while(|s| s.kind == StepKind::Program)
                        .count();
                    (
                        if copies > 0 {
                            reads.div_ceil(copies)
                        } else {
                            0
                        },
                        reads,
                        alike,
                    )
                }
            };
            if share > 0 {
                let take = share.min(leading);
                for _ in 0..take {
                    let step = self.gc.pop_front().expect("counted");
                    self.enqueue(step);
                    self.released += 1;
                }
                // The copy: the first program after the reads still waiting.
                let left = leading - take;
                if self
                    .gc
                    .get(left)
                    .is_some_and(|s| s.kind == StepKind::Program)
                {
                    let step = if alike && left > 0 {
                        // The reads ahead of it are all alike: the first takes its place
                        // (a copy's worth of work, not a shift of every read).
                        let first = self.gc[0];
                        self.gc.pop_front();
                        std::mem::replace(&mut self.gc[left - 1], first)
                    } else {
                        self.gc.remove(left).expect("just seen")
                    };
                    self.enqueue(step);
                    self.released += 1;
                    self.read_share = (left > 0).then_some((share, left, alike));
                    return true;
                }
            }
        }
        self.read_share = None;
        while let Some(step) = self.gc.pop_front() {
            self.enqueue(step);
            self.released += 1;
            if matches!(step.kind, StepKind::Program | StepKind::Erase(_)) {
                return true;
            }
        }
        false
    }

    /// Ends the running step (the die's clock moves to its end); returns the write-buffer
    /// bytes it frees, and adds how much later than promised it ended to `slip_ns`.
    fn finish_running(&mut self, slip_ns: &mut u64) -> u64 {
        let Some(r) = self.running.take() else {
            return 0;
        };
        self.clock_ns = self.clock_ns.max(r.end_ns);
        *slip_ns += slip(r.end_ns, r.promised_ns);
        r.bytes
    }
}

/// The least of a fixed number of keys as they change (a tournament tree): each node holds
/// the least (key, index) below it, packed in one number (the key above the index), so a
/// change costs the tree's height and the least is at the root. Ties go to the lower
/// index.
#[derive(Debug, Clone)]
struct MinTree {
    /// Leaves (a power of two); the keys sit at `node[leaves..leaves + n]`.
    leaves: usize,
    node: Vec<u128>,
}

/// A padding leaf: above every key.
const PAD: u128 = u128::MAX;

fn pack(key: u64, i: usize) -> u128 {
    (key as u128) << 64 | i as u128
}

impl MinTree {
    /// `n` keys, each `key`.
    fn new(n: usize, key: u64) -> MinTree {
        let leaves = n.next_power_of_two();
        let mut node = vec![PAD; 2 * leaves];
        for i in 0..n {
            node[leaves + i] = pack(key, i);
        }
        for j in (1..leaves).rev() {
            node[j] = node[2 * j].min(node[2 * j + 1]);
        }
        MinTree { leaves, node }
    }

    /// Sets key `i`.
    fn set(&mut self, i: usize, key: u64) {
        let mut j = self.leaves + i;
        let packed = pack(key, i);
        if self.node[j] == packed {
            return;
        }
        self.node[j] = packed;
        while j > 1 {
            j /= 2;
            self.node[j] = self.node[2 * j].min(self.node[2 * j + 1]);
        }
    }

    /// The least key and its index.
    fn least(&self) -> (u64, usize) {
        let n = self.node[1];
        ((n >> 64) as u64, n as u64 as usize)
    }
}

/// Per-die maintenance queues.
#[derive(Debug, Clone)]
pub(crate) struct Maintenance {
    cfg: SchedulerConfig,
    dies: Vec<DieQueue>,
    /// Reads that suspended a program or an erase.
    pub(crate) suspensions: u64,
    /// Host programs that waited for queued maintenance up to an erase (the hard
    /// threshold).
    pub(crate) forced_drains: u64,
    /// Write-buffer bytes whose programs ended since [`Maintenance::take_drained`].
    drained_bytes: u64,
    /// Pages per block: what a victim frees is this less its copies.
    pages_per_block: u32,
    /// Writes admitted on a buffered program's expected end (the buffer full).
    pub(crate) buffer_waits: u64,
    /// How much later than expected, in all, those programs ended (reads that arrived
    /// after the write overtook or suspended them).
    pub(crate) buffer_slip_ns: u64,
    /// The buffered programs not yet ended, in the order of their expected ends (ties:
    /// the lower die first), merged over the dies as far as [`Maintenance::admission_ns`]
    /// has needed: `counted` is a prefix of that order (each program in it ends no later
    /// than every one not in it), `counted_bytes` their bytes and `counted_on` how many
    /// are each die's; `next` is each die's first program after its counted ones, its
    /// expected end keyed in `next_end_ns` (`u64::MAX`: none). A write's admission merges
    /// on from where the last one stopped: appending to a die's queue does not move the
    /// expected ends of the programs already in it.
    counted: VecDeque<Counted>,
    counted_bytes: u64,
    counted_on: Vec<u32>,
    /// [`Maintenance::merge_again`]'s buffers, kept to spare allocations.
    merge_scratch: Vec<Counted>,
    merge_out: VecDeque<Counted>,
    next: Vec<Option<Expected>>,
    next_end_ns: MinTree,
    /// Each die's host timeline as the merge last saw it: a change moves its programs.
    host_free_seen_ns: Vec<u64>,
    /// Dies whose programs are to be merged again (`stale_dies`, once each): a program
    /// ended, a suspension or host work moved them, maintenance ran ahead of them, or a
    /// program was queued on a die with none left to merge.
    stale: Vec<bool>,
    stale_dies: Vec<u32>,
    /// No earlier than this has each die a step to end or start (a lower bound: its host
    /// timeline only moves on), unless it is in `touched`: [`Maintenance::advance_all`]
    /// runs only the dies due by its time and those touched.
    wake_ns: MinTree,
    /// Dies whose queues changed since [`Maintenance::advance_all`] last ran them, once
    /// each (`is_touched`): it runs them as well as the dies due.
    touched: Vec<u32>,
    is_touched: Vec<bool>,
    /// The dies [`Maintenance::advance_all`] left with a step to start at its time, and
    /// their wake times (kept to spare an allocation).
    due: Vec<(u32, u64)>,
}

/// A buffered program not yet ended, as the merge in [`Maintenance::admission_ns`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Expected {
    /// When it is expected to end, its queued work run back to back.
    end_ns: u64,
    /// Its number among the steps ever put in its die's `queued`.
    number: u64,
    /// The write-buffer bytes it frees.
    bytes: u64,
    /// When its die is free after it (its end, or later for a running program whose die
    /// waits for host work).
    die_free_ns: u64,
}

/// A program in [`Maintenance`]'s `counted`.
#[derive(Debug, Clone, Copy)]
struct Counted {
    end_ns: u64,
    die: u32,
    number: u64,
    bytes: u64,
}

impl Counted {
    /// Its place in the merge's order.
    fn key(&self) -> (u64, u32) {
        (self.end_ns, self.die)
    }
}

impl Maintenance {
    pub(crate) fn new(cfg: &SchedulerConfig, dies: u32, pages_per_block: u32) -> Maintenance {
        Maintenance {
            cfg: cfg.clone(),
            dies: vec![DieQueue::default(); dies as usize],
            pages_per_block,
            suspensions: 0,
            forced_drains: 0,
            drained_bytes: 0,
            buffer_waits: 0,
            buffer_slip_ns: 0,
            counted: VecDeque::new(),
            merge_scratch: Vec::new(),
            merge_out: VecDeque::new(),
            counted_bytes: 0,
            counted_on: vec![0; dies as usize],
            next: vec![None; dies as usize],
            next_end_ns: MinTree::new(dies as usize, u64::MAX),
            host_free_seen_ns: vec![0; dies as usize],
            stale: vec![true; dies as usize],
            stale_dies: (0..dies).collect(),
            wake_ns: MinTree::new(dies as usize, 0),
            touched: Vec::new(),
            is_touched: vec![false; dies as usize],
            due: Vec::new(),
        }
    }

    /// `die`'s programs are to be merged again.
    fn mark_stale(&mut self, die: u32) {
        if !self.stale[die as usize] {
            self.stale[die as usize] = true;
            self.stale_dies.push(die);
        }
    }

    /// `die`'s queues are about to change: [`Maintenance::advance_all`] runs it.
    fn touch(&mut self, die: u32) {
        let d = die as usize;
        if !self.is_touched[d] {
            self.is_touched[d] = true;
            self.touched.push(die);
        }
    }

    /// Work was added to `die`'s queues: a die running a step wakes when it ends whatever
    /// is queued behind it, so only an idle die is run again.
    fn queue_grew(&mut self, die: u32) {
        if self.dies[die as usize].running.is_none() {
            self.touch(die);
        }
    }

    /// Host work is about to run on `die`, or its queue to run out of turn: the expected
    /// ends of its programs may move.
    fn disturb(&mut self, die: u32) {
        self.touch(die);
        self.mark_stale(die);
    }

    /// Queues a maintenance step on `die`, issued at `ready_ns`. An erase ends a victim:
    /// its copies and erase over the pages it freed set how much GC each buffered program
    /// releases until the next victim.
    pub(crate) fn push(&mut self, die: u32, kind: StepKind, dur_ns: u64, ready_ns: u64) {
        let ppb = self.pages_per_block;
        self.queue_grew(die);
        let q = &mut self.dies[die as usize];
        if let StepKind::Erase(_) = kind {
            q.per_write = q.maintenance_per_write(ppb);
            q.victim_copies = 0;
        }
        q.gc.push_back(Step::new(kind, dur_ns, ready_ns, 0));
    }

    /// Queues a GC copy's program on `die` (see [`Maintenance::push`]).
    pub(crate) fn push_copy(&mut self, die: u32, dur_ns: u64, ready_ns: u64) {
        self.dies[die as usize].victim_copies += 1; // push touches it
        self.push(die, StepKind::Program, dur_ns, ready_ns);
    }

    /// Queues a translation-page program on `die` (see [`Maintenance::push`]).
    pub(crate) fn push_map(&mut self, die: u32, dur_ns: u64, ready_ns: u64) {
        self.dies[die as usize].maps += 1; // push touches it
        self.push(die, StepKind::Program, dur_ns, ready_ns);
    }

    /// A buffered host program opens `block`, whose erase waits unreleased on `die`: that
    /// erase and the GC before it are released now, ahead of the program (the hard
    /// threshold, as [`Maintenance::drain_through_erase`] is for an unbuffered one).
    pub(crate) fn release_through_erase(&mut self, die: u32, block: u32) {
        self.queue_grew(die);
        let q = &mut self.dies[die as usize];
        let Some(i) = q.gc.iter().position(|s| s.kind == StepKind::Erase(block)) else {
            return;
        };
        self.forced_drains += 1;
        q.released += i as u32 + 1;
        for _ in 0..=i {
            let step = q.gc.pop_front().expect("found at i");
            q.enqueue(step);
        }
        q.read_share = None;
    }

    /// Queues a buffered host program on `die` (its transfer over the channel and its
    /// program, `dur_ns` together), whose data arrived at `ready_ns`, behind the
    /// maintenance issued before it (GC paced to the writes, and the erase of the block it
    /// opens); it frees `bytes` of the write buffer when it ends.
    pub(crate) fn push_write(&mut self, die: u32, dur_ns: u64, ready_ns: u64, bytes: u64) {
        let ppb = self.pages_per_block;
        self.queue_grew(die);
        if self.next[die as usize].is_none() {
            // This may be the die's next program to merge.
            self.mark_stale(die);
        }
        let q = &mut self.dies[die as usize];
        q.host_programs += 1;
        // GC in proportion to the writes, a victim's copies spread over the writes that
        // follow it (before the first victim ends, its copies so far give the share).
        let per_write = if q.per_write > 0.0 {
            q.per_write
        } else {
            q.maintenance_per_write(ppb)
        };
        q.credit += per_write;
        while q.credit >= 1.0 && q.release_one() {
            q.credit -= 1.0;
        }
        if q.gc.is_empty() {
            // Nothing owed yet: no banking for a victim still to come.
            q.credit = q.credit.min(1.0);
        }
        debug_assert!(bytes > 0, "a buffered program frees buffer bytes");
        q.enqueue(Step::new(StepKind::Program, dur_ns, ready_ns, bytes));
    }

    /// Write-buffer bytes whose programs have ended (as far as each die has been run),
    /// since the last call.
    pub(crate) fn take_drained(&mut self) -> u64 {
        std::mem::take(&mut self.drained_bytes)
    }

    /// Runs `die`'s maintenance in the gaps of its host timeline (free from
    /// `host_free_ns`) up to time `t_ns`: every step that starts before `t_ns` starts; the
    /// one still running at `t_ns` is left running.
    #[inline]
    pub(crate) fn advance(&mut self, die: u32, host_free_ns: u64, t_ns: u64) {
        // Most calls find the die's step still running at `t_ns`, or nothing to run.
        let q = &self.dies[die as usize];
        let idle_queues = q.queued.is_empty() && q.gc.is_empty();
        let running_on = q.running.is_some_and(|r| r.end_ns > t_ns);
        let nothing_to_start = q.running.is_none() && idle_queues;
        if !running_on && !nothing_to_start {
            self.advance_slow(die, host_free_ns, t_ns);
        }
    }

    /// [`Maintenance::advance`] once there is something to end or start.
    #[inline(never)]
    fn advance_slow(&mut self, die: u32, host_free_ns: u64, t_ns: u64) {
        let q = &mut self.dies[die as usize];
        let mut moved = false;
        loop {
            if let Some(r) = q.running {
                if r.end_ns > t_ns {
                    break;
                }
                let bytes = q.finish_running(&mut self.buffer_slip_ns);
                self.drained_bytes += bytes;
                moved |= bytes > 0;
            }
            let Some((released, start)) = q.next(q.clock_ns.max(host_free_ns)) else {
                break;
            };
            if start >= t_ns {
                break;
            }
            // Unreleased maintenance going ahead of released work (not yet ready) delays
            // the programs queued there.
            moved |= !released && !q.queued.is_empty();
            let (step, promised_ns) = q.take(released);
            q.running = Some(Running {
                kind: step.kind,
                end_ns: start + step.dur(),
                suspensions: 0,
                bytes: step.bytes as u64,
                promised_ns,
            });
        }
        if moved {
            self.mark_stale(die);
        }
    }

    /// Runs `die` up to `t_ns` and keys its next wake time (one due by `t_ns` goes to
    /// `due`, out of the tree).
    fn run_due(&mut self, die: u32, host_free_ns: &[u64], t_ns: u64, due: &mut Vec<(u32, u64)>) {
        let d = die as usize;
        self.advance(die, host_free_ns[d], t_ns);
        let wake = self.dies[d].wake_ns(host_free_ns[d]);
        if wake <= t_ns {
            due.push((die, wake));
            self.wake_ns.set(d, u64::MAX);
        } else {
            self.wake_ns.set(d, wake);
        }
    }

    /// Runs every die's queues up to `t_ns` (see [`Maintenance::advance`]), each die's
    /// host timeline free from `host_free_ns[die]`.
    pub(crate) fn advance_all(&mut self, host_free_ns: &[u64], t_ns: u64) {
        // The dies touched, then those due in order of their wake times. A die left with
        // something to start at `t_ns` itself waits out of the tree (`due`) until the end,
        // so no die runs twice.
        let mut due = std::mem::take(&mut self.due);
        for i in 0..self.touched.len() {
            let die = self.touched[i];
            self.is_touched[die as usize] = false;
            self.run_due(die, host_free_ns, t_ns, &mut due);
        }
        self.touched.clear();
        loop {
            let (wake, d) = self.wake_ns.least();
            if wake > t_ns || wake == u64::MAX {
                break;
            }
            self.run_due(d as u32, host_free_ns, t_ns, &mut due);
        }
        for &(d, wake) in &due {
            self.wake_ns.set(d as usize, wake);
        }
        due.clear();
        self.due = due;
        debug_assert!(
            self.dies
                .iter()
                .zip(host_free_ns)
                .all(|(q, &free)| match q.running {
                    Some(r) => r.end_ns > t_ns,
                    None => q
                        .next(q.clock_ns.max(free))
                        .is_none_or(|(_, start)| start >= t_ns),
                }),
            "a die left behind by advance_all"
        );
    }

    /// The write buffer holds `excess_bytes` more than it can at `t_ns`: when, with the
    /// work queued ahead of them and no more host work arriving, enough of the buffered
    /// programs not yet ended are expected to end to free that many bytes (the programs in
    /// order of their expected ends). `None` if they cannot. Each admission counts every
    /// program that has not ended — one a write was admitted on earlier and that reads
    /// have since delayed included — so acknowledgements never hold the buffer above its
    /// size for longer than such a delay (an earlier rule freed a program's bytes at its
    /// expected end: each delay then lent the buffer a program's bytes for good, and the
    /// backlog of programs, with the write tail, wandered without bound). The program
    /// whose end admits the write is marked: how much later than expected it then ends is
    /// summed in `buffer_slip_ns`. The dies have been run up to `t_ns` already
    /// ([`Maintenance::advance_all`]).
    pub(crate) fn admission_ns(
        &mut self,
        host_free_ns: &[u64],
        t_ns: u64,
        excess_bytes: u64,
    ) -> Option<u64> {
        if host_free_ns != self.host_free_seen_ns.as_slice() {
            for (d, &free) in host_free_ns.iter().enumerate() {
                if free != self.host_free_seen_ns[d] {
                    self.host_free_seen_ns[d] = free;
                    self.mark_stale(d as u32);
                }
            }
        }
        let mut stale = std::mem::take(&mut self.stale_dies);
        for &d in &stale {
            self.merge_again(d, t_ns.max(host_free_ns[d as usize]));
            self.stale[d as usize] = false;
        }
        stale.clear();
        self.stale_dies = stale;
        // Merge on until the programs counted free the excess (a program frees at least a
        // byte: an excess of 0 waits for the first, as one of 1 does).
        let excess_bytes = excess_bytes.max(1);
        while self.counted_bytes < excess_bytes {
            let (end, d) = self.next_end_ns.least();
            if end == u64::MAX {
                break;
            }
            let p = self.next[d].expect("a die keyed has a next program");
            self.count(d as u32, &p, self.counted.len());
            self.set_next(d, self.dies[d].program_after(&p));
        }
        debug_assert_eq!(
            self.counted_bytes,
            self.counted.iter().map(|c| c.bytes).sum::<u64>()
        );
        let mut freed = 0;
        let found = self.counted.iter().find(|c| {
            freed += c.bytes;
            freed >= excess_bytes
        });
        let found = found.map(|c| (c.end_ns, c.die as usize, c.number));
        #[cfg(debug_assertions)]
        assert_eq!(
            found,
            self.admission_from_scratch(host_free_ns, t_ns, excess_bytes),
            "the merge kept between writes lost its order"
        );
        let (end, d, number) = found?;
        let promised = self.dies[d].promised_ns_mut(number);
        if *promised == 0 {
            *promised = end;
        }
        self.buffer_waits += 1;
        Some(end)
    }

    /// Adds `p`, one of `die`'s programs, to `counted` at index `at`.
    fn count(&mut self, die: u32, p: &Expected, at: usize) {
        self.counted.insert(
            at,
            Counted {
                end_ns: p.end_ns,
                die,
                number: p.number,
                bytes: p.bytes,
            },
        );
        self.counted_bytes += p.bytes;
        self.counted_on[die as usize] += 1;
    }

    fn set_next(&mut self, d: usize, next: Option<Expected>) {
        self.next[d] = next;
        self.next_end_ns.set(d, next.map_or(u64::MAX, |p| p.end_ns));
    }

    /// Merges die `d`'s programs again, the die free from `free_ns`: its counted ones are
    /// dropped, and those that now end before the last one counted take their places.
    fn merge_again(&mut self, d: u32, free_ns: u64) {
        let di = d as usize;
        // The last counted program of another die bounds the merge.
        let last = self
            .counted
            .iter()
            .rev()
            .find(|c| c.die != d)
            .map(Counted::key);
        // The die's programs that end before it, in order of their ends.
        let mut programs = std::mem::take(&mut self.merge_scratch);
        let mut next = self.dies[di].first_program(free_ns);
        if let Some(last) = last {
            while let Some(p) = next.filter(|p| (p.end_ns, d) < last) {
                programs.push(Counted {
                    end_ns: p.end_ns,
                    die: d,
                    number: p.number,
                    bytes: p.bytes,
                });
                next = self.dies[di].program_after(&p);
            }
        }
        if self.counted_on[di] > 0 || !programs.is_empty() {
            // One pass: the die's old entries dropped, its programs merged in by key.
            let old = std::mem::take(&mut self.counted);
            let mut merged = std::mem::take(&mut self.merge_out);
            merged.clear();
            merged.reserve(old.len() + programs.len());
            let mut bytes = 0;
            let mut new = programs.iter().peekable();
            for c in old.iter().filter(|c| c.die != d) {
                while let Some(p) = new.next_if(|p| p.key() < c.key()) {
                    merged.push_back(*p);
                }
                bytes += c.bytes;
                merged.push_back(*c);
            }
            merged.extend(new.copied());
            bytes += programs.iter().map(|p| p.bytes).sum::<u64>();
            self.counted_bytes = bytes;
            self.counted_on[di] = programs.len() as u32;
            self.counted = merged;
            self.merge_out = old;
        }
        programs.clear();
        self.merge_scratch = programs;
        self.set_next(di, next);
    }

    /// [`Maintenance::admission_ns`]'s answer found from nothing kept (for checks): every
    /// program not yet ended, each die's from its first, in order of (end, die), up to the
    /// one that frees the excess: its end, die and number.
    #[cfg(any(test, debug_assertions))]
    fn admission_from_scratch(
        &self,
        host_free_ns: &[u64],
        t_ns: u64,
        excess_bytes: u64,
    ) -> Option<(u64, usize, u64)> {
        let mut all = Vec::new();
        for (d, q) in self.dies.iter().enumerate() {
            let mut p = q.first_program(t_ns.max(host_free_ns[d]));
            while let Some(e) = p {
                all.push((e.end_ns, d, e.number, e.bytes));
                p = q.program_after(&e);
            }
        }
        all.sort_unstable();
        let mut freed = 0;
        all.into_iter()
            .find(|&(.., bytes)| {
                freed += bytes;
                freed >= excess_bytes
            })
            .map(|(end, d, number, _)| (end, d, number))
    }

    /// When a host operation that keeps the die busy for `busy_ns`, ready at `ready_ns`
    /// (at or after `host_free_ns`, the end of the die's host timeline), starts: at once;
    /// after suspending the step in progress, where `suspend_ns` gives that step's
    /// suspension latency and more than that is left (at most
    /// [`SchedulerConfig::max_suspensions`] times a step), the step then pushed back by the
    /// operation; or when the step in progress ends.
    fn host_op(
        &mut self,
        die: u32,
        host_free_ns: u64,
        ready_ns: u64,
        busy_ns: u64,
        suspend_ns: impl Fn(&SchedulerConfig, StepKind) -> Option<u64>,
    ) -> u64 {
        // What is still running after this started before `ready_ns` and ends after it.
        self.advance(die, host_free_ns, ready_ns);
        self.disturb(die);
        let cfg = &self.cfg;
        let q = &mut self.dies[die as usize];
        let Some(r) = q.running.as_mut() else {
            return ready_ns;
        };
        if let Some(s) = suspend_ns(cfg, r.kind)
            .filter(|&s| r.suspensions < cfg.max_suspensions && r.end_ns - ready_ns > s)
        {
            // Suspended from `ready_ns` until the operation ends; then it resumes.
            let start = ready_ns + s;
            r.end_ns += start + busy_ns - ready_ns;
            r.suspensions += 1;
            self.suspensions += 1;
            return start;
        }
        let end = r.end_ns;
        self.drained_bytes += q.finish_running(&mut self.buffer_slip_ns);
        end
    }

    /// When a host read of `dur_ns` starts (see [`Maintenance::host_op`]): it suspends a
    /// program or an erase.
    pub(crate) fn host_read(
        &mut self,
        die: u32,
        host_free_ns: u64,
        ready_ns: u64,
        dur_ns: u64,
    ) -> u64 {
        self.host_op(die, host_free_ns, ready_ns, dur_ns, |c, k| match k {
            StepKind::Program => Some(c.program_suspend_ns),
            StepKind::Erase(_) => Some(c.erase_suspend_ns),
            StepKind::Read => None,
        })
    }

    /// When a host program that keeps the die busy for `busy_ns` starts: it suspends an
    /// erase (MQSim's preferred erase suspension for writes), not a program.
    pub(crate) fn host_program(
        &mut self,
        die: u32,
        host_free_ns: u64,
        ready_ns: u64,
        busy_ns: u64,
    ) -> u64 {
        self.host_op(die, host_free_ns, ready_ns, busy_ns, |c, k| {
            matches!(k, StepKind::Erase(_)).then_some(c.erase_suspend_ns)
        })
    }

    /// When a host operation that suspends nothing (a transfer through the die, a
    /// translation read) may start: after the step in progress.
    pub(crate) fn host_other(&mut self, die: u32, host_free_ns: u64, ready_ns: u64) -> u64 {
        self.host_op(die, host_free_ns, ready_ns, 0, |_, _| None)
    }

    /// A host read of `dur_ns` placed in a gap of the die's host timeline that ends at
    /// `gap_end_ns`, from `at_ns` (before host work already booked after the gap;
    /// maintenance ran in the gap when that work was booked). If maintenance was busy at
    /// `at_ns`, the read suspends it: it starts a suspension's latency later, and the step
    /// in progress (or, if it has ended, the die's maintenance clock) moves back by the
    /// read's time and that latency. Returns when the read starts, or `None` if it does not
    /// fit before `gap_end_ns`.
    pub(crate) fn give_way(
        &mut self,
        die: u32,
        at_ns: u64,
        dur_ns: u64,
        gap_end_ns: u64,
    ) -> Option<u64> {
        self.disturb(die);
        let q = &mut self.dies[die as usize];
        let running = q.running.filter(|r| r.end_ns > at_ns);
        let busy = running.is_some() || q.clock_ns > at_ns;
        let wait = match running.map(|r| r.kind) {
            _ if !busy => 0,
            Some(StepKind::Erase(_)) => self.cfg.erase_suspend_ns,
            _ => self.cfg.program_suspend_ns,
        };
        let start = at_ns + wait;
        if start + dur_ns > gap_end_ns {
            return None;
        }
        if busy {
            match q.running.as_mut() {
                Some(r) if r.end_ns > at_ns => r.end_ns += wait + dur_ns,
                _ => q.clock_ns += wait + dur_ns,
            }
            self.suspensions += 1;
        }
        Some(start)
    }

    /// Whether the erase of `block` waits in `die`'s queues.
    pub(crate) fn erase_pending(&self, die: u32, block: u32) -> bool {
        let q = &self.dies[die as usize];
        let is_it = |s: &Step| s.kind == StepKind::Erase(block);
        q.queued.iter().any(is_it)
            || q.gc.iter().any(is_it)
            || q.running.is_some_and(|r| r.kind == StepKind::Erase(block))
    }

    /// Runs `die`'s queue up to and including the erase of `block`, in the host
    /// timeline's gap (free from `host_free_ns`) and then back to back from `ready_ns`;
    /// returns when that erase ends. The host program into `block` waits until then.
    pub(crate) fn drain_through_erase(
        &mut self,
        die: u32,
        block: u32,
        host_free_ns: u64,
        ready_ns: u64,
    ) -> u64 {
        self.forced_drains += 1;
        self.advance(die, host_free_ns, ready_ns);
        self.disturb(die);
        let q = &mut self.dies[die as usize];
        let mut t = ready_ns.max(q.clock_ns);
        if let Some(r) = q.running {
            t = t.max(r.end_ns);
            self.drained_bytes += q.finish_running(&mut self.buffer_slip_ns);
            if r.kind == StepKind::Erase(block) {
                q.clock_ns = t;
                return t;
            }
        }
        while let Some((released, start)) = q.next(t) {
            let (step, promised_ns) = q.take(released);
            t = start + step.dur();
            self.drained_bytes += step.bytes as u64;
            self.buffer_slip_ns += slip(t, promised_ns);
            if step.kind == StepKind::Erase(block) {
                break;
            }
        }
        q.clock_ns = t;
        t
    }

    /// Whether `die` has maintenance queued or running.
    pub(crate) fn busy(&self, die: u32) -> bool {
        let q = &self.dies[die as usize];
        q.running.is_some() || !q.queued.is_empty() || !q.gc.is_empty()
    }

    /// When `die`'s last maintenance step ended (0 before any).
    pub(crate) fn clock_ns(&self, die: u32) -> u64 {
        self.dies[die as usize].clock_ns
    }

    /// Runs all of `die`'s queue from `host_free_ns` with no host work in between;
    /// returns when the die is idle.
    pub(crate) fn drain_all(&mut self, die: u32, host_free_ns: u64) -> u64 {
        self.advance(die, host_free_ns, u64::MAX);
        self.disturb(die);
        let q = &mut self.dies[die as usize];
        host_free_ns.max(q.clock_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_min_tree_keeps_the_least_key() {
        // Against a plain scan, over changes in a fixed pseudo-random order.
        for n in [1usize, 3, 5, 64] {
            let mut tree = MinTree::new(n, 7);
            let mut keys = vec![7u64; n];
            let mut x = 12345u64;
            for _ in 0..500 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let (i, key) = ((x >> 33) as usize % n, (x >> 20) % 50);
                let key = if key == 49 { u64::MAX } else { key };
                tree.set(i, key);
                keys[i] = key;
                let least = (0..n).map(|i| (keys[i], i)).min().unwrap();
                assert_eq!(tree.least(), least);
            }
        }
    }

    fn m() -> Maintenance {
        Maintenance::new(&SchedulerConfig::priority(), 2, 64)
    }

    #[test]
    fn a_read_goes_before_queued_steps_and_waits_for_a_short_one() {
        let mut q = m();
        // Two 50 µs page reads of GC queued at 0: the first runs 0-50, the second 50-100.
        q.push(0, StepKind::Read, 50_000, 0);
        q.push(0, StepKind::Read, 50_000, 0);
        // A host read at 10 µs waits for the first (reads are not suspended), then goes
        // before the second.
        assert_eq!(q.host_read(0, 0, 10_000, 60_000), 50_000);
        assert_eq!(q.dies[0].gc.len(), 1);
        // The second starts once the host read (50-110) is done.
        q.advance(0, 110_000, 150_000);
        assert_eq!(q.dies[0].running.unwrap().end_ns, 160_000);
    }

    #[test]
    fn a_long_erase_is_suspended_at_its_cost_and_pushed_by_the_read() {
        let mut q = m();
        q.push(1, StepKind::Erase(7), 3_000_000, 0);
        // At 100 µs the erase has 2.9 ms left (> 700 µs): suspend; the read starts at 800 µs.
        assert_eq!(q.host_read(1, 0, 100_000, 60_000), 800_000);
        assert_eq!(q.suspensions, 1);
        // Frozen from 100 µs to the read's end (860 µs): it ends 760 µs later.
        assert_eq!(q.dies[1].running.unwrap().end_ns, 3_760_000);
        // With less than 700 µs left, a read waits for it.
        assert_eq!(q.host_read(1, 860_000, 3_200_000, 60_000), 3_760_000);
        assert_eq!(q.suspensions, 1);
    }

    #[test]
    fn a_host_program_suspends_an_erase_but_not_a_program() {
        let mut q = m();
        q.push(0, StepKind::Erase(1), 5_000_000, 0);
        // 1.1 ms of transfer and program at 1 ms: the erase (4 ms left) is suspended.
        assert_eq!(q.host_program(0, 0, 1_000_000, 1_100_000), 1_700_000);
        assert_eq!(q.dies[0].running.unwrap().end_ns, 5_000_000 + 1_800_000);
        q.push(1, StepKind::Program, 1_000_000, 0);
        assert_eq!(q.host_program(1, 0, 100_000, 1_100_000), 1_000_000, "waits");
    }

    #[test]
    fn buffered_programs_release_gc_in_proportion_and_a_read_suspends_them() {
        let mut q = m(); // 64 pages per block
                         // A victim with 32 valid pages: 32 copies (each after its read) and the erase; it
                         // frees 32 pages, so each buffered program releases 33/32 GC steps.
        for _ in 0..32 {
            q.push(0, StepKind::Read, 50_000, 0);
            q.push_copy(0, 500_000, 0);
        }
        q.push(0, StepKind::Erase(9), 300_000, 0);
        q.push_write(0, 1_000_000, 0, 32_768);
        // The first copy (with its read) goes ahead of the program; the rest waits.
        assert_eq!(q.dies[0].queued.len(), 3);
        assert_eq!(q.dies[0].gc.len(), 63);
        for _ in 1..32 {
            q.push_write(0, 1_000_000, 0, 32_768);
        }
        assert!(
            q.dies[0].gc.is_empty(),
            "32 programs release the whole victim"
        );
        // The die runs the first read (0-50 µs), the copy (50-550 µs), then the program
        // (550-1,550 µs); a read at 700 µs suspends it (850 µs left > 100 µs).
        q.advance(0, 0, 600_000);
        assert_eq!(q.dies[0].running.unwrap().end_ns, 1_550_000);
        assert_eq!(q.host_read(0, 0, 700_000, 60_000), 800_000);
        q.advance(0, 860_000, 1_800_000);
        assert_eq!(
            q.take_drained(),
            32_768,
            "its bytes leave the buffer when it ends"
        );
    }

    #[test]
    fn a_copy_is_released_with_its_share_of_the_victims_reads() {
        let mut q = m();
        // The FTL's order: a victim's 6 page reads, then its 3 copies, then its erase.
        for _ in 0..6 {
            q.push(0, StepKind::Read, 80_000, 0);
        }
        for _ in 0..3 {
            q.push_copy(0, 1_000_000, 0);
        }
        q.push(0, StepKind::Erase(5), 5_000_000, 0);
        // Each release: 2 reads and a copy (6 reads over 3 copies), not all 6 reads first.
        let kinds = |q: &Maintenance| -> Vec<StepKind> {
            q.dies[0].queued.iter().map(|s| s.kind).collect()
        };
        assert!(q.dies[0].release_one());
        assert_eq!(
            kinds(&q),
            [StepKind::Read, StepKind::Read, StepKind::Program]
        );
        assert!(q.dies[0].release_one());
        assert!(q.dies[0].release_one());
        assert_eq!(
            kinds(&q).iter().filter(|k| **k == StepKind::Read).count(),
            6
        );
        assert_eq!(
            kinds(&q)
                .iter()
                .filter(|k| **k == StepKind::Program)
                .count(),
            3
        );
        assert_eq!(q.dies[0].gc.len(), 1, "the erase is left");
        assert!(q.dies[0].release_one());
        assert_eq!(q.dies[0].queued.back().unwrap().kind, StepKind::Erase(5));
        assert!(q.dies[0].read_share.is_none());
    }

    #[test]
    fn gc_not_yet_released_waits_for_the_gc_released_before_it() {
        let mut q = m();
        // Erase of block 3 released by the hard threshold, behind a buffered program; a
        // copy into block 3 stays unreleased: it may not run before that erase.
        q.push(0, StepKind::Erase(3), 300_000, 0);
        q.push_write(0, 1_000_000, 0, 100);
        q.release_through_erase(0, 3);
        q.push_copy(0, 500_000, 0);
        q.advance(0, 0, u64::MAX);
        assert_eq!(q.dies[0].clock_ns, 1_000_000 + 300_000 + 500_000);
        let mut order = Maintenance::new(&SchedulerConfig::priority(), 1, 64);
        order.push_write(0, 1_000_000, 0, 100);
        assert!(order.dies[0].gc.is_empty() && order.dies[0].released == 0);
    }

    #[test]
    fn translation_page_programs_are_released_as_fast_as_they_are_issued() {
        // One die, 64-page blocks: each victim has 16 valid pages (a read, then a copy,
        // each) and the 48 pages it frees go to 32 host programs and 16 translation-page
        // programs (a mapping cache's write-backs). Released as fast as issued, what is
        // left unreleased stays within a victim's work; counting only the copies and the
        // erase per host program (the rule before) released 11 of the 33 a victim issues,
        // and the rest piled up.
        let mut q = Maintenance::new(&SchedulerConfig::priority(), 1, 64);
        for victim in 0..50 {
            for _ in 0..16 {
                q.push(0, StepKind::Read, 1, 0);
            }
            for _ in 0..16 {
                q.push_copy(0, 1, 0);
            }
            q.push(0, StepKind::Erase(victim), 1, 0);
            for page in 0..48 {
                if page % 3 == 2 {
                    q.push_map(0, 1, 0);
                } else {
                    q.push_write(0, 1, 0, 100);
                }
            }
        }
        let unreleased = q.dies[0].gc.len();
        assert!(
            unreleased <= 16 + 16 + 1 + 16,
            "{unreleased} steps left unreleased"
        );
    }

    #[test]
    fn a_stretch_of_translation_pages_does_not_release_a_victim_at_once() {
        // 100 translation-page programs with no GC (say, reads evicting dirty map pages),
        // then a victim of 16 copies and the host programs that follow it: the first of
        // them releases its share (translation pages 100 of 133 programs: 4.4 copies with
        // their reads), not all 33 steps as a count of maps since the last victim gave.
        let mut q = Maintenance::new(&SchedulerConfig::priority(), 1, 64);
        for _ in 0..32 {
            q.push_write(0, 1, 0, 100);
        }
        q.advance(0, 0, u64::MAX);
        for _ in 0..100 {
            q.push_map(0, 1, 0);
        }
        q.advance(0, 0, u64::MAX);
        for _ in 0..16 {
            q.push(0, StepKind::Read, 1, 0);
        }
        for _ in 0..16 {
            q.push_copy(0, 1, 0);
        }
        q.push(0, StepKind::Erase(1), 1, 0);
        q.push_write(0, 1, 0, 100);
        let released = q.dies[0].released;
        assert!(released <= 12, "{released} steps released by one program");
    }

    #[test]
    fn a_full_buffer_admits_when_enough_programs_are_expected_to_end() {
        let mut q = m();
        // Die 0: 2 ms of GC ahead of its buffered program; die 1: two programs alone.
        q.push(0, StepKind::Erase(1), 2_000_000, 0);
        q.release_through_erase(0, 1); // the program opens block 1
        q.push_write(0, 500_000, 0, 100);
        q.push_write(1, 800_000, 0, 200);
        q.push_write(1, 800_000, 0, 300);
        let free = [0, 0];
        q.advance_all(&free, 0);
        // At 0 die 1's first program (ends 800 µs) is expected first, then die 1's second
        // (1.6 ms), then die 0's (2.5 ms): 200, 500 and 600 bytes freed by then.
        assert_eq!(q.admission_ns(&free, 0, 1), Some(800_000));
        assert_eq!(q.admission_ns(&free, 0, 200), Some(800_000));
        assert_eq!(q.admission_ns(&free, 0, 201), Some(1_600_000));
        assert_eq!(q.admission_ns(&free, 0, 600), Some(2_500_000));
        assert_eq!(
            q.admission_ns(&free, 0, 601),
            None,
            "nothing left to wait for"
        );
        assert_eq!(q.buffer_waits, 4);
        // A read at 100 µs suspends die 1's first program: it now ends 160 µs later, and
        // a write admitted after that counts on the later end (nothing was freed early).
        q.host_read(1, 0, 100_000, 60_000);
        q.advance_all(&[0, 160_000], 150_000);
        assert_eq!(q.admission_ns(&[0, 160_000], 150_000, 1), Some(960_000));
        q.advance_all(&[0, 160_000], 10_000_000);
        assert_eq!(
            q.buffer_slip_ns,
            2 * 160_000,
            "both of die 1's programs, each counted on, slip"
        );
        assert_eq!(
            q.take_drained(),
            600,
            "a program's bytes leave the buffer when it ends"
        );
    }

    #[test]
    fn suspensions_per_operation_are_bounded() {
        let mut q = m();
        q.push(0, StepKind::Program, 10_000_000, 0);
        let mut t = 0;
        for _ in 0..DEFAULT_MAX_SUSPENSIONS {
            let start = q.host_read(0, t, t + 1_000, 50_000);
            assert_eq!(start, t + 1_000 + DEFAULT_PROGRAM_SUSPEND_NS);
            t = start + 50_000;
        }
        let end = q.dies[0].running.unwrap().end_ns;
        assert_eq!(
            q.host_read(0, t, t + 1_000, 50_000),
            end,
            "the fifth read waits"
        );
    }

    #[test]
    fn a_program_into_a_block_waits_for_its_erase_and_what_was_queued_before() {
        let mut q = m();
        q.push(0, StepKind::Read, 50_000, 0);
        q.push(0, StepKind::Program, 500_000, 0);
        q.push(0, StepKind::Erase(3), 2_000_000, 0);
        q.push(0, StepKind::Read, 50_000, 0);
        assert!(q.erase_pending(0, 3) && !q.erase_pending(0, 4));
        // The host timeline is busy until 1 ms, so the queue runs from there, back to back.
        let end = q.drain_through_erase(0, 3, 1_000_000, 1_000_000);
        assert_eq!(end, 1_000_000 + 50_000 + 500_000 + 2_000_000);
        assert!(!q.erase_pending(0, 3));
        assert_eq!(
            q.dies[0].gc.len(),
            1,
            "the read after the erase still waits"
        );
        assert_eq!(q.drain_all(0, end), end + 50_000);
        assert!(!q.busy(0));
    }

    #[test]
    fn the_merge_kept_between_writes_answers_as_one_made_afresh() {
        // Random pushes, writes, reads (suspending programs and erases), host work and
        // admissions on four dies; every admission against the merge made from nothing.
        let mut q = Maintenance::new(&SchedulerConfig::priority(), 4, 8);
        let mut host_free = [0u64; 4];
        let (mut t, mut x) = (0u64, 99u64);
        let mut next = |n: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        let mut answered = 0;
        for _ in 0..6_000 {
            let die = next(4) as u32;
            match next(10) {
                0 => q.push(die, StepKind::Read, 40_000, t + next(3) * 10_000),
                1 => q.push_copy(die, 300_000, t),
                2 => q.push(die, StepKind::Erase(next(50) as u32), 2_000_000, t),
                3 => {
                    let start = q.host_read(die, host_free[die as usize], t, 40_000);
                    host_free[die as usize] = start + 40_000;
                }
                4 => host_free[die as usize] = host_free[die as usize].max(t) + 100_000,
                5 => {
                    // A read in a gap before host work booked later: no host timeline moves.
                    q.give_way(die, t, 40_000, t + 500_000);
                }
                _ => q.push_write(die, 350_000, t + next(2) * 50_000, 16_384),
            }
            t += next(250_000);
            q.advance_all(&host_free, t);
            let excess = next(40) * 4_096;
            let want = q.admission_from_scratch(&host_free, t, excess);
            let got = q.admission_ns(&host_free, t, excess);
            assert_eq!(got, want.map(|w| w.0), "at {t} ns, excess {excess}");
            answered += got.is_some() as u32;
        }
        assert!(answered > 2_000, "only {answered} admissions waited");
        assert!(q.suspensions > 100, "only {} suspensions", q.suspensions);
    }
}
