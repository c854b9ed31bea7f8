//! Several users in threads sharing one file system in virtual time, deterministically:
//! [`Turns`] hands each user a [`UserVfs`], a [`Vfs`] with its own clock. Calls reach the
//! file system in the order of their keys `(time, group, user)`, whatever the OS
//! scheduler does: a user's call goes once no other user can still make a call with a
//! smaller key. What each other user may still do is bounded below by its state:
//! - *running* (computing): its next call comes at its clock or later;
//! - *waiting* at a call: that call's key, exactly;
//! - *parked* at a barrier of its group (the threads of one join are one group): its
//!   group's next call comes once the group's running members are done, so at the latest
//!   clock among them or later; it holds up no member of its own group;
//! - *done*: never again.
//!
//! A call made for a parked user (by its group's coordinator between phases: handing a
//! file over, opening inputs) comes at the group's barrier or later, so calls made one
//! after another for different members reach the drive in that order, after the phase.
//!
//! Users start parked; a coordinator [`Vfs::resume`]s the members of its group before
//! their threads start (so the first of them to run cannot go ahead of a sibling that has
//! not started yet), and each parks at the barrier when it is done. Computation is
//! [`Vfs::think`] on the user's own clock.
//!
//! One file-system call's I/Os are issued back to back: another user's call that would
//! fall between them starts once the last of them is issued. (For users taking turns in
//! one thread, [`crate::Shared`] is enough.)
//!
//! The host's cores ([`Turns::on_cores`]; unlimited by default): a user's computation
//! ([`Vfs::think`]) since its last call is one burst, placed on a core when its next call
//! (or its barrier, or its end) takes its turn — in the calls' deterministic order. The
//! burst starts when it was ready or when a core frees, whichever is later (the core that
//! freed last before it was ready, else the one that frees first), and everything the user
//! does after it moves by the wait. So users compete for cores first come, first served at
//! the grain of their bursts between calls (a join's bursts are a few buffers' rows: short
//! against a time slice), not by the kernel's fair sharing within one; waiting at a barrier
//! ([`Vfs::idle`]) takes no core.

use crate::{read_slot, sync_slot, write_slot, Fd, IoTime, OpenMode, Vfs, VfsError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// A file system whose clock the users of [`Turns`] position.
pub trait VirtualClock {
    /// Sets the time of the next submissions to `t` (it may lie before the clock's current
    /// value: another user's I/O ran ahead, and the drive keeps each resource's own
    /// timeline; and before the last submission: the drive takes requests in order).
    fn issue_at(&mut self, t: u64);
    /// From now on, remember where each read and write goes (for [`IoScheduler::Cfq`]).
    fn track_positions(&mut self) {}
    /// The `(offset_bytes, len_bytes)` of the reads and writes since the last call.
    fn take_positions(&mut self) -> Vec<(u64, u64)> {
        Vec::new()
    }
}

/// How the host's block layer orders the users' requests to the drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoScheduler {
    /// In the order they are issued, in virtual time (no idling): `none`, and what
    /// mq-deadline does with one request per user in flight.
    #[default]
    Fifo,
    /// CFQ with idling, as Linux 2.6.33–4.x's block/cfq-iosched.c: each user (thread: an
    /// io_context of its own) is a queue that owns the drive for a time slice; when its
    /// request completes, the drive idles up to `idle_ns` for that user's next request
    /// before another user's may go. A queue is not idled for when it seeks (more than 4
    /// of its last 32 requests start over 800 sectors from where the previous one ended:
    /// `CFQQ_SEEKY`, `CFQQ_SEEK_THR`) or thinks longer than `idle_ns` on average
    /// (`cfq_update_idle_window`). Non-rotational drives with command queueing are never
    /// idled for (`cfq_should_idle`): use it for hard disks.
    Cfq { slice_ns: u64, idle_ns: u64 },
}

impl IoScheduler {
    /// CFQ's defaults: `cfq_slice_sync = HZ / 10` (100 ms), `cfq_slice_idle = HZ / 125`
    /// (8 ms).
    pub const CFQ: IoScheduler = IoScheduler::Cfq {
        slice_ns: 100_000_000,
        idle_ns: 8_000_000,
    };
}

/// CFQ's view of one user's queue (see [`IoScheduler::Cfq`]).
#[derive(Debug, Clone, Copy, Default)]
struct CfqQueue {
    /// One bit per request, newest lowest: it began over `CFQQ_SEEK_THR` from the end of
    /// the one before.
    seek_history: u32,
    last_pos_bytes: Option<u64>,
    /// When its last request completed (for its think time).
    last_end_ns: Option<u64>,
    /// Think time's running mean, as `cfq_update_io_thinktime` keeps it.
    ttime_samples: u64,
    ttime_total: u64,
    ttime_mean: u64,
}

impl CfqQueue {
    /// `CFQQ_SEEK_THR`: 8 * 100 sectors of 512 bytes.
    const SEEK_THR_BYTES: u64 = 800 * 512;

    fn seeky(&self) -> bool {
        self.seek_history.count_ones() > 32 / 8
    }

    /// Whether CFQ would idle for this queue (`cfq_update_idle_window`, `sample_valid`:
    /// more than 80 samples' weight before the think time counts).
    fn idles(&self, idle_ns: u64) -> bool {
        !self.seeky() && (self.ttime_samples <= 80 || self.ttime_mean <= idle_ns)
    }

    /// A request of this queue issued at `at_ns` to `[pos_bytes, pos_bytes + len_bytes)`.
    fn request(&mut self, at_ns: u64, pos_bytes: u64, len_bytes: u64, idle_ns: u64) {
        if let Some(end) = self.last_end_ns {
            let ttime = at_ns.saturating_sub(end).min(2 * idle_ns);
            self.ttime_samples = (7 * self.ttime_samples + 256) / 8;
            self.ttime_total = (7 * self.ttime_total + 256 * ttime) / 8;
            self.ttime_mean = (self.ttime_total + 128) / self.ttime_samples;
        }
        let sdist = self.last_pos_bytes.map_or(0, |p| p.abs_diff(pos_bytes));
        self.seek_history = (self.seek_history << 1) | u32::from(sdist > Self::SEEK_THR_BYTES);
        self.last_pos_bytes = Some(pos_bytes + len_bytes);
    }
}

/// The queue that owns the drive under CFQ: until `slice_end_ns`, and while another
/// user's request comes before `idle_until_ns`, the others wait.
#[derive(Debug, Clone, Copy)]
struct CfqSlice {
    owner: usize,
    slice_end_ns: u64,
    idle_until_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UserState {
    /// Computing: its next call comes at its clock or later.
    Running,
    /// Blocked at a call it wants to make at its clock.
    Waiting,
    /// At a barrier of its group (see the module's notes).
    Parked,
    /// Makes no more calls.
    Done,
}

struct Inner<V> {
    vfs: V,
    clock_ns: Vec<u64>,
    state: Vec<UserState>,
    group: Vec<usize>,
    /// When each of the host's cores is free from (None: as many cores as users).
    core_free_ns: Option<Vec<u64>>,
    scheduler: IoScheduler,
    cfq_queues: Vec<CfqQueue>,
    cfq_slice: Option<CfqSlice>,
    /// Users blocked on the condition variable: with none, a change wakes no one (and
    /// costs no system call).
    sleepers: usize,
}

impl<V> Inner<V> {
    /// Places a burst of `ns` of computation ready at `ready_ns` on a core; returns how
    /// long it waited for one (0 on a host without a core limit).
    fn place_burst(&mut self, ready_ns: u64, ns: u64) -> u64 {
        let Some(cores) = self.core_free_ns.as_mut() else {
            return 0;
        };
        // The core that freed last before the burst was ready (keeping the others free
        // for bursts ready earlier), else the one that frees first.
        let pick = cores
            .iter()
            .enumerate()
            .filter(|&(_, &f)| f <= ready_ns)
            .max_by_key(|&(i, &f)| (f, std::cmp::Reverse(i)))
            .or_else(|| cores.iter().enumerate().min_by_key(|&(i, &f)| (f, i)))
            .map(|(i, _)| i);
        let Some(c) = pick else {
            return 0; // no cores at all: refused when made
        };
        let start = ready_ns.max(cores[c]);
        cores[c] = start + ns;
        start - ready_ns
    }

    /// The earliest time group `g`'s parked members can call again: the latest clock of
    /// its members still in play.
    fn barrier_ns(&self, g: usize) -> u64 {
        (0..self.state.len())
            .filter(|&j| self.group[j] == g && self.state[j] != UserState::Done)
            .map(|j| self.clock_ns[j])
            .max()
            .unwrap_or(0)
    }

    /// Whether user `u`, waiting at its clock, may make its call now.
    fn may_go(&self, u: usize) -> bool {
        let (t, g) = (self.clock_ns[u], self.group[u]);
        let mine = (t, g, u);
        (0..self.state.len()).all(|j| {
            j == u
                || match self.state[j] {
                    UserState::Running | UserState::Waiting => {
                        (self.clock_ns[j], self.group[j], j) > mine
                    }
                    UserState::Parked => {
                        self.group[j] == g
                            || (self.barrier_ns(self.group[j]), self.group[j]) > (t, g)
                    }
                    UserState::Done => true,
                }
        })
    }
}

/// One file system shared by threads in deterministic virtual time.
pub struct Turns<V> {
    inner: Mutex<Inner<V>>,
    turn: Condvar,
}

impl<V: Vfs + VirtualClock> Turns<V> {
    /// Shares `vfs` among `users` independent users (each its own group), every clock
    /// starting at its clock.
    pub fn new(vfs: V, users: usize) -> Arc<Turns<V>> {
        Self::in_groups(vfs, users, 1)
    }

    /// Shares `vfs` among `groups` groups of `per_group` users each (user `u` is in group
    /// `u / per_group`): the threads of one program that meet at barriers are one group.
    pub fn in_groups(vfs: V, groups: usize, per_group: usize) -> Arc<Turns<V>> {
        Self::on_cores(vfs, groups, per_group, None)
    }

    /// As [`Turns::in_groups`], on a host with `cores` cores (None: a core for every user,
    /// so computation never waits; `Some(0)` counts as one core).
    pub fn on_cores(
        vfs: V,
        groups: usize,
        per_group: usize,
        cores: Option<usize>,
    ) -> Arc<Turns<V>> {
        let now = vfs.now_ns();
        let users = groups * per_group.max(1);
        Arc::new(Turns {
            inner: Mutex::new(Inner {
                vfs,
                clock_ns: vec![now; users],
                state: vec![UserState::Parked; users],
                group: (0..users).map(|u| u / per_group.max(1)).collect(),
                core_free_ns: cores.map(|c| vec![now; c.max(1)]),
                scheduler: IoScheduler::Fifo,
                cfq_queues: vec![CfqQueue::default(); users],
                cfq_slice: None,
                sleepers: 0,
            }),
            turn: Condvar::new(),
        })
    }

    /// Orders the users' requests with `scheduler` (before any user's first call).
    pub fn set_scheduler(&self, scheduler: IoScheduler) {
        let mut g = self.lock();
        if scheduler != IoScheduler::Fifo {
            g.vfs.track_positions();
        }
        g.scheduler = scheduler;
    }

    fn lock(&self) -> MutexGuard<'_, Inner<V>> {
        self.inner
            .lock()
            .expect("no user panicked holding the file system")
    }

    /// The handle of user `user` (one per thread); it starts parked.
    pub fn user(self: &Arc<Self>, user: usize) -> UserVfs<V> {
        let g = self.lock();
        UserVfs {
            turns: self.clone(),
            user,
            clock_ns: g.clock_ns[user],
            io: IoTime::default(),
            burst_ns: 0,
            burst_ready_ns: 0,
        }
    }

    /// Starts a round: every user's clock moves to the latest of them (and of the file
    /// system's), every user is parked. Returns the round's start time.
    pub fn start_round(&self) -> u64 {
        let mut g = self.lock();
        let t = g
            .clock_ns
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .max(g.vfs.now_ns());
        g.clock_ns.iter_mut().for_each(|c| *c = t);
        g.state.iter_mut().for_each(|s| *s = UserState::Parked);
        t
    }

    /// Runs `f` on the file system between rounds, its clock at the latest user's.
    pub fn with_vfs<R>(&self, f: impl FnOnce(&mut V) -> R) -> R {
        let mut g = self.lock();
        let latest = g.clock_ns.iter().copied().max().unwrap_or(0);
        let now = g.vfs.now_ns();
        if latest > now {
            g.vfs.think(latest - now);
        }
        f(&mut g.vfs)
    }

    /// Sets user `u`'s state and shared clock, and wakes the others to look again.
    fn set(&self, u: usize, clock_ns: u64, state: UserState) {
        let wake = match self.inner.lock() {
            Ok(mut g) => {
                if g.state[u] != UserState::Done {
                    g.state[u] = state;
                }
                g.clock_ns[u] = clock_ns;
                g.sleepers > 0
            }
            Err(_) => true,
        };
        if wake {
            self.turn.notify_all();
        }
    }
}

/// One user's view of a [`Turns`]: every call waits for its turn in virtual time.
pub struct UserVfs<V: Vfs + VirtualClock> {
    turns: Arc<Turns<V>>,
    user: usize,
    clock_ns: u64,
    io: IoTime,
    /// Computation since the burst was last placed on a core, and when it was ready.
    burst_ns: u64,
    burst_ready_ns: u64,
}

impl<V: Vfs + VirtualClock> UserVfs<V> {
    /// Waits for this user's turn at its clock with `g` held, placing its pending burst of
    /// computation on a core first (which may move its clock and so its turn).
    fn wait_turn<'a>(
        &mut self,
        turns: &'a Turns<V>,
        mut g: MutexGuard<'a, Inner<V>>,
    ) -> MutexGuard<'a, Inner<V>> {
        let u = self.user;
        loop {
            g.clock_ns[u] = self.clock_ns;
            g.state[u] = UserState::Waiting;
            if g.sleepers > 0 {
                turns.turn.notify_all();
            }
            while !g.may_go(u) {
                g.sleepers += 1;
                g = turns
                    .turn
                    .wait(g)
                    .expect("no user panicked holding the file system");
                g.sleepers -= 1;
            }
            let burst = std::mem::take(&mut self.burst_ns);
            let waited = if burst > 0 {
                g.place_burst(self.burst_ready_ns, burst)
            } else {
                0
            };
            if waited == 0 {
                return g;
            }
            // It waited for a core: its call comes later, maybe after others'.
            self.clock_ns += waited;
        }
    }

    /// Places a pending burst of computation on a core (at the barrier or the end: what
    /// the user computed last must still take a core before its clock counts).
    fn settle_burst(&mut self) {
        if self.burst_ns == 0 {
            return;
        }
        let turns = self.turns.clone();
        let g = turns.lock();
        if g.core_free_ns.is_none() {
            self.burst_ns = 0;
            return;
        }
        let g = self.wait_turn(&turns, g);
        drop(g);
    }

    /// Runs `f` when it is this user's turn, at its clock; adds the time it took to
    /// `slot` of this user's I/O time.
    fn with_turn<R>(
        &mut self,
        slot: Option<fn(&mut IoTime) -> &mut u64>,
        f: impl FnOnce(&mut V) -> R,
    ) -> R {
        let u = self.user;
        let turns = self.turns.clone();
        let g = turns.lock();
        if g.state[u] == UserState::Parked {
            // A call on behalf of a parked user (its group's coordinator working between
            // phases) comes after the group's barrier, which is what the group's bound
            // promised the other groups; this also puts a coordinator's calls in sequence.
            self.clock_ns = self.clock_ns.max(g.barrier_ns(g.group[u]));
        }
        let mut g = self.wait_turn(&turns, g);
        // CFQ: another user's queue may own the drive (its slice, its idle window).
        while let IoScheduler::Cfq { .. } = g.scheduler {
            let Some(slice) = g.cfq_slice.filter(|s| {
                s.owner != u
                    && g.state[s.owner] != UserState::Done
                    && self.clock_ns < s.slice_end_ns
            }) else {
                break;
            };
            if self.clock_ns >= slice.idle_until_ns {
                break;
            }
            // Wait for the owner's next request or the end of its idling, whichever
            // comes first (its request, with an earlier key, goes first).
            self.clock_ns = slice.idle_until_ns.min(slice.slice_end_ns);
            g = self.wait_turn(&turns, g);
        }
        // At the user's own time: a call that finds background work (writeback, readahead)
        // queued ahead on the drive waits for it only if it sends requests, which the drive
        // takes in order after that work.
        let start = self.clock_ns;
        g.vfs.issue_at(start);
        let r = f(&mut g.vfs);
        let end = g.vfs.now_ns();
        if let IoScheduler::Cfq { slice_ns, idle_ns } = g.scheduler {
            let positions = g.vfs.take_positions();
            if !positions.is_empty() {
                let q = &mut g.cfq_queues[u];
                for &(pos, len) in &positions {
                    q.request(start, pos, len, idle_ns);
                }
                q.last_end_ns = Some(end);
                let idles = q.idles(idle_ns);
                let slice_end_ns = match g.cfq_slice {
                    Some(s) if s.owner == u && start < s.slice_end_ns => s.slice_end_ns,
                    _ => start + slice_ns,
                };
                g.cfq_slice = Some(CfqSlice {
                    owner: u,
                    slice_end_ns,
                    idle_until_ns: if idles { end + idle_ns } else { end },
                });
            }
        }
        if let Some(slot) = slot {
            *slot(&mut self.io) += end.saturating_sub(self.clock_ns);
        }
        self.clock_ns = end.max(self.clock_ns);
        g.clock_ns[u] = self.clock_ns;
        g.state[u] = UserState::Running;
        if g.sleepers > 0 {
            turns.turn.notify_all();
        }
        r
    }
}

impl<V: Vfs + VirtualClock> Drop for UserVfs<V> {
    fn drop(&mut self) {
        self.settle_burst();
        self.turns.set(self.user, self.clock_ns, UserState::Done);
    }
}

impl<V: Vfs + VirtualClock> Vfs for UserVfs<V> {
    fn open(&mut self, name: &str, mode: OpenMode) -> Result<Fd, VfsError> {
        self.with_turn(Some(write_slot), |v| v.open(name, mode))
    }
    fn close(&mut self, fd: Fd) {
        self.turns.lock().vfs.close(fd)
    }
    fn len(&self, fd: Fd) -> u64 {
        self.turns.lock().vfs.len(fd)
    }
    fn read_at(&mut self, fd: Fd, offset: u64, buf: &mut [u8]) -> Result<usize, VfsError> {
        self.with_turn(Some(read_slot), |v| v.read_at(fd, offset, buf))
    }
    fn write_at(&mut self, fd: Fd, offset: u64, data: &[u8]) -> Result<(), VfsError> {
        self.with_turn(Some(write_slot), |v| v.write_at(fd, offset, data))
    }
    fn set_write_hint(&mut self, fd: Fd, hint: crate::WriteHint) -> Result<(), VfsError> {
        self.turns.lock().vfs.set_write_hint(fd, hint)
    }
    fn fallocate(&mut self, fd: Fd, offset: u64, len: u64) -> Result<(), VfsError> {
        self.with_turn(Some(write_slot), |v| v.fallocate(fd, offset, len))
    }
    fn truncate(&mut self, fd: Fd, len: u64) -> Result<(), VfsError> {
        self.with_turn(Some(write_slot), |v| v.truncate(fd, len))
    }
    fn fsync(&mut self, fd: Fd) -> Result<(), VfsError> {
        self.with_turn(Some(sync_slot), |v| v.fsync(fd))
    }
    fn sync_files(&mut self, fds: &[Fd], dir: bool) -> Result<(), VfsError> {
        self.with_turn(Some(sync_slot), |v| v.sync_files(fds, dir))
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), VfsError> {
        self.with_turn(Some(write_slot), |v| v.rename(from, to))
    }
    fn unlink(&mut self, name: &str) -> Result<(), VfsError> {
        self.with_turn(Some(write_slot), |v| v.unlink(name))
    }
    fn sync_dir(&mut self) -> Result<(), VfsError> {
        self.with_turn(Some(sync_slot), |v| v.sync_dir())
    }
    fn list(&self) -> Vec<String> {
        self.turns.lock().vfs.list()
    }
    fn exists(&self, name: &str) -> bool {
        self.turns.lock().vfs.exists(name)
    }
    /// This user's clock.
    fn now_ns(&self) -> u64 {
        self.clock_ns
    }
    /// Computation: on a host with a core limit, it takes a core when this user's next
    /// call takes its turn (see the module's notes).
    fn think(&mut self, ns: u64) {
        if self.burst_ns == 0 {
            self.burst_ready_ns = self.clock_ns;
        }
        self.burst_ns += ns;
        self.clock_ns += ns;
    }
    /// Waiting (at a barrier's time): needs no core.
    fn idle(&mut self, ns: u64) {
        self.clock_ns += ns;
    }
    /// Waits at its group's barrier (see the module's notes).
    fn park(&mut self) {
        self.settle_burst();
        self.turns.set(self.user, self.clock_ns, UserState::Parked);
    }
    /// Leaves the barrier: computing again from its clock.
    fn resume(&mut self) {
        self.turns.set(self.user, self.clock_ns, UserState::Running);
    }
    fn io_time(&self) -> IoTime {
        self.io
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::tests::drive;

    /// Two users in threads, one computing more between its writes: each user's end time
    /// and the drive's submission order.
    fn run() -> (Vec<u64>, Vec<u64>) {
        let turns = Turns::new(drive(), 2);
        let ends: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|u| {
                    let mut v = turns.user(u);
                    s.spawn(move || {
                        let fd = v.open(&format!("f{u}"), OpenMode::create()).unwrap();
                        for i in 0..50u64 {
                            v.think(if u == 0 { 10_000 } else { 100_000 });
                            v.write_at(fd, i * 8192, &[u as u8; 8192]).unwrap();
                        }
                        v.now_ns()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let order = turns.with_vfs(|v| {
            let f0 = v.fs().lookup("f0").unwrap();
            let first = v.fs().extents(f0).unwrap()[0].start_block;
            vec![first, v.fs().stats().data_write_requests]
        });
        (ends, order)
    }

    #[test]
    fn users_in_threads_share_a_drive_in_time_order_deterministically() {
        let (ends, order) = run();
        for _ in 0..5 {
            assert_eq!(
                run(),
                (ends.clone(), order.clone()),
                "same inputs, same run"
            );
        }
        assert_eq!(order[1], 100, "every write reached the drive");
        // The user that computes less finishes first; both spent at least their thinking.
        assert!(ends[0] < ends[1], "{ends:?}");
        assert!(ends[1] >= 50 * 100_000);
    }

    /// Two users in threads on a host with `cores` cores (None: unlimited), each
    /// resumed, running `work(user, vfs)`, then parked: each user's time since the start.
    fn two_users(
        cores: Option<usize>,
        work: impl Fn(usize, &mut UserVfs<crate::SimVfs>) + Sync,
    ) -> Vec<u64> {
        let turns = Turns::on_cores(drive(), 2, 1, cores);
        let t0 = turns.start_round();
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|u| {
                    let mut v = turns.user(u);
                    let work = &work;
                    s.spawn(move || {
                        v.resume();
                        work(u, &mut v);
                        v.park();
                        v.now_ns() - t0
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// Two users computing 100 µs before each of 20 writes and once more after, on a
    /// host with `cores` cores: each user's end time.
    fn computing_users(cores: Option<usize>) -> Vec<u64> {
        two_users(cores, |u, v| {
            let fd = v.open(&format!("f{u}"), OpenMode::create()).unwrap();
            for i in 0..20u64 {
                v.think(100_000);
                v.write_at(fd, i * 4096, &[u as u8; 4096]).unwrap();
            }
            v.think(100_000);
        })
    }

    #[test]
    fn users_share_the_hosts_cores() {
        let free = computing_users(None);
        assert_eq!(computing_users(Some(2)), free, "a core each: no waiting");
        let one = computing_users(Some(1));
        for _ in 0..5 {
            assert_eq!(computing_users(Some(1)), one, "same inputs, same run");
        }
        // 2 × 21 bursts of 100 µs on one core: the later user ends after 4.2 ms of
        // computation, the earlier one waited for the other's bursts too.
        let latest = *one.iter().max().unwrap();
        assert!(latest >= 4_200_000, "{one:?}");
        assert!(
            one.iter().all(|&e| e > *free.iter().min().unwrap()),
            "{one:?} vs {free:?}"
        );
        assert!(
            latest < 2 * free.iter().max().unwrap() + 1_000_000,
            "{one:?} vs {free:?}"
        );
    }

    /// Two users on one core: user 0 idles (`a_idles`, else computes) 1 ms, the other
    /// computes 1 ms. Their times since the start.
    fn one_core(a_idles: bool) -> [u64; 2] {
        let ends = two_users(Some(1), |u, v| {
            if u == 0 && a_idles {
                v.idle(1_000_000);
            } else {
                v.think(1_000_000);
            }
        });
        [ends[0], ends[1]]
    }

    #[test]
    fn waiting_takes_no_core() {
        assert_eq!(one_core(true), [1_000_000, 1_000_000]);
        // Two computing users on it: the second in the calls' order waits for the first.
        assert_eq!(one_core(false), [1_000_000, 2_000_000]);
    }

    /// Two users in threads on a 7,200 rpm disk, each writing 64 KiB pieces of its own
    /// preallocated 32 MiB file (`sequential` in order, else scattered over it), with
    /// `scheduler`: how often the drive went from one user's write to the other's.
    fn two_writers_on_a_disk(scheduler: IoScheduler, sequential: bool) -> usize {
        use flash::Preset;
        use simfs::{SimFs, Timed};
        let dev = Preset::load("hdd7200")
            .unwrap()
            .with_capacity(4 << 30)
            .build()
            .unwrap();
        let fs = SimFs::mkfs(Timed::new(dev), simfs::FsConfig::new(2 << 30)).unwrap();
        let turns = Turns::new(crate::SimVfs::new(fs), 2);
        turns.set_scheduler(scheduler);
        let mut ends: Vec<(u64, usize)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|u| {
                    let mut v = turns.user(u);
                    s.spawn(move || {
                        v.resume();
                        let fd = v.open(&format!("f{u}"), OpenMode::create()).unwrap();
                        v.fallocate(fd, 0, 32 << 20).unwrap();
                        let mut ends = Vec::new();
                        for i in 0..256u64 {
                            let piece = if sequential { i } else { i * 97 % 256 };
                            v.think(20_000);
                            v.write_at(fd, piece * 65536, &[u as u8; 65536]).unwrap();
                            ends.push((v.now_ns(), u));
                        }
                        v.park();
                        ends
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        ends.sort();
        ends.windows(2).filter(|w| w[0].1 != w[1].1).count()
    }

    #[test]
    fn cfq_idles_for_a_sequential_user_but_not_for_a_seeky_one() {
        // Two sequential writers: without idling the drive takes their writes in turn;
        // CFQ lets each run for its 100 ms slice.
        let fifo = two_writers_on_a_disk(IoScheduler::Fifo, true);
        let cfq = two_writers_on_a_disk(IoScheduler::CFQ, true);
        assert_eq!(
            cfq,
            two_writers_on_a_disk(IoScheduler::CFQ, true),
            "deterministic"
        );
        assert!(fifo > 100, "FIFO alternates: {fifo} switches");
        assert!(cfq < 20, "CFQ keeps a user's slice: {cfq} switches");
        // Scattered writers are seeky: after their first requests CFQ stops idling for
        // them and they alternate as without it.
        let cfq = two_writers_on_a_disk(IoScheduler::CFQ, false);
        assert!(cfq > 300, "{cfq} switches");
    }

    #[test]
    fn a_parked_user_holds_up_no_member_of_its_group() {
        let turns = Turns::in_groups(drive(), 1, 2);
        let (mut a, mut b) = (turns.user(0), turns.user(1));
        a.park();
        // a is at the group's barrier: b's calls do not wait for it.
        let fd = b.open("x", OpenMode::create()).unwrap();
        b.write_at(fd, 0, &[1u8; 4096]).unwrap();
        b.park();
        // a's next call takes its turn again, after b's.
        a.think(b.now_ns());
        let fd = a.open("y", OpenMode::create()).unwrap();
        a.write_at(fd, 0, &[2u8; 4096]).unwrap();
        assert!(a.now_ns() > b.now_ns());
    }

    /// Two groups of two threads on one drive, each group with a barrier between two
    /// phases (its threads park, the coordinator meets their clocks and resumes them):
    /// every user's end time and the drive's write count.
    fn groups_with_barriers() -> Vec<u64> {
        let turns = Turns::in_groups(drive(), 2, 2);
        let mut ends: Vec<u64> = std::thread::scope(|s| {
            let coordinators: Vec<_> = (0..2)
                .map(|g| {
                    let turns = turns.clone();
                    s.spawn(move || {
                        let mut users: Vec<UserVfs<_>> =
                            (0..2).map(|t| turns.user(g * 2 + t)).collect();
                        for phase in 0..2u64 {
                            let t0 = users.iter().map(|u| u.now_ns()).max().unwrap();
                            for u in users.iter_mut() {
                                u.think(t0 - u.now_ns());
                                u.resume();
                            }
                            std::thread::scope(|s2| {
                                for (t, u) in users.iter_mut().enumerate() {
                                    s2.spawn(move || {
                                        let name = format!("g{g}t{t}p{phase}");
                                        let fd = u.open(&name, OpenMode::create()).unwrap();
                                        for i in 0..20u64 {
                                            u.think(1_000 * (1 + t as u64 + g as u64));
                                            u.write_at(fd, i * 8192, &[t as u8; 8192]).unwrap();
                                        }
                                        u.park();
                                    });
                                }
                            });
                        }
                        users.iter().map(|u| u.now_ns()).collect::<Vec<u64>>()
                    })
                })
                .collect();
            coordinators
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        ends.push(turns.with_vfs(|v| v.fs().stats().data_write_requests));
        ends
    }

    #[test]
    fn groups_meeting_at_barriers_share_a_drive_deterministically() {
        let first = groups_with_barriers();
        assert_eq!(first[4], 160, "every write reached the drive");
        for _ in 0..20 {
            assert_eq!(groups_with_barriers(), first, "same inputs, same run");
        }
    }

    /// Group A's coordinator makes calls for its two parked members one after the other
    /// (as a join hands files over between phases) while group B's user calls at a time
    /// between them; `coordinator_late` delays the coordinator in wall time instead of B.
    /// Returns where B's and a2's files landed and every end clock.
    fn hand_over_beside_another_group(coordinator_late: bool) -> Vec<u64> {
        let turns = Turns::in_groups(drive(), 2, 2);
        let (mut a1, mut a2, mut b) = (turns.user(0), turns.user(1), turns.user(2));
        drop(turns.user(3));
        let pause = || std::thread::sleep(std::time::Duration::from_millis(30));
        let ends = std::thread::scope(|s| {
            let other = s.spawn(|| {
                if !coordinator_late {
                    pause();
                }
                b.resume();
                b.think(1_010);
                let fd = b.open("b", OpenMode::create()).unwrap();
                b.write_at(fd, 0, &[3u8; 8192]).unwrap();
                b.now_ns()
            });
            if coordinator_late {
                pause();
            }
            // The phase ended at +1000 for both members (a meet moves their own clocks).
            a1.think(1_000);
            a2.think(1_000);
            for (name, u) in [("a1", &mut a1), ("a2", &mut a2)] {
                let fd = u.open(name, OpenMode::create()).unwrap();
                u.write_at(fd, 0, &[1u8; 65536]).unwrap();
                u.park();
            }
            vec![a1.now_ns(), a2.now_ns(), other.join().unwrap()]
        });
        let mut out = turns.with_vfs(|v| {
            ["b", "a2"]
                .iter()
                .map(|n| {
                    let f = v.fs().lookup(n).unwrap();
                    v.fs().extents(f).unwrap()[0].start_block
                })
                .collect::<Vec<u64>>()
        });
        out.extend(ends);
        out
    }

    #[test]
    fn calls_for_parked_members_do_not_depend_on_thread_timing() {
        let early = hand_over_beside_another_group(false);
        let late = hand_over_beside_another_group(true);
        assert_eq!(early, late, "[b's block, a2's block, a1, a2, b end]");
        // a2's call comes after a1's (the coordinator's calls are in sequence), so B's,
        // at a time between, reaches the drive first.
        assert!(early[0] < early[1], "{early:?}");
        assert!(early[3] > early[2], "{early:?}");
    }

    #[test]
    fn a_user_s_clock_is_its_own() {
        let turns = Turns::new(drive(), 2);
        let (mut a, b) = (turns.user(0), turns.user(1));
        let t0 = a.now_ns(); // after mkfs
        a.think(5_000);
        assert_eq!(a.now_ns(), t0 + 5_000);
        assert_eq!(b.now_ns(), t0);
        drop(b);
        let fd = a.open("x", OpenMode::create()).unwrap();
        a.write_at(fd, 0, &[1u8; 4096]).unwrap();
        assert!(a.now_ns() > t0 + 5_000 && a.io_time().write_ns > 0);
        let end = a.now_ns();
        drop(a);
        assert_eq!(
            turns.start_round(),
            end,
            "the round starts at the latest clock"
        );
    }

    #[test]
    fn a_writer_below_the_hard_limit_never_waits_for_the_flusher() {
        // Buffered writes that pass only the background limit start a writeback batch of
        // about 100 ms on the drive; the writer goes on at its own time (the flusher
        // submits, not the writer), under Turns as without it. (Before, every call began
        // at the drive's last submission: here one write waited 102 ms.)
        let dev = flash::Preset::load("x25e")
            .unwrap()
            .with_capacity(1 << 30)
            .build()
            .unwrap();
        let fs =
            simfs::SimFs::mkfs(simfs::Timed::new(dev), simfs::FsConfig::new(512 << 20)).unwrap();
        let v = crate::SimVfs::with_host(fs, crate::HostConfig::linux(1 << 30));
        let turns = Turns::new(v, 1);
        let mut u = turns.user(0);
        u.resume();
        let fds: Vec<Fd> = (0..40)
            .map(|i| u.open(&format!("f{i}"), OpenMode::create()).unwrap())
            .collect();
        let mut longest = 0;
        for page in 0..700u64 {
            for &fd in &fds {
                u.think(1_000);
                let t0 = u.now_ns();
                u.write_at(fd, page * 4096, &[1u8; 4096]).unwrap();
                longest = longest.max(u.now_ns() - t0);
            }
        }
        let written = turns.with_vfs(|v| v.fs().stats().data_write_requests);
        assert!(written > 0, "background writeback ran");
        assert_eq!(longest, 0, "a buffered write waited");
    }
}
