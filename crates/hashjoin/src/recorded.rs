//! A serial join's storage calls, recorded once and replayed: the repetitions of one join
//! on a simulated drive make the same calls every time (the join is deterministic and its
//! inputs are the same), so a repetition after the first can send the first one's calls
//! to a fresh store without computing the join again. The drive, the host path and simfs
//! see exactly what the join would have sent them — the same sizes, offsets, files,
//! deletes and computation, in the same order — so every simulated number is the same;
//! only the bytes written are zeros (nothing reads them back as data), and reads ignore
//! their bytes (`Store::read_at_unseen`: a generated input table makes none).
//!
//! [`Recorder`] wraps a store for the first repetition; [`Recording::replay`] plays its
//! calls on another. A recording refuses to replay what it cannot reproduce: a parallel
//! join (files handed between threads, barriers set by other threads' clocks), and a join
//! whose phase times are not the differences of its clock readings that the replay
//! relies on ([`Recording::check_phases`]).

use crate::store::{FileId, Store, StoreStats};
use crate::JoinError;
use rustc_hash::FxHashMap;
use std::cell::RefCell;

/// One call of the join to its store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    /// `create`, and the id the store gave.
    Create(FileId),
    Fallocate(FileId, u64),
    /// `set_hint`, with the hint's Linux value.
    Hint(FileId, u8),
    /// `append` of this many bytes.
    Append(FileId, u32),
    /// `read_at`: file, offset, buffer length, bytes read.
    ReadAt(FileId, u64, u32, u32),
    Delete(FileId),
    /// `compute`, consecutive calls added up (a user's clock and its burst of computation
    /// move by their sum either way).
    Compute(u64),
    Idle(u64),
    /// A reading of the store's clock (its value comes from the replay).
    Elapsed,
    /// `wait_until` the store's own clock: a no-op with one thread, kept in its place.
    WaitUntilNow,
    Park,
    Resume,
}

/// Why a recording cannot be replayed.
const PARALLEL: &str = "a parallel join's calls depend on its threads' clocks";

/// A store that records the join's calls to the store it wraps.
pub struct Recorder<S: Store> {
    inner: S,
    calls: RefCell<Vec<Call>>,
    /// The clock readings of the recorded run, in call order.
    elapsed: RefCell<Vec<u64>>,
    /// Set when the join did something a replay cannot reproduce.
    unreplayable: Option<&'static str>,
}

/// The calls of one run of a join, ready to replay.
#[derive(Debug, Clone)]
pub struct Recording {
    calls: Vec<Call>,
    elapsed: Vec<u64>,
    unreplayable: Option<&'static str>,
    /// The longest append and read, bytes (the replay's buffers).
    max_append: usize,
    max_read: usize,
}

/// A replayed run: the store's clock readings at the recorded places.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    pub elapsed: Vec<u64>,
}

impl<S: Store> Recorder<S> {
    pub fn new(inner: S) -> Recorder<S> {
        Recorder {
            inner,
            calls: RefCell::new(Vec::new()),
            elapsed: RefCell::new(Vec::new()),
            unreplayable: None,
        }
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The recording, and the store back.
    pub fn finish(self) -> (Recording, S) {
        let calls = self.calls.into_inner();
        let max_append = calls
            .iter()
            .map(|c| match c {
                Call::Append(_, n) => *n as usize,
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        let max_read = calls
            .iter()
            .map(|c| match c {
                Call::ReadAt(_, _, n, _) => *n as usize,
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        (
            Recording {
                calls,
                elapsed: self.elapsed.into_inner(),
                unreplayable: self.unreplayable,
                max_append,
                max_read,
            },
            self.inner,
        )
    }

    fn push(&self, c: Call) {
        let mut calls = self.calls.borrow_mut();
        if let (Call::Compute(more), Some(Call::Compute(ns))) = (c, calls.last_mut()) {
            *ns += more;
            return;
        }
        calls.push(c);
    }
}

impl<S: Store> Store for Recorder<S> {
    fn create(&mut self) -> Result<FileId, JoinError> {
        let f = self.inner.create()?;
        self.push(Call::Create(f));
        Ok(f)
    }

    fn set_hint(&mut self, f: FileId, hint: vfs::WriteHint) -> Result<(), JoinError> {
        self.inner.set_hint(f, hint)?;
        self.push(Call::Hint(f, hint as u8));
        Ok(())
    }

    fn fallocate(&mut self, f: FileId, bytes: u64) -> Result<(), JoinError> {
        self.inner.fallocate(f, bytes)?;
        self.push(Call::Fallocate(f, bytes));
        Ok(())
    }

    fn append(&mut self, f: FileId, data: &[u8]) -> Result<(), JoinError> {
        self.inner.append(f, data)?;
        let n = u32::try_from(data.len()).map_err(|_| {
            JoinError::Config("an append of 4 GiB or more cannot be recorded".into())
        })?;
        self.push(Call::Append(f, n));
        Ok(())
    }

    fn read_at(&mut self, f: FileId, offset: u64, buf: &mut [u8]) -> Result<usize, JoinError> {
        let got = self.inner.read_at(f, offset, buf)?;
        let n = u32::try_from(buf.len())
            .map_err(|_| JoinError::Config("a read of 4 GiB or more cannot be recorded".into()))?;
        self.push(Call::ReadAt(f, offset, n, got as u32));
        Ok(got)
    }

    fn len(&self, f: FileId) -> u64 {
        self.inner.len(f)
    }

    fn delete(&mut self, f: FileId) -> Result<(), JoinError> {
        self.inner.delete(f)?;
        self.push(Call::Delete(f));
        Ok(())
    }

    fn elapsed_ns(&self) -> u64 {
        let t = self.inner.elapsed_ns();
        self.push(Call::Elapsed);
        self.elapsed.borrow_mut().push(t);
        t
    }

    fn compute(&mut self, ns: u64) {
        self.inner.compute(ns);
        self.push(Call::Compute(ns));
    }

    fn stats(&self) -> StoreStats {
        self.inner.stats()
    }

    fn hand_over(&mut self, f: FileId, to: &mut Self) -> Result<FileId, JoinError> {
        self.unreplayable = Some(PARALLEL);
        to.unreplayable = Some(PARALLEL);
        self.inner.hand_over(f, &mut to.inner)
    }

    fn park(&mut self) {
        self.inner.park();
        self.push(Call::Park);
    }

    fn resume(&mut self) {
        self.inner.resume();
        self.push(Call::Resume);
    }

    fn wait_until(&mut self, elapsed_ns: u64) {
        let now = self.inner.elapsed_ns();
        if elapsed_ns > now {
            // Another thread's clock set the barrier.
            self.unreplayable = Some(PARALLEL);
            self.inner.idle(elapsed_ns - now);
        } else {
            self.push(Call::WaitUntilNow);
        }
    }

    fn idle(&mut self, ns: u64) {
        self.inner.idle(ns);
        self.push(Call::Idle(ns));
    }
}

impl Recording {
    /// The recorded run's clock readings.
    pub fn elapsed(&self) -> &[u64] {
        &self.elapsed
    }

    /// Whether the run's phase times are the differences of its last three clock readings
    /// (start, end of partitioning, end of the join), as a replay computes them: an
    /// error naming what differs otherwise.
    pub fn check_phases(&self, partition_ns: u64, join_ns: u64) -> Result<(), String> {
        if let Some(why) = self.unreplayable {
            return Err(why.into());
        }
        let e = &self.elapsed;
        let [t0, t1, t2] = match e.len().checked_sub(3).map(|i| &e[i..]) {
            Some(&[a, b, c]) => [a, b, c],
            _ => {
                return Err(format!(
                    "the join read its clock {} times, not 3 or more",
                    e.len()
                ))
            }
        };
        if (t1 - t0, t2 - t1) != (partition_ns, join_ns) {
            return Err(format!(
                "the join's phase times ({partition_ns} and {join_ns} ns) are not its last clock readings' differences ({} and {} ns)",
                t1 - t0,
                t2 - t1
            ));
        }
        Ok(())
    }

    /// The partition and join phase times of a replay (see [`Recording::check_phases`]).
    pub fn phases(replayed: &Replayed) -> (u64, u64) {
        match replayed
            .elapsed
            .len()
            .checked_sub(3)
            .map(|i| &replayed.elapsed[i..])
        {
            Some(&[a, b, c]) => (b - a, c - b),
            _ => (0, 0),
        }
    }

    /// Sends the recorded calls to `store`, set up as the recorded one was before the join
    /// (the same inputs, so the same ids); appends write zeros. Fails if the store
    /// answers differently from the recorded one (a read of another length).
    pub fn replay<S: Store>(&self, store: &mut S) -> Result<Replayed, JoinError> {
        if let Some(why) = self.unreplayable {
            return Err(JoinError::Config(format!(
                "cannot replay the join's calls: {why}"
            )));
        }
        let zeros = vec![0u8; self.max_append];
        let mut buf = vec![0u8; self.max_read];
        // Recorded ids to this store's (the same but for a store that numbers otherwise).
        let mut ids: FxHashMap<FileId, FileId> = FxHashMap::default();
        let id = |ids: &FxHashMap<FileId, FileId>, f: FileId| *ids.get(&f).unwrap_or(&f);
        let mut elapsed = Vec::with_capacity(self.elapsed.len());
        for &c in &self.calls {
            match c {
                Call::Create(f) => {
                    let new = store.create()?;
                    ids.insert(f, new);
                }
                Call::Fallocate(f, bytes) => store.fallocate(id(&ids, f), bytes)?,
                Call::Hint(f, h) => {
                    let hint = vfs::WriteHint::from_value(h.into()).expect("recorded from a hint");
                    store.set_hint(id(&ids, f), hint)?
                }
                Call::Append(f, n) => store.append(id(&ids, f), &zeros[..n as usize])?,
                Call::ReadAt(f, offset, n, got) => {
                    let read = store.read_at_unseen(id(&ids, f), offset, &mut buf[..n as usize])?;
                    if read != got as usize {
                        return Err(JoinError::Config(format!(
                            "replaying the join's calls: a read at {offset} gave {read} bytes where the recorded run's gave {got}"
                        )));
                    }
                }
                Call::Delete(f) => store.delete(id(&ids, f))?,
                Call::Compute(ns) => store.compute(ns),
                Call::Idle(ns) => store.idle(ns),
                Call::Elapsed => elapsed.push(store.elapsed_ns()),
                Call::WaitUntilNow => {}
                Call::Park => store.park(),
                Call::Resume => store.resume(),
            }
        }
        Ok(Replayed { elapsed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::join::{hash_join, Algorithm, Input, JoinSpec, Relation};
    use crate::store::MemStore;
    use crate::MemoryPool;
    use workloads::tpch::{self, Layout, Table};

    fn table(store: &mut MemStore, t: Table, name: &str, relation: Relation) -> Input {
        let layout = Layout::Fixed128;
        let mut bytes = Vec::new();
        let mut buf = vec![0u8; layout.record_bytes()];
        let mut rows = 0;
        for r in tpch::rows(t, 0.002) {
            r.encode(layout, &mut buf);
            bytes.extend_from_slice(&buf);
            rows += 1;
        }
        Input {
            file: store.add_input(name, &bytes).unwrap(),
            offset_bytes: 0,
            rows,
            layout,
            relation,
        }
    }

    #[test]
    fn a_replay_makes_the_recorded_calls_and_refuses_a_parallel_join() {
        for algorithm in [Algorithm::Grace, Algorithm::Postgres] {
            let spec = JoinSpec {
                algorithm,
                read_buffer_bytes: 16 << 10,
                write_buffer_bytes: 8 << 10,
                fallocate: true,
                partitions: None,
                cpu_ns_per_row: 100,
                concurrent_users: 1,
            };
            let setup = || {
                let mut s = MemStore::default();
                let o = table(&mut s, Table::Orders, "orders", Relation::Orders);
                let l = table(&mut s, Table::Lineitem, "lineitem", Relation::Lineitem);
                (s, o, l)
            };
            let (s, o, l) = setup();
            let mut rec = Recorder::new(s);
            let pool = MemoryPool::new(256 << 10);
            let r = hash_join(&mut rec, &pool, &spec, o, l).unwrap();
            assert!(r.bytes_spilled > 0, "{algorithm:?} spills");
            let recorded_stats = rec.inner().stats();
            let (recording, _) = rec.finish();
            recording
                .check_phases(r.partition_ns, r.join_ns)
                .unwrap_or_else(|e| panic!("{algorithm:?}: {e}"));
            let (mut s2, _, _) = setup();
            recording.replay(&mut s2).unwrap();
            // The same calls: the same files, bytes, reads and deletes.
            assert_eq!(s2.stats(), recorded_stats, "{algorithm:?}");
            assert!(recording.calls.iter().any(|c| matches!(c, Call::Delete(_))));
        }
        // A recording whose join waited for another thread's clock is refused.
        let mut rec = Recorder::new(MemStore::default());
        rec.unreplayable = Some(PARALLEL);
        let (recording, _) = rec.finish();
        assert!(recording.check_phases(0, 0).is_err());
        let err = recording.replay(&mut MemStore::default()).unwrap_err();
        assert!(err.to_string().contains("parallel join"), "{err}");
    }
}
