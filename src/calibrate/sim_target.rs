//! A simulated drive as a probe target, in virtual time: the same probe sequence as on a
//! real drive, deterministic, so calibrate's fit can be checked against the preset it ran on.

use super::target::{OpTime, ProbeOp, ProbeTarget, Stream};
use anyhow::{bail, Context, Result};
use flash::{AnyDevice, Command, Device, Preset};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub struct SimTarget {
    device: AnyDevice,
    name: String,
    region_bytes: u64,
    /// Virtual time: the next batch starts here.
    now_ns: u64,
}

impl SimTarget {
    /// A fresh drive built from `preset`; the probes use its first `region_bytes`.
    pub fn new(preset: &Preset, region_bytes: u64) -> Result<SimTarget> {
        let device = preset
            .build()
            .with_context(|| format!("building preset {}", preset.name))?;
        if region_bytes > device.logical_bytes() {
            bail!(
                "the probed region ({region_bytes} bytes) is larger than the simulated drive ({} bytes)",
                device.logical_bytes()
            );
        }
        Ok(SimTarget {
            device,
            name: preset.name.clone(),
            region_bytes,
            now_ns: 0,
        })
    }

    fn command(op: &ProbeOp) -> Command {
        match *op {
            ProbeOp::Read {
                offset_bytes,
                len_bytes,
            } => Command::read(offset_bytes, len_bytes),
            ProbeOp::Write {
                offset_bytes,
                len_bytes,
            } => Command::write(offset_bytes, len_bytes),
            ProbeOp::Discard {
                offset_bytes,
                len_bytes,
            } => Command::trim(offset_bytes, len_bytes),
            ProbeOp::Flush => Command::flush(),
        }
    }
}

impl ProbeTarget for SimTarget {
    fn describe(&self) -> String {
        format!("simulated drive (preset {})", self.name)
    }

    fn capacity_bytes(&self) -> u64 {
        self.device.logical_bytes()
    }

    fn region_bytes(&self) -> u64 {
        self.region_bytes
    }

    fn discard_kind(&self) -> String {
        "TRIM commands to the simulated drive".into()
    }

    fn discards_are_trims(&self) -> bool {
        true
    }

    /// A closed loop per stream: a slot that frees (its operation completed) issues the
    /// stream's next operation at once. Submissions reach the device in time order, ties
    /// broken by a sequence number, so a batch is a pure function of the drive's state.
    fn run(&mut self, streams: &[Stream]) -> Result<Vec<Vec<OpTime>>> {
        let start = self.now_ns;
        let mut times: Vec<Vec<OpTime>> = streams
            .iter()
            .map(|s| Vec::with_capacity(s.ops.len()))
            .collect();
        let mut heap: BinaryHeap<Reverse<(u64, u64, usize)>> = BinaryHeap::new();
        let mut seq = 0u64;
        for (i, s) in streams.iter().enumerate() {
            for _ in 0..(s.queue_depth.max(1) as usize).min(s.ops.len()) {
                heap.push(Reverse((start + s.start_delay_ns, seq, i)));
                seq += 1;
            }
        }
        let mut end = start;
        while let Some(Reverse((t, _, i))) = heap.pop() {
            let n = times[i].len();
            let Some(op) = streams[i].ops.get(n) else {
                continue;
            };
            let done = self
                .device
                .submit(&Self::command(op), t)
                .with_context(|| format!("simulated {op:?}"))?;
            times[i].push(OpTime {
                submit_ns: t - start,
                complete_ns: done - start,
            });
            end = end.max(done);
            heap.push(Reverse((done, seq, i)));
            seq += 1;
        }
        self.now_ns = end;
        Ok(times)
    }

    fn idle(&mut self, ns: u64) -> Result<()> {
        self.now_ns += ns;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_keep_their_queue_depth_and_order() {
        let p = Preset::load("mx500").unwrap().with_capacity(1 << 30);
        let mut t = SimTarget::new(&p, 64 << 20).unwrap();
        let writes: Vec<ProbeOp> = (0..64)
            .map(|i| ProbeOp::Write {
                offset_bytes: i << 20,
                len_bytes: 1 << 20,
            })
            .collect();
        let qd1 = t.run(&[Stream::new(writes.clone(), 1)]).unwrap();
        // At queue depth 1 each write is issued when the one before completes.
        for w in qd1[0].windows(2) {
            assert_eq!(w[1].submit_ns, w[0].complete_ns);
        }
        let qd8 = t.run(&[Stream::new(writes, 8)]).unwrap();
        assert!(qd8[0][..8].iter().all(|o| o.submit_ns == 0));
        assert!(qd8[0][8].submit_ns > 0);
        let e = SimTarget::new(&p, 2 << 30).err().unwrap().to_string();
        assert!(e.contains("larger than the simulated drive"), "{e}");
    }
}
